// A fully connected layer over the last axis (Keras Dense): [..., d] x [d, units], bias and
// activation in the matmul's epilogue. Split over a model axis (sharding.hpp) by columns its
// units arrive divided and its input's gradient is summed over the axis; by rows its input
// arrives divided and its output is summed (StepEmitter::model_partial_sums). Int8 (AQT)
// quantizes its forward and input-gradient matmuls, and its weight gradient unless the workload
// keeps those in the activation type. With tied_weights it multiplies by the embedding's table
// (a language model's head) and has no parameters of its own.
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
    const std::uint64_t rows = in_elements(em, node) / d;
    std::uint32_t mm;
    if (s.tensor_parallel == "column") {
      mm = em.gathered_matmul(name, Phase::Forward, rows, d, s.units, em.act(), std::move(deps), epilogue);
    } else {
      mm = em.matmul(name, Phase::Forward, rows, d, s.units, em.act(), std::move(deps), epilogue);
      if (!s.tied_weights) mm = em.quantized(mm);  // the head's matmul by the token table is not quantized
    }
    // Split by rows over a model axis, each core holds a partial sum of the output.
    if (s.tensor_parallel != "row") return mm;
    return em.model_partial_sums(s.name + "/fwd", Phase::Forward, out_elements(em, node), {mm});
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                    const BackwardContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    if (s.tensor_parallel == "row") dy = em.model_gathered(base + "/dY", Phase::Backward, out_elements(em, node), std::move(dy));
    dy = own_activation_gradient(em, node, std::move(dy));
    const std::uint64_t d = node.in.back(), tokens = in_elements(em, node) / d;
    Backward r;
    // When a collective waits for the input's gradient, that gradient goes first so that the
    // collective runs under the weight gradient (as XLA's latency-hiding scheduler orders them).
    const bool dx_first = s.tensor_parallel == "column" && ctx.needs_dx;
    const auto weight_gradient = [&] {
      const std::uint32_t mm = em.matmul(base + "/dW", Phase::Backward, d, tokens, s.units, DType::F32, dy);
      return s.tied_weights ? mm : em.quantized_weight_gradient(mm);
    };
    std::uint32_t dw = dx_first ? 0 : weight_gradient();
    if (ctx.needs_dx) {
      const InputGradEpilogue epi = fused_input_gradient(em, ctx);
      r.dx = em.matmul(base + "/dX" + epi.name_suffix, Phase::Backward, tokens, s.units, d, em.act(), dy, epi.vpu_ops,
                       epi.operand_bytes);
      if (!s.tied_weights) r.dx = em.quantized_input_gradient(r.dx);
      // Split by columns, each core's columns give a part of the input's gradient.
      if (s.tensor_parallel == "column") r.dx = em.model_partial_sums(base + "/dX", Phase::Backward, in_elements(em, node), {r.dx});
      r.has_dx = true;
    }
    if (dx_first) dw = weight_gradient();
    if (s.use_bias) em.fuse_bias_gradient(dw, out_elements(em, node));
    r.grads.push_back(dw);
    return r;
  }
};

}  // namespace

const LayerKind& dense_kind() {
  static const Dense kind;
  return kind;
}

}  // namespace tpusim::kinds
