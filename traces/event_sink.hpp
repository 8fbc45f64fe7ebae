// The one interface through which hardware modules report what they did. Statistics and the
// trace writer both sit behind it; modules never open files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tpusim {

// How much of a run a trace shows: a kind of unit appears from its level on.
enum class TraceLevel { None, Steps, Ops, Tiles };

// tpusim's own kinds; a program's own follow them (register_unit_kind).
enum class UnitKind : std::uint8_t { Sequencer, Mxu, Vpu, Dma, Hbm, IciLink, Pcie, Host, Collective, Steps, Dcn };

// What the rest of tpusim knows of a kind of unit, one row each: a new kind of tpusim's is its
// value above and its row below, a program's own kind its row given to register_unit_kind; the
// trace, the statistics, the end-of-run checks, --trace-units and the summary's utilization and
// traffic read the rows (unit_kinds()).
struct UnitKindTraits {
  UnitKind kind;
  const char* name;          // in traces, timeline.json and --trace-units
  TraceLevel shown_from;     // the least --trace level whose trace has its tracks
  bool selectable;           // --trace-units may name it
  bool keeps_spans;          // its busy time may count in its core's breakdown (sim/stats.hpp: by kind or engine)
  bool serves_work;          // hardware serving requests (the checks report the busiest), not op or step tracks
  std::uint32_t track_rank;  // its place among a core's tracks, or among a chip's shared units
  const char* utilization;   // its key in the summary's utilization, or none
  const char* traffic;       // its key in the summary's traffic_per_step, or none
  const char* counter;       // its bandwidth counter in the trace, or none ("" : each unit's own, named by its label)
};
inline constexpr UnitKindTraits kBuiltInUnitKinds[] = {
    {UnitKind::Sequencer, "op", TraceLevel::Ops, true, true, false, 8, nullptr, nullptr, nullptr},
    {UnitKind::Mxu, "mxu", TraceLevel::Tiles, true, true, true, 5, "mxu", nullptr, nullptr},
    {UnitKind::Vpu, "vpu", TraceLevel::Tiles, true, true, true, 6, "vpu", nullptr, nullptr},
    {UnitKind::Dma, "dma", TraceLevel::Tiles, true, false, true, 7, nullptr, nullptr, nullptr},
    {UnitKind::Hbm, "hbm", TraceLevel::Tiles, false, false, true, 3, "hbm", "hbm_bytes", "HBM GB/s"},
    {UnitKind::IciLink, "ici", TraceLevel::Ops, true, false, true, 1, "ici", "ici_bytes", ""},
    {UnitKind::Pcie, "pcie", TraceLevel::Ops, true, false, true, 8, nullptr, "pcie_bytes", "PCIe GB/s"},
    {UnitKind::Host, "host", TraceLevel::Steps, true, false, true, 8, nullptr, nullptr, nullptr},
    {UnitKind::Collective, "collective", TraceLevel::Ops, true, true, false, 0, nullptr, nullptr, nullptr},
    {UnitKind::Steps, "steps", TraceLevel::Steps, true, false, false, 0, nullptr, nullptr, nullptr},
    {UnitKind::Dcn, "dcn", TraceLevel::Ops, true, false, true, 2, "dcn", "dcn_bytes", "DCN GB/s"},
};
// At most this many kinds, tpusim's and a program's own.
inline constexpr std::size_t kMaxUnitKinds = 32;
// Every kind of unit in the order of their values: tpusim's, then a program's own in the order
// it registered them.
const std::vector<UnitKindTraits>& unit_kinds();
// Adds a kind of unit of one's own after tpusim's (tests/custom_unit_main.cpp is a whole
// program with one) and returns its value; `traits.kind` is ignored. Register before the command
// line is read (--trace-units lists the kinds). The strings are copied. Throws
// std::invalid_argument for a name, summary key or counter another kind has, or beyond
// kMaxUnitKinds kinds.
UnitKind register_unit_kind(const UnitKindTraits& traits);
inline const UnitKindTraits& traits_of(UnitKind kind) { return unit_kinds()[static_cast<std::size_t>(kind)]; }
inline const char* unit_kind_name(UnitKind kind) { return traits_of(kind).name; }

