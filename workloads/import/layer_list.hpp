// What the importers share: appending a layer to tpusim's layer list as a workload file writes it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

// Why append_layer refuses a layer.
inline constexpr const char* kModelInputNotFirst =
    "reads the model input, but is not the first layer: tpusim gives the input to its first layer only";

// Appends `spec` reading `inputs` (layer names; "" is the model input), naming its inputs unless
// it reads just the layer before it. False, and nothing appended, when it reads the model input
// but is not the first layer.
inline bool append_layer(nlohmann::ordered_json& layers, nlohmann::ordered_json spec, const std::vector<std::string>& inputs) {
  const bool reads_input = inputs.empty() || std::find(inputs.begin(), inputs.end(), "") != inputs.end();
  if (reads_input && (!layers.empty() || inputs.size() > 1)) return false;
  const std::string previous = layers.empty() ? "" : layers.back()["name"].get<std::string>();
  if (inputs.size() > 1 || (!reads_input && inputs[0] != previous)) spec["inputs"] = inputs;
  layers.push_back(std::move(spec));
  return true;
}

}  // namespace tpusim
