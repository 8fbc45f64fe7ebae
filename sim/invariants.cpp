#include "sim/invariants.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "hw/collective.hpp"
#include "hw/matmul_tiling.hpp"
#include "sim/errors.hpp"

namespace tpusim {
namespace {

// Violations of one kind beyond this many are counted, not listed: one broken module breaks the
// same check on every chip.
constexpr std::size_t kListedPerCheck = 3;

class Violations {
 public:
  void add(const std::string& check, std::string what) {
    auto& list = by_check_[check];
    if (list.empty()) order_.push_back(check);
    list.push_back(std::move(what));
  }
  bool empty() const { return order_.empty(); }
  std::string text() const {
    std::string out;
    for (const auto& check : order_) {
      const auto& list = by_check_.at(check);
      for (std::size_t i = 0; i < std::min(list.size(), kListedPerCheck); ++i) out += "\n  " + check + ": " + list[i];
      if (list.size() > kListedPerCheck) out += fmt::format("\n  {}: and {} more", check, list.size() - kListedPerCheck);
    }
    return out;
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::vector<std::string>> by_check_;
};

bool close(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max({1.0, std::abs(a), std::abs(b)}); }

// HBM bytes one step of the program asks of a core's DMA engines.
std::uint64_t program_dma_bytes(const Program& program, const HwConfig& hw) {
  std::uint64_t bytes = 0;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::Vector) bytes += TensorCore::vector_read_bytes(op.vector, hw) + op.vector.hbm_write_bytes;
    if (op.kind == OpKind::HostTransfer) bytes += op.host_transfer.bytes;
    if (op.kind != OpKind::Matmul) continue;
    for (const MatmulBlock& b :
         tile_matmul(op.matmul, hw.core.mxu, TensorCore::matmul_vmem_budget_bytes(hw)).blocks)
      bytes += b.load_bytes[0] + b.load_bytes[1] + b.store_bytes;
  }
  return bytes;
}

// "0-3, 6, 9-10"
std::string chip_list(std::vector<std::uint32_t> chips) {
  std::sort(chips.begin(), chips.end());
  std::string out;
  for (std::size_t i = 0; i < chips.size();) {
    std::size_t j = i;
    while (j + 1 < chips.size() && chips[j + 1] == chips[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + (j == i ? std::to_string(chips[i]) : fmt::format("{}-{}", chips[i], chips[j]));
    i = j + 1;
  }
  return out;
}

}  // namespace

nlohmann::ordered_json check_invariants(const InvariantInputs& in) {
  const System& system = *in.system;
  const Program& program = *in.program;
  const HwConfig& hw = *in.hw;
  const Recorder& recorder = *in.recorder;
  const std::uint64_t steps = program.steps;
  Violations v;

  const std::uint64_t dma_per_step = program_dma_bytes(program, hw);
  double program_flops = 0;
  std::uint64_t collective_ops = 0;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::Matmul) program_flops += op.model_flops;
    if (op.kind == OpKind::Collective) ++collective_ops;
  }
  const double model_flops = in.analytic_flops_per_core_step >= 0 ? in.analytic_flops_per_core_step : program_flops;
  if (!close(program_flops, model_flops))
    v.add("MXU FLOPs", fmt::format("the program's matmuls count {:.6g} FLOPs per core and step, the model {:.6g}",
                                   program_flops, model_flops));

