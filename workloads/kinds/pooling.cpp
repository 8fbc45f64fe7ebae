// Max and average pooling over windows of [height, width, channels], or along the steps of a
// sequence [steps, channels] (Keras MaxPooling1D, AveragePooling1D).
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

}  // namespace

const LayerKind& max_pool_kind() {
  static const Pool kind(true);
  return kind;
}

const LayerKind& avg_pool_kind() {
  static const Pool kind(false);
  return kind;
}

}  // namespace tpusim::kinds
