// A TensorCore: MXUs, a vector unit, DMA engines to the chip's HBM, a vector memory, and the
// sequencer that replays the program. Ops are dispatched in program order once their
// dependencies are done, each to its engine (matmul, vector, collective, infeed); engines run
// concurrently, so communication overlaps compute and DMA overlaps the MXU exactly as far as
// the shared units allow.
#pragma once

#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include <array>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "hw/compute_units.hpp"
#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/sc_support.hpp"
#include "hw/wake_queue.hpp"

namespace tpusim {

class Host;

// DMA between HBM and vector memory. A transfer takes a free engine and is split into chunks
// with a bounded number in flight. The engines are state machines run by the cell's WakeQueue,
// not threads. Initiators use the base protocol without waiting: BEGIN_REQ (the annotated delay
// is when the transfer may start), answered with BEGIN_RESP once the last chunk is booked, its
// delay the time until that chunk lands; the engine stays taken until then. A thread may use
// b_transport instead, which returns at that same moment with the same delay.
class Dma : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Dma> socket;
  tlm_utils::simple_initiator_socket<Dma> hbm_socket;  // its target must answer without waiting

  // `drops_last_chunk`: an injected fault (FaultKind::DmaDropChunk).
  Dma(sc_core::sc_module_name name, const DmaConfig& config, std::uint32_t chip, std::uint32_t core,
      WakeQueue& wakes, bool drops_last_chunk, EventSink* sink);
  // Bytes of the transfers asked of the engines, and bytes of the chunks the HBM accepted.
  std::uint64_t asked_bytes() const { return asked_bytes_; }
  std::uint64_t moved_bytes() const { return moved_bytes_; }

 private:
  static constexpr Picos kHeld = ~Picos{0};
  // A transfer asked for, from its request until its last chunk is booked. Transfers in flight
  // are few (one per requesting stage), so they are kept in a pool and reused.
  struct Transfer {
    tlm::tlm_generic_payload* payload = nullptr;
    int initiator = 0;
    bool blocking = false;       // a thread waits in b_transport for `answered`
    bool answered = false;
    Picos start_ps = 0;          // when it may start
    Picos retry_ps = 0;          // Waiting: a try for an engine is due then
    Picos answer_delay_ps = 0;   // BEGIN_RESP's delay: until the last chunk lands
    std::size_t engine = 0;
    enum class State : std::uint8_t { Free, Waiting, Booking } state = State::Free;
    // The booking, which pauses when `lookahead` chunks are booked ahead of the present.
    std::uint64_t offset = 0;
    std::uint32_t ahead = 0;
    bool resuming = false;       // the booking paused before booking the chunk at `offset`
    bool drop_last_chunk = false;
    Picos start = 0, issue = 0, last_done = 0;
    std::size_t head = 0;        // chunks [head, end) of the engine's `landed` are in flight
    WakeQueue::Task task;        // the transfer's next step: take an engine, or book on
    sc_core::sc_event answered_event;
  };

  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);
  tlm::tlm_sync_enum nb_transport_fw(int initiator, tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                     sc_core::sc_time& delay);
  // Takes a transfer in; true when it was booked to its last chunk at once.
  bool begin(Transfer& t);
  // Takes the earliest free engine, or waits for one; true when the transfer got one and was
  // booked to its last chunk.
  bool try_start(Transfer& t);
  // Books chunks until the window pauses it (false) or the last is booked (true).
  bool book(Transfer& t);
  // The answer of a transfer booked later than its request.
  void answer(Transfer& t);
  // A free transfer of the pool (or a new one), set up for `payload`, to start after `delay`.
  Transfer& new_transfer(tlm::tlm_generic_payload& payload, int initiator, const sc_core::sc_time& delay, bool blocking);

  DmaConfig config_;
  WakeQueue& wakes_;
  bool drops_last_chunk_;
  Picos issue_latency_ps_;
  std::uint64_t asked_bytes_ = 0;
  std::uint64_t moved_bytes_ = 0;
  // One payload serves every chunk of every engine: HBM answers without yielding, so no two
  // chunk requests are ever in flight at once. Only `bytes` (0: the access's length) and what
  // each chunk sets are read; HBM writes `served`.
  Request chunk_;
  std::vector<Picos> engine_free_ps_;  // per engine: when it is free (kHeld: its transfer is booking)
  std::vector<std::vector<Picos>> landed_;  // per engine: when each chunk of its transfer lands
  std::vector<Reporter> reporters_;
  std::vector<std::unique_ptr<Transfer>> transfers_;  // the pool
  std::vector<Transfer*> waiting_;  // for an engine, in the order they asked
};

