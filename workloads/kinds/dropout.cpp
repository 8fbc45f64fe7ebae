// Dropout: a random mask applied in training (one bit per element kept for the backward pass).
// A rate of 0 is no work at all.
#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Dropout : public LayerKind {
 public:
  Dropout() : LayerKind("dropout") {}
  std::vector<ParamSpec> own_keys() const override {
    return {
          layer_key("rate", ParamType::Float, "", 0, "dropout: fraction dropped", 0, 1)
    };
  }

  void infer(Node& node, const InferContext&) const override { node.out = node.in; }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    if (!active(node)) return deps.front();
    const std::uint64_t e_in = in_elements(em, node), e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/dropout", Phase::Forward, e_in, 3, e_in * em.act_bytes(),
                     e_out * em.act_bytes() + e_out / 8, std::move(deps));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    if (!active(node)) return pass_through(dy.front());
    const std::uint64_t e_in = in_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/dropout", Phase::Backward, e_in, 2, e_in * em.act_bytes() + e_in / 8,
                                  e_in * em.act_bytes(), std::move(dy)));
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t e, bool) const override {
    FusedShare share;
    if (!active(node)) return share;
    share.vpu_ops = 3;
    share.write_elements = e / 8;  // the mask
    return share;
  }
  FusedShare fused_backward(const Node& node, std::uint64_t e, std::uint32_t) const override {
    FusedShare share;
    if (!active(node)) return share;
    share.vpu_ops = 2;
    share.read_bytes = e / 8;
    return share;
  }
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    return active(node) ? out_elements(em, node) / 8 : 0;
  }

 private:
  static bool active(const Node& node) { return node.spec.own_key<double>("rate") > 0; }
};

}  // namespace

const LayerKind& dropout_kind() {
  static const Dropout kind;
  return kind;
}

}  // namespace tpusim::kinds
