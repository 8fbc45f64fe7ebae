// A chip's collective unit: runs this chip's share of a collective (hw/collective.hpp's ring
// passes) over the ICI router, and over its DCN port to the other slices, with the reduction on
// core 0's vector unit and the operands streamed from and to the chip's HBM, so collectives
// compete with compute for both.
//
// The chip's cores reach it through `socket` (a UnitRequest with `collective` set). It waits until
// every core of the chip has arrived, combines their contributions through HBM (two cores of a
// v2/v3 chip are two replicas; the two halves of a megacore chip each hold half a batch's
// gradients), runs the chip-level schedule, and releases them all.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <array>
#include <map>
#include <vector>
#include <memory>

#include "hw/collective.hpp"
#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"
#include "hw/wake_queue.hpp"

namespace tpusim {

// Ring pieces arrive through `arrivals`, bound to the unit itself (BlockingTarget: its b_transport
// is the arrival); what an arrival touches is declared last, next to the interface's virtual-base
// pointers at the end of the object (see hw/ici.hpp).
class CollectiveUnit : public sc_core::sc_module, public BlockingTarget {
 public:
  SC_HAS_PROCESS(CollectiveUnit);
  tlm_utils::multi_passthrough_target_socket<CollectiveUnit> socket;  // from the chip's cores
  tlm_utils::simple_initiator_socket<CollectiveUnit> ici_socket;
  tlm_utils::simple_initiator_socket<CollectiveUnit> hbm_socket;
  tlm_utils::simple_initiator_socket<CollectiveUnit> vpu_socket;
  tlm::tlm_target_socket<> arrivals;  // ring pieces from the router

  CollectiveUnit(sc_core::sc_module_name name, std::uint32_t chip, const HwConfig& hw, const Torus& torus,
                 WakeQueue& wakes, std::uint32_t chip_slot_in_host, EventSink* sink);

  // Runs this chip's part of one collective instance; returns when it is done here.
  void run(const CollectiveSpec& spec, std::uint64_t instance, const std::string* label, std::uint32_t step);

  // What the unit did, for the end-of-run checks: instances it completed, bytes it asked of
  // HBM, bytes it put on the ICI (and times the hops each travels), bytes that arrived for it.
  struct Counts {
    std::uint64_t completed = 0;
    std::uint64_t hbm_bytes = 0;
    std::uint64_t sent_bytes = 0;
    std::uint64_t sent_link_bytes = 0;
    std::uint64_t arrived_bytes = 0;
    std::uint64_t dcn_sent_bytes = 0;
  };
  const Counts& counts() const { return counts_; }
  // Instances this chip has joined and not completed, and ring steps whose pieces are not all
  // taken in, for the stuck-simulation report and the end-of-run checks.
  struct Pending {
    std::uint64_t instance = 0;
    const CollectiveSpec* spec = nullptr;
    const std::string* label = nullptr;
    std::uint32_t step = 0;
  };
  std::vector<Pending> pending() const;
  std::size_t undelivered_steps() const { return inbox_.size(); }

 private:
  // An instance this chip's cores have begun to join, until it completes here.
  struct Joining {
    Pending what;
    std::uint32_t arrived = 0;
    bool done = false;
    sc_core::sc_event released;
  };
  struct Context {
    const CollectiveSpec& spec;
    std::uint64_t instance;
    const std::string* label;
    std::uint32_t step;
  };

  // What has arrived of one ring step in one direction, and when it will have been taken in.
  struct StepKey {
    std::uint64_t instance;
    std::uint32_t part, pass, dir, step;
    bool operator==(const StepKey& o) const {
      return instance == o.instance && part == o.part && pass == o.pass && dir == o.dir && step == o.step;
    }
  };
  // A step forwards what the step before brought as it arrives: from its first byte's arrival
  // (head_ps), each piece no sooner than that piece was taken in (piece_ready_ps, in order).
  struct Inbox {
    StepKey key;
    Picos head_ps = ~Picos{0};
    std::vector<Picos> piece_ready_ps;
  };
  // Work on this chip's HBM and vector unit that ring steps ask for: a piece that arrived (added,
  // or stored when gathered), the chip's own shard read for a step, a step's result written back.
  // It is booked in a canonical order (booked_in_order) rather than in the order the processes
  // asking for it happen to run: several ask at the same instant (the parts of an all-axes
  // collective, the neighbours sending to this chip), and the order the SystemC kernel runs
  // them in differs from chip to chip, which made symmetric chips drift apart.
  // DcnSend: a piece onto the DCN port, and (its mirror image) the peer's piece arriving.
  enum class WorkKind : std::uint8_t { Arrival, OwnShardRead, WriteBack, DcnSend };
  struct RingWork {
    StepKey key;
    WorkKind kind = WorkKind::Arrival;
    Picos at = 0;
    Picos head = 0;  // Arrival: when its first byte arrived (`at`: its last)
    std::uint64_t bytes = 0;
    bool reduce = true;
    std::uint32_t element_bytes = 4;
    std::uint32_t pieces = 1;  // Arrival: how many pieces the step sends in this direction
    const std::string* label = nullptr;
    std::uint32_t step = 0;
    Picos* ready_ps = nullptr;  // OwnShardRead: where to put when the read is done
  };
  static constexpr std::uint32_t kMaxParts = 3;  // torus_all_axes runs one part per axis
  static constexpr std::uint32_t kOwnShard = 2;  // StepKey::dir of work on the chip's own shard
  static constexpr Picos kPending = ~Picos{0};

