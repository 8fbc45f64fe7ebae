#include "hw/hbm.hpp"

#include <fmt/format.h>

#include "hw/hbm_timing.hpp"

namespace tpusim {

Hbm::Hbm(sc_core::sc_module_name name, const HbmConfig& config, std::uint32_t chip, EventSink* sink)
    : sc_module(name),
      socket("socket"),
      config_(config),
      channel_bw_gbps_(config.bw_gbps / config.channels),
      channels_(config.channels),
      scratch_bytes_(config.channels),
      interleave_bytes_(HbmAddressMap(config).run_granule_bytes()) {
  socket.register_b_transport(this, &Hbm::b_transport);
  // One unit for all channels: an access spreads over every channel, and per-channel reports
  // would cost more than the access itself. Its busy time is the channels' average.
  UnitInfo info;
  info.path = fmt::format("chip{}.hbm", chip);
  info.kind = UnitKind::Hbm;
  info.chip = chip;
  info.label = "hbm";
  info.traced = false;
  reporter_ = Reporter(sink, info);
}

std::vector<std::uint64_t> Hbm::bytes_per_channel(std::uint64_t address, std::uint64_t length,
                                                  std::uint32_t channels,
                                                  std::uint64_t interleave_bytes) {
  std::vector<std::uint64_t> bytes(channels, 0);
  bytes_per_channel(address, length, interleave_bytes, bytes);
  return bytes;
}

void Hbm::bytes_per_channel(std::uint64_t address, std::uint64_t length, std::uint64_t interleave_bytes,
                            std::vector<std::uint64_t>& bytes) {
  const auto channels = static_cast<std::uint32_t>(bytes.size());
  std::fill(bytes.begin(), bytes.end(), 0);
  const std::uint64_t stripe = interleave_bytes * channels;
  // Whole stripes touch every channel equally; only the ragged ends need walking.
  std::uint64_t pos = address;
  const std::uint64_t end = address + length;
  while (pos < end && pos % stripe != 0) {
    const std::uint64_t block_end = std::min(end, (pos / interleave_bytes + 1) * interleave_bytes);
    bytes[(pos / interleave_bytes) % channels] += block_end - pos;
    pos = block_end;
  }
  const std::uint64_t whole = (end - pos) / stripe;
  for (auto& b : bytes) b += whole * interleave_bytes;
  pos += whole * stripe;
  while (pos < end) {
    const std::uint64_t block_end = std::min(end, (pos / interleave_bytes + 1) * interleave_bytes);
    bytes[(pos / interleave_bytes) % channels] += block_end - pos;
    pos = block_end;
  }
}

void Hbm::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  // job.bytes carries lengths beyond the generic payload's 32 bits.
  const std::uint64_t length = job.bytes ? job.bytes : payload.get_data_length();
  std::vector<std::uint64_t>& per_channel = scratch_bytes_;
  bytes_per_channel(payload.get_address(), length, interleave_bytes_, per_channel);
  const Picos now = now_ps();
  const Picos earliest = now + delay.value();
  Picos done = earliest;
  Interval whole{~Picos{0}, 0};
  Picos channel_busy_ps = 0;
  std::uint64_t last_bytes = 0;
  Picos last_ps = 0;
  for (std::uint32_t c = 0; c < config_.channels; ++c) {
    if (per_channel[c] == 0) continue;
    if (per_channel[c] != last_bytes) {  // most channels carry the same share: convert it once
      last_bytes = per_channel[c];
      last_ps = transfer_ps(last_bytes, channel_bw_gbps_);
    }
    const Interval slot = channels_[c].reserve(now, earliest, last_ps);
    channel_busy_ps += slot.end - slot.start;
    done = std::max(done, slot.end);
    whole.start = std::min(whole.start, slot.start);
    whole.end = std::max(whole.end, slot.end);
  }
  (payload.is_read() ? bytes_read_ : bytes_written_) += length;
  job.served = whole;
  if (length > 0) reporter_.busy(whole, job, length, 0, std::max<Picos>(1, channel_busy_ps / config_.channels));
  delay = ps_time(done + ns_to_ps(config_.latency_ns) - now);
  payload.set_response_status(tlm::TLM_OK_RESPONSE);
}

}  // namespace tpusim
