#include "sim/simulate.hpp"

#include <cstring>
#include <iostream>

#include <fmt/format.h>

#include "sim/errors.hpp"

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

System& elaborate(const HwConfig& hw, const Program& program, const InfeedSpec& infeed, EventSink* sink) {
  sc_core::sc_report_handler::set_handler(report_handler);
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  return *new System("slice", hw, program, infeed, sink);  // never destroyed, see the header
}

void simulate(System& system, const std::string& what) {
  try {
    sc_core::sc_start();
  } catch (const std::exception& e) {
    throw SimError(fmt::format("{} failed: {}", what, first_line_of_report(e.what())));
  }
  std::string stuck;
  if (!system.finished(&stuck)) throw SimError(fmt::format("{} stuck (nothing left to happen): {}", what, stuck));
}

}  // namespace tpusim
