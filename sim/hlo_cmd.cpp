#include "sim/hlo_cmd.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/system.hpp"
#include "sim/errors.hpp"
#include "sim/invariants.hpp"
#include "sim/output_dir.hpp"
#include "sim/run.hpp"
#include "sim/json_input.hpp"
#include "sim/resources.hpp"
#include "sim/simulate.hpp"
#include "sim/single_op.hpp"
#include "sim/stats.hpp"
#include "traces/chrome_trace.hpp"
#include "workloads/import/hlo_program.hpp"

namespace tpusim {

using ojson = nlohmann::ordered_json;

namespace {

constexpr std::uint64_t kMaxHloBytes = std::uint64_t{1} << 30;

HloModule read_hlo_file(const std::string& file) {
  check_input_file(file, kMaxHloBytes);
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw InputError(fmt::format("{}: cannot read the file", file));
  try {
    return parse_hlo_module(text.str(), file);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

// A megacore chip's two TensorCores run one device's program as one, each taking half of every
// op's rows (XLA splits the device's work across them); the collective's buffer stays the chip's.
void split_over_cores(Program& program, std::uint32_t cores) {
  for (Op& op : program.ops) {
    if (op.kind == OpKind::Matmul) {
      op.matmul.m = (op.matmul.m + cores - 1) / cores;
      op.model_flops /= cores;
    } else if (op.kind == OpKind::Vector) {
      op.vector.elements = std::max<std::uint64_t>(1, (op.vector.elements + cores - 1) / cores);
      op.vector.hbm_read_bytes /= cores;
      op.vector.hbm_write_bytes /= cores;
    }
  }
}

}  // namespace

ojson run_hlo(const HwConfig& hw, const HloRequest& request) {
  const HloModule module = read_hlo_file(request.file);
  if (hw.chip.cores > 1 && !hw.chip.megacore)
    throw InputError(fmt::format("{}: {}'s {} TensorCores per chip are {} devices to XLA; tpusim maps one HLO device to one chip "
                                 "(a megacore generation: v4, v5p, or a one-core chip: v5e, v6e)",
                                 request.file, hw.name, hw.chip.cores, hw.chip.cores));
  const Torus torus = Torus::of(hw);
  HloStep step;
  try {
    step = lower_hlo_module(module, request.file, torus.dims());
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
  const double flops_per_device = step.flops;
  if (hw.chip.cores > 1) split_over_cores(step.program, hw.chip.cores);

  const SimulatedSlice simulated = plan_simulated_slice(torus, hw, step.program, !request.all_chips);
  TraceFilter filter;
  filter.chips = default_traced_chips(simulated.chip_count());
  const bool tracing = !request.out_dir.empty() && request.trace;
  check_memory(estimate_memory(hw, step.program, tracing ? filter.chip_count(simulated.chip_count()) : 0, simulated),
               request.max_memory_bytes, "simulating " + request.file + " on " + torus.shape());
  std::optional<StagedOutput> out;
  if (!request.out_dir.empty())
    out.emplace(request.out_dir, request.force, std::vector<std::string>{request.file}, "hlo",
                std::vector<std::string>{"command.txt", "summary.json", "trace.json"});
  std::unique_ptr<ChromeTraceWriter> trace;
  if (tracing) trace = std::make_unique<ChromeTraceWriter>(out->file("trace.json"), filter);
  Recorder recorder(1, trace.get(), /*keep_spans=*/false);
  System& system = elaborate(hw, step.program, InfeedSpec{}, &recorder, simulated);
  simulate(system, "hlo");
  const Picos end = system.step_end_ps()[0];
  check_invariants({&system, &step.program, &hw, &recorder, end});
  const double time_s = ps_to_s(end);
  if (trace)
    trace->close({{"tpusim_version", kVersion}, {"hlo", request.file}, {"module", module.name}, {"hw", hw.name},
                  {"topology", torus.shape()}, {"steps", 1}, {"simulation", simulation_json(system.simulated())}});

  ojson result;
  result["file"] = request.file;
  result["module"] = module.name;
  result["hw"] = hw.name;
  result["topology"] = torus.shape();
  result["devices"] = step.devices;
  result["instructions_executed"] = step.instructions;
  std::uint64_t matmuls = 0, vectors = 0, collectives = 0;
  for (const Op& op : step.program.ops) {
    matmuls += op.kind == OpKind::Matmul;
    vectors += op.kind == OpKind::Vector;
    collectives += op.kind == OpKind::Collective;
  }
  result["ops"] = {{"matmul", matmuls}, {"vector", vectors}, {"collective", collectives}};
  result["flops_per_device"] = flops_per_device;
  result["parameter_bytes_per_device"] = step.parameter_bytes;
  ojson coll = ojson::object();
  for (const auto& [kind, totals] : step.collectives) coll[kind] = {{"count", totals.count}, {"bytes", totals.bytes}};
  result["collectives_per_device"] = coll;
  result["device_time_s"] = time_s;
  const double peak = hw.peak_bf16_flops_per_chip();
  result["mfu"] = time_s > 0 && peak > 0 ? ojson(flops_per_device / time_s / peak) : ojson(nullptr);
  result["simulation"] = simulation_json(system.simulated());
  result["notes"] = step.notes;
  if (out) {
    out->write("summary.json", result.dump(2) + "\n");
    if (!request.command_line.empty()) out->write("command.txt", request.command_line + "\n");
    out->commit();
  }
  return result;
}

std::string format_hlo(const ojson& r) {
  std::string t = fmt::format("{} ({}): {} devices on {} {}, {} instructions executed\n", r["module"].get<std::string>(),
                              r["file"].get<std::string>(), r["devices"].get<std::uint32_t>(), r["hw"].get<std::string>(),
                              r["topology"].get<std::string>(), r["instructions_executed"].get<std::uint64_t>());
  t += fmt::format("  ops            {} matmul, {} vector, {} collective per device\n", r["ops"]["matmul"].get<std::uint64_t>(),
                   r["ops"]["vector"].get<std::uint64_t>(), r["ops"]["collective"].get<std::uint64_t>());
  t += fmt::format("  flops          {:.4g} per device (dots and convolutions)\n", r["flops_per_device"].get<double>());
  for (const auto& [kind, c] : r["collectives_per_device"].items())
    t += fmt::format("  {:<14} {} x, {} bytes per device\n", kind, c["count"].get<std::uint64_t>(), c["bytes"].get<std::uint64_t>());
  t += fmt::format("  device time    {:.3f} us\n", r["device_time_s"].get<double>() * 1e6);
  if (!r["mfu"].is_null()) t += fmt::format("  MFU            {:.1f}%\n", 100 * r["mfu"].get<double>());
  for (const auto& note : r["notes"]) t += "  note: " + note.get<std::string>() + "\n";
  return t;
}

}  // namespace tpusim
