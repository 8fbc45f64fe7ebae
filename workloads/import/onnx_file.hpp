// An ONNX model file as plain C++: the graph's inputs, outputs, nodes with their attributes, and
// the initializers' names and shapes. What tpusim needs of a model is its structure and shapes,
// so tensor payloads are skipped as the file is read (a model with 100 MB of weights is not
// loaded); only small tensors (shape arithmetic, constants) keep their values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpusim {

// Newest opset of the default domain the importer knows (what torch 1.13 writes at most).
constexpr std::int64_t kMaxOnnxOpset = 17;

struct OnnxDim {
  std::int64_t value = -1;  // -1: symbolic (or unknown)
  std::string symbol;
};

struct OnnxValueInfo {
  std::string name;
  std::int32_t elem_type = 0;  // TensorProto.DataType: 1 float, 7 int64, ...
  std::vector<OnnxDim> dims;
};

// A tensor's description; `values` only when it has at most kSmallTensor elements stored in the
// file (int64/int32/float/double data), for constants the importer folds.
struct OnnxTensor {
  static constexpr std::size_t kSmallTensor = 64;
  std::string name;
  std::int32_t data_type = 0;
  std::vector<std::int64_t> dims;
  std::vector<double> values;
  bool has_values = false;
};

struct OnnxAttribute {
  enum class Type { Undefined, Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Other };
  std::string name;
  Type type = Type::Undefined;
  float f = 0;
  std::int64_t i = 0;
  std::string s;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  OnnxTensor t;
};

struct OnnxNode {
  std::string name, op_type, domain;
  std::vector<std::string> inputs, outputs;  // "" : an optional input left out
  std::vector<OnnxAttribute> attributes;

  const OnnxAttribute* attribute(std::string_view attribute_name) const;  // nullptr when absent
  std::int64_t int_attribute(std::string_view attribute_name, std::int64_t fallback) const;
  std::vector<std::int64_t> ints_attribute(std::string_view attribute_name) const;  // empty when absent
};

struct OnnxModel {
  std::int64_t ir_version = 0;
  std::int64_t opset = 0;  // of the default ("" / "ai.onnx") domain
  std::string producer_name, producer_version, graph_name;
  std::vector<OnnxValueInfo> inputs, outputs, value_info;
  std::vector<OnnxTensor> initializers;
  std::vector<OnnxNode> nodes;  // in the file's order, which the reader checks is topological
  // ONNX's training information (TrainingInfoProto): the parameters its update_binding says
  // training writes. With training information, a parameter not among them is frozen.
  bool has_training_info = false;
  std::vector<std::string> updated_parameters;
};

// Throws std::invalid_argument with one line naming the file (`origin`) and the problem: not an
// ONNX model, truncated, no graph, an opset beyond kMaxOnnxOpset, a node of another domain,
// weights in external files, a value produced twice, an input nothing produces, a cycle.
OnnxModel read_onnx_file(const std::string& path);
OnnxModel read_onnx(std::string_view bytes, const std::string& origin);

}  // namespace tpusim
