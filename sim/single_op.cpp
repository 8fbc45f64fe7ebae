#include "sim/single_op.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "hw/system.hpp"
#include "sim/errors.hpp"
#include "sim/invariants.hpp"
#include "sim/resources.hpp"
#include "sim/simulate.hpp"
#include "sim/stats.hpp"

namespace tpusim {

HwConfig cores_alone(const HwConfig& hw_in, std::uint32_t cores, const std::string& command) {
  if (cores < 1 || cores > hw_in.chip.cores)
    throw InputError(fmt::format("{} --cores {}: {} chips have 1 to {} TensorCores", command, cores, hw_in.name, hw_in.chip.cores));
  HwConfig hw = hw_in;
  if (hw.chip.hbm_per_core) {
    const double share = static_cast<double>(cores) / hw.chip.cores;
    hw.hbm.bw_gbps *= share;
    hw.hbm.channels = std::max<std::uint32_t>(1, hw.hbm.channels / hw.chip.cores * cores);
    hw.hbm.capacity_bytes = hw.hbm.capacity_bytes / hw.chip.cores * cores;
  }
  hw.chip.cores = cores;
  hw.chip.megacore = false;
  hw.slice_dims = {1};
  return hw;
}

SingleOpTiming simulate_single_op(const HwConfig& hw, const Op& op_in, std::uint64_t max_memory_bytes, const std::string& what) {
  Program program;
  program.steps = 1;
  program.ops.push_back(op_in);
  const Torus torus = Torus::of(hw);
  const SimulatedSlice one_chip = plan_simulated_slice(torus, hw, program, false);
  check_memory(estimate_memory(hw, program, 0, one_chip), max_memory_bytes, what);
  Recorder recorder(1, nullptr);
  System& system = elaborate(hw, program, InfeedSpec{}, &recorder, one_chip);
  simulate(system, what);
  check_invariants({&system, &program, &hw, &recorder, system.step_end_ps()[0]});

  const OpEngine engine = op_in.kind == OpKind::Matmul ? OpEngine::Matmul : OpEngine::Vector;
  SingleOpTiming t;
  Picos mxu_busy_ps = 0, vpu_busy_ps = 0, hbm_busy_ps = 0;
  std::uint64_t hbm_channels = 0;
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    const UnitInfo& info = recorder.units()[u];
    const StepTotals& totals = recorder.totals(u, 0);
    // With several cores the slowest one's op is the time.
    if (info.engine == engine && info.stream == 0) t.op_ps = std::max(t.op_ps, totals.busy_ps);
    if (info.kind == UnitKind::Mxu) mxu_busy_ps = std::max(mxu_busy_ps, totals.busy_ps);
    if (info.kind == UnitKind::Vpu) vpu_busy_ps = std::max(vpu_busy_ps, totals.busy_ps);
    if (info.kind == UnitKind::Hbm) {
      hbm_busy_ps += totals.busy_ps;
      t.hbm_bytes += totals.bytes;
      ++hbm_channels;
    }
  }
  const auto fraction = [&](Picos busy) { return static_cast<double>(busy) / static_cast<double>(t.op_ps); };
  t.mxu_busy_fraction = fraction(mxu_busy_ps);
  t.vpu_busy_fraction = fraction(vpu_busy_ps);
  t.hbm_busy_fraction = fraction(hbm_busy_ps) / static_cast<double>(std::max<std::uint64_t>(hbm_channels, 1));
  return t;
}

const char* bound_of(double engine_busy, double hbm_busy) {
  return std::max(engine_busy, hbm_busy) < 0.5 ? "latency" : engine_busy >= hbm_busy ? "compute" : "memory";
}

const char* cores_text(const nlohmann::ordered_json& r) {
  if (r["cores"].get<std::uint32_t>() == 1) return "";
  return r["hbm_per_core"].get<bool>() ? "s, each with its own HBM" : "s sharing its HBM";
}

void add_times(nlohmann::ordered_json& out, const HwConfig& hw, double device_time_s) {
  out["time_s"] = device_time_s;
  out["launch_overhead_s"] = hw.host.launch_overhead_us * 1e-6;
  out["framework_time_s"] = device_time_s + hw.host.launch_overhead_us * 1e-6;
}

std::string format_times(const nlohmann::ordered_json& r, const std::string& note) {
  const double device_us = r["time_s"].get<double>() * 1e6;
  const double launch_us = r["launch_overhead_s"].get<double>() * 1e6;
  std::string t = fmt::format("  time           {:.3f} us{}\n", device_us, note);
  if (launch_us > 0)
    t += fmt::format("  framework      {:.3f} us as a framework times it (launch {:.1f} us)\n", device_us + launch_us, launch_us);
  return t;
}

}  // namespace tpusim
