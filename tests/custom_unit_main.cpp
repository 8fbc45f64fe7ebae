// tpusim with a kind of hardware unit of one's own: the whole of what a user writes to add a unit
// to every chip, with its own statistics and trace track (traces/event_sink.hpp, hw/memory.hpp).
// test_custom_unit runs it.
//
// A compression engine in front of HBM: every transfer streams through the engine, at
// hw.hbm.compressed.engine_bw_gbps, and the memory moves `ratio` of its bytes (a lossless
// compressor of activations and weights). The engine and the memory work as a pipeline, so a
// transfer takes the slower of the two, booked as the built-in memory books its channels (the
// earliest free slot, hw/resource.hpp), and its data is there the on-chip latency after the
// booking ends. The engine is a unit of a
// kind of its own, "compressor": the summary's utilization.compressor and
// traffic_per_step.compressor_bytes, a track in the trace, `--trace-units compressor`. It plugs
// into the chip as its memory model (`--set hw.hbm.model=compressed`).
#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "hw/memory.hpp"
#include "hw/resource.hpp"
#include "hw/units.hpp"
#include "sim/cli.hpp"

namespace {

tpusim::UnitKind compressor_kind;

class CompressedMemory : public tpusim::ChipMemory {
 public:
  CompressedMemory(sc_core::sc_module_name name, const tpusim::MemorySite& site)
      : ChipMemory(name, site),
        ratio_(site.key("ratio")),
        engine_bw_gbps_(site.key("engine_bw_gbps")),
        memory_bw_gbps_(site.hw.hbm_of(site.chip).bw_gbps),
        latency_ps_(tpusim::ns_to_ps(site.hw.hbm_of(site.chip).latency_ns)) {
    tpusim::UnitInfo engine;
    engine.path = fmt::format("chip{}.compressor", site.chip);
    engine.kind = compressor_kind;
    engine.chip = site.chip;
    engine.label = "compressor";
    engine_ = tpusim::Reporter(site.sink, engine);
  }

 private:
  void serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override {
    tpusim::UnitRequest& job = tpusim::job_of(payload);
    const std::uint64_t bytes = job.bytes ? job.bytes : payload.get_data_length();
    const std::uint64_t stored_bytes = static_cast<std::uint64_t>(std::ceil(static_cast<double>(bytes) * ratio_));
    const tpusim::Picos now = tpusim::now_ps();
    const tpusim::Picos engine_ps = tpusim::transfer_ps(bytes, engine_bw_gbps_);
    const tpusim::Picos memory_ps = tpusim::transfer_ps(stored_bytes, memory_bw_gbps_);
    job.served = booked_.reserve(now, now + delay.value(), std::max(engine_ps, memory_ps));
    engine_.busy({job.served.start, job.served.start + engine_ps}, job, bytes);
    report_busy(job, {job.served.start, job.served.start + memory_ps}, stored_bytes, memory_ps);
    delay = tpusim::ps_time(job.served.end + latency_ps_ - now);
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }

  double ratio_;
  double engine_bw_gbps_;
  double memory_bw_gbps_;
  tpusim::Picos latency_ps_;
  tpusim::Reporter engine_;
  tpusim::Occupancy booked_;
};

}  // namespace

int main(int argc, char** argv) {
  // Its row: shown from --trace ops, selectable, intervals not kept (the breakdown does not read
  // them), serving work, its track beside the chip's HBM, its two summary keys and its counter.
  compressor_kind = tpusim::register_unit_kind({tpusim::UnitKind{}, "compressor", tpusim::TraceLevel::Ops, true, false, true, 4,
                                                "compressor", "compressor_bytes", "Compressor GB/s"});
  tpusim::register_memory_model(
      "compressed", "HBM behind a compression engine (tests/custom_unit_main.cpp)",
      [](const char* name, const tpusim::MemorySite& site) -> std::unique_ptr<tpusim::ChipMemory> {
        return std::make_unique<CompressedMemory>(name, site);
      },
      {{"ratio", "", "Bytes the memory moves per byte transferred", 0.05, 1, 0.5},
       {"engine_bw_gbps", "GB/s", "The compression engine's throughput", 1, 1e5, 1000}});
  return tpusim::cli_main(argc, argv);
}
