#include "hw/ici.hpp"

#include <algorithm>
#include <tuple>

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
  if (!folded_) {
    far_router_->b_transport(payload, delay);
    return;
  }
  // Each delivery reads the piece as it left this link.
  const UnitRequest left = job;
  for (const Delivery& d : deliveries_) {
    job = left;
    if (d.readdress) job.dest_chip = d.readdress(left.dest_chip);
    if (d.reverses_ring && left.delivery != nullptr) {
      reversed_ = *left.delivery;
      reversed_.dir = 1 - left.delivery->dir;
      job.delivery = &reversed_;
    }
    sc_core::sc_time each = delay;
    d.router->b_transport(payload, each);
  }
  job = left;
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

IciDispatch::IciDispatch(sc_core::sc_module_name name) : sc_module(name) {
  SC_METHOD(dispatch);
  sensitive << posted_event_;
  dont_initialize();
}

void IciDispatch::post(std::uint32_t chip, tlm::tlm_blocking_transport_if<>& router, const UnitRequest& job) {
  posted_.push_back({sc_core::sc_delta_count(), chip, &router, job, job.delivery ? *job.delivery : RingDelivery{}});
  posted_event_.notify(sc_core::SC_ZERO_TIME);
}

void IciDispatch::dispatch() {
  // Only whole delta cycles: what a process posts in this one, before or after this method ran,
  // goes in the next.
  const std::uint64_t now_delta = sc_core::sc_delta_count();
  due_.clear();
  std::size_t kept = 0;
  for (Send& s : posted_) {
    if (s.delta < now_delta) due_.push_back(std::move(s));
    else posted_[kept++] = std::move(s);
  }
  posted_.resize(kept);
  if (!posted_.empty()) posted_event_.notify(sc_core::SC_ZERO_TIME);
  std::stable_sort(due_.begin(), due_.end(), [](const Send& a, const Send& b) {
    return std::tie(a.delta, a.chip) < std::tie(b.delta, b.chip);
  });
  for (Send& s : due_) {
    Request& r = request_.reset();
    r.set_access(tlm::TLM_WRITE_COMMAND, 0, s.job.bytes);
    const bool delivers = s.job.delivery != nullptr;
    r.job() = s.job;
    r.job().delivery = delivers ? &s.delivery : nullptr;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    s.router->b_transport(r.payload(), delay);
  }
}

}  // namespace tpusim
