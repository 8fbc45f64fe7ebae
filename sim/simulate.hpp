// Elaborating and running the slice: the one place the SystemC kernel is set up and started.
#pragma once

#include "hw/host.hpp"
#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/system.hpp"

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "traces/summary.hpp"

namespace tpusim {

// Elaborates the slice for `program` (at 1 ps resolution, SystemC reports routed to stderr).
// SystemC allows one elaboration per process, and tearing down tens of thousands of modules
// takes its object registry quadratic time, so the System lives until the process exits.
// `simulated`: the chips to build, every one or one per class of symmetric chips (hw/symmetry.hpp).
System& elaborate(const HwConfig& hw, const Program& program, const InfeedSpec& infeed, EventSink* sink,
                  const SimulatedSlice& simulated);

// Which chips ran, for summaries and trace metadata.
SimulationSummary simulation_summary(const SimulatedSlice& simulated);
nlohmann::ordered_json simulation_json(const SimulatedSlice& simulated);

// Runs to the end, or until SIGINT or SIGTERM (then returns false, the slice part-way through
// a step); throws SimError naming `what` when a process failed or a core is stuck.
// `each_slice` is called between slices of simulated time, about ten times a wall-clock second.
bool simulate(System& system, const std::string& what, const std::function<void()>& each_slice = {});

}  // namespace tpusim
