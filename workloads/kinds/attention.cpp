// Multi-head self-attention over [tokens, features]: the Q, K and V projections as one matmul,
// QK^T and AV batched over heads with the softmax between them (dense: a causal mask saves no
// compute without a flash kernel), and the output projection. With training.flash_attention the
// scores stay in vector memory and a causal mask skips the blocks above the diagonal. Grouped-
// and multi-query attention (kv_heads below heads: each key/value head serves a group of query
// heads) shrink the K and V projections and what is kept of K and V, not the per-head products;
// heads may be narrower or wider than width / heads (head_dim); rotary position embeddings
// rotate Q and K after their projection.
#include <optional>

#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// Split over a model axis of m (Megatron): each core has heads / m of the query heads and
// kv_heads / m of the key/value heads, so its Q, K and V projections have their columns and its
// output projection the query heads' rows, whose partial sums are added up over the model axis
// (and the input's gradient likewise).
struct Widths {
  std::uint64_t seq, d, dh;  // dh: one head's width
  std::uint64_t q, kv;       // of this core's query heads, and of its key/value heads
};

Widths widths(const Node& node) {
  const LayerSpec& s = node.spec;
  const std::uint64_t seq = node.in[0], d = node.in[1], dh = s.head_dim ? s.head_dim : d / s.heads;
  return {seq, d, dh, s.heads / s.model_shards * dh, s.key_value_heads() / s.model_shards * dh};
}

// Per sample: the four projections' FLOPs, and QK^T's and AV's.
double projection_flops(const Widths& w) {
  return 2.0 * static_cast<double>(w.seq) * static_cast<double>(w.d) * static_cast<double>(2 * w.q + 2 * w.kv);
}
double score_flops(const Widths& w) { return 4.0 * static_cast<double>(w.seq) * static_cast<double>(w.seq) * static_cast<double>(w.q); }

// VPU ops per element of a rotary embedding: x * cos + rotate_half(x) * sin (the half rotation
// is a lane permutation, on the cross-lane unit).
constexpr double kRotaryVpuOps = 3;

struct AttentionGeometry {
  std::uint64_t seq, d, dh, heads_total, tokens, score_elements;
  std::uint64_t local_q, local_kv;  // the widths of this core's query heads and key/value heads
  // Key positions each query's score blocks cover: a causal flash kernel skips the blocks above
  // the diagonal (all of seq without flash, which computes every score).
  std::uint64_t keys_computed;
};

// MaxText's flash attention blocks (block_q = block_kv = 512, its default on TPU).
constexpr std::uint64_t kFlashBlock = 512;

AttentionGeometry geometry(const StepEmitter& em, const Node& node) {
  AttentionGeometry a;
  const Widths w = widths(node);
  a.seq = w.seq;
  a.d = w.d;
  a.dh = w.dh;
  a.local_q = w.q;
  a.local_kv = w.kv;
  a.heads_total = em.batch() * (node.spec.heads / node.spec.model_shards);
  a.tokens = em.batch() * a.seq;
  a.score_elements = a.heads_total * a.seq * a.seq;
  a.keys_computed = a.seq;
  if (em.flash_attention() && node.spec.causal) {
    const std::uint64_t blocks = (a.seq + kFlashBlock - 1) / kFlashBlock;  // blocks on and below the diagonal
    a.keys_computed = (a.seq * (blocks + 1) + 2 * blocks - 1) / (2 * blocks);
  }
  return a;
}

