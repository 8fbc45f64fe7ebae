#include "workloads/lower.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/collective.hpp"
#include "hw/topology.hpp"
#include "workloads/layer_kind.hpp"
#include "workloads/step_emitter.hpp"

namespace tpusim {
namespace {

std::string chain_name(const std::vector<const Node*>& chain) {
  std::string name;
  for (const Node* node : chain) name += (name.empty() ? "" : "+") + node->spec.name;
  return name;
}

// Under sequence parallelism a split layer that takes a replicated layer's output (a column
// layer, attention) all-gathers it first, and its backward keeps the gathered copy.
bool gathers_input(const StepEmitter& em, const Node& node) {
  return em.sequence_parallel() && (node.spec.tensor_parallel == "column" || node.spec.tensor_parallel == "heads");
}

// Whether a consumer's gradient needs this node's output as this node left it (looking through
// views).
bool kept_for_backward(const StepEmitter& em, const Node& node) {
  for (auto c : node.consumers) {
    const Node& consumer = em.graph().nodes[c];
    if (consumer.kind->is_view() ? kept_for_backward(em, consumer)
                                 : consumer.kind->keeps_input(consumer) && !gathers_input(em, consumer))
      return true;
  }
  return false;
}

// Activations this node's backward keeps from the forward pass, bytes on this core: its output
// when a consumer's gradient needs it, its gathered input, and what the kind keeps of its own.
// The emitter's token shards are the node's.
// `applied_in_consumer`: the node ends a chain that rides into its consumer's input, so its
// output is never written (the consumer applies the chain again to what the chain's first member
// keeps).
std::uint64_t saved_bytes(const StepEmitter& em, const Node& node, bool applied_in_consumer) {
  std::uint64_t bytes = node.kind->saved_own_bytes(em, node);
  if (!node.kind->is_view() && !applied_in_consumer && kept_for_backward(em, node))
    bytes += em.rows(elements(node.out)) * em.act_bytes();
  // (A column group's layers keep one gathered copy of their shared input.)
  const bool group_copy = node.spec.column_group.empty() || node.spec.column_group == node.spec.name;
  if (gathers_input(em, node) && node.kind->keeps_input(node) && group_copy) bytes += em.batch() * elements(node.in) * em.act_bytes();
  return bytes;
}

// A chain of elementwise layers as one pass: its external inputs read once, its output (and any
// intermediate the backward pass keeps) written once. `stats_from_producer`: members whose
// statistics come from the producing matmul's epilogue, not from a pass of their own.
std::uint32_t fused_forward(StepEmitter& em, const std::vector<const Node*>& chain, std::vector<std::uint32_t> deps,
                            const std::set<const Node*>& stats_from_producer) {
  const std::uint64_t e = em.rows(elements(chain.back()->out));
  double ops = 0;
  std::uint64_t reads = e, writes = e;
  std::uint32_t lane_reductions = 0;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const Node& node = *chain[i];
    const FusedShare share = node.kind->fused_forward(node, e, stats_from_producer.count(&node) > 0);
    ops += share.vpu_ops;
    reads += share.read_elements;
    writes += share.write_elements;
    lane_reductions += share.lane_reductions;
    if (i + 1 < chain.size() && kept_for_backward(em, node)) writes += e;  // an intermediate the backward pass needs
  }
  const std::uint32_t op = em.vector(chain_name(chain) + "/fwd", Phase::Forward, e, ops, reads * em.act_bytes(),
                                     writes * em.act_bytes(), std::move(deps));
  // A reduction inside the chain reduces what the chain computes from its inputs: a pass of its
  // own reads them all again.
  em.reduces_along_lanes(op, lane_reductions, reads * em.act_bytes());
  return op;
}

// The backward of such a chain as one pass: reads the gradient and what the layers kept, writes
// the input gradient (and the normalizations' parameter gradients).
// The output gradient may come in several parts (a residual block's output feeds the next
// block and its shortcut): the pass adds them as it reads them, as XLA fuses the sum into the
// chain's backward instead of writing it out first.
// `after`: ops it waits for besides the gradient's parts (a recomputed segment).
// `input_gradients`: the input gradients it writes, one per member that starts the chain or a
// shortcut taken into it.
std::uint32_t fused_backward(StepEmitter& em, const std::vector<const Node*>& chain, std::vector<std::uint32_t> dy,
                             const std::vector<std::uint32_t>& after, std::uint64_t input_gradients) {
  const std::uint64_t e = em.rows(elements(chain.back()->out));
  const std::uint64_t gradient_parts = std::max<std::size_t>(1, dy.size());
  double ops = static_cast<double>(gradient_parts - 1);
  std::uint64_t reads = gradient_parts * e * em.act_bytes();
  std::uint32_t lane_reductions = 0;
  for (const Node* member : chain) {
    const FusedShare share = member->kind->fused_backward(*member, e, em.act_bytes());
    ops += share.vpu_ops;
    reads += share.read_bytes;
    lane_reductions += share.lane_reductions;
  }
  dy.insert(dy.end(), after.begin(), after.end());
  const std::uint32_t op = em.vector(chain_name(chain) + "/bwd", Phase::Backward, e, ops, reads,
                                     input_gradients * e * em.act_bytes(), std::move(dy));
  em.reduces_along_lanes(op, lane_reductions, reads);
  return op;
}

// Fully sharded data parallelism: the weights of each group of consecutive layers are
// all-gathered in the compute type before the group's forward and again before its backward;
// the next group's gather is issued as the current group's compute begins, so it runs under it
// (XLA's prefetch). Groups are combined up to the all-reduce bucket size, as XLA's all-gather
// combiner combines small gathers.
class WeightGathers {
 public:
  using Emit = std::function<std::uint32_t(const std::string& name, Phase phase, std::uint64_t params,
                                           std::vector<std::uint32_t> deps)>;

  WeightGathers(const ModelGraph& model, std::uint64_t bucket_bytes, Emit emit)
      : group_of_(model.nodes.size(), kNone), emit_(std::move(emit)) {
    for (const Node& node : model.nodes) {
      if (node.params == 0) continue;
      if (groups_.empty() || (groups_.back().params * 4 >= bucket_bytes)) groups_.push_back({node.spec.name, node.spec.name, 0});
      groups_.back().last = node.spec.name;
      groups_.back().params += node.params;
      group_of_[node.index] = groups_.size() - 1;
    }
    forward_.resize(groups_.size());
    backward_.resize(groups_.size());
  }

  // The gather the node's forward (backward) waits for, issuing it and the next group's when the
  // node is its group's first; nothing for a node without parameters.
  std::vector<std::uint32_t> before_forward(std::size_t node) {
    const std::size_t g = group_of_[node];
    if (g == kNone) return {};
    issue(forward_, g, Phase::Forward, g == 0 ? kNone : g - 1);
    if (g + 1 < groups_.size()) issue(forward_, g + 1, Phase::Forward, g);
    return {*forward_[g]};
  }
  std::vector<std::uint32_t> before_backward(std::size_t node) {
    const std::size_t g = group_of_[node];
    if (g == kNone) return {};
    issue(backward_, g, Phase::Backward, g + 1 < groups_.size() ? g + 1 : kNone);
    if (g > 0) issue(backward_, g - 1, Phase::Backward, g);
    return {*backward_[g]};
  }

  // Parameters gathered at the worst moment: a group's and the next one's, prefetched under it.
  std::uint64_t in_flight_params() const {
    std::uint64_t p = groups_.empty() ? 0 : groups_[0].params;
    for (std::size_t g = 1; g < groups_.size(); ++g) p = std::max(p, groups_[g - 1].params + groups_[g].params);
    return p;
  }

 private:
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  struct Group {
    std::string first, last;
    std::uint64_t params;
  };
  // Gathers run one after another in the order they are needed: each after `previous`.
  void issue(std::vector<std::optional<std::uint32_t>>& ops, std::size_t g, Phase phase, std::size_t previous) {
    if (ops[g]) return;
    std::vector<std::uint32_t> deps;
    if (previous != kNone && ops[previous]) deps.push_back(*ops[previous]);
    const Group& group = groups_[g];
    const std::string name = group.first == group.last ? group.first : fmt::format("params[{}..{}]", group.first, group.last);
    ops[g] = emit_(name + (phase == Phase::Forward ? "/fwd" : "/bwd") + "/all-gather", phase, group.params, std::move(deps));
  }

