#include "workloads/kinds/common.hpp"

namespace tpusim::kinds {

InputGradEpilogue fused_input_gradient(const StepEmitter& em, const BackwardContext& ctx) {
  if (!ctx.fused_input) return {};
  const std::string& activation = ctx.fused_input->spec.activation;
  return {activation_grad_vpu_ops(activation), em.act_bytes(), "+" + activation + "_grad"};
}

std::vector<std::uint32_t> own_activation_gradient(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy) {
  const std::string& activation = node.spec.activation;
  if (activation == "linear" || em.grad_fused_elsewhere(node.index)) return dy;
  const std::uint64_t e_out = out_elements(em, node);
  return {em.vector(node.spec.name + "/bwd/" + activation + "_grad", Phase::Backward, e_out,
                    activation_grad_vpu_ops(activation), 2 * e_out * em.act_bytes(), e_out * em.act_bytes(), std::move(dy))};
}

}  // namespace tpusim::kinds
