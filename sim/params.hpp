// The one registry of configuration keys: every key of the hardware and workload documents with
// its type, unit, default, limits and description. Validation, --set, list-params and the docs
// all read it. Paths use "[]" for the elements of a list of objects: "model.layers[].units".
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

// Window: one integer (a square window, or a sequence's length) or [height, width].
enum class ParamType { Int, Float, Bool, String, IntList, Window, StringList, ObjectList, StringMap };
const char* param_type_name(ParamType t);

struct ParamSpec {
  std::string doc;   // "hw" or "workload"
  std::string path;  // within the document, e.g. "hbm.bw_gbps"
  ParamType type;
  std::string unit;  // "" for unitless
  nlohmann::json default_value;  // null: required (workload) or taken from the preset (hw)
  std::string description;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  std::vector<std::string> choices;
  bool required = false;
};

const std::vector<ParamSpec>& param_registry();
const ParamSpec* find_param(const std::string& doc, const std::string& path);
// True when some key lives below `path` (so `path` names an object).
bool has_children(const std::string& doc, const std::string& path);

}  // namespace tpusim
