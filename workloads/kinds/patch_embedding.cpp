// A vision transformer's patch embedding: non-overlapping kernel-sized patches projected to
// `dim` features (one matmul), with an optional class token and learned positions added.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

class PatchEmbedding : public LayerKind {
 public:
  PatchEmbedding() : LayerKind("patch_embedding") {}
  std::vector<std::string> keys() const override { return {"kernel", "dim", "positions"}; }
  std::vector<ParamSpec> own_keys() const override {
    return {
          layer_key("class_token", ParamType::Bool, "", false, "patch_embedding: prepend a learned class token")
    };
  }
  std::vector<std::string> required_keys() const override { return {"kernel", "dim"}; }

  void infer(Node& node, const InferContext& ctx) const override {
    const LayerSpec& s = node.spec;
    const Shape& in = node.in;
    ctx.need_rank(node, 3, "an [height, width, channels]");
    if (in[0] % s.kernel.h || in[1] % s.kernel.w)
      ctx.fail("kernel", fmt::format("{}x{} patches do not tile a {} image", s.kernel.h, s.kernel.w, shape_string(in)));
    const std::uint64_t tokens = patches(node) + (s.own_key<bool>("class_token") ? 1 : 0);
    if (s.positions && s.positions < tokens) ctx.fail("positions", fmt::format("{} positions for {} tokens", s.positions, tokens));
    node.out = {tokens, s.dim};
    const std::uint64_t weights = ctx.checked_mul(s.kernel.area() * in[2], s.dim);
    node.params = node.trainable = weights + s.dim + (s.own_key<bool>("class_token") ? s.dim : 0) + ctx.checked_mul(s.positions, s.dim);
    node.forward_flops = 2.0 * static_cast<double>(patches(node)) * static_cast<double>(weights);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/fwd";
    const std::uint64_t e_out = out_elements(em, node);
    const std::uint32_t proj = em.matmul(base + "/patches+bias", Phase::Forward, em.rows(patches(node)),
                                         s.kernel.area() * node.in[2], s.dim, em.act(), std::move(deps), 1);
    return em.vector(base + "/class_token+positions", Phase::Forward, e_out, 1, e_out * em.act_bytes(), e_out * em.act_bytes(),
                     {proj});
  }

  // The image has no gradient: only the projection's and the added tables'.
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    if (!ctx.needs_dw) return {};  // frozen, and its input is the model's images
    const LayerSpec& s = node.spec;
    const std::string base = s.name + "/bwd";
    const std::uint64_t e_out = out_elements(em, node);
    Backward r;
    r.grads.push_back(em.matmul(base + "/dW", Phase::Backward, s.kernel.area() * node.in[2], em.rows(patches(node)),
                                s.dim, DType::F32, dy));
    r.grads.push_back(em.vector(base + "/dpositions", Phase::Backward, e_out, 1, e_out * em.act_bytes(),
                                elements(node.out) * 4, std::move(dy)));
    return r;
  }

 private:
  static std::uint64_t patches(const Node& node) {
    return (node.in[0] / node.spec.kernel.h) * (node.in[1] / node.spec.kernel.w);
  }
};

}  // namespace

const LayerKind& patch_embedding_kind() {
  static const PatchEmbedding kind;
  return kind;
}

}  // namespace tpusim::kinds
