#include "workloads/step_emitter.hpp"

#include <algorithm>

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

std::uint32_t StepEmitter::model_all_reduce(const std::string& name, Phase phase, std::uint64_t elements,
                                            std::vector<std::uint32_t> deps) {
  CollectiveSpec spec;
  spec.kind = CollectiveKind::AllReduce;
  spec.bytes = elements * act_bytes_;
  spec.dtype = act_;
  spec.algorithm = model_algorithm_;
  spec.group_axes = model_axes_;
  return collective(name, phase, spec, std::move(deps));
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
