#include "workloads/step_emitter.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace tpusim {

std::uint32_t StepEmitter::add(Op op, std::vector<std::uint32_t> deps) {
  op.id = static_cast<std::uint32_t>(program_.ops.size());
  op.deps = std::move(deps);
  program_.ops.push_back(std::move(op));
  return program_.ops.back().id;
}

std::uint32_t StepEmitter::matmul(const std::string& name, Phase phase, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                                  DType out, std::vector<std::uint32_t> deps, double epilogue_ops,
                                  std::uint32_t epilogue_bytes, std::uint64_t batch, double lhs_fraction) {
  Op op;
  op.kind = OpKind::Matmul;
  op.phase = phase;
  op.name = name;
  MatmulWork& mm = op.matmul;
  mm.m = m;
  mm.k = k;
  mm.n = n;
  mm.batch = batch;
  mm.lhs = mm.rhs = act_;
  mm.out = out;
  mm.passes = passes_;
  mm.epilogue_vpu_ops_per_element = epilogue_ops;
  mm.epilogue_operand_bytes_per_element = epilogue_bytes;
  mm.lhs_read_fraction = std::min(1.0, lhs_fraction);
  op.model_flops = 2.0 * static_cast<double>(batch) * static_cast<double>(m * k * n);
  return add(std::move(op), std::move(deps));
}

std::uint32_t StepEmitter::collective(const std::string& name, Phase phase, const CollectiveSpec& spec,
                                      std::vector<std::uint32_t> deps) {
  Op op;
  op.kind = OpKind::Collective;
  op.phase = phase;
  op.name = name;
  op.collective = spec;
  return add(std::move(op), std::move(deps));
}

std::uint32_t StepEmitter::model_partial_sums(const std::string& name, Phase phase, std::uint64_t elements,
                                              std::vector<std::uint32_t> deps) {
  const CollectiveSpec spec =
      model_axis_spec(sequence_parallel_ ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, elements * act_bytes_, act_);
  return collective(name + (sequence_parallel_ ? "/reduce-scatter" : "/all-reduce"), phase, spec, std::move(deps));
}

std::vector<std::uint32_t> StepEmitter::model_gathered(const std::string& name, Phase phase, std::uint64_t elements,
                                                       std::vector<std::uint32_t> deps) {
  if (!sequence_parallel_) return deps;
  const CollectiveSpec spec = model_axis_spec(CollectiveKind::AllGather, elements * act_bytes_, act_);
  std::vector<std::uint32_t> data, after;
  for (std::uint32_t d : deps) (recomputed_.count(d) ? after : data).push_back(d);
  const std::uint32_t gather = collective(name + "/all-gather", phase, spec, std::move(data));
  // A gradient's gather is issued once the gradient exists, in flight beside the recomputed
  // forward's collectives rather than queued behind them.
  if (phase == Phase::Backward) program_.ops[gather].stream = 1;
  after.push_back(gather);
  return after;
}

std::uint32_t StepEmitter::gathered_matmul(const std::string& name, Phase phase, std::uint64_t m, std::uint64_t k,
                                           std::uint64_t n, DType out, std::vector<std::uint32_t> deps, double epilogue_ops) {
  if (!sequence_parallel_ || !kernels_.collective_matmul || model_size_ == 1 || m < model_size_) {
    deps = model_gathered(name + "/input", phase, m * k, std::move(deps));
    return quantized(matmul(name, phase, m, k, n, out, std::move(deps), epilogue_ops));
  }
  CollectiveSpec shift = model_axis_spec(CollectiveKind::Permute, 0, act_);
  std::uint32_t piece = 0, arrived = 0;
  for (std::uint32_t i = 0; i < model_size_; ++i) {
    const std::uint64_t rows = m / model_size_ + (i < m % model_size_ ? 1 : 0);
    std::vector<std::uint32_t> piece_deps = i == 0 ? deps : std::vector<std::uint32_t>{arrived, piece};
    if (i + 1 < model_size_) {  // the next share is on its way while this one is multiplied
      shift.bytes = rows * k * act_bytes_;
      arrived = collective(fmt::format("{}/input/shift{}", name, i + 1), phase, shift, i == 0 ? deps : std::vector<std::uint32_t>{arrived});
    }
    piece = quantized(matmul(fmt::format("{}/part{}", name, i), phase, rows, k, n, out, std::move(piece_deps), epilogue_ops),
                      GradientOperand::None, /*rhs_quantized=*/i > 0);
  }
  return piece;
}

