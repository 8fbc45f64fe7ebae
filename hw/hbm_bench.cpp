#include "hw/hbm_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <queue>
#include <stdexcept>

namespace tpusim {
namespace {

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
        return i % 2 == 0 ? MemRequest{offset, false} : MemRequest{kMembenchArrayStrideBytes + offset, true};
      }
      case MemPattern::Triad: {  // a = b + c: read b, read c, write a
        const std::uint64_t offset = k * (r_.bytes / 3 / r_.requesters) + (i / 3) * b;
        const std::uint64_t which = i % 3;
        if (which == 0) return {kMembenchArrayStrideBytes + offset, false};
        if (which == 1) return {2 * kMembenchArrayStrideBytes + offset, false};
        return {offset, true};
      }
      case MemPattern::Random:
      case MemPattern::RandomWrite:
        return {(random_.next() % (r_.footprint_bytes / b)) * b, r_.pattern == MemPattern::RandomWrite};
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

}  // namespace

// The definition the DRAMsim3 driver uses too.
Picos latency_quantile(std::vector<Picos>& sample, double p) {
  if (sample.empty()) return 0;
  auto index = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sample.size())));
  index = std::clamp<std::size_t>(index, 1, sample.size()) - 1;
  std::nth_element(sample.begin(), sample.begin() + static_cast<std::ptrdiff_t>(index), sample.end());
  return sample[index];
}


