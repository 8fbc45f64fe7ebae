#include "hw/hbm.hpp"

#include <fmt/format.h>

#include "hw/hbm_bench.hpp"

namespace tpusim {

Hbm::Hbm(sc_core::sc_module_name name, const MemorySite& site, HbmRates rates)
    : ChipMemory(name, site),
      config_(site.hw.hbm_of(site.chip)),
      rates_(rates) {
  // Where each core has its own HBM (v2, v3), the channels split into one partition per core.
  const std::uint32_t partitions = site.hw.chip.hbm_per_core ? site.hw.chip.cores : 1;
  channel_count_ = std::max<std::uint32_t>(1, config_.channels / partitions);
  partition_bytes_ = std::max<std::uint64_t>(1, config_.capacity_bytes / partitions);
  partitions_.resize(partitions);
  if (rates == HbmRates::Datasheet) {
    read_bw_gbps_ = write_bw_gbps_ = config_.bw_gbps / config_.channels;
    latency_ps_ = ns_to_ps(config_.latency_ns);
  } else {
    const HbmStreamProfile& profile = hbm_stream_profile(config_);
    read_bw_gbps_ = config_.bw_gbps / config_.channels * profile.read_efficiency;
    write_bw_gbps_ = config_.bw_gbps / config_.channels * profile.write_efficiency;
    latency_ps_ = ns_to_ps(config_.latency_ns) + profile.first_access_ps;
  }
}

void Hbm::serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  // job.bytes carries lengths beyond the generic payload's 32 bits.
  const std::uint64_t length = job.bytes ? job.bytes : payload.get_data_length();
  const Picos now = now_ps();
  const Picos earliest = now + delay.value();
  // A gather or scatter of small pieces opens a row for each: the burst-group model's rate for
  // pieces of that size.
  double bw_gbps = payload.is_read() ? read_bw_gbps_ : write_bw_gbps_;
  if (job.run_bytes > 0 && rates_ == HbmRates::Calibrated) {
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
  job.served = whole;
  // The unit is the whole HBM: a partition's booking keeps its share of the channels busy.
  if (length > 0) report_busy(job, whole, length, std::max<Picos>(1, (whole.end - whole.start) / partitions_.size()));
  delay = ps_time(whole.end + latency_ps_ - now);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace tpusim
