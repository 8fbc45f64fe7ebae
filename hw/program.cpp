#include "hw/program.hpp"

#include <stdexcept>

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

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all-reduce";
    case CollectiveKind::ReduceScatter: return "reduce-scatter";
    case CollectiveKind::AllGather: return "all-gather";
    case CollectiveKind::Permute: return "permute";
    case CollectiveKind::AllToAll: return "all-to-all";
  }
  return "?";
}

const char* collective_algorithm_name(CollectiveAlgorithm a) {
  switch (a) {
    case CollectiveAlgorithm::Ring: return "ring";
    case CollectiveAlgorithm::BidirRing: return "bidir_ring";
    case CollectiveAlgorithm::Torus: return "torus";
    case CollectiveAlgorithm::TorusAllAxes: return "torus_all_axes";
  }
  return "?";
}

namespace {

constexpr CollectiveAlgorithm kCollectiveAlgorithms[] = {CollectiveAlgorithm::Ring, CollectiveAlgorithm::BidirRing,
                                                         CollectiveAlgorithm::Torus, CollectiveAlgorithm::TorusAllAxes};

}  // namespace

CollectiveAlgorithm parse_collective_algorithm(const std::string& name) {
  for (auto a : kCollectiveAlgorithms)
    if (name == collective_algorithm_name(a)) return a;
  throw std::invalid_argument("unknown collective algorithm \"" + name + "\"");
}

std::vector<std::string> collective_algorithm_names() {
  std::vector<std::string> names;
  for (auto a : kCollectiveAlgorithms) names.emplace_back(collective_algorithm_name(a));
  return names;
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
