// A 2D convolution over [height, width, channels] (Keras Conv2D), lowered as its im2col matmul:
// rows are output pixels, the contracted axis the kernel's taps times input channels per group.
// Bias and activation run in the epilogue.
#include <optional>

#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

struct ConvGeometry {
  std::uint64_t m, k, n;     // forward im2col product
  std::uint64_t dx_m, dx_k;  // input gradient: rows of the input, K of the transposed product
  double fwd_lhs_fraction, dx_lhs_fraction, dw_lhs_fraction;
};

ConvGeometry geometry(const StepEmitter& em, const Node& node) {
  const LayerSpec& s = node.spec;
  const double in_px = static_cast<double>(node.in[0] * node.in[1]), out_px = static_cast<double>(node.out[0] * node.out[1]);
  const double taps = static_cast<double>(s.kernel * s.kernel), g = static_cast<double>(s.groups);
  ConvGeometry c;
  c.m = em.rows(node.out[0] * node.out[1]);
  c.k = s.kernel * s.kernel * node.in[2] / s.groups;
  c.n = s.filters;
  c.dx_m = em.rows(node.in[0] * node.in[1]);
  c.dx_k = s.kernel * s.kernel * s.filters / s.groups;
  // Each input pixel is read once however many output windows use it.
  c.fwd_lhs_fraction = in_px * g / (out_px * taps);
  c.dx_lhs_fraction = out_px * g / (in_px * taps);
  c.dw_lhs_fraction = c.fwd_lhs_fraction;
  return c;
}

// `depthwise`: Keras's DepthwiseConv2D, each input channel convolved on its own into
// depth_multiplier channels: a convolution with as many groups as input channels.
class Conv2d : public MatmulLayerKind {
 public:
  explicit Conv2d(bool depthwise) : MatmulLayerKind(depthwise ? "depthwise_conv2d" : "conv2d"), depthwise_(depthwise) {}
  std::vector<std::string> keys() const override {
    if (depthwise_) return {"depth_multiplier", "kernel", "strides", "padding", "pads", "activation", "use_bias"};
    return {"filters", "kernel", "strides", "groups", "padding", "pads", "activation", "use_bias"};
  }
  std::vector<std::string> required_keys() const override {
    if (depthwise_) return {"kernel"};
    return {"filters", "kernel"};
  }

  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 3, "an [height, width, channels]");
    if (depthwise_) {
      node.spec.groups = node.in[2];
      node.spec.filters = ctx.checked_mul(node.in[2], node.spec.depth_multiplier);
    }
    const LayerSpec& s = node.spec;
    const Shape& in = node.in;
    const std::uint64_t stride = s.strides ? s.strides : 1;
    if (in[2] % s.groups || s.filters % s.groups)
      ctx.fail("groups", fmt::format("{} groups do not divide {} input and {} output channels", s.groups, in[2], s.filters));
    const auto [ho, wo] = window_out(in, s.kernel, stride, s);
    if (ho == 0 || wo == 0)
      ctx.fail("kernel", fmt::format("a {}x{} kernel does not fit a {} input", s.kernel, s.kernel, shape_string(in)));
    node.out = {ho, wo, s.filters};
    const std::uint64_t weights = ctx.checked_mul(s.kernel * s.kernel * (in[2] / s.groups), s.filters);
    node.params = node.trainable = weights + (s.use_bias ? s.filters : 0);
    node.forward_flops = 2.0 * static_cast<double>(ho * wo) * static_cast<double>(weights);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const ConvGeometry c = geometry(em, node);
    const double epilogue = (s.use_bias ? 1.0 : 0.0) + activation_vpu_ops(s.activation);
    return em.matmul(fused_name(s.name + "/fwd/conv", s.use_bias, s.activation), Phase::Forward, c.m, c.k, c.n, em.act(),
                     std::move(deps), epilogue, 0, 1, c.fwd_lhs_fraction);
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                    const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    dy = own_activation_gradient(em, node, std::move(dy));
    const ConvGeometry c = geometry(em, node);
    Backward r;
    const std::optional<std::uint32_t> dw =  // none for a frozen layer
        ctx.needs_dw ? std::optional(em.matmul(base + "/dW", Phase::Backward, c.k, c.m, c.n, DType::F32, dy, 0, 0, 1, c.dw_lhs_fraction))
                     : std::nullopt;
    if (ctx.needs_dx) {
      const InputGradEpilogue epi = fused_input_gradient(em, ctx);
      r.dx = em.matmul(base + "/dX" + epi.name_suffix, Phase::Backward, c.dx_m, c.dx_k, node.in[2], em.act(), dy, epi.vpu_ops,
                       epi.operand_bytes, 1, c.dx_lhs_fraction);
      r.has_dx = true;
      // Every input pixel runs through every tap, but with a stride only 1/stride^2 of the
      // taps meet an output: the rest multiply zeros. The useful work is the forward's.
      em.op(r.dx).model_flops = em.samples() * node.forward_flops;
    }
    if (!dw) return r;
    if (s.use_bias) em.fuse_bias_gradient(*dw, out_elements(em, node));
    r.grads.push_back(*dw);
    return r;
  }

 private:
  bool depthwise_;
};

}  // namespace

const LayerKind& conv2d_kind() {
  static const Conv2d kind(false);
  return kind;
}

const LayerKind& depthwise_conv2d_kind() {
  static const Conv2d kind(true);
  return kind;
}

}  // namespace tpusim::kinds
