// Convolutions over [height, width, channels] (Keras Conv2D, DepthwiseConv2D) or over a sequence
// [steps, channels] (Keras Conv1D), lowered as their im2col matmul: rows are output positions,
// the contracted axis the kernel's taps times input channels per group. Bias and activation run
// in the epilogue. A dilation spaces the taps apart: the same taps and FLOPs over a wider span.
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
  const Spatial in = spatial_of(node.in), out = spatial_of(node.out);
  const std::uint64_t taps = s.kernel.area();
  const double in_px = static_cast<double>(in.height * in.width), out_px = static_cast<double>(out.height * out.width);
  const double g = static_cast<double>(s.groups);
  ConvGeometry c;
  c.m = em.rows(out.height * out.width);
  c.k = taps * in.channels / s.groups;
  c.n = s.filters;
  c.dx_m = em.rows(in.height * in.width);
  c.dx_k = taps * s.filters / s.groups;
  // Each input pixel is read once however many output windows use it.
  c.fwd_lhs_fraction = in_px * g / (out_px * static_cast<double>(taps));
  c.dx_lhs_fraction = out_px * g / (in_px * static_cast<double>(taps));
  c.dw_lhs_fraction = c.fwd_lhs_fraction;
  return c;
}

enum class ConvType { Conv2d, Depthwise, Conv1d };

const char* name_of(ConvType t) {
  switch (t) {
    case ConvType::Conv2d: return "conv2d";
    case ConvType::Depthwise: return "depthwise_conv2d";
    case ConvType::Conv1d: return "conv1d";
  }
  return "?";
}

// Depthwise: Keras's DepthwiseConv2D, each input channel convolved on its own into
// depth_multiplier channels: a convolution with as many groups as input channels.
class Conv : public MatmulLayerKind {
 public:
  explicit Conv(ConvType type) : MatmulLayerKind(name_of(type)), type_(type) {}
  std::vector<std::string> keys() const override {
    if (type_ == ConvType::Depthwise) return {"depth_multiplier", "kernel", "strides", "dilation", "padding", "pads", "activation", "use_bias"};
    return {"filters", "kernel", "strides", "dilation", "groups", "padding", "pads", "activation", "use_bias"};
  }
  std::vector<std::string> required_keys() const override {
    if (type_ == ConvType::Depthwise) return {"kernel"};
    return {"filters", "kernel"};
  }

  void infer(Node& node, const InferContext& ctx) const override {
    check_window_rank(node, ctx, {type_ == ConvType::Conv1d ? std::size_t{2} : std::size_t{3}});
    const Spatial in = spatial_of(node.in);
    if (type_ == ConvType::Depthwise) {
      node.spec.groups = in.channels;
      node.spec.filters = ctx.checked_mul(in.channels, node.spec.depth_multiplier);
    }
    const LayerSpec& s = node.spec;
    const WindowSize strides = s.strides.w ? s.strides : WindowSize{1, 1};  // the default (0) is 1 for a convolution
    if (in.channels % s.groups || s.filters % s.groups)
      ctx.fail("groups", fmt::format("{} groups do not divide {} input and {} output channels", s.groups, in.channels, s.filters));
    const auto [ho, wo] = window_out(in, s.kernel, strides, s.dilation, s);
    if (ho == 0 || wo == 0)
      ctx.fail("kernel", fmt::format("a {} kernel{} does not fit a {} input", window_string(node, s.kernel),
                                     s.dilation == WindowSize::square(1) ? "" : " dilated by " + window_string(node, s.dilation),
                                     shape_string(node.in)));
    node.out = spatial_shape(node.in, ho, wo, s.filters);
    const std::uint64_t weights = ctx.checked_mul(s.kernel.area() * (in.channels / s.groups), s.filters);
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
      r.dx = em.matmul(base + "/dX" + epi.name_suffix, Phase::Backward, c.dx_m, c.dx_k, spatial_of(node.in).channels, em.act(), dy,
                       epi.vpu_ops, epi.operand_bytes, 1, c.dx_lhs_fraction);
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
  ConvType type_;
};

}  // namespace

const LayerKind& conv2d_kind() {
  static const Conv kind(ConvType::Conv2d);
  return kind;
}

const LayerKind& depthwise_conv2d_kind() {
  static const Conv kind(ConvType::Depthwise);
  return kind;
}

const LayerKind& conv1d_kind() {
  static const Conv kind(ConvType::Conv1d);
  return kind;
}

}  // namespace tpusim::kinds
