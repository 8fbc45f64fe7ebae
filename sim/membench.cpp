#include "sim/membench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <functional>
#include <queue>
#include <stdexcept>
#include <vector>

#include "hw/hbm_timing.hpp"
#include "sim/errors.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::uint64_t kArrayStrideBytes = 1ull << 30;  // copy and triad place their arrays 1 GiB apart

// The standard splitmix64, so that another simulator can draw the same random addresses.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

struct MemRequest {
  std::uint64_t address;
  bool write;
};

// The ordered request stream of one requester (docs/validation/hbm.md defines each pattern).
class RequestStream {
 public:
  RequestStream(const MembenchRequest& r, std::uint32_t requester)
      : r_(r), requester_(requester), random_{r.seed + requester}, count_(r.bytes / r.requesters / r.request_bytes) {}

  bool done() const { return issued_ == count_; }
  std::uint64_t count() const { return count_; }

  MemRequest next() {
    const std::uint64_t i = issued_++;
    const std::uint64_t b = r_.request_bytes;
    const std::uint64_t k = requester_;
    switch (r_.pattern) {
      case MemPattern::StreamRead:
      case MemPattern::StreamWrite:
        return {k * (r_.bytes / r_.requesters) + i * b, r_.pattern == MemPattern::StreamWrite};
      case MemPattern::Copy: {
        const std::uint64_t offset = k * (r_.bytes / 2 / r_.requesters) + (i / 2) * b;
        return i % 2 == 0 ? MemRequest{offset, false} : MemRequest{kArrayStrideBytes + offset, true};
      }
      case MemPattern::Triad: {  // a = b + c: read b, read c, write a
        const std::uint64_t offset = k * (r_.bytes / 3 / r_.requesters) + (i / 3) * b;
        const std::uint64_t which = i % 3;
        if (which == 0) return {kArrayStrideBytes + offset, false};
        if (which == 1) return {2 * kArrayStrideBytes + offset, false};
        return {offset, true};
      }
      case MemPattern::Random:
        return {(random_.next() % (r_.footprint_bytes / b)) * b, false};
    }
    throw std::logic_error("unknown pattern");
  }

 private:
  const MembenchRequest& r_;
  std::uint32_t requester_;
  SplitMix64 random_;
  std::uint64_t count_;
  std::uint64_t issued_ = 0;
};

void validate(const HwConfig& hw, const MembenchRequest& r) {
  auto fail = [](const std::string& what) { throw InputError("membench: " + what); };
  if (r.request_bytes == 0 || r.requesters == 0 || r.outstanding == 0 || r.bytes == 0)
    fail("--bytes, --request-bytes, --requesters and --outstanding must be positive");
  const std::uint64_t arrays = r.pattern == MemPattern::Copy ? 2 : r.pattern == MemPattern::Triad ? 3 : 1;
  const std::uint64_t unit = arrays * r.requesters * r.request_bytes;
  if (r.bytes % unit != 0)
    fail(fmt::format("--bytes {} must be a multiple of {} ({} array(s) x {} requesters x {}-byte requests)", r.bytes,
                     unit, arrays, r.requesters, r.request_bytes));
  std::uint64_t highest = r.bytes;
  if (arrays > 1) {
    if (r.bytes / arrays > kArrayStrideBytes)
      fail(fmt::format("{} places its arrays 1 GiB apart: --bytes may be at most {} GiB", mem_pattern_name(r.pattern),
                       arrays));
    highest = (arrays - 1) * kArrayStrideBytes + r.bytes / arrays;
  }
  if (r.pattern == MemPattern::Random) {
    if (r.footprint_bytes < r.request_bytes) fail("--footprint-bytes is smaller than one request");
    highest = r.footprint_bytes;
  }
  if (highest > hw.hbm.capacity_bytes)
    fail(fmt::format("the pattern reaches address {} but the HBM holds {} bytes", highest, hw.hbm.capacity_bytes));
}

// p-quantile as the value at index ceil(p*n)-1 of the sorted sample (the definition the
// DRAMsim3 driver uses too).
Picos quantile(std::vector<Picos>& sample, double p) {
  if (sample.empty()) return 0;
  auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sample.size())));
  index = std::clamp<std::size_t>(index, 1, sample.size()) - 1;
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(index), sample.end());
  return sample[index];
}

}  // namespace

