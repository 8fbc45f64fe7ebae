#include "hw/ici.hpp"

#include <algorithm>

namespace tpusim {

IciLink::IciLink(sc_core::sc_module_name name, const IciConfig& config, LinkId id, EventSink* sink,
                 UnitInfo info)
    : sc_module(name), in("in"), out("out"), config_(config), id_(id), reporter_(sink, std::move(info)) {
  in.register_b_transport(this, &IciLink::b_transport);
}

void IciLink::b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  const Picos serialize = transfer_ps(job.bytes, config_.link_bw_gbps);
  // Cut-through: the link starts when the head arrives and it is free, and cannot finish before
  // the tail has left the previous link. Transfers keep their order on a link.
  Interval slot;
  slot.start = std::max(job.head_ps, occupancy_.busy_until_ps());
  slot.end = std::max(slot.start + serialize, job.tail_ps);
  occupancy_.reserve(now_ps(), slot.start, slot.end - slot.start);
  reporter_.busy(slot, job, job.bytes);
  if (job.first_link_unit == ~0u) {
    job.first_link_unit = reporter_.unit();
    job.first_link_start_ps = slot.start;
  }
  bytes_ += job.bytes;
  const Picos hop = ns_to_ps(config_.hop_latency_ns);
  job.head_ps = slot.start + hop;
  job.tail_ps = slot.end + hop;
  out->b_transport(payload, delay);
}

IciRouter::IciRouter(sc_core::sc_module_name name, std::uint32_t chip, const Torus& torus,
                     std::vector<LinkId> outgoing)
    : sc_module(name), in("in"), out("out", outgoing.size()), local("local"), chip_(chip), torus_(torus),
      outgoing_(std::move(outgoing)) {
  in.register_b_transport(this, &IciRouter::b_transport);
}

void IciRouter::b_transport(int, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
  UnitRequest& job = job_of(payload);
  if (job.dest_chip == chip_) {
    if (job.delivery) local->b_transport(payload, delay);  // the collective unit takes the piece
    delay = ps_time(job.tail_ps - now_ps());
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
    return;
  }
  const LinkId next = torus_.first_hop(chip_, job.dest_chip);
  const auto it = std::find(outgoing_.begin(), outgoing_.end(), next);
  sc_assert(it != outgoing_.end());
  out[static_cast<std::size_t>(it - outgoing_.begin())]->b_transport(payload, delay);
}

}  // namespace tpusim
