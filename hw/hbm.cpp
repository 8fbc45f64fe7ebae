#include "hw/hbm.hpp"

#include <fmt/format.h>

#include "hw/hbm_bench.hpp"

namespace tpusim {

Hbm::Hbm(sc_core::sc_module_name name, const HbmConfig& config, std::uint32_t partitions, std::uint32_t chip,
         EventSink* sink)
    : sc_module(name),
      socket("socket"),
      config_(config),
      channel_count_(std::max<std::uint32_t>(1, config.channels / partitions)),
      partition_bytes_(std::max<std::uint64_t>(1, config.capacity_bytes / partitions)),
      partitions_(partitions) {
  const HbmStreamProfile& profile = hbm_stream_profile(config);
  read_bw_gbps_ = config.bw_gbps / config.channels * profile.read_efficiency;
  write_bw_gbps_ = config.bw_gbps / config.channels * profile.write_efficiency;
  latency_ps_ = ns_to_ps(config.latency_ns) + profile.first_access_ps;
  socket.bind(*this);
  // One unit for all channels: an access spreads over every channel, and per-channel reports
  // would cost more than the access itself.
  UnitInfo info;
  info.path = fmt::format("chip{}.hbm", chip);
  info.kind = UnitKind::Hbm;
  info.chip = chip;
  info.label = "hbm";
  info.traced = false;
  reporter_ = Reporter(sink, info);
  itemize_ = reporter_.wants_activities();
}

void Hbm::flush_reports() {
  Picos busy_until = 0;
  for (const Occupancy& p : partitions_) busy_until = std::max(busy_until, p.busy_until_ps());
  for (std::uint32_t step = 0; step < unreported_.size(); ++step)
    if (unreported_[step].busy_ps > 0) reporter_.add_totals(step, unreported_[step].busy_ps, unreported_[step].bytes, busy_until);
  unreported_.clear();
}

void Hbm::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  // job.bytes carries lengths beyond the generic payload's 32 bits.
  const std::uint64_t length = job.bytes ? job.bytes : payload.get_data_length();
  const Picos now = now_ps();
  const Picos earliest = now + delay.value();
  // A gather or scatter of small pieces opens a row for each: the burst-group model's rate for
  // pieces of that size.
  double bw_gbps = payload.is_read() ? read_bw_gbps_ : write_bw_gbps_;
  if (job.run_bytes > 0) {
    const auto kind = std::make_pair(job.run_bytes, !payload.is_read());
    auto it = gather_bw_gbps_.find(kind);
    if (it == gather_bw_gbps_.end())
      it = gather_bw_gbps_
               .emplace(kind, config_.bw_gbps / config_.channels * hbm_gather_efficiency(config_, kind.first, kind.second))
               .first;
    bw_gbps = it->second;
  }
  Interval whole{earliest, earliest};
  if (length > 0) {
    // DMA chunks repeat one length at one rate: convert once (transfer_ps rounds in long double).
    const std::uint64_t channel_bytes = ceil_div<std::uint64_t>(length, channel_count_);
    if (channel_bytes != memo_bytes_ || bw_gbps != memo_bw_gbps_) {
      memo_bytes_ = channel_bytes;
      memo_bw_gbps_ = bw_gbps;
      memo_ps_ = transfer_ps(channel_bytes, bw_gbps);
    }
    const std::size_t partition = std::min<std::size_t>(payload.get_address() / partition_bytes_, partitions_.size() - 1);
    whole = partitions_[partition].reserve(now, earliest, memo_ps_);
  }
  (payload.is_read() ? bytes_read_ : bytes_written_) += length;
  job.served = whole;
  if (length > 0 && whole.end > whole.start) {
    // The unit is the whole HBM: a partition's booking keeps its share of the channels busy.
    const Picos busy_ps = std::max<Picos>(1, (whole.end - whole.start) / partitions_.size());
    if (itemize_) {
      reporter_.busy(whole, job, length, 0, busy_ps);
    } else {
      if (job.step >= unreported_.size()) unreported_.resize(job.step + 1);
      unreported_[job.step].busy_ps += busy_ps;
      unreported_[job.step].bytes += length;
    }
  }
  delay = ps_time(whole.end + latency_ps_ - now);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace tpusim
