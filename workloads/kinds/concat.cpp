// Concatenation along the last (channels or features) axis (DenseNet, SqueezeNet's fire modules,
// Inception). A copy: each input read once, the output written once; its gradient is the output
// gradient cut back into the inputs' pieces.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Concat : public LayerKind {
 public:
  Concat() : LayerKind("concat") {}
  bool takes_several_inputs() const override { return true; }

  void infer(Node& node, const InferContext& ctx) const override {
    if (node.inputs.size() < 2) ctx.fail("inputs", "a concat layer needs two or more inputs");
    if (node.in.empty()) ctx.fail("inputs", "cannot concatenate scalars");
    node.out = node.in;
    node.out.back() = 0;
    for (auto input : node.inputs) {
      const Shape& s = ctx.shape_of(input);
      if (s.size() != node.in.size() || !std::equal(s.begin(), s.end() - 1, node.in.begin()))
        ctx.fail("inputs", fmt::format("shapes {} and {} differ in more than the last axis", shape_string(node.in), shape_string(s)));
      node.out.back() += s.back();
    }
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/concat", Phase::Forward, e_out, 0, e_out * em.act_bytes(), e_out * em.act_bytes(),
                     std::move(deps));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/split", Phase::Backward, e_out, 0, e_out * em.act_bytes(),
                                  e_out * em.act_bytes(), std::move(dy)));
  }
};

}  // namespace

const LayerKind& concat_kind() {
  static const Concat kind;
  return kind;
}

}  // namespace tpusim::kinds
