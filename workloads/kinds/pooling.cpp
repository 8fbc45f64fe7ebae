// Max and average pooling over windows of [height, width, channels], or along the steps of a
// sequence [steps, channels] (Keras MaxPooling1D, AveragePooling1D), and their inverse,
// nearest-neighbour upsampling (Stable Diffusion's UNet, Keras UpSampling2D).
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Pool : public LayerKind {
 public:
  explicit Pool(bool max) : LayerKind(max ? "max_pool" : "avg_pool"), max_(max) {}
  std::vector<std::string> keys() const override { return {"pool", "strides", "padding", "pads", "ceil_mode"}; }
  std::vector<std::string> required_keys() const override { return {"pool"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    check_window_rank(node, ctx, {3, 2});
    const LayerSpec& s = node.spec;
    const Spatial in = spatial_of(node.in);
    const WindowSize stride = s.strides.w ? s.strides : s.pool;
    const auto [ho, wo] = window_out(in, s.pool, stride, WindowSize::square(1), s);
    if (ho == 0 || wo == 0) ctx.fail("pool", "the window does not fit the input");
    node.out = spatial_shape(node.in, ho, wo, in.channels);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/" + name(), Phase::Forward, e_out, window(node),
                     in_elements(em, node) * em.act_bytes(), e_out * em.act_bytes(), std::move(deps));
  }

  // Max pooling routes each gradient to the window's maximum, found again in the saved input.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_in = in_elements(em, node), e_out = out_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/" + name(), Phase::Backward, e_in, window(node),
                                  (e_out + (max_ ? e_in : 0)) * em.act_bytes(), e_in * em.act_bytes(), std::move(dy)));
  }

  bool keeps_input(const Node&) const override { return max_; }

 private:
  static double window(const Node& node) { return static_cast<double>(node.spec.pool.area()); }
  bool max_;
};

// Each position of [height, width, channels] repeated scale x scale times: a copy, each input
// element read once and each output element written. Its gradient sums each output block back
// into its input position (scale^2 - 1 adds per input element, the output gradient read once).
class Upsample : public LayerKind {
 public:
  Upsample() : LayerKind("upsample") {}
  std::vector<ParamSpec> own_keys() const override {
    return {layer_key("scale", ParamType::Int, "", 2,
                      "upsample: how many times each position is repeated along the height and along the width (nearest "
                      "neighbour)",
                      1, 64)};
  }

  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 3, "an image [height, width, channels]");
    const std::uint64_t scale = node.spec.own_key<std::uint64_t>("scale");
    node.out = {ctx.checked_mul(node.in[0], scale), ctx.checked_mul(node.in[1], scale), node.in[2]};
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/upsample", Phase::Forward, e_out, 0, in_elements(em, node) * em.act_bytes(),
                     e_out * em.act_bytes(), std::move(deps));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_in = in_elements(em, node), e_out = out_elements(em, node);
    const auto scale = static_cast<double>(node.spec.own_key<std::uint64_t>("scale"));
    return pass_through(em.vector(node.spec.name + "/bwd/upsample", Phase::Backward, e_in, scale * scale - 1, e_out * em.act_bytes(),
                                  e_in * em.act_bytes(), std::move(dy)));
  }
};

}  // namespace

const LayerKind& upsample_kind() {
  static const Upsample kind;
  return kind;
}

const LayerKind& max_pool_kind() {
  static const Pool kind(true);
  return kind;
}

const LayerKind& avg_pool_kind() {
  static const Pool kind(false);
  return kind;
}

}  // namespace tpusim::kinds