  std::vector<Group> groups_;
  std::vector<std::size_t> group_of_;
  std::vector<std::optional<std::uint32_t>> forward_, backward_;
  Emit emit_;
};

// Without XLA's output fusion (training.matmul_output_fusion false) a matmul's elementwise
// consumers do not run in its epilogue: the matmul writes its raw result (an int8 product's
// int32 sums; a bfloat16 product's f32 sums are rounded by the matmul itself) and a vector pass
// of its own reads it back, applies them and writes the activation; consumers wait for the pass.
// A Pallas kernel's products whose results never leave vector memory (flash attention's scores)
// and the weight gradients' f32 results (their bias gradients reduce the operand, not the
// result) keep theirs.
void unfuse_matmul_epilogues(Program& program) {
  std::vector<Op> ops;
  ops.reserve(program.ops.size() * 2);
  std::vector<std::uint32_t> output_of(program.ops.size());
  for (Op& op : program.ops) {
    const std::uint32_t id = op.id;
    for (std::uint32_t& dep : op.deps) dep = output_of[dep];
    op.id = static_cast<std::uint32_t>(ops.size());
    const MatmulWork& mm = op.matmul;
    const bool int8 = op.kind == OpKind::Matmul && mm.lhs == DType::Int8;
    const bool unfused = op.kind == OpKind::Matmul && mm.out != DType::F32 && mm.out_write_fraction > 0 &&
                         (mm.epilogue_vpu_ops_per_element > 0 || int8);
    ops.push_back(std::move(op));
    output_of[id] = ops.back().id;
    if (!unfused) continue;
    MatmulWork& product = ops.back().matmul;
    const std::uint64_t elements = product.batch * product.m * product.n;
    const std::uint32_t out_bytes = dtype_bytes(product.out), raw_bytes = int8 ? 4 : out_bytes;
    Op pass;
    pass.kind = OpKind::Vector;
    pass.phase = ops.back().phase;
    pass.name = ops.back().name + "/epilogue";
    pass.vector = VectorWork{elements, product.epilogue_vpu_ops_per_element,
                             elements * (raw_bytes + product.epilogue_operand_bytes_per_element), elements * out_bytes};
    pass.deps = {ops.back().id};
    pass.id = static_cast<std::uint32_t>(ops.size());
    product.epilogue_vpu_ops_per_element = 0;
    product.epilogue_operand_bytes_per_element = 0;
    if (int8) product.out = DType::F32;  // int32 sums, four bytes each
    ops.push_back(std::move(pass));
    output_of[id] = ops.back().id;
  }
  program.ops = std::move(ops);
}

// The layers a pipeline stage repeats (PipelineChunk): indices into the core's model.
struct ChunkRange {
  std::size_t first = 0, last = 0;
};

// The model one core runs: the pipeline stage's chunk and the layers around it, split over the
// mesh's model and expert axes.
void shard_model(const Workload& w, LoweredStep& out, ChunkRange& chunk) {
  out.core_model = out.model;
  const Mesh& mesh = out.mesh;
  Workload per_core = w;
  if (mesh.pipeline_size > 1) {
    PipelineSchedule& pipe = out.pipeline;
    pipe.stages = mesh.pipeline_size;
    pipe.repeats = w.pipeline_repeats;
    pipe.microbatches = w.pipeline_microbatches > 0 ? w.pipeline_microbatches : pipe.stages;
    if (pipe.microbatches % pipe.stages)
      throw std::invalid_argument(fmt::format("workload.training.pipeline.microbatches: {} microbatches do not spread evenly over the "
                                              "{} stages' input buffers (expected a multiple of {})", pipe.microbatches, pipe.stages,
                                              pipe.stages));
    pipe.iterations = pipe.microbatches * pipe.repeats + pipe.stages - 1;
    const PipelineChunk piece = pipeline_chunk(out.model, pipe.stages * pipe.repeats);
    pipe.layers_per_chunk = piece.chunk_layers;
    pipe.model_layers = piece.model_layers;
    chunk = {piece.first, piece.last};
    per_core.layers = piece.layers;
    out.core_model = analyze_model(per_core);
  }
  if (mesh.model_size > 1 || mesh.expert_size > 1) {
    per_core.layers = shard_layers(out.core_model, mesh.model_size, mesh.expert_size);
    out.core_model = analyze_model(per_core);
  }
}

// Data parallelism: one replica per core, or per chip when the chip's cores form one device;
// every slice holds as many replicas, each with its share of the global batch.
void divide_batch(const Workload& w, const HwConfig& hw, LoweredStep& out) {
  const Mesh& mesh = out.mesh;
  const std::uint64_t chips = hw.chip_count();
  out.replicas = static_cast<std::uint32_t>((hw.chip.megacore ? chips : chips * hw.chip.cores) / mesh.model_size / mesh.pipeline_size);
  const std::uint64_t all_replicas = std::uint64_t{out.replicas} * hw.slices;
  const std::uint32_t cores_per_replica = hw.chip.megacore ? hw.chip.cores : 1;
  const char* batch_key = w.per_replica_batch > 0 ? "per_replica_batch" : "global_batch";
  if (w.per_replica_batch > 0) {
    out.per_replica_batch = w.per_replica_batch;
    out.global_batch = w.per_replica_batch * all_replicas;
  } else {
    out.global_batch = w.global_batch;
    const std::string slices = hw.slices > 1 ? fmt::format("{} {} slices", hw.slices, topology_string(hw.slice_dims))
                                             : fmt::format("a {} slice", topology_string(hw.slice_dims));
    if (w.global_batch % all_replicas != 0)
      throw std::invalid_argument(fmt::format(
          "workload.training.global_batch: {} does not divide over the {} replicas of {} of {} "
          "(expected a multiple of {})", w.global_batch, all_replicas, slices, hw.name, all_replicas));
    out.per_replica_batch = w.global_batch / all_replicas;
  }
  if (out.per_replica_batch % cores_per_replica != 0)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: the per-replica batch {} does not split over the {} cores of a megacore chip", batch_key,
        out.per_replica_batch, cores_per_replica));
  const std::uint64_t b = out.per_replica_batch / cores_per_replica;
  out.per_core_batch = b;
  if (out.pipeline.stages > 1 && b % out.pipeline.microbatches)
    throw std::invalid_argument(fmt::format("workload.training.pipeline.microbatches: {} microbatches do not divide the {} samples "
                                            "of a replica's core", out.pipeline.microbatches, b));
  const ModelGraph& model = out.core_model;
  std::uint64_t widest = elements(model.input);
  for (const auto& node : model.nodes) widest = std::max(widest, elements(node.out));
  if (widest > kMaxElements / b)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: {} samples per core of {} elements is beyond what tpusim models (at most {} elements per tensor)",
        batch_key, b, widest, kMaxElements));
}

// The step's layout: the whole model, the mesh, what each core runs and its batch.
LoweredStep laid_out(const Workload& w, const HwConfig& hw, ChunkRange& chunk) {
  LoweredStep out;
  out.model = analyze_model(w);
  out.mesh = resolve_mesh(w, hw);
  if (w.quantized() && hw.core.mxu.rows_per_cycle(w.quantized_type) <= 0)
    throw std::invalid_argument(fmt::format("workload.training.quantization: {0}: the {1} MXU has no {0} path (core.mxu.{0}_speedup is 0)",
                                            dtype_name(w.quantized_type), hw.name));
  shard_model(w, out, chunk);
  divide_batch(w, hw, out);
  return out;
}

// One training step lowered pass by pass into the program every core replays: the input, the
// fusion and rematerialization plans, the forward pass (a pipeline's iterations), the loss, the
// backward pass with its gradient buckets and their reductions, the optimizer, and then the
// step's FLOPs and memory footprint. Each pass appends ops to the program in the order the
// sequencer issues them.
class StepLowering {
 public:
  StepLowering(const Workload& w, const HwConfig& hw);
  LoweredStep lower() &&;

 private:
  enum class GradTarget { Reduce, Accumulate, AccumulateThenReduce };
  // Gradients reduced together: XLA's all-reduce combiner up to the bucket size.
  struct Bucket {
    std::vector<std::uint32_t> grads;
    std::uint64_t params = 0;
    std::string first, last;
    std::uint32_t all_reduce = 0;
    // Data axes along which these weights differ (the expert axis, for a moe layer's experts):
    // their gradients are summed over the other data axes only.
    std::uint32_t local_axes = 0;
  };
  static constexpr std::size_t kNoSegment = static_cast<std::size_t>(-1);
  // The DCN stage of a gradient reduction runs on the hosts' network, not the ICI: a stream of
  // its own, so the next bucket's reduce-scatter does not queue behind it.
  static constexpr std::uint32_t kDcnStream = 2;
  // A pipeline buffer's rotation waits only for the one before: a collective stream of its own,
  // beside the iteration's compute and its shift.
  static constexpr std::uint32_t kPipelineBufferStream = 1;

  // Where a node sits: before a pipeline's chunk (0), in it (1), after it (2); 0 without one.
  bool in_chunk(std::size_t i) const { return pipelined_ && i >= chunk_.first && i <= chunk_.last; }
  int region(std::size_t i) const { return !pipelined_ || i < chunk_.first ? 0 : i <= chunk_.last ? 1 : 2; }
  // Outside the chunk a stage computes its 1/stages of the replica's batch (the stage axis then
  // carries data, as MaxText shards the pipeline's input and output buffer over it); inside, a
  // microbatch at a time.
  std::uint64_t batch_of(std::size_t i) const { return !pipelined_ ? b_ : in_chunk(i) ? micro_batch_ : outside_batch_; }
  // Under sequence parallelism the replicated layers compute 1/model-axis of the tokens.
  std::uint32_t token_shards(const Node& node) const {
    return em_.sequence_parallel() && node.spec.tensor_parallel.empty() ? mesh_.model_size : 1u;
  }
  // The emitter set to the node's share; every emission for a node goes through it.
  StepEmitter& on(const Node& node) {
    em_.set_batch(batch_of(node.index));
    em_.set_token_shards(token_shards(node));
    return em_;
  }

  void configure_emitter();
  void emit_infeed();

  // Collectives.
  std::uint32_t collective_over(std::uint32_t axes, CollectiveKind kind, Phase phase, const std::string& name, std::uint64_t bytes,
                                DType dtype, std::vector<std::uint32_t> deps);
  void issue_later_stages();
  void gradient_reduction(std::uint32_t axes, CollectiveKind kind, const std::string& name, std::uint64_t bytes, DType dtype,
                          std::vector<std::uint32_t> deps, std::function<void(std::uint32_t)> result);
  void plan_weight_gathers();
  void gathered_before(std::size_t node, bool forward, std::vector<std::uint32_t>& deps);

  // Fusion plan.
  void plan_chains();
  void plan_prologues();
  bool ends_a_chain_feeding_only(std::size_t input, const Node& node) const;
  bool fused(std::size_t i) const { return chain_of_[i] != kModelInput && chains_[chain_of_[i]].size() > 1; }
  const std::vector<const Node*>& chain_at(std::size_t i) const { return chains_[chain_of_[i]]; }
  std::set<const Node*> stats_from_producer_of(const std::vector<const Node*>& chain) const;
  std::vector<std::uint32_t> batch_statistics_reduced(const std::vector<const Node*>& chain, Phase phase,
                                                      std::vector<std::uint32_t> deps);
  bool rides(std::size_t i) const { return fused(i) && rides_into_consumer_[chain_of_[i]] && chain_at(i).back()->index == i; }
  void apply_prologue(const Node& node, const std::vector<std::uint32_t>& ops);

