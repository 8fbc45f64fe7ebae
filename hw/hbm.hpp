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
#include "hw/memory.hpp"
#include "hw/sc_support.hpp"

namespace tpusim {

// The rates an access runs at: the burst-group model's (the `calibrated` memory model), or the
// datasheet's for every access with no first-access time (`datasheet`, an upper bound).
enum class HbmRates { Calibrated, Datasheet };

// What an access touches is declared last, next to the interface's virtual-base pointers at the
// end of the object (see hw/ici.hpp).
class Hbm : public ChipMemory {
 public:
  // Where each core has its own HBM (`chip.hbm_per_core`), the channels form one partition per
  // core, each serving one slice of the addresses; otherwise an access spreads over every channel.
  Hbm(sc_core::sc_module_name name, const MemorySite& site, HbmRates rates = HbmRates::Calibrated);

 private:
  void serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;

  HbmConfig config_;
  // Per-channel rate of gathers and scatters by (piece length, write): the burst-group model
  // is asked once per kind, not per transfer.
  std::map<std::pair<std::uint64_t, bool>, double> gather_bw_gbps_;
  std::uint32_t channel_count_ = 1;  // per partition
  std::uint64_t partition_bytes_ = 1;
  double read_bw_gbps_ = 0;  // per channel, sustained
  double write_bw_gbps_ = 0;
  Picos latency_ps_ = 0;
  std::vector<Occupancy> partitions_;  // per partition: every channel's bookings, identical
  std::uint64_t memo_bytes_ = 0;  // the last conversion of a channel's share to time
  double memo_bw_gbps_ = 0;
  Picos memo_ps_ = 0;
  HbmRates rates_;
};

}  // namespace tpusim
