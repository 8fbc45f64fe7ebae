// `tpusim op KIND --shape ...`: one TensorCore runs one vector op (an elementwise op, an
// activation, a softmax or a normalization) on a tensor in HBM, charged exactly as a training
// step charges the same op, the way `tpusim gemm` times one matmul.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"

namespace tpusim {

struct VectorOpRequest {
  std::string kind;                  // one of vector_op_kinds()
  std::vector<std::uint64_t> shape;  // the input tensor's (each input's, for add and mul)
  DType dtype = DType::BF16;         // in HBM; the vector unit computes in fp32 whatever it is
  std::uint32_t cores = 1;
  std::uint64_t max_memory_bytes = 0;
};

const std::vector<std::string>& vector_op_kinds();
// Throws InputError for an unknown kind, an empty or oversized shape, or too many cores.
nlohmann::ordered_json run_vector_op(const HwConfig& hw, const VectorOpRequest& request);
std::string format_vector_op(const nlohmann::ordered_json& result);

}  // namespace tpusim
