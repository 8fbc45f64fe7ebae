// The event sink behind every run: keeps per-step totals of every unit (busy time, bytes), per
// core the union of the busy intervals of each source the breakdown reads (its op engines, its
// MXUs and VPU, its collective and infeed engines), the busy intervals of every unit of chip 0
// but its HBM (the report's timeline), and forwards every activity to the trace writer when
// there is one. Memory grows with those intervals only, not with the HBM traffic or the ICI
// traffic of the other chips.
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/units.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/event_sink.hpp"

namespace tpusim {

// A unit's busy interval. Only which instants are busy is ever read (the breakdown, the timeline),
// so a span keeps nothing else: on a large slice these logs are most of the memory.
struct Span {
  Picos start = 0;
  Picos end = 0;
};

// What the breakdown of a core's time reads: whether some unit of each source was busy.
enum class BreakdownSource : std::uint8_t { Op, Compute, Collective, Input };
inline constexpr std::size_t kBreakdownSources = 4;
// Per source, the union of its units' busy intervals, kept as they are reported: a report that
// overlaps or touches the latest interval extends it (a core's MXUs and VPU stream side by side
// through a compute-bound op), any other is added. Nearly in time order: units book ahead.
using CoreLogs = std::array<std::vector<Span>, kBreakdownSources>;

struct StepTotals {
  Picos busy_ps = 0;
  std::uint64_t bytes = 0;
};

class Recorder : public EventSink {
 public:
  // `keep_spans` false: totals only, no intervals are kept. For callers that read
  // nothing but totals (the collective command): on a large slice every vector unit's intervals
  // would cost memory and, per ICI piece, cache misses, for nothing.
  Recorder(std::uint32_t steps, ChromeTraceWriter* trace, bool keep_spans = true)
      : steps_(steps), trace_(trace), keep_spans_(keep_spans) {}
  std::uint32_t add_unit(UnitInfo info) override;
  void record(const Activity& activity) override;
  bool wants_activities(std::uint32_t unit) const override {
    return keeps_[unit] || (trace_ && trace_->wants_activities(unit));
  }
  void add_totals(std::uint32_t unit, std::uint32_t step, std::uint64_t busy_ps, std::uint64_t bytes,
                  std::uint64_t last_end_ps) override {
    StepTotals& t = totals_[static_cast<std::size_t>(unit) * steps_ + std::min(step, steps_ - 1)];
    t.busy_ps += busy_ps;
    t.bytes += bytes;
    last_end_ps_[unit] = std::max<Picos>(last_end_ps_[unit], last_end_ps);
  }
  void flow(std::uint32_t from_unit, std::uint64_t from_ps, std::uint32_t to_unit, std::uint64_t to_ps,
            const std::string* name) override {
    if (trace_) trace_->flow(from_unit, from_ps, to_unit, to_ps, name);
  }
  void level(std::uint32_t unit, const std::string* counter, const char* value_unit, std::uint64_t at_ps,
             double value) override {
    if (trace_) trace_->level(unit, counter, value_unit, at_ps, value);
  }

  const std::vector<UnitInfo>& units() const { return units_; }
  // Busy intervals of chip 0's units (but its HBM); empty for the others.
  const std::vector<Span>& spans(std::uint32_t unit) const { return logs_[unit]; }
  // A core's breakdown sources; nullptr for a core with no unit that reports to one.
  const CoreLogs* core_logs(std::uint32_t chip, std::uint32_t core) const {
    const auto it = core_slot_.find({chip, core});
    return it == core_slot_.end() ? nullptr : &core_logs_[it->second];
  }
  const StepTotals& totals(std::uint32_t unit, std::uint32_t step) const {
    return totals_[static_cast<std::size_t>(unit) * steps_ + step];
  }
  // End of the unit's latest busy interval (0 if it never was busy).
  Picos last_end_ps(std::uint32_t unit) const { return last_end_ps_[unit]; }

 private:
  std::uint32_t steps_;
  ChromeTraceWriter* trace_;
  bool keep_spans_;
  std::vector<UnitInfo> units_;
  std::vector<std::vector<Span>> logs_;
  std::vector<bool> keeps_;  // per unit: whether logs_ holds its intervals
  static constexpr std::uint32_t kNoLog = ~0u;
  std::vector<std::uint32_t> log_of_;  // per unit: its core's source log (slot * kBreakdownSources + source), or kNoLog
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t> core_slot_;  // (chip, core) -> index in core_logs_
  std::vector<CoreLogs> core_logs_;
  // [unit * steps_ + step], one array: every ICI hop records an activity, and on a large slice a
  // per-unit array of its own costs a second cache miss each time.
  std::vector<StepTotals> totals_;
  std::vector<Picos> last_end_ps_;
};

// A sum of doubles that depends neither on the order of its terms nor on whether equal terms
// come one by one or counted: each distinct value times its count, in value order. A slice
// simulated with one representative per class of symmetric chips adds its figures with the class
// size as the count, and gives the same bits as the whole slice adding every chip's.
class CountedSum {
 public:
  void add(double value, std::uint64_t count = 1) { counts_[value] += count; }
  double total() const {
    double t = 0;
    for (const auto& [value, count] : counts_) t += value * static_cast<double>(count);
    return t;
  }

 private:
  std::map<double, std::uint64_t> counts_;
};

struct Window {
  Picos begin = 0;
  Picos end = 0;
  Picos length() const { return end - begin; }
};

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

// The busy intervals of chip 0's units inside `w`, relative to its start, for the report's
// timeline: one track per unit that did something, intervals closer than 1/1000 of the window
// merged (finer than a pixel). {"window_ps", "tracks": [{"label", "kind", "busy_ps": [[s, e], ...]}]}
nlohmann::ordered_json chip0_timeline(const Recorder& recorder, const Window& w);

Breakdown core_breakdown(const CoreLogs& logs, const Window& w);

}  // namespace tpusim