// The op engines of a TensorCore: the tracks on which its sequencer runs each kind of op, one per
// stream (ops of one kind on another stream run beside them).
enum class OpEngine : std::uint8_t { None, Matmul, Vector, Collective, Infeed };

// A core's unit belongs to core `core` of its chip; a chip's shared units (HBM, ICI links, the
// collective unit) and a host's have no core.
constexpr std::uint32_t kNoCore = 0xffffffffu;

struct UnitInfo {
  std::string path;        // "chip0.core1.mxu2"; the host is "host0" (for people: code reads the fields)
  UnitKind kind;
  std::uint32_t chip = 0;  // the trace process; hosts have chip == kHostChip
  std::uint32_t core = kNoCore;
  OpEngine engine = OpEngine::None;  // a core's op engine: which, and its stream
  std::uint32_t stream = 0;
  std::uint32_t index = 0; // position among the units of this kind on the same chip
  double freq_mhz = 0;     // 0 for units without a clock of their own
  std::string label;       // track name in the trace, e.g. "core1.mxu2"
  bool traced = true;      // false: statistics only (units too fine-grained for a readable trace)
  // A host's unit: the chips it works for, [first_served_chip, first_served_chip + served_chips).
  std::uint32_t first_served_chip = 0;
  std::uint32_t served_chips = 0;
};

constexpr std::uint32_t kHostChip = 0xffffffffu;

// One busy interval of a unit. Intervals of one unit never overlap: the unit is a resource that
// serves one request at a time.
struct Activity {
  std::uint32_t unit = 0;
  std::uint64_t start_ps = 0;
  std::uint64_t end_ps = 0;
  const std::string* name = nullptr;  // owned by the program or the module, outlives the sink
  std::uint32_t step = 0;
  std::uint64_t bytes = 0;
  double flops = 0;
  std::uint64_t cycles = 0;  // exact busy cycles where the unit counts them; 0: derive from time
  // Busy time to account when it is not end - start: a unit of parallel lanes (HBM channels)
  // reports the lanes' busy time averaged over its lanes; 0: end - start.
  std::uint64_t busy_ps = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  // Called during elaboration; the returned id is what activities refer to.
  virtual std::uint32_t add_unit(UnitInfo info) = 0;
  virtual void record(const Activity& activity) = 0;
  // Whether `unit`'s activities are wanted one by one (a trace track or counter, kept intervals).
  // When not, a unit with very many fine-grained requests (HBM chunks) may sum them per step
  // and hand over the sums through add_totals() instead.
  virtual bool wants_activities(std::uint32_t unit) const {
    (void)unit;
    return true;
  }
  // Busy time and bytes of `unit` in `step` that were not reported as activities; the latest
  // of them ended at `last_end_ps`.
  virtual void add_totals(std::uint32_t unit, std::uint32_t step, std::uint64_t busy_ps, std::uint64_t bytes,
                          std::uint64_t last_end_ps) {
    (void)unit, (void)step, (void)busy_ps, (void)bytes, (void)last_end_ps;
  }
  // Data that left `from_unit` at `from_ps` and was taken in by `to_unit` at `to_ps` (a
  // collective's piece crossing chips): drawn as an arrow between the two tracks.
  virtual void flow(std::uint32_t from_unit, std::uint64_t from_ps, std::uint32_t to_unit, std::uint64_t to_ps,
                    const std::string* name) {
    (void)from_unit, (void)from_ps, (void)to_unit, (void)to_ps, (void)name;
  }
  // A quantity held by `unit` changed to `value` (in `value_unit`, e.g. "MiB") at `at_ps`, which
  // never decreases from one call to the next for the same unit and counter: a counter track
  // such as vector-memory occupancy or input-buffer fill. `counter` outlives the sink.
  virtual void level(std::uint32_t unit, const std::string* counter, const char* value_unit, std::uint64_t at_ps,
                     double value) {
    (void)unit, (void)counter, (void)value_unit, (void)at_ps, (void)value;
  }
};

}  // namespace tpusim