class Attention : public LayerKind {
 public:
  Attention() : LayerKind("attention") {}
  std::vector<std::string> keys() const override { return {"heads", "kv_heads", "head_dim", "rotary", "causal", "use_bias"}; }
  std::vector<std::string> required_keys() const override { return {"heads"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    ctx.need_rank(node, 2, "a [tokens, features]");
    const std::uint64_t d = node.in[1];
    if (!s.head_dim && d % s.heads)
      ctx.fail("heads", fmt::format("{} heads do not divide the width {} (give head_dim for heads of another width)", s.heads, d));
    const std::uint64_t kv_heads = s.key_value_heads();
    if (kv_heads > s.heads || s.heads % kv_heads)
      ctx.fail("kv_heads", fmt::format("{} key/value heads do not divide the {} query heads into groups", kv_heads, s.heads));
    if (s.heads % s.model_shards) ctx.fail("heads", fmt::format("{} heads do not split over {} cores", s.heads, s.model_shards));
    if (kv_heads % s.model_shards)
      ctx.fail("kv_heads", fmt::format("{} key/value heads do not split over {} cores", kv_heads, s.model_shards));
    node.out = node.in;
    const Widths w = widths(node);  // this core's, d without a model axis
    node.params = node.trainable = ctx.checked_mul(d, 2 * w.q + 2 * w.kv) + (s.use_bias ? w.q + 2 * w.kv + d : 0);
    // Q, K, V and output projections, then QK^T and AV over (this core's) heads.
    node.forward_flops = projection_flops(w) + score_flops(w);
  }

  double training_flops(const Node& node, bool input_needs_grad) const override {
    // The projections have weights (their gradients computed unless the layer is frozen); QK^T
    // and AV do not and need the gradients of both operands. The output projection's input
    // gradient is inside the layer; Q, K and V's input gradient is the layer's.
    const Widths w = widths(node);
    const double fwd = node.forward_flops, projections = projection_flops(w), scores = score_flops(w);
    const double tokens_by_d = 2.0 * static_cast<double>(w.seq) * static_cast<double>(w.d);
    const double out_dx = tokens_by_d * static_cast<double>(w.q), qkv_dx = tokens_by_d * static_cast<double>(w.q + 2 * w.kv);
    const bool trained = node.spec.trainable;
    if (!trained && !input_needs_grad) return fwd;
    return fwd + (trained ? projections : 0.0) + 2.0 * scores + out_dx + (input_needs_grad ? qkv_dx : 0.0);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::string base = node.spec.name + "/fwd";
    const AttentionGeometry a = geometry(em, node);
    const std::uint32_t q_k_v = rotary(em, node, a, base + "/rotary", Phase::Forward, qkv_projection(em, node, a, std::move(deps)));
    return out_projection(em, node, a, {core_forward(em, a, base, {q_k_v})});
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                    const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    const AttentionGeometry a = geometry(em, node);
    const DType act = em.act();
    const StepEmitter::WeightMatmul out_dx{base + "/out/dX", Phase::Backward, a.tokens, a.d, a.local_q, act, 0, 0, true,
                                           StepEmitter::GradientOperand::Lhs};
    // Split over a model axis, the output's gradient arrives split by tokens. With collective
    // matmul the output projection's input gradient takes each share as it arrives.
    const bool dy_windowed = s.model_shards > 1 && em.windowed(out_dx);
    std::optional<StepEmitter::GatheredProduct> out_dx_product;
    if (dy_windowed) {
      out_dx_product = em.gathered_matmul(out_dx, std::move(dy));
      dy = out_dx_product->operand_ready;
    } else if (s.model_shards > 1) {
      dy = em.model_gathered(base + "/dY", Phase::Backward, a.tokens * a.d, std::move(dy));
    }
    // Split over a model axis, the input's gradient goes first so that its collective runs under
    // the weight gradients (as XLA's latency-hiding scheduler orders them).
    const bool dx_first = s.model_shards > 1 && ctx.needs_dx;
    const auto out_weight_gradient = [&] {
      return em.quantized_weight_gradient(em.matmul(base + "/out/dW", Phase::Backward, a.local_q, a.tokens, a.d, DType::F32, dy));
    };
    std::uint32_t dw_out = dx_first || !ctx.needs_dw ? 0 : out_weight_gradient(), dw_qkv = 0;
    const std::uint32_t d_av = out_dx_product ? out_dx_product->product : em.weight_matmul(out_dx, dy);
    std::vector<std::uint32_t> dqkv = em.flash_attention() ? flash_backward(em, a, base, d_av) : dense_backward(em, a, base, d_av);
    if (s.rotary) dqkv = {rotary(em, node, a, base + "/rotary_grad", Phase::Backward, dqkv)};  // the inverse rotation
    const auto qkv_weight_gradient = [&] {
      return em.quantized_weight_gradient(
          em.matmul(base + "/qkv/dW", Phase::Backward, a.d, a.tokens, a.local_q + 2 * a.local_kv, DType::F32, dqkv));
    };
    if (!dx_first && ctx.needs_dw) dw_qkv = qkv_weight_gradient();
    Backward r;
    if (ctx.needs_dx) {
      const InputGradEpilogue epi = fused_input_gradient(em, ctx);
      const StepEmitter::WeightMatmul dx{base + "/qkv/dX" + epi.name_suffix, Phase::Backward, a.tokens, a.local_q + 2 * a.local_kv, a.d,
                                         act, epi.vpu_ops, epi.operand_bytes, true, StepEmitter::GradientOperand::Lhs};
      // Each core's heads give a part of the input's gradient.
      r.dx = s.model_shards > 1 ? em.scattered_matmul(dx, base + "/qkv/dX", dqkv) : em.weight_matmul(dx, dqkv);
      r.has_dx = true;
    }
    if (!ctx.needs_dw) return r;  // frozen: the gradient only passes through
    if (dx_first) {
      dw_out = out_weight_gradient();
      dw_qkv = qkv_weight_gradient();
    }
    if (s.use_bias) {
      em.fuse_bias_gradient(dw_out, a.tokens * a.d);
      em.fuse_bias_gradient(dw_qkv, a.tokens * (a.local_q + 2 * a.local_kv));
    }
    r.grads = {dw_out, dw_qkv};
    return r;
  }

  // What is not kept runs again. Kept before their rotation (MaxText names the projections'
  // outputs), Q and K are rotated again; the heads' output is what the output projection's
  // weight gradient reads, so it runs again unless kept, whether or not the projection's is.
  std::optional<std::uint32_t> recompute_keeping(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps,
                                                 const KeptResults& kept) const override {
    const AttentionGeometry a = geometry(em, node);
    const std::string base = node.spec.name + "/fwd";
    std::optional<std::uint32_t> last;
    const auto then = [&](std::uint32_t op) {
      deps = {op};
      last = op;
    };
    if (!kept.qkv) then(qkv_projection(em, node, a, deps));
    if (node.spec.rotary) then(rotary(em, node, a, base + "/rotary", Phase::Forward, deps));
    if (!kept.context) then(core_forward(em, a, base, deps));
    if (!kept.out) then(out_projection(em, node, a, deps));
    return last;
  }
  bool recomputes_weight_matmul(const Node&, const KeptResults& kept) const override { return !kept.qkv || !kept.out; }
  std::uint64_t kept_bytes(const StepEmitter& em, const Node& node, const KeptResults& kept) const override {
    const AttentionGeometry a = geometry(em, node);
    const std::uint64_t out = a.tokens * a.d / (em.sequence_parallel() && node.spec.model_shards > 1 ? node.spec.model_shards : 1);
    return ((kept.qkv ? a.tokens * (a.local_q + 2 * a.local_kv) : 0) + (kept.context ? a.tokens * a.local_q : 0) +
            (kept.out ? out : 0)) *
           em.act_bytes();
  }

  bool input_grad_epilogue() const override { return true; }
  bool keeps_input(const Node& node) const override { return node.spec.trainable; }  // for the Q, K, V weight gradient
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    const AttentionGeometry a = geometry(em, node);
    // Q, K and V; the probabilities, or a flash kernel's log-sum-exp per query (f32). The heads'
    // output (the output projection's input) is left out to offset an estimate that is high
    // elsewhere (XLA can rematerialize cheap values such as GELU's output to fit): MLPerf v0.7's
    // BERT-large ran 24 sequences of 512 on each v4 core beside the core's own weights and LAMB
    // state, where tpusim's footprint, even without it, is 18.7 GiB of the core's 16.
    const std::uint64_t q_k_v = a.tokens * (a.local_q + 2 * a.local_kv) * em.act_bytes();
    return q_k_v + (em.flash_attention() ? a.heads_total * a.seq * 4 : a.score_elements * em.act_bytes());
  }