  // Rematerialization plan.
  void plan_remat();
  template <typename Is>
  KeptResults results_kept_as(const Node& node, Is is) const;
  KeptResults kept_results(const Node& node) const;
  KeptResults offloaded_results(const Node& node) const;
  KeptResults device_results(const Node& node) const;
  std::uint64_t host_bytes(const Node& node);
  void offload_after(const Node& node);
  std::vector<std::size_t> offloaded_for(std::size_t seg) const;
  std::uint64_t offloaded_bytes(std::size_t i) const { return program_.ops[*to_host_[i]].host_transfer.bytes; }
  const std::vector<std::uint32_t>& fetch(std::size_t seg);
  std::vector<std::uint32_t> recompute_segment(std::size_t seg, std::vector<std::uint32_t> after);

  // Forward.
  void emit_forward(const Node& node, std::vector<std::uint32_t>& at, const std::vector<std::uint32_t>& extra, bool recomputing,
                    std::uint32_t first_new);
  bool emits_forward(const Node& node) const { return !fused(node.index) || chain_at(node.index).back() == &node; }
  void forward_pass();
  void pipelined_forward();
  void mark_iteration(std::uint32_t first_op, std::uint32_t it, bool bubble);
  std::uint32_t stage_permute(const std::string& name, Phase phase, std::vector<std::uint32_t> deps, std::uint32_t stream = 0);
  void park(const std::string& name, Phase phase, std::optional<std::uint32_t> previous_output, std::vector<std::uint32_t>& carry);
  void emit_loss();

  // Backward and the gradients' reduction.
  void plan_gradients();
  void backward_pass();
  void pipelined_backward();
  void backward_node(std::size_t i, GradTarget target);
  void backward_chain(const Node& node, std::vector<std::uint32_t> deps, const std::vector<std::uint32_t>& recomputed,
                      GradTarget target);
  void backward_layer(const Node& node, std::vector<std::uint32_t> deps, const std::vector<std::uint32_t>& recomputed,
                      GradTarget target);
  std::vector<std::uint32_t> summed(StepEmitter& e, const std::string& name, std::uint64_t rows, std::vector<std::uint32_t> parts);
  std::vector<std::uint32_t> summed_over_tokens(const Node& node, std::vector<std::uint32_t> grads, std::uint64_t params);
  std::vector<std::uint32_t> stage_gradients(const std::string& name, std::vector<std::uint32_t> grads, std::uint64_t params,
                                             GradTarget target);
  std::uint32_t gradient_copies(GradTarget target) const { return target == GradTarget::Reduce ? 1u : pipe_.repeats; }
  Bucket& bucket_for(GradTarget target);
  void add_gradients(const Node& node, const std::string& name, std::vector<std::uint32_t> grads, std::uint64_t params,
                     GradTarget target, const std::string& first, const std::string& last);
  static std::string bucket_name(const Bucket& bk);
  void issue_all_reduce(Bucket& bk, const std::vector<std::uint32_t>& deps);
  void reduce_gradients();

  // After the backward pass.
  std::uint64_t updated_params(const Bucket& bk) const { return (bk.params + updaters_ - 1) / updaters_; }
  void optimizer_update();
  void count_flops();
  void memory_footprint();

  const Workload& w_;
  const HwConfig& hw_;
  ChunkRange chunk_;
  LoweredStep out_;
  const Mesh& mesh_;
  const PipelineSchedule& pipe_;
  const ModelGraph& model_;  // what one core runs
  const std::size_t n_;
  const bool pipelined_;
  const std::uint32_t cores_per_replica_;
  const std::uint64_t b_, micro_batch_, outside_batch_;
  const bool mixed_;
  const DType act_;
  const std::uint32_t act_bytes_;
  const OptimizerCost opt_;
  Program& program_;
  StepEmitter em_;
  const Torus torus_;

  std::uint32_t input_op_ = 0;
  // Gradient reductions' stages still to place (they wait for a collective in flight).
  std::vector<std::function<void()>> later_stages_;
  std::optional<WeightGathers> gathers_;

  // Chains of elementwise layers run as one pass; chain_of_: a node's chain (kModelInput: none).
  std::vector<std::size_t> chain_of_;
  std::vector<std::vector<const Node*>> chains_;
  std::vector<bool> rides_into_consumer_;  // per chain
  std::vector<double> prologue_ops_;       // per node: VPU ops per element of its input

  struct Remat {
    std::vector<std::size_t> segment_of;                 // kNoSegment: a checkpoint (a residual add)
    std::vector<std::vector<std::size_t>> segments;      // each segment's layers, in order
    std::vector<std::vector<std::uint32_t>> recomputed;  // each segment's recomputed outputs
  } remat_;
  std::vector<bool> mlp_in_, mlp_out_;
  bool custom_remat_ = false, checkpoints_offloaded_ = false;
  std::vector<std::optional<std::uint32_t>> to_host_;  // each offloaded result's copy to the host
  std::vector<std::optional<std::vector<std::uint32_t>>> fetched_;  // per segment

  std::vector<std::uint32_t> fwd_;  // the op after which each layer's output exists
  std::uint32_t loss_ = 0;

  std::vector<bool> requires_grad_;
  std::vector<std::vector<std::uint32_t>> dy_, partial_dy_;
  std::vector<const Node*> partial_from_;  // a column layer that left a partial input gradient
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> all_grads_;
  bool sharded_update_ = false, hybrid_fsdp_ = false, overlap_all_reduce_ = false;
  std::uint64_t fsdp_replicas_ = 1, grad_bytes_ = 4, update_share_ = 1, updaters_ = 1;
  DType grad_dtype_ = DType::F32;
};

StepLowering::StepLowering(const Workload& w, const HwConfig& hw)
    : w_(w),
      hw_(hw),
      out_(laid_out(w, hw, chunk_)),
      mesh_(out_.mesh),
      pipe_(out_.pipeline),
      model_(out_.core_model),
      n_(model_.nodes.size()),
      pipelined_(pipe_.stages > 1),
      cores_per_replica_(hw.chip.megacore ? hw.chip.cores : 1),
      b_(out_.per_core_batch),
      micro_batch_(b_ / pipe_.microbatches),
      outside_batch_(b_ / pipe_.stages),
      mixed_(w.precision == Precision::MixedBfloat16),
      act_(mixed_ ? DType::BF16 : DType::F32),
      act_bytes_(dtype_bytes(act_)),
      opt_(optimizer_cost(w.optimizer)),
      program_(out_.program),
      em_(program_, model_, b_, act_, mixed_ ? 1 : w.fp32_matmul_passes),
      torus_(Torus::of(hw)) {}

LoweredStep StepLowering::lower() && {
  configure_emitter();
  emit_infeed();
  plan_weight_gathers();
  plan_chains();
  plan_prologues();
  plan_remat();
  forward_pass();
  emit_loss();
  plan_gradients();
  backward_pass();
  reduce_gradients();
  optimizer_update();
  if (!w_.matmul_output_fusion) unfuse_matmul_epilogues(program_);
  count_flops();
  memory_footprint();
  return std::move(out_);
}

void StepLowering::configure_emitter() {
  program_.steps = w_.steps;
  program_.steps_per_launch = w_.steps_per_execution;
  program_.launch_ps = ns_to_ps(hw_.host.launch_overhead_us * 1000);
  em_.set_model_axis(mesh_.model_axes, mesh_.model_size, w_.all_reduce_algorithm, w_.sequence_parallel);
  em_.set_expert_axis(mesh_.expert_axes);
  em_.set_batch_norm_group(mesh_.batch_norm_axes, mesh_.batch_norm_span);
  StepEmitter::Kernels kernels;
  kernels.flash_attention = w_.flash_attention;
  kernels.quantized_type = w_.quantized_type;
  kernels.quantized_weight_gradients = w_.quantized_weight_gradients;
  kernels.quantized_fixed_scales = w_.quantized_fixed_scales;
  kernels.collective_matmul = w_.collective_matmul;
  kernels.cores_per_device = cores_per_replica_;
  em_.set_kernels(kernels);
}

// Input: this core's share of the batch arrives from the host.
void StepLowering::emit_infeed() {
  out_.infeed.samples_per_core = pipelined_ ? outside_batch_ : b_;
  const std::uint32_t in_elem_bytes = w_.input_dtype == "uint8" ? 1 : w_.input_dtype == "bfloat16" ? 2 : 4;
  const std::uint64_t sample_bytes = w_.bytes_per_sample > 0 ? w_.bytes_per_sample : model_.sample_elements() * in_elem_bytes;
  out_.infeed.bytes_per_core = out_.infeed.samples_per_core * sample_bytes;
  out_.infeed.host_samples_per_s = w_.host_samples_per_s;
  out_.infeed.prefetch_batches = w_.prefetch_batches;
  out_.infeed.batch_jitter_mean_s = w_.batch_jitter_mean_s;
  out_.infeed.jitter_seed = w_.jitter_seed;
  Op infeed;
  infeed.kind = OpKind::Infeed;
  infeed.phase = Phase::Input;
  infeed.name = "infeed";
  infeed.infeed.bytes = out_.infeed.bytes_per_core;
  input_op_ = em_.add(std::move(infeed), {});
}

// Collectives across the replicas (the data axes), with the workload's algorithm and chunking.
std::uint32_t StepLowering::collective_over(std::uint32_t axes, CollectiveKind kind, Phase phase, const std::string& name,
                                            std::uint64_t bytes, DType dtype, std::vector<std::uint32_t> deps) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.bytes = bytes;
  spec.dtype = dtype;
  spec.algorithm = w_.all_reduce_algorithm;
  spec.group_axes = axes;
  spec.chunk_bytes = w_.all_reduce_chunk_bytes;
  return em_.collective(name, phase, spec, std::move(deps));
}

