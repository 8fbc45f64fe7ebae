#include "workloads/lower.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/topology.hpp"

namespace tpusim {
namespace {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(Program& program) : program_(program) {}

  std::uint32_t add(Op op, std::vector<std::uint32_t> deps) {
    op.id = static_cast<std::uint32_t>(program_.ops.size());
    op.deps = std::move(deps);
    program_.ops.push_back(std::move(op));
    return program_.ops.back().id;
  }

  std::uint32_t matmul(std::string name, Phase phase, MatmulWork work, std::vector<std::uint32_t> deps) {
    Op op;
    op.kind = OpKind::Matmul;
    op.phase = phase;
    op.name = std::move(name);
    op.model_flops = 2.0 * static_cast<double>(work.m * work.k * work.n);
    op.matmul = work;
    return add(std::move(op), std::move(deps));
  }

  std::uint32_t vector(std::string name, Phase phase, VectorWork work, std::vector<std::uint32_t> deps) {
    Op op;
    op.kind = OpKind::Vector;
    op.phase = phase;
    op.name = std::move(name);
    op.vector = work;
    return add(std::move(op), std::move(deps));
  }

 private:
  Program& program_;
};

std::string fused_name(const std::string& base, bool bias, const std::string& activation) {
  std::string name = base;
  if (bias) name += "+bias";
  if (activation != "linear") name += "+" + activation;
  return name;
}

}  // namespace

