#include "hw/program.hpp"

namespace tpusim {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::Int8: return "int8";
    case DType::Fp8: return "fp8";
  }
  return "?";
}

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Input: return "input";
    case Phase::Forward: return "forward";
    case Phase::Backward: return "backward";
    case Phase::Gradients: return "gradients";
    case Phase::Optimizer: return "optimizer";
  }
  return "?";
}

}  // namespace tpusim
