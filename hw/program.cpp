#include "hw/program.hpp"

#include <deque>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

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
  std::string name;
  std::string description;
  bool ring;
  bool registered = false;
};

// tpusim's own algorithms, then any registered at run time (a deque: the names handed out as
// C strings stay where they are as rows are added).
std::deque<AlgorithmRow>& collective_algorithm_rows() {
  static std::deque<AlgorithmRow> rows = {
      {CollectiveAlgorithm::Ring, "ring", "one unidirectional ring through the group", true},
      {CollectiveAlgorithm::BidirRing, "bidir_ring", "two rings, one each way, half the data each", true},
      {CollectiveAlgorithm::Torus, "torus", "per torus axis: reduce-scatter along each axis, then all-gather back", false},
      {CollectiveAlgorithm::TorusAllAxes, "torus_all_axes", "the torus algorithm on 1/k of the data per axis order, all k at once",
       false},
  };
  return rows;
}

const AlgorithmRow& row_of(CollectiveAlgorithm a) {
  for (const AlgorithmRow& row : collective_algorithm_rows())
    if (row.algorithm == a) return row;
  throw std::logic_error("a collective algorithm without a row in the table of collective algorithms");
}

}  // namespace

const char* collective_algorithm_name(CollectiveAlgorithm a) { return row_of(a).name.c_str(); }
const char* collective_algorithm_description(CollectiveAlgorithm a) { return row_of(a).description.c_str(); }
bool collective_algorithm_is_ring(CollectiveAlgorithm a) { return row_of(a).ring; }
bool collective_algorithm_is_registered(CollectiveAlgorithm a) { return row_of(a).registered; }

CollectiveAlgorithm parse_collective_algorithm(const std::string& name) {
  for (const AlgorithmRow& row : collective_algorithm_rows())
    if (name == row.name) return row.algorithm;
  throw std::invalid_argument("unknown collective algorithm \"" + name + "\"");
}

std::vector<std::string> collective_algorithm_names() {
  std::vector<std::string> names;
  for (const AlgorithmRow& row : collective_algorithm_rows()) names.push_back(row.name);
  return names;
}

std::string collective_algorithms_described() {
  std::string text;
  for (const AlgorithmRow& row : collective_algorithm_rows())
    text += std::string(text.empty() ? "" : ", ") + row.name + " (" + row.description + ")";
  return text;
}

CollectiveAlgorithm add_collective_algorithm_row(const std::string& name, const std::string& description) {
  std::deque<AlgorithmRow>& rows = collective_algorithm_rows();
  for (const AlgorithmRow& row : rows)
    if (row.name == name) throw std::invalid_argument("a collective algorithm named \"" + name + "\" exists already");
  if (rows.size() > std::numeric_limits<std::uint8_t>::max()) throw std::invalid_argument("too many collective algorithms");
  const auto algorithm = static_cast<CollectiveAlgorithm>(rows.size());
  rows.push_back({algorithm, name, description, false, true});
  return algorithm;
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
