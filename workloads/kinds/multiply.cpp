// Elementwise product of two tensors, the second broadcast over axes where it has size 1: a
// squeeze-and-excitation block's channel scale ([h, w, c] x [1, 1, c]), or a gate of one shape.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Multiply : public LayerKind {
 public:
  Multiply() : LayerKind("multiply") {}
  bool takes_several_inputs() const override { return true; }

  void infer(Node& node, const InferContext& ctx) const override {
    if (node.inputs.size() != 2) ctx.fail("inputs", "a multiply layer takes two inputs");
    const Shape& x = node.in;
    const Shape& s = ctx.shape_of(node.inputs[1]);
    bool broadcasts = s.size() == x.size();
    for (std::size_t d = 0; broadcasts && d < x.size(); ++d) broadcasts = s[d] == x[d] || s[d] == 1;
    if (!broadcasts)
      ctx.fail("inputs", fmt::format("{} does not broadcast to {} (same rank, each axis equal or 1)", shape_string(s), shape_string(x)));
    node.out = x;
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node), e_scale = scale_elements(em, node);
    return em.vector(node.spec.name + "/fwd/multiply", Phase::Forward, e_out, 1, (e_out + e_scale) * em.act_bytes(),
                     e_out * em.act_bytes(), std::move(deps));
  }

  // One pass: dx = dy * s, and ds = dy * x summed over the broadcast axes.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_out = out_elements(em, node), e_scale = scale_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/multiply", Phase::Backward, e_out, 3,
                                  (2 * e_out + e_scale) * em.act_bytes(), (e_out + e_scale) * em.act_bytes(), std::move(dy)));
  }

  bool keeps_input(const Node&) const override { return true; }

 private:
  static std::uint64_t scale_elements(const StepEmitter& em, const Node& node) {
    const std::size_t s = node.inputs[1];
    return em.batch() * elements(s == kModelInput ? em.graph().input : em.graph().nodes[s].out);
  }
};

}  // namespace

const LayerKind& multiply_kind() {
  static const Multiply kind;
  return kind;
}

}  // namespace tpusim::kinds