// The sequencer waits at an op until its inputs are done, so a stage that takes a collective
// still in flight is placed later in program order: after the next reduction's reduce-scatter
// (or at the end of the backward pass), as XLA's scheduler places a collective's done late.
// (Placed right after the collective it waits for, it held back the backward pass's compute.)
void StepLowering::issue_later_stages() {
  const auto stages = std::move(later_stages_);  // a stage may leave a later stage of its own
  later_stages_.clear();
  for (const auto& stage : stages) stage();
}

// Gradients are summed over every replica. Over several slices, XLA reduces hierarchically, each
// stage a collective of its own: a reduce-scatter on the ICI, an all-reduce over the DCN of the
// share each chip holds, and (for an all-reduce) an all-gather on the ICI. Reduces `bytes` over
// `axes` (and every slice) and hands `result` the op that completes it.
void StepLowering::gradient_reduction(std::uint32_t axes, CollectiveKind kind, const std::string& name, std::uint64_t bytes,
                                      DType dtype, std::vector<std::uint32_t> deps, std::function<void(std::uint32_t)> result) {
  const std::string what = kind == CollectiveKind::AllReduce ? "/all-reduce" : "/reduce-scatter";
  if (hw_.slices == 1) return result(collective_over(axes, kind, Phase::Gradients, name + what, bytes, dtype, std::move(deps)));
  const std::uint32_t scattered =
      collective_over(axes, CollectiveKind::ReduceScatter, Phase::Gradients, name + "/reduce-scatter", bytes, dtype, std::move(deps));
  issue_later_stages();
  later_stages_.push_back([this, axes, kind, name, bytes, dtype, scattered, result] {
    CollectiveSpec dcn;
    dcn.kind = CollectiveKind::AllReduce;
    dcn.bytes = ceil_div<std::uint64_t>(bytes, group_size(torus_, axes));
    dcn.dtype = dtype;
    dcn.group_axes = 0;  // no ICI stage: the chip's peers in the other slices only
    dcn.dcn_slices = hw_.slices;
    dcn.cores_combined = true;
    dcn.chunk_bytes = w_.all_reduce_chunk_bytes;
    const std::uint32_t across = em_.collective(name + "/dcn/all-reduce", Phase::Gradients, dcn, {scattered});
    program_.ops[across].stream = kDcnStream;
    if (kind != CollectiveKind::AllReduce) return result(across);
    const std::uint32_t gathered =
        collective_over(axes, CollectiveKind::AllGather, Phase::Gradients, name + "/all-gather", bytes, dtype, {across});
    program_.ops[gathered].stream = kDcnStream;
    result(gathered);
  });
}

// Sharded weights are gathered across the replicas in the compute type (XLA moves the cast to
// bfloat16 ahead of the gather).
void StepLowering::plan_weight_gathers() {
  if (!w_.fsdp) return;
  gathers_.emplace(model_, w_.all_reduce_bucket_bytes,
                   [this](const std::string& name, Phase phase, std::uint64_t params, std::vector<std::uint32_t> deps) {
                     return collective_over(mesh_.fsdp_axes, CollectiveKind::AllGather, phase, name, params * act_bytes_, act_,
                                            std::move(deps));
                   });
}

void StepLowering::gathered_before(std::size_t node, bool forward, std::vector<std::uint32_t>& deps) {
  if (!gathers_) return;
  const auto g = forward ? gathers_->before_forward(node) : gathers_->before_backward(node);
  deps.insert(deps.end(), g.begin(), g.end());
}

bool StepLowering::ends_a_chain_feeding_only(std::size_t input, const Node& node) const {
  return input != kModelInput && chain_of_[input] != kModelInput && model_.nodes[input].consumers.size() == 1 &&
         chains_[chain_of_[input]].back() == &model_.nodes[input] && token_shards(model_.nodes[input]) == token_shards(node) &&
         region(input) == region(node.index) &&  // a chain stays on one side of a pipeline chunk's edges
         elements(model_.nodes[input].out) == elements(node.out);  // a chain's pass covers one shape (not a broadcast input's)
}

// Chains of elementwise layers, each layer feeding only the next, run fused as one pass. A layer
// with several inputs (a residual add) continues the chain of whichever input can take it, as
// XLA fuses regardless of operand order, and takes in the chains of its other inputs that feed
// only it (a projection shortcut's batch norm): XLA's loop fusion fuses every elementwise
// producer whose one consumer it is, so the pass reads the shortcut's convolution output
// instead of a normalized copy written by a pass of its own.
void StepLowering::plan_chains() {
  chain_of_.assign(n_, kModelInput);
  if (!w_.fusion) return;
  for (const Node& node : model_.nodes) {
    if (!node.kind->elementwise()) continue;
    const auto extends = std::find_if(node.inputs.begin(), node.inputs.end(),
                                      [&](std::size_t input) { return ends_a_chain_feeding_only(input, node); });
    if (extends == node.inputs.end()) {
      chain_of_[node.index] = chains_.size();
      chains_.push_back({&node});
      continue;
    }
    const std::size_t into = chain_of_[*extends];
    for (auto side = std::next(extends); side != node.inputs.end(); ++side) {
      if (!ends_a_chain_feeding_only(*side, node) || chain_of_[*side] == into) continue;
      std::vector<const Node*> taken = std::move(chains_[chain_of_[*side]]);
      chains_[chain_of_[*side]].clear();
      for (const Node* member : taken) {
        chain_of_[member->index] = into;
        chains_[into].push_back(member);
      }
    }
    chain_of_[node.index] = into;
    chains_[into].push_back(&node);
  }
}

std::set<std::size_t> members_of(const std::vector<const Node*>& chain) {
  std::set<std::size_t> inside;
  for (const Node* member : chain) inside.insert(member->index);
  return inside;
}

// A fused chain's batch norms' statistics, all-reduced together among a distributed batch
// norm's group (one all-reduce per chain and direction, as XLA combines the chain's small
// all-reduces): what the chain's normalization waits for.
std::vector<std::uint32_t> StepLowering::batch_statistics_reduced(const std::vector<const Node*>& chain, Phase phase,
                                                                  std::vector<std::uint32_t> deps) {
  std::uint64_t bytes = 0;
  for (const Node* member : chain) bytes += member->kind->batch_statistics_bytes(*member);
  return on(*chain.back()).batch_statistics_reduced(chain_name(chain), phase, bytes, std::move(deps));
}

// Members whose input comes from outside the chain (its first, a taken-in shortcut's) and
// whose statistics the producing matmul's epilogue computes.
std::set<const Node*> StepLowering::stats_from_producer_of(const std::vector<const Node*>& chain) const {
  const std::set<std::size_t> inside = members_of(chain);
  std::set<const Node*> members;
  for (const Node* member : chain) {
    const std::size_t producer = member->inputs[0];
    if (producer != kModelInput && !inside.count(producer) && model_.nodes[producer].kind->matmul_epilogue() &&
        member->kind->producer_epilogue_vpu_ops() > 0)
      members.insert(member);
  }
  return members;
}

// A chain of pointwise members with one input from outside, feeding only a convolution or a
// dense layer, rides into that layer's input (the Cloud TPU TensorFlow guide: convolutions and
// matmuls support fusion into their inputs): it writes nothing, and the layer's forward and
// weight-gradient matmuls apply it to the chain's input as it arrives, which the chain's first
// member keeps for its own backward anyway. Between the convolutions of a bottleneck block
// that removes the batch norm and ReLU's pass over HBM.
void StepLowering::plan_prologues() {
  rides_into_consumer_.assign(chains_.size(), false);
  prologue_ops_.assign(n_, 0.0);
  if (!w_.fusion || w_.fsdp) return;
  for (std::size_t c = 0; c < chains_.size(); ++c) {
    const auto& chain = chains_[c];
    if (chain.size() < 2 || chain.back()->consumers.size() != 1) continue;
    const Node& last = *chain.back();
    const Node& consumer = model_.nodes[last.consumers[0]];
    if (!consumer.kind->input_prologue() || consumer.inputs.size() != 1 || region(consumer.index) != region(last.index) ||
        token_shards(consumer) != token_shards(last) || gathers_input(em_, consumer))
      continue;
    const std::set<std::size_t> inside = members_of(chain);
    std::set<std::size_t> outside;
    for (const Node* member : chain)
      for (auto input : member->inputs)
        if (!inside.count(input)) outside.insert(input);
    const Node& first = *chain.front();
    if (outside.size() != 1 || *outside.begin() != first.inputs[0] || !first.kind->keeps_input(first)) continue;
    const std::set<const Node*> stats = stats_from_producer_of(chain);
    const bool pointwise = std::all_of(chain.begin(), chain.end(), [&](const Node* member) {
      return member->kind->pointwise_in_chain(stats.count(member) > 0) && (member == &last || !kept_for_backward(em_, *member));
    });
    if (!pointwise) continue;
    rides_into_consumer_[c] = true;
    for (const Node* member : chain)
      prologue_ops_[consumer.index] += member->kind->fused_forward(*member, 0, stats.count(member) > 0).vpu_ops;
  }
}

// Applies the chain riding into `node`'s input to the matmuls among `ops` (its forward's, its
// weight gradient's).
void StepLowering::apply_prologue(const Node& node, const std::vector<std::uint32_t>& ops) {
  if (prologue_ops_[node.index] <= 0) return;
  for (std::uint32_t id : ops)
    if (program_.ops[id].kind == OpKind::Matmul) {
      program_.ops[id].matmul.prologue_vpu_ops_per_lhs_element += prologue_ops_[node.index];
      program_.ops[id].name = chain_name(chain_at(node.inputs[0])) + "+" + program_.ops[id].name;
    }
}

