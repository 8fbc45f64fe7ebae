// Reading a Chrome Trace Event file back: validation (`tpusim trace-check`) and a terminal
// summary (`tpusim trace-summary`). Works on any trace in the format, not only tpusim's.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

struct TraceCheck {
  std::size_t events = 0, slices = 0, processes = 0, tracks = 0;
  std::vector<std::string> problems;  // empty: valid
};

// Required fields, named processes and tracks, strict nesting of the slices of each track,
// matched flow events, non-decreasing timestamps of each counter.
TraceCheck check_trace(const nlohmann::json& trace);

// Top ops by time per step per core (the cores' op tracks; every slice for other traces) and
// busy time per track in chip/core/unit order, as text.
std::string summarize_trace(const nlohmann::json& trace, std::size_t top);

}  // namespace tpusim
