#include "hw/hbm_burst.hpp"

#include <algorithm>

#include "hw/units.hpp"

namespace tpusim {

BurstGroupHbm::BurstGroupHbm(sc_core::sc_module_name name, const MemorySite& site)
    : ChipMemory(name, site),
      config_(site.hw.hbm_of(site.chip)),
      dram_(config_),
      path_ps_(ns_to_ps(config_.latency_ns)),
      waiting_(config_.channels) {}

void BurstGroupHbm::group_done(Picos done_ps) {
  last_done_ps_ = std::max(last_done_ps_, done_ps);
  --groups_left_;
}

void BurstGroupHbm::hand_over(std::uint32_t channel, Picos now_ps) {
  auto& fifo = waiting_[channel];
  while (!fifo.empty() && dram_.accepts(fifo.front())) {
    // A posted write is acknowledged as its channel's queue takes it.
    const Picos acknowledged = dram_.enqueue(fifo.front(), now_ps);
    if (acknowledged != HbmChannel::kNever) group_done(acknowledged);
    fifo.pop_front();
  }
}

void BurstGroupHbm::serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  const std::uint64_t length = job.bytes ? job.bytes : payload.get_data_length();
  const Picos now = now_ps();
  // The DRAM model's time only moves forward: a request that arrives while it is still busy
  // with earlier ones starts when they have been scheduled.
  const Picos start = std::max<Picos>(now + delay.value(), clock_ps_);
  if (length == 0) {
    job.served = {start, start};
    delay = ps_time(start + path_ps_ - now);
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const std::uint64_t tag = next_tag_++;
  routed_.clear();
  const bool write = !payload.is_read();
  const std::uint64_t capacity = std::max<std::uint64_t>(1, config_.capacity_bytes);
  if (job.run_bytes > 0 && job.run_bytes < length) {
    // A gather or scatter: pieces of `run_bytes` at scattered places (the rows an embedding
    // lookup touches), spread by a fixed odd multiple of the row so that consecutive pieces
    // land in other rows and banks, the same every run.
    const std::uint64_t stride = 7919 * std::uint64_t{config_.row_bytes} + job.run_bytes;
    std::uint64_t address = payload.get_address() % capacity;
    for (std::uint64_t offset = 0; offset < length; offset += job.run_bytes) {
      const std::uint64_t piece = std::min(job.run_bytes, length - offset);
      if (address + piece > capacity) address = 0;
      dram_.split(tag, address, piece, write, routed_);
      address = (address + stride) % capacity;
    }
  } else {
    // A transfer past the top of the memory wraps to its bottom.
    std::uint64_t address = payload.get_address() % capacity;
    for (std::uint64_t left = length; left > 0; address = 0) {
      const std::uint64_t part = std::min(left, capacity - address);
      dram_.split(tag, address, part, write, routed_);
      left -= part;
    }
  }
  groups_left_ = routed_.size();
  last_done_ps_ = start;
  for (const auto& group : routed_) {
    waiting_[group.channel].push_back(group);
    hand_over(group.channel, start);
  }
  clock_ps_ = start;
  while (groups_left_ > 0) {
    const Picos next = dram_.next_decision_ps();
    if (next == HbmChannel::kNever) break;  // nothing scheduled and nothing can be: cannot happen with groups left
    done_.clear();
    dram_.run_until(next, done_);
    clock_ps_ = std::max(clock_ps_, next);
    for (const HbmGroupDone& d : done_)
      if (d.tag == tag) group_done(d.done_ps);
    for (std::uint32_t channel : dram_.take_freed_channels()) hand_over(channel, clock_ps_);
  }
  // Writes all taken by their queues at once are acknowledged at `start`: their bytes still
  // count, over a picosecond (their draining shows in the requests that queue behind them).
  job.served = {start, std::max<Picos>(last_done_ps_, start + 1)};
  // Requests overlap in the DRAM (posted writes drain under the next reads): count each
  // picosecond of busy time once.
  const Picos busy_from = std::max(start, busy_until_ps_);
  report_busy(job, job.served, length, std::max<Picos>(1, job.served.end > busy_from ? job.served.end - busy_from : 0));
  busy_until_ps_ = std::max(busy_until_ps_, job.served.end);
  delay = ps_time(last_done_ps_ + path_ps_ - now);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace tpusim
