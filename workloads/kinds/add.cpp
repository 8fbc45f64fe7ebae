// Elementwise sum of two or more tensors of one shape (a residual connection).
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Add : public LayerKind {
 public:
  Add() : LayerKind("add") {}
  bool takes_several_inputs() const override { return true; }

  void infer(Node& node, const InferContext& ctx) const override {
    if (node.inputs.size() < 2) ctx.fail("inputs", "an add layer needs two or more inputs");
    for (auto input : node.inputs)
      if (ctx.shape_of(input) != node.in)
        ctx.fail("inputs", fmt::format("shapes differ: {} and {}", shape_string(node.in), shape_string(ctx.shape_of(input))));
    node.out = node.in;
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/add", Phase::Forward, e_out, static_cast<double>(node.inputs.size() - 1),
                     node.inputs.size() * e_out * em.act_bytes(), e_out * em.act_bytes(), std::move(deps));
  }

  // Every input receives the output gradient as it is.
  Backward backward(StepEmitter&, const Node&, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    return pass_through(dy.front());
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t e, bool) const override {
    FusedShare share;
    share.vpu_ops = static_cast<double>(node.inputs.size() - 1);
    share.read_elements = (node.inputs.size() - 1) * e;  // the other inputs; the first is the chain's
    return share;
  }
};

}  // namespace

const LayerKind& add_kind() {
  static const Add kind;
  return kind;
}

}  // namespace tpusim::kinds