// Capacity of the core's vector memory. Engines reserve their double-buffered working set; a
// reservation that does not fit is a simulation error, never silently allowed.
class Vmem {
 public:
  explicit Vmem(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  // Occupancy changes become the counter track `counter` of `reporter`'s process.
  void report_to(Reporter reporter, std::string counter) {
    reporter_ = reporter;
    counter_ = std::move(counter);
  }
  void reserve(std::uint64_t bytes, const std::string& op);
  void release(std::uint64_t bytes) {
    used_bytes_ -= bytes;
    report();
  }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t peak_bytes() const { return peak_bytes_; }

 private:
  void report() const { reporter_.level(&counter_, "MiB", now_ps(), static_cast<double>(used_bytes_) / (1 << 20)); }

  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
  std::uint64_t peak_bytes_ = 0;
  Reporter reporter_;
  std::string counter_;
};

struct CoreSite {
  std::uint32_t chip = 0;
  std::uint32_t core = 0;  // within the chip
};

// A TensorCore without a thread: its sequencer, its engines and their pipeline stages are state
// machines that the host's WakeQueue runs (a task each), woken by what they wait for. A slice
// of thousands of chips then costs neither a stack nor a memory mapping per modelled process.
class TensorCore : public sc_core::sc_module {
 public:
  // To the chip's collective unit: BEGIN_REQ with the collective, answered with BEGIN_RESP once
  // the chip's part is done.
  tlm_utils::simple_initiator_socket<TensorCore> collective_socket;
  Dma dma;

  TensorCore(sc_core::sc_module_name name, const HwConfig& hw, CoreSite site, const Program& program, Host& host,
             EventSink* sink);
  Vpu& vpu() { return vpu_; }
  const sc_core::sc_vector<Mxu>& mxus() const { return mxus_; }
  // The share of vector memory a matmul's blocks may take (the rest serves the vector engine).
  static std::uint64_t matmul_vmem_budget_bytes(const HwConfig& hw) { return hw.core.vmem_bytes / 4 * 3; }
  // Blocks a vector op streams in: double-buffered in and out, within the vector engine's quarter
  // of vector memory.
  static std::uint64_t vector_blocks(const VectorWork& v, const HwConfig& hw) {
    return std::max<std::uint64_t>(1, ceil_div<std::uint64_t>(2 * (vector_read_bytes(v, hw) + v.hbm_write_bytes),
                                                              hw.core.vmem_bytes / 4));
  }
  // HBM bytes a vector op reads on this hardware: its inputs, and its lane reductions' inputs
  // again for each extra pass the generation's compiler makes of them.
  static std::uint64_t vector_read_bytes(const VectorWork& v, const HwConfig& hw) {
    const double again = hw.core.vpu.lane_reduction_extra_passes * v.lane_reductions * static_cast<double>(v.lane_reduced_bytes);
    return v.hbm_read_bytes + static_cast<std::uint64_t>(again + 0.5);
  }

  bool finished() const { return finished_; }
  // Called at the end of every step of this core (System hands it to one core for progress).
  void on_step_end(std::function<void(std::uint32_t step)> observer) { step_observer_ = std::move(observer); }
  // End of each step on this core (all its ops done).
  const std::vector<Picos>& step_end_ps() const { return step_end_ps_; }
  // Per step: from its start until its last forward-phase op ended (0: none).
  const std::vector<Picos>& forward_span_ps() const { return forward_span_ps_; }
  // Per step: the time some op of a pipeline iteration ran, and some op of a bubble iteration
  // (the union of their intervals; 0 without a pipeline).
  const std::vector<Picos>& pipeline_ps() const { return pipeline_ps_; }
  const std::vector<Picos>& bubble_ps() const { return bubble_ps_; }
  const Vmem& vmem() const { return vmem_; }
  // Op and step the sequencer is waiting on, for diagnosing a stuck simulation.
  std::string progress() const;

