// A product of two activations, batched and broadcasting as numpy's matmul: [..., m, k] x
// [..., k, n] -> [..., m, n] (attention's QK^T and AV as a framework writes them). No weights;
// its backward multiplies the output gradient by each operand: dA = dY B^T, dB = A^T dY.
#include <algorithm>

#include <fmt/format.h>

#include "workloads/kinds/common.hpp"
#include "workloads/kinds/registry.hpp"

namespace tpusim::kinds {
namespace {

struct MatmulGeometry {
  std::uint64_t m, k, n;
  std::uint64_t products;  // per sample: the product of the output's batch dimensions
};

MatmulGeometry geometry(const Node& node) {
  const Shape& out = node.out;
  MatmulGeometry g;
  g.m = out[out.size() - 2];
  g.n = out.back();
  g.k = node.in.back();
  g.products = elements(out) / (g.m * g.n);
  return g;
}

class Matmul : public LayerKind {
 public:
  Matmul() : LayerKind("matmul") {}
  bool takes_several_inputs() const override { return true; }

  void infer(Node& node, const InferContext& ctx) const override {
    if (node.inputs.size() != 2) ctx.fail("inputs", "a matmul layer multiplies two inputs");
    const Shape& a = node.in;
    const Shape& b = ctx.shape_of(node.inputs[1]);
    if (a.size() < 2 || b.size() < 2)
      ctx.fail("inputs", fmt::format("{} x {}: each operand needs at least [rows, columns]", shape_string(a), shape_string(b)));
    if (a.back() != b[b.size() - 2])
      ctx.fail("inputs", fmt::format("{} x {}: the inner dimensions differ", shape_string(a), shape_string(b)));
    // The batch dimensions, aligned from the right, must be equal or 1 (broadcast).
    const std::size_t batch_rank = std::max(a.size(), b.size()) - 2;
    Shape out(batch_rank);
    for (std::size_t d = 0; d < batch_rank; ++d) {
      const std::size_t from_end = batch_rank - d;  // 1: the batch axis next to the matrix
      const std::uint64_t da = from_end <= a.size() - 2 ? a[a.size() - 2 - from_end] : 1;
      const std::uint64_t db = from_end <= b.size() - 2 ? b[b.size() - 2 - from_end] : 1;
      if (da != db && da != 1 && db != 1)
        ctx.fail("inputs", fmt::format("{} x {}: batch dimensions do not broadcast", shape_string(a), shape_string(b)));
      out[d] = std::max(da, db);
    }
    out.push_back(a[a.size() - 2]);
    out.push_back(b.back());
    node.out = out;
    const MatmulGeometry g = geometry(node);
    node.forward_flops = 2.0 * static_cast<double>(g.products) * static_cast<double>(g.m) *
                         static_cast<double>(ctx.checked_mul(g.k, g.n));
  }

  // Both operands are activations: with gradients to pass, each costs what the forward costs.
  double training_flops(const Node& node, bool input_needs_grad) const override {
    return node.forward_flops * (input_needs_grad ? 3.0 : 1.0);
  }

  std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const override {
    const MatmulGeometry g = geometry(node);
    return em.matmul(node.spec.name + "/fwd/matmul", Phase::Forward, g.m, g.k, g.n, em.act(), std::move(deps), 0, 0,
                     em.rows(g.products));
  }

  Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy, const BackwardContext& ctx) const override {
    Backward r;
    if (!ctx.needs_dx) return r;
    const MatmulGeometry g = geometry(node);
    const std::string base = node.spec.name + "/bwd";
    const std::uint64_t count = em.rows(g.products);
    const std::uint32_t da = em.matmul(base + "/dA", Phase::Backward, g.m, g.n, g.k, em.act(), dy, 0, 0, count);
    // dB = A^T dY is [k, n]; the compiler may as well produce its transpose dY^T A, and takes
    // the layout that streams more rows through the MXU (QK^T's dK: tokens, not head width).
    const std::uint32_t db = g.k >= g.n ? em.matmul(base + "/dB", Phase::Backward, g.k, g.m, g.n, em.act(), dy, 0, 0, count)
                                        : em.matmul(base + "/dB", Phase::Backward, g.n, g.m, g.k, em.act(), dy, 0, 0, count);
    r.input_dx = {da, db};
    return r;
  }

  bool keeps_input(const Node&) const override { return true; }  // both operands, for each other's gradient
};

}  // namespace

const LayerKind& matmul_kind() {
  static const Matmul kind;
  return kind;
}

}  // namespace tpusim::kinds
