#include "sim/csv.hpp"

namespace tpusim {
namespace {

void flatten_into(const nlohmann::ordered_json& j, const std::string& prefix, const std::string& separator,
                  std::vector<std::pair<std::string, nlohmann::ordered_json>>& out) {
  for (const auto& [k, v] : j.items()) {
    const std::string name = prefix.empty() ? k : prefix + separator + k;
    if (v.is_object()) {
      flatten_into(v, name, separator, out);
    } else if (v.is_array()) {
      std::string joined;
      for (const auto& e : v) joined += (joined.empty() ? "" : "; ") + (e.is_string() ? e.get<std::string>() : e.dump());
      out.emplace_back(name, joined);
    } else {
      out.emplace_back(name, v);
    }
  }
}

}  // namespace

std::vector<std::pair<std::string, nlohmann::ordered_json>> flatten_json(const nlohmann::ordered_json& j,
                                                                         const std::string& separator) {
  std::vector<std::pair<std::string, nlohmann::ordered_json>> out;
  flatten_into(j, "", separator, out);
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace tpusim
