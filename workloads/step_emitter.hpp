// The ops a layer kind emits into one core's program: matmuls and vector passes sized for the
// core's batch, in the step's activation type.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "hw/program.hpp"
#include "workloads/model.hpp"

namespace tpusim {

class StepEmitter {
 public:
  StepEmitter(Program& program, const ModelGraph& graph, std::uint64_t batch, DType act, std::uint32_t passes)
      : program_(program), graph_(graph), batch_(batch), act_(act), act_bytes_(dtype_bytes(act)), passes_(passes) {}

  const ModelGraph& graph() const { return graph_; }
  std::uint64_t batch() const { return batch_; }  // samples on this core
  // Rows of a tensor of `per_sample` elements per sample that the current layer computes on this
  // core: its batch, or under sequence parallelism a replicated layer's 1/model-axis share
  // (rounded up: the last core's is no larger).
  std::uint64_t rows(std::uint64_t per_sample) const { return (batch_ * per_sample + token_shards_ - 1) / token_shards_; }
  double samples() const { return static_cast<double>(batch_) / token_shards_; }
  // Layers emitted from now on compute `samples` samples on this core (a pipeline's microbatch,
  // or its share of the replica's batch outside the pipeline).
  void set_batch(std::uint64_t samples) { batch_ = samples; }
  // Layers emitted from now on compute 1/shards of the tokens (1: all of them).
  void set_token_shards(std::uint32_t shards) { token_shards_ = shards; }
  DType act() const { return act_; }
  std::uint32_t act_bytes() const { return act_bytes_; }

  std::uint32_t add(Op op, std::vector<std::uint32_t> deps);
  Op& op(std::uint32_t id) { return program_.ops[id]; }
  // Marks vector op `id` as making `reductions` reductions along the last axis, one after another,
  // each over `bytes` of what it reads (VectorWork::lane_reductions).
  void reduces_along_lanes(std::uint32_t id, std::uint32_t reductions, std::uint64_t bytes) {
    program_.ops[id].vector.lane_reductions = reductions;
    program_.ops[id].vector.lane_reduced_bytes = bytes;
  }

  // A matmul of [m, k] x [k, n] (`batch` of them), inputs in the activation type. The epilogue
  // takes `epilogue_ops` VPU ops and reads `epilogue_bytes` per output element; `lhs_fraction`
  // is the share of m x k read from HBM (a convolution reads its input once, not per tap).
  std::uint32_t matmul(const std::string& name, Phase phase, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                       DType out, std::vector<std::uint32_t> deps, double epilogue_ops = 0,
                       std::uint32_t epilogue_bytes = 0, std::uint64_t batch = 1, double lhs_fraction = 1.0);
  std::uint32_t vector(const std::string& name, Phase phase, VectorWork work, std::vector<std::uint32_t> deps);
  std::uint32_t vector(const std::string& name, Phase phase, std::uint64_t elements, double ops, std::uint64_t read_bytes,
                       std::uint64_t write_bytes, std::vector<std::uint32_t> deps) {
    return vector(name, phase, VectorWork{elements, ops, read_bytes, write_bytes}, std::move(deps));
  }

  // The slice's model axis (sharding.hpp): the torus axes it spans (0: none), the algorithm its
  // collectives use, and whether the layers between split ones are split by tokens.
  void set_model_axis(std::uint32_t axes_mask, std::uint32_t size, CollectiveAlgorithm algorithm, bool sequence_parallel) {
    model_axes_ = axes_mask;
    model_size_ = size;
    model_algorithm_ = algorithm;
    sequence_parallel_ = sequence_parallel && axes_mask != 0;
  }
  bool sequence_parallel() const { return sequence_parallel_; }
  // A collective of `bytes` of `dtype` among the cores of the model axis, with its algorithm.
  CollectiveSpec model_axis_spec(CollectiveKind kind, std::uint64_t bytes, DType dtype) const {
    CollectiveSpec spec;
    spec.kind = kind;
    spec.bytes = bytes;
    spec.dtype = dtype;
    spec.algorithm = model_algorithm_;
    spec.group_axes = model_axes_;
    return spec;
  }
  // A collective as `spec` describes it, after `deps`.
  std::uint32_t collective(const std::string& name, Phase phase, const CollectiveSpec& spec, std::vector<std::uint32_t> deps);
  // A copy of `bytes` to host memory or back (host offload), on a stream of its own each way.
  std::uint32_t host_transfer(const std::string& name, Phase phase, std::uint64_t bytes, bool to_host, std::vector<std::uint32_t> deps);
  // Partial sums of `elements` activations (the whole tensor) added up over the model axis after
  // `deps`: all-reduced (Megatron's g forward, f backward), or under sequence parallelism
  // reduce-scattered into each core's share of the tokens. `name` takes the collective's name.
  std::uint32_t model_partial_sums(const std::string& name, Phase phase, std::uint64_t elements,
                                   std::vector<std::uint32_t> deps);
  // What a split layer waits for before using a replicated layer's `elements` activations (the
  // whole tensor): `deps`, or under sequence parallelism the all-gather of the shares after them
  // (after those of `deps` that are not recomputed activations: a gradient's gather runs while
  // the segment is recomputed).
  std::vector<std::uint32_t> model_gathered(const std::string& name, Phase phase, std::uint64_t elements,
                                            std::vector<std::uint32_t> deps);