 private:
  // The Q, K and V projections (one matmul, its weights gathered first under FSDP) after `deps`,
  // and the output projection after the heads' output `context`.
  static std::uint32_t qkv_projection(StepEmitter& em, const Node& node, const AttentionGeometry& a, std::vector<std::uint32_t> deps) {
    const LayerSpec& s = node.spec;
    const StepEmitter::WeightMatmul qkv{fused_name(s.name + "/fwd/qkv", s.use_bias, "linear"), Phase::Forward, a.tokens, a.d,
                                        a.local_q + 2 * a.local_kv, em.act(), s.use_bias ? 1.0 : 0.0};
    return em.gathered_matmul(qkv, std::move(deps)).product;
  }
  static std::uint32_t out_projection(StepEmitter& em, const Node& node, const AttentionGeometry& a, std::vector<std::uint32_t> context) {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/fwd";
    const StepEmitter::WeightMatmul out{fused_name(base + "/out", s.use_bias, "linear"), Phase::Forward, a.tokens, a.local_q,
                                       a.d, em.act(), s.use_bias ? 1.0 : 0.0};
    return s.model_shards == 1 ? em.weight_matmul(out, std::move(context)) : em.scattered_matmul(out, base + "/out", std::move(context));
  }

  // Rotary position embeddings (RoFormer; Llama, Gemma) on Q and K after `deps`, or their
  // gradients' inverse rotation: a pass of its own over HBM that reads the tables of cos and sin
  // (f32, a position by a head width) besides Q and K; V passes untouched. `deps` when the layer
  // has none. (XLA could fuse it into the projection's output only without the half rotation's
  // slices.)
  static std::uint32_t rotary(StepEmitter& em, const Node& node, const AttentionGeometry& a, const std::string& name, Phase phase,
                              std::vector<std::uint32_t> deps) {
    if (!node.spec.rotary) return deps.at(0);
    const std::uint64_t e = a.tokens * (a.local_q + a.local_kv);
    const std::uint64_t tables = 2 * a.seq * a.dh * 4;
    return em.vector(name, phase, e, kRotaryVpuOps, e * em.act_bytes() + tables, e * em.act_bytes(), std::move(deps));
  }
  static std::uint32_t rotary(StepEmitter& em, const Node& node, const AttentionGeometry& a, const std::string& name, Phase phase,
                              std::uint32_t dep) {
    return rotary(em, node, a, name, phase, std::vector<std::uint32_t>{dep});
  }

