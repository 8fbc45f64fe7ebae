// Layers whose output is their input seen differently: no work, nothing stored of their own.
// (Reshapes, transposes and slices of an imported graph are views too: XLA folds a transpose into
// the layout its consumer reads and a slice into the fusion that reads it.)
#include <algorithm>

#include <fmt/format.h>

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

// The same elements in another shape (ONNX Reshape, Transpose, Squeeze, Unsqueeze).
class Reshape : public View {
 public:
  Reshape() : View("reshape") {}
  std::vector<std::string> keys() const override { return {"shape"}; }
  std::vector<std::string> required_keys() const override { return {"shape"}; }
  void infer(Node& node, const InferContext& ctx) const override {
    Shape shape = node.spec.shape;
    if (shape.empty()) ctx.fail("shape", "expected at least one dimension");
    // One 0: the size the other axes leave (Keras Reshape's -1).
    const auto open = std::count(shape.begin(), shape.end(), std::uint64_t{0});
    if (open > 1) ctx.fail("shape", fmt::format("{}: at most one 0 (the size the others leave)", shape_string(shape)));
    if (open == 1) {
      std::uint64_t rest = 1;
      for (auto d : shape) rest *= d ? d : 1;
      const auto at = std::find(shape.begin(), shape.end(), std::uint64_t{0});
      if (elements(node.in) % rest != 0)
        ctx.fail("shape", fmt::format("{} leaves no whole size for its 0 from the {} elements of the input {}", shape_string(shape),
                                      elements(node.in), shape_string(node.in)));
      *at = elements(node.in) / rest;
    }
    if (elements(shape) != elements(node.in))
      ctx.fail("shape", fmt::format("{} does not hold the {} elements of the input {}", shape_string(node.spec.shape),
                                    elements(node.in), shape_string(node.in)));
    node.out = shape;
  }
};

// The sample's axes in another order (Keras Permute, a transpose).
class Permute : public View {
 public:
  Permute() : View("permute") {}
  std::vector<ParamSpec> own_keys() const override {
    return {
          layer_key("perm", ParamType::IntList, "axes", nullptr,
                    "permute: the input axis each output axis takes, 0-based over one sample's axes (Keras Permute's dims "
                    "minus 1); a view, as XLA folds a transpose into the layout its reader takes (required)",
                    0, 64)
    };
  }
  void infer(Node& node, const InferContext& ctx) const override {
    const auto perm = node.spec.own_key<std::vector<std::uint64_t>>("perm");
    std::vector<std::uint64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    bool is_permutation = perm.size() == node.in.size();
    for (std::size_t i = 0; is_permutation && i < sorted.size(); ++i) is_permutation = sorted[i] == i;
    if (!is_permutation)
      ctx.fail("perm", fmt::format("{} is not an order of the {} axes of the input {} (0-based)", shape_string(perm), node.in.size(),
                                   shape_string(node.in)));
    node.out.clear();
    for (auto axis : perm) node.out.push_back(node.in[axis]);
  }
};

// A part of the input of the same rank (ONNX Slice, Split: Q, K and V out of one projection).
class Slice : public View {
 public:
  Slice() : View("slice") {}
  std::vector<std::string> keys() const override { return {"shape"}; }
  std::vector<std::string> required_keys() const override { return {"shape"}; }
  void infer(Node& node, const InferContext& ctx) const override {
    const Shape& s = node.spec.shape;
    bool fits = s.size() == node.in.size();
    for (std::size_t d = 0; fits && d < s.size(); ++d) fits = s[d] >= 1 && s[d] <= node.in[d];
    if (!fits)
      ctx.fail("shape", fmt::format("{} is not a part of the input {} (same rank, each axis at most the input's)",
                                    shape_string(s), shape_string(node.in)));
    node.out = s;
  }
  bool takes_disjoint_part() const override { return true; }
};

// A further input of the model: a tensor of `shape` per sample that arrives from the host with
// the first (tokens to condition on, a timestep's features). It costs the infeed its bytes and
// the step nothing else.
class Input : public View {
 public:
  Input() : View("input") {}
  std::vector<std::string> keys() const override { return {"shape"}; }
  std::vector<std::string> required_keys() const override { return {"shape"}; }
  bool is_model_input() const override { return true; }
  void infer(Node& node, const InferContext& ctx) const override {
    if (node.spec.shape.empty()) ctx.fail("shape", "expected at least one dimension");
    for (auto d : node.spec.shape)
      if (d == 0) ctx.fail("shape", fmt::format("{}: every dimension at least 1", shape_string(node.spec.shape)));
    node.out = node.spec.shape;
  }
};

}  // namespace

const LayerKind& input_kind() {
  static const Input kind;
  return kind;
}

const LayerKind& reshape_kind() {
  static const Reshape kind;
  return kind;
}

const LayerKind& permute_kind() {
  static const Permute kind;
  return kind;
}

const LayerKind& slice_kind() {
  static const Slice kind;
  return kind;
}

const LayerKind& flatten_kind() {
  static const Flatten kind;
  return kind;
}

const LayerKind& take_first_kind() {
  static const TakeFirst kind;
  return kind;
}

}  // namespace tpusim::kinds
