// Inter-chip interconnect: one router per chip and one module per directed link. A transfer is
// a generic payload carrying a UnitRequest (bytes, destination chip); the router forwards it
// over the dimension-ordered route, each link reserving itself cut-through: it starts when the
// head arrives and the link is free, and cannot finish before the tail has left the previous
// link. Links are full-duplex: the two directions between two chips are separate modules.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"
#include "hw/topology.hpp"

namespace tpusim {

class IciLink : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<IciLink> in;
  tlm_utils::simple_initiator_socket<IciLink> out;  // to the far-end chip's router

  IciLink(sc_core::sc_module_name name, const IciConfig& config, LinkId id, EventSink* sink,
          UnitInfo info);
  const LinkId& id() const { return id_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  void end_of_elaboration() override;

  // What a transfer touches, together: a 16x16x16 slice has 24576 links, so each is a cache miss,
  // and the kernel's module and socket state around them would be several more.
  tlm::tlm_fw_transport_if<>* far_router_ = nullptr;  // `out`'s target, resolved once bound
  double bw_gbps_;
  Picos hop_ps_;
  // Transfers start in order and never before the previous one's end (cut-through, in order),
  // so the end of the last reservation is the link's whole occupancy.
  Picos busy_until_ps_ = 0;
  std::uint64_t bytes_ = 0;
  Reporter reporter_;
  LinkId id_;
};

class IciRouter : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<IciRouter> in;  // local cores and incoming links
  sc_core::sc_vector<tlm_utils::simple_initiator_socket<IciRouter>> out;  // one per outgoing link
  tlm_utils::simple_initiator_socket<IciRouter> local;  // to this chip's collective unit

  IciRouter(sc_core::sc_module_name name, std::uint32_t chip, const Torus& torus,
            std::vector<LinkId> outgoing);

 private:
  void b_transport(int from, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  void end_of_elaboration() override;
  static std::size_t direction(const LinkId& id) { return 2u * id.axis + (id.positive ? 0u : 1u); }

  std::uint32_t chip_;
  const Torus& torus_;
  // The outgoing link's target by direction (axis, sign), resolved once bound: looking the link up
  // in `outgoing_` and through `out` costs several cache misses per hop on a large slice.
  std::array<tlm::tlm_fw_transport_if<>*, 6> next_by_direction_{};
  std::vector<LinkId> outgoing_;
};

}  // namespace tpusim