  // QK^T, the softmax and AV after `deps`, by the flash kernel or as XLA runs them without one.
  static std::uint32_t core_forward(StepEmitter& em, const AttentionGeometry& a, const std::string& base,
                                    std::vector<std::uint32_t> deps) {
    return em.flash_attention() ? flash_forward(em, a, base, std::move(deps)) : dense_forward(em, a, base, std::move(deps));
  }
  // QK^T, the softmax and AV as XLA runs them: the scores and probabilities go through HBM.
  static std::uint32_t dense_forward(StepEmitter& em, const AttentionGeometry& a, const std::string& base,
                                     std::vector<std::uint32_t> qkv) {
    const std::uint32_t scores = em.matmul(base + "/qk", Phase::Forward, a.seq, a.dh, a.seq, em.act(), std::move(qkv), 1, 0, a.heads_total);
    const std::uint32_t softmax = em.vector(base + "/softmax", Phase::Forward, a.score_elements, activation_vpu_ops("softmax"),
                                            a.score_elements * em.act_bytes(), a.score_elements * em.act_bytes(), {scores});
    em.reduces_along_lanes(softmax, activation_lane_reductions("softmax", false), a.score_elements * em.act_bytes());
    return em.matmul(base + "/av", Phase::Forward, a.seq, a.seq, a.dh, em.act(), {softmax}, 0, 0, a.heads_total);
  }
  static std::vector<std::uint32_t> dense_backward(StepEmitter& em, const AttentionGeometry& a, const std::string& base,
                                                   std::uint32_t d_av) {
    const DType act = em.act();
    const std::uint32_t dv = em.matmul(base + "/dV", Phase::Backward, a.seq, a.seq, a.dh, act, {d_av}, 0, 0, a.heads_total);
    const std::uint32_t dp = em.matmul(base + "/dP", Phase::Backward, a.seq, a.dh, a.seq, act, {d_av}, 0, 0, a.heads_total);
    const std::uint32_t ds = em.vector(base + "/softmax_grad", Phase::Backward, a.score_elements, activation_grad_vpu_ops("softmax"),
                                       2 * a.score_elements * em.act_bytes(), a.score_elements * em.act_bytes(), {dp});
    // The sum of dP * P.
    em.reduces_along_lanes(ds, activation_lane_reductions("softmax", true), 2 * a.score_elements * em.act_bytes());
    const std::uint32_t dq = em.matmul(base + "/dQ", Phase::Backward, a.seq, a.seq, a.dh, act, {ds}, 0, 0, a.heads_total);
    const std::uint32_t dk = em.matmul(base + "/dK", Phase::Backward, a.seq, a.seq, a.dh, act, {ds}, 0, 0, a.heads_total);
    return {dq, dk, dv};
  }