  void end_of_elaboration() override;
  // A core arrives with a collective to run.
  void from_core(int core, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  // A piece arrives (at the tail time it carries): book its addition or its HBM write for then.
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;
  void run_pass(const Context& ctx, const RingPass& pass, std::uint32_t part, std::uint32_t index);
  void run_dcn_pass(const Context& ctx, const RingPass& pass, std::uint32_t part, std::uint32_t index);
  // Waits until every piece of `key`'s step is in; what the step brought, in order.
  Inbox take_step(const StepKey& key, std::uint64_t pieces);
  // Books a piece arriving at `tail` (its first byte at `head`): added, or written to HBM.
  void take_in(const RingWork& work, Picos head, Picos tail, std::uint32_t& completed_parts);
  void post(const RingWork& work);
  // A method process: books the work posted in the delta cycle before, sorted by what it is for.
  void book_in_order();
  // Reserve HBM and the vector unit for `at` (not before now) and return when they will be done.
  Picos hbm_access(tlm::tlm_command cmd, std::uint64_t bytes, const std::string* label, std::uint32_t step,
                   Picos at = 0);
  Picos vpu_add(std::uint64_t elements, Picos at, const std::string* label, std::uint32_t step);
  // Reserves the route for a ring piece whose last byte is there at `available_ps` (its first:
  // now); the receiving unit books its own work on arrival.
  void send(std::uint32_t to_chip, std::uint32_t hops, std::uint64_t bytes, Picos available_ps, const RingDelivery& delivery,
            const std::string* label, std::uint32_t step);
  Inbox& inbox(const StepKey& key);

  const HwConfig& hw_;
  const Torus& torus_;
  WakeQueue& wakes_;
  std::map<std::uint64_t, std::shared_ptr<Joining>> joining_;
  Counts counts_;
  sc_core::sc_event step_arrived_[kMaxParts];
  // The tracks of the instances running at once (a trace track must not hold overlapping
  // slices): lane 0's are registered at elaboration, more the first time that many overlap.
  // Reporters inline rather than in a vector: every arrival reports its flow, and a vector's
  // elements would be one more cache miss per piece on a large slice.
  struct Lane {
    std::array<Reporter, kMaxParts> parts;
    std::uint64_t instance = 0;
    bool busy = false;
  };
  void add_lane();  // registers its tracks
  std::uint32_t take_lane(std::uint64_t instance);
  EventSink* sink_;
  std::vector<Lane> lanes_;
  std::uint32_t part_count_ = 0;
  std::uint32_t chip_;
  std::uint32_t chip_slot_in_host_;
  // The rank (hw/wake_queue.hpp) of the chip-level part of a collective: 0 the cores' combine.
  std::uint64_t wake_rank(std::uint32_t role) const {
    return WakeQueue::rank(chip_slot_in_host_, 0, WakeQueue::kCollectiveRoles + role);
  }
  std::uint64_t next_address_ = 0;
  // The targets of `ici_socket`, `hbm_socket` and `vpu_socket`, resolved once bound.
  tlm::tlm_blocking_transport_if<>* router_ = nullptr;
  tlm::tlm_blocking_transport_if<>* hbm_ = nullptr;
  tlm::tlm_blocking_transport_if<>* vpu_ = nullptr;
  // The steps that have begun to arrive: a few at a time (the parts, the two directions, a
  // neighbour running a step ahead), so a short array searched in order beats a tree whose nodes
  // are allocated and freed for every step and are cache misses on a large slice.
  std::vector<Inbox> inbox_;
  std::vector<RingWork> posted_;
  // The DCN port: free from then on, its transfers in the order they are booked.
  Picos dcn_free_ps_ = 0;
  Reporter dcn_;
  sc_core::sc_event work_posted_;
  // One payload serves every request (Request::reset): HBM, the vector unit and the router
  // answer without yielding, so no two requests are ever in flight at once.
  Request request_;
};

}  // namespace tpusim