  // The mesh's expert axis (sharding.hpp): the torus axes it spans (0: none).
  void set_expert_axis(std::uint32_t axes_mask) { expert_axes_ = axes_mask; }
  // A moe layer's `bytes` of routed rows exchanged over the expert axis after `deps`, an
  // all-to-all named `name`/all-to-all; without an expert axis nothing moves: `deps`.
  std::vector<std::uint32_t> expert_exchange(const std::string& name, Phase phase, std::uint64_t bytes,
                                             std::vector<std::uint32_t> deps);

  // Distributed batch norm's groups (sharding.hpp's Mesh): the axes they span (0: none) and the
  // block they take on each.
  void set_batch_norm_group(std::uint32_t axes_mask, const GroupSpan& span) {
    batch_norm_axes_ = axes_mask;
    batch_norm_span_ = span;
  }
  // What a pass normalizing with batch statistics waits for: `deps`, or, with distributed batch
  // norm, the all-reduce of its `bytes` of per-channel sums among the group after them (named
  // after the layer or chain `name`: name/fwd/stats/all-reduce, name/bwd/stats/all-reduce). The sums are tiny: the all-reduce's latency is what it costs, between
  // the pass's statistics and its normalization, and it is charged before the pass.
  std::vector<std::uint32_t> batch_statistics_reduced(const std::string& name, Phase phase, std::uint64_t bytes,
                                                      std::vector<std::uint32_t> deps);

  // Ops of a segment's second forward pass (rematerialization).
  void mark_recomputed(const std::vector<std::uint32_t>& ops) { recomputed_.insert(ops.begin(), ops.end()); }

  // How the step's kernels run.
  struct Kernels {
    bool flash_attention = false;        // attention's scores kept in vector memory
    DType quantized_type = DType::BF16;       // weight matmuls quantized to int8 (AQT) or fp8 (qwix); BF16: not
    bool quantized_weight_gradients = false;  // their weight gradients too
    bool quantized_fixed_scales = false;      // weights' and activations' scales constant (no absolute maximum)
    bool collective_matmul = false;      // model-axis gathers and scatters decomposed into their matmuls
    // TensorCores one device's kernels run on (a megacore chip's two): a Pallas kernel splits its
    // "parallel" grid axes between them, where XLA splits an op's rows.
    std::uint32_t cores_per_device = 1;
  };
  void set_kernels(const Kernels& kernels) {
    kernels_ = kernels;
    kernels_.quantized_weight_gradients = kernels.quantized_type != DType::BF16 && kernels.quantized_weight_gradients;
  }
  bool flash_attention() const { return kernels_.flash_attention; }
  std::uint32_t cores_per_device() const { return kernels_.cores_per_device; }
  // The matmul `id`, the last op emitted, with its operands quantized to int8 (as AQT does it) or
  // fp8 (as qwix does) when the step quantizes weight matmuls. Each operand is scaled by the
  // absolute maximum over the contracted axis (per row of the LHS, per column of the RHS), or,
  // with fixed scales, the weights and activations by a constant (the gradients still by their
  // maximum). The RHS, which every row block reuses, is quantized once into HBM by a pass that
  // reads it for its scales and again for its values, the same pass finding the LHS's scales;
  // the matmul then reads the LHS as stored and quantizes each block as it arrives (a prologue:
  // scale, round, clip, convert), and scales the products back in its epilogue. AQT rounds an
  // int8 gradient operand stochastically; qwix's fp8 does not. The matmul's id changes (the pass
  // comes first in program order).
  // `rhs_quantized`: an earlier piece of the same product quantized the RHS already.
  enum class GradientOperand { None, Lhs, Rhs };
  std::uint32_t quantized(std::uint32_t id, GradientOperand gradient = GradientOperand::None, bool rhs_quantized = false);
  // An input-gradient matmul `id` (the output's gradient times the weights), quantized.
  std::uint32_t quantized_input_gradient(std::uint32_t id) { return quantized(id, GradientOperand::Lhs); }
  // A weight-gradient matmul `id` (the input times the output's gradient), in int8 when the
  // step quantizes those too (AQT fully quantized).
  std::uint32_t quantized_weight_gradient(std::uint32_t id) {
    return kernels_.quantized_weight_gradients ? quantized(id, GradientOperand::Rhs) : id;
  }