LoweredStep lower_training_step(const Workload& w, const HwConfig& hw) {
  LoweredStep out;
  out.model = analyze_model(w);
  const ModelShape& model = out.model;

  // Data parallelism: one replica per core, or per chip when the chip's cores form one device.
  const std::uint64_t chips = hw.chip_count();
  out.replicas = static_cast<std::uint32_t>(hw.chip.megacore ? chips : chips * hw.chip.cores);
  const std::uint32_t cores_per_replica = hw.chip.megacore ? hw.chip.cores : 1;
  if (w.per_replica_batch > 0) {
    out.per_replica_batch = w.per_replica_batch;
    out.global_batch = w.per_replica_batch * out.replicas;
  } else {
    out.global_batch = w.global_batch;
    if (w.global_batch % out.replicas != 0)
      throw std::invalid_argument(fmt::format(
          "workload.training.global_batch: {} does not divide over the {} replicas of a {} {} slice "
          "(expected a multiple of {})", w.global_batch, out.replicas, topology_string(hw.slice_dims), hw.name, out.replicas));
    out.per_replica_batch = w.global_batch / out.replicas;
  }
  if (out.per_replica_batch % cores_per_replica != 0)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: the per-replica batch {} does not split over the {} cores of a "
        "megacore chip", w.per_replica_batch > 0 ? "per_replica_batch" : "global_batch",
        out.per_replica_batch, cores_per_replica));
  const std::uint64_t b = out.per_replica_batch / cores_per_replica;
  out.per_core_batch = b;
  std::uint64_t widest = model.input_elements;
  for (const auto& l : model.dense) widest = std::max(widest, l.out);
  if (widest > kMaxElements / b)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: {} samples per core of {} features is beyond what tpusim models (at most {} elements per tensor)",
        w.per_replica_batch > 0 ? "per_replica_batch" : "global_batch", b, widest, kMaxElements));

  const bool mixed = w.precision == Precision::MixedBfloat16;
  const DType act = mixed ? DType::BF16 : DType::F32;
  const std::uint32_t act_bytes = dtype_bytes(act);
  const std::uint32_t passes = mixed ? 1 : w.fp32_matmul_passes;
  const OptimizerCost opt = optimizer_cost(w.optimizer);

  Program& program = out.program;
  program.steps = w.steps;
  ProgramBuilder pb(program);

  // Input: this core's share of the batch arrives from the host.
  out.infeed.samples_per_core = b;
  const std::uint64_t sample_bytes =
      w.bytes_per_sample > 0
          ? w.bytes_per_sample
          : model.input_elements * (w.input_dtype == "uint8" ? 1 : w.input_dtype == "bfloat16" ? 2 : 4);
  out.infeed.bytes_per_core = b * sample_bytes;
  out.infeed.host_samples_per_s = w.host_samples_per_s;
  out.infeed.prefetch_batches = w.prefetch_batches;
  Op infeed;
  infeed.kind = OpKind::Infeed;
  infeed.phase = Phase::Input;
  infeed.name = "infeed";
  infeed.infeed.bytes = out.infeed.bytes_per_core;
  std::uint32_t prev = pb.add(std::move(infeed), {});

  // Forward: each dense layer is one matmul with bias and activation fused in its epilogue.
  // The last layer's activation is folded into the loss, as Keras does for softmax + cross-entropy.
  const std::size_t n = model.dense.size();
  for (std::size_t i = 0; i < n; ++i) {
    const DenseLayer& l = model.dense[i];
    const bool last = i + 1 == n;
    const std::string activation = last ? "linear" : l.activation;
    MatmulWork mm{b, l.in, l.out, act, act, act, passes,
                  (l.bias ? 1.0 : 0.0) + activation_vpu_ops(activation), 0};
    prev = pb.matmul(fused_name(l.name + "/fwd/matmul", l.bias, activation), Phase::Forward, mm, {prev});
  }
  const DenseLayer& head = model.dense.back();
  VectorWork loss{b * head.out, activation_vpu_ops(head.activation) + loss_vpu_ops(w.loss),
                  b * head.out * act_bytes + b * 4 /* int32 labels */, b * head.out * act_bytes};
  prev = pb.vector(head.activation + "+" + w.loss, Phase::Backward, loss, {prev});

  // Backward, last layer first. dY of a layer is ready when the next layer's dX (with this
  // layer's activation gradient fused into its epilogue) is done.
  std::vector<std::uint32_t> grads_ready(n);
  std::uint32_t dy = prev;
  for (std::size_t i = n; i-- > 0;) {
    const DenseLayer& l = model.dense[i];
    const MatmulWork dw{l.in, b, l.out, act, act, DType::F32, passes, 0, 0};
    const std::uint32_t dw_op = pb.matmul(l.name + "/bwd/dW", Phase::Backward, dw, {dy});
    std::vector<std::uint32_t> ready{dw_op};
    if (l.bias) {
      const VectorWork db{b * l.out, 1, b * l.out * act_bytes, l.out * 4};
      ready.push_back(pb.vector(l.name + "/bwd/dbias", Phase::Backward, db, {dy}));
    }
    grads_ready[i] = dw_op;
    // The all-reduce of this layer's gradients starts as soon as they exist and overlaps the
    // rest of the backward pass.
    Op ar;
    ar.kind = OpKind::Collective;
    ar.phase = Phase::Gradients;
    ar.name = l.name + "/grad/all-reduce";
    ar.collective.kind = CollectiveKind::AllReduce;
    ar.collective.bytes = l.params() * 4;
    ar.collective.dtype = DType::F32;
    ar.collective.algorithm = w.all_reduce_algorithm;
    ar.collective.chunk_bytes = w.all_reduce_chunk_bytes;
    grads_ready[i] = pb.add(std::move(ar), ready);
    if (i > 0) {
      const DenseLayer& below = model.dense[i - 1];
      const MatmulWork dx{b, l.out, l.in, act, act, act, passes,
                          activation_grad_vpu_ops(below.activation),
                          below.activation == "linear" ? 0u : act_bytes};
      dy = pb.matmul(fused_name(l.name + "/bwd/dX", false, below.activation + "_grad"), Phase::Backward, dx, {dy});
    }
  }

  // Optimizer update per layer once its gradients are all-reduced: reads the fp32 weights,
  // gradients and slots, writes weights and slots (and the bf16 copy the next step's matmuls read).
  for (std::size_t i = 0; i < n; ++i) {
    const DenseLayer& l = model.dense[i];
    const std::uint64_t p = l.params();
    const VectorWork update{p, opt.vpu_ops_per_param, p * (4 + 4 + 4ull * opt.state_f32_per_param),
                            p * (4 + 4ull * opt.state_f32_per_param + (mixed ? 2 : 0))};
    pb.vector(l.name + "/" + w.optimizer + "_update", Phase::Optimizer, update, {grads_ready[i]});
  }

  for (const Op& op : program.ops) out.model_flops_per_core += op.model_flops;

  // Memory per core. A megacore chip holds one copy of the replica's state for its cores.
  const std::uint64_t params = model.params();
  MemoryFootprint chip_copy;
  chip_copy.parameters = params * 4 + (mixed ? params * 2 : 0);
  chip_copy.gradients = params * 4;
  chip_copy.optimizer_state = params * 4ull * opt.state_f32_per_param;
  MemoryFootprint& mem = out.memory;
  mem.parameters = chip_copy.parameters / cores_per_replica;
  mem.gradients = chip_copy.gradients / cores_per_replica;
  mem.optimizer_state = chip_copy.optimizer_state / cores_per_replica;
  // Activations kept for the backward pass: each layer's input and its activated output.
  mem.activations = b * sample_bytes;
  for (const auto& l : model.dense) mem.activations += b * (l.in + l.out) * act_bytes;
  out.hbm_capacity_per_core_bytes = hw.hbm.capacity_bytes / hw.chip.cores;
  return out;
}

}  // namespace tpusim
