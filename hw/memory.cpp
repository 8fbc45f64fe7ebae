#include "hw/memory.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/hbm.hpp"
#include "hw/hbm_burst.hpp"

namespace tpusim {

ChipMemory::ChipMemory(sc_core::sc_module_name name, const MemorySite& site) : sc_module(name), socket("socket") {
  socket.bind(*this);
  // One unit for the whole memory: an access spreads over every channel, and per-channel
  // reports would cost more than the access itself.
  UnitInfo info;
  info.path = fmt::format("chip{}.hbm", site.chip);
  info.kind = UnitKind::Hbm;
  info.chip = site.chip;
  info.label = "hbm";
  info.traced = false;
  reporter_ = Reporter(site.sink, info);
  itemize_ = reporter_.wants_activities();
}

void ChipMemory::report_busy(const UnitRequest& job, const Interval& served, std::uint64_t bytes, Picos busy_ps) {
  if (served.end <= served.start) return;
  busy_until_ps_ = std::max(busy_until_ps_, served.end);
  if (itemize_) {
    reporter_.busy(served, job, bytes, 0, busy_ps);
    return;
  }
  if (job.step >= unreported_.size()) unreported_.resize(job.step + 1);
  unreported_[job.step].busy_ps += busy_ps;
  unreported_[job.step].bytes += bytes;
}

void ChipMemory::flush_reports() {
  for (std::uint32_t step = 0; step < unreported_.size(); ++step)
    if (unreported_[step].busy_ps > 0) reporter_.add_totals(step, unreported_[step].busy_ps, unreported_[step].bytes, busy_until_ps_);
  unreported_.clear();
}

void ChipMemory::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  const UnitRequest& job = job_of(payload);
  const std::uint64_t length = job.bytes ? job.bytes : payload.get_data_length();
  (payload.is_read() ? bytes_read_ : bytes_written_) += length;
  serve(payload, delay);
}

namespace {

struct Entry {
  std::string description;
  MemoryFactory factory;
  std::vector<MemoryModelKey> keys;
};

// The built-in models are registered on first use, so a user's registration (before the
// configuration is read) can add to them or replace one.
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> models = [] {
    std::map<std::string, Entry> m;
    m["calibrated"] = {"HBM at the rates the burst-group DRAM model (hw/hbm_timing) achieves on long streams, gathers at "
                       "the rate of their piece length, plus its first-access time",
                       [](const char* n, const MemorySite& s) -> std::unique_ptr<ChipMemory> {
                         return std::make_unique<Hbm>(n, s, HbmRates::Calibrated);
                       },
                       {}};
    m["datasheet"] = {"HBM at the datasheet bandwidth (hbm.bw_gbps) for every access, with only the on-chip path's "
                      "latency: what the step would be if memory reached its peak",
                      [](const char* n, const MemorySite& s) -> std::unique_ptr<ChipMemory> {
                        return std::make_unique<Hbm>(n, s, HbmRates::Datasheet);
                      },
                      {}};
    m["burst_group"] = {"every request through the burst-group DRAM model (what membench runs): the step's own row hits, "
                        "bank conflicts, refresh and turnarounds, one request after another; slow, for single ops and "
                        "small steps",
                        [](const char* n, const MemorySite& s) -> std::unique_ptr<ChipMemory> {
                          return std::make_unique<BurstGroupHbm>(n, s);
                        },
                        {}};
    return m;
  }();
  return models;
}

}  // namespace

void register_memory_model(const std::string& name, const std::string& description, MemoryFactory factory,
                           std::vector<MemoryModelKey> keys) {
  registry()[name] = Entry{description, std::move(factory), std::move(keys)};
}

const std::vector<MemoryModelKey>& memory_model_keys(const std::string& name) {
  static const std::vector<MemoryModelKey> none;
  const auto it = registry().find(name);
  return it == registry().end() ? none : it->second.keys;
}

double MemorySite::key(const std::string& name) const {
  const auto& keys = hw.hbm.model_keys;
  const auto it = keys.find(name);
  if (it == keys.end())
    throw std::invalid_argument(fmt::format("memory model \"{}\" declared no knob \"{}\"", hw.hbm.model, name));
  return it->second;
}

bool memory_model_exists(const std::string& name) { return registry().count(name) > 0; }

std::vector<std::pair<std::string, std::string>> memory_models() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [name, entry] : registry()) out.emplace_back(name, entry.description);
  return out;
}

std::unique_ptr<ChipMemory> make_chip_memory(const std::string& model, const char* module_name, const MemorySite& site) {
  const auto it = registry().find(model);
  if (it == registry().end()) throw std::invalid_argument(fmt::format("no memory model named \"{}\"", model));
  return it->second.factory(module_name, site);
}

}  // namespace tpusim
