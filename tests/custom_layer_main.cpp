// tpusim with a layer kind of one's own: the whole of what a user writes to add a kind, with a
// key only it takes, without touching tpusim (workloads/layer_kind.hpp). test_custom_layer runs it.
//
// `soft_cap` is Gemma 2's logit soft-capping, cap * tanh(x / cap): elementwise, a tanh and two
// multiplies per element forward, and the tanh's gradient and two more backward. Its own key
// `cap` (30 unless set, as Gemma 2's final logits) turns it off at 0.
#include <memory>

#include "sim/cli.hpp"
#include "workloads/kinds/common.hpp"

namespace {

using namespace tpusim;

class SoftCap : public LayerKind {
 public:
  SoftCap() : LayerKind("soft_cap") {}
  std::vector<ParamSpec> own_keys() const override {
    return {layer_key("cap", ParamType::Float, "", 30.0, "soft_cap: the bound of cap * tanh(x / cap); 0: no capping", 0, 1e6)};
  }

  void infer(Node& node, const InferContext&) const override { node.out = node.in; }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    if (!capped(node)) return deps.front();
    const std::uint64_t e = kinds::in_elements(em, node);
    return em.vector(node.spec.name + "/fwd/soft_cap", Phase::Forward, e, forward_ops(), e * em.act_bytes(), e * em.act_bytes(),
                     std::move(deps));
  }
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    if (!capped(node)) return kinds::pass_through(dy.front());
    const std::uint64_t e = kinds::in_elements(em, node);
    return kinds::pass_through(em.vector(node.spec.name + "/bwd/soft_cap", Phase::Backward, e, backward_ops(), 2 * e * em.act_bytes(),
                                         e * em.act_bytes(), std::move(dy)));
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t, bool) const override {
    FusedShare share;
    if (capped(node)) share.vpu_ops = forward_ops();
    return share;
  }
  FusedShare fused_backward(const Node& node, std::uint64_t e, std::uint32_t act_bytes) const override {
    FusedShare share;
    if (!capped(node)) return share;
    share.vpu_ops = backward_ops();
    share.read_bytes = e * act_bytes;  // the input, for the tanh's gradient
    return share;
  }
  bool pointwise_in_chain(bool) const override { return true; }

 private:
  static bool capped(const Node& node) { return node.spec.own_key<double>("cap") > 0; }
  static double forward_ops() { return activation_vpu_ops("tanh") + 2; }
  static double backward_ops() { return activation_grad_vpu_ops("tanh") + 2; }
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::register_layer_kind(std::make_unique<SoftCap>());
  return tpusim::cli_main(argc, argv);
}
