// How a TensorCore blocks one matmul under its vector memory, in plain C++: block sizes, the
// order of blocks, and the bytes each block moves. The TensorCore streams these blocks through
// DMA-in, MXU and DMA-out, double-buffered.
//
//   auto tiling = tile_matmul(work, mxu_config, vmem_budget_bytes);
//   for (const MatmulBlock& b : tiling.blocks) ...  // b.m x b.k @ b.k x b.n
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"

namespace tpusim {

struct MatmulBlock {
  std::uint64_t m = 0, k = 0, n = 0;
  std::uint64_t batch = 1;  // independent products of this shape in the block
  std::array<std::uint64_t, 2> load_bytes{};  // LHS stream (with epilogue operands), RHS stream
  std::uint64_t store_bytes = 0;              // the result, written after the last K block
  bool last_k = false;
};

struct MatmulTiling {
  std::uint64_t bm = 0, bk = 0, bn = 0;
  std::uint64_t working_set_bytes = 0;  // double-buffered operands and results
  std::vector<MatmulBlock> blocks;      // M-major, then N, then K innermost
};

// Starts from at most 512 x 1024 x 1024 (the block the Pallas matmul guide tunes to on v5e: big
// enough to keep the MXUs busy, small enough to leave several blocks to pipeline; scaled by
// array size / 128 for larger arrays) unless the
// work forces a block, and halves the largest dimension until the working set fits
// `vmem_budget_bytes`. Throws std::runtime_error when even the smallest block does not fit.
// Also throws when the matmul would take more than kMaxMatmulBlocks blocks (2^26: 64 Mi blocks,
// about 13 GB of block state while the matmul runs).
MatmulTiling tile_matmul(const MatmulWork& work, const MxuConfig& mxu, std::uint64_t vmem_budget_bytes);
inline constexpr std::uint64_t kMaxMatmulBlocks = std::uint64_t{1} << 26;

}  // namespace tpusim
