// A mixture-of-experts MLP over [tokens, features] (Mixtral, DeepSeekMoE, Switch, GShard): a
// router (a matmul to one logit per expert, softmax, top-k), the dispatch of each token to its
// top_k experts, each expert a gated MLP (gate and up projections multiplied, then down) on the
// rows it is sent, and the combine of each token's expert outputs weighted by its router
// probabilities; shared experts (DeepSeekMoE) take every token beside them.
//
// The dispatch puts the routed rows into one buffer of experts x capacity rows and the combine
// takes them back, either as gathers and scatters of rows (dispatch "gather", vector passes: the
// sorted rows MaxText's megablox and ragged-dot paths multiply) or as matmuls by one-hot masks
// (dispatch "einsum": MaxText's dense_matmul path, which its capacity-factor runs take, and
// GShard's: per sequence "BSM,BSEC->EBCM" to dispatch and "EBCM,BSEC->BSM" to combine, with the
// masks written by a pass of their own; MXU work, no model FLOPs). The experts run as one batched
// matmul per projection (a grouped matmul, batch = the core's experts). Each expert computes
// `capacity` rows from each chip: the balanced count (tokens x top_k / experts) times the
// capacity factor (with einsum dispatch per sequence, as MaxText's generate_masks rounds it:
// ceil(seq x top_k / experts) x capacity_factor), or, dropless, times the routing imbalance (the
// busiest chip's rows; the all-to-alls wait for it, so every chip is simulated at it). The
// padding and the imbalance are executed MXU work but not model FLOPs.
//
// With an expert axis of ep chips (sharding.hpp) each chip holds experts / ep of the experts:
// the dispatched buffer is exchanged over the axis in an all-to-all (each chip keeps its
// experts' rows from every chip), the experts compute ep x capacity rows each, and a second
// all-to-all takes the results home; the backward pass exchanges the gradients the same way.
#include <cmath>

#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// Router: softmax over the experts' logits (a max, a sum), then top_k rounds of max-and-mask.
constexpr double kRouterVpuOpsBase = 6;
constexpr double kRouterVpuOpsPerChoice = 2;

struct MoeGeometry {
  std::uint64_t tokens, d, u, experts, top_k, shared;
  std::uint64_t local_experts;   // on this chip
  std::uint64_t rows_per_expert; // of one local expert after the exchange: ep x capacity
  std::uint64_t computed_rows;   // of one local expert as the grouped matmul computes them: with its share of the tiles computed again
  std::uint64_t dispatched;      // rows of the dispatched buffer (every expert's capacity from this chip)
  std::uint64_t routed;          // tokens x top_k: the rows that are model FLOPs
  std::uint64_t in_width;        // of the gate-and-up projection: 2u gated, u plain
  std::uint32_t act_bytes;
  bool einsum;                   // dispatch and combine as matmuls by one-hot masks
  std::uint64_t sequences, seq;  // einsum: the core's sequences and their length
  std::uint64_t slots;           // einsum: experts x capacity per sequence, the masks' last axis
};

// The keys only a moe layer takes (Moe::own_keys declares them).
struct MoeKeys {
  std::uint64_t top_k, shared_experts, group_tile_rows;
  bool gated, einsum;
  double capacity_factor, routing_imbalance;
};
MoeKeys own(const LayerSpec& s) {
  return {s.own_key<std::uint64_t>("top_k"),     s.own_key<std::uint64_t>("shared_experts"),
          s.own_key<std::uint64_t>("group_tile_rows"), s.own_key<bool>("gated"),
          s.own_key<std::string>("dispatch") == "einsum", s.own_key<double>("capacity_factor"),
          s.own_key<double>("routing_imbalance")};
}

double row_factor(const LayerSpec& s) { return own(s).capacity_factor > 0 ? own(s).capacity_factor : own(s).routing_imbalance; }