// Rematerialization (activation checkpointing, as jax.checkpoint around each block): the
// forward pass keeps only the outputs of the residual adds (of every remat_adds_per_segment-th:
// a transformer block has two); the backward pass, reaching a segment between two of them, runs
// the segment's forward again from its saved input and then its backward. The second forward's
// ops are named .../recompute/..., and are no model FLOPs.
void StepLowering::plan_remat() {
  remat_.segment_of.assign(n_, kNoSegment);
  remat_.segments.emplace_back();
  std::uint32_t adds = 0;
  for (const Node& node : model_.nodes) {
    if (node.kind->name() == "add" && ++adds % w_.remat_adds_per_segment == 0) {
      if (!remat_.segments.back().empty()) remat_.segments.emplace_back();
      continue;
    }
    remat_.segment_of[node.index] = remat_.segments.size() - 1;
    remat_.segments.back().push_back(node.index);
  }
  remat_.recomputed.resize(remat_.segments.size());
  fetched_.resize(remat_.segments.size());
  // What the remat policy keeps of each layer's results, which the second forward then skips:
  // MaxText's minimal every weight matmul's output, save_dot_except_mlpwi all but an MLP's
  // first layer's, custom what it names (and of those, what goes to the host).
  mlp_in_.assign(n_, false);
  mlp_out_.assign(n_, false);
  for (const Node& node : model_.nodes)
    if (const auto group = column_group(model_, node)) {
      mlp_in_[node.index] = true;
      if (group->row) mlp_out_[group->row->index] = true;
    }
  custom_remat_ = w_.remat && w_.remat_policy == RematPolicy::Custom;
  // The checkpoints (each segment's input, MaxText's decoder_layer_input) go to the host too.
  checkpoints_offloaded_ = custom_remat_ && w_.remat_custom.decoder_layer_input == Keep::Offload;
  out_.infeed.host_offload = custom_remat_ && w_.remat_custom.offloads();
  to_host_.resize(n_);
}

template <typename Is>
KeptResults StepLowering::results_kept_as(const Node& node, Is is) const {
  const RematCustom& custom = w_.remat_custom;
  KeptResults k;
  if (node.kind->name() == "attention") {
    k.qkv = is(custom.qkv);
    k.context = is(custom.context);
    k.out = is(custom.out_proj);
  } else if (mlp_in_[node.index]) {
    k.out = is(custom.mlpwi);
  } else if (mlp_out_[node.index]) {
    k.out = is(custom.mlpwo);
  }
  return k;
}

KeptResults StepLowering::kept_results(const Node& node) const {
  if (!w_.remat) return {};
  switch (w_.remat_policy) {
    case RematPolicy::Full: return {};
    case RematPolicy::Minimal: return {true, false, true};
    case RematPolicy::SaveDotExceptMlpIn: return mlp_in_[node.index] ? KeptResults{} : KeptResults{true, false, true};
    case RematPolicy::Custom: return results_kept_as(node, [](Keep k) { return k != Keep::Remat; });
  }
  return {};
}

KeptResults StepLowering::offloaded_results(const Node& node) const {
  if (!custom_remat_) return {};
  return results_kept_as(node, [](Keep k) { return k == Keep::Offload; });
}

KeptResults StepLowering::device_results(const Node& node) const {
  const KeptResults kept = kept_results(node), offloaded = offloaded_results(node);
  return KeptResults{kept.qkv && !offloaded.qkv, kept.context && !offloaded.context, kept.out && !offloaded.out};
}

std::uint64_t StepLowering::host_bytes(const Node& node) {
  if (checkpoints_offloaded_ && remat_.segment_of[node.index] == kNoSegment) return on(node).rows(elements(node.out)) * act_bytes_;
  return node.kind->kept_bytes(on(node), node, offloaded_results(node));
}

// Each offloaded result's copy to the host, after the op that makes it.
void StepLowering::offload_after(const Node& node) {
  const std::vector<const Node*> members = fused(node.index) ? chain_at(node.index) : std::vector<const Node*>{&node};
  for (const Node* member : members)
    if (const std::uint64_t bytes = host_bytes(*member); bytes > 0)
      to_host_[member->index] = em_.host_transfer(member->spec.name + "/offload", Phase::Forward, bytes, true, {fwd_[member->index]});
}

// The layers whose offloaded results a segment needs: the checkpoint it starts from, its own.
std::vector<std::size_t> StepLowering::offloaded_for(std::size_t seg) const {
  std::vector<std::size_t> layers;
  const std::size_t first = remat_.segments[seg].front();
  if (first > 0 && remat_.segment_of[first - 1] == kNoSegment && to_host_[first - 1]) layers.push_back(first - 1);
  for (std::size_t i : remat_.segments[seg])
    if (to_host_[i]) layers.push_back(i);
  return layers;
}

// What a segment's second forward needs from the host (its input, its offloaded results), back
// in HBM: fetched when the segment before it in the backward pass is recomputed, so that the
// copy runs beside that segment's work (XLA's scheduler moves them ahead so), the last
// segment's when it is reached.
const std::vector<std::uint32_t>& StepLowering::fetch(std::size_t seg) {
  if (fetched_[seg]) return *fetched_[seg];
  std::vector<std::uint32_t> ops;
  for (std::size_t i : offloaded_for(seg))
    ops.push_back(em_.host_transfer(model_.nodes[i].spec.name + "/fetch", Phase::Backward, offloaded_bytes(i), false, {*to_host_[i]}));
  return *(fetched_[seg] = std::move(ops));
}

std::vector<std::uint32_t> StepLowering::recompute_segment(std::size_t seg, std::vector<std::uint32_t> after) {
  if (out_.infeed.host_offload) {
    const std::vector<std::uint32_t>& own = fetch(seg);
    after.insert(after.end(), own.begin(), own.end());
    if (seg > 0) fetch(seg - 1);
  }
  const auto first_new = static_cast<std::uint32_t>(program_.ops.size());
  std::vector<std::uint32_t> at = fwd_;
  std::set<std::size_t> emitted_chains;
  std::vector<std::uint32_t> outputs;
  for (std::size_t i : remat_.segments[seg]) {
    const Node& node = model_.nodes[i];
    if (fused(i) && !emitted_chains.insert(chain_of_[i]).second) continue;
    emit_forward(fused(i) ? *chain_at(i).back() : node, at, after, true, first_new);
    outputs.push_back(at[i]);
  }
  for (std::size_t k = first_new; k < program_.ops.size(); ++k) {
    Op& op = program_.ops[k];
    const auto f = op.name.find("/fwd");
    if (f != std::string::npos) op.name.replace(f, 4, "/recompute");
    op.phase = Phase::Backward;
    op.model_flops = 0;
  }
  em_.mark_recomputed(outputs);
  return outputs;
}

// A layer's forward (a chain's, at its last layer), after the ops that produce its inputs (`at`:
// the op after which each layer's output exists). `extra`: ops the emitted ops wait for besides
// their inputs; `recomputing`: the backward pass's second forward (rematerialization), whose ops
// begin at `first_new`.
void StepLowering::emit_forward(const Node& node, std::vector<std::uint32_t>& at, const std::vector<std::uint32_t>& extra,
                                bool recomputing, std::uint32_t first_new) {
  if (fused(node.index)) {
    const auto& chain = chain_at(node.index);
    // Each member whose input comes from outside (the chain's first, a taken-in shortcut's)
    // takes its statistics in the producing matmul's epilogue when it can.
    const std::set<const Node*> stats_from_producer = stats_from_producer_of(chain);
    for (const Node* member : stats_from_producer) {
      const std::size_t producer = member->inputs[0];
      if (!recomputing || at[producer] >= first_new)
        program_.ops[at[producer]].matmul.epilogue_vpu_ops_per_element += member->kind->producer_epilogue_vpu_ops();
    }
    if (rides_into_consumer_[chain_of_[node.index]]) {  // no pass: the consumer applies it
      const std::vector<std::uint32_t> applied =
          batch_statistics_reduced(chain, Phase::Forward, {at[chain.front()->inputs[0]]});
      for (const Node* member : chain) at[member->index] = applied.front();
      return;
    }
    std::vector<std::uint32_t> deps = extra;
    const std::set<std::size_t> inside = members_of(chain);
    for (const Node* member : chain) {
      for (auto input : member->inputs)
        if (!inside.count(input)) deps.push_back(input == kModelInput ? input_op_ : at[input]);
      gathered_before(member->index, !recomputing, deps);
    }
    deps = batch_statistics_reduced(chain, Phase::Forward, std::move(deps));
    const std::uint32_t op = fused_forward(on(node), chain, deps, stats_from_producer);
    for (const Node* member : chain) at[member->index] = op;
    return;
  }
  std::vector<std::uint32_t> deps = extra;
  for (auto input : node.inputs) deps.push_back(input == kModelInput ? input_op_ : at[input]);
  const auto first_op = static_cast<std::uint32_t>(program_.ops.size());
  auto emitted = [&] {
    std::vector<std::uint32_t> ops(program_.ops.size() - first_op);
    std::iota(ops.begin(), ops.end(), first_op);
    return ops;
  };
  if (const KeptResults kept = kept_results(node); recomputing && kept.any()) {
    // (minimal's and save_dot_*'s gather no weights for it)
    if (w_.remat_policy == RematPolicy::Custom && node.kind->recomputes_weight_matmul(node, kept))
      gathered_before(node.index, false, deps);
    if (const auto op = node.kind->recompute_keeping(on(node), node, deps, kept)) at[node.index] = *op;
    apply_prologue(node, emitted());
    return;
  }
  gathered_before(node.index, !recomputing, deps);
  at[node.index] = node.kind->forward(on(node), node, deps);
  apply_prologue(node, emitted());
}

// Forward, in layer order, each op after the ops that produce its inputs.
void StepLowering::forward_pass() {
  fwd_.assign(n_, 0);
  if (pipelined_) return pipelined_forward();
  for (const Node& node : model_.nodes)
    if (emits_forward(node)) {
      emit_forward(node, fwd_, {}, false, 0);
      if (out_.infeed.host_offload) offload_after(node);
    }
}

// A pipeline iteration's ops are named and marked as its (a bubble's are no model FLOPs); the
// gradient reductions the last one starts are not.
void StepLowering::mark_iteration(std::uint32_t first_op, std::uint32_t it, bool bubble) {
  for (std::size_t k = first_op; k < program_.ops.size(); ++k) {
    Op& op = program_.ops[k];
    if (op.phase == Phase::Gradients) continue;
    op.pipeline = bubble ? PipelineRole::Bubble : PipelineRole::Iteration;
    if (bubble) op.model_flops = 0;
    op.name = fmt::format("{}{}/{}", bubble ? "bubble" : "iteration", it, op.name);
  }
}

