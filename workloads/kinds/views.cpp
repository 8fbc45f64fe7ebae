// Layers whose output is their input seen differently: no work, nothing stored of their own.
#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class View : public LayerKind {
 public:
  using LayerKind::LayerKind;
  std::uint32_t forward(StepEmitter&, const Node&, std::vector<std::uint32_t> deps) const override { return deps.front(); }
  Backward backward(StepEmitter&, const Node&, std::vector<std::uint32_t> dy, const BackwardContext&) const override {
    return pass_through(dy.front());
  }
  bool is_view() const override { return true; }
};

// Keras Flatten: one axis of all the sample's elements.
class Flatten : public View {
 public:
  Flatten() : View("flatten") {}
  void infer(Node& node, const InferContext&) const override { node.out = {elements(node.in)}; }
};

// The first token's features of [tokens, features] (BERT's [CLS], ViT's class token).
class TakeFirst : public View {
 public:
  TakeFirst() : View("take_first") {}
  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 2, "a [tokens, features]");
    node.out = {node.in[1]};
  }
};

}  // namespace

const LayerKind& flatten_kind() {
  static const Flatten kind;
  return kind;
}

const LayerKind& take_first_kind() {
  static const TakeFirst kind;
  return kind;
}

}  // namespace tpusim::kinds
