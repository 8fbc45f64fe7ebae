// The model as the driver sees it: a graph of layers with per-sample shapes, parameter counts and
// forward matmul FLOPs, and the per-element vector-unit costs of activations, losses and
// optimizers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/workload.hpp"

namespace tpusim {

class LayerKind;

// Largest tensor, in elements, the driver lowers: far beyond any HBM, and small enough that byte
// counts of a whole step stay exact in 64 bits.
constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 40;

constexpr std::size_t kModelInput = static_cast<std::size_t>(-1);

using Shape = std::vector<std::uint64_t>;  // per sample: [features], [tokens, features] or [h, w, c]
std::uint64_t elements(const Shape& shape);
std::string shape_string(const Shape& shape);

struct Node {
  LayerSpec spec;                 // name filled in
  const LayerKind* kind = nullptr;  // spec.type's
  std::size_t index = 0;
  std::vector<std::size_t> inputs;  // node indices, or kModelInput
  std::vector<std::size_t> consumers;
  Shape in;                       // shape of the first input
  std::vector<Shape> input_shapes;  // of every input, in order
  Shape out;
  std::uint64_t params = 0;       // all of them, as Keras counts (batch norm's moving statistics included)
  std::uint64_t trainable = 0;    // those with gradients and optimizer state
  std::uint64_t frozen = 0;       // those a frozen layer (spec.trainable false) would otherwise train
  // Of `trainable`: those this core alone holds along the mesh's expert axis (its share of a moe
  // layer's experts), whose gradients are summed over the other data axes only.
  std::uint64_t expert_local_trainable = 0;
  double forward_flops = 0;       // per sample, matmuls only (2 per multiply-accumulate)
};

struct ModelGraph {
  Shape input;
  std::vector<Node> nodes;
  // Of a sample, as the host feeds it: the input and the further inputs' (input layers).
  std::uint64_t sample_elements() const;
  std::uint64_t params() const;
  std::uint64_t trainable() const;
  std::uint64_t frozen() const;
  double forward_flops_per_sample() const;
  // Matmul FLOPs of a training step per sample: forward, weight gradients, input gradients.
  // `share[i]`: the part of a sample node i computes (sequence parallelism); empty: all of it.
  double training_flops_per_sample(const std::vector<double>& share = {}) const;
  // The node whose table a tied head reuses (the first embedding), or kModelInput.
  std::size_t embedding() const;
};

// Shape inference over the layer list; throws std::invalid_argument naming the layer's JSON path
// when the layers do not fit together.
ModelGraph analyze_model(const Workload& workload);

// VPU ALU operations per element. Relative costs follow the Pallas TPU notes: add/mul/max/select
// cost one op; exp, tanh and division are several; the exact numbers are assumptions of ours.
// A normalization's vector work per element: statistics and normalization forward (mean,
// variance, subtract, scale, shift), and its gradient.
constexpr double kNormVpuOps = 8;
constexpr double kNormGradVpuOps = 12;
// Each throws std::invalid_argument for a name its table lacks; the *_names() are the tables'
// names in order, which the workload's choices are.
double activation_vpu_ops(const std::string& activation);
double activation_grad_vpu_ops(const std::string& activation);
std::vector<std::string> activation_names();
double loss_vpu_ops(const std::string& loss);  // forward and its gradient, fused, per logit
std::vector<std::string> loss_names();
// Reductions along the last axis, one after another, of an activation (its gradient) and of a
// loss with its gradient: a softmax's max, then its sum; its gradient's sum of dy * y.
std::uint32_t activation_lane_reductions(const std::string& activation, bool gradient);
std::uint32_t loss_lane_reductions(const std::string& loss);
struct OptimizerCost {
  double vpu_ops_per_param = 0;
  std::uint32_t state_f32_per_param = 0;  // optimizer slots, fp32 each
  // f32 values per parameter read a second time: a layer-wise trust ratio (LARS, LAMB) needs a
  // norm over the whole layer before any weight can be updated, so the update is a second pass
  // over the layer after the one that computes the norms.
  std::uint32_t reread_f32_per_param = 0;
};
OptimizerCost optimizer_cost(const std::string& optimizer);
std::vector<std::string> optimizer_names();

}  // namespace tpusim
