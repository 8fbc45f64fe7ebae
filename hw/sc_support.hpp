// SystemC glue shared by the hardware modules: picosecond time, the request extension that
// carries a unit's job through a TLM-2.0 generic payload, and activity reporting.
#pragma once

#ifndef SC_INCLUDE_DYNAMIC_PROCESSES
#define SC_INCLUDE_DYNAMIC_PROCESSES
#endif
#include <systemc>
#include <tlm>

#include <string>

#include "hw/resource.hpp"
#include "hw/units.hpp"
#include "traces/event_sink.hpp"

namespace tpusim {

struct CollectiveSpec;

// One piece of one ring step of a collective, travelling to the next chip's collective unit.
struct RingDelivery {
  std::uint64_t instance = 0;
  std::uint32_t part = 0, pass = 0, dir = 0, step = 0;
  std::uint32_t pieces = 1;  // how many pieces this step sends in this direction
  bool reduce = true;        // the receiver adds it (reduce-scatter) or stores it (all-gather)
  std::uint32_t element_bytes = 4;
};

// The kernel runs at 1 ps resolution (set once in System before any sc_time exists).
inline Picos now_ps() { return sc_core::sc_time_stamp().value(); }
inline sc_core::sc_time ps_time(Picos ps) { return sc_core::sc_time::from_value(ps); }

// What a unit is asked to do, attached to a tlm_generic_payload. Targets fill `served` with the
// interval they were busy, so initiators can pipeline without asking twice.
struct UnitRequest : tlm::tlm_extension<UnitRequest> {
  // MXU: stream `rows` LHS rows through `weight_tiles` stationary tiles.
  std::uint64_t rows = 0;
  std::uint64_t weight_tiles = 0;
  double rows_per_cycle = 1.0;
  // VPU: `elements` 32-bit elements, `ops_per_element` ALU ops each.
  std::uint64_t elements = 0;
  double ops_per_element = 0;
  std::uint64_t bytes = 0;  // ICI: payload bytes (may exceed the generic payload's 32-bit length)
  std::uint64_t run_bytes = 0;  // DMA, HBM: contiguous pieces of a gather or scatter (0: contiguous)
  // ICI: the chip the transfer is for.
  std::uint32_t dest_chip = 0;
  Picos head_ps = 0;  // when the first byte can enter the next link
  Picos tail_ps = 0;  // when the last byte has left the previous link
  std::uint32_t first_link_unit = ~0u;  // the first link's unit and start, for the trace's flow arrow
  Picos first_link_start_ps = 0;

  // Collective: what to run, and which instance (every chip of the group runs the same one).
  const CollectiveSpec* collective = nullptr;
  std::uint64_t instance = 0;
  const RingDelivery* delivery = nullptr;  // ICI: set when the transfer is a collective's ring step

  double flops = 0;
  const std::string* label = nullptr;
  std::uint32_t step = 0;
  Interval served;

  tlm::tlm_extension_base* clone() const override { return new UnitRequest(*this); }
  void copy_from(const tlm::tlm_extension_base& other) override {
    *this = static_cast<const UnitRequest&>(other);
  }
};

// A generic payload that owns its UnitRequest, for initiators that issue one request at a time.
// An initiator whose targets answer without yielding keeps one and reuses it (constructing a
// payload allocates, and a step issues millions of requests): reset() makes it a new request.
class Request {
 public:
  Request() { payload_.set_extension(&request_); }
  ~Request() { payload_.clear_extension(&request_); }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  UnitRequest& job() { return request_; }
  tlm::tlm_generic_payload& payload() { return payload_; }
  Request& reset() {
    request_ = UnitRequest{};
    payload_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    return *this;
  }
  void set_access(tlm::tlm_command cmd, std::uint64_t address, std::uint64_t bytes) {
    payload_.set_command(cmd);
    payload_.set_address(address);
    payload_.set_data_length(static_cast<unsigned>(std::min<std::uint64_t>(bytes, 0xffffffffu)));
    payload_.set_streaming_width(payload_.get_data_length());
    payload_.set_data_ptr(nullptr);  // timing-only: no data is moved
  }

 private:
  tlm::tlm_generic_payload payload_;
  UnitRequest request_;
};

// The forward interface of a module that serves b_transport only and binds its target socket to
// itself (`in.bind(*this)`): a call through the socket then lands on the module, without the
// convenience sockets' callback objects in between, each a cache miss when there are thousands of
// modules (the ICI of a large slice).
class BlockingTarget : public tlm::tlm_fw_transport_if<> {
 public:
  tlm::tlm_sync_enum nb_transport_fw(tlm::tlm_generic_payload&, tlm::tlm_phase&, sc_core::sc_time&) override {
    SC_REPORT_FATAL("tpusim", "nb_transport_fw: this target serves b_transport only");
    return tlm::TLM_COMPLETED;
  }
  bool get_direct_mem_ptr(tlm::tlm_generic_payload&, tlm::tlm_dmi&) override { return false; }
  unsigned int transport_dbg(tlm::tlm_generic_payload&) override { return 0; }
};

inline UnitRequest& job_of(tlm::tlm_generic_payload& p) {
  auto* job = p.get_extension<UnitRequest>();
  sc_assert(job != nullptr);
  return *job;
}

// A registered unit that reports its busy intervals to the sink.
class Reporter {
 public:
  Reporter() = default;
  Reporter(EventSink* sink, UnitInfo info) : sink_(sink) {
    if (sink_) unit_ = sink_->add_unit(std::move(info));
  }
  // `busy_ps`: busy time to account when it is not the slot's length (see Activity::busy_ps).
  void busy(const Interval& slot, const UnitRequest& job, std::uint64_t bytes = 0, std::uint64_t cycles = 0,
            std::uint64_t busy_ps = 0) const {
    if (!sink_ || slot.end <= slot.start) return;
    Activity a;
    a.unit = unit_;
    a.start_ps = slot.start;
    a.end_ps = slot.end;
    a.name = job.label;
    a.step = job.step;
    a.bytes = bytes;
    a.flops = job.flops;
    a.cycles = cycles;
    a.busy_ps = busy_ps;
    sink_->record(a);
  }
  void flow(std::uint32_t from_unit, Picos from_ps, Picos to_ps, const std::string* name) const {
    if (sink_ && from_unit != ~0u) sink_->flow(from_unit, from_ps, unit_, to_ps, name);
  }
  void level(const std::string* counter, const char* value_unit, Picos at_ps, double value) const {
    if (sink_) sink_->level(unit_, counter, value_unit, at_ps, value);
  }
  std::uint32_t unit() const { return unit_; }
  // See EventSink::wants_activities and add_totals.
  bool wants_activities() const { return sink_ && sink_->wants_activities(unit_); }
  void add_totals(std::uint32_t step, std::uint64_t busy_ps, std::uint64_t bytes, Picos last_end_ps) const {
    if (sink_) sink_->add_totals(unit_, step, busy_ps, bytes, last_end_ps);
  }

  void busy(const Interval& slot, const std::string* name, std::uint32_t step) const {
    UnitRequest job;
    job.label = name;
    job.step = step;
    busy(slot, job);
  }

 private:
  EventSink* sink_ = nullptr;
  std::uint32_t unit_ = 0;
};

}  // namespace tpusim