  // Each simulated chip stands for its class of chips in the slice (hw/symmetry.hpp): the whole
  // slice's figures, and the totals checked against each other, count it as many times.
  std::uint64_t dma_total = 0, hbm_total = 0, completed = 0, dcn_sent = 0, link_total = 0, sent = 0, sent_link = 0, arrived = 0;
  CountedSum useful_flops, executed_flops;
  for (const Chip& chip : system.chips()) {
    const std::uint64_t stands_for = system.simulated().stands_for(system.torus(), chip.id());
    std::uint64_t into_hbm = 0;
    for (const TensorCore& core : chip.cores) {
      const std::string path = core.name();
      const Dma& dma = core.dma;
      if (dma.asked_bytes() != steps * dma_per_step)
        v.add("DMA bytes", fmt::format("{}: the program asked for {} bytes over {} steps, the DMA engines were asked for {}",
                                       path, steps * dma_per_step, steps, dma.asked_bytes()));
      if (dma.moved_bytes() != dma.asked_bytes())
        v.add("DMA bytes", fmt::format("{}: the DMA engines were asked for {} bytes and moved {}", path, dma.asked_bytes(),
                                       dma.moved_bytes()));
      into_hbm += dma.moved_bytes();
      double core_flops = 0;
      for (const Mxu& mxu : core.mxus()) {
        core_flops += mxu.flops();
        executed_flops.add(mxu.executed_flops(), stands_for);
      }
      useful_flops.add(core_flops, stands_for);
      if (!close(core_flops, static_cast<double>(steps) * model_flops))
        v.add("MXU FLOPs", fmt::format("{}: the MXUs were handed {:.6g} useful FLOPs over {} steps, the model counts {:.6g}",
                                       path, core_flops, steps, static_cast<double>(steps) * model_flops));
    }
    dma_total += into_hbm * stands_for;
    const CollectiveUnit::Counts& c = chip.collective.counts();
    into_hbm += c.hbm_bytes;
    const std::uint64_t served = chip.memory().bytes_read() + chip.memory().bytes_written();
    hbm_total += served * stands_for;
    if (served != into_hbm)
      v.add("HBM bytes", fmt::format("{}: HBM served {} bytes, its requesters (DMA engines, collective unit) sent {}",
                                     chip.memory().name(), served, into_hbm));
    // What the program's collectives ask this chip to send: counted from their plans, not from
    // what its peers did, so that a fault every chip shares (none of them taking part) is seen.
    std::uint64_t asked = 0, asked_dcn = 0;
    for (const Op& op : program.ops) {
      if (op.kind != OpKind::Collective) continue;
      const CollectiveSchedule schedule = plan_collective(system.torus(), chip.id(), op.collective);
      asked += schedule_sent_bytes(schedule);
      asked_dcn += schedule_dcn_sent_bytes(schedule);
    }
    if (c.sent_bytes != steps * asked)
      v.add("ICI bytes", fmt::format("{}: the program's collectives ask it to send {} bytes over {} steps, it sent {}",
                                     chip.collective.name(), steps * asked, steps, c.sent_bytes));
    if (c.dcn_sent_bytes != steps * asked_dcn)
      v.add("DCN bytes", fmt::format("{}: the program's collectives ask it to send {} bytes to other slices over {} steps, it sent {}",
                                     chip.collective.name(), steps * asked_dcn, steps, c.dcn_sent_bytes));
    dcn_sent += c.dcn_sent_bytes * stands_for;
    sent += c.sent_bytes * stands_for;
    sent_link += c.sent_link_bytes * stands_for;
    arrived += c.arrived_bytes * stands_for;
    completed += c.completed * stands_for;
    if (c.completed != steps * collective_ops)
      v.add("collectives", fmt::format("{}: completed {} collectives, the program has {} over {} steps",
                                       chip.collective.name(), c.completed, steps * collective_ops, steps));
    if (!chip.collective.pending().empty() || chip.collective.undelivered_steps() != 0)
      v.add("collectives", fmt::format("{}: {} collectives still running and {} ring steps with pieces not taken in",
                                       chip.collective.name(), chip.collective.pending().size(),
                                       chip.collective.undelivered_steps()));
  }
  for (const Chip& chip : system.chips())
    for (const IciLink& link : chip.links) link_total += link.bytes() * system.simulated().stands_for(system.torus(), chip.id());
  if (link_total != sent_link)
    v.add("ICI bytes", fmt::format("the links carried {} bytes, the collective units sent {} bytes over routes totalling {} "
                                   "link-bytes", link_total, sent, sent_link));
  if (arrived != sent)
    v.add("ICI bytes", fmt::format("the collective units sent {} bytes and {} arrived", sent, arrived));

