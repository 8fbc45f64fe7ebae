// A chip's collective unit: runs this chip's share of a collective (hw/collective.hpp's ring
// passes) over the ICI router, and over its DCN port to the other slices, with the reduction on
// core 0's vector unit and the operands streamed from and to the chip's HBM, so collectives
// compete with compute for both.
//
// The chip's cores reach it through `socket` (BEGIN_REQ with a UnitRequest whose `collective` is
// set). Once every core of the chip has arrived, a process of the unit's own combines their
// contributions through HBM (two cores of a v2/v3 chip are two replicas; the two halves of a
// megacore chip each hold half a batch's gradients), runs the chip-level schedule, and answers
// every core (BEGIN_RESP). The instance and its parts are state machines the host's WakeQueue
// runs, not threads: a slice of thousands of chips runs thousands of collectives at once.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <array>
#include <map>
#include <vector>
#include <memory>
#include <optional>

#include "hw/collective.hpp"
#include "hw/hw_config.hpp"
#include "hw/ici.hpp"
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
  // Ring pieces go onto the ICI through the slice's dispatch, in its order (hw/ici.hpp), rather
  // than at once (a unit on its own, as a module test builds it).
  void send_through(IciDispatch& dispatch) { dispatch_ = &dispatch; }
  std::size_t undelivered_steps() const { return inbox_.size(); }

 private:
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


  // One part of a running instance: its passes in order, each a state machine that returns
  // wherever the thread it once was waited (for a time, or for a step's pieces to be in).
  struct Instance;
  struct PassState {
    bool set_up = false;
    std::uint32_t phase = 0;     // where in the pass (the pass's own numbering)
    std::uint32_t step = 0;      // the ring step
    std::uint32_t order[2] = {0, 1}, next = 0;  // directions in sending (or receiving) order, and the next
    Picos resume_ps = 0;
    // The pass's fixed facts.
    std::uint32_t neighbour[2] = {0, 0}, hops_to[2] = {0, 0}, directions = 1, element_bytes = 4;
    RingPieces split;
    // What the step before brought in each direction, which this step forwards (with this
    // chip's own shard added, in a reduce-scatter) as it arrives; a direction with nothing from
    // the step before sends this chip's own data, there now.
    Inbox before[2];
    bool forwards[2] = {false, false};
    Picos own_before = 0;  // the own shard added in the step before, read from HBM by then
    Picos own_ready = 0;   // this step's (kPending until booked)
    Picos done = 0;
  };
  struct PartRun {
    Instance* instance = nullptr;  // nullptr: free (the pool's, reused)
    std::uint32_t part = 0;
    WakeQueue::Task task;
    Picos armed_ps = 0;
    Picos start_ps = 0;      // when the part began
    std::uint32_t pass = 0;  // the pass it is in
    PassState s;
  };
  // An instance this chip's cores have begun to join, until it completes here.
  struct Instance {
    Pending what;
    std::vector<std::pair<int, tlm::tlm_generic_payload*>> cores;  // which have arrived, with what
    bool in_use = false;
    WakeQueue::Task task;  // the chip's part: combine the cores', run the parts, answer the cores
    Picos armed_ps = 0;
    std::uint32_t phase = 0;
    Picos resume_ps = 0;
    CollectiveSchedule schedule;
    std::uint32_t lane = 0;
    std::uint32_t parts_left = 0;
  };
  void end_of_elaboration() override;
  // A core arrives with a collective to run.
  tlm::tlm_sync_enum from_core(int core, tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                               sc_core::sc_time& delay);
  // The chip's part of an instance every core has joined, then the answers to the cores.
  void advance_instance(Instance& in);
  void advance_part(PartRun& run);
  // Go on with the pass `run` is in as far as they can; true once it is over here.
  bool continue_ring_pass(PartRun& run, const Context& ctx, const RingPass& pass);
  bool continue_dcn_pass(PartRun& run, const Context& ctx, const RingPass& pass);
  // The end of a step (this chip's own shard read) and of a pass, shared by both kinds: true once
  // the pass is over, false to wait, nothing when it moved on.
  std::optional<bool> end_step_or_pass(PartRun& run, const Context& ctx, const RingPass& pass);
  // The step's pieces in `dir`, once they are all in (false: not yet).
  bool take_step(const StepKey& key, std::uint64_t pieces, Inbox& into);
  Instance& new_instance();
  PartRun& new_part_run();
  static Context context(const Instance& in) { return {*in.what.spec, in.what.instance, in.what.label, in.what.step}; }
  // A piece arrives (at the tail time it carries): book its addition or its HBM write for then.
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override;
  // Books a piece arriving at `tail` (its first byte at `head`): added, or written to HBM;
  // returns when it is taken in.
  Picos take_in(const RingWork& work, Picos head, Picos tail, std::uint32_t& completed_parts);
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
  std::map<std::uint64_t, Instance*> joining_;
  // Pools of instances and parts, reused: a stale wake of one that has moved on finds nothing to
  // do, so none is ever freed while the queue may still hold a wake for it.
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::unique_ptr<PartRun>> part_runs_;
  std::vector<PartRun*> running_parts_;  // woken when a step of their part index is complete
  Counts counts_;
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
  IciDispatch* dispatch_ = nullptr;
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
