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

namespace {

struct AlgorithmRow {
  CollectiveAlgorithm algorithm;
  const char* name;
  const char* description;
  bool ring;
};

constexpr AlgorithmRow kCollectiveAlgorithms[] = {
    {CollectiveAlgorithm::Ring, "ring", "one unidirectional ring through the group", true},
    {CollectiveAlgorithm::BidirRing, "bidir_ring", "two rings, one each way, half the data each", true},
    {CollectiveAlgorithm::Torus, "torus", "per torus axis: reduce-scatter along each axis, then all-gather back", false},
    {CollectiveAlgorithm::TorusAllAxes, "torus_all_axes", "the torus algorithm on 1/k of the data per axis order, all k at once",
     false},
};

const AlgorithmRow& row_of(CollectiveAlgorithm a) {
  for (const AlgorithmRow& row : kCollectiveAlgorithms)
    if (row.algorithm == a) return row;
  throw std::logic_error("a collective algorithm without a row in kCollectiveAlgorithms");
}

}  // namespace

const char* collective_algorithm_name(CollectiveAlgorithm a) { return row_of(a).name; }
const char* collective_algorithm_description(CollectiveAlgorithm a) { return row_of(a).description; }
bool collective_algorithm_is_ring(CollectiveAlgorithm a) { return row_of(a).ring; }

CollectiveAlgorithm parse_collective_algorithm(const std::string& name) {
  for (const AlgorithmRow& row : kCollectiveAlgorithms)
    if (name == row.name) return row.algorithm;
  throw std::invalid_argument("unknown collective algorithm \"" + name + "\"");
}

std::vector<std::string> collective_algorithm_names() {
  std::vector<std::string> names;
  for (const AlgorithmRow& row : kCollectiveAlgorithms) names.emplace_back(row.name);
  return names;
}

std::string collective_algorithms_described() {
  std::string text;
  for (const AlgorithmRow& row : kCollectiveAlgorithms)
    text += std::string(text.empty() ? "" : ", ") + row.name + " (" + row.description + ")";
  return text;
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
