// The mean over height and width of [height, width, channels].
#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class GlobalAvgPool : public LayerKind {
 public:
  GlobalAvgPool() : LayerKind("global_avg_pool") {}
  std::vector<std::string> keys() const override { return {"keepdims"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 3, "an [height, width, channels]");
    node.out = node.spec.keepdims ? Shape{1, 1, node.in[2]} : Shape{node.in[2]};
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_in = in_elements(em, node);
    return em.vector(node.spec.name + "/fwd/mean", Phase::Forward, e_in, 1, e_in * em.act_bytes(),
                     out_elements(em, node) * em.act_bytes(), std::move(deps));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_in = in_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/mean", Phase::Backward, e_in, 1, out_elements(em, node) * em.act_bytes(),
                                  e_in * em.act_bytes(), std::move(dy)));
  }
};

}  // namespace

const LayerKind& global_avg_pool_kind() {
  static const GlobalAvgPool kind;
  return kind;
}

}  // namespace tpusim::kinds