  // A flash kernel (FlashAttention-2, the Pallas TPU kernel MaxText calls): the scores of a block
  // of queries never leave vector memory; the softmax runs online in the QK^T matmul's epilogue
  // and AV reads the probabilities where they are. A score matmul's model FLOPs stay those of
  // every score, as the FLOP count the step is judged by counts them.
  static std::uint32_t score_matmul(StepEmitter& em, const AttentionGeometry& a, const std::string& name, Phase phase,
                                    bool scores_out, std::vector<std::uint32_t> deps, double epilogue_ops, bool recompute) {
    // scores_out: [queries, keys] out of Q K^T-like products (contracting dh); else a product
    // that takes the scores as its left operand and gives [queries, dh].
    const std::uint32_t id = scores_out
                                 ? em.matmul(name, phase, a.seq, a.dh, a.keys_computed, em.act(), std::move(deps), epilogue_ops, 0, a.heads_total)
                                 : em.matmul(name, phase, a.seq, a.keys_computed, a.dh, em.act(), std::move(deps), epilogue_ops, 0, a.heads_total);
    Op& op = em.op(id);
    if (scores_out) op.matmul.out_write_fraction = 0;
    else op.matmul.lhs_read_fraction = 0;
    op.model_flops = recompute ? 0 : 2.0 * static_cast<double>(a.score_elements * a.dh);
    return id;
  }
  static std::uint32_t flash_forward(StepEmitter& em, const AttentionGeometry& a, const std::string& base,
                                     std::vector<std::uint32_t> qkv) {
    const std::uint32_t scores = score_matmul(em, a, base + "/flash/qk+softmax", Phase::Forward, true, std::move(qkv),
                                              1 + activation_vpu_ops("softmax"), false);
    return score_matmul(em, a, base + "/flash/av", Phase::Forward, false, {scores}, 0, false);
  }
  // The backward kernel recomputes the probabilities from Q, K and the saved log-sum-exp, then
  // dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)), dQ = dS K, dK = dS^T Q.
  static std::vector<std::uint32_t> flash_backward(StepEmitter& em, const AttentionGeometry& a, const std::string& base,
                                                   std::uint32_t d_av) {
    const std::uint64_t heads_out = a.tokens * a.local_q;
    const std::uint32_t delta = em.vector(base + "/flash/rowsum(dO*O)", Phase::Backward, heads_out, 2,
                                          2 * heads_out * em.act_bytes(), a.heads_total * a.seq * 4, {d_av});
    em.reduces_along_lanes(delta, 1, 2 * heads_out * em.act_bytes());  // along each head's features, outside the kernel
    const std::uint32_t p = score_matmul(em, a, base + "/flash/recompute/qk+softmax", Phase::Backward, true, {delta},
                                         1 + activation_vpu_ops("softmax"), true);
    const std::uint32_t dv = score_matmul(em, a, base + "/flash/dV", Phase::Backward, false, {p}, 0, false);
    const std::uint32_t ds = score_matmul(em, a, base + "/flash/dP+softmax_grad", Phase::Backward, true, {p},
                                          activation_grad_vpu_ops("softmax"), false);
    const std::uint32_t dq = score_matmul(em, a, base + "/flash/dQ", Phase::Backward, false, {ds}, 0, false);
    const std::uint32_t dk = score_matmul(em, a, base + "/flash/dK", Phase::Backward, false, {ds}, 0, false);
    return {dq, dk, dv};
  }
};

}  // namespace

const LayerKind& attention_kind() {
  static const Attention kind;
  return kind;
}

}  // namespace tpusim::kinds