MembenchResult run_hbm_bench(const HbmConfig& config, const MembenchRequest& r) {
  HbmMemory memory(config);
  // Every request in flight has a slot: tag = requester * outstanding + slot. Groups wait for
  // room in their channel's queue in one FIFO per channel, in the order they were released, so
  // a full channel holds up only the requests bound for it (a network with a queue per channel).
  // A request completes with its last group; only then does it enter the completion queue.
  struct Slot {
    Picos issued_ps = 0;
    std::uint32_t groups_left = 0;  // not yet scheduled (or acknowledged)
    Picos latest_ps = 0;            // the latest completion among those that are
  };
  std::vector<RequestStream> streams;
  std::vector<std::vector<std::uint32_t>> free_slots(r.requesters);
  std::vector<std::deque<HbmMemory::Routed>> waiting(config.channels);
  for (std::uint32_t k = 0; k < r.requesters; ++k) {
    streams.emplace_back(r, k);
    for (std::uint32_t s = r.outstanding; s-- > 0;) free_slots[k].push_back(s);
  }
  std::vector<Slot> slots(std::size_t{r.requesters} * r.outstanding);
  std::vector<Picos> latencies, completion_times;
  latencies.reserve(r.bytes / r.request_bytes);
  completion_times.reserve(r.bytes / r.request_bytes);
  // The on-chip path's latency is charged on the way back: requests wait for queue room at their
  // channel, not at the requester, so the path's length does not cost bandwidth (as a network
  // with buffers along it would not).
  const Picos path_ps = ns_to_ps(config.latency_ns);
  std::vector<HbmMemory::Routed> routed;
  using Done = std::pair<Picos, std::uint64_t>;
  std::priority_queue<Done, std::vector<Done>, std::greater<Done>> completions;

  auto group_done = [&](std::uint64_t tag, Picos done_ps) {
    Slot& slot = slots[tag];
    slot.latest_ps = std::max(slot.latest_ps, done_ps);
    if (--slot.groups_left == 0) completions.push({slot.latest_ps + path_ps, tag});
  };
  auto hand_over = [&](std::uint32_t channel, Picos now) {
    auto& fifo = waiting[channel];
    while (!fifo.empty() && memory.accepts(fifo.front())) {
      const Picos acknowledged = memory.enqueue(fifo.front(), now);
      if (acknowledged != HbmChannel::kNever) group_done(fifo.front().group.tag, acknowledged);
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
      memory.split(tag, m.address, r.request_bytes, m.write, routed);
      slots[tag] = {now, static_cast<std::uint32_t>(routed.size()), 0};
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
    const Picos next_decision = memory.next_decision_ps();
    if (next_completion == HbmChannel::kNever && next_decision == HbmChannel::kNever) break;
    if (next_completion <= next_decision) {
      // Completions first: the requests they release arrive in time for decisions at this instant.
      const auto [t, tag] = completions.top();
      completions.pop();
      const Slot& slot = slots[tag];
      latencies.push_back(t - slot.issued_ps);
      completion_times.push_back(t);
      last_done = std::max(last_done, t);
      const auto k = static_cast<std::uint32_t>(tag / r.outstanding);
      free_slots[k].push_back(static_cast<std::uint32_t>(tag % r.outstanding));
      issue(k, t);
    } else {
      scheduled.clear();
      memory.run_until(next_decision, scheduled);
      for (const HbmGroupDone& d : scheduled) group_done(d.tag, d.done_ps);
      for (std::uint32_t c : memory.take_freed_channels()) hand_over(c, next_decision);
    }
  }

  MembenchResult result;
  result.last_done_ps = last_done;
  result.latencies_ps = std::move(latencies);
  result.completions_ps = std::move(completion_times);
  result.stats = memory.stats();
  return result;
}

namespace {

std::string config_key(const HbmConfig& config) {
  const HbmTimingConfig& t = config.timing;
  return fmt::format("{} {} {} {} {} {} {} {} {} {} {} | {} {} {} {} {} {} {} {} | {} {} {} {} {} {} {} {}",
                     config.capacity_bytes, config.bw_gbps, config.channels, config.channel_width_bits,
                     config.burst_length, config.bank_groups, config.banks_per_group, config.row_bytes,
                     config.address_mapping, config.queue_depth, config.bank_queue_depth, t.trcd_ns, t.trp_ns,
                     t.tras_ns, t.tcl_ns, t.tcwl_ns, t.tccd_l_ns, t.trrd_s_ns, t.trrd_l_ns, t.tfaw_ns, t.twtr_s_ns,
                     t.twtr_l_ns, t.trtw_ns, t.twr_ns, t.trtp_ns, t.trfc_ns, t.trefi_ns);
}

// The DRAM alone, writes timed to their data: the SystemC HBM adds the path latency itself.
HbmConfig dram_only(const HbmConfig& config) {
  HbmConfig c = config;
  c.latency_ns = 0;
  c.posted_writes = false;
  return c;
}

// The steady-state fraction of the peak a bench run achieved: the rate from the completion of a
// quarter of its requests to a whole number of refresh intervals later (every channel refreshes
// at once, so such a window holds its fair share of refreshes however long it is), which leaves
// the start-up and the last requests' tail outside.
double steady_fraction_of_peak(const HbmConfig& c, const MembenchRequest& r) {
  const MembenchResult run = run_hbm_bench(c, r);
  const std::vector<Picos>& done = run.completions_ps;
  const std::size_t first = done.size() / 4;
  std::size_t last = done.size() * 3 / 4;
  const Picos refresh_ps = ns_to_ps(c.timing.trefi_ns);
  const Picos periods = (done[last] - done[first]) / std::max<Picos>(1, refresh_ps);
  if (periods > 0) {
    const Picos end = done[first] + periods * refresh_ps;
    last = static_cast<std::size_t>(std::lower_bound(done.begin(), done.end(), end) - done.begin());
    last = std::min(last, done.size() - 1);
  }
  const double bytes = static_cast<double>(last - first) * static_cast<double>(r.request_bytes);
  const double peak_ps = bytes * 1000.0 / c.bw_gbps;
  return std::min(1.0, peak_ps / std::max(1.0, static_cast<double>(done[last] - done[first])));
}

}  // namespace

const HbmStreamProfile& hbm_stream_profile(const HbmConfig& config) {
  static std::map<std::string, HbmStreamProfile> cache;
  const std::string key = config_key(config);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const HbmConfig c = dram_only(config);
  // Eight streams with deep queues, as a core's DMA engines keep them.
  MembenchRequest r;
  r.requesters = 8;
  r.outstanding = 4;
  r.request_bytes = std::uint64_t{c.channels} * c.row_bytes;  // one row on every channel
  r.bytes = 64 * r.requesters * r.request_bytes;
  HbmStreamProfile p;
  r.pattern = MemPattern::StreamRead;
  p.read_efficiency = steady_fraction_of_peak(c, r);
  r.pattern = MemPattern::StreamWrite;
  p.write_efficiency = steady_fraction_of_peak(c, r);
  r = MembenchRequest{};
  r.requesters = 1;
  r.outstanding = 1;
  r.request_bytes = r.bytes = c.burst_bytes();
  p.first_access_ps = run_hbm_bench(c, r).last_done_ps;
  return cache.emplace(key, p).first->second;
}

double hbm_gather_efficiency(const HbmConfig& config, std::uint64_t run_bytes, bool write) {
  const HbmStreamProfile& stream = hbm_stream_profile(config);
  std::uint64_t run = config.burst_bytes();
  while (run < run_bytes && run < config.row_bytes) run *= 2;
  if (run >= config.row_bytes) return write ? stream.write_efficiency : stream.read_efficiency;
  static std::map<std::string, double> cache;
  const std::string key = fmt::format("{} | {} {}", config_key(config), run, write);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  const HbmConfig c = dram_only(config);
  // Deep enough to keep every bank of every channel busy: the memory's limit, not the requesters'.
  MembenchRequest r;
  r.pattern = write ? MemPattern::RandomWrite : MemPattern::Random;
  r.requesters = 8;
  r.outstanding = static_cast<std::uint32_t>(std::max<std::uint64_t>(64, 8 * std::uint64_t{c.channels} * c.row_bytes / run / 8));
  r.request_bytes = run;
  r.footprint_bytes = std::min<std::uint64_t>(c.capacity_bytes, 1ull << 30) / run * run;
  r.bytes = std::max<std::uint64_t>(16 * r.requesters * r.outstanding * run, 4ull << 20) / (r.requesters * run) * (r.requesters * run);
  const double efficiency = steady_fraction_of_peak(c, r);
  return cache.emplace(key, efficiency).first->second;
}

}  // namespace tpusim
