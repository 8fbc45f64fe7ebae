// One simulation from configuration to output directory: lower the workload, elaborate the
// slice, simulate, derive the summary, and publish the outputs atomically.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/summary.hpp"

namespace tpusim {

struct RunOptions {
  std::string out_dir;
  bool force = false;  // replace an existing output directory
  TraceFilter trace;   // level None: no trace
  bool trace_gzip = false;
  std::uint64_t max_memory_bytes = 0;  // refuse runs estimated to need more; 0: the machine's memory
  // Simulate every chip even where one representative per class of symmetric chips would give
  // the same outputs (hw/symmetry.hpp).
  bool all_chips = false;
  bool trace_chips_given = false;  // trace.chips came from --trace-chips, not the default
  // The command line, written to DIR/command.txt (with the working directory) so that the run
  // can be repeated; empty: no command.txt.
  std::string command_line;
};

// Simulates and writes DIR/summary.json, summary.csv, effective_config.json and trace.json.
// The outputs appear under their final name only when all of them are complete. Throws
// InputError (bad input, unusable output directory) or SimError (the simulation failed).
RunSummary run_simulation(const Config& config, const RunOptions& options);

// The human-readable summary printed by `tpusim run`.
std::string format_summary(const RunSummary& summary);

// The configuration as simulated: {"hw": ..., "workload": ...} with every default filled in.
nlohmann::ordered_json effective_config(const Config& config);

constexpr const char* kVersion = "0.1.0";

}  // namespace tpusim
