// CSV from JSON summaries: the one flattening and quoting that summary.csv and sweep.csv share.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

// Leaves of `j` in document order, nested keys joined with `separator` ("memory.per_core.total_bytes");
// arrays become one string, their elements joined with "; ".
std::vector<std::pair<std::string, nlohmann::ordered_json>> flatten_json(const nlohmann::ordered_json& j,
                                                                         const std::string& separator);

// `text` as one CSV field: quoted (inner quotes doubled) when it holds a comma, quote or newline.
std::string csv_field(const std::string& text);

}  // namespace tpusim
