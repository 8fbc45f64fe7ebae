// The TensorCore's compute units as TLM-2.0 targets. Each serves one request at a time; a
// request that arrives while the unit is busy queues behind it.
//
//   Request r; r.job().rows = 512; r.job().weight_tiles = 4;
//   sc_time delay = SC_ZERO_TIME; mxu_socket->b_transport(r.payload(), delay);  // delay: until done
#pragma once

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"
#include "hw/systolic_timing.hpp"

namespace tpusim {

// A unit whose service time is a number of its own clock cycles.
// It serves b_transport itself (BlockingTarget) and keeps its state last, next to the interface's
// virtual-base pointers at the end of the object (see hw/ici.hpp): the chips' collective units
// call every chip's vector unit once per ring piece.
template <typename Derived>
class CycleUnit : public sc_core::sc_module, public BlockingTarget {
 public:
  tlm::tlm_target_socket<32, tlm::tlm_base_protocol_types, 0> socket;  // any number of initiators

  CycleUnit(sc_core::sc_module_name name, Clock clock, EventSink* sink, UnitInfo info)
      : sc_module(name), socket("socket"), clock_(clock), reporter_(sink, std::move(info)) {
    socket.bind(*this);
  }
  std::uint64_t busy_cycles() const { return busy_cycles_; }
  // The useful FLOPs its requests carried (UnitRequest::flops), for the end-of-run checks.
  double flops() const { return flops_; }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override {
    UnitRequest& job = job_of(payload);
    const Picos now = now_ps();
    // Work of the same op that can start the moment the unit's last work ends continues its
    // stream (the unit's bookings are in order: one engine feeds it, block after block).
    const bool continues = job.label != nullptr && job.label == last_label_ && now + delay.value() <= last_end_ &&
                           occupancy_.busy_until_ps() == last_end_;
    const std::uint64_t cycles = static_cast<Derived*>(this)->service_cycles(job, continues);
    // Blocks of one matmul repeat one cycle count: convert once (cycles_to_ps rounds in long double).
    if (cycles != memo_cycles_) {
      memo_cycles_ = cycles;
      memo_ps_ = clock_.cycles_to_ps(cycles);
    }
    job.served = occupancy_.reserve(now, now + delay.value(), memo_ps_);
    last_label_ = job.label;
    last_end_ = job.served.end;
    busy_cycles_ += cycles;
    flops_ += job.flops;
    static_cast<Derived*>(this)->account(job);
    reporter_.busy(job.served, job, 0, cycles);
    delay = ps_time(job.served.end - now);
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }

  Clock clock_;
  Reporter reporter_;
  Occupancy occupancy_;
  std::uint64_t busy_cycles_ = 0;
  double flops_ = 0;
  std::uint64_t memo_cycles_ = 0;
  Picos memo_ps_ = 0;
  const std::string* last_label_ = nullptr;
  Picos last_end_ = 0;
};

class Mxu : public CycleUnit<Mxu> {
 public:
  Mxu(sc_core::sc_module_name name, const MxuConfig& config, Clock clock, EventSink* sink,
      UnitInfo info)
      : CycleUnit(name, clock, sink, std::move(info)),
        array_{config.rows, config.cols, config.weight_double_buffered} {}
  std::uint64_t service_cycles(const UnitRequest& job, bool continues_stream) const {
    return systolic_cycles(array_, job.rows, job.weight_tiles, job.rows_per_cycle, continues_stream);
  }
  // Every cell of the array multiplies for every row through every tile, padding included.
  void account(const UnitRequest& job) {
    executed_flops_ += 2.0 * static_cast<double>(job.rows) * static_cast<double>(job.weight_tiles) *
                       static_cast<double>(array_.rows) * static_cast<double>(array_.cols);
  }
  double executed_flops() const { return executed_flops_; }

 private:
  SystolicArray array_;
  double executed_flops_ = 0;
};

class Vpu : public CycleUnit<Vpu> {
 public:
  Vpu(sc_core::sc_module_name name, const VpuConfig& config, Clock clock, EventSink* sink,
      UnitInfo info)
      : CycleUnit(name, clock, sink, std::move(info)),
        shape_{config.lanes, config.sublanes, config.alus_per_element} {}
  std::uint64_t service_cycles(const UnitRequest& job, bool) const {
    return vector_cycles(shape_, job.elements, job.ops_per_element);
  }
  void account(const UnitRequest&) {}

 private:
  VectorUnitShape shape_;
};

}  // namespace tpusim
