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

std::uint32_t StepEmitter::host_transfer(const std::string& name, Phase phase, std::uint64_t bytes, bool to_host,
                                         std::vector<std::uint32_t> deps) {
  Op op;
  op.kind = OpKind::HostTransfer;
  op.phase = phase;
  op.name = name;
  op.host_transfer = {bytes, to_host};
  op.stream = to_host ? 1 : 2;  // stream 0 of the engine is the infeed's
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
  auto key = std::make_tuple(phase, elements, deps);
  const auto done = gathered_.find(key);
  if (done != gathered_.end()) return done->second;
  const CollectiveSpec spec = model_axis_spec(CollectiveKind::AllGather, elements * act_bytes_, act_);
  auto [data, after] = split_recomputed(std::move(deps));
  const std::uint32_t gather = collective(name + "/all-gather", phase, spec, std::move(data));
  if (phase == Phase::Backward) program_.ops[gather].stream = kGradientGatherStream;
  after.push_back(gather);
  gathered_.emplace(std::move(key), after);
  return after;
}

std::vector<std::uint32_t> StepEmitter::expert_exchange(const std::string& name, Phase phase, std::uint64_t bytes,
                                                        std::vector<std::uint32_t> deps) {
  if (expert_axes_ == 0) return deps;
  CollectiveSpec spec;
  spec.kind = CollectiveKind::AllToAll;
  spec.bytes = bytes;
  spec.dtype = act_;
  spec.algorithm = CollectiveAlgorithm::Torus;  // axis by axis, the one way an all-to-all runs
  spec.group_axes = expert_axes_;
  return {collective(name + "/all-to-all", phase, spec, std::move(deps))};
}

std::vector<std::uint32_t> StepEmitter::batch_statistics_reduced(const std::string& name, Phase phase, std::uint64_t bytes,
                                                                 std::vector<std::uint32_t> deps) {
  if (batch_norm_axes_ == 0 || bytes == 0) return deps;
  CollectiveSpec spec;
  spec.kind = CollectiveKind::AllReduce;
  spec.bytes = bytes;
  spec.dtype = DType::F32;
  spec.algorithm = CollectiveAlgorithm::Torus;  // axis by axis within the block
  spec.group_axes = batch_norm_axes_;
  spec.group_span = batch_norm_span_;
  const char* direction = phase == Phase::Forward ? "/fwd" : "/bwd";
  const std::uint32_t op = collective(name + direction + "/stats/all-reduce", phase, spec, std::move(deps));
  program_.ops[op].stream = kBatchStatisticsStream;
  return {op};
}

std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> StepEmitter::split_recomputed(
    std::vector<std::uint32_t> deps) const {
  std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> split;
  for (std::uint32_t d : deps) (recomputed_.count(d) ? split.second : split.first).push_back(d);
  return split;
}

CollectiveSpec StepEmitter::window_shift_spec(DType dtype) const {
  CollectiveSpec spec = model_axis_spec(CollectiveKind::Permute, 0, dtype);
  spec.algorithm = CollectiveAlgorithm::BidirRing;
  return spec;
}

bool StepEmitter::windowed(const WeightMatmul& mm) const {
  return sequence_parallel_ && kernels_.collective_matmul && model_size_ > 1 && mm.m >= model_size_;
}

std::uint32_t StepEmitter::split_piece(const WeightMatmul& mm, std::uint32_t index, std::uint64_t rows,
                                       std::vector<std::uint32_t> deps) {
  const std::string name = index == kWholeProduct ? mm.name : fmt::format("{}/part{}", mm.name, index);
  const std::uint32_t id = matmul(name, mm.phase, rows, mm.k, mm.n, mm.out, std::move(deps), mm.epilogue_ops, mm.epilogue_bytes);
  // Every piece multiplies by the same right operand, quantized once by the first.
  return mm.quantize ? quantized(id, mm.gradient, /*rhs_quantized=*/index != kWholeProduct && index > 0) : id;
}

StepEmitter::GatheredProduct StepEmitter::gathered_matmul(const WeightMatmul& mm, std::vector<std::uint32_t> deps) {
  if (!windowed(mm)) {
    std::vector<std::uint32_t> gathered = model_gathered(mm.name + "/input", mm.phase, mm.m * mm.k, std::move(deps));
    return {weight_matmul(mm, gathered), gathered};
  }
  auto [data, recomputed] = split_recomputed(deps);
  CollectiveSpec shift = window_shift_spec(act_);
  std::uint32_t piece = 0, arrived = 0;
  for (std::uint32_t i = 0; i < model_size_; ++i) {
    const std::uint64_t rows = share_rows(mm.m, i);
    std::vector<std::uint32_t> piece_deps = i == 0 ? deps : std::vector<std::uint32_t>{arrived, piece};
    if (i + 1 < model_size_) {  // the next share is on its way while this one is multiplied
      shift.bytes = rows * mm.k * act_bytes_;
      arrived = collective(fmt::format("{}/input/shift{}", mm.name, i + 1), mm.phase, shift,
                           i == 0 ? data : std::vector<std::uint32_t>{arrived});
      if (mm.phase == Phase::Backward) program_.ops[arrived].stream = kGradientGatherStream;
    }
    piece = split_piece(mm, i, rows, std::move(piece_deps));
  }
  recomputed.push_back(arrived);  // the whole gathered operand, beside the recomputed activations
  return {piece, recomputed};
}