MoeGeometry geometry(const StepEmitter& em, const Node& node) {
  const LayerSpec& s = node.spec;
  MoeGeometry g;
  g.tokens = em.rows(node.in[0]);
  g.d = node.in[1];
  g.u = s.units;
  g.experts = s.experts;
  g.top_k = own(s).top_k;
  g.shared = own(s).shared_experts;
  g.local_experts = s.experts / s.expert_shards;
  g.routed = g.tokens * g.top_k;
  g.einsum = own(s).einsum;
  g.seq = node.in[0];
  g.sequences = g.tokens / g.seq;
  // In millionths, so that a balanced count that divides stays whole.
  const auto factor_ppm = static_cast<std::uint64_t>(std::llround(row_factor(s) * 1e6));
  std::uint64_t capacity = ceil_div<std::uint64_t>(g.routed * factor_ppm, g.experts * 1000000);
  if (g.einsum) {
    const std::uint64_t per_sequence = std::max<std::uint64_t>(
        ceil_div<std::uint64_t>(g.seq * g.top_k, g.experts) * factor_ppm / 1000000, 1);
    capacity = per_sequence * g.sequences;
    g.slots = per_sequence * g.experts;
  }
  g.rows_per_expert = capacity * s.expert_shards;
  // (local experts - 1) tiles more over the device's grouped matmul, shared out evenly over its
  // experts and, on a megacore chip, its cores: the kernel runs over all of the device's rows
  // and splits its column tiles between them (its "parallel" grid axis), where tpusim splits
  // the rows.
  g.computed_rows = g.rows_per_expert + ceil_div<std::uint64_t>((g.local_experts - 1) * own(s).group_tile_rows,
                                                                g.local_experts * em.cores_per_device());
  g.dispatched = capacity * g.experts;
  g.in_width = own(s).gated ? 2 * g.u : g.u;
  g.act_bytes = em.act_bytes();
  return g;
}

// Per sample: the router's, the routed experts' and the shared experts' forward FLOPs, the
// experts' split into their gate-and-up and down projections.
struct MoeFlops {
  double router, routed_in, routed_down, shared_in, shared_down;
  double forward() const { return router + routed_in + routed_down + shared_in + shared_down; }
};
MoeFlops flops_per_sample(const Node& node) {
  const LayerSpec& s = node.spec;
  const double seq = static_cast<double>(node.in[0]), d = static_cast<double>(node.in[1]), u = static_cast<double>(s.units);
  const MoeKeys keys = own(s);
  const double in_width = keys.gated ? 2 * u : u, k = static_cast<double>(keys.top_k), shared = static_cast<double>(keys.shared_experts);
  return {2 * seq * d * static_cast<double>(s.experts), 2 * seq * k * d * in_width, 2 * seq * k * u * d,
          2 * seq * shared * d * in_width, 2 * seq * shared * u * d};
}

class Moe : public LayerKind {
 public:
  Moe() : LayerKind("moe") {}
  std::vector<std::string> keys() const override {
    return {"experts", "units", "activation"};
  }
  std::vector<ParamSpec> own_keys() const override {
    return {
          layer_key("top_k", ParamType::Int, "experts", nullptr, "moe: routed experts each token is sent to (required)", 1, 4096),
          layer_key("shared_experts", ParamType::Int, "experts", 0,
                    "moe: experts every token takes besides its routed ones (DeepSeekMoE's shared experts), each of units "
                    "hidden features",
                    0, 4096),
          layer_key("gated", ParamType::Bool, "", true,
                    "moe: each expert's gate and up projections multiplied (SwiGLU with activation silu, GeGLU with gelu); "
                    "false: one up projection through the activation"),
          layer_key("capacity_factor", ParamType::Float, "", 0,
                    "moe: each expert's buffer in routed token rows over the balanced count (GShard, Switch Transformer: "
                    "padded to it, tokens beyond it dropped; at least 1); 0: dropless (MaxText's megablox default), each "
                    "expert computing what it is sent",
                    0, 64),
          layer_key("routing_imbalance", ParamType::Float, "", 1,
                    "moe, dropless: the busiest chip's routed rows over the balanced count; every chip is simulated at it, "
                    "since the all-to-alls wait for the busiest (1: perfectly balanced routing, an optimistic assumption)",
                    1, 64),
          layer_key("group_tile_rows", ParamType::Int, "rows", 0,
                    "moe, gather dispatch: rows of one tile of the grouped-matmul kernel the experts run in (megablox's gmm "
                    "and tgmm tile their rows by tm, MaxText's tile_batch_seq, 512 by default; tokamax's ragged dot by its "
                    "tuned table, 256 to 1024). The experts' rows follow each other in one sorted buffer, so each expert's "
                    "first rows share a tile with the one before, which the kernel computes again for it (a masked store): "
                    "local experts - 1 more tiles of every grouped matmul, its rows or, for a weight gradient, its contracted "
                    "rows, executed MXU work but no model FLOPs. 0: every expert's rows a whole number of tiles",
                    0, 1e6),
          layer_key("dispatch", ParamType::String, "", "gather",
                    "moe: how the routed rows reach the experts and come back: gather (sorted rows, gathered and scattered by "
                    "vector passes, as MaxText's megablox and ragged-dot paths) or einsum (matmuls by one-hot dispatch and "
                    "combine masks of experts x capacity per sequence, as MaxText's dense_matmul path with a capacity factor "
                    "and GShard: MXU work that is no model FLOPs; needs capacity_factor)",
                    -kUnbounded, kUnbounded, {"gather", "einsum"})
    };
  }

