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
  // In a run that folds symmetric chips (hw/symmetry.hpp), the routers that take what the link
  // carries, in place of `out`'s target: the far end's, when it is simulated, and those of the
  // simulated chips whose links from chips not simulated this link stands in for, each reading
  // it readdressed by the symmetry between them, and travelling the other way round its ring
  // where that symmetry reverses the link's axis. None: what the link carries goes nowhere.
  struct Delivery {
    tlm::tlm_blocking_transport_if<>* router = nullptr;
    std::function<std::uint32_t(std::uint32_t dest_chip)> readdress;  // empty: as addressed
    bool reverses_ring = false;
  };
  void deliver_to(std::vector<Delivery> deliveries) {
    folded_ = true;
    deliveries_ = std::move(deliveries);
  }

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
  bool folded_ = false;
  std::vector<Delivery> deliveries_;
  RingDelivery reversed_;  // what a piece's delivery reads as where its ring is reversed
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

// The slice's ICI sends, put on the links in a fixed order. A send reserves its whole route at
// once (cut-through), so two sends whose routes share a link take it in the order they are made.
// Sends made at one instant by different hosts' tasks are made in the order the SystemC kernel
// runs the hosts' wake queues, which is no rule of the model and differs between a full and a
// folded run (hw/symmetry.hpp): a link that is down sends its ring's pieces the long way round,
// over the links of other hosts' chips. So sends are posted here and made one delta cycle later,
// those of each delta cycle in the order of the sending chip (and of its own sends).
class IciDispatch : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(IciDispatch);
  explicit IciDispatch(sc_core::sc_module_name name);
  // `job` as the sender would hand it to `router` now; its delivery is kept by value.
  void post(std::uint32_t chip, tlm::tlm_blocking_transport_if<>& router, const UnitRequest& job);

 private:
  struct Send {
    std::uint64_t delta;  // the delta cycle it was posted in
    std::uint32_t chip;
    tlm::tlm_blocking_transport_if<>* router;
    UnitRequest job;
    RingDelivery delivery;
  };
  void dispatch();  // method process: the sends posted in earlier delta cycles

  std::vector<Send> posted_;
  std::vector<Send> due_;
  sc_core::sc_event posted_event_;
  Request request_;
};

}  // namespace tpusim