std::uint32_t StepEmitter::scattered_matmul(const WeightMatmul& mm, const std::string& sum_name,
                                            std::vector<std::uint32_t> deps) {
  if (!windowed(mm)) return model_partial_sums(sum_name, mm.phase, mm.m * mm.n, {weight_matmul(mm, std::move(deps))});
  const std::uint32_t out_bytes = dtype_bytes(mm.out);
  CollectiveSpec shift = window_shift_spec(mm.out);
  std::uint32_t piece = 0, sum = 0;
  for (std::uint32_t i = 0; i < model_size_; ++i) {
    const std::uint64_t rows = share_rows(mm.m, i);
    piece = split_piece(mm, i, rows, i == 0 ? deps : std::vector<std::uint32_t>{piece});
    if (i == 0) {
      sum = piece;
      continue;
    }
    shift.bytes = share_rows(mm.m, i - 1) * mm.n * out_bytes;
    const std::uint32_t arrived = collective(fmt::format("{}/output/shift{}", mm.name, i), mm.phase, shift, {sum});
    const std::uint64_t elements = rows * mm.n;
    sum = vector(fmt::format("{}/output/add{}", mm.name, i), mm.phase, elements, 1, 2 * elements * out_bytes,
                 elements * out_bytes, {arrived, piece});
  }
  return sum;
}

namespace {

// VPU ops per element of AQT's int8 training (aqt/jax/v2), counted from its jnp operations: the
// scale's absolute maximum (abs, max); quantizing (multiply by the inverse scale, round, clip at
// both ends, convert); stochastic rounding's uniform noise (bits to a float in [0, 1): shift and
// or, subtract; then the add) from the hardware generator MaxText selects (unsafe_rbg); and
// dequantizing the int32 result (convert, multiply by the row's and the column's scales); fp8's
// products accumulate in f32 and only the multiplies remain.
constexpr double kAbsMaxOps = 2, kQuantizeOps = 5, kStochasticRoundingOps = 3, kDequantizeInt8Ops = 3, kDequantizeFp8Ops = 2;

}  // namespace

std::uint32_t StepEmitter::quantized(std::uint32_t id, GradientOperand gradient, bool rhs_quantized) {
  const DType type = kernels_.quantized_type;
  if (type == DType::BF16) return id;
  if (id + 1 != program_.ops.size()) throw std::logic_error("StepEmitter::quantized: the matmul must be the last op emitted");
  Op op = std::move(program_.ops.back());
  program_.ops.pop_back();
  MatmulWork& mm = op.matmul;
  const bool int8 = type == DType::Int8;
  const std::uint32_t stored_bytes = dtype_bytes(mm.lhs);
  // A constant scale needs no maximum; a gradient's is always found.
  const auto scanned = [&](GradientOperand operand) { return !kernels_.quantized_fixed_scales || gradient == operand; };
  const bool lhs_scanned = scanned(GradientOperand::Lhs), rhs_scanned = scanned(GradientOperand::Rhs);
  const bool stochastic = int8;
  const std::uint64_t lhs_elements = lhs_scanned ? mm.lhs_elements_read(mm.batch, mm.m, mm.k) : 0;
  const std::uint64_t rhs_elements = rhs_quantized ? 0 : mm.batch * mm.k * mm.n;
  const double rhs_ops = (rhs_scanned ? kAbsMaxOps : 0) + kQuantizeOps +
                         (stochastic && gradient == GradientOperand::Rhs ? kStochasticRoundingOps : 0);
  VectorWork pass;
  pass.elements = lhs_elements + rhs_elements;
  pass.vpu_ops_per_element =
      pass.elements == 0 ? 0
                         : (static_cast<double>(lhs_elements) * kAbsMaxOps + static_cast<double>(rhs_elements) * rhs_ops) /
                               static_cast<double>(pass.elements);
  // The RHS read for its scales, then for its values.
  pass.hbm_read_bytes = (lhs_elements + (rhs_scanned ? 2 : 1) * rhs_elements) * stored_bytes;
  pass.hbm_write_bytes = rhs_elements * dtype_bytes(type) + 4 * mm.batch * ((lhs_scanned ? mm.m : 0) + (rhs_quantized || !rhs_scanned ? 0 : mm.n));
  std::vector<std::uint32_t> deps = std::move(op.deps);
  if (pass.elements > 0) deps = {vector(fmt::format("{}/{}_scales", op.name, dtype_name(type)), op.phase, pass, std::move(deps))};
  mm.lhs = mm.rhs = type;
  mm.passes = 1;
  mm.lhs_stored_bytes = stored_bytes;
  mm.prologue_vpu_ops_per_lhs_element += kQuantizeOps + (stochastic && gradient == GradientOperand::Lhs ? kStochasticRoundingOps : 0);
  mm.epilogue_vpu_ops_per_element += int8 ? kDequantizeInt8Ops : kDequantizeFp8Ops;
  op.name += std::string("+") + dtype_name(type);
  return add(std::move(op), std::move(deps));
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
