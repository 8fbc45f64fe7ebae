// The program: the contract between the workload driver and the hardware. One data-parallel
// step as an ordered list of ops for one core; every replica runs the same list. It knows
// nothing of SystemC and nothing of models.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hw/units.hpp"

namespace tpusim {

enum class DType : std::uint8_t { F32, BF16, Int8, Fp8 };

inline std::uint32_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::Int8:
    case DType::Fp8: return 1;
  }
  return 4;
}
const char* dtype_name(DType t);

enum class OpKind : std::uint8_t { Infeed, Matmul, Vector, Collective, HostTransfer };
enum class Phase : std::uint8_t { Input, Forward, Backward, Gradients, Optimizer };
const char* phase_name(Phase p);

// out[m, n] = lhs[m, k] @ rhs[k, n]; operands and result live in HBM. The weight-like operand
// (rhs) is the stationary one in the MXU. `batch` independent products of that shape (attention's
// per-head matmuls) run as one op.
struct MatmulWork {
  std::uint64_t m = 0, k = 0, n = 0;
  std::uint64_t batch = 1;
  // HBM bytes of the LHS as a fraction of m x k: a convolution reads its input once, not once per
  // kernel tap of its im2col view (a 3x3 stride-1 convolution reads 1/9 of m x k).
  double lhs_read_fraction = 1.0;
  // HBM bytes of the result as a fraction of m x n: 0 when the next matmul of a fused kernel
  // takes it from vector memory (flash attention's scores).
  double out_write_fraction = 1.0;
  DType lhs = DType::BF16, rhs = DType::BF16, out = DType::F32;
  std::uint32_t passes = 1;  // bf16 passes per product: 1, 3 or 6 for an fp32 matmul
  // Elementwise work fused into the matmul's epilogue (bias, activation), VPU ops per output
  // element; it runs on the output tiles while the MXU streams the next ones.
  double epilogue_vpu_ops_per_element = 0;
  // Elementwise work fused into the matmul's input (a batch norm's scale and shift and a ReLU
  // between two convolutions), VPU ops per element of the LHS as read from HBM; it runs on each
  // block as it arrives, beside the MXU.
  double prologue_vpu_ops_per_lhs_element = 0;
  // Elements of a [batch, m, k] block of the LHS as read from HBM (lhs_read_fraction of them):
  // what a prologue transforms.
  std::uint64_t lhs_elements_read(std::uint64_t batch_of, std::uint64_t m_of, std::uint64_t k_of) const {
    return static_cast<std::uint64_t>(static_cast<double>(batch_of * m_of * k_of) * lhs_read_fraction + 0.5);
  }
  // Bytes per element of the LHS as held in HBM when the MXU multiplies another type: an int8
  // LHS quantized from bfloat16 on the way in (by the prologue) is read at 2 bytes. 0: as
  // multiplied.
  std::uint32_t lhs_stored_bytes = 0;
  // Bytes per output element the epilogue reads besides the result (e.g. the saved activation
  // an activation gradient needs), fetched with the last K block of each output block.
  std::uint32_t epilogue_operand_bytes_per_element = 0;
  // Vector-memory block of the matmul (rows, contracted, columns); 0: the core chooses the
  // largest that fits. Set to reproduce a kernel's tiling (e.g. a Pallas BlockSpec).
  std::uint64_t block_m = 0, block_k = 0, block_n = 0;
};

// A fused elementwise/reduction pass: reads its inputs from HBM once, writes its outputs once.
struct VectorWork {
  std::uint64_t elements = 0;
  double vpu_ops_per_element = 1;
  std::uint64_t hbm_read_bytes = 0;
  std::uint64_t hbm_write_bytes = 0;
  // A gather or scatter: the contiguous pieces' length (0: one contiguous tensor).
  std::uint64_t hbm_read_run_bytes = 0;
  std::uint64_t hbm_write_run_bytes = 0;
  // Reductions along the last (lane) axis the pass makes one after another (a softmax's max,
  // then its sum), and the HBM bytes of what each reduces: a generation whose compiler runs such
  // a reduction as passes of its own reads them again (hw.core.vpu.lane_reduction_extra_passes).
  std::uint32_t lane_reductions = 0;
  std::uint64_t lane_reduced_bytes = 0;
};

