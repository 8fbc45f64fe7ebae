// The HTML report of a sweep: one self-contained page (inline SVG, no script, no network) with
// throughput, step time, the step-time breakdown, MFU and utilization, and per-core memory
// against HBM capacity for every point, and the table of all points.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpusim {

// `sweep`: the document written to sweep.json ({"axes": [...], "rows": [...]}).
std::string render_sweep_report(const nlohmann::ordered_json& sweep);

}  // namespace tpusim