 private:
  enum Engine { kMatmul, kVector, kCollective, kInfeed, kEngines };
  static constexpr std::uint32_t kMaxStreams = 64;
  // One engine stream: its ops in dispatch order, and the one it runs. Every wait of an op is a
  // return from `advance_engine` with the task scheduled for what it waits for; a run that comes
  // early (the task is woken for several reasons) finds its condition unmet and returns again.
  struct Queue {
    std::deque<const Op*> ops;
    WakeQueue::Task task;
    bool started = false;
    const Reporter* reporter = nullptr;
    const Op* op = nullptr;  // running (nullptr: idle)
    Picos start_ps = 0;
    std::uint32_t phase = 0;  // where the running op is (the op kind's own numbering)
    Picos resume_ps = 0;      // the time a timed wait of the running op waits for
    Picos armed_ps = 0;       // the task is scheduled for then: another wait for it adds nothing
    Picos due_ps = 0;         // the op's own end time, once known (a host transfer)
    bool answered = false;    // the transfer or collective it asked for is answered
    bool in_overhead = false;  // the op's issue overhead (core.op_overhead_cycles) is not over
    Request request;          // its collective, or its host transfer's DMA
  };
  // When a block's compute frees its input buffers and when its results are ready to store.
  struct BlockTimes {
    Picos inputs_free_ps = 0;
    Picos results_ps = 0;
  };
  // One block of a streamed op: bytes in (two operand streams, each with its own DMA), compute,
  // bytes out. A matmul block's products run on the MXUs (`plan`), with vector work on its input
  // as it streams in (a prologue) and on its results (an epilogue, after the last K block); a
  // vector block runs on the vector unit.
  struct Block {
    std::array<std::uint64_t, 2> load_bytes{};
    std::uint64_t store_bytes = 0;
    std::uint64_t load_run_bytes = 0;  // a gather's pieces (0: contiguous)
    std::uint64_t store_run_bytes = 0;  // a scatter's pieces
    const MatmulPlan* plan = nullptr;  // a matmul block
    double mxu_flops = 0;
    std::uint64_t prologue_elements = 0, epilogue_elements = 0, vector_elements = 0;
    double prologue_ops = 0, epilogue_ops = 0, vector_ops = 0;
  };
  // The DMA and compute stages of one engine's current op. Stages are loosely timed: each books
  // its work as soon as the times it depends on are known, and records when that work will be
  // done, so a stage waits for what another has not yet booked, not for it to happen.
  struct DmaStage {
    WakeQueue::Task task;  // goes on as far as it can
    std::uint64_t done_job = 0;  // the last job it took
    std::size_t block = 0;       // the next block of its job
    Picos previous_ps = 0;       // when its previous transfer lands: a stage moves one at a time
    bool active = false;         // working through a job
    bool in_flight = false;      // a transfer asked for and not yet answered
    bool awaits_compute = false;  // stopped until the compute stage has got further
  };
  struct Pipeline {
    bool started = false;
    Queue* owner = nullptr;  // the engine stream whose ops it runs: its task is the compute stage
    std::uint64_t job = 0;
    const Op* op = nullptr;  // the running op (nullptr: none); its blocks are `block_storage`
    double rows_per_cycle = 0;  // a matmul's
    std::uint64_t vmem_bytes = 0;  // what the op reserved
    // Blocks booked per stage, and when each booked block's transfer or compute is done.
    std::array<std::size_t, 2> loaded{};
    std::size_t computed = 0, stored = 0;
    std::array<std::vector<Picos>, 2> landed_ps;
    std::vector<BlockTimes> computed_ps;
    std::vector<Picos> stored_ps;
    std::array<DmaStage, 3> stages;  // 0, 1: the operand loads; 2: the result stores
    Request dma_requests[3];  // one per DMA stage: a transfer is answered later, so each needs its own
    // The compute stage: the block it is at, and that block's times so far.
    Picos previous_ps = 0;  // when the compute of the previous block let go of the units
    Picos products_ps = 0;
    // The running op's blocks and the plans of their shapes (blocks point into `plans`, a deque
    // so that they stay where they are as more are added).
    std::vector<Block> block_storage;
    std::deque<std::pair<std::array<std::uint64_t, 4>, MatmulPlan>> plans;
  };