// A microbatch's activations (or their gradients) passed one stage on along the pipeline axis:
// MaxText's ppermute of the stages' outputs, and of its input and output buffer.
std::uint32_t StepLowering::stage_permute(const std::string& name, Phase phase, std::vector<std::uint32_t> deps,
                                          std::uint32_t stream) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::Permute;
  spec.bytes = micro_batch_ * elements(model_.nodes[chunk_.last].out) * act_bytes_;
  spec.dtype = act_;
  spec.algorithm = CollectiveAlgorithm::Ring;
  spec.group_axes = mesh_.pipeline_axes;
  const std::uint32_t op = em_.collective(name, phase, spec, std::move(deps));
  program_.ops[op].stream = stream;
  return op;
}

// A circular pipeline with more microbatches than stages parks the last stage's outputs until
// the first stage takes them for the next repeat: one more permute per iteration, of the
// iteration before's output (MaxText's circ_storage), beside the compute.
void StepLowering::park(const std::string& name, Phase phase, std::optional<std::uint32_t> previous_output,
                        std::vector<std::uint32_t>& carry) {
  const bool circular_storage = pipe_.repeats > 1 && pipe_.microbatches > pipe_.stages;
  if (circular_storage && previous_output) carry.push_back(stage_permute(name, phase, {*previous_output}, kPipelineBufferStream));
}

void StepLowering::pipelined_forward() {
  for (std::size_t i = 0; i < chunk_.first; ++i)
    if (emits_forward(model_.nodes[i])) emit_forward(model_.nodes[i], fwd_, {}, false, 0);
  // Every iteration runs the chunk on one microbatch, after the permutes that brought it; the
  // last stages - 1 are a bubble here (every stage computes in every iteration).
  std::vector<std::uint32_t> carry;
  std::uint32_t io = chunk_.first > 0 ? fwd_[chunk_.first - 1] : input_op_;
  std::optional<std::uint32_t> previous_output;
  for (std::uint32_t it = 0; it < pipe_.iterations; ++it) {
    const auto first_op = static_cast<std::uint32_t>(program_.ops.size());
    const std::uint32_t next_io = stage_permute("pipeline/fwd/io", Phase::Forward, {io}, kPipelineBufferStream);
    std::vector<std::uint32_t> parked;
    park("pipeline/fwd/circular", Phase::Forward, previous_output, parked);
    for (std::size_t i = chunk_.first; i <= chunk_.last; ++i)
      if (emits_forward(model_.nodes[i])) emit_forward(model_.nodes[i], fwd_, carry, false, 0);
    const std::uint32_t shift = stage_permute("pipeline/fwd/shift", Phase::Forward, {fwd_[chunk_.last]});
    mark_iteration(first_op, it, it >= pipe_.microbatches * pipe_.repeats);
    io = next_io;
    previous_output = fwd_[chunk_.last];
    carry = {shift, io};
    carry.insert(carry.end(), parked.begin(), parked.end());
  }
  fwd_[chunk_.last] = io;  // the layers after read the outputs from the buffer
  for (std::size_t i = chunk_.last + 1; i < n_; ++i)
    if (emits_forward(model_.nodes[i])) emit_forward(model_.nodes[i], fwd_, {}, false, 0);
}

// Loss and its gradient on the last layer's output (per token for sequence outputs).
void StepLowering::emit_loss() {
  const Node& head = model_.nodes.back();
  const std::uint64_t logits = on(head).rows(elements(head.out));
  const std::uint64_t labels = em_.rows(head.out.size() > 1 ? elements(head.out) / head.out.back() : 1);
  std::vector<std::uint32_t> loss_deps = {fwd_.back()};
  if (head.spec.tensor_parallel == "column") {
    // Logits split by vocabulary: the softmax's maximum, the target's logit and the sum of the
    // exponentials are each all-reduced over the model axis, one f32 per token (Megatron's
    // vocab-parallel cross-entropy).
    for (const char* statistic : {"max", "target_logit", "sum_exp"})
      loss_deps = {on(head).collective(fmt::format("{}/loss/{}/all-reduce", head.spec.name, statistic), Phase::Backward,
                                       on(head).model_axis_spec(CollectiveKind::AllReduce, labels * 4, DType::F32), loss_deps)};
  }
  loss_ = em_.vector(head.spec.activation + "+" + w_.loss, Phase::Backward, logits,
                     activation_vpu_ops(head.spec.activation) + loss_vpu_ops(w_.loss), logits * act_bytes_ + labels * 4,
                     logits * act_bytes_, loss_deps);
  // A softmax head's reductions are the cross-entropy's own (one log-softmax); before another loss
  // they are the head's.
  em_.reduces_along_lanes(loss_, std::max(loss_lane_reductions(w_.loss), activation_lane_reductions(head.spec.activation, false)),
                          logits * act_bytes_);
  // The head's own activation is part of the loss, as Keras fuses softmax into cross-entropy.
  em_.fuse_grad_into_consumer(head.index);
}

void StepLowering::plan_gradients() {
  // A layer needs its input's gradient only when something with weights lies behind it.
  requires_grad_.assign(n_, false);
  for (const Node& node : model_.nodes) {
    requires_grad_[node.index] = node.trainable > 0;
    for (auto input : node.inputs)
      if (input != kModelInput && requires_grad_[input]) requires_grad_[node.index] = true;
  }
  dy_.assign(n_, {});
  partial_dy_.assign(n_, {});
  partial_from_.assign(n_, nullptr);
  buckets_.assign(1, Bucket{});
  // Each replica updates a share of the weights (weight-update sharding, FSDP): gradients are
  // reduce-scattered. Under FSDP the weights stay sharded: the next step's gathers bring them.
  sharded_update_ = w_.weight_update_sharding || w_.fsdp;
  // FSDP over some of the data axes: each replica updates a share among the replicas across those
  // axes, and the shards' gradients are then summed over the other data axes.
  fsdp_replicas_ = w_.fsdp ? out_.replicas / mesh_.data_parallel_size : 1;
  hybrid_fsdp_ = w_.fsdp && mesh_.data_parallel_size > 1;
  // The gradients cross replicas in f32, or cast to bfloat16 for it (the casts ride in the passes
  // either side).
  grad_bytes_ = w_.all_reduce_bf16 ? 2 : 4;
  grad_dtype_ = w_.all_reduce_bf16 ? DType::BF16 : DType::F32;
  // Clipping each replica's own gradients needs their global norm, so no bucket's all-reduce can
  // start before the last gradient exists.
  overlap_all_reduce_ = w_.all_reduce_overlap && w_.gradient_clipping != GradientClipping::BeforeAllReduce;
  // With weight-update sharding a replica updates only its share (rounded up: the last replica's
  // is no larger). A megacore chip's cores split their replica's update between them, as XLA
  // splits every other op of the one device.
  update_share_ = w_.fsdp ? fsdp_replicas_ : sharded_update_ ? out_.replicas : 1;
  updaters_ = update_share_ * cores_per_replica_;
}

// A layer computing a share of the tokens has a share of its weights' gradient: the shares are
// added up over the model axis (in f32) before the gradient joins its bucket.
std::vector<std::uint32_t> StepLowering::summed_over_tokens(const Node& node, std::vector<std::uint32_t> grads,
                                                            std::uint64_t params) {
  if (token_shards(node) == 1) return grads;
  const CollectiveSpec spec = em_.model_axis_spec(CollectiveKind::AllReduce, params * 4, DType::F32);
  return {em_.collective(node.spec.name + "/grad/model/all-reduce", Phase::Gradients, spec, grads)};
}

std::string StepLowering::bucket_name(const Bucket& bk) {
  return bk.first == bk.last ? fmt::format("{}/grad", bk.first) : fmt::format("grads[{}..{}]", bk.first, bk.last);
}

// The sequencer issues ops in program order, so a bucket's all-reduce is placed where its last
// gradient is, to start while the rest of the backward pass runs (or after it, without overlap).
void StepLowering::issue_all_reduce(Bucket& bk, const std::vector<std::uint32_t>& deps) {
  const std::string grads = bucket_name(bk);
  const std::size_t index = static_cast<std::size_t>(&bk - buckets_.data());  // `buckets_` grows: keep the index
  const auto reduced_by = [this, index](std::uint32_t op) { buckets_[index].all_reduce = op; };
  const std::uint32_t replica_axes = mesh_.data_axes & ~bk.local_axes;
  if (hybrid_fsdp_) {
    // The shards are then summed over the other data axes: a stage that waits for the
    // reduce-scatter, so it goes later in program order.
    const std::uint32_t scattered = collective_over(mesh_.fsdp_axes, CollectiveKind::ReduceScatter, Phase::Gradients,
                                                    grads + "/reduce-scatter", bk.params * grad_bytes_, grad_dtype_, deps);
    const std::uint64_t shard_bytes = (bk.params + fsdp_replicas_ - 1) / fsdp_replicas_ * grad_bytes_;
    const std::uint32_t shard_axes = replica_axes & ~mesh_.fsdp_axes;
    if (group_size(torus_, shard_axes) <= 1 && hw_.slices == 1) return reduced_by(scattered);  // no other replica holds them
    issue_later_stages();
    later_stages_.push_back([this, grads, shard_bytes, shard_axes, scattered, reduced_by] {
      gradient_reduction(shard_axes, CollectiveKind::AllReduce, grads + "/shard", shard_bytes, grad_dtype_, {scattered}, reduced_by);
    });
    return;
  }
  gradient_reduction(replica_axes, sharded_update_ ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, grads,
                     bk.params * grad_bytes_, grad_dtype_, deps, reduced_by);
}

