// An activation function applied on its own (Keras Activation).
#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Activation : public LayerKind {
 public:
  Activation() : LayerKind("activation") {}
  std::vector<std::string> keys() const override { return {"activation"}; }

  void infer(Node& node, const InferContext&) const override { node.out = node.in; }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::string& f = node.spec.activation;
    const std::uint64_t e_in = in_elements(em, node);
    const std::uint32_t op = em.vector(node.spec.name + "/fwd/" + f, Phase::Forward, e_in, activation_vpu_ops(f),
                                       e_in * em.act_bytes(), out_elements(em, node) * em.act_bytes(), std::move(deps));
    em.reduces_along_lanes(op, activation_lane_reductions(f, false), e_in * em.act_bytes());
    return op;
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    if (em.grad_fused_elsewhere(node.index)) return pass_through(dy.front());
    const std::string& f = node.spec.activation;
    const std::uint64_t e_in = in_elements(em, node);
    const std::uint32_t op = em.vector(node.spec.name + "/bwd/" + f + "_grad", Phase::Backward, e_in,
                                       activation_grad_vpu_ops(f), 2 * e_in * em.act_bytes(), e_in * em.act_bytes(), std::move(dy));
    em.reduces_along_lanes(op, activation_lane_reductions(f, true), 2 * e_in * em.act_bytes());
    return pass_through(op);
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t, bool) const override {
    FusedShare share;
    share.vpu_ops = activation_vpu_ops(node.spec.activation);
    share.lane_reductions = activation_lane_reductions(node.spec.activation, false);
    return share;
  }
  FusedShare fused_backward(const Node& node, std::uint64_t e, std::uint32_t act_bytes) const override {
    FusedShare share;
    share.vpu_ops = activation_grad_vpu_ops(node.spec.activation);
    share.read_bytes = relu(node) ? e / 8 : e * act_bytes;  // relu's gradient needs only the sign
    share.lane_reductions = activation_lane_reductions(node.spec.activation, true);
    return share;
  }
  bool pointwise_in_chain(bool) const override { return true; }
  bool applies_activation() const override { return true; }
  bool keeps_input(const Node& node) const override { return !relu(node); }
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    return relu(node) ? out_elements(em, node) / 8 : 0;  // one bit per element
  }

 private:
  static bool relu(const Node& node) { return node.spec.activation == "relu"; }
};

}  // namespace

const LayerKind& activation_kind() {
  static const Activation kind;
  return kind;
}

}  // namespace tpusim::kinds
