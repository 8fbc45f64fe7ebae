// Elementwise sum of two or more tensors: of one shape (a residual connection), or broadcast to
// the first input's shape as numpy broadcasts (aligned from the right, each axis equal or 1 or
// absent): a UNet's timestep embedding, one vector per sample, added at every position.
#include <algorithm>

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
    for (const Shape& in : node.input_shapes)
      if (!broadcasts_to(in, node.in))
        ctx.fail("inputs", fmt::format("{} does not broadcast to {}, the first input's shape", shape_string(in), shape_string(node.in)));
    node.out = node.in;
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/add", Phase::Forward, e_out, static_cast<double>(node.inputs.size() - 1),
                     (e_out + other_input_elements(em, node)) * em.act_bytes(), e_out * em.act_bytes(), std::move(deps));
  }

  // An input of the output's shape receives the output gradient as it is; a broadcast one, its
  // sum over the axes it was repeated along (one add per output element).
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    if (std::all_of(node.input_shapes.begin(), node.input_shapes.end(), [&](const Shape& in) { return in == node.out; }))
      return pass_through(dy.front());
    Backward r;
    const std::uint64_t e_out = out_elements(em, node);
    for (std::size_t i = 0; i < node.input_shapes.size(); ++i) {
      if (node.input_shapes[i] == node.out) {
        r.input_dx.push_back(dy.front());
        continue;
      }
      r.input_dx.push_back(em.vector(fmt::format("{}/bwd/sum{}", node.spec.name, i), Phase::Backward, e_out, 1, e_out * em.act_bytes(),
                                     em.rows(elements(node.input_shapes[i])) * em.act_bytes(), dy));
    }
    return r;
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t e, bool) const override {
    FusedShare share;
    share.vpu_ops = static_cast<double>(node.inputs.size() - 1);
    // The other inputs; the first is the chain's.
    for (std::size_t i = 1; i < node.input_shapes.size(); ++i)
      share.read_elements += node.input_shapes[i] == node.out ? e : e / elements(node.out) * elements(node.input_shapes[i]);
    return share;
  }
  // A broadcast input's gradient is summed as the output gradient passes.
  FusedShare fused_backward(const Node& node, std::uint64_t, std::uint32_t) const override {
    FusedShare share;
    for (const Shape& in : node.input_shapes) share.vpu_ops += in == node.out ? 0 : 1;
    return share;
  }

 private:
  static std::uint64_t other_input_elements(const StepEmitter& em, const Node& node) {
    std::uint64_t n = 0;
    for (std::size_t i = 1; i < node.input_shapes.size(); ++i) n += em.rows(elements(node.input_shapes[i]));
    return n;
  }
};

}  // namespace

const LayerKind& add_kind() {
  static const Add kind;
  return kind;
}

}  // namespace tpusim::kinds
