// One op of one kind, alone on one chip whose cores all run it at once, operands in HBM: what
// `tpusim gemm` and `tpusim op` time. A framework that times such an op also pays the launch of
// its program (hw.host.launch_overhead_us), so both figures are reported.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/units.hpp"

namespace tpusim {

struct SingleOpTiming {
  Picos op_ps = 0;  // the slowest core's op
  double mxu_busy_fraction = 0, vpu_busy_fraction = 0, hbm_busy_fraction = 0;
  std::uint64_t hbm_bytes = 0;
};

// One chip of `hw` on which only `cores` of its TensorCores run, each its own replica; where each
// core has its own HBM, the HBM of the others is left out. `command` names the request in errors.
HwConfig cores_alone(const HwConfig& hw, std::uint32_t cores, const std::string& command);

// `hw`: one chip (slice_dims {1}) with the cores that run `op`. `what` names the request in
// errors (e.g. "simulating the matmul").
SingleOpTiming simulate_single_op(const HwConfig& hw, const Op& op, std::uint64_t max_memory_bytes, const std::string& what);

// Whichever of the op's engine and HBM was busier bounds it; when neither was busy half the
// time, fixed costs (DMA issue, HBM latency, pipeline fill and drain) did.
const char* bound_of(double engine_busy_fraction, double hbm_busy_fraction);

// "s sharing its HBM" or "s, each with its own HBM" after "N core", as the result says.
const char* cores_text(const nlohmann::ordered_json& result);

// Adds time_s (the device's), launch_overhead_s and framework_time_s to `out`.
void add_times(nlohmann::ordered_json& out, const HwConfig& hw, double device_time_s);
// The device's time (followed by `note`) and, when launches cost anything, the framework's.
std::string format_times(const nlohmann::ordered_json& result, const std::string& note = "");

}  // namespace tpusim
