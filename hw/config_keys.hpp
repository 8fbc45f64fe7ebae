// How a hardware configuration block declares the keys it is read from. Each block's
// `declare_keys(Keys& k)` names every field a document sets, once, beside the field: its key,
// unit, limits and description. What happens to the declarations is the visitor's business:
// sim/params lists and validates them (list-params, --set, did-you-mean, the docs' tables) and
// sim/config reads a document's values into the fields. A new hardware key is its field, its
// line in the block's declaration and its value in the presets; nothing else.
//
// A visitor `Keys` provides:
//   k.key(name, field, info)            a number, bool or string the document must set
//   k.optional(name, field, info)       a std::optional<double> the document may leave out
//   k.choice(name, field, names, info)  an enum spelt as one of `names` (its name table)
//   k.block(name, block)                a nested block (its keys prefixed "name.")
//   k.optional_block(name, block)       a std::optional nested block whose keys may all be left
//                                       out; its owner reads it (its keys come in pairs)
#pragma once

#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

struct KeyInfo {
  const char* unit = "";
  const char* description = "";
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  // The value when a document leaves the key out; none: every preset sets it.
  std::optional<double> default_value = std::nullopt;
};

// An enum's names in documents, in the order list-params shows them.
template <typename Enum>
using NameTable = std::pair<Enum, const char*>;

// One key of a hardware or workload document as the parameter registry holds it (sim/params):
// the hardware blocks' declarations and the layer kinds' own keys become these.
// Window: one integer (a square window, or a sequence's length) or [height, width].
enum class ParamType { Int, Float, Bool, String, IntList, Window, StringList, ObjectList, StringMap };

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

}  // namespace tpusim
