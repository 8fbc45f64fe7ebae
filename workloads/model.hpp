// The model as the driver sees it: dense layers with their shapes, parameter counts and FLOPs,
// and the per-element vector-unit costs of activations, losses and optimizers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace tpusim {

// Largest tensor, in elements, the driver lowers: far beyond any HBM, and small enough that byte
// counts of a whole step stay exact in 64 bits.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 40;

struct DenseLayer {
  std::string name;
  std::uint64_t in = 0, out = 0;
  bool bias = true;
  std::string activation;
  std::uint64_t params() const { return in * out + (bias ? out : 0); }
};

struct ModelShape {
  std::uint64_t input_elements = 0;  // per sample, after flatten
  std::vector<DenseLayer> dense;
  std::uint64_t params() const;
  // Forward matmul FLOPs per sample (2 per multiply-accumulate).
  double forward_flops_per_sample() const;
};

// Throws std::invalid_argument naming the layer when the layer stack cannot be built.
ModelShape analyze_model(const Workload& workload);

// VPU ALU operations per element. Relative costs follow the Pallas TPU notes: add/mul/max/select
// cost one op; exp, tanh and division are several; the exact numbers are assumptions of ours.
double activation_vpu_ops(const std::string& activation);
double activation_grad_vpu_ops(const std::string& activation);
double loss_vpu_ops(const std::string& loss);  // forward and its gradient, fused, per logit
struct OptimizerCost {
  double vpu_ops_per_param = 0;
  std::uint32_t state_f32_per_param = 0;  // optimizer slots, fp32 each
};
OptimizerCost optimizer_cost(const std::string& optimizer);

}  // namespace tpusim