  // Busy time never exceeds the time the unit existed: the run, or its last booking if that
  // ends later (a collective's write-back may finish after the last core).
  double busiest_fraction = 0;
  std::string busiest;
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    Picos busy = 0;
    for (std::uint32_t s = 0; s < steps; ++s) busy += recorder.totals(u, s).busy_ps;
    const Picos span = std::max(in.end_ps, recorder.last_end_ps(u));
    const double fraction = span > 0 ? static_cast<double>(busy) / static_cast<double>(span) : 0.0;
    // The busiest hardware unit is the figure worth reporting; op and step tracks are busy
    // whenever anything runs.
    if (traits_of(recorder.units()[u].kind).serves_work && fraction > busiest_fraction) {
      busiest_fraction = fraction;
      busiest = recorder.units()[u].path;
    }
    if (busy > span)
      v.add("busy time", fmt::format("{}: busy {} ps in {} ps of simulated time ({:.2f}%)", recorder.units()[u].path, busy,
                                     span, 100 * fraction));
  }

  if (!v.empty()) throw SimError("an end-of-run check failed (a bug in tpusim or in a user module):" + v.text());
  const double cores = static_cast<double>(hw.core_count());
  return {{"dma_bytes", dma_total},
          {"hbm_bytes", hbm_total},
          {"ici_link_bytes", link_total},
          {"dcn_bytes", dcn_sent},
          {"mxu_flops_model", static_cast<double>(steps) * model_flops * cores},
          {"mxu_flops_useful", useful_flops.total()},
          {"mxu_flops_executed", executed_flops.total()},
          {"busiest_unit", busiest},
          {"busiest_unit_fraction", busiest_fraction},
          {"collectives_completed", completed}};
}

std::string describe_stuck(const System& system) {
  const Torus& torus = system.torus();
  auto chip_state = [&](std::uint32_t c) {
    const Chip* chip = system.chip_by_id(c);
    if (!chip) chip = system.chip_by_id(system.simulated().representative(torus, c));
    for (const TensorCore& core : chip->cores)
      if (!core.finished()) return fmt::format("waiting at {}", core.progress());
    return std::string("finished");
  };
  // Chips grouped by what they do: "chips 2, 5 (finished); chips 3-4 (waiting at step 0, op 7 "x")".
  auto grouped = [&](const std::vector<std::uint32_t>& chips) {
    std::map<std::string, std::vector<std::uint32_t>> by_state;
    for (auto c : chips) by_state[chip_state(c)].push_back(c);
    std::string out;
    for (const auto& [state, members] : by_state)
      out += fmt::format("{}chip{} {} ({})", out.empty() ? "" : "; ", members.size() > 1 ? "s" : "", chip_list(members), state);
    return out;
  };

  struct Instance {
    CollectiveUnit::Pending what;
    std::vector<std::uint32_t> joined;
  };
  std::map<std::uint64_t, Instance> running;
  for (const Chip& chip : system.chips())
    for (const auto& p : chip.collective.pending()) {
      auto& instance = running[p.instance];
      instance.what = p;
      instance.joined.push_back(chip.id());
    }
  std::string out;
  std::size_t shown = 0;
  for (const auto& [id, instance] : running) {
    if (++shown > kListedPerCheck) {
      out += fmt::format("\n  and {} more collectives", running.size() - kListedPerCheck);
      break;
    }
    // The group: chips that differ from a member only along the group's axes, within its block.
    const Coords anchor = torus.coords(instance.joined.front());
    const CollectiveSpec& spec = *instance.what.spec;
    std::vector<std::uint32_t> missing;
    std::uint32_t group = 0;
    for (std::uint32_t c = 0; c < torus.chip_count(); ++c) {
      const Coords at = torus.coords(c);
      bool member = true;
      for (std::uint32_t a = 0; a < torus.axes(); ++a) {
        const std::uint32_t block = (spec.group_axes >> a & 1u) ? group_extent(torus, spec.group_span, a) : 1;
        if (at[a] / block != anchor[a] / block) member = false;
      }
      if (!member || !system.simulated().simulates(torus, c)) continue;  // a representative stands for the rest
      ++group;
      if (!std::binary_search(instance.joined.begin(), instance.joined.end(), c)) missing.push_back(c);
    }
    out += fmt::format("\n  collective \"{}\" (step {}) never completed: chip{} {} of its group of {} joined and wait",
                       instance.what.label ? *instance.what.label : "?", instance.what.step,
                       instance.joined.size() > 1 ? "s" : "", chip_list(instance.joined), group);
    out += missing.empty() ? " for pieces that never came" : "; never joined: " + grouped(missing);
  }
  if (running.empty()) {
    std::vector<std::uint32_t> unfinished;
    for (const Chip& chip : system.chips())
      if (chip_state(chip.id()) != "finished") unfinished.push_back(chip.id());
    out += "\n  " + grouped(unfinished);
  }
  return out;
}

}  // namespace tpusim
