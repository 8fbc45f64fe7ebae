#include "workloads/kinds/common.hpp"

namespace tpusim::kinds {

WindowOut window_out(const Shape& in, std::uint64_t k, std::uint64_t s, const LayerSpec& spec) {
  auto size = [&](std::uint64_t n, std::uint64_t before, std::uint64_t after, bool same) -> std::uint64_t {
    if (same) return (n + s - 1) / s;
    const std::uint64_t padded = n + before + after;
    if (padded < k) return 0;
    if (!spec.ceil_mode) return (padded - k) / s + 1;
    // torch's rule: a last, partial window counts if it starts inside the input or its left pad.
    std::uint64_t count = (padded - k + s - 1) / s + 1;
    if ((count - 1) * s >= n + before) --count;
    return count;
  };
  const bool same = spec.pads.empty() && spec.padding == "same";
  const std::uint64_t top = spec.pads.empty() ? 0 : spec.pads[0], bottom = spec.pads.empty() ? 0 : spec.pads[1];
  const std::uint64_t left = spec.pads.empty() ? 0 : spec.pads[2], right = spec.pads.empty() ? 0 : spec.pads[3];
  return {size(in[0], top, bottom, same), size(in[1], left, right, same)};
}

InputGradEpilogue fused_input_gradient(const StepEmitter& em, const BackwardContext& ctx) {
  if (!ctx.fused_input) return {};
  const std::string& activation = ctx.fused_input->spec.activation;
  return {activation_grad_vpu_ops(activation), em.act_bytes(), "+" + activation + "_grad"};
}

bool has_own_activation_gradient(const StepEmitter& em, const Node& node) {
  return node.spec.activation != "linear" && !em.grad_fused_elsewhere(node.index);
}

std::vector<std::uint32_t> own_activation_gradient(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy) {
  if (!has_own_activation_gradient(em, node)) return dy;
  const std::string& activation = node.spec.activation;
  const std::uint64_t e_out = out_elements(em, node);
  const std::uint32_t op = em.vector(node.spec.name + "/bwd/" + activation + "_grad", Phase::Backward, e_out,
                                     activation_grad_vpu_ops(activation), 2 * e_out * em.act_bytes(), e_out * em.act_bytes(),
                                     std::move(dy));
  em.reduces_along_lanes(op, activation_lane_reductions(activation, true), 2 * e_out * em.act_bytes());
  return {op};
}

}  // namespace tpusim::kinds
