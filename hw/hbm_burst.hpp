// The `burst_group` memory model: every request runs through the burst-group DRAM model
// (hw/hbm_timing.hpp, what `tpusim membench` runs) instead of at its measured stream rates, so
// row hits, bank conflicts, refresh and read/write turnarounds of the step's own access pattern
// show in its time. It is the calibrated model's source, run per access: about as exact as
// tpusim's HBM gets, and slow (every 1 KiB group of a transfer is a scheduling decision), so it
// suits single ops and small steps.
//
// A request is answered in the call (hw/memory.hpp): the DRAM model runs forward until the
// request's last group is served. Requests therefore queue behind one another in the order they
// arrive, each starting when the one before it has been scheduled, rather than interleaving
// with requests that another requester issues while it runs. The chip's channels are one pool:
// where each core has its own HBM (v2, v3) the two cores' requests still spread over all of them.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "hw/hbm_timing.hpp"
#include "hw/memory.hpp"

namespace tpusim {

class BurstGroupHbm : public ChipMemory {
 public:
  BurstGroupHbm(sc_core::sc_module_name name, const MemorySite& site);

 private:
  void serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;
  // Moves the groups waiting for `channel` into its queues while they have room.
  void hand_over(std::uint32_t channel, Picos now_ps);
  void group_done(Picos done_ps);

  HbmConfig config_;
  HbmMemory dram_;
  Picos path_ps_;  // the on-chip path, both ways, charged on the way back
  std::vector<std::deque<HbmMemory::Routed>> waiting_;  // per channel: groups its queues had no room for
  std::vector<HbmMemory::Routed> routed_;
  std::vector<HbmGroupDone> done_;
  Picos clock_ps_ = 0;  // how far the DRAM model has run
  Picos busy_until_ps_ = 0;  // the end of the last request served
  std::uint64_t next_tag_ = 0;
  // The request being served.
  std::size_t groups_left_ = 0;
  Picos last_done_ps_ = 0;
};

}  // namespace tpusim