MemPattern parse_mem_pattern(const std::string& name) {
  for (MemPattern p : {MemPattern::StreamRead, MemPattern::StreamWrite, MemPattern::Copy, MemPattern::Triad,
                       MemPattern::Random})
    if (name == mem_pattern_name(p)) return p;
  throw InputError(fmt::format("--pattern: unknown pattern \"{}\" (stream-read, stream-write, copy, triad, random)", name));
}

const char* mem_pattern_name(MemPattern pattern) {
  switch (pattern) {
    case MemPattern::StreamRead: return "stream-read";
    case MemPattern::StreamWrite: return "stream-write";
    case MemPattern::Copy: return "copy";
    case MemPattern::Triad: return "triad";
    case MemPattern::Random: return "random";
  }
  return "?";
}

ojson run_membench(const HwConfig& hw, const MembenchRequest& r) {
  validate(hw, r);
  std::unique_ptr<HbmMemory> memory;
  try {
    memory = std::make_unique<HbmMemory>(hw.hbm);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("hw.hbm.address_mapping: {}", e.what()));
  }

  // Every request in flight has a slot: tag = requester * outstanding + slot. Groups wait for
  // room in their channel's queue in one FIFO per channel, in the order they were released, so
  // a full channel holds up only the requests bound for it (a network with a queue per channel).
  struct Slot {
    Picos issued_ps = 0;
    std::uint32_t groups_left = 0;
  };
  std::vector<RequestStream> streams;
  std::vector<std::vector<std::uint32_t>> free_slots(r.requesters);
  std::vector<std::deque<HbmMemory::Routed>> waiting(hw.hbm.channels);
  for (std::uint32_t k = 0; k < r.requesters; ++k) {
    streams.emplace_back(r, k);
    for (std::uint32_t s = r.outstanding; s-- > 0;) free_slots[k].push_back(s);
  }
  std::vector<Slot> slots(std::size_t{r.requesters} * r.outstanding);
  std::vector<Picos> latencies;
  latencies.reserve(r.bytes / r.request_bytes);
  // The on-chip path's latency is charged on the way back: requests wait for queue room at their
  // channel, not at the requester, so the path's length does not cost bandwidth (as a network
  // with buffers along it would not).
  const Picos path_ps = ns_to_ps(hw.hbm.latency_ns);
  std::vector<HbmMemory::Routed> routed;
  using Done = std::pair<Picos, std::uint64_t>;
  std::priority_queue<Done, std::vector<Done>, std::greater<Done>> completions;

  auto hand_over = [&](std::uint32_t channel, Picos now) {
    auto& fifo = waiting[channel];
    while (!fifo.empty() && memory->accepts(fifo.front())) {
      const Picos acknowledged = memory->enqueue(fifo.front(), now);
      if (acknowledged != HbmChannel::kNever) completions.push({acknowledged + path_ps, fifo.front().group.tag});
      fifo.pop_front();
    }
  };
  auto issue = [&](std::uint32_t k, Picos now) {
    while (!streams[k].done() && !free_slots[k].empty()) {
      const std::uint32_t slot = free_slots[k].back();
      free_slots[k].pop_back();
      const MemRequest m = streams[k].next();
      const std::uint64_t tag = std::uint64_t{k} * r.outstanding + slot;
      routed.clear();
      memory->split(tag, m.address, r.request_bytes, m.write, routed);
      slots[tag] = {now, static_cast<std::uint32_t>(routed.size())};
      for (const auto& g : routed) {
        waiting[g.channel].push_back(g);
        hand_over(g.channel, now);
      }
    }
  };
  for (std::uint32_t k = 0; k < r.requesters; ++k) issue(k, 0);

  std::vector<HbmGroupDone> scheduled;
  Picos last_done = 0;
  while (true) {
    const Picos next_completion = completions.empty() ? HbmChannel::kNever : completions.top().first;
    const Picos next_decision = memory->next_decision_ps();
    if (next_completion == HbmChannel::kNever && next_decision == HbmChannel::kNever) break;
    if (next_completion <= next_decision) {
      // Completions first: the requests they release arrive in time for decisions at this instant.
      const auto [t, tag] = completions.top();
      completions.pop();
      Slot& slot = slots[tag];
      if (--slot.groups_left > 0) continue;
      latencies.push_back(t - slot.issued_ps);
      last_done = std::max(last_done, t);
      const auto k = static_cast<std::uint32_t>(tag / r.outstanding);
      free_slots[k].push_back(static_cast<std::uint32_t>(tag % r.outstanding));
      issue(k, t);
    } else {
      scheduled.clear();
      memory->run_until(next_decision, scheduled);
      for (const HbmGroupDone& d : scheduled) completions.push({d.done_ps + path_ps, d.tag});
      for (std::uint32_t c : memory->take_freed_channels()) hand_over(c, next_decision);
    }
  }

  const HbmStats stats = memory->stats();
  const double seconds = ps_to_s(last_done);
  double latency_sum_ps = 0;
  for (Picos l : latencies) latency_sum_ps += static_cast<double>(l);
  const double avg_ns = latencies.empty() ? 0 : latency_sum_ps / static_cast<double>(latencies.size()) / 1000.0;
  const double bw_gbps = seconds > 0 ? static_cast<double>(r.bytes) / seconds / 1e9 : 0;
  ojson out;
  out["hw"] = hw.name;
  out["pattern"] = mem_pattern_name(r.pattern);
  out["bytes"] = r.bytes;
  out["request_bytes"] = r.request_bytes;
  out["requesters"] = r.requesters;
  out["outstanding"] = r.outstanding;
  if (r.pattern == MemPattern::Random) out["footprint_bytes"] = r.footprint_bytes;
  out["requests"] = latencies.size();
  out["time_s"] = seconds;
  out["bw_gbps"] = bw_gbps;
  out["peak_bw_gbps"] = hw.hbm.bw_gbps;
  out["fraction_of_peak"] = bw_gbps / hw.hbm.bw_gbps;
  out["latency_avg_ns"] = avg_ns;
  out["latency_p50_ns"] = static_cast<double>(quantile(latencies, 0.50)) / 1000.0;
  out["latency_p99_ns"] = static_cast<double>(quantile(latencies, 0.99)) / 1000.0;
  out["row_hit_rate"] = stats.row_hit_rate();
  const auto columns = stats.total.read_bursts + stats.total.write_bursts;
  out["row_conflict_rate"] = columns ? static_cast<double>(stats.total.row_conflicts) / static_cast<double>(columns) : 0.0;
  out["read_bytes"] = stats.total.read_bursts * memory->address_map().burst_bytes();
  out["write_bytes"] = stats.total.write_bursts * memory->address_map().burst_bytes();
  out["refreshes"] = stats.total.refreshes;
  // How evenly the requests spread: each channel's data-bus busy time over the run.
  const double run_ps = static_cast<double>(std::max<Picos>(1, last_done));
  out["channel_busy_min"] = static_cast<double>(stats.idlest_channel_ps) / run_ps;
  out["channel_busy_avg"] = static_cast<double>(stats.total.bus_busy_ps) / hw.hbm.channels / run_ps;
  out["channel_busy_max"] = static_cast<double>(stats.busiest_channel_ps) / run_ps;
  return out;
}

