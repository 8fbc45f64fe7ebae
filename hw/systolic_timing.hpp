// Timing of a weight-stationary systolic matrix unit and of the vector unit, in plain C++.
//
//   SystolicArray array{128, 128, true};
//   auto plan = plan_matmul(array, /*m=*/512, /*k=*/128, /*n=*/128, /*passes=*/1, /*mxus=*/1);
//   systolic_cycles(array, 512, plan.weight_tiles_per_mxu, 1.0)  // 128 + 512 + 255 = 895
#pragma once

#include <cstdint>
#include <vector>

namespace tpusim {

struct SystolicArray {
  std::uint32_t rows = 128;  // R: the K extent of one stationary weight tile
  std::uint32_t cols = 128;  // C: the N extent of one stationary weight tile
  bool weight_double_buffered = true;
};

// What one MXU does for a matmul: stream `rows` LHS rows through `weight_tiles` tiles.
struct MxuShare {
  std::uint64_t rows = 0;
  std::uint64_t weight_tiles = 0;
};

struct MatmulPlan {
  std::vector<MxuShare> shares;  // one per MXU used
  std::uint64_t k_tiles = 0;
  std::uint64_t n_tiles = 0;
  std::uint64_t weight_tiles = 0;          // k_tiles * n_tiles * passes
  std::uint64_t weight_tiles_per_mxu = 0;  // the busiest MXU's share
  std::uint32_t mxus_used = 0;
  std::uint64_t padded_macs = 0;  // MACs the array performs, padding included, all passes
  std::uint64_t useful_macs = 0;  // m * k * n
};

// Splits (m x k) @ (k x n) into R x C weight tiles (every dimension padded to the array) and
// deals them round-robin to `mxus` arrays; every pass of a multi-pass product is its own tile.
// With fewer tiles than arrays, the LHS rows are split too (in groups of 8, one vreg) and each
// tile is loaded into several arrays, so that a small matmul still uses every MXU. With more
// tiles than arrays but not a multiple of them (5 K tiles of a 3x3x64 convolution on 4 MXUs),
// the rows are split into as many groups as balance the arrays best, so that no array idles
// for the last round: shares then hold each group's rows, their weight_tiles the (tile, group)
// pairs dealt to that array.
MatmulPlan plan_matmul(const SystolicArray& array, std::uint64_t m, std::uint64_t k,
                       std::uint64_t n, std::uint32_t passes, std::uint32_t mxus);

// Cycles for one array to stream `rows` LHS rows through each of `weight_tiles` stationary
// tiles, one after the other, at `rows_per_cycle` (1 for bf16; 2 where int8 runs at twice the
// rate). Later weight loads hide behind the previous tile's streaming when double-buffered
// (costing max(0, R - streamed cycles)) and cost R each otherwise. A stream that starts on an
// idle array pays its first weight load (R cycles) and the pipeline's fill and drain
// (R + C - 1) once; work that `continues_stream` (the array's previous work was the same op's
// and ended just as this starts) enters right behind it: "after that initial bubble, new inputs
// and weights can be loaded in without an additional bubble" (scaling book, appendix B), so its
// first load costs as a later one and there is no fill or drain of its own.
std::uint64_t systolic_cycles(const SystolicArray& array, std::uint64_t rows,
                              std::uint64_t weight_tiles, double rows_per_cycle, bool continues_stream = false);

// SCALE-Sim's weight-stationary count for the same mapping (K on the array rows, N on its
// columns, the M rows streamed): every fold of the weights loads, streams and drains with no
// overlap between folds, (2R + C + M - 2) cycles each; the folds are shared by `mxus` arrays.
std::uint64_t scalesim_ws_cycles(const SystolicArray& array, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                                 std::uint32_t mxus);

struct VectorUnitShape {
  std::uint32_t lanes = 128;
  std::uint32_t sublanes = 8;
  std::uint32_t alus_per_element = 1;
};

// Cycles for `elements` 32-bit elements, padded to whole (sublanes x lanes) vregs, each needing
// `ops_per_element` ALU operations.
std::uint64_t vector_cycles(const VectorUnitShape& vpu, std::uint64_t elements,
                            double ops_per_element);

}  // namespace tpusim
