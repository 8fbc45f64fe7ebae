// Inter-chip interconnect: one router per chip and one module per directed link. A transfer is
// a generic payload carrying a UnitRequest (bytes, destination chip); the router forwards it
// over the dimension-ordered route, each link reserving itself cut-through: it starts when the
// head arrives and the link is free, and cannot finish before the tail has left the previous
// link. Links are full-duplex: the two directions between two chips are separate modules.
#pragma once

#include <tlm_utils/simple_initiator_socket.h>

#include <array>
#include <functional>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"
#include "hw/topology.hpp"

namespace tpusim {

// The link and the router serve b_transport themselves (BlockingTarget) and keep what a transfer
// touches last in the object, next to the interface's virtual-base pointers at its end: a 16x16x16
// slice has 4096 routers and 24576 links, so every other line a hop touched was a cache miss.
class IciLink : public sc_core::sc_module, public BlockingTarget {
 public:
  tlm::tlm_target_socket<> in;  // bound to the link itself
  tlm_utils::simple_initiator_socket<IciLink> out;  // to the far-end chip's router

  IciLink(sc_core::sc_module_name name, const IciConfig& config, LinkId id, EventSink* sink,
          UnitInfo info);
  const LinkId& id() const { return id_; }
  std::uint64_t bytes() const { return bytes_; }
  // The far end is not simulated and `out` leads to its representative: what the link carries
  // is readdressed by the symmetry that maps one to the other (hw/symmetry.hpp).
  void deliver_by_symmetry(std::function<std::uint32_t(std::uint32_t dest_chip)> map) { readdress_ = std::move(map); }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;
  void end_of_elaboration() override;

  LinkId id_;
  Reporter reporter_;
  tlm::tlm_blocking_transport_if<>* far_router_ = nullptr;  // `out`'s target, resolved once bound
  double bw_gbps_;
  Picos hop_ps_;
  // Transfers start in order and never before the previous one's end (cut-through, in order),
  // so the end of the last reservation is the link's whole occupancy.
  Picos busy_until_ps_ = 0;
  std::uint64_t bytes_ = 0;
  std::function<std::uint32_t(std::uint32_t)> readdress_;
};

class IciRouter : public sc_core::sc_module, public BlockingTarget {
 public:
  // From this chip's collective unit and the incoming links (any number), bound to the router.
  tlm::tlm_target_socket<32, tlm::tlm_base_protocol_types, 0> in;
  sc_core::sc_vector<tlm_utils::simple_initiator_socket<IciRouter>> out;  // one per outgoing link
  tlm_utils::simple_initiator_socket<IciRouter> local;  // to this chip's collective unit

  IciRouter(sc_core::sc_module_name name, std::uint32_t chip, const Torus& torus,
            std::vector<LinkId> outgoing);

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;
  void end_of_elaboration() override;
  static std::size_t direction(const LinkId& id) { return 2u * id.axis + (id.positive ? 0u : 1u); }

  std::vector<LinkId> outgoing_;
  const Torus& torus_;
  std::uint32_t chip_;
  // The targets of `local` and of the outgoing link by direction (axis, sign), resolved once bound:
  // looking the link up in `outgoing_` and through `out` cost several cache misses per hop.
  tlm::tlm_blocking_transport_if<>* local_target_ = nullptr;
  std::array<tlm::tlm_blocking_transport_if<>*, 6> next_by_direction_{};
};

}  // namespace tpusim