std::string format_membench(const ojson& j) {
  std::string s = fmt::format("{} on {}: {} bytes in {}-byte requests, {} requester(s) x {} in flight\n",
                              j["pattern"].get<std::string>(), j["hw"].get<std::string>(), j["bytes"].get<std::uint64_t>(),
                              j["request_bytes"].get<std::uint64_t>(), j["requesters"].get<std::uint32_t>(),
                              j["outstanding"].get<std::uint32_t>());
  s += fmt::format("  bandwidth   {:.1f} GB/s ({:.1f}% of the {:.0f} GB/s peak)\n", j["bw_gbps"].get<double>(),
                   100 * j["fraction_of_peak"].get<double>(), j["peak_bw_gbps"].get<double>());
  s += fmt::format("  latency     {:.1f} ns average, {:.1f} ns p50, {:.1f} ns p99\n", j["latency_avg_ns"].get<double>(),
                   j["latency_p50_ns"].get<double>(), j["latency_p99_ns"].get<double>());
  s += fmt::format("  row buffer  {:.1f}% hits, {:.1f}% conflicts; {} refreshes\n", 100 * j["row_hit_rate"].get<double>(),
                   100 * j["row_conflict_rate"].get<double>(), j["refreshes"].get<std::uint64_t>());
  s += fmt::format("  channels    data bus busy {:.1f}% on average ({:.1f}% to {:.1f}%)\n",
                   100 * j["channel_busy_avg"].get<double>(), 100 * j["channel_busy_min"].get<double>(),
                   100 * j["channel_busy_max"].get<double>());
  s += fmt::format("  simulated   {:.3f} us\n", j["time_s"].get<double>() * 1e6);
  return s;
}

}  // namespace tpusim
