#include "hw/ici.hpp"

#include <algorithm>

namespace tpusim {

IciLink::IciLink(sc_core::sc_module_name name, const IciConfig& config, LinkId id, EventSink* sink,
                 UnitInfo info)
    : sc_module(name), in("in"), out("out"), id_(id), reporter_(sink, std::move(info)), bw_gbps_(config.payload_bw_gbps()),
      hop_ps_(ns_to_ps(config.hop_latency_ns)) {
  in.bind(*this);
}

void IciLink::end_of_elaboration() { far_router_ = out.operator->(); }

void IciLink::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  const Picos serialize = transfer_ps(job.bytes, bw_gbps_);
  // Cut-through: the link starts when the head arrives and it is free, and cannot finish before
  // the tail has left the previous link. Transfers keep their order on a link. A head never
  // arrives before now (a transfer starts at its sender's now and only moves later), so the slot
  // is never moved to now and always comes after every earlier one.
  Interval slot;
  slot.start = std::max(job.head_ps, busy_until_ps_);
  slot.end = std::max(slot.start + serialize, job.tail_ps);
  sc_assert(slot.start >= now_ps());
  check_time_limit(slot.start, slot.end - slot.start);
  if (slot.end > slot.start) busy_until_ps_ = slot.end;
  reporter_.busy(slot, job, job.bytes);
  if (job.first_link_unit == ~0u) {
    job.first_link_unit = reporter_.unit();
    job.first_link_start_ps = slot.start;
  }
  bytes_ += job.bytes;
  job.head_ps = slot.start + hop_ps_;
  job.tail_ps = slot.end + hop_ps_;
  if (readdress_) job.dest_chip = readdress_(job.dest_chip);
  far_router_->b_transport(payload, delay);
}

IciRouter::IciRouter(sc_core::sc_module_name name, std::uint32_t chip, const Torus& torus,
                     std::vector<LinkId> outgoing)
    : sc_module(name), in("in"), out("out", outgoing.size()), local("local"), outgoing_(std::move(outgoing)),
      torus_(torus), chip_(chip) {
  in.bind(*this);
}

void IciRouter::end_of_elaboration() {
  local_target_ = local.operator->();
  for (std::size_t i = 0; i < outgoing_.size(); ++i) next_by_direction_[direction(outgoing_[i])] = out[i].operator->();
}

void IciRouter::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  if (job.dest_chip == chip_) {
    if (job.delivery) local_target_->b_transport(payload, delay);  // the collective unit takes the piece
    delay = ps_time(job.tail_ps - now_ps());
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  tlm::tlm_blocking_transport_if<>* next = next_by_direction_[direction(torus_.first_hop(chip_, job.dest_chip))];
  sc_assert(next != nullptr);
  next->b_transport(payload, delay);
}

}  // namespace tpusim
