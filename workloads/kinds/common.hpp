// Pieces several layer kinds share.
#pragma once

#include <string>

#include "workloads/layer_kind.hpp"
#include "workloads/step_emitter.hpp"

namespace tpusim::kinds {

// Whether a tensor of shape `in` broadcasts to `out` as numpy broadcasts: aligned from the right,
// each of its axes equal to out's or 1, fewer axes allowed.
bool broadcasts_to(const Shape& in, const Shape& out);

// Elements of the node's (first) input and of its output this core computes.
inline std::uint64_t in_elements(const StepEmitter& em, const Node& node) { return em.rows(elements(node.in)); }
inline std::uint64_t out_elements(const StepEmitter& em, const Node& node) { return em.rows(elements(node.out)); }

// The gradient reaches the input once `op` is done.
inline Backward pass_through(std::uint32_t op, Backward r = {}) {
  r.dx = op;
  r.has_dx = true;
  return r;
}

// The input of a windowed layer (convolution, pool) as height, width and channels: an image
// [height, width, channels] as it is, a sequence [steps, channels] as one row of steps.
struct Spatial {
  std::uint64_t height, width, channels;
};
Spatial spatial_of(const Shape& in);
// The windowed layer's output shape for `height` x `width` positions of `channels`, of the
// input's rank.
Shape spatial_shape(const Shape& in, std::uint64_t height, std::uint64_t width, std::uint64_t channels);

// Checks a windowed layer's input rank (`ranks`: 3 for images, 2 for sequences, or both) and,
// over a sequence, that each window was given as one number, which then runs along the steps
// (a height of 1); explicit pads are [top, bottom, left, right] on an image, [before, after] on
// a sequence; "causal" padding only for a conv1d.
void check_window_rank(Node& node, const InferContext& ctx, std::vector<std::size_t> ranks);

// Output height and width of a window of `k` dilated by `d` at stride `s` over the input: with
// explicit pads (or causal padding) the windows that fit the padded input, else same
// (ceil(in/s)) or valid (the windows that fit). 0 when none fits.
struct WindowOut {
  std::uint64_t height, width;
};
WindowOut window_out(const Spatial& in, WindowSize k, WindowSize s, WindowSize d, const LayerSpec& spec);
// "3x3", or "5" along a sequence.
std::string window_string(const Node& node, WindowSize w);

// What a matmul's input-gradient epilogue applies for an input whose activation gradient is
// fused into it (BackwardContext::fused_input): VPU ops and bytes per element, and a name suffix.
struct InputGradEpilogue {
  double vpu_ops = 0;
  std::uint32_t operand_bytes = 0;
  std::string name_suffix;
};
InputGradEpilogue fused_input_gradient(const StepEmitter& em, const BackwardContext& ctx);

// A layer whose output comes out of a matmul (dense, convolutions): bias, its activation and a
// batch norm's statistics ride in the epilogue, its input gradient's epilogue can apply its
// input's activation gradient, and its backward keeps its input (for the weight gradient) and
// its pre-activation (for its activation's gradient).
class MatmulLayerKind : public LayerKind {
 public:
  using LayerKind::LayerKind;
  bool matmul_epilogue() const override { return true; }
  bool input_grad_epilogue() const override { return true; }
  bool applies_activation() const override { return true; }
  bool keeps_input(const Node& node) const override { return node.spec.trainable; }  // for the weight gradient
  bool input_prologue() const override { return true; }
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    return node.spec.activation != "linear" ? out_elements(em, node) * em.act_bytes() : 0;
  }
  std::optional<std::uint32_t> recompute_keeping(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps,
                                                 const KeptResults& kept) const override {
    if (kept.out) return std::nullopt;
    return forward(em, node, std::move(deps));
  }
  bool recomputes_weight_matmul(const Node&, const KeptResults& kept) const override { return !kept.out; }
  // Its output as the next layer takes it: a row-split layer's reduce-scattered under sequence
  // parallelism.
  std::uint64_t kept_bytes(const StepEmitter& em, const Node& node, const KeptResults& kept) const override {
    if (!kept.out) return 0;
    const std::uint64_t bytes = out_elements(em, node) * em.act_bytes();
    return em.sequence_parallel() && node.spec.tensor_parallel == "row" ? bytes / node.spec.model_shards : bytes;
  }
};

// Whether a matmul layer's own activation needs a gradient pass of its own (it has one, and
// nothing else applies its gradient).
bool has_own_activation_gradient(const StepEmitter& em, const Node& node);
// That pass, when there is one; returns the ops the weight and input gradients wait for.
std::vector<std::uint32_t> own_activation_gradient(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy);

}  // namespace tpusim::kinds
