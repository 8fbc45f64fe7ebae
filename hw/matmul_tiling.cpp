#include "hw/matmul_tiling.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/units.hpp"

namespace tpusim {

MatmulTiling tile_matmul(const MatmulWork& mm, const MxuConfig& mxu, std::uint64_t budget) {
  const std::uint64_t lhs_b = mm.lhs_stored_bytes > 0 ? mm.lhs_stored_bytes : dtype_bytes(mm.lhs), rhs_b = dtype_bytes(mm.rhs),
                      out_b = dtype_bytes(mm.out);
  MatmulTiling t;
  if (mm.batch > 1) {
    // Small batched products (attention heads) go several to a block when a whole product fits.
    const std::uint64_t m = round_up<std::uint64_t>(mm.m, 8), k = round_up<std::uint64_t>(mm.k, mxu.rows),
                        n = round_up<std::uint64_t>(mm.n, mxu.cols);
    const std::uint64_t one = 2 * (m * k * lhs_b + k * n * rhs_b) + 2 * m * n * 4;
    if (one <= budget) {
      const std::uint64_t per_block = std::min<std::uint64_t>(mm.batch, budget / one);
      t.bm = m;
      t.bk = k;
      t.bn = n;
      t.working_set_bytes = one * per_block;
      for (std::uint64_t done = 0; done < mm.batch; done += per_block) {
        MatmulBlock b;
        b.m = mm.m;
        b.k = mm.k;
        b.n = mm.n;
        b.batch = std::min(per_block, mm.batch - done);
        b.last_k = true;
        b.load_bytes = {static_cast<std::uint64_t>(static_cast<double>(b.batch * mm.m * mm.k * lhs_b) * mm.lhs_read_fraction),
                        b.batch * mm.k * mm.n * rhs_b};
        b.store_bytes = static_cast<std::uint64_t>(static_cast<double>(b.batch * mm.m * mm.n * out_b) * mm.out_write_fraction);
        t.blocks.push_back(b);
      }
      return t;
    }
    MatmulWork single = mm;  // a product too big for one block: tile each in turn
    single.batch = 1;
    MatmulTiling one_tiling = tile_matmul(single, mxu, budget);
    if (one_tiling.blocks.size() > kMaxMatmulBlocks / mm.batch)
      throw std::runtime_error(fmt::format("{} products of {} blocks each are more than the {} blocks tpusim simulates in one "
                                           "matmul", mm.batch, one_tiling.blocks.size(), kMaxMatmulBlocks));
    t = one_tiling;
    t.blocks.clear();
    for (std::uint64_t i = 0; i < mm.batch; ++i) t.blocks.insert(t.blocks.end(), one_tiling.blocks.begin(), one_tiling.blocks.end());
    return t;
  }
  auto working_set = [&] {
    return 2 * (t.bm * t.bk * lhs_b + t.bk * t.bn * rhs_b + t.bm * t.bn * mm.epilogue_operand_bytes_per_element) +
           2 * t.bm * t.bn * 4;
  };
  if (mm.block_m > 0) {
    t.bm = mm.block_m;
    t.bk = mm.block_k;
    t.bn = mm.block_n;
    if (working_set() > budget)
      throw std::runtime_error(fmt::format("a {}x{}x{} matmul block needs {} bytes of vector memory; the matmul engine has {}",
                                           t.bm, t.bk, t.bn, working_set(), budget));
  } else {
    // Larger arrays need proportionally larger blocks for the same FLOPs per byte.
    const std::uint64_t scale = std::max<std::uint64_t>(1, std::max(mxu.rows, mxu.cols) / 128);
    t.bm = std::min<std::uint64_t>(round_up<std::uint64_t>(mm.m, 8), 512 * scale);
    t.bk = std::min(round_up<std::uint64_t>(mm.k, mxu.rows), round_up<std::uint64_t>(1024 * scale, mxu.rows));
    t.bn = std::min(round_up<std::uint64_t>(mm.n, mxu.cols), round_up<std::uint64_t>(1024 * scale, mxu.cols));
    while (working_set() > budget) {
      std::uint64_t* dims[3] = {&t.bm, &t.bk, &t.bn};
      const std::uint64_t granule[3] = {8, mxu.rows, mxu.cols};
      int pick = -1;
      for (int d = 0; d < 3; ++d)
        if (*dims[d] > granule[d] && (pick < 0 || *dims[d] > *dims[pick])) pick = d;
      if (pick < 0) throw std::runtime_error("even a minimal matmul block does not fit vector memory");
      *dims[pick] = round_up<std::uint64_t>(*dims[pick] / 2, granule[pick]);
    }
  }
  t.working_set_bytes = working_set();

  const std::uint64_t m_blocks = ceil_div(mm.m, t.bm), k_blocks = ceil_div(mm.k, t.bk), n_blocks = ceil_div(mm.n, t.bn);
  // Each block is a few hundred bytes while its matmul runs: refused before they are allocated.
  if (m_blocks > kMaxMatmulBlocks / n_blocks / k_blocks)
    throw std::runtime_error(fmt::format("a {}x{}x{} matmul in {}x{}x{} blocks is {} blocks, more than the {} tpusim "
                                         "simulates in one matmul", mm.m, mm.k, mm.n, t.bm, t.bk, t.bn,
                                         m_blocks * n_blocks * k_blocks, kMaxMatmulBlocks));
  t.blocks.reserve(m_blocks * n_blocks * k_blocks);
  for (std::uint64_t i = 0; i < m_blocks; ++i) {
    const std::uint64_t am = std::min(t.bm, mm.m - i * t.bm);
    for (std::uint64_t j = 0; j < n_blocks; ++j) {
      const std::uint64_t an = std::min(t.bn, mm.n - j * t.bn);
      for (std::uint64_t kk = 0; kk < k_blocks; ++kk) {
        MatmulBlock b;
        b.m = am;
        b.n = an;
        b.k = std::min(t.bk, mm.k - kk * t.bk);
        b.last_k = kk + 1 == k_blocks;
        // A resident operand block is not fetched again: the LHS row block while it sweeps the
        // columns of a single-K-block product, the RHS when it is the only block.
        const bool lhs_resident = k_blocks == 1 && j > 0;
        const bool rhs_resident = k_blocks == 1 && n_blocks == 1 && i > 0;
        const auto lhs_bytes = static_cast<std::uint64_t>(static_cast<double>(am * b.k * lhs_b) * mm.lhs_read_fraction);
        b.load_bytes = {(lhs_resident ? 0 : lhs_bytes) + (b.last_k ? am * an * mm.epilogue_operand_bytes_per_element : 0),
                        rhs_resident ? 0 : b.k * an * rhs_b};
        b.store_bytes = b.last_k ? static_cast<std::uint64_t>(static_cast<double>(am * an * out_b) * mm.out_write_fraction) : 0;
        t.blocks.push_back(b);
      }
    }
  }
  return t;
}

}  // namespace tpusim
