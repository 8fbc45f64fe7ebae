// Per-chip high-bandwidth memory shared by the chip's cores (and the host's infeed): channels
// behind an address interleaving, each a resource with its own occupancy, and an access
// latency. Requests are TLM-2.0 generic payloads (read/write, address, length; no data).
//
// First version: bandwidth, interleaving, contention between requesters and a fixed latency.
// Banks, row buffers and refresh come with the memory-path issue.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>

#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"

namespace tpusim {

class Hbm : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Hbm> socket;

  Hbm(sc_core::sc_module_name name, const HbmConfig& config, std::uint32_t chip, EventSink* sink);

  std::uint64_t bytes_read() const { return bytes_read_; }
  std::uint64_t bytes_written() const { return bytes_written_; }

  // Bytes of [address, address + length) that fall on each channel.
  static std::vector<std::uint64_t> bytes_per_channel(std::uint64_t address, std::uint64_t length,
                                                      std::uint32_t channels,
                                                      std::uint64_t interleave_bytes);
  static void bytes_per_channel(std::uint64_t address, std::uint64_t length, std::uint64_t interleave_bytes,
                                std::vector<std::uint64_t>& bytes);  // bytes.size() channels, overwritten

 private:
  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  HbmConfig config_;
  double channel_bw_gbps_;
  std::vector<Occupancy> channels_;
  std::vector<std::uint64_t> scratch_bytes_;  // per channel, reused by every access
  std::uint64_t interleave_bytes_;
  Reporter reporter_;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace tpusim