  void start_of_simulation() override;
  Queue& queue(Engine engine, std::uint32_t stream);
  // The sequencer: dispatches ops in program order as their dependencies finish.
  void advance_sequencer();
  void advance_engine(Queue& q);
  // Goes on with `q`'s running op as far as it can; true once the op is done.
  bool continue_op(Queue& q);
  void finish_op(Queue& q);
  // True when `at_ps` has come; otherwise schedules `q`'s task for then.
  bool reached(Queue& q, Picos at_ps);
  bool continue_matmul_or_vector(Queue& q, Engine engine);
  bool continue_collective(Queue& q);
  bool continue_infeed(Queue& q);
  bool continue_host_transfer(Queue& q);
  void plan_matmul_blocks(Pipeline& p, const Op& op);
  void plan_vector_blocks(Pipeline& p, const Op& op);
  // Posts the op's blocks to the DMA stages.
  void start_blocks(Pipeline& p, const Op& op);
  // The compute stage: true once every block is computed and its results have landed.
  bool continue_compute(Pipeline& p);
  void block_computed(Pipeline& p, BlockTimes times);
  // The DMA stages wake to a new job (all) or a computed block (those waiting for one) in the
  // next delta cycle.
  void wake_dma_stages(Pipeline& p, bool all);
  void advance_dma_stage(Pipeline& p, std::size_t stage);
  void dma_stage_landed(Pipeline& p, std::size_t stage, Picos landed_ps);
  // Whether what the compute stage waits for from the DMA stages is there: its block's inputs and
  // output buffer, or, once every block is computed, every store.
  bool compute_can_go_on(const Pipeline& p) const;
  // Answers (BEGIN_RESP) of the DMA and the collective unit to what this core asked.
  tlm::tlm_sync_enum dma_answered(tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase, sc_core::sc_time& delay);
  tlm::tlm_sync_enum collective_answered(tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase,
                                         sc_core::sc_time& delay);
  // The engine stream whose request (a collective, a host transfer's DMA) `payload` is, marked
  // answered and woken.
  Queue& queue_asking(const tlm::tlm_generic_payload& payload);
  // Sets `r` up as a transfer of `bytes` starting no earlier than `start_ps`, and returns its
  // annotated delay.
  sc_core::sc_time prepare_dma(Request& r, tlm::tlm_command cmd, std::uint64_t bytes, std::uint64_t run_bytes,
                               const std::string* label, Picos start_ps);
  // Hands each MXU its share of a block, starting no earlier than `start_ps`; returns when the
  // last one is done. The MXUs serve this core's matmul engine alone, so booking them ahead of
  // time takes nothing from anyone.
  Picos mxu_work(const MatmulPlan& plan, double rows_per_cycle, double flops, const std::string* label,
                 Picos start_ps);
  Picos vpu_ops(std::uint64_t elements, double ops_per_element, const std::string* label);

  const HwConfig& hw_;
  CoreSite site_;
  const Program& program_;
  Host& host_;
  Clock clock_;
  Vmem vmem_;
  sc_core::sc_vector<Mxu> mxus_;
  Vpu vpu_;
  sc_core::sc_vector<tlm_utils::simple_initiator_socket<TensorCore>> mxu_sockets_;
  tlm_utils::simple_initiator_socket<TensorCore> vpu_socket_;
  tlm_utils::simple_initiator_socket<TensorCore> dma_socket_;
  EventSink* sink_;
  Reporter steps_reporter_;
  std::map<std::uint32_t, Queue> queues_;         // by engine * kMaxStreams + stream
  std::map<std::uint32_t, Reporter> reporters_;   // the same keys
  Pipeline pipelines_[kEngines];
  static constexpr Picos kNotDone = ~Picos{0};
  std::vector<Picos> done_ps_;  // when each op of this step ended (kNotDone: not yet)
  // The sequencer's state: the step, the op it dispatches next, and where in the step it is.
  WakeQueue::Task sequencer_task_;
  enum class StepPhase : std::uint8_t { Start, Launch, Dispatch, End } step_phase_ = StepPhase::Start;
  std::size_t next_op_ = 0;
  Picos launch_ps_ = 0;
  std::uint32_t step_ = 0;
  std::uint32_t waiting_on_ = 0;
  bool finished_ = false;
  std::uint64_t next_address_ = 0;
  std::vector<Picos> step_end_ps_;
  std::vector<Picos> forward_span_ps_;
  std::vector<Picos> pipeline_ps_, bubble_ps_;
  std::vector<std::pair<Picos, Picos>> pipeline_spans_, bubble_spans_;  // this step's
  Picos step_start_ps_ = 0;
  std::function<void(std::uint32_t)> step_observer_;
  // One payload for the MXU and VPU requests, which are answered without yielding (Request::reset).
  Request unit_request_;
};

}  // namespace tpusim
