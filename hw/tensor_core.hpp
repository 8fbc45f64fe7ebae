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
// with a bounded number in flight. b_transport blocks while it books the chunks and returns once
// the last is booked, with the time until it lands as the annotated delay; the engine stays
// taken until then.
class Dma : public sc_core::sc_module {
 public:
  tlm_utils::multi_passthrough_target_socket<Dma> socket;
  tlm_utils::simple_initiator_socket<Dma> hbm_socket;

  // `drops_last_chunk`: an injected fault (FaultKind::DmaDropChunk).
  Dma(sc_core::sc_module_name name, const DmaConfig& config, std::uint32_t chip, std::uint32_t core,
      WakeQueue& wakes, bool drops_last_chunk, EventSink* sink);
  // Bytes of the transfers asked of the engines, and bytes of the chunks the HBM accepted.
  std::uint64_t asked_bytes() const { return asked_bytes_; }
  std::uint64_t moved_bytes() const { return moved_bytes_; }

 private:
  void b_transport(int initiator, tlm::tlm_generic_payload& payload, sc_core::sc_time& delay);

  DmaConfig config_;
  std::uint32_t chip_;
  WakeQueue& wakes_;
  bool drops_last_chunk_;
  Picos issue_latency_ps_;
  std::uint64_t asked_bytes_ = 0;
  std::uint64_t moved_bytes_ = 0;
  // One payload serves every chunk of every engine: HBM answers without yielding, so no two
  // chunk requests are ever in flight at once. Only `bytes` (0: the access's length) and what
  // each chunk sets are read; HBM writes `served`.
  Request chunk_;
  static constexpr Picos kHeld = ~Picos{0};
  std::vector<Picos> engine_free_ps_;  // per engine: when it is free (kHeld: its transfer is booking)
  std::vector<std::vector<Picos>> landed_;  // per engine: when each chunk of its transfer lands
  std::vector<Reporter> reporters_;
  sc_core::sc_event engine_freed_;
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

class TensorCore : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(TensorCore);
  tlm_utils::simple_initiator_socket<TensorCore> collective_socket;  // to the chip's collective unit
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
  struct Queue {
    std::deque<const Op*> ops;
    sc_core::sc_event work;
    bool started = false;
  };
  // When a block's compute frees its input buffers and when its results are ready to store.
  struct BlockTimes {
    Picos inputs_free_ps = 0;
    Picos results_ps = 0;
  };
  // One block of a streamed op: bytes in (two operand streams, each with its own DMA), compute,
  // bytes out.
  struct Block {
    std::array<std::uint64_t, 2> load_bytes{};
    std::uint64_t store_bytes = 0;
    std::uint64_t load_run_bytes = 0;  // a gather's pieces (0: contiguous)
    std::uint64_t store_run_bytes = 0;  // a scatter's pieces
    // Reserves the compute units for a start no earlier than `start_ps` (the present or later).
    std::function<BlockTimes(Picos start_ps)> compute;
  };

  void sequencer();
  void engine(Engine which, std::uint32_t stream);
  void run(const Op& op);
  void run_matmul(const Op& op);
  void run_vector(const Op& op);
  void run_collective(const Op& op);
  void run_infeed(const Op& op);
  void run_host_transfer(const Op& op);
  // The DMA and compute stages of one engine's current op. Stages are loosely timed: each books
  // its work as soon as the times it depends on are known, and records when that work will be
  // done, so a stage waits for what another has not yet booked, not for it to happen.
  struct Pipeline {
    bool started = false;
    std::uint64_t job = 0;
    std::vector<Block>* blocks = nullptr;
    const Op* op = nullptr;
    // Blocks booked per stage, and when each booked block's transfer or compute is done.
    std::array<std::size_t, 2> loaded{};
    std::size_t computed = 0, stored = 0;
    std::array<std::vector<Picos>, 2> landed_ps;
    std::vector<BlockTimes> computed_ps;
    std::vector<Picos> stored_ps;
    // One event per kind of progress, so that only the stages waiting for it wake: one event
    // for all woke every stage at every step of every other.
    sc_core::sc_event job_posted;      // a new op for the DMA stages
    sc_core::sc_event block_computed;  // a block's compute booked: its buffers' times are known
    sc_core::sc_event block_moved;     // a load or store booked: what the compute stage waits for
    Request dma_requests[3];  // one per DMA stage: a transfer yields, so each stage needs its own
  };
  // Load -> compute -> store with two buffers between stages, each stage its own process.
  void run_blocks(Engine engine, std::vector<Block>& blocks, const Op& op);
  void dma_stage(Pipeline& p, std::size_t stage);  // 0, 1: the operand loads; 2: the result stores
  // Moves `bytes` starting no earlier than `start_ps`; returns when they will have landed (the
  // start itself for nothing to move), without waiting for it.
  Picos dma_transfer(Request& r, tlm::tlm_command cmd, std::uint64_t bytes, std::uint64_t run_bytes,
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
  std::vector<bool> done_;
  sc_core::sc_event op_done_;
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
  Request host_transfer_requests_[2];  // the DMA of copies to the host, and back (each its own stream)
};

}  // namespace tpusim