  // A layer's matmul by its weights, [m, k] x [k, n]. Split over the model axis under sequence
  // parallelism, its left operand may be gathered or its output scattered over the axis.
  struct WeightMatmul {
    std::string name;
    Phase phase = Phase::Forward;
    std::uint64_t m = 0, k = 0, n = 0;
    DType out = DType::BF16;
    double epilogue_ops = 0;
    std::uint32_t epilogue_bytes = 0;
    bool quantize = true;  // as `quantized` says; false for a head's product by the token table
    GradientOperand gradient = GradientOperand::None;
  };
  // The matmul alone, quantized as `quantize` says.
  std::uint32_t weight_matmul(const WeightMatmul& mm, std::vector<std::uint32_t> deps) {
    return split_piece(mm, kWholeProduct, mm.m, std::move(deps));
  }
  // Whether `mm`, split over the model axis, runs as XLA's windowed einsum (collective matmul).
  bool windowed(const WeightMatmul& mm) const;
  struct GatheredProduct {
    std::uint32_t product;                     // the last piece, which finishes last
    std::vector<std::uint32_t> operand_ready;  // what another user of the whole gathered operand waits for
  };
  // The matmul after its left operand (a replicated layer's output, or a gradient split by
  // tokens) is all-gathered over the model axis (model_gathered). With collective matmul (XLA's
  // windowed einsum) the gather is shards - 1 ring shifts of one share each, every share
  // multiplied as it arrives, the core's own at once.
  GatheredProduct gathered_matmul(const WeightMatmul& mm, std::vector<std::uint32_t> deps);
  // The matmul whose [m, n] output holds this core's partial sums of a tensor split by rows over
  // the model axis, reduce-scattered into each core's share (model_partial_sums, `sum_name`
  // naming the collective). With collective matmul the product is computed one share of rows at
  // a time, the shares bound for the other cores first: each is added to the running sum of its
  // share that arrives from the neighbour and sent on, so every send runs under the next share's
  // product; the core's own share comes last. Returns the add that completes it.
  std::uint32_t scattered_matmul(const WeightMatmul& mm, const std::string& sum_name, std::vector<std::uint32_t> deps);

  // A bias gradient is the output gradient summed over rows. XLA computes it in the weight
  // gradient's fusion, which reads that gradient anyway (a multi-output fusion): vector work on
  // the way, no pass over HBM of its own. `sums`: the additions, one per output-gradient element.
  void fuse_bias_gradient(std::uint32_t dw, std::uint64_t sums);

  // The node's activation gradient is applied elsewhere (by its consumer's dX epilogue, or by
  // the loss for the last layer), not by a pass of its own.
  void fuse_grad_into_consumer(std::size_t node) { grad_fused_elsewhere_.insert(node); }
  bool grad_fused_elsewhere(std::size_t node) const { return grad_fused_elsewhere_.count(node) > 0; }

 private:
  // A gradient's gather runs on a collective stream of its own, in flight beside the recomputed
  // forward's collectives rather than queued behind them.
  static constexpr std::uint32_t kGradientGatherStream = 1;
  // A batch norm's statistics cross its group on a collective stream of their own, in flight
  // beside the gradients' all-reduces (stream 0) rather than queued behind a bucket: the step
  // waits for them.
  static constexpr std::uint32_t kBatchStatisticsStream = 3;
  // `deps` split into the data a gradient's collective waits for and the recomputed activations
  // beside them, which only its consumer waits for.
  std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> split_recomputed(std::vector<std::uint32_t> deps) const;
  static constexpr std::uint32_t kWholeProduct = ~0u;  // split_piece's index for the undivided product
  // One step of a windowed einsum's loop: half of a share to each neighbour on the model axis's
  // ring, half from each (XLA's bidirectional windowed einsum), so that the loop keeps both
  // directions of the links busy as a bidirectional ring does.
  CollectiveSpec window_shift_spec(DType dtype) const;
  // The rows of share `index` of m split over the model axis.
  std::uint64_t share_rows(std::uint64_t m, std::uint32_t index) const {
    return m / model_size_ + (index < m % model_size_ ? 1 : 0);
  }
  // Piece `index` of a split matmul (`rows` of its m), or the whole product, quantized as asked.
  std::uint32_t split_piece(const WeightMatmul& mm, std::uint32_t index, std::uint64_t rows, std::vector<std::uint32_t> deps);

  Program& program_;
  const ModelGraph& graph_;
  std::uint64_t batch_;
  DType act_;
  std::uint32_t act_bytes_;
  std::uint32_t passes_;
  std::set<std::size_t> grad_fused_elsewhere_;
  std::set<std::uint32_t> recomputed_;
  // Gathers emitted, by what they gathered: a second layer gathering the same tensor (a gated
  // MLP's up projection beside its gate) reuses the first's, as XLA's CSE leaves one.
  std::map<std::tuple<Phase, std::uint64_t, std::vector<std::uint32_t>>, std::vector<std::uint32_t>> gathered_;
  std::uint32_t token_shards_ = 1;
  std::uint32_t model_axes_ = 0;
  std::uint32_t model_size_ = 1;
  std::uint32_t expert_axes_ = 0;
  std::uint32_t batch_norm_axes_ = 0;
  GroupSpan batch_norm_span_{0, 0, 0};
  CollectiveAlgorithm model_algorithm_ = CollectiveAlgorithm::TorusAllAxes;
  bool sequence_parallel_ = false;
  Kernels kernels_;
};

// "base+bias+relu": the name of a matmul with what its epilogue applies.
std::string fused_name(const std::string& base, bool bias, const std::string& activation);

}  // namespace tpusim
