#include "hw/systolic_timing.hpp"

#include <algorithm>
#include <cmath>

#include "hw/units.hpp"

namespace tpusim {

MatmulPlan plan_matmul(const SystolicArray& array, std::uint64_t m, std::uint64_t k,
                       std::uint64_t n, std::uint32_t passes, std::uint32_t mxus) {
  MatmulPlan plan;
  plan.k_tiles = ceil_div<std::uint64_t>(k, array.rows);
  plan.n_tiles = ceil_div<std::uint64_t>(n, array.cols);
  plan.weight_tiles = plan.k_tiles * plan.n_tiles * passes;
  const std::uint64_t tiles = plan.weight_tiles;
  if (tiles >= mxus || m <= 8) {
    // Tiles that do not divide evenly over the arrays would leave some idle for the last round:
    // the rows are split into groups too, when that shortens the busiest array's work (longer
    // streams keep the next tile's load hidden, so a small m may stay whole).
    std::uint64_t groups = 1, best = systolic_cycles(array, m, ceil_div<std::uint64_t>(tiles, mxus), 1.0);
    for (std::uint64_t g = 2; g <= mxus && tiles % mxus != 0 && g <= ceil_div<std::uint64_t>(m, 8); ++g) {
      const std::uint64_t cycles =
          systolic_cycles(array, round_up<std::uint64_t>(ceil_div(m, g), 8), ceil_div<std::uint64_t>(tiles * g, mxus), 1.0);
      if (cycles < best) best = cycles, groups = g;
    }
    const std::uint64_t rows = groups == 1 ? m : round_up<std::uint64_t>(ceil_div(m, groups), 8);
    const std::uint64_t units = tiles * groups, used = std::min<std::uint64_t>(mxus, units);
    for (std::uint64_t u = 0; u < used; ++u) plan.shares.push_back({rows, units / used + (u < units % used ? 1 : 0)});
  } else {
    const std::uint64_t row_groups = std::min<std::uint64_t>(mxus / tiles, ceil_div<std::uint64_t>(m, 8));
    const std::uint64_t rows_per_group = round_up<std::uint64_t>(ceil_div(m, row_groups), 8);
    for (std::uint64_t t = 0; t < tiles; ++t)
      for (std::uint64_t g = 0; g < row_groups; ++g) {
        const std::uint64_t first = g * rows_per_group;
        if (first < m) plan.shares.push_back({std::min(rows_per_group, m - first), 1});
      }
  }
  plan.mxus_used = static_cast<std::uint32_t>(plan.shares.size());
  for (const auto& s : plan.shares) plan.weight_tiles_per_mxu = std::max(plan.weight_tiles_per_mxu, s.weight_tiles);
  plan.padded_macs = plan.weight_tiles * m * array.rows * array.cols;
  plan.useful_macs = m * k * n;
  return plan;
}

std::uint64_t systolic_cycles(const SystolicArray& array, std::uint64_t rows,
                              std::uint64_t weight_tiles, double rows_per_cycle, bool continues_stream) {
  if (weight_tiles == 0 || rows == 0) return 0;
  const std::uint64_t stream =
      static_cast<std::uint64_t>(std::ceil(static_cast<double>(rows) / rows_per_cycle));
  const std::uint64_t load = array.rows;
  const std::uint64_t later_load_exposed =
      array.weight_double_buffered ? (load > stream ? load - stream : 0) : load;
  if (continues_stream) return weight_tiles * (stream + later_load_exposed);
  const std::uint64_t fill_drain = array.rows + array.cols - 1;
  return load + weight_tiles * stream + (weight_tiles - 1) * later_load_exposed + fill_drain;
}

std::uint64_t scalesim_ws_cycles(const SystolicArray& array, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                                 std::uint32_t mxus) {
  const std::uint64_t folds = ceil_div<std::uint64_t>(k, array.rows) * ceil_div<std::uint64_t>(n, array.cols);
  return ceil_div<std::uint64_t>(folds, mxus) * (2ull * array.rows + array.cols + m - 2);
}

std::uint64_t vector_cycles(const VectorUnitShape& vpu, std::uint64_t elements,
                            double ops_per_element) {
  if (elements == 0 || ops_per_element <= 0) return 0;
  const std::uint64_t vregs = ceil_div<std::uint64_t>(elements, std::uint64_t{vpu.lanes} * vpu.sublanes);
  return static_cast<std::uint64_t>(
      std::ceil(static_cast<double>(vregs) * ops_per_element / vpu.alus_per_element));
}

}  // namespace tpusim
