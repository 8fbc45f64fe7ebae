// The HTML report of a sweep: one self-contained page (inline SVG, no script, no network) with
// throughput (total and per chip), step time, MFU, cost and energy, one series per combination
// of the varied keys other than the x axis; the step-time breakdown, utilization and per-core
// memory against each point's own HBM capacity; a ranking by time and cost with its Pareto
// front; the timeline of one step; and the table of all points, every figure with its unit.
// A single run (a document without axes) gets a page of its own: its figures as a table, and bars.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "traces/summary.hpp"

namespace tpusim {

// `sweep`: the document written to sweep.json.
// `timeline`: chip 0's busy intervals over one steady-state step (sim/stats.hpp chip0_timeline) of
// the point named `timeline_point`; null: no timeline section.
std::string render_sweep_report(const SweepDocument& sweep, const nlohmann::ordered_json& timeline = nullptr,
                                const std::string& timeline_point = "");

}  // namespace tpusim