// One pass adding up the gradients `parts` of a tensor of `rows` elements (nothing to add: the one).
std::vector<std::uint32_t> StepLowering::summed(StepEmitter& e, const std::string& name, std::uint64_t rows,
                                                std::vector<std::uint32_t> parts) {
  if (parts.size() < 2) return parts;
  return {e.vector(name, Phase::Backward, rows, static_cast<double>(parts.size() - 1), parts.size() * rows * act_bytes_,
                   rows * act_bytes_, parts)};
}

// In a pipeline each iteration's weight gradients are added to the stage's (a pass per layer);
// after the last iteration the sums are reduced, in buckets of their own: the stage's weights
// differ along the pipeline axis, so their gradients are summed over the data axes only, and a
// circular pipeline's stage holds `repeats` chunks of them.
std::vector<std::uint32_t> StepLowering::stage_gradients(const std::string& name, std::vector<std::uint32_t> grads,
                                                         std::uint64_t params, GradTarget target) {
  if (target == GradTarget::Reduce) return grads;
  const std::uint32_t sum = em_.vector(name + "/grad_accumulate", Phase::Backward, params, 1, params * 8, params * 4, std::move(grads));
  return target == GradTarget::Accumulate ? std::vector<std::uint32_t>{} : std::vector<std::uint32_t>{sum};
}

// The bucket gradients of `target` join: the current one, or a fresh one when the current one
// holds gradients reduced over other axes.
StepLowering::Bucket& StepLowering::bucket_for(GradTarget target) {
  const std::uint32_t local = target == GradTarget::Reduce ? 0u : mesh_.pipeline_axes;
  if (buckets_.back().params > 0 && buckets_.back().local_axes != local) {
    if (overlap_all_reduce_) issue_all_reduce(buckets_.back(), buckets_.back().grads);
    buckets_.emplace_back();
  }
  buckets_.back().local_axes = local;
  return buckets_.back();
}

// Weight gradients `grads` of `params` replicated parameters (of `node`'s layer or of the chain
// `name` it ends, whose layers are `first` to `last` in backward order) join their bucket, which
// is reduced once it is full.
void StepLowering::add_gradients(const Node& node, const std::string& name, std::vector<std::uint32_t> grads, std::uint64_t params,
                                 GradTarget target, const std::string& first, const std::string& last) {
  grads = stage_gradients(name, std::move(grads), params, target);
  if (grads.empty()) return;  // accumulated, reduced after the last iteration
  grads = summed_over_tokens(node, std::move(grads), params);
  Bucket& bk = bucket_for(target);
  bk.grads.insert(bk.grads.end(), grads.begin(), grads.end());
  bk.params += params * gradient_copies(target);
  if (bk.first.empty()) bk.first = first;
  bk.last = last;
  all_grads_.insert(all_grads_.end(), grads.begin(), grads.end());
  if (bk.params * 4 >= w_.all_reduce_bucket_bytes) {
    if (overlap_all_reduce_) issue_all_reduce(bk, bk.grads);
    buckets_.emplace_back();
  }
}

// A layer's backward (a chain's, at its last layer). Its output gradient is complete when every
// consumer has produced its share (summed in one pass when there are several).
void StepLowering::backward_node(std::size_t i, GradTarget target) {
  const Node& node = model_.nodes[i];
  if (!partial_dy_[i].empty()) {
    StepEmitter& column = on(*partial_from_[i]);  // the whole tensor, every token
    const std::uint64_t e = column.rows(elements(node.out));
    const std::vector<std::uint32_t> parts = summed(column, node.spec.name + "/bwd/sum_partial_grads", e, std::move(partial_dy_[i]));
    dy_[i].push_back(column.model_partial_sums(node.spec.name + "/bwd/dY_model_sum", Phase::Backward, e, parts));
  }
  if (dy_[i].empty()) return;  // not on the loss's path
  std::vector<std::uint32_t> deps = dy_[i];
  std::vector<std::uint32_t> recomputed;  // the segment's activations, computed again
  if (w_.remat && remat_.segment_of[i] != kNoSegment) {
    const std::size_t seg = remat_.segment_of[i];
    if (remat_.recomputed[seg].empty()) remat_.recomputed[seg] = recompute_segment(seg, dy_[i]);
    recomputed = remat_.recomputed[seg];
  }
  // Gradients of disjoint parts (slices) fill one buffer rather than being summed. (A view
  // passes one gradient on, so one read as parts still gets them summed.)
  const auto takes_part = [&](std::size_t c) { return model_.nodes[c].kind->takes_disjoint_part(); };
  const bool parts = !node.kind->is_view() && !node.consumers.empty() &&
                     std::all_of(node.consumers.begin(), node.consumers.end(), takes_part);
  const std::uint64_t out_rows = on(node).rows(elements(node.out));
  if (fused(i)) return backward_chain(node, std::move(deps), recomputed, target);
  if (!parts) deps = summed(em_, node.spec.name + "/bwd/sum_grads", out_rows, std::move(deps));
  backward_layer(node, std::move(deps), recomputed, target);
}

// The whole chain's backward, reached at its last layer; its gradient flows to the chain's
// input and to the residual inputs of its adds.
void StepLowering::backward_chain(const Node& node, std::vector<std::uint32_t> deps, const std::vector<std::uint32_t>& recomputed,
                                  GradTarget target) {
  const auto& chain = chain_at(node.index);
  std::vector<std::uint32_t> after = recomputed;  // not parts of the gradient
  for (const Node* member : chain) gathered_before(member->index, false, after);
  const std::set<std::size_t> inside = members_of(chain);
  std::uint64_t heads = 0;
  for (const Node* member : chain)
    heads += std::none_of(member->inputs.begin(), member->inputs.end(), [&](std::size_t in) { return inside.count(in) > 0; });
  deps = batch_statistics_reduced(chain, Phase::Backward, std::move(deps));
  const std::uint32_t op = fused_backward(on(node), chain, std::move(deps), after, std::max<std::uint64_t>(1, heads));
  std::uint64_t trainable = 0;
  for (const Node* member : chain) {
    trainable += member->trainable;
    for (auto input : member->inputs)
      if (!inside.count(input) && input != kModelInput && requires_grad_[input]) dy_[input].push_back(op);
  }
  for (const Node* member : chain)
    if (member != &node) dy_[member->index].clear();  // handled here
  if (trainable > 0) add_gradients(node, chain_name(chain), {op}, trainable, target, chain.back()->spec.name, chain.front()->spec.name);
}

void StepLowering::backward_layer(const Node& node, std::vector<std::uint32_t> deps, const std::vector<std::uint32_t>& recomputed,
                                  GradTarget target) {
  // An input whose activation is applied elementwise, with this layer its only consumer, gets
  // its activation gradient in this layer's dX epilogue.
  BackwardContext ctx;
  const std::size_t in0 = node.inputs[0];
  if (node.kind->input_grad_epilogue() && in0 != kModelInput && model_.nodes[in0].consumers.size() == 1 && !fused(in0) &&
      model_.nodes[in0].kind->applies_activation() && model_.nodes[in0].spec.activation != "linear") {
    ctx.fused_input = &model_.nodes[in0];
    em_.fuse_grad_into_consumer(in0);
  }
  ctx.needs_dw = node.spec.trainable;
  ctx.needs_dx = std::any_of(node.inputs.begin(), node.inputs.end(),
                             [&](std::size_t x) { return x != kModelInput && requires_grad_[x]; });
  gathered_before(node.index, false, deps);
  deps.insert(deps.end(), recomputed.begin(), recomputed.end());
  Backward r = node.kind->backward(on(node), node, deps, ctx);
  apply_prologue(node, r.grads);
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    const std::size_t input = node.inputs[k];
    if (input == kModelInput || !requires_grad_[input]) continue;
    if (r.has_dx && !node.spec.column_group.empty()) {
      partial_dy_[input].push_back(r.dx);
      partial_from_[input] = &node;
    } else if (k < r.input_dx.size()) {
      dy_[input].push_back(r.input_dx[k]);
    } else if (r.has_dx) {
      dy_[input].push_back(r.dx);
    }
  }
  if (node.expert_local_trainable > 0) {
    // The experts this chip holds along the expert axis: a bucket of their own, reduced over
    // the other data axes, ahead of the partly filled one.
    Bucket experts;
    experts.grads = r.grads;
    experts.params = node.expert_local_trainable;
    experts.first = experts.last = node.spec.name + "/experts";
    experts.local_axes = mesh_.expert_axes;
    Bucket& bk = *buckets_.insert(std::prev(buckets_.end()), std::move(experts));
    if (node.trainable == node.expert_local_trainable) all_grads_.insert(all_grads_.end(), r.grads.begin(), r.grads.end());
    if (overlap_all_reduce_) issue_all_reduce(bk, bk.grads);
  }
  if (node.trainable > node.expert_local_trainable)
    add_gradients(node, node.spec.name, std::move(r.grads), node.trainable - node.expert_local_trainable, target, node.spec.name,
                  node.spec.name);
}

// Backward, last layer first.
void StepLowering::backward_pass() {
  dy_[n_ - 1] = {loss_};
  if (pipelined_) return pipelined_backward();
  for (std::size_t i = n_; i-- > 0;) backward_node(i, GradTarget::Reduce);
}