// Permute: each chip sends its whole buffer to the next chip of its group's ring and receives the
// previous one's (XLA's collective-permute, JAX's ppermute with a shift); with the BidirRing
// algorithm half of it to each neighbour, receiving half from each.
// AllToAll: each chip's buffer holds one equal share for every chip of its group (itself
// included), and each chip ends with the shares the others held for it (XLA's all-to-all, the
// dispatch and combine of a mixture-of-experts layer over an expert axis).
enum class CollectiveKind : std::uint8_t { AllReduce, ReduceScatter, AllGather, Permute, AllToAll };
// A new algorithm is its value here, its row in hw/program.cpp's table (name, what it does,
// whether it is one ring) and its plan in hw/collective.cpp; the command line, the workload
// key's choices and the folding of symmetric chips read the table. A program of one's own adds
// one without changing tpusim: register_collective_algorithm (hw/collective.hpp) gives it the
// next value after these.
enum class CollectiveAlgorithm : std::uint8_t { Ring, BidirRing, Torus, TorusAllAxes };
// Adds a row for an algorithm registered at run time and returns its value; throws
// std::invalid_argument for a name already taken. hw/collective.hpp's
// register_collective_algorithm calls it with the algorithm's plan.
CollectiveAlgorithm add_collective_algorithm_row(const std::string& name, const std::string& description);
// Whether the algorithm is a program's own (registered at run time): tpusim cannot tell which
// chips its plan treats alike, so hw/symmetry simulates every chip.
bool collective_algorithm_is_registered(CollectiveAlgorithm a);
const char* collective_kind_name(CollectiveKind k);
const char* collective_algorithm_name(CollectiveAlgorithm a);
const char* collective_algorithm_description(CollectiveAlgorithm a);
// Whether the algorithm sends along rings snaking through the group's chips (one ring over
// several torus axes is not invariant under translation along them: hw/symmetry).
bool collective_algorithm_is_ring(CollectiveAlgorithm a);
// "name (description), ..." of every algorithm, for help texts.
std::string collective_algorithms_described();
// Inverse of collective_algorithm_name(); throws std::invalid_argument for other names.
CollectiveAlgorithm parse_collective_algorithm(const std::string& name);
std::vector<std::string> collective_algorithm_names();  // every algorithm's, in declaration order

// On each torus axis a group spans, the chips of the aligned block it takes (0: the whole axis).
using GroupSpan = std::array<std::uint32_t, 3>;

// A collective among the chips of a group (the cores of a chip combine through its HBM first).
struct CollectiveSpec {
  CollectiveKind kind = CollectiveKind::AllReduce;
  // The whole buffer: what goes into and out of an all-reduce, into a reduce-scatter, out of an
  // all-gather; what each chip sends in a permute; what each chip holds before and after an
  // all-to-all.
  std::uint64_t bytes = 0;
  DType dtype = DType::F32;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::TorusAllAxes;
  std::uint32_t group_axes = 0x7;  // bit a set: the group spans torus axis a (0x7: the whole slice)
  // On an axis it spans, the group takes this many consecutive chips, in blocks aligned to
  // multiples of it (0: the whole axis). A block shorter than its axis is an open line: the
  // group's ring does not close over the chips beyond it. (Distributed batch normalization's
  // groups: a host's tray of 2x2 chips.)
  GroupSpan group_span{0, 0, 0};
  std::uint64_t chunk_bytes = 0;   // pieces a ring step is sent in, pipelined with the reduction; 0: one
  // A reduction whose group also spans this many slices over the DCN (1: this slice only): what
  // the ICI part leaves on each chip is all-reduced with the chip's peers in the other slices.
  std::uint32_t dcn_slices = 1;
  // The chip's cores summed their contributions in an earlier stage of the same reduction (the
  // ICI reduce-scatter before a DCN all-reduce): the chip's one buffer goes as it is.
  bool cores_combined = false;
};

// An op's place in a pipeline-parallel step: outside the pipeline, an iteration's useful work,
// or the work of an iteration that is a bubble on this stage (computed and thrown away, as an
// SPMD pipeline's stages compute in every iteration).
enum class PipelineRole : std::uint8_t { None, Iteration, Bubble };

struct InfeedWork {
  std::uint64_t bytes = 0;  // this core's share of the step's input batch
};

// A copy between the core's HBM and its host's memory over the chip's PCIe link, one way: the
// host offload of an activation kept for the backward pass (MaxText's remat "offload"), out
// after the forward pass makes it and back before the backward pass needs it.
struct HostTransferWork {
  std::uint64_t bytes = 0;
  bool to_host = true;  // false: from the host back into HBM
};

struct Op {
  std::uint32_t id = 0;  // index in Program::ops
  OpKind kind = OpKind::Vector;
  Phase phase = Phase::Forward;
  std::string name;                   // as shown in the trace, e.g. "dense_1/fwd/matmul+bias+relu"
  std::vector<std::uint32_t> deps;    // ops of the same step that must finish first
  // Ops of one kind run one after another on their engine; ops on another stream of the same
  // engine run beside them (e.g. collectives that are in flight together).
  std::uint32_t stream = 0;
  double model_flops = 0;             // analytic FLOPs of the op (no padding)
  PipelineRole pipeline = PipelineRole::None;
  MatmulWork matmul;
  VectorWork vector;
  CollectiveSpec collective;
  InfeedWork infeed;
  HostTransferWork host_transfer;
};

// One step of one replica's core. Steps run back to back: step s+1 starts its ops when every
// op of step s is done (as a new launch of the compiled step would), except infeed, which the
// host prefetches.
struct Program {
  std::vector<Op> ops;
  std::uint32_t steps = 1;
  // The host launches the program once per `steps_per_launch` steps, one launch every `launch_ps`
  // and ahead of the device (dispatch is asynchronous): execution e starts no earlier than
  // (e + 1) x launch_ps.
  std::uint32_t steps_per_launch = 1;
  Picos launch_ps = 0;
};

}  // namespace tpusim
