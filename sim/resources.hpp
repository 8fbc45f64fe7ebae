// Memory a simulation will need, estimated before anything is elaborated, so that a request the
// machine cannot hold is refused with the figure instead of being killed by the kernel halfway.
//
// The estimate counts what grows with the request: the modules and processes of every chip and
// core, the busy intervals kept for the statistics, and the trace's bandwidth counters (which
// grow with simulated time, guessed from a lower bound of the step). Its coefficients were
// measured on this project's own runs (docs/reliability.md gives the runs and the ratios).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/symmetry.hpp"

namespace tpusim {

struct MemoryEstimate {
  std::uint64_t modules_bytes = 0;    // chips, cores, links, hosts
  std::uint64_t intervals_bytes = 0;  // busy intervals kept for the statistics
  std::uint64_t trace_bytes = 0;      // the trace writer's bandwidth counters
  std::uint64_t total_bytes() const { return modules_bytes + intervals_bytes + trace_bytes; }
  std::string all_chips_because;  // why every chip is simulated (SimulatedSlice), for the refusal
};

// `traced_chips`: how many chips the trace covers (0: no trace, or one without bandwidth counters);
// `simulated`: the chips that are simulated (hw/symmetry.hpp).
MemoryEstimate estimate_memory(const HwConfig& hw, const Program& program, std::uint32_t traced_chips,
                               const SimulatedSlice& simulated);

// Physical memory, or the control group's limit when that is lower; 0 if neither is readable.
std::uint64_t machine_memory_bytes();

// "1.50 GiB", "12.3 MiB", "512 bytes".
std::string size_text(double bytes);

// The process's address-space limit (RLIMIT_AS, `ulimit -v`), or 0 when there is none.
std::uint64_t address_space_limit_bytes();

// The tightest memory limit that applies, and what it is: the machine's (or its container's)
// memory, the address-space limit, or `max_memory_bytes` (--max-memory; 0: not given). {0, ""}
// when none is known.
std::pair<std::uint64_t, std::string> memory_limit(std::uint64_t max_memory_bytes);

// "512M", "4G", "4GiB", "1.5g", "1073741824": bytes (K, M, G, T are powers of 1024). Throws
// InputError naming `option` for anything else.
std::uint64_t parse_memory_size(const std::string& text, const std::string& option);

// Throws InputError with the estimate when it exceeds `limit_bytes` (the --max-memory limit; 0:
// none) or the machine's memory.
void check_memory(const MemoryEstimate& estimate, std::uint64_t limit_bytes, const std::string& what);

}  // namespace tpusim
