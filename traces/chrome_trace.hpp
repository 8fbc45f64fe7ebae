// Streams Chrome Trace Event JSON (opens in Perfetto and chrome://tracing) straight to disk:
// memory does not grow with the trace. One process per chip (and one per host), one thread per
// unit, each named by metadata events; timestamps in microseconds with nanosecond precision,
// exact cycles (or picoseconds, for units without a clock) in args.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/event_sink.hpp"

namespace tpusim {

// What goes into a trace. Levels nest: steps (one slice per step per core, and the host),
// ops (+ op engines, collectives, ICI links, PCIe), tiles (+ every MXU, VPU and DMA transaction).
struct TraceFilter {
  TraceLevel level = TraceLevel::Ops;
  std::vector<UnitKind> kinds;              // empty: every kind the level includes
  std::uint64_t begin_ps = 0, end_ps = ~std::uint64_t{0};  // slices overlapping this window
  // Bandwidth counters: one sample per 10 us, coarser (doubling) as a long run would give one
  // counter more than kMaxCounterSamples (a GPT-3 step of 20 s: 2 million per counter).
  std::uint64_t counter_interval_ps = 10'000'000;
  static constexpr std::size_t kMaxCounterSamples = 1 << 14;
  // Chips whose tracks and counters go in, as inclusive ranges; empty: every chip. A host's
  // tracks go in when they work for one of them.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> chips;
  bool admits_any_chip(std::uint32_t first, std::uint32_t last) const;  // of chips first..last
  bool admits_chips(const UnitInfo& unit) const;  // the unit's chip, or a chip a host unit serves
  // How many of a slice's chips go in.
  std::uint32_t chip_count(std::uint32_t slice_chips) const;
  bool admits(const UnitInfo& unit) const;
  bool admits(const Activity& a) const { return a.end_ps > begin_ps && a.start_ps < end_ps; }
};
// A trace of every chip of a large slice is too large to open (BERT-large on 256 chips at `ops`:
// 1.5 GB), and in data parallelism the chips run the same program: by default a trace covers
// every chip of slices up to this size and this many chips of larger ones.
constexpr std::uint32_t kDefaultTracedChips = 16;
std::vector<std::pair<std::uint32_t, std::uint32_t>> default_traced_chips(std::uint32_t chip_count);
// "0-15", "0-3,8"; "all" for no ranges.
std::string chip_list_string(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& chips);

// A track's thread_sort_index: chip/core/unit order (a core's steps, op engines, MXUs, VPU, DMA
// engines; then the chip's collective unit and ICI links), whatever order units registered in.
std::uint32_t track_sort_index(const UnitInfo& info);

// The level a unit's slices first appear at.
TraceLevel level_of(UnitKind kind);

class ChromeTraceWriter {
 public:
  // Throws std::runtime_error when the file cannot be created. `gzip`: write it compressed.
  ChromeTraceWriter(const std::string& path, TraceFilter filter = {}, bool gzip = false);
  ~ChromeTraceWriter();
  ChromeTraceWriter(const ChromeTraceWriter&) = delete;
  ChromeTraceWriter& operator=(const ChromeTraceWriter&) = delete;

  void add_unit(std::uint32_t unit, const UnitInfo& info);
  void slice(const UnitInfo& info, const Activity& activity);
  // Whether slice() would use the unit's activities (a track of its own or a bandwidth counter).
  bool wants_activities(std::uint32_t unit) const {
    return (unit < admitted_.size() && admitted_[unit]) ||
           (unit < counter_of_unit_.size() && counter_of_unit_[unit] != nullptr);
  }
  // Whether the unit's chip and kind are in the trace (level() draws its counters).
  bool admitted(std::uint32_t unit) const { return unit < admitted_.size() && admitted_[unit]; }
  // An arrow from a point on one unit's track to a point on another's (flow start and end).
  void flow(std::uint32_t from_unit, std::uint64_t from_ps, std::uint32_t to_unit, std::uint64_t to_ps, const std::string* name);
  // A counter track of the unit's process; samples at one time collapse into the last one.
  void level(std::uint32_t unit, const std::string* counter, const char* value_unit, std::uint64_t at_ps, double value);
  // Ends the JSON document; `metadata` goes to the top-level "otherData" object.
  void close(const nlohmann::json& metadata);
  std::uint64_t events_written() const { return events_; }

  static std::uint32_t pid_of(const UnitInfo& info) {
    return info.chip == kHostChip ? 1000000 + info.index : info.chip + 1;
  }
  // "12.345678" µs from picoseconds, truncated to whole nanoseconds so that consecutive slices
  // of one track, which never overlap in picoseconds, never overlap once printed either.
  static std::string micros(std::uint64_t ps);

 private:
  void emit(const std::string& event);
  void write(const char* text);
  // Bytes moved per counter interval, per (process, counter); written sorted at close, since
  // units book their work ahead of time and report out of order.
  void count_bytes(const Activity& a);
  void emit_counters();
  const std::string& quoted(const std::string* name);

  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  // gzFile when compressing
  std::string path_;
  int write_errno_ = 0;  // the first write's failure (a full disk), for the error message
  TraceFilter filter_;
  std::vector<bool> admitted_;  // per unit
  std::vector<std::uint32_t> pid_of_unit_;
  std::uint64_t flows_ = 0;
  struct LevelSample {
    const char* value_unit;
    std::uint64_t at_ps;
    double value;
  };
  // The newest sample of each (unit, counter), held back until time moves on.
  std::map<std::pair<std::uint32_t, const std::string*>, LevelSample> pending_levels_;
  void emit_level(std::uint32_t unit, const std::string* counter, const LevelSample& sample);
  std::map<std::pair<std::uint32_t, std::string>, std::map<std::uint64_t, double>> counter_bytes_;
  std::uint64_t counter_interval_ps_;  // the counters' current interval (the filter's, doubled as needed)
  std::vector<std::map<std::uint64_t, double>*> counter_of_unit_;  // per unit: its counter's intervals, or null
  std::uint64_t events_ = 0;
  std::map<std::uint32_t, std::uint32_t> next_tid_;   // per pid
  std::vector<std::uint32_t> tid_of_unit_;
  std::unordered_map<const std::string*, std::string> quoted_;
};

}  // namespace tpusim
