#include "workloads/kinds/common.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

namespace tpusim::kinds {

bool broadcasts_to(const Shape& in, const Shape& out) {
  if (in.size() > out.size()) return false;
  for (std::size_t d = 0; d < in.size(); ++d) {
    const std::uint64_t o = out[out.size() - in.size() + d];
    if (in[d] != o && in[d] != 1) return false;
  }
  return true;
}

Spatial spatial_of(const Shape& in) {
  if (in.size() == 2) return {1, in[0], in[1]};
  return {in.at(0), in.at(1), in.at(2)};
}

Shape spatial_shape(const Shape& in, std::uint64_t height, std::uint64_t width, std::uint64_t channels) {
  if (in.size() == 2) return {width, channels};
  return {height, width, channels};
}

void check_window_rank(Node& node, const InferContext& ctx, std::vector<std::size_t> ranks) {
  const bool image = std::find(ranks.begin(), ranks.end(), 3) != ranks.end();
  const bool sequence = std::find(ranks.begin(), ranks.end(), 2) != ranks.end();
  const char* what = image && sequence ? "an [height, width, channels] or [steps, channels]"
                     : image           ? "an [height, width, channels]"
                                       : "a [steps, channels]";
  if (std::find(ranks.begin(), ranks.end(), node.in.size()) == ranks.end())
    ctx.fail("", fmt::format("a {} layer needs {} input, got {}", node.spec.type, what, shape_string(node.in)));
  LayerSpec& s = node.spec;
  if ((s.strides.h == 0) != (s.strides.w == 0))
    ctx.fail("strides", fmt::format("[{}, {}]: 0 (the default) takes both axes or neither", s.strides.h, s.strides.w));
  if (s.padding == "causal" && !(node.in.size() == 2 && s.type == "conv1d"))
    ctx.fail("padding", "causal padding is for a convolution over a sequence (conv1d); expected same or valid");
  if (node.in.size() == 3) {
    if (!s.pads.empty() && s.pads.size() != 4)
      ctx.fail("pads", fmt::format("expected [top, bottom, left, right] on an image, got {} values", s.pads.size()));
    return;
  }
  if (!s.pads.empty() && s.pads.size() != 2)
    ctx.fail("pads", fmt::format("expected [before, after] on a sequence, got {} values", s.pads.size()));
  for (auto [key, window] : {std::pair{"kernel", &s.kernel}, {"strides", &s.strides}, {"dilation", &s.dilation}, {"pool", &s.pool}}) {
    if (window->h != window->w)
      ctx.fail(key, fmt::format("[{}, {}] on a sequence: expected one number (the window along its steps)", window->h, window->w));
    window->h = window->w == 0 ? 0 : 1;
  }
}

WindowOut window_out(const Spatial& in, WindowSize k, WindowSize s, WindowSize d, const LayerSpec& spec) {
  auto size = [&](std::uint64_t n, std::uint64_t kernel, std::uint64_t stride, std::uint64_t dilation, std::uint64_t before,
                  std::uint64_t after, bool same) -> std::uint64_t {
    if (same) return (n + stride - 1) / stride;
    const std::uint64_t span = dilation * (kernel - 1) + 1, padded = n + before + after;
    if (padded < span) return 0;
    if (!spec.ceil_mode) return (padded - span) / stride + 1;
    // torch's rule: a last, partial window counts if it starts inside the input or its left pad.
    std::uint64_t count = (padded - span + stride - 1) / stride + 1;
    if ((count - 1) * stride >= n + before) --count;
    return count;
  };
  const bool same = spec.pads.empty() && spec.padding == "same";
  std::uint64_t top = 0, bottom = 0, left = 0, right = 0;
  if (spec.pads.size() == 4) {
    top = spec.pads[0], bottom = spec.pads[1], left = spec.pads[2], right = spec.pads[3];
  } else if (spec.pads.size() == 2) {
    left = spec.pads[0], right = spec.pads[1];
  } else if (spec.padding == "causal") {  // Keras Conv1D's: every output sees only the steps up to its own
    left = d.w * (k.w - 1);
  }
  return {size(in.height, k.h, s.h, d.h, top, bottom, same), size(in.width, k.w, s.w, d.w, left, right, same)};
}

std::string window_string(const Node& node, WindowSize w) {
  return node.in.size() == 2 ? std::to_string(w.w) : fmt::format("{}x{}", w.h, w.w);
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
