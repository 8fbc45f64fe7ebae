// A token embedding: rows of a table gathered at the token ids of the model input, with learned
// position and segment rows added (BERT, GPT-2).
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Embedding : public LayerKind {
 public:
  Embedding() : LayerKind("embedding") {}
  std::vector<std::string> keys() const override { return {"vocab", "dim", "positions", "segments"}; }
  std::vector<std::string> required_keys() const override { return {"vocab", "dim"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    // Only the model's inputs hold token ids; another layer's output is activations.
    if (node.inputs[0] != kModelInput && !ctx.graph().nodes[node.inputs[0]].kind->is_model_input())
      ctx.fail(s.inputs.empty() ? "" : "inputs",
               "an embedding looks up token ids: it reads the model input (or an input layer), not another layer's output");
    ctx.need_rank(node, 1, "a [tokens] (token ids)");
    node.out = {node.in[0], s.dim};
    node.params = node.trainable = ctx.checked_mul(s.vocab + s.positions + s.segments, s.dim);
    if (s.positions && s.positions < node.in[0])
      ctx.fail("positions", fmt::format("{} positions for {} tokens", s.positions, node.in[0]));
  }

  // A gather of f32 table rows at the tokens' ids, plus the position and segment rows added.
  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const std::uint64_t e_out = out_elements(em, node);
    const std::uint64_t tables = 1 + (s.positions ? 1 : 0) + (s.segments ? 1 : 0);
    VectorWork gather{e_out, static_cast<double>(tables), e_out * 4 * tables, e_out * em.act_bytes()};
    gather.hbm_read_run_bytes = s.dim * 4;
    return em.vector(s.name + "/fwd/gather", Phase::Forward, gather, std::move(deps));
  }

  // Rows scattered into the f32 table gradient at the tokens' ids; token ids have no gradient.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    if (!ctx.needs_dw) return {};  // a frozen table: its input, the token ids, takes no gradient
    const std::uint64_t e_out = out_elements(em, node);
    VectorWork scatter{e_out, 1, e_out * em.act_bytes(), e_out * 4};
    scatter.hbm_write_run_bytes = node.spec.dim * 4;
    Backward r;
    r.grads.push_back(em.vector(node.spec.name + "/bwd/scatter", Phase::Backward, scatter, std::move(dy)));
    return r;
  }
};

}  // namespace

const LayerKind& embedding_kind() {
  static const Embedding kind;
  return kind;
}

}  // namespace tpusim::kinds
