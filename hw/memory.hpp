// The memory interface of a chip: what its requesters (the cores' DMA engines, the collective
// unit) program against, and the registry that gives a chip its memory model by name
// (`hw.hbm.model`), so the calibrated-rate HBM, the burst-group DRAM model, the datasheet-rate one
// or a user's own SystemC model plug in without touching the rest of the chip.
//
// A request is a TLM-2.0 generic payload (read or write, address, length; no data) carrying a
// UnitRequest (hw/sc_support.hpp): `bytes` (lengths beyond the payload's 32 bits), `run_bytes`
// (a gather's or scatter's piece length, 0 for a stream), and who asks for what (`label`, `step`).
// The delay passed in is when, from now, the request may start. A model answers in the call,
// without waiting (the requesters run one request after another through one payload): it sets
// `served` to the interval it was busy with the request and `delay` to when, from now, the data
// is there (read) or written (write). Time is returned through the annotated delay, never by
// suspending the caller.
//
// A model may declare knobs of its own (MemoryModelKey): `hw.hbm.<model>.<key>` in a document or
// --set, listed by list-params, checked against their limits like every key, each at its
// default unless set; the model reads the values with MemorySite::key().
//
// A model calls report_busy() for what it served, so the statistics (HBM utilization, the
// roofline's memory-bound time) and the trace's bandwidth counter see it. A whole program with
// its own model is tests/custom_memory_main.cpp: register the model, then call
// tpusim::cli_main (sim/cli.hpp), and select it with `--set hw.hbm.model=NAME`.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"

namespace tpusim {

// Where a memory is built: the whole hardware description, the chip's id in the slice, and the
// sink its reports go to (a trace, the statistics).
struct MemorySite {
  const HwConfig& hw;
  std::uint32_t chip = 0;
  EventSink* sink = nullptr;

  // The value of a knob the chip's memory model declared (hw.hbm.<model>.<name>).
  double key(const std::string& name) const;
};

// A knob of a memory model's own, with its unit, limits, description and the value a document
// that does not set it gets.
struct MemoryModelKey {
  std::string name;
  std::string unit;
  std::string description;
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  double default_value = 0;
};

class ChipMemory : public sc_core::sc_module, public BlockingTarget {
 public:
  tlm::tlm_target_socket<32, tlm::tlm_base_protocol_types, 0> socket;  // any number of initiators

  // What the chip's requesters moved, counted here for every model (the end-of-run checks
  // compare it with what the requesters asked for).
  std::uint64_t bytes_read() const { return bytes_read_; }
  std::uint64_t bytes_written() const { return bytes_written_; }
  // Hands the per-step sums of report_busy() to the event sink; called once when the
  // simulation ends.
  void flush_reports();

 protected:
  ChipMemory(sc_core::sc_module_name name, const MemorySite& site);
  // One request, answered in the call (see the file's comment).
  virtual void serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) = 0;
  // Accounts `bytes` of `job` served over `served`, keeping the memory busy for `busy_ps` of it
  // (less than the interval when only part of the memory was: one partition of several).
  void report_busy(const UnitRequest& job, const Interval& served, std::uint64_t bytes, Picos busy_ps);

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) final;

  Reporter reporter_;
  // A step issues tens of millions of chunk requests over a large slice: unless the sink wants
  // them one by one (a trace's HBM counter), they are summed per step and reported once.
  bool itemize_ = false;
  struct StepTotals {
    Picos busy_ps = 0;
    std::uint64_t bytes = 0;
  };
  std::vector<StepTotals> unreported_;
  Picos busy_until_ps_ = 0;
  std::uint64_t bytes_read_ = 0;
  std::uint64_t bytes_written_ = 0;
};

using MemoryFactory = std::function<std::unique_ptr<ChipMemory>(const char* module_name, const MemorySite& site)>;

// Adds a model under `name` (replacing one of that name), with the knobs it declares. Register
// before the configuration is read: `hw.hbm.model` is checked against the registered names, and
// the knobs join the keys a document may set. A model with knobs may not be named as a key or
// block of hw.hbm (its knobs would live under it): the parameter registry refuses it.
void register_memory_model(const std::string& name, const std::string& description, MemoryFactory factory,
                           std::vector<MemoryModelKey> keys = {});
bool memory_model_exists(const std::string& name);
// The registered names with their descriptions, sorted by name.
std::vector<std::pair<std::string, std::string>> memory_models();
// The knobs `name` declared (none for a name never registered).
const std::vector<MemoryModelKey>& memory_model_keys(const std::string& name);
// Builds chip `site.chip`'s memory; throws std::invalid_argument for a name never registered.
std::unique_ptr<ChipMemory> make_chip_memory(const std::string& model, const char* module_name, const MemorySite& site);

}  // namespace tpusim
