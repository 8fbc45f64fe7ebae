// tpusim with a memory model of one's own: the whole of what a user writes to plug a SystemC
// model of their memory into every chip (hw/memory.hpp). test_memory_model runs it.
//
// `one_port` serves one access at a time at a fraction of the datasheet bandwidth (its own knob,
// hw.hbm.one_port.bw_fraction, half unless set), from when the last one finished: a deliberately
// simple model whose effect on a step is easy to predict (a memory-bound step slows down, a
// compute-bound one barely).
#include <algorithm>
#include <memory>

#include "hw/memory.hpp"
#include "hw/units.hpp"
#include "sim/cli.hpp"

namespace {

class OnePort : public tpusim::ChipMemory {
 public:
  OnePort(sc_core::sc_module_name name, const tpusim::MemorySite& site)
      : ChipMemory(name, site), bw_gbps_(site.hw.hbm_of(site.chip).bw_gbps * site.key("bw_fraction")) {}

 private:
  void serve(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) override {
    tpusim::UnitRequest& job = tpusim::job_of(payload);
    const std::uint64_t bytes = job.bytes ? job.bytes : payload.get_data_length();
    const tpusim::Picos now = tpusim::now_ps();
    const tpusim::Picos start = std::max<tpusim::Picos>(now + delay.value(), free_at_ps_);
    free_at_ps_ = start + tpusim::transfer_ps(bytes, bw_gbps_);
    job.served = {start, free_at_ps_};
    report_busy(job, job.served, bytes, free_at_ps_ - start);
    delay = tpusim::ps_time(free_at_ps_ - now);
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }

  double bw_gbps_;
  tpusim::Picos free_at_ps_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  tpusim::register_memory_model(
      "one_port", "one access at a time at a fraction of the datasheet bandwidth",
      [](const char* name, const tpusim::MemorySite& site) -> std::unique_ptr<tpusim::ChipMemory> {
        return std::make_unique<OnePort>(name, site);
      },
      {{"bw_fraction", "", "Share of hbm.bw_gbps the one port serves at", 0.01, 1, 0.5}});
  return tpusim::cli_main(argc, argv);
}
