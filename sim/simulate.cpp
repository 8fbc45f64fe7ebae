#include "sim/simulate.hpp"

#include <chrono>
#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "sim/errors.hpp"
#include "sim/interrupt.hpp"
#include "sim/invariants.hpp"
#include "sim/stale_stack.hpp"

namespace tpusim {
namespace {

// SystemC reports an exception thrown in a process as "Error: (E549) uncaught exception: WHAT\n
// In file: ...": keep WHAT.
std::string first_line_of_report(const std::string& report) {
  std::string text = report;
  const std::string marker = "uncaught exception: ";
  if (const auto at = text.find(marker); at != std::string::npos) text = text.substr(at + marker.size());
  return text.substr(0, text.find('\n'));
}

void report_handler(const sc_core::sc_report& report, const sc_core::sc_actions& actions) {
  switch (report.get_severity()) {
    case sc_core::SC_INFO: return;
    case sc_core::SC_WARNING:
      // Large slices run out of guard pages for coroutine stacks; the stacks still work.
      if (std::strstr(report.get_msg_type(), "stack setup failed")) return;
      std::cerr << "tpusim: SystemC warning: " << first_line_of_report(report.get_msg()) << "\n";
      return;
    default: sc_core::sc_report_handler::default_handler(report, actions);
  }
}

}  // namespace

System& elaborate(const HwConfig& hw, const Program& program, const InfeedSpec& infeed, EventSink* sink,
                  const SimulatedSlice& simulated) {
  sc_core::sc_report_handler::set_handler(report_handler);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  return *new System("slice", hw, program, infeed, sink, simulated);  // never destroyed, see the header
}

SimulationSummary simulation_summary(const SimulatedSlice& s) {
  SimulationSummary out;
  out.representatives = s.folded();
  out.chips_simulated = s.chip_count();
  out.stands_for_at_most = s.largest_class();
  if (!s.folded()) out.all_chips_because = s.all_chips_because;
  return out;
}

nlohmann::ordered_json simulation_json(const SimulatedSlice& simulated) { return to_json(simulation_summary(simulated)); }

bool simulate(System& system, const std::string& what, const std::function<void()>& each_slice) {
  // In slices of simulated time, so that a signal is noticed within about a tenth of a second
  // of wall time. A slice grows while slices run fast and shrinks while they run slow, so the
  // slicing differs from run to run; results do not depend on it (the kernel resumes where it
  // stopped), and runs with fixed slices of 1 ps to 123 us gave byte-identical outputs.
  Picos slice_ps = 1000 * 1000;  // 1 us
  bool interrupted = false;
  try {
    sc_core::sc_start(sc_core::SC_ZERO_TIME);  // initialization and the first delta cycles
    while (sc_core::sc_pending_activity()) {
      if (interrupt_signal() != 0) {
        interrupted = true;
        break;
      }
      const auto wall_start = std::chrono::steady_clock::now();
      // A slice reaches at least the next event: one that stopped short of it would not move.
      sc_core::sc_start(std::max(ps_time(slice_ps), sc_core::sc_time_to_pending_activity()),
                        sc_core::SC_EXIT_ON_STARVATION);
      const auto wall = std::chrono::steady_clock::now() - wall_start;
      if (wall < std::chrono::milliseconds(10) && slice_ps < (Picos{1} << 50)) slice_ps *= 2;
      if (wall > std::chrono::milliseconds(100) && slice_ps > 1000) slice_ps /= 2;
      if (each_slice) each_slice();
    }
  } catch (const std::exception& e) {
    return_asan_to_this_stack();
    clear_stale_stack_poison();
    throw SimError(fmt::format("{} failed: {}", what, first_line_of_report(e.what())));
  }
  return_asan_to_this_stack();
  clear_stale_stack_poison();
  system.flush_reports();
  if (interrupted) return false;
  if (!system.finished())
    throw SimError(fmt::format("{} stuck: nothing left to happen and work unfinished:{}", what, describe_stuck(system)));
  return true;
}

}  // namespace tpusim
