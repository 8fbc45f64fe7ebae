// The workload parser and the training-step driver on arbitrary bytes: every input either loads
// and lowers, or is refused with an InputError (exit code 2 on the command line). Anything else
// (another exception, a crash, a sanitizer report, a hang) is a finding.
#include <cstdint>
#include <stdexcept>

#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "workloads/lower.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tpusim::ConfigRequest request;
  request.workload_path = tpusim::fuzz::write_input("workload.json", data, size);
  request.hw = "tpu_v5e";
  try {
    const tpusim::Config config = tpusim::load_config(request);
    tpusim::lower_training_step(config.workload, config.hw);
  } catch (const tpusim::InputError&) {
  } catch (const std::invalid_argument&) {  // the driver's refusals, which `run` reports as input errors
  }
  return 0;
}
