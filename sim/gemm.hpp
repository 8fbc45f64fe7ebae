// `tpusim gemm`: one TensorCore runs one matmul whose operands and result live in HBM, blocked
// under its vector memory and double-buffered against DMA, so that the simulation shows whether
// the shape is MXU-bound or HBM-bound.
#pragma once

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"

namespace tpusim {

struct GemmRequest {
  std::uint64_t m = 0, n = 0, k = 0;
  DType dtype = DType::BF16;
  std::uint32_t passes = 1;  // bf16 passes of an fp32 product (XLA DEFAULT 1, HIGH 3, HIGHEST 6)
  bool scalesim_compat = false;
  bool compute_only = false;  // the MXU timing model alone: no memory, one block
  std::uint64_t block_m = 0, block_k = 0, block_n = 0;  // 0: the core chooses
  std::uint32_t cores = 1;  // TensorCores of one chip running the same matmul, sharing its HBM
  std::uint64_t max_memory_bytes = 0;  // refuse runs estimated to need more; 0: the machine's memory
};

// Throws InputError for shapes or datatypes the hardware cannot run.
nlohmann::ordered_json run_gemm(const HwConfig& hw, const GemmRequest& request);
std::string format_gemm(const nlohmann::ordered_json& result);

}  // namespace tpusim
