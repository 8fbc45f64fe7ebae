// Means: over height and width of [height, width, channels] or the steps of [steps, channels]
// (a global average pool), or over the last axis (a normalization written out: an imported
// RMSNorm's mean of squares); and the global max pool.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// Taken by every kind of this file.
ParamSpec keepdims_key() {
  return layer_key("keepdims", ParamType::Bool, "", false,
                   "global_avg_pool, global_max_pool: keep the pooled axes as size 1 ([1, 1, c], as ONNX's GlobalAveragePool "
                   "does) rather than [c]; reduce_mean: keep the last axis as size 1");
}

class Mean : public LayerKind {
 public:
  using LayerKind::LayerKind;
  std::vector<ParamSpec> own_keys() const override { return {keepdims_key()}; }

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

// Over every position of an image or a sequence, one value per channel: [c], or with keepdims
// the input's rank with each position axis 1.
void infer_global_pool(Node& node, const InferContext& ctx) {
  if (node.in.size() != 3 && node.in.size() != 2)
    ctx.fail("", fmt::format("a {} layer needs an [height, width, channels] or [steps, channels] input, got {}", node.spec.type,
                             shape_string(node.in)));
  const std::uint64_t channels = node.in.back();
  node.out = !node.spec.own_key<bool>("keepdims") ? Shape{channels} : node.in.size() == 3 ? Shape{1, 1, channels} : Shape{1, channels};
}

class GlobalAvgPool : public Mean {
 public:
  GlobalAvgPool() : Mean("global_avg_pool") {}
  void infer(Node& node, const InferContext& ctx) const override { infer_global_pool(node, ctx); }
};

// Keras GlobalMaxPooling1D/2D: the forward a max over the positions; the backward routes each
// channel's gradient to its maximum, found again in the saved input.
class GlobalMaxPool : public LayerKind {
 public:
  GlobalMaxPool() : LayerKind("global_max_pool") {}
  std::vector<ParamSpec> own_keys() const override { return {keepdims_key()}; }
  void infer(Node& node, const InferContext& ctx) const override { infer_global_pool(node, ctx); }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_in = in_elements(em, node);
    return em.vector(node.spec.name + "/fwd/max", Phase::Forward, e_in, 1, e_in * em.act_bytes(), out_elements(em, node) * em.act_bytes(),
                     std::move(deps));
  }
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    const std::uint64_t e_in = in_elements(em, node);
    return pass_through(em.vector(node.spec.name + "/bwd/max", Phase::Backward, e_in, 1,
                                  (out_elements(em, node) + e_in) * em.act_bytes(), e_in * em.act_bytes(), std::move(dy)));
  }
  bool keeps_input(const Node&) const override { return true; }
};

class ReduceMean : public Mean {
 public:
  ReduceMean() : Mean("reduce_mean") {}
  bool over_last_axis() const override { return true; }
  void infer(Node& node, const InferContext& ctx) const override {
    if (node.in.empty()) ctx.fail("", "a mean over the last axis needs an input with one");
    node.out = node.in;
    if (node.spec.own_key<bool>("keepdims"))
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

const LayerKind& global_max_pool_kind() {
  static const GlobalMaxPool kind;
  return kind;
}

const LayerKind& reduce_mean_kind() {
  static const ReduceMean kind;
  return kind;
}

}  // namespace tpusim::kinds
