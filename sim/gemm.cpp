#include "sim/gemm.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "hw/matmul_tiling.hpp"
#include "hw/systolic_timing.hpp"
#include "hw/tensor_core.hpp"
#include "sim/errors.hpp"
#include "sim/single_op.hpp"
#include "workloads/model.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

}  // namespace

ojson run_gemm(const HwConfig& hw_in, const GemmRequest& r) {
  for (auto [name, v] : {std::pair{"M", r.m}, {"N", r.n}, {"K", r.k}})
    if (v == 0 || v > (std::uint64_t{1} << 24))
      throw InputError(fmt::format("gemm: {} = {}: expected a size between 1 and {}", name, v, std::uint64_t{1} << 24));
  const double rate = hw_in.core.mxu.rows_per_cycle(r.dtype);
  if (rate <= 0) throw InputError(fmt::format("gemm --dtype {}: the MXU of {} has no {} path", dtype_name(r.dtype), hw_in.name, dtype_name(r.dtype)));

  const HwConfig hw = cores_alone(hw_in, r.cores, "gemm");
  const MxuConfig& mxu = hw.core.mxu;
  const double useful_flops = 2.0 * static_cast<double>(r.m) * static_cast<double>(r.n) * static_cast<double>(r.k);
  // At the documented peak, so that utilization shows what a sustained fraction below 1 costs.
  const double core_peak = 2.0 * mxu.per_core * mxu.rows * mxu.cols * mxu.peak_rows_per_cycle(r.dtype) * hw.core.freq_mhz * 1e6;
  const Clock clock{hw.core.freq_mhz};

  ojson out;
  out["hw"] = hw.name;
  out["m"] = r.m;
  out["n"] = r.n;
  out["k"] = r.k;
  out["dtype"] = dtype_name(r.dtype);
  out["passes"] = r.passes;
  out["array"] = fmt::format("{}x{}", mxu.rows, mxu.cols);
  out["mxus"] = mxu.per_core;
  out["freq_mhz"] = hw.core.freq_mhz;
  out["cores"] = r.cores;
  out["hbm_per_core"] = hw.chip.hbm_per_core;
  if (r.block_m > 0) out["block"] = fmt::format("{}x{}x{}", r.block_m, r.block_k, r.block_n);

  // The analytic modes report the same keys as a simulation, from a cycle count alone.
  auto analytic = [&](std::uint64_t cycles, const char* mode) {
    const double time_s = ps_to_s(clock.cycles_to_ps(cycles));
    out["mode"] = mode;
    out["cycles"] = cycles;
    add_times(out, hw, time_s);
    out["flops_per_s"] = useful_flops / time_s;
    out["mxu_utilization"] = useful_flops * r.passes / (time_s * core_peak);
    out["hbm_bytes"] = 0;
    out["bound"] = "compute";
    return out;
  };
  if (r.scalesim_compat) {
    // SCALE-Sim's assumptions: compute cycles only, no weight double-buffering, folds in sequence.
    const SystolicArray array{mxu.rows, mxu.cols, false};
    return analytic(scalesim_ws_cycles(array, r.m, r.k, r.n, mxu.per_core) * r.passes, "scalesim-compat");
  }
  if (r.compute_only) {
    // tpusim's own MXU assumptions without the memory system: the whole matmul as one block.
    const SystolicArray array{mxu.rows, mxu.cols, mxu.weight_double_buffered};
    std::uint64_t cycles = 0;
    for (const MxuShare& s : plan_matmul(array, r.m, r.k, r.n, r.passes, mxu.per_core).shares)
      cycles = std::max(cycles, systolic_cycles(array, s.rows, s.weight_tiles, rate));
    return analytic(cycles, "compute-only");
  }

  Op op;
  op.kind = OpKind::Matmul;
  op.phase = Phase::Forward;
  op.name = fmt::format("gemm {}x{}x{}", r.m, r.n, r.k);
  op.model_flops = useful_flops;
  op.matmul.m = r.m;
  op.matmul.k = r.k;
  op.matmul.n = r.n;
  op.matmul.lhs = op.matmul.rhs = r.dtype;
  op.matmul.out = DType::F32;
  op.matmul.passes = r.passes;
  op.matmul.block_m = r.block_m;
  op.matmul.block_k = r.block_k;
  op.matmul.block_n = r.block_n;

  // A forced block that cannot fit vector memory is the request's mistake, found before anything runs.
  try {
    tile_matmul(op.matmul, hw.core.mxu, TensorCore::matmul_vmem_budget_bytes(hw));
  } catch (const std::runtime_error& e) {
    throw InputError(fmt::format("gemm{}: {}", r.block_m > 0 ? " --block" : "", e.what()));
  }
  const SingleOpTiming t = simulate_single_op(hw, op, r.max_memory_bytes, "simulating the matmul");
  const double time_s = ps_to_s(t.op_ps);
  out["mode"] = "simulated";
  out["cycles"] = clock.ps_to_cycles(t.op_ps);
  add_times(out, hw, time_s);
  out["flops_per_s"] = useful_flops / time_s;
  out["mxu_utilization"] = useful_flops * r.passes / (time_s * core_peak);
  out["hbm_bytes"] = t.hbm_bytes;
  out["hbm_bw_gbps"] = static_cast<double>(t.hbm_bytes) / time_s / 1e9;
  out["mxu_busy_fraction"] = t.mxu_busy_fraction;
  out["hbm_busy_fraction"] = t.hbm_busy_fraction;
  out["bound"] = bound_of(t.mxu_busy_fraction, t.hbm_busy_fraction);
  out["arithmetic_intensity_flops_per_byte"] = useful_flops / static_cast<double>(std::max<std::uint64_t>(t.hbm_bytes, 1));
  return out;
}

std::string format_gemm(const ojson& g) {
  const auto cores = g.value("cores", 1u);
  std::string t = fmt::format("gemm {}x{}x{} ({}{}) on {} {} core{}: {} array x {} MXUs at {} MHz [{}]\n",
                              g["m"].get<std::uint64_t>(), g["n"].get<std::uint64_t>(), g["k"].get<std::uint64_t>(),
                              g["dtype"].get<std::string>(),
                              g["passes"].get<std::uint32_t>() > 1 ? fmt::format(", {} passes", g["passes"].get<std::uint32_t>()) : "",
                              cores == 1 ? std::string("one") : std::to_string(cores), g["hw"].get<std::string>(),
                              cores_text(g), g["array"].get<std::string>(),
                              g["mxus"].get<std::uint32_t>(), g["freq_mhz"].get<double>(), g["mode"].get<std::string>());
  t += fmt::format("  cycles         {}\n", g["cycles"].get<std::uint64_t>());
  t += format_times(g);
  t += fmt::format("  achieved       {:.2f} TFLOP/s, MXU utilization {:.1f}%\n", g["flops_per_s"].get<double>() / 1e12,
                   100 * g["mxu_utilization"].get<double>());
  if (g["mode"] == "simulated")
    t += fmt::format("  HBM            {} bytes moved, {:.1f} GB/s ({:.0f} FLOP/byte)\n", g["hbm_bytes"].get<std::uint64_t>(),
                     g["hbm_bw_gbps"].get<double>(), g["arithmetic_intensity_flops_per_byte"].get<double>());
  t += fmt::format("  bound          {}\n", g["bound"].get<std::string>());
  return t;
}

}  // namespace tpusim