void StepLowering::pipelined_backward() {
  for (std::size_t i = n_; i-- > chunk_.last + 1;) backward_node(i, GradTarget::Reduce);
  // The iterations in reverse: each takes its output's gradient from the next stage (the
  // first from the pipeline's output buffer), and sends its input's gradient to the stage
  // before; the first stages - 1 are a bubble here.
  std::vector<std::uint32_t> carry = dy_[chunk_.last];
  std::optional<std::uint32_t> io;  // the buffer's last rotation
  std::optional<std::uint32_t> previous_input_grad;
  for (std::uint32_t k = 0; k < pipe_.iterations; ++k) {
    const std::uint32_t it = pipe_.iterations - 1 - k;
    const auto first_op = static_cast<std::uint32_t>(program_.ops.size());
    for (std::size_t i = chunk_.first; i <= chunk_.last; ++i) {
      dy_[i].clear();
      partial_dy_[i].clear();
      if (remat_.segment_of[i] != kNoSegment) remat_.recomputed[remat_.segment_of[i]].clear();
    }
    dy_[chunk_.last] = carry;
    const std::uint32_t next_io =
        stage_permute("pipeline/bwd/io", Phase::Backward, io ? std::vector<std::uint32_t>{*io} : carry, kPipelineBufferStream);
    std::vector<std::uint32_t> parked;
    park("pipeline/bwd/circular", Phase::Backward, previous_input_grad, parked);
    const GradTarget target = k + 1 == pipe_.iterations ? GradTarget::AccumulateThenReduce : GradTarget::Accumulate;
    for (std::size_t i = chunk_.last + 1; i-- > chunk_.first;) backward_node(i, target);
    // What the chunk's nodes sent to the nodes before it is its input's gradient.
    std::vector<std::uint32_t> input_grads;
    for (std::size_t i = 0; i < chunk_.first; ++i) {
      input_grads.insert(input_grads.end(), dy_[i].begin(), dy_[i].end());
      dy_[i].clear();
    }
    const std::uint32_t shift = stage_permute("pipeline/bwd/shift", Phase::Backward, input_grads);
    mark_iteration(first_op, it, k + 1 < pipe_.stages);
    io = next_io;
    previous_input_grad = shift;
    carry = {shift, next_io};
    carry.insert(carry.end(), parked.begin(), parked.end());
  }
  // The input's gradients land in the buffer, one microbatch per iteration.
  for (std::size_t c = chunk_.first; c <= chunk_.last; ++c)
    for (auto input : model_.nodes[c].inputs)
      if (input != kModelInput && input < chunk_.first && requires_grad_[input]) dy_[input] = carry;
  for (std::size_t i = chunk_.first; i-- > 0;) backward_node(i, GradTarget::Reduce);
}

// The buckets the backward pass left unreduced: all of them when gradients are clipped before
// the all-reduce or the reduction waits for the backward pass, else the last, partly filled one.
void StepLowering::reduce_gradients() {
  if (buckets_.back().params == 0) buckets_.pop_back();
  if (w_.gradient_clipping == GradientClipping::BeforeAllReduce && !buckets_.empty()) {
    // One pass reads every gradient for the norm; each bucket's scaling (and its cast, with
    // bfloat16 all-reduces) is a pass of its own that its all-reduce takes. A megacore chip's
    // cores each hold a whole gradient of their half of the batch until the all-reduce adds them
    // up on the chip, so each core's passes read all of its own.
    std::uint64_t trainable_params = 0;
    for (const auto& bk : buckets_) trainable_params += bk.params;
    const std::uint32_t norm = em_.vector("grads/global_norm", Phase::Gradients, trainable_params, 2, trainable_params * 4, 0, all_grads_);
    for (auto& bk : buckets_) {
      const std::uint32_t clipped =
          em_.vector(bucket_name(bk) + "/clip", Phase::Gradients, bk.params, 1, bk.params * 4, bk.params * grad_bytes_, {norm});
      issue_all_reduce(bk, {clipped});
    }
  } else if (!overlap_all_reduce_) {
    for (auto& bk : buckets_) issue_all_reduce(bk, all_grads_);
  } else if (!buckets_.empty() && buckets_.back().grads.size() > 0 && buckets_.back().params * 4 < w_.all_reduce_bucket_bytes) {
    issue_all_reduce(buckets_.back(), buckets_.back().grads);  // the last, partly filled bucket
  }
  issue_later_stages();
}

// The optimizer updates each bucket's weights once its gradients are reduced; with weight-update
// sharding the updated f32 weights are then all-gathered back into every replica.
void StepLowering::optimizer_update() {
  std::vector<std::uint32_t> reduced;
  for (const auto& bk : buckets_) reduced.push_back(bk.all_reduce);
  // Clipping the reduced gradients: a pass over each core's share of the gradients it updates,
  // the shares' norms then added up over the replicas that updated them (the chips across the
  // FSDP axes, or every replica with weight-update sharding) and, on the chip, over a megacore
  // chip's cores; every update scales its gradients by it as it reads them.
  double clip_ops_per_param = 0;
  if (w_.gradient_clipping == GradientClipping::AfterAllReduce && !buckets_.empty()) {
    std::uint64_t share = 0;
    for (const auto& bk : buckets_) share += updated_params(bk);
    std::uint32_t norm = em_.vector("grads/global_norm", Phase::Optimizer, share, 2, share * grad_bytes_, 0, reduced);
    if (updaters_ > 1) {
      const std::uint32_t sharing_axes = w_.fsdp ? mesh_.fsdp_axes : update_share_ > 1 ? mesh_.data_axes : 0;
      norm = collective_over(sharing_axes, CollectiveKind::AllReduce, Phase::Optimizer, "grads/global_norm/all-reduce", 4, DType::F32,
                             {norm});
    }
    reduced.assign(buckets_.size(), norm);
    clip_ops_per_param = 1;
  }
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    const std::uint64_t p = updated_params(buckets_[k]);
    const std::string params_name = buckets_[k].first == buckets_[k].last
                                        ? buckets_[k].first
                                        : fmt::format("params[{}..{}]", buckets_[k].first, buckets_[k].last);
    const std::uint32_t update =
        em_.vector(params_name + "/" + w_.optimizer + "_update", Phase::Optimizer, p, opt_.vpu_ops_per_param + clip_ops_per_param,
                   p * (4 + grad_bytes_ + 4ull * (opt_.state_f32_per_param + opt_.reread_f32_per_param)),
                   p * (4 + 4ull * opt_.state_f32_per_param + (mixed_ ? 2 : 0)), {reduced[k]});
    if (!w_.weight_update_sharding) continue;
    collective_over(mesh_.data_axes, CollectiveKind::AllGather, Phase::Optimizer, params_name + "/all-gather", buckets_[k].params * 4,
                    DType::F32, {update});
  }
}

void StepLowering::count_flops() {
  for (const Op& op : program_.ops) out_.model_flops_per_core += op.model_flops;
  // Per node, the samples of b it computes: a pipeline's chunk every microbatch of every repeat
  // (its useful iterations), the layers around it the stage's share.
  const auto samples_of = [&](std::size_t i) {
    return static_cast<double>(in_chunk(i) ? micro_batch_ * pipe_.microbatches * pipe_.repeats : batch_of(i)) /
           static_cast<double>(b_);
  };
  std::vector<double> share;
  for (const Node& node : model_.nodes) share.push_back(samples_of(node.index) / token_shards(node));
  out_.textbook_flops_per_core = model_.training_flops_per_sample(share) * static_cast<double>(b_);
  out_.model_flops_per_step = mesh_.model_size > 1 ? out_.model.training_flops_per_sample() * static_cast<double>(out_.global_batch)
                                                    : out_.model_flops_per_core * static_cast<double>(hw_.core_count() * hw_.slices);
}

// Memory per core. A megacore chip holds one copy of the replica's state for its cores. A
// circular pipeline's stage holds `repeats` chunks of weights.
void StepLowering::memory_footprint() {
  std::uint64_t params = model_.params(), trainable = model_.trainable();
  for (std::size_t i = chunk_.first; pipelined_ && i <= chunk_.last; ++i) {
    params += model_.nodes[i].params * (pipe_.repeats - 1);
    trainable += model_.nodes[i].trainable * (pipe_.repeats - 1);
  }
  MemoryFootprint& mem = out_.memory;
  mem.parameters = (params * 4 + (mixed_ ? trainable * 2 : 0)) / cores_per_replica_;
  mem.gradients = trainable * 4 / cores_per_replica_;
  if (w_.fsdp) {  // a share of the f32 weights and gradients, and the groups gathered at a time
    mem.parameters = (params * 4 / fsdp_replicas_ + gathers_->in_flight_params() * act_bytes_) / cores_per_replica_;
    mem.gradients = trainable * 4 / fsdp_replicas_ / cores_per_replica_;
  }
  mem.optimizer_state = trainable * 4ull * opt_.state_f32_per_param / cores_per_replica_ / update_share_;
  mem.activations = out_.infeed.bytes_per_core;
  // What a pipeline's chunk keeps, it keeps for every iteration until the backward pass.
  const auto kept_copies = [&](std::size_t i) -> std::uint64_t { return in_chunk(i) ? pipe_.iterations : 1; };
  if (!w_.remat) {
    for (const Node& node : model_.nodes) mem.activations += saved_bytes(on(node), node, rides(node.index)) * kept_copies(node.index);
  } else {  // the residual adds' outputs, and one segment's activations while it is recomputed
    // What is offloaded is in HBM only while it is used: the recomputed segment's, and the next
    // one's as it is fetched.
    std::uint64_t largest_segment = 0, largest_fetch = 0;
    for (std::size_t seg = 0; seg < remat_.segments.size(); ++seg) {
      std::uint64_t bytes = 0, fetched_bytes = 0;
      for (std::size_t i : remat_.segments[seg]) bytes += saved_bytes(on(model_.nodes[i]), model_.nodes[i], rides(i));
      for (std::size_t i : offloaded_for(seg)) fetched_bytes += offloaded_bytes(i);
      largest_segment = std::max(largest_segment, bytes);
      largest_fetch = std::max(largest_fetch, fetched_bytes);
    }
    for (const Node& node : model_.nodes) {
      if (remat_.segment_of[node.index] == kNoSegment) {
        if (!to_host_[node.index]) mem.activations += on(node).rows(elements(node.out)) * act_bytes_ * kept_copies(node.index);
      } else {
        mem.activations += node.kind->kept_bytes(on(node), node, device_results(node)) * kept_copies(node.index);
      }
    }
    mem.activations += largest_segment + 2 * largest_fetch;
  }
  out_.hbm_capacity_per_core_bytes = hw_.hbm.capacity_bytes / hw_.chip.cores;
}

}  // namespace

LoweredStep lower_training_step(const Workload& w, const HwConfig& hw) { return StepLowering(w, hw).lower(); }

}  // namespace tpusim
