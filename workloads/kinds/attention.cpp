// Multi-head self-attention over [tokens, features]: the Q, K and V projections as one matmul,
// QK^T and AV batched over heads with the softmax between them (dense: a causal mask saves no
// compute without a flash kernel), and the output projection.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// Split over a model axis of m (Megatron): each core has heads / m of the heads, so its Q, K and
// V projections have d / m columns and its output projection d / m rows, whose partial sums an
// all-reduce over the model axis adds up (and the input's gradient likewise).
struct AttentionGeometry {
  std::uint64_t seq, d, dh, heads_total, tokens, score_elements;
  std::uint64_t local_d;  // the width of this core's heads
};

AttentionGeometry geometry(const StepEmitter& em, const Node& node) {
  AttentionGeometry a;
  a.seq = node.in[0];
  a.d = node.in[1];
  a.dh = a.d / node.spec.heads;
  a.local_d = a.d / node.spec.model_shards;
  a.heads_total = em.batch() * (node.spec.heads / node.spec.model_shards);
  a.tokens = em.batch() * a.seq;
  a.score_elements = a.heads_total * a.seq * a.seq;
  return a;
}

class Attention : public LayerKind {
 public:
  Attention() : LayerKind("attention") {}
  std::vector<std::string> keys() const override { return {"heads", "causal", "use_bias"}; }
  std::vector<std::string> required_keys() const override { return {"heads"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    ctx.need_rank(node, 2, "a [tokens, features]");
    const std::uint64_t seq = node.in[0], d = node.in[1];
    if (d % s.heads) ctx.fail("heads", fmt::format("{} heads do not divide the width {}", s.heads, d));
    if (s.heads % s.model_shards) ctx.fail("heads", fmt::format("{} heads do not split over {} cores", s.heads, s.model_shards));
    node.out = node.in;
    const std::uint64_t local_d = d / s.model_shards;  // d without a model axis
    node.params = node.trainable = 4 * ctx.checked_mul(d, local_d) + (s.use_bias ? 3 * local_d + d : 0);
    // Q, K, V and output projections, then QK^T and AV over (this core's) heads.
    node.forward_flops =
        2.0 * static_cast<double>(seq) * (4.0 * static_cast<double>(d * local_d) + 2.0 * static_cast<double>(seq * local_d));
  }

  double training_flops(const Node& node, bool input_needs_grad) const override {
    // The projections (4 of the 2 * seq * (4 d^2 + 2 seq d)) have weights; QK^T and AV do not
    // and need the gradients of both operands. The output projection's input gradient is
    // inside the layer; Q, K and V's input gradient is the layer's.
    const double seq = static_cast<double>(node.in[0]), d = static_cast<double>(node.in[1]);
    const double local_d = d / static_cast<double>(node.spec.model_shards);
    const double fwd = node.forward_flops, projections = 2.0 * seq * 4.0 * d * local_d, scores = fwd - projections;
    return fwd + projections + 2.0 * scores + projections / 4 + (input_needs_grad ? 3 * projections / 4 : 0.0);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/fwd";
    const AttentionGeometry a = geometry(em, node);
    const std::uint32_t bias = s.use_bias ? 1 : 0;
    const std::uint32_t qkv = em.matmul(fused_name(base + "/qkv", s.use_bias, "linear"), Phase::Forward, a.tokens, a.d,
                                        3 * a.local_d, em.act(), std::move(deps), bias);
    const std::uint32_t scores = em.matmul(base + "/qk", Phase::Forward, a.seq, a.dh, a.seq, em.act(), {qkv}, 1, 0, a.heads_total);
    const std::uint32_t softmax = em.vector(base + "/softmax", Phase::Forward, a.score_elements, activation_vpu_ops("softmax"),
                                            a.score_elements * em.act_bytes(), a.score_elements * em.act_bytes(), {scores});
    const std::uint32_t av = em.matmul(base + "/av", Phase::Forward, a.seq, a.seq, a.dh, em.act(), {softmax}, 0, 0, a.heads_total);
    const std::uint32_t out = em.matmul(fused_name(base + "/out", s.use_bias, "linear"), Phase::Forward, a.tokens, a.local_d, a.d,
                                        em.act(), {av}, bias);
    if (s.model_shards == 1) return out;
    return em.model_all_reduce(base + "/out/all-reduce", Phase::Forward, a.tokens * a.d, {out});
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                    const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    const AttentionGeometry a = geometry(em, node);
    const DType act = em.act();
    const std::uint32_t dw_out = em.matmul(base + "/out/dW", Phase::Backward, a.local_d, a.tokens, a.d, DType::F32, dy);
    const std::uint32_t d_av = em.matmul(base + "/out/dX", Phase::Backward, a.tokens, a.d, a.local_d, act, dy);
    const std::uint32_t dv = em.matmul(base + "/dV", Phase::Backward, a.seq, a.seq, a.dh, act, {d_av}, 0, 0, a.heads_total);
    const std::uint32_t dp = em.matmul(base + "/dP", Phase::Backward, a.seq, a.dh, a.seq, act, {d_av}, 0, 0, a.heads_total);
    const std::uint32_t ds = em.vector(base + "/softmax_grad", Phase::Backward, a.score_elements, activation_grad_vpu_ops("softmax"),
                                       2 * a.score_elements * em.act_bytes(), a.score_elements * em.act_bytes(), {dp});
    const std::uint32_t dq = em.matmul(base + "/dQ", Phase::Backward, a.seq, a.seq, a.dh, act, {ds}, 0, 0, a.heads_total);
    const std::uint32_t dk = em.matmul(base + "/dK", Phase::Backward, a.seq, a.seq, a.dh, act, {ds}, 0, 0, a.heads_total);
    const std::uint32_t dw_qkv = em.matmul(base + "/qkv/dW", Phase::Backward, a.d, a.tokens, 3 * a.local_d, DType::F32, {dq, dk, dv});
    if (s.use_bias) {
      em.fuse_bias_gradient(dw_out, a.tokens * a.d);
      em.fuse_bias_gradient(dw_qkv, 3 * a.tokens * a.local_d);
    }
    Backward r;
    r.grads = {dw_out, dw_qkv};
    if (ctx.needs_dx) {
      const InputGradEpilogue epi = fused_input_gradient(em, ctx);
      r.dx = em.matmul(base + "/qkv/dX" + epi.name_suffix, Phase::Backward, a.tokens, 3 * a.local_d, a.d, act, {dq, dk, dv},
                       epi.vpu_ops, epi.operand_bytes);
      // Each core's heads give a part of the input's gradient.
      if (s.model_shards > 1) r.dx = em.model_all_reduce(base + "/qkv/dX/all-reduce", Phase::Backward, a.tokens * a.d, {r.dx});
      r.has_dx = true;
    }
    return r;
  }

  bool input_grad_epilogue() const override { return true; }
  bool keeps_input(const Node&) const override { return true; }
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    const AttentionGeometry a = geometry(em, node);
    return a.score_elements * em.act_bytes() + 3 * a.tokens * a.local_d * em.act_bytes();  // probabilities, Q, K, V
  }
};

}  // namespace

const LayerKind& attention_kind() {
  static const Attention kind;
  return kind;
}

}  // namespace tpusim::kinds
