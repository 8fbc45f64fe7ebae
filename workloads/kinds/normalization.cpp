// Batch normalization (statistics over the batch and spatial axes, per channel), group
// normalization (Wu and He 2018; Stable Diffusion's UNet: statistics per sample over the spatial
// axes and each group of channels), layer normalization (statistics over each row's features)
// and RMS normalization (Zhang and Sennrich 2019; Llama, Gemma: each row divided by its root mean
// square and scaled, no mean and no shift): the same passes, different statistics and vector
// work.
#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

// An RMS norm's vector work per element, counted as kNormVpuOps is: forward the square, the
// row's sum, the normalizing product and the scale; its gradient the scaled dy, its product with
// x, the row's sum, two scalings, the difference, and the scale's gradient (product and sum).
constexpr double kRmsNormVpuOps = 4;
constexpr double kRmsNormGradVpuOps = 8;

class Normalization : public LayerKind {
 public:
  enum class Statistics { Batch, Group, Row, RootMeanSquare };
  Normalization(const char* name, Statistics statistics)
      : LayerKind(name),
        per_group_(statistics == Statistics::Group),
        over_batch_(statistics == Statistics::Batch || statistics == Statistics::Group),
      forward_ops_(statistics == Statistics::RootMeanSquare ? kRmsNormVpuOps : kNormVpuOps),
      backward_ops_(statistics == Statistics::RootMeanSquare ? kRmsNormGradVpuOps : kNormGradVpuOps),
      shifts_(statistics != Statistics::RootMeanSquare) {}

  std::vector<std::string> keys() const override { return per_group_ ? std::vector<std::string>{"groups"} : std::vector<std::string>{}; }
  std::vector<std::string> required_keys() const override { return keys(); }

  void infer(Node& node, const InferContext& ctx) const override {
    const std::uint64_t channels = node.in.back();
    if (per_group_ && channels % node.spec.groups)
      ctx.fail("groups", fmt::format("{} groups do not divide the {} channels of the input {}", node.spec.groups, channels,
                                     shape_string(node.in)));
    node.out = node.in;
    // gamma (and beta); batch norm also keeps two moving statistics, which Keras counts as
    // (non-trainable) parameters.
    node.trainable = (shifts_ ? 2 : 1) * channels;
    node.params = over_batch_ && !per_group_ ? 4 * channels : node.trainable;
  }

  // Statistics then normalization. A batch norm's statistics need the whole tensor before the
  // first element can be normalized: two reads. A layer norm's row stays in vector memory between
  // its statistics and its normalization: one read, as `tpusim op layer_norm` and a chained layer
  // norm charge.
  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const std::uint64_t e_in = in_elements(em, node);
    deps = em.batch_statistics_reduced(node.spec.name, Phase::Forward, batch_statistics_bytes(node), std::move(deps));
    const std::uint32_t op = em.vector(node.spec.name + "/fwd/" + name(), Phase::Forward, e_in, forward_ops_,
                                       input_passes() * e_in * em.act_bytes(), out_elements(em, node) * em.act_bytes(), std::move(deps));
    em.reduces_along_lanes(op, lane_reductions(), e_in * em.act_bytes());
    return op;
  }

  // dy and the input; a batch norm reads dy again once its two sums over the batch are known.
  // The scale's and shift's gradients are sums that ride in the input gradient's pass; a frozen
  // layer's pass costs the same (its input gradient needs the sums of dy and dy * x anyway).
  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    const std::uint64_t e_in = in_elements(em, node);
    dy = em.batch_statistics_reduced(node.spec.name, Phase::Backward, batch_statistics_bytes(node), std::move(dy));
    const std::uint32_t op = em.vector(node.spec.name + "/bwd/" + name(), Phase::Backward, e_in, backward_ops_,
                                       (input_passes() + 1) * e_in * em.act_bytes(), e_in * em.act_bytes(), std::move(dy));
    em.reduces_along_lanes(op, lane_reductions(), 2 * e_in * em.act_bytes());  // the sums of dy and of dy * x
    Backward r;
    if (ctx.needs_dw) r.grads.push_back(op);
    return pass_through(op, r);
  }

  bool elementwise() const override { return true; }
  FusedShare fused_forward(const Node&, std::uint64_t e, bool stats_from_producer) const override {
    FusedShare share;
    share.vpu_ops = forward_ops_;
    // Batch statistics need the whole tensor first; row statistics (layer norm) stay in VMEM.
    if (over_batch_ && !stats_from_producer) share.read_elements = e;
    share.lane_reductions = lane_reductions();
    return share;
  }
  FusedShare fused_backward(const Node&, std::uint64_t e, std::uint32_t act_bytes) const override {
    FusedShare share;
    share.vpu_ops = backward_ops_;
    share.read_bytes = e * act_bytes;  // the normalized input
    share.lane_reductions = lane_reductions();
    return share;
  }
  bool pointwise_in_chain(bool stats_from_producer) const override { return over_batch_ && stats_from_producer; }
  bool keeps_input(const Node&) const override { return true; }
  // Two sums per channel each way; a group norm's statistics are each sample's own.
  std::uint64_t batch_statistics_bytes(const Node& node) const override {
    return over_batch_ && !per_group_ ? 2 * node.in.back() * 4 : 0;
  }
  // Sum, sum of squares and a count: the statistics of a batch norm as the producing matmul's
  // output tiles pass by.
  double producer_epilogue_vpu_ops() const override { return over_batch_ ? 3 : 0; }

 private:
  // A layer norm's statistics (the mean and the mean square in one reduction, their gradients'
  // two sums in another) run along each row, the last axis; a batch norm's over the rows, and so
  // do a group norm's: each lane sums its channel over a sample's rows, and the few lanes of a
  // group are added once per sample, not per element.
  std::uint32_t lane_reductions() const { return over_batch_ ? 0 : 1; }
  // Forward reads of the input: a batch norm's statistics (a group norm's: a sample's, larger
  // than vector memory at a UNet's resolutions) are known only after a whole pass.
  std::uint64_t input_passes() const { return over_batch_ ? 2 : 1; }

  bool per_group_;
  bool over_batch_;  // statistics over more than a row: a batch norm's, a group norm's
  double forward_ops_, backward_ops_;
  bool shifts_;  // has beta
};

}  // namespace

const LayerKind& batch_norm_kind() {
  static const Normalization kind("batch_norm", Normalization::Statistics::Batch);
  return kind;
}

const LayerKind& group_norm_kind() {
  static const Normalization kind("group_norm", Normalization::Statistics::Group);
  return kind;
}

const LayerKind& layer_norm_kind() {
  static const Normalization kind("layer_norm", Normalization::Statistics::Row);
  return kind;
}

const LayerKind& rms_norm_kind() {
  static const Normalization kind("rms_norm", Normalization::Statistics::RootMeanSquare);
  return kind;
}

}  // namespace tpusim::kinds
