// A fully connected layer over the last axis (Keras Dense): [..., d] x [d, units], bias and
// activation in the matmul's epilogue. Split over a model axis (sharding.hpp) by columns its
// units arrive divided and its input's gradient is summed over the axis; by rows its input
// arrives divided and its output is summed (StepEmitter::model_partial_sums). Int8 (AQT)
// quantizes its forward and input-gradient matmuls, and its weight gradient unless the workload
// keeps those in the activation type. With tied_weights it multiplies by the embedding's table
// (a language model's head) and has no parameters of its own.
#include <optional>

#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class Dense : public MatmulLayerKind {
 public:
  Dense() : MatmulLayerKind("dense") {}
  std::vector<std::string> keys() const override { return {"units", "activation", "use_bias", "tied_weights"}; }
  std::vector<std::string> required_keys() const override { return {"units"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const Shape& in = node.in;
    if (in.empty()) ctx.fail("", "a dense layer needs an input with features");
    const std::uint64_t d = in.back(), lead = elements(in) / d;
    node.out = in;
    node.out.back() = s.units;
    const ModelGraph& g = ctx.graph();
    if (!s.tied_weights)
      node.params = node.trainable = ctx.checked_mul(d, s.units) + (s.use_bias ? s.units : 0);
    else if (g.embedding() == kModelInput)
      ctx.fail("tied_weights", "no embedding layer to tie the weights to");
    else if (s.units != g.nodes[g.embedding()].spec.vocab)
      ctx.fail("units", fmt::format("a head tied to the embedding's table has its {} outputs, not {}",
                                    g.nodes[g.embedding()].spec.vocab, s.units));
    node.forward_flops = 2.0 * static_cast<double>(lead) * static_cast<double>(ctx.checked_mul(d, s.units));
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const std::uint64_t d = node.in.back();
    const double epilogue = (s.use_bias ? 1.0 : 0.0) + activation_vpu_ops(s.activation);
    const std::string name = fused_name(s.name + "/fwd/matmul", s.use_bias, s.activation);
    StepEmitter::WeightMatmul mm{name, Phase::Forward, in_elements(em, node) / d, d, s.units, em.act(), epilogue};
    mm.quantize = !s.tied_weights;  // the head's matmul by the token table is not quantized
    if (s.tensor_parallel == "column") return em.gathered_matmul(mm, std::move(deps)).product;
    // Split by rows over a model axis, each core holds a partial sum of the output.
    if (s.tensor_parallel == "row") return em.scattered_matmul(mm, s.name + "/fwd", std::move(deps));
    return em.weight_matmul(mm, std::move(deps));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                    const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    const std::uint64_t d = node.in.back(), tokens = in_elements(em, node) / d;
    const InputGradEpilogue epi = ctx.needs_dx ? fused_input_gradient(em, ctx) : InputGradEpilogue{};
    const StepEmitter::WeightMatmul dx{base + "/dX" + epi.name_suffix, Phase::Backward, tokens, s.units, d, em.act(),
                                       epi.vpu_ops, epi.operand_bytes, !s.tied_weights, StepEmitter::GradientOperand::Lhs};
    const auto weight_gradient = [&](std::vector<std::uint32_t> deps) {
      const std::uint32_t mm = em.matmul(base + "/dW", Phase::Backward, d, tokens, s.units, DType::F32, std::move(deps));
      return s.tied_weights ? mm : em.quantized_weight_gradient(mm);
    };
    Backward r;
    std::optional<std::uint32_t> dw;  // none for a frozen layer
    if (s.tensor_parallel == "row" && ctx.needs_dx && !has_own_activation_gradient(em, node) && em.windowed(dx)) {
      // Split by rows, the output's gradient arrives split by tokens: the input's gradient takes
      // each share as it arrives (collective matmul), the weight gradient the whole gathered one.
      const StepEmitter::GatheredProduct dx_product = em.gathered_matmul(dx, std::move(dy));
      r.dx = dx_product.product;
      r.has_dx = true;
      if (ctx.needs_dw) dw = weight_gradient(dx_product.operand_ready);
    } else {
      if (s.tensor_parallel == "row") dy = em.model_gathered(base + "/dY", Phase::Backward, out_elements(em, node), std::move(dy));
      dy = own_activation_gradient(em, node, std::move(dy));
      // When a collective waits for the input's gradient, that gradient goes first so that the
      // collective runs under the weight gradient (as XLA's latency-hiding scheduler orders them).
      const bool dx_first = s.tensor_parallel == "column" && ctx.needs_dx;
      if (!dx_first && ctx.needs_dw) dw = weight_gradient(dy);
      if (ctx.needs_dx) {
        // Split by columns, each core's columns give a part of the input's gradient (summed over
        // the axis here, or by the lowering once for a column group).
        r.dx = s.tensor_parallel == "column" && s.column_group.empty() ? em.scattered_matmul(dx, base + "/dX", dy)
                                                                        : em.weight_matmul(dx, dy);
        r.has_dx = true;
      }
      if (dx_first && ctx.needs_dw) dw = weight_gradient(dy);
    }
    if (!dw) return r;
    if (s.use_bias) em.fuse_bias_gradient(*dw, out_elements(em, node));
    r.grads.push_back(*dw);
    return r;
  }
};

}  // namespace

const LayerKind& dense_kind() {
  static const Dense kind;
  return kind;
}

}  // namespace tpusim::kinds
