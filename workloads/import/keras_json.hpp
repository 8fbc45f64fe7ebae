// Keras model JSON (what `model.to_json()` and tfjs's `model.toJSON()` write) as tpusim's own
// layer list: one front-end over the layer kinds of workloads/kinds/.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

struct ImportedModel {
  std::string name;               // the Keras model's
  nlohmann::ordered_json model;   // workload.model: input_shape, input_dtype, layers
  std::vector<std::string> notes;  // what the import folded or dropped, one sentence each
};

// Throws std::invalid_argument naming `origin`, the offending layer (index, name, class) and
// what tpusim expected.
// (sim/'s read_json_file reads the file, with its size and nesting bounds.)
ImportedModel import_keras_model(const nlohmann::json& keras, const std::string& origin);

}  // namespace tpusim
