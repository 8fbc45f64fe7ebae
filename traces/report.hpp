// The HTML report of a sweep: one self-contained page (inline SVG, no script, no network) with
// throughput, step time, the step-time breakdown, MFU and utilization, and per-core memory
// against HBM capacity for every point, the table of all points, and the timeline of one step.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpusim {

// `sweep`: the document written to sweep.json ({"axes": [...], "rows": [...]}).
// `timeline`: chip 0's busy intervals over one steady-state step (sim/stats.hpp chip0_timeline) of
// the point named `timeline_point`; null: no timeline section.
std::string render_sweep_report(const nlohmann::ordered_json& sweep, const nlohmann::ordered_json& timeline = nullptr,
                                const std::string& timeline_point = "");

}  // namespace tpusim
