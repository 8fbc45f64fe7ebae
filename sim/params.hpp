// The one registry of configuration keys: every key of the hardware and workload documents with
// its type, unit, default, limits and description. Validation, --set, list-params and the docs
// all read it. Paths use "[]" for the elements of a list of objects: "model.layers[].units".
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/config_keys.hpp"

namespace tpusim {

const char* param_type_name(ParamType t);
const std::vector<ParamSpec>& param_registry();
const ParamSpec* find_param(const std::string& doc, const std::string& path);
// True when some key lives below `path` (so `path` names an object).
bool has_children(const std::string& doc, const std::string& path);

}  // namespace tpusim
