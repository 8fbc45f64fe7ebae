// Per-chip high-bandwidth memory shared by the chip's cores (and the host's infeed). Requests
// are TLM-2.0 generic payloads (read/write, address, length; no data).
//
// A training step moves gigabytes per chip in transfers of kilobytes to megabytes, so this
// module does not schedule burst groups: it books each channel's share of a transfer at the
// rate the burst-group model (hw/hbm_timing) achieves on a long stream, and adds the model's
// first-access time to the on-chip path latency. `tpusim membench` runs the burst-group model
// itself.
//
// Where each core has its own share of the channels (HbmConfig via `partitions`), an address
// belongs to the partition whose slice of the capacity holds it, and spreads over its channels.
//
// Every transfer is taken to spread evenly over the channels, so the channels' bookings are
// identical and one Occupancy stands for all of them. Transfers smaller than one stripe over
// the channels really touch fewer channels for longer; they are about 1% of the transfers and
// 0.4% of the bytes of a BERT-large step, and their latency dwarfs the difference.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"

namespace tpusim {

// Serves b_transport itself (BlockingTarget); what an access touches is declared last, next to
// the interface's virtual-base pointers at the end of the object (see hw/ici.hpp).
class Hbm : public sc_core::sc_module, public BlockingTarget {
 public:
  tlm::tlm_target_socket<32, tlm::tlm_base_protocol_types, 0> socket;  // any number of initiators

  // `partitions`: independent equal shares of the channels, each serving one slice of the
  // addresses (1: every access spreads over every channel).
  Hbm(sc_core::sc_module_name name, const HbmConfig& config, std::uint32_t partitions, std::uint32_t chip, EventSink* sink);

  std::uint64_t bytes_read() const { return bytes_read_; }
  std::uint64_t bytes_written() const { return bytes_written_; }
  // Hands the per-step sums of unreported requests to the sink; call when the simulation ends.
  void flush_reports();

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;

  HbmConfig config_;
  // Per-channel rate of gathers and scatters by (piece length, write): the burst-group model
  // is asked once per kind, not per transfer.
  std::map<std::pair<std::uint64_t, bool>, double> gather_bw_gbps_;
  Reporter reporter_;
  // A step issues tens of millions of chunk requests over a large slice: unless the sink wants
  // them one by one (a trace's HBM counter), they are summed per step here and reported once.
  bool itemize_ = true;
  struct StepSums {
    Picos busy_ps = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<StepSums> unreported_;  // by step
  std::uint32_t channel_count_;  // per partition
  std::uint64_t partition_bytes_;
  double read_bw_gbps_;   // per channel, sustained
  double write_bw_gbps_;
  Picos latency_ps_;
  std::vector<Occupancy> partitions_;  // per partition: every channel's bookings, identical
  std::uint64_t memo_bytes_ = 0;  // the last conversion of a channel's share to time
  double memo_bw_gbps_ = 0;
  Picos memo_ps_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_written_ = 0;
};

}  // namespace tpusim
