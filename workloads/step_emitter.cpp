#include "workloads/step_emitter.hpp"

#include <algorithm>

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
  if (!sequence_parallel_ || !collective_matmul_ || model_size_ == 1 || m < model_size_) {
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
    piece = quantized(matmul(fmt::format("{}/part{}", name, i), phase, rows, k, n, out, std::move(piece_deps), epilogue_ops));
  }
  return piece;
}

std::uint32_t StepEmitter::quantized(std::uint32_t id) {
  if (!int8_matmuls_) return id;
  Op& op = program_.ops[id];
  op.matmul.lhs = op.matmul.rhs = DType::Int8;
  op.matmul.passes = 1;
  op.name += "+int8";
  return id;
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