  std::vector<std::string> required_keys() const override { return {"experts", "units"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    ctx.need_rank(node, 2, "a [tokens, features]");
    if (own(s).top_k > s.experts) ctx.fail("top_k", fmt::format("{} experts per token, of {} experts", own(s).top_k, s.experts));
    if (own(s).capacity_factor > 0 && own(s).capacity_factor < 1)
      ctx.fail("capacity_factor", fmt::format("{} drops tokens even when routing is balanced; expected 0 (dropless) or at least 1",
                                              own(s).capacity_factor));
    if (own(s).einsum && own(s).capacity_factor <= 0)
      ctx.fail("dispatch", "einsum dispatch multiplies by masks of a fixed capacity; set capacity_factor (MaxText's dense_matmul path)");
    if (own(s).group_tile_rows > 0 && own(s).einsum)
      ctx.fail("group_tile_rows", "applies to the grouped matmul of gather dispatch; einsum dispatch multiplies whole buffers");
    if (own(s).capacity_factor > 0 && own(s).routing_imbalance != 1)
      ctx.fail("routing_imbalance", "applies to dropless routing (capacity_factor 0); a capacity factor fixes each expert's rows");
    if (s.experts % s.expert_shards)
      ctx.fail("experts", fmt::format("{} experts do not split over {} chips", s.experts, s.expert_shards));
    const std::uint64_t d = node.in[1];
    node.out = node.in;
    const std::uint64_t per_expert = ctx.checked_mul(d, s.units) * (own(s).gated ? 3 : 2);
    const std::uint64_t local = ctx.checked_mul(per_expert, s.experts / s.expert_shards);
    node.params = node.trainable = local + ctx.checked_mul(d, s.experts) + ctx.checked_mul(per_expert, own(s).shared_experts);
    node.expert_local_trainable = s.expert_shards > 1 ? local : 0;
    node.forward_flops = flops_per_sample(node).forward();
  }

  double training_flops(const Node& node, bool input_needs_grad) const override {
    const MoeFlops f = flops_per_sample(node);
    const bool trained = node.spec.trainable;
    double total = f.forward();
    if (trained) total += f.forward();  // every weight's gradient
    // The down projections' input gradient, which the gate-and-up's weight gradient needs too.
    if (trained || input_needs_grad) total += f.routed_down + f.shared_down;
    if (input_needs_grad) total += f.routed_in + f.shared_in + f.router;
    return total;
  }

  bool keeps_input(const Node& node) const override { return node.spec.trainable; }  // the router's and gate-and-up's weight gradients
  std::uint64_t saved_own_bytes(const StepEmitter& em, const Node& node) const override {
    const MoeGeometry g = geometry(em, node);
    // Routed: the dispatched rows, the gate-and-up pre-activations and their product, each
    // expert's output (for the router's gradient); the router's probabilities; the shared
    // experts' pre-activations and product.
    const std::uint64_t routed = g.dispatched * (g.d + g.in_width + g.u) + g.routed * g.d;
    return (routed + g.tokens * g.shared * (g.in_width + g.u)) * g.act_bytes + g.tokens * g.experts * 4;
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/fwd";
    const MoeGeometry g = geometry(em, node);
    const std::uint32_t b = g.act_bytes;
    const std::uint32_t router = em.matmul(base + "/router", Phase::Forward, g.tokens, g.d, g.experts, DType::F32, deps);
    const std::uint32_t route = em.vector(base + "/router/softmax+top_k", Phase::Forward, g.tokens * g.experts,
                                          kRouterVpuOpsBase + kRouterVpuOpsPerChoice * static_cast<double>(g.top_k),
                                          g.tokens * g.experts * 4, g.routed * 8, {router});
    em.reduces_along_lanes(route, static_cast<std::uint32_t>(2 + g.top_k), g.tokens * g.experts * 4);
    std::vector<std::uint32_t> dispatch_deps = deps;
    dispatch_deps.push_back(route);
    std::uint32_t dispatch;
    if (g.einsum) {
      // The dispatch and combine masks, [seq, experts x capacity] per sequence, then the
      // dispatch: mask^T x rows.
      const std::uint64_t mask = g.sequences * g.seq * g.slots;
      dispatch_deps = {em.vector(base + "/dispatch_masks", Phase::Forward, mask, 2, g.routed * 8, 2 * mask * b, {route})};
      dispatch_deps.insert(dispatch_deps.end(), deps.begin(), deps.end());
      dispatch = mask_matmul(em, base + "/dispatch", Phase::Forward, g, g.slots, g.seq, g.d, dispatch_deps);
    } else {  // each routed row gathered from its token into the expert's buffer (padding slots written)
      dispatch = em.vector(base + "/dispatch", Phase::Forward,
                           VectorWork{g.dispatched * g.d, 1, g.routed * g.d * b, g.dispatched * g.d * b, g.d * b, 0, 0, 0},
                           dispatch_deps);
    }
    const std::vector<std::uint32_t> sent = em.expert_exchange(base + "/dispatch", Phase::Forward, g.dispatched * g.d * b, {dispatch});
    // The shared experts need no exchange: they run while the routed rows travel.
    std::vector<std::uint32_t> combine_deps = {route};
    if (g.shared > 0) combine_deps.push_back(shared_forward(em, node, g, base, deps));
    const std::uint32_t down = expert_forward(em, node, g, base + "/experts", sent);
    const std::vector<std::uint32_t> back = em.expert_exchange(base + "/combine", Phase::Forward, g.dispatched * g.d * b, {down});
    combine_deps.insert(combine_deps.end(), back.begin(), back.end());
    // Each token's top_k rows weighted by its probabilities and added up (with the shared experts' output).
    const double parts = static_cast<double>(g.top_k) + (g.shared > 0 ? 1.0 : 0.0);
    if (g.einsum) {  // the combine mask x the experts' rows, the shared experts' output added in the epilogue
      const std::uint32_t combine = mask_matmul(em, base + "/combine", Phase::Forward, g, g.seq, g.slots, g.d, combine_deps);
      em.op(combine).matmul.epilogue_vpu_ops_per_element = g.shared > 0 ? 1 : 0;
      em.op(combine).matmul.epilogue_operand_bytes_per_element = g.shared > 0 ? b : 0;
      return combine;
    }
    return em.vector(base + "/combine", Phase::Forward,
                     VectorWork{g.tokens * g.d, 2 * parts, g.routed * (g.d * b + 4) + (g.shared > 0 ? g.tokens * g.d * b : 0),
                                g.tokens * g.d * b, g.d * b, 0, 0, 0},
                     combine_deps);
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    const MoeGeometry g = geometry(em, node);
    const std::uint32_t b = g.act_bytes;
    Backward r;
    if (!ctx.needs_dw && !ctx.needs_dx) return r;
    // The output's gradient scattered into the experts' rows (times each token's probability),
    // and each routed row's dot product with its expert's output, the router weights' gradient.
    // Einsum dispatch: the combine mask^T x the gradient, and the gradient x the experts' rows^T
    // for the mask's (the probabilities') gradient.
    std::uint32_t scatter, probabilities;
    if (g.einsum) {
      scatter = mask_matmul(em, base + "/combine/dX", Phase::Backward, g, g.slots, g.seq, g.d, dy);
      probabilities = mask_matmul(em, base + "/combine/dmask", Phase::Backward, g, g.seq, g.d, g.slots, dy);
    } else {
      scatter = probabilities = em.vector(
          base + "/combine", Phase::Backward,
          VectorWork{g.dispatched * g.d, 3, g.tokens * g.d * b + g.routed * (g.d * b + 4), g.dispatched * g.d * b + g.routed * 4, g.d * b,
                     0, 0, 0},
          dy);
    }
    const std::vector<std::uint32_t> received = em.expert_exchange(base + "/combine", Phase::Backward, g.dispatched * g.d * b, {scatter});
    std::vector<std::uint32_t> dx_parts;
    const auto routed = expert_backward(em, node, g, base + "/experts", received, ctx, r.grads);
    if (ctx.needs_dx) {
      const std::vector<std::uint32_t> home = em.expert_exchange(base + "/dispatch", Phase::Backward, g.dispatched * g.d * b, {routed});
      dx_parts.push_back(g.einsum ? mask_matmul(em, base + "/dispatch/dX", Phase::Backward, g, g.seq, g.slots, g.d, home)
                                  : em.vector(base + "/dispatch", Phase::Backward,
                                              VectorWork{g.tokens * g.d, static_cast<double>(g.top_k), g.routed * g.d * b,
                                                         g.tokens * g.d * b, g.d * b, 0, 0, 0},
                                              home));
    }
    // The router: softmax and top-k's gradient to the logits, then its weight and input gradients.
    const std::uint32_t logits = em.vector(base + "/router/softmax+top_k", Phase::Backward, g.tokens * g.experts, 4,
                                           g.tokens * g.experts * 4 + g.routed * 4, g.tokens * g.experts * b, {probabilities});
    if (ctx.needs_dw) r.grads.push_back(em.matmul(base + "/router/dW", Phase::Backward, g.d, g.tokens, g.experts, DType::F32, {logits}));
    if (ctx.needs_dx) dx_parts.push_back(em.matmul(base + "/router/dX", Phase::Backward, g.tokens, g.experts, g.d, em.act(), {logits}));
    if (g.shared > 0) {
      const std::uint32_t shared = shared_backward(em, node, g, base + "/shared", dy, ctx, r.grads);
      if (ctx.needs_dx) dx_parts.push_back(shared);
    }
    if (!ctx.needs_dx) return r;
    r.dx = em.vector(base + "/dX_sum", Phase::Backward, g.tokens * g.d, static_cast<double>(dx_parts.size() - 1),
                     dx_parts.size() * g.tokens * g.d * b, g.tokens * g.d * b, dx_parts);
    r.has_dx = true;
    return r;
  }

 private:
  // One of einsum dispatch's products by a mask, per sequence [m, k] x [k, n]: executed MXU work,
  // no model FLOPs.
  static std::uint32_t mask_matmul(StepEmitter& em, const std::string& name, Phase phase, const MoeGeometry& g, std::uint64_t m,
                                   std::uint64_t k, std::uint64_t n, std::vector<std::uint32_t> deps) {
    const std::uint32_t op = em.matmul(name, phase, m, k, n, em.act(), std::move(deps), 0, 0, g.sequences);
    em.op(op).model_flops = 0;
    return op;
  }

  // An MLP of `experts` experts (the batch of its matmuls), `rows` rows each, `useful` of all
  // its rows model FLOPs: gate and up in one matmul whose epilogue applies the activation and
  // multiplies (writing the pre-activations, kept for the backward pass, and their product),
  // then down.
  static std::uint32_t mlp_forward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& name,
                                   std::uint64_t experts, std::uint64_t rows, std::uint64_t useful, std::uint64_t width,
                                   std::vector<std::uint32_t> deps) {
    const LayerSpec& s = node.spec;
    const std::uint64_t in_width = own(s).gated ? 2 * width : width;
    const std::uint32_t in = em.matmul(fused_name(name + "/gate_up", false, s.activation) + (own(s).gated ? "*up" : ""),
                                       Phase::Forward, rows, g.d, in_width, em.act(), std::move(deps),
                                       activation_vpu_ops(s.activation) + (own(s).gated ? 1 : 0), 0, experts);
    if (own(s).gated) em.op(in).matmul.out_write_fraction = 1.5;  // both pre-activations and their product
    em.op(in).model_flops = 2.0 * static_cast<double>(useful * g.d * in_width);
    const std::uint32_t down = em.matmul(name + "/down", Phase::Forward, rows, width, g.d, em.act(), {in}, 0, 0, experts);
    em.op(down).model_flops = 2.0 * static_cast<double>(useful * width * g.d);
    return down;
  }
  static std::uint32_t expert_forward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& name,
                                      std::vector<std::uint32_t> deps) {
    return mlp_forward(em, node, g, name, g.local_experts, g.computed_rows, g.routed, g.u, std::move(deps));
  }
  static std::uint32_t shared_forward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& base,
                                      std::vector<std::uint32_t> deps) {
    return mlp_forward(em, node, g, base + "/shared", 1, g.tokens, g.tokens, g.shared * g.u, std::move(deps));
  }

  // The MLP's backward: down's input gradient (its epilogue applying the activation's and the
  // product's gradient from the kept pre-activations, writing both halves), the weight
  // gradients, and the gate-and-up's input gradient when the input needs one (else the last op
  // emitted). Weight gradients go to `grads`.
  static std::uint32_t mlp_backward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& name,
                                    std::uint64_t experts, std::uint64_t rows, std::uint64_t useful, std::uint64_t width,
                                    std::vector<std::uint32_t> deps, const BackwardContext& ctx, std::vector<std::uint32_t>& grads) {
    const LayerSpec& s = node.spec;
    const std::uint64_t in_width = own(s).gated ? 2 * width : width;
    const double epilogue = activation_grad_vpu_ops(s.activation) + (own(s).gated ? 3 : 1);
    const std::uint32_t d_in = em.matmul(name + "/down/dX", Phase::Backward, rows, g.d, width, em.act(), deps, epilogue,
                                         (own(s).gated ? 2 : 1) * g.act_bytes, experts);
    if (own(s).gated) em.op(d_in).matmul.out_write_fraction = 2;  // the gate's and the up projection's gradients
    em.op(d_in).model_flops = 2.0 * static_cast<double>(useful * g.d * width);
    std::uint32_t last = d_in;
    if (ctx.needs_dw) {
      const std::uint32_t down_dw = em.matmul(name + "/down/dW", Phase::Backward, width, rows, g.d, DType::F32, deps, 0, 0, experts);
      em.op(down_dw).model_flops = 2.0 * static_cast<double>(useful * width * g.d);
      const std::uint32_t in_dw = em.matmul(name + "/gate_up/dW", Phase::Backward, g.d, rows, in_width, DType::F32, {d_in}, 0, 0, experts);
      em.op(in_dw).model_flops = 2.0 * static_cast<double>(useful * g.d * in_width);
      grads.insert(grads.end(), {down_dw, in_dw});
      last = in_dw;
    }
    if (!ctx.needs_dx) return last;
    const std::uint32_t dx = em.matmul(name + "/gate_up/dX", Phase::Backward, rows, in_width, g.d, em.act(), {d_in}, 0, 0, experts);
    em.op(dx).model_flops = 2.0 * static_cast<double>(useful * in_width * g.d);
    return dx;
  }
  static std::uint32_t expert_backward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& name,
                                       std::vector<std::uint32_t> deps, const BackwardContext& ctx, std::vector<std::uint32_t>& grads) {
    return mlp_backward(em, node, g, name, g.local_experts, g.computed_rows, g.routed, g.u, std::move(deps), ctx, grads);
  }
  static std::uint32_t shared_backward(StepEmitter& em, const Node& node, const MoeGeometry& g, const std::string& name,
                                       std::vector<std::uint32_t> deps, const BackwardContext& ctx, std::vector<std::uint32_t>& grads) {
    return mlp_backward(em, node, g, name, 1, g.tokens, g.tokens, g.shared * g.u, std::move(deps), ctx, grads);
  }
};

}  // namespace

const LayerKind& moe_kind() {
  static const Moe kind;
  return kind;
}

}  // namespace tpusim::kinds