namespace {

// VPU ops per element of AQT's int8 training (aqt/jax/v2), counted from its jnp operations: the
// scale's absolute maximum (abs, max); quantizing (multiply by the inverse scale, round, clip at
// both ends, convert); stochastic rounding's uniform noise (bits to a float in [0, 1): shift and
// or, subtract; then the add) from the hardware generator MaxText selects (unsafe_rbg); and
// dequantizing the int32 result (convert, multiply by the row's and the column's scales).
constexpr double kAbsMaxOps = 2, kQuantizeOps = 5, kStochasticRoundingOps = 3, kDequantizeOps = 3;

}  // namespace

std::uint32_t StepEmitter::quantized(std::uint32_t id, GradientOperand gradient, bool rhs_quantized) {
  if (!kernels_.int8_matmuls) return id;
  if (id + 1 != program_.ops.size()) throw std::logic_error("StepEmitter::quantized: the matmul must be the last op emitted");
  Op op = std::move(program_.ops.back());
  program_.ops.pop_back();
  MatmulWork& mm = op.matmul;
  const std::uint32_t stored_bytes = dtype_bytes(mm.lhs);
  const std::uint64_t lhs_elements = mm.lhs_elements_read(mm.batch, mm.m, mm.k);
  const std::uint64_t rhs_elements = rhs_quantized ? 0 : mm.batch * mm.k * mm.n;
  const double rhs_ops = kAbsMaxOps + kQuantizeOps + (gradient == GradientOperand::Rhs ? kStochasticRoundingOps : 0);
  VectorWork pass;
  pass.elements = lhs_elements + rhs_elements;
  pass.vpu_ops_per_element =
      pass.elements == 0 ? 0
                         : (static_cast<double>(lhs_elements) * kAbsMaxOps + static_cast<double>(rhs_elements) * rhs_ops) /
                               static_cast<double>(pass.elements);
  pass.hbm_read_bytes = (lhs_elements + 2 * rhs_elements) * stored_bytes;  // the RHS twice: its scales, then its values
  pass.hbm_write_bytes = rhs_elements + 4 * mm.batch * (mm.m + (rhs_quantized ? 0 : mm.n));
  const std::uint32_t scaled = vector(op.name + "/int8_scales", op.phase, pass, std::move(op.deps));
  mm.lhs = mm.rhs = DType::Int8;
  mm.passes = 1;
  mm.lhs_stored_bytes = stored_bytes;
  mm.prologue_vpu_ops_per_lhs_element += kQuantizeOps + (gradient == GradientOperand::Lhs ? kStochasticRoundingOps : 0);
  mm.epilogue_vpu_ops_per_element += kDequantizeOps;
  op.name += "+int8";
  return add(std::move(op), {scaled});
}

std::uint32_t StepEmitter::vector(const std::string& name, Phase phase, VectorWork work, std::vector<std::uint32_t> deps) {
  Op op;
  op.kind = OpKind::Vector;
  op.phase = phase;
  op.name = name;
  op.vector = work;
  return add(std::move(op), std::move(deps));
}

void StepEmitter::fuse_bias_gradient(std::uint32_t dw, std::uint64_t sums) {
  Op& op = program_.ops[dw];
  const MatmulWork& mm = op.matmul;
  op.matmul.epilogue_vpu_ops_per_element += static_cast<double>(sums) / static_cast<double>(mm.batch * mm.m * mm.n);
  op.name += "+dbias";
}

std::string fused_name(const std::string& base, bool bias, const std::string& activation) {
  std::string name = base;
  if (bias) name += "+bias";
  if (activation != "linear") name += "+" + activation;
  return name;
}

}  // namespace tpusim
