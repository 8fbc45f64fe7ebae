// The HLO text reader and the lowering to a device program on arbitrary bytes, as `tpusim hlo
// FILE` reads a file: text that is not a module tpusim can price is refused with
// std::invalid_argument (exit 2 on the command line). Anything else (a crash, a sanitizer report,
// another exception, a hang, memory beyond the limit) is a finding.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "workloads/import/hlo_program.hpp"
#include "workloads/import/hlo_text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const tpusim::HloModule module = tpusim::parse_hlo_module(std::string(reinterpret_cast<const char*>(data), size), "fuzz.hlo");
    // The slice the device count implies, as a ring (x only): any module's groups are whole or not.
    const std::uint32_t devices = tpusim::hlo_device_count(module, "fuzz.hlo");
    if (devices <= 4096) tpusim::lower_hlo_module(module, "fuzz.hlo", {devices});
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
