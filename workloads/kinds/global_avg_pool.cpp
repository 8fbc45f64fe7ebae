// Means: over height and width of [height, width, channels] (a global average pool), or over the
// last axis (a normalization written out: an imported RMSNorm's mean of squares).
#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Mean : public LayerKind {
 public:
  using LayerKind::LayerKind;
  std::vector<std::string> keys() const override { return {"keepdims"}; }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_in = in_elements(em, node);
    const std::uint32_t op = em.vector(node.spec.name + "/fwd/mean", Phase::Forward, e_in, 1, e_in * em.act_bytes(),
                                       out_elements(em, node) * em.act_bytes(), std::move(deps));
    if (over_last_axis()) em.reduces_along_lanes(op, 1, e_in * em.act_bytes());
    return op;
  }

  // The output gradient spread back over the input, divided by the count.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_in = in_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/mean", Phase::Backward, e_in, 1, out_elements(em, node) * em.act_bytes(),
                                  e_in * em.act_bytes(), std::move(dy)));
  }

 protected:
  // A mean along the last axis reduces across lanes; a pool's over height and width does not.
  virtual bool over_last_axis() const { return false; }
};

class GlobalAvgPool : public Mean {
 public:
  GlobalAvgPool() : Mean("global_avg_pool") {}
  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 3, "an [height, width, channels]");
    node.out = node.spec.keepdims ? Shape{1, 1, node.in[2]} : Shape{node.in[2]};
  }
};

class ReduceMean : public Mean {
 public:
  ReduceMean() : Mean("reduce_mean") {}
  bool over_last_axis() const override { return true; }
  void infer(Node& node, const InferContext& ctx) const override {
    if (node.in.empty()) ctx.fail("", "a mean over the last axis needs an input with one");
    node.out = node.in;
    if (node.spec.keepdims)
      node.out.back() = 1;
    else
      node.out.pop_back();
    if (node.out.empty()) node.out = {1};
  }
};

}  // namespace

const LayerKind& global_avg_pool_kind() {
  static const GlobalAvgPool kind;
  return kind;
}

const LayerKind& reduce_mean_kind() {
  static const ReduceMean kind;
  return kind;
}

}  // namespace tpusim::kinds
