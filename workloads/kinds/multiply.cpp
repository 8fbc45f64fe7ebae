// Elementwise products, differences and quotients of two tensors, the second broadcast over axes
// where it has size 1: a squeeze-and-excitation block's channel scale ([h, w, c] x [1, 1, c]), a
// gate of one shape, a normalization written out (x - mean, (x - mean) / std).
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Binary : public LayerKind {
 public:
  // VPU ops per output element of the forward pass and of the backward's one pass (both
  // operands' gradients, the broadcast one summed over its size-1 axes).
  Binary(std::string name, double forward_ops, double backward_ops)
      : LayerKind(std::move(name)), forward_ops_(forward_ops), backward_ops_(backward_ops) {}
  bool takes_several_inputs() const override { return true; }

  void infer(Node& node, const InferContext& ctx) const override {
    if (node.inputs.size() != 2) ctx.fail("inputs", fmt::format("a {} layer takes two inputs", name()));
    const Shape& x = node.in;
    const Shape& s = node.input_shapes[1];
    bool broadcasts = s.size() == x.size();
    for (std::size_t d = 0; broadcasts && d < x.size(); ++d) broadcasts = s[d] == x[d] || s[d] == 1;
    if (!broadcasts)
      ctx.fail("inputs", fmt::format("{} does not broadcast to {} (same rank, each axis equal or 1)", shape_string(s), shape_string(x)));
    node.out = x;
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node), e_second = second_elements(em, node);
    return em.vector(node.spec.name + "/fwd/" + name(), Phase::Forward, e_out, forward_ops_,
                     (e_out + e_second) * em.act_bytes(), e_out * em.act_bytes(), std::move(deps));
  }

  // One pass reading the output gradient and both operands, writing both gradients.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_out = out_elements(em, node), e_second = second_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/" + name(), Phase::Backward, e_out, backward_ops_,
                                  (2 * e_out + e_second) * em.act_bytes(), (e_out + e_second) * em.act_bytes(), std::move(dy)));
  }

  bool keeps_input(const Node&) const override { return true; }

 private:
  static std::uint64_t second_elements(const StepEmitter& em, const Node& node) { return em.rows(elements(node.input_shapes[1])); }
  double forward_ops_, backward_ops_;
};

}  // namespace

const LayerKind& multiply_kind() {
  static const Binary kind("multiply", 1, 3);
  return kind;
}

const LayerKind& subtract_kind() {
  static const Binary kind("subtract", 1, 2);  // dx = dy; ds = -dy, summed
  return kind;
}

// A quotient costs a reciprocal (as sqrt's) and a multiply; its gradients dy / s and
// -dy x / s^2 another reciprocal and three multiplies.
const LayerKind& divide_kind() {
  static const Binary kind("divide", 5, 7);
  return kind;
}

}  // namespace tpusim::kinds
