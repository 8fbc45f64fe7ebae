// Learned tensors an imported graph adds to, multiplies with or joins to its activations: a
// position table added to every sample (ViT's pos_embedding), a scale (an RMSNorm's weight),
// learned tokens put before a sequence (ViT's class token). The zoo's embedding and patch_embedding layers carry these themselves; these kinds are
// the same pieces standing alone, as an ONNX graph has them.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// x + p or x * p, with p of `shape` broadcast over x (aligned from the right, each axis equal or
// 1): a position table, a normalization's scale written out (an imported RMSNorm's weight).
class ParameterOp : public LayerKind {
 public:
  ParameterOp(std::string name, bool multiplies) : LayerKind(std::move(name)), multiplies_(multiplies) {}
  std::vector<std::string> keys() const override { return {"shape"}; }
  std::vector<std::string> required_keys() const override { return {"shape"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const Shape& p = node.spec.shape;
    if (p.empty() || !broadcasts_to(p, node.in))
      ctx.fail("shape", fmt::format("a parameter of {} does not broadcast to the input {}", shape_string(p), shape_string(node.in)));
    node.out = node.in;
    node.params = node.trainable = elements(p);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e = out_elements(em, node);
    return em.vector(node.spec.name + (multiplies_ ? "/fwd/multiply" : "/fwd/add"), Phase::Forward, e, 1,
                     e * em.act_bytes() + node.params * 4, e * em.act_bytes(), std::move(deps));
  }

  // A sum: the input's gradient is the output's, the parameter's is it summed over the batch. A
  // product: one pass making dy * p and summing dy * x.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    const std::uint64_t e = out_elements(em, node);
    Backward r;
    if (!multiplies_) {
      if (ctx.needs_dw)
        r.grads.push_back(em.vector(node.spec.name + "/bwd/sum", Phase::Backward, e, 1, e * em.act_bytes(), node.params * 4, dy));
      return pass_through(dy.front(), r);
    }
    if (!ctx.needs_dw)  // frozen: the input's gradient alone, dy times the tensor
      return pass_through(em.vector(node.spec.name + "/bwd/multiply", Phase::Backward, e, 1, e * em.act_bytes() + node.params * 4,
                                    e * em.act_bytes(), std::move(dy)),
                          r);
    const std::uint32_t op = em.vector(node.spec.name + "/bwd/multiply", Phase::Backward, e, 3, 2 * e * em.act_bytes() + node.params * 4,
                                       e * em.act_bytes() + node.params * 4, std::move(dy));
    r.grads.push_back(op);
    return pass_through(op, r);
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node& node, std::uint64_t, bool) const override {
    FusedShare share;
    share.vpu_ops = 1;
    share.read_elements = node.params;  // the table, once
    return share;
  }
  FusedShare fused_backward(const Node&, std::uint64_t e, std::uint32_t act_bytes) const override {
    FusedShare share;
    share.vpu_ops = multiplies_ ? 3 : 1;  // the sum into the parameter's gradient (of dy * x)
    if (multiplies_) share.read_bytes = e * act_bytes;  // x
    return share;
  }
  bool keeps_input(const Node& node) const override { return multiplies_ && node.spec.trainable; }

 private:
  bool multiplies_;
};

// `tokens` learned rows put before a [tokens, features] sequence.
class PrependTokens : public LayerKind {
 public:
  PrependTokens() : LayerKind("prepend_tokens") {}
  std::vector<std::string> keys() const override { return {"tokens"}; }
  std::vector<std::string> required_keys() const override { return {"tokens"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    ctx.need_rank(node, 2, "a [tokens, features]");
    node.out = {node.in[0] + node.spec.tokens, node.in[1]};
    node.params = node.trainable = ctx.checked_mul(node.spec.tokens, node.in[1]);
  }

  // A copy of the sequence behind the tokens.
  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_in = in_elements(em, node), e_out = out_elements(em, node);
    return em.vector(node.spec.name + "/fwd/concat", Phase::Forward, e_out, 0, e_in * em.act_bytes() + node.params * 4,
                     e_out * em.act_bytes(), std::move(deps));
  }

  // The sequence's gradient is a part of the output's (a view); the tokens' is their rows summed
  // over the batch.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    const std::uint64_t rows = em.rows(node.params);
    Backward r;
    if (ctx.needs_dw) r.grads.push_back(em.vector(node.spec.name + "/bwd/sum", Phase::Backward, rows, 1, rows * em.act_bytes(), node.params * 4, dy));
    return pass_through(dy.front(), r);
  }
};

}  // namespace

const LayerKind& add_parameter_kind() {
  static const ParameterOp kind("add_parameter", false);
  return kind;
}

const LayerKind& multiply_parameter_kind() {
  static const ParameterOp kind("multiply_parameter", true);
  return kind;
}

const LayerKind& prepend_tokens_kind() {
  static const PrependTokens kind;
  return kind;
}

}  // namespace tpusim::kinds
