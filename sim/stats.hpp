// The event sink behind every run: keeps each unit's busy intervals for the statistics and
// forwards them to the trace writer when there is one. Derived figures (utilization over a
// window, the per-core time breakdown) are computed from these logs after the simulation.
#pragma once

#include <string>
#include <vector>

#include "hw/units.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/event_sink.hpp"

namespace tpusim {

struct Span {
  Picos start = 0;
  Picos end = 0;
  std::uint64_t bytes = 0;
  std::uint32_t step = 0;
};

class Recorder : public EventSink {
 public:
  explicit Recorder(ChromeTraceWriter* trace = nullptr) : trace_(trace) {}
  std::uint32_t add_unit(UnitInfo info) override;
  void record(const Activity& activity) override;

  const std::vector<UnitInfo>& units() const { return units_; }
  const std::vector<Span>& spans(std::uint32_t unit) const { return logs_[unit]; }

 private:
  ChromeTraceWriter* trace_;
  std::vector<UnitInfo> units_;
  std::vector<std::vector<Span>> logs_;
};

struct Window {
  Picos begin = 0;
  Picos end = 0;
  Picos length() const { return end - begin; }
};

// Busy picoseconds of `spans` inside the window.
Picos busy_within(const std::vector<Span>& spans, const Window& w);
// Bytes the spans of training step `step` moved.
std::uint64_t bytes_of_step(const std::vector<Span>& spans, std::uint32_t step);

// Where a core's time went, in picoseconds, over a window. Every instant falls in exactly one
// class, by priority: a compute op with the MXU or VPU busy is compute; a compute op waiting on
// its DMAs is memory-bound; otherwise an in-flight collective is exposed communication; otherwise
// a waiting infeed is input wait; the rest is idle.
struct Breakdown {
  Picos compute = 0;
  Picos memory_bound = 0;
  Picos exposed_communication = 0;
  Picos input_wait = 0;
  Picos idle = 0;
};

Breakdown core_breakdown(const Recorder& recorder, const std::string& core_path, const Window& w);

}  // namespace tpusim
