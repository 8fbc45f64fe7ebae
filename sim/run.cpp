#include "sim/run.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <functional>
#include <map>
#include <optional>
#include <fstream>
#include <memory>
#include <system_error>

#include <fmt/format.h>

#include "hw/system.hpp"
#include "sim/simulate.hpp"
#include "traces/report.hpp"
#include "sim/cost_energy.hpp"
#include "sim/csv.hpp"
#include "sim/digest.hpp"
#include "sim/validation_band.hpp"
#include "sim/errors.hpp"
#include "sim/interrupt.hpp"
#include "sim/invariants.hpp"
#include "sim/progress.hpp"
#include "sim/output_dir.hpp"
#include "sim/resources.hpp"
#include "sim/stats.hpp"
#include "workloads/lower.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;
namespace fs = std::filesystem;


double seconds(Picos ps) { return ps_to_s(ps); }



// Activations grow with the batch and nothing else does: the largest per-core batch whose
// footprint fits is (capacity - fixed) / (activations per sample); 0 when the state alone does not fit.
std::uint64_t largest_fitting_batch(const LoweredStep& step) {
  const MemoryFootprint& m = step.memory;
  const std::uint64_t fixed = m.parameters + m.gradients + m.optimizer_state;
  if (fixed >= step.hbm_capacity_per_core_bytes || step.per_core_batch == 0) return 0;
  const double per_sample = static_cast<double>(m.activations) / static_cast<double>(step.per_core_batch);
  return static_cast<std::uint64_t>(static_cast<double>(step.hbm_capacity_per_core_bytes - fixed) / per_sample);
}

// The least sharding under which the step would fit, for an out-of-memory report: FSDP first,
// then a model axis over ever more chips (each subset of the slice's axes, smallest first), each
// with the workload's FSDP setting and then with FSDP. Empty when none fits.
struct FittingLayout {
  bool fsdp = false;
  std::string model_axes;
  std::uint32_t model_shards = 1;
};
std::optional<FittingLayout> smallest_fitting_layout(const Workload& w, const HwConfig& hw) {
  std::vector<std::pair<std::uint64_t, std::string>> axes_sets;  // (model size, axes)
  const std::size_t rank = hw.slice_dims.size();
  for (std::uint32_t mask = 1; mask < (1u << rank); ++mask) {
    std::string axes;
    std::uint64_t size = 1;
    for (std::size_t a = 0; a < rank; ++a)
      if (mask >> a & 1u) {
        axes += "xyz"[a];
        size *= hw.slice_dims[a];
      }
    if (size > 1) axes_sets.push_back({size, axes});
  }
  std::stable_sort(axes_sets.begin(), axes_sets.end());
  std::vector<FittingLayout> candidates;
  if (!w.fsdp && !w.weight_update_sharding) candidates.push_back({true, w.mesh_model_axes, 1});
  for (const auto& [size, axes] : axes_sets) {
    if (axes == w.mesh_model_axes) continue;
    candidates.push_back({w.fsdp, axes, static_cast<std::uint32_t>(size)});
    if (!w.fsdp && !w.weight_update_sharding) candidates.push_back({true, axes, static_cast<std::uint32_t>(size)});
  }
  for (const FittingLayout& c : candidates) {
    Workload trial = w;
    trial.fsdp = c.fsdp;
    trial.mesh_model_axes = c.model_axes;
    try {
      const LoweredStep step = lower_training_step(trial, hw);
      if (step.memory.total() <= step.hbm_capacity_per_core_bytes) {
        FittingLayout fit = c;
        fit.model_shards = step.mesh.model_size;
        return fit;
      }
    } catch (const std::invalid_argument&) {  // a split the model cannot take
    }
  }
  return std::nullopt;
}

// What one core's collectives carry in a step, by the mesh axis they span: their count and the
// bytes of their buffers (an all-reduce's whole buffer, a gather's result); the bytes that cross
// links are traffic_per_step.ici_bytes.
// Over several slices, "dcn" counts the collectives that cross to the other slices and what each
// chip sends over the DCN for them (from their plans; chip 0's, every chip sends as much).
ojson collectives_by_mesh_axis(const Program& program, const Mesh& mesh, const Torus& torus) {
  ojson out = {{"data", {{"count", 0}, {"bytes", 0}}}};
  if (mesh.model_size > 1) out["model"] = {{"count", 0}, {"bytes", 0}};
  if (mesh.expert_size > 1) out["expert"] = {{"count", 0}, {"bytes", 0}};
  if (mesh.pipeline_size > 1) out["pipeline"] = {{"count", 0}, {"bytes", 0}};
  std::uint64_t over_dcn = 0, dcn_sent_bytes = 0;
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::Collective) continue;
    if (op.collective.dcn_slices > 1) {
      ++over_dcn;
      dcn_sent_bytes += schedule_dcn_sent_bytes(plan_collective(torus, 0, op.collective));
      if (op.collective.group_axes == 0) continue;  // over the DCN alone
    }
    const bool model = op.collective.group_axes == mesh.model_axes && mesh.model_size > 1;
    const bool stages = mesh.pipeline_size > 1 && op.collective.group_axes == mesh.pipeline_axes;
    ojson& axis = out[op.collective.kind == CollectiveKind::AllToAll ? "expert" : model ? "model" : stages ? "pipeline" : "data"];
    axis["count"] = axis["count"].get<std::uint64_t>() + 1;
    axis["bytes"] = axis["bytes"].get<std::uint64_t>() + op.collective.bytes;
  }
  if (over_dcn > 0) out["dcn"] = {{"count", over_dcn}, {"sent_bytes_per_chip", dcn_sent_bytes}};
  return out;
}

ojson memory_json(const LoweredStep& step) {
  const MemoryFootprint& m = step.memory;
  ojson per_core = {{"parameters_bytes", m.parameters},
                    {"gradients_bytes", m.gradients},
                    {"optimizer_state_bytes", m.optimizer_state},
                    {"activations_bytes", m.activations},
                    {"total_bytes", m.total()}};
  return {{"per_core", per_core},
          {"hbm_capacity_bytes", step.hbm_capacity_per_core_bytes},
          {"hbm_fraction", static_cast<double>(m.total()) / static_cast<double>(step.hbm_capacity_per_core_bytes)},
          {"oom", m.total() > step.hbm_capacity_per_core_bytes},
          {"largest_per_core_batch", largest_fitting_batch(step)}};
}

// Useful over executed MXU work, over the whole program: how much padding to the array costs.
double mxu_padding_efficiency(const Program& program, const HwConfig& hw) {
  double useful = 0, padded = 0;
  const SystolicArray array{hw.core.mxu.rows, hw.core.mxu.cols, true};
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::Matmul) continue;
    const auto plan = plan_matmul(array, op.matmul.m, op.matmul.k, op.matmul.n, 1, 1);
    useful += static_cast<double>(plan.useful_macs);
    padded += static_cast<double>(plan.padded_macs);
  }
  return padded > 0 ? useful / padded : 1.0;
}

std::string csv_of(const ojson& summary) {
  // One flat row: nested objects become dotted column names, in summary order.
  std::string header, row;
  for (const auto& [name, value] : flatten_json(summary, ".")) {
    if (!header.empty()) {
      header += ",";
      row += ",";
    }
    header += csv_field(name);
    row += csv_field(value.is_string() ? value.get<std::string>() : value.dump());
  }
  return header + "\n" + row + "\n";
}

}  // namespace

ojson effective_config(const Config& config) {
  ojson out;
  out["hw"] = ojson::parse(config.hw_doc.dump());
  if (!config.workload_doc.is_null()) out["workload"] = ojson::parse(config.workload_doc.dump());
  return out;
}

namespace {

std::string seconds_text(double sec);  // "1.5 min", "48.047 us"

// The chips whose tracks the trace holds: those asked for that are simulated (a representative's
// tracks are its own, not those of the chips it stands for), as "0-3,8", or "all".
std::string traced_chips_text(const Torus& torus, const SimulatedSlice& simulated, const TraceFilter& filter) {
  std::vector<std::pair<std::uint32_t, std::uint32_t>> ranges;
  bool every_chip = true;
  for (std::uint32_t c = 0; c < torus.chip_count(); ++c) {
    if (!filter.admits_any_chip(c, c) || !simulated.simulates(torus, c)) {
      every_chip = false;
      continue;
    }
    if (!ranges.empty() && ranges.back().second + 1 == c) ranges.back().second = c;
    else ranges.emplace_back(c, c);
  }
  return every_chip ? "all" : ranges.empty() ? "none" : chip_list_string(ranges);
}

// Each simulated chip's power over each step, as a counter of its process in the trace: the
// power model of the summary's energy figure (docs/cost_energy.md) applied to the chip's own
// MXU and HBM busy time in that step.
const std::string kChipPowerCounter = "chip power";

void trace_chip_power(ChromeTraceWriter& trace, const Recorder& recorder, const ChipPower& power, const std::vector<Picos>& ends) {
  struct ChipUnits {
    std::vector<std::uint32_t> mxu, hbm;
    std::optional<std::uint32_t> traced;  // a unit of the chip that the trace draws, to carry the counter
  };
  std::map<std::uint32_t, ChipUnits> chips;
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    const UnitInfo& info = recorder.units()[u];
    if (info.chip == kHostChip) continue;
    ChipUnits& c = chips[info.chip];
    if (info.kind == UnitKind::Mxu) c.mxu.push_back(u);
    if (info.kind == UnitKind::Hbm) c.hbm.push_back(u);
    if (!c.traced && trace.admitted(u)) c.traced = u;
  }
  for (const auto& [chip, c] : chips) {
    if (c.mxu.empty() || c.hbm.empty() || !c.traced) continue;
    auto busy = [&](const std::vector<std::uint32_t>& units, std::uint32_t step, Picos length) {
      Picos sum = 0;
      for (auto u : units) sum += recorder.totals(u, step).busy_ps;
      return std::min(1.0, static_cast<double>(sum) / (static_cast<double>(units.size()) * static_cast<double>(length)));
    };
    double watts = 0;
    for (std::uint32_t s = 0; s < ends.size(); ++s) {
      const Picos start = s == 0 ? 0 : ends[s - 1];
      if (ends[s] <= start) continue;
      watts = chip_power_w(power, busy(c.mxu, s, ends[s] - start), busy(c.hbm, s, ends[s] - start));
      trace.level(*c.traced, &kChipPowerCounter, "W", start, watts);
    }
    if (!ends.empty()) trace.level(*c.traced, &kChipPowerCounter, "W", ends.back(), watts);  // the last step's lasts to its end
  }
}

}  // namespace

namespace {

LoweredStep lowered(const Config& config) {
  try {
    return lower_training_step(config.workload, config.hw);
  } catch (const std::invalid_argument& e) {
    throw InputError(fmt::format("{}: {}", config.origin, e.what()));
  }
}

// Failures that would keep the job from ever finishing are refused before anything runs.
std::optional<Goodput> refuse_endless_job(const Config& config, const LoweredStep& step) {
  const HwConfig& hw = config.hw;
  const std::optional<Goodput> failures =
      goodput(hw, config.workload, hw.total_chip_count(),
              checkpoint_bytes(step.model.params(), step.model.trainable(), config.workload.optimizer));
  if (const auto& g = failures; g && !(g->fraction > 0 && std::isfinite(g->write_s)))
    throw InputError(fmt::format("{}: workload.training.goodput: the job would never finish: a failure every {:.3g} s on {} chips, "
                                 "a {:.3g}-byte checkpoint written in {:.3g} s every {:.3g} s, {:.3g} s to restart",
                                 config.origin, g->mtbf_s, hw.total_chip_count(), g->checkpoint_bytes, g->write_s, g->interval_s,
                                 g->restart_s));
  return failures;
}

// A run's output directory: every output but the trace is written last and moved into place
// together.
class RunOutputs {
 public:
  RunOutputs(const Config& config, const RunOptions& options)
      : config_(config),
        options_(options),
        out_(options.out_dir, options.force, config.input_files, "run",
             {"command.txt", "effective_config.json", "report.html", "summary.csv", "summary.json", "timeline.json", "trace.json",
              "trace.json.gz"}) {}

  std::string file(const std::string& name) { return out_.file(name); }

  void publish(const ojson& summary, const ojson& timeline = nullptr) {
    out_.write("summary.json", summary.dump(2) + "\n");
    out_.write("summary.csv", csv_of(summary));
    out_.write("effective_config.json", effective_config(config_).dump(2) + "\n");
    if (!options_.command_line.empty()) {
      std::error_code ec;
      const std::string cwd = fs::current_path(ec).string();
      out_.write("command.txt", (ec ? "" : "# run in " + cwd + "\n") + options_.command_line + "\n");
    }
    const ojson row = {{"point", config_.workload.name}, {"status", summary["status"]}, {"reason", ""},
                       {"varied", ojson::object()}, {"summary", summary}};
    if (!timeline.is_null()) out_.write("timeline.json", timeline.dump() + "\n");
    out_.write("report.html", render_sweep_report({{"workload", config_.origin}, {"points", 1}, {"rows", ojson::array({row})}},
                                                  timeline, config_.workload.name));
    out_.commit();
  }

  // A step that did not run (out of memory) or did not finish (interrupted) gets no step time:
  // reporting one would be a number that could not happen.
  void publish_without_step(ojson& summary, const ojson& memory, const ojson& warnings) {
    for (const char* key : {"step_time_s", "first_step_time_s", "samples_per_s", "samples_per_s_per_chip", "mfu", "cost", "energy"})
      summary[key] = nullptr;
    summary["memory"] = memory;
    summary["warnings"] = warnings;
    publish(summary);
  }

 private:
  const Config& config_;
  const RunOptions& options_;
  StagedOutput out_;
};

// What was simulated, on what, at which batch, and what made the result.
ojson run_identity(const Config& config, const LoweredStep& step) {
  const HwConfig& hw = config.hw;
  ojson summary;
  summary["tpusim_version"] = kVersion;
  summary["status"] = "ok";
  summary["workload"] = config.workload.name;
  summary["hw"] = hw.name;
  summary["topology"] = topology_string(hw.slice_dims);
  if (!config.accelerator.empty()) {
    // Several slices as Cloud TPU names them: "4x v5e-256".
    summary["accelerator_type"] = hw.slices > 1 ? fmt::format("{}x {}", hw.slices, config.accelerator) : config.accelerator;
    summary["accelerator_mapping"] = config.accelerator_note;
  }
  summary["slices"] = hw.slices;
  summary["chips"] = hw.total_chip_count();
  summary["cores"] = hw.core_count() * hw.slices;
  if (!hw.slow_chips.empty()) {  // named in hw.slow_chips, or drawn by hw.slow_chip_draw
    ojson slow = ojson::array();
    for (const SlowChip& s : hw.slow_chips)
      slow.push_back({{"chip", s.chip}, {"core_freq_scale", s.core_freq_scale}, {"hbm_bw_scale", s.hbm_bw_scale}});
    summary["slow_chips"] = slow;
  }
  summary["replicas"] = step.replicas;
  summary["global_batch"] = step.global_batch;
  summary["per_replica_batch"] = step.per_replica_batch;
  summary["per_core_batch"] = step.per_core_batch;
  summary["precision"] = config.workload.precision == Precision::MixedBfloat16 ? "mixed_bfloat16" : "float32";
  if (config.workload.quantized())
    summary["quantization"] = config.workload.quantized_type == DType::Fp8 ? "fp8"
                              : config.workload.quantized_weight_gradients ? "int8"
                                                                          : "int8_except_weight_gradients";
  summary["optimizer"] = config.workload.optimizer;
  summary["steps"] = config.workload.steps;
  summary["parameters"] = step.model.params();
  summary["trainable_parameters"] = step.model.trainable();
  summary["frozen_parameters"] = step.model.frozen();
  summary["notes"] = config.notes;
  // What made this result: a sweep's --resume keeps the point only when these still hold.
  summary["inputs_fnv1a64"] = digest_lines(input_digests(config.files_read));
  summary["tpusim_fnv1a64"] = tpusim_fnv1a64();
  return summary;
}

// Out of HBM: blames what does not fit (the state alone, or one sample's activations beside it)
// and names the smallest sharding that fits, in `memory` and `warnings`.
void explain_out_of_memory(const Config& config, const LoweredStep& step, ojson& memory, ojson& warnings) {
  const std::uint64_t fits = largest_fitting_batch(step);
  const std::uint64_t fixed = step.memory.parameters + step.memory.gradients + step.memory.optimizer_state;
  if (fixed >= step.hbm_capacity_per_core_bytes)
    warnings.push_back(fmt::format("out of HBM: a core needs {} bytes but has {}; the weights, gradients and optimizer "
                                   "state alone take {}", step.memory.total(), step.hbm_capacity_per_core_bytes, fixed));
  else if (fits == 0)
    warnings.push_back(fmt::format("out of HBM: a core needs {} bytes but has {}; beside the {} bytes of weights, "
                                   "gradients and optimizer state, not even one sample's activations ({} bytes) fit",
                                   step.memory.total(), step.hbm_capacity_per_core_bytes, fixed,
                                   step.memory.activations / std::max<std::uint64_t>(1, step.per_core_batch)));
  else
    warnings.push_back(fmt::format("out of HBM: a core needs {} bytes but has {}; the largest batch that fits is {} "
                                   "per core", step.memory.total(), step.hbm_capacity_per_core_bytes, fits));
  const auto layout = smallest_fitting_layout(config.workload, config.hw);
  memory["fits_with"] = nullptr;
  if (!layout) return;
  std::string sets;
  if (layout->fsdp != config.workload.fsdp) sets += " --set workload.training.fsdp=true";
  if (layout->model_axes != config.workload.mesh_model_axes) sets += " --set workload.training.mesh.model=" + layout->model_axes;
  memory["fits_with"] = {{"fsdp", layout->fsdp}, {"mesh_model", layout->model_axes}, {"model_shards", layout->model_shards}};
  warnings.push_back(fmt::format("the step fits when sharded:{}{}", sets,
                                 layout->model_shards > 1 ? fmt::format(" (a model axis of {} chips)", layout->model_shards) : ""));
}

// The chips to simulate: one per class of symmetric chips unless --all-chips, or unless the
// trace names a chip a representative would stand for (a trace of it needs it simulated).
SimulatedSlice plan_slice(const Torus& torus, const HwConfig& hw, const Program& program, const RunOptions& options) {
  SimulatedSlice simulated = plan_simulated_slice(torus, hw, program, !options.all_chips);
  if (simulated.folded() && options.trace_chips_given && options.trace.chips.empty()) {
    simulated = plan_simulated_slice(torus, hw, program, false);
    simulated.all_chips_because = "--trace-chips all names every chip";
  }
  if (simulated.folded() && options.trace_chips_given)
    for (const auto& [first, last] : options.trace.chips)
      for (std::uint32_t c = first; c <= last && simulated.folded(); ++c)
        if (!simulated.simulates(torus, c)) {
          const std::uint32_t representative = simulated.representative(torus, c);
          simulated = plan_simulated_slice(torus, hw, program, false);
          simulated.all_chips_because =
              fmt::format("--trace-chips names chip {}, for which chip {} would stand", c, representative);
        }
  return simulated;
}

// A finished simulation of the run's steps, and what its figures are read from.
struct SimulatedRun {
  const Config& config;
  const LoweredStep& step;
  const System& system;
  const Recorder& recorder;
  const SimulatedSlice& simulated;
  const std::vector<Picos>& ends;  // each simulated step's end
  Window window;                   // the steady-state step: the last
  double step_s = 0;
  double chips = 0;

  std::size_t steps() const { return ends.size(); }
};

// Throughput and MFU of the steady-state step, with the evaluation's share when there is one.
void add_rates(ojson& summary, const SimulatedRun& run) {
  const Config& config = run.config;
  const HwConfig& hw = config.hw;
  const LoweredStep& step = run.step;
  const double step_s = run.step_s, chips = run.chips;
  const double peak = hw.peak_bf16_flops_per_chip() * chips;
  summary["samples_per_s"] = static_cast<double>(step.global_batch) / step_s;
  summary["samples_per_s_per_chip"] = static_cast<double>(step.global_batch) / step_s / chips;
  // A language model's samples are sequences of token ids: its users count tokens (MLPerf's GPT-3
  // logs do).
  const Workload& w = config.workload;
  const double tokens_per_sample = w.input_dtype == "int32" && w.input_shape.size() == 1 ? static_cast<double>(w.input_shape[0]) : 0;
  if (tokens_per_sample > 0)
    summary["tokens_per_s_per_chip"] = tokens_per_sample * summary["samples_per_s_per_chip"].get<double>();
  summary["mfu"] = step.model_flops_per_step / (step_s * peak);
  // How far to trust the figures above: the public points of this kind of run.
  summary["validation"] = validation_band(
      training_run_kind(hw.name, step.model, step.mesh.model_size > 1, w.fsdp, hw.slices > 1, step.pipeline.stages > 1),
      public_validation_set_path());
  if (w.eval_examples > 0) {
    // The evaluation's device time: its examples' forward passes in batches of the training
    // step's, each as long as the steady step's forward pass took (from the step's start to its
    // last forward op on the slowest core: weight gathers, int8, flash kernels included).
    const double batches = std::ceil(static_cast<double>(w.eval_examples) / static_cast<double>(step.global_batch));
    const double device_s = batches * seconds(run.system.forward_span_ps(run.steps() - 1));
    const double eval_s = device_s + w.eval_host_overhead_s;
    const double block_s = w.eval_every_steps * step_s + eval_s;
    const double samples = w.eval_every_steps * static_cast<double>(step.global_batch);
    summary["eval"] = {{"examples", w.eval_examples},
                       {"every_steps", w.eval_every_steps},
                       {"device_time_s", device_s},
                       {"host_overhead_s", w.eval_host_overhead_s},
                       {"time_per_eval_s", eval_s}};
    summary["samples_per_s_with_eval"] = samples / block_s;
    summary["samples_per_s_per_chip_with_eval"] = samples / block_s / chips;
    if (tokens_per_sample > 0) summary["tokens_per_s_per_chip_with_eval"] = tokens_per_sample * samples / block_s / chips;
  }
  summary["model_flops_per_step"] = step.model_flops_per_step;
  summary["peak_flops_per_s"] = peak;
  summary["documented_peak_flops_per_s"] = hw.chip.documented_peak_bf16_tflops * 1e12 * chips;
}

// What the breakdown leaves for the rest of the summary: per simulated core, the time it waited
// (for others at a collective, for input, idle), since the core that waits least holds the
// others back; and the cores' summed input wait.
struct CoreWaits {
  std::vector<std::pair<Picos, std::size_t>> by_core;
  double input_s = 0;
};

// Time breakdown averaged over every core of the slice in the steady-state step. Sums are of
// integer picoseconds, exact whatever the order, so that a representative counted `stands_for`
// times gives the same figures as every chip it stands for.
CoreWaits add_breakdown(ojson& summary, const SimulatedRun& run) {
  const HwConfig& hw = run.config.hw;
  const std::uint64_t stands_for = run.simulated.multiplicity;
  Picos compute_ps = 0, memory_ps = 0, comm_ps = 0, input_ps = 0, idle_ps = 0;  // summed over cores
  std::vector<std::pair<Picos, std::size_t>> waits;
  const auto groups = units_by_core(run.recorder, static_cast<std::uint32_t>(hw.chip_count()), hw.chip.cores);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& core_units = groups[g];
    if (core_units.empty()) continue;  // a chip a representative stands for
    const Breakdown b = core_breakdown(run.recorder, core_units, run.window);
    waits.emplace_back(b.exposed_communication + b.input_wait + b.idle, g);
    compute_ps += b.compute * stands_for;
    memory_ps += b.memory_bound * stands_for;
    comm_ps += b.exposed_communication * stands_for;
    input_ps += b.input_wait * stands_for;
    idle_ps += b.idle * stands_for;
  }
  const double cores = static_cast<double>(hw.core_count());
  const double input_s = seconds(input_ps);
  summary["breakdown"] = {{"compute_s", seconds(compute_ps) / cores},
                          {"memory_bound_s", seconds(memory_ps) / cores},
                          {"exposed_communication_s", seconds(comm_ps) / cores},
                          {"input_wait_s", input_s / cores},
                          {"idle_s", seconds(idle_ps) / cores}};
  return {std::move(waits), input_s};
}

// Busy time and bytes of the last step's work per kind of unit, over the steady-state step time.
class UnitUse {
 public:
  explicit UnitUse(const SimulatedRun& run) : window_ps_(run.window.length()) {
    const std::uint64_t stands_for = run.simulated.multiplicity;
    const auto last = static_cast<std::uint32_t>(run.steps() - 1);
    for (std::uint32_t u = 0; u < run.recorder.units().size(); ++u) {
      KindUse& k = use_[run.recorder.units()[u].kind];
      k.busy += run.recorder.totals(u, last).busy_ps * stands_for;
      k.units += stands_for;
      k.bytes += run.recorder.totals(u, last).bytes * stands_for;
    }
  }
  double fraction(UnitKind kind) const {
    const auto k = use_.find(kind);
    return k == use_.end() || k->second.units == 0
               ? 0.0
               : static_cast<double>(k->second.busy) / (static_cast<double>(k->second.units) * static_cast<double>(window_ps_));
  }
  std::uint64_t bytes(UnitKind kind) const {
    const auto k = use_.find(kind);
    return k == use_.end() ? 0 : k->second.bytes;
  }

 private:
  struct KindUse {
    Picos busy = 0;
    std::uint64_t units = 0;
    std::uint64_t bytes = 0;
  };
  std::map<UnitKind, KindUse> use_;
  Picos window_ps_;
};

// The steady-state step's time in pipeline iterations on its busiest core, and in the
// iterations that are a bubble on it.
ojson pipeline_json(const SimulatedRun& run) {
  const auto [pipeline_ps, bubble_ps] = run.system.pipeline_and_bubble_ps(run.steps() - 1);
  const PipelineSchedule& p = run.step.pipeline;
  return {{"stages", p.stages},
          {"microbatches", p.microbatches},
          {"repeats", p.repeats},
          {"iterations", p.iterations},
          {"layers_per_chunk", p.layers_per_chunk},
          {"ideal_bubble_fraction", p.ideal_bubble_fraction()},
          {"time_s", seconds(pipeline_ps)},
          {"bubble_s", seconds(bubble_ps)},
          {"bubble_fraction", pipeline_ps > 0 ? static_cast<double>(bubble_ps) / static_cast<double>(pipeline_ps) : 0.0}};
}

// Which core ends the steady-state step last and which first: in a synchronous step everyone
// waits for the slowest at the all-reduce, so the spread shows what holds the slice back.
ojson step_end_spread_json(const SimulatedRun& run) {
  std::string last_core, first_core;
  Picos last_end = 0, first_end = ~Picos{0};
  for (const Chip& chip : run.system.chips())
    for (std::size_t k = 0; k < chip.cores.size(); ++k) {
      const Picos end = chip.cores[k].step_end_ps()[run.steps() - 1];
      if (end > last_end) std::tie(last_end, last_core) = std::make_pair(end, fmt::format("chip{}.core{}", chip.id(), k));
      if (end < first_end) std::tie(first_end, first_core) = std::make_pair(end, fmt::format("chip{}.core{}", chip.id(), k));
    }
  return {{"last_core", last_core}, {"first_core", first_core}, {"spread_s", seconds(last_end - first_end)}};
}

ojson straggler_json(std::vector<std::pair<Picos, std::size_t>> waits, std::uint32_t cores_per_chip) {
  std::sort(waits.begin(), waits.end());
  const auto [least_wait, straggler] = waits.front();
  return {{"core", fmt::format("chip{}.core{}", straggler / cores_per_chip, straggler % cores_per_chip)},
          {"waits_s", seconds(least_wait)},
          {"time_lost_s", seconds(waits[waits.size() / 2].first - least_wait)}};
}

// The figures of the steady-state step: rates, where the time went, how busy each kind of unit
// was, cost, energy and goodput, and the warnings they call for.
void summarize_steps(ojson& summary, ojson& warnings, const SimulatedRun& run, const ojson& memory, const ojson& checks,
                     const std::optional<Goodput>& failures) {
  const Config& config = run.config;
  const HwConfig& hw = config.hw;
  const LoweredStep& step = run.step;
  const std::size_t n = run.steps();
  const double step_s = run.step_s;
  summary["step_time_s"] = step_s;
  // With one step there is no steady state: the one step pays the first input transfer and the
  // program's launch, which later steps overlap.
  // With three steps or more, the last two must also agree: an input pipeline can take several
  // steps to drain what it prefetched during the first.
  const double previous_step_s = n >= 3 ? seconds(run.ends[n - 2] - run.ends[n - 3]) : step_s;
  const bool settled = std::abs(step_s - previous_step_s) <= 0.01 * step_s;
  summary["steady_state"] = n >= 2 && settled;
  summary["first_step_time_s"] = seconds(run.ends[0]);
  add_rates(summary, run);
  const CoreWaits waits = add_breakdown(summary, run);
  const UnitUse use(run);
  // The kinds of unit the table gives a utilization or traffic key (traces/event_sink.hpp).
  // Every slice moves what the simulated one does.
  summary["utilization"] = ojson::object();
  summary["traffic_per_step"] = ojson::object();
  for (const UnitKindTraits& kind : kUnitKinds) {
    if (kind.utilization) summary["utilization"][kind.utilization] = use.fraction(kind.kind);
    if (kind.traffic) summary["traffic_per_step"][kind.traffic] = use.bytes(kind.kind) * hw.slices;
  }
  summary["collectives_per_step"] = collectives_by_mesh_axis(step.program, step.mesh, run.system.torus());
  if (step.pipeline.stages > 1) summary["pipeline"] = pipeline_json(run);
  const StepFigures figures{step_s, seconds(run.ends[0]), hw.total_chip_count(), step.global_batch, use.fraction(UnitKind::Mxu),
                            use.fraction(UnitKind::Hbm)};
  summary["cost"] = cost_json(hw, config.workload, figures);
  summary["energy"] = energy_json(hw, config.workload, figures);
  summary["goodput"] = goodput_json(hw, config.workload, figures, failures);
  summary["memory"] = memory;
  const double padding = mxu_padding_efficiency(step.program, hw);
  summary["mxu_padding_efficiency"] = padding;
  summary["checks"] = checks;
  summary["simulation"] = simulation_json(run.simulated);
  summary["step_end_spread"] = step_end_spread_json(run);
  summary["straggler"] = straggler_json(waits.by_core, hw.chip.cores);

  if (padding < 0.5)
    warnings.push_back(fmt::format("MXU padding: only {:.0f}% of the MXU work is useful (matmul dimensions are not "
                                   "multiples of the {}x{} array)", 100 * padding, hw.core.mxu.rows, hw.core.mxu.cols));
  if (n < 2)
    warnings.push_back("one step simulated: its figures are of the first step, which pays the first input transfer and "
                       "launch, not of the steady state (set workload.training.steps to 2 or more)");
  if (!settled)  // the figures are of a transient: the summary's step is the last one
    warnings.push_back(fmt::format("not yet steady: the last two steps took {} and {}; the figures are the last step's "
                                   "(simulate more steps: workload.training.steps)",
                                   seconds_text(previous_step_s), seconds_text(step_s)));
  const double cores = static_cast<double>(hw.core_count());
  if (waits.input_s / cores > 0.1 * step_s)
    warnings.push_back(fmt::format("input-bound: cores wait {:.0f}% of the step for their batch", 100 * waits.input_s / cores / step_s));
  summary["warnings"] = warnings;
}

}  // namespace

ojson run_simulation(const Config& config, const RunOptions& options) {
  const HwConfig& hw = config.hw;
  const LoweredStep step = lowered(config);
  const std::optional<Goodput> failures = refuse_endless_job(config, step);
  RunOutputs out(config, options);
  ojson summary = run_identity(config, step);
  const ojson memory = memory_json(step);
  ojson warnings = ojson::array();
  if (memory["oom"].get<bool>()) {
    summary["status"] = "oom";
    ojson with_memory = memory;
    explain_out_of_memory(config, step, with_memory, warnings);
    out.publish_without_step(summary, with_memory, warnings);
    return summary;
  }

  const Torus torus = Torus::of(hw);
  const SimulatedSlice simulated = plan_slice(torus, hw, step.program, options);
  const std::uint32_t traced_chips =
      options.trace.level >= TraceLevel::Ops ? options.trace.chip_count(simulated.chip_count()) : 0;
  check_memory(estimate_memory(hw, step.program, traced_chips, simulated), options.max_memory_bytes,
               "simulating " + config.workload.name + " on " + topology_string(hw.slice_dims));
  std::unique_ptr<ChromeTraceWriter> trace;
  if (options.trace.level != TraceLevel::None)
    trace = std::make_unique<ChromeTraceWriter>(out.file(options.trace_gzip ? "trace.json.gz" : "trace.json"), options.trace,
                                                options.trace_gzip);
  Recorder recorder(config.workload.steps, trace.get());

  System& system = elaborate(hw, step.program, step.infeed, &recorder, simulated);
  ProgressLine progress("tpusim: simulating " + config.workload.name);
  const std::uint64_t steps = config.workload.steps;
  system.chips()[0].cores[0].on_step_end([&](std::uint32_t s) { progress.set(s + 1, steps, " steps"); });
  progress.set(0, steps, " steps");
  const bool completed = simulate(system, "simulation", [&] { progress.tick(); });
  progress.finish();
  auto close_trace = [&] {
    if (trace)
      trace->close({{"tpusim_version", kVersion},
                    {"workload", config.workload.name},
                    {"hw", hw.name},
                    {"topology", topology_string(hw.slice_dims)},
                    {"steps", config.workload.steps},
                    {"chips", traced_chips_text(torus, simulated, options.trace)},
                    {"simulation", simulation_json(simulated)},
                    {"partial", !completed}});
  };
  std::vector<Picos> ends = system.step_end_ps();
  nlohmann::ordered_json checks;  // a run cut short has nothing complete to check
  if (completed) {
    checks = check_invariants({&system, &step.program, &hw, &recorder, ends.back(), step.textbook_flops_per_core});
  } else {
    // Interrupted: what the finished steps say, marked partial, every output still valid.
    ends.resize(system.steps_completed());
    summary["status"] = "interrupted";
    summary["partial"] = true;
    summary["steps_simulated"] = ends.size();
    warnings.push_back(fmt::format("interrupted by signal {} after {} of {} steps: partial results", interrupt_signal(),
                                   ends.size(), config.workload.steps));
  }
  if (ends.empty()) {
    close_trace();
    out.publish_without_step(summary, memory, warnings);
    return summary;
  }
  const std::size_t n = ends.size();
  const Window window{n >= 2 ? ends[n - 2] : 0, ends[n - 1]};
  const SimulatedRun run{config, step, system, recorder, simulated, ends, window, seconds(window.length()),
                         static_cast<double>(hw.total_chip_count())};
  summarize_steps(summary, warnings, run, memory, checks, failures);
  if (trace && hw.chip.power) trace_chip_power(*trace, recorder, *hw.chip.power, ends);
  close_trace();
  out.publish(summary, chip0_timeline(recorder, window));
  return summary;
}

namespace {

// Money from a ten-millionth of a cent to a pod's training run: cents where they mean something,
// three significant digits below.
std::string usd(double v) {
  if (v >= 1000) return fmt::format("${:.0f}", v);
  if (v >= 0.01) return fmt::format("${:.2f}", v);
  return fmt::format("${:.3g}", v);
}

// "21.48 mJ": the value with an SI prefix that keeps it between 1 and 1000.
std::string si(double v, const char* unit) {
  static const std::pair<double, const char*> kPrefixes[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""},
                                                             {1e-3, "m"}, {1e-6, "u"}, {1e-9, "n"}};
  for (const auto& [scale, prefix] : kPrefixes)
    if (v >= scale) return fmt::format("{:.2f} {}{}", v / scale, prefix, unit);
  return fmt::format("{:.3g} {}", v, unit);
}

std::string seconds_text(double sec) {
  if (sec >= 86400) return fmt::format("{:.1f} days", sec / 86400);
  if (sec >= 3600) return fmt::format("{:.1f} h", sec / 3600);
  if (sec >= 60) return fmt::format("{:.1f} min", sec / 60);
  if (sec >= 1) return fmt::format("{:.3f} s", sec);
  if (sec >= 1e-3) return fmt::format("{:.3f} ms", sec * 1e3);
  return fmt::format("{:.3f} us", sec * 1e6);
}

// The cost, to-train and energy lines of a summary that has a step time.
std::string format_cost_and_energy(const ojson& s) {
  std::string t;
  if (!s.contains("cost") || !s["cost"].is_object() || !s.contains("energy") || !s["energy"].is_object()) return t;
  const ojson& c = s["cost"];
  if (c["price_usd_per_chip_hour"].is_number())
    t += fmt::format("  cost           {} per step, {} per million samples (${} per chip-hour x {} chips)\n",
                     usd(c["usd_per_step"].get<double>()), usd(c["usd_per_million_samples"].get<double>()),
                     c["price_usd_per_chip_hour"].get<double>(), s["chips"].get<std::uint64_t>());
  else
    t += "  cost           no price for this hardware: set hw.chip.price_usd_per_chip_hour (USD per chip-hour)\n";
  const ojson& e = s["energy"];
  if (e["chip_power_w"].is_number())
    t += fmt::format("  energy         {} per step, {} per sample; {:.1f} W per chip (activity {:.1f}%; idle {:.0f} W, max {:.0f} W)\n",
                     si(e["joules_per_step"].get<double>(), "J"), si(e["joules_per_sample"].get<double>(), "J"),
                     e["chip_power_w"].get<double>(), 100 * e["activity"].get<double>(), e["idle_w"].get<double>(),
                     e["max_w"].get<double>());
  else
    t += "  energy         no power figures for this hardware: set hw.chip.power.idle_w and hw.chip.power.max_w\n";
  // A whole run's time, and its USD and energy where the hardware has a price and a power model.
  auto run_text = [](const ojson& time_s, const ojson& usd_total, const ojson& kwh) {
    std::string text = seconds_text(time_s.get<double>());
    if (usd_total.is_number()) text += ", " + usd(usd_total.get<double>());
    if (kwh.is_number()) text += ", " + si(kwh.get<double>() * 1e3, "Wh");
    return text;
  };
  if (c["training_steps"].is_number())
    t += fmt::format("  to train       {} steps: {}\n", c["training_steps"].get<std::uint64_t>(),
                     run_text(c["time_to_train_s"], c["usd_to_train"], e["kwh_to_train"]));
  const ojson& g = s["goodput"];
  if (g.is_object()) {
    t += fmt::format("  goodput        {:.1f}% at {:.3g} failures per chip-hour (one every {} on this slice): a {} checkpoint written "
                     "in {} every {} ({}), {} to restart\n",
                     100 * g["goodput"].get<double>(), g["failures_per_chip_hour"].get<double>(), seconds_text(g["mtbf_s"].get<double>()),
                     si(g["checkpoint_bytes"].get<double>(), "B"), seconds_text(g["checkpoint_write_s"].get<double>()),
                     seconds_text(g["checkpoint_interval_s"].get<double>()),
                     g["checkpoint_interval"] == "optimal" ? "the optimum, Young and Daly's" : "as stated",
                     seconds_text(g["restart_and_read_s"].get<double>()));
    if (g["time_to_train_s"].is_number())
      t += "  with failures  " + run_text(g["time_to_train_s"], g["usd_to_train"], g["kwh_to_train"]) + " to train\n";
  }
  return t;
}

}  // namespace

std::string format_summary(const ojson& s) {
  auto time = [](double sec) {
    if (sec >= 1) return fmt::format("{:.3f} s", sec);
    if (sec >= 1e-3) return fmt::format("{:.3f} ms", sec * 1e3);
    return fmt::format("{:.3f} us", sec * 1e6);
  };
  auto bytes = [](double b) {
    if (b >= 1ull << 30) return fmt::format("{:.2f} GiB", b / (1ull << 30));
    if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
    return fmt::format("{:.1f} KiB", b / 1024);
  };
  auto pct = [](double f) { return f > 0 && f < 0.001 ? fmt::format("{:.3f}%", 100 * f) : fmt::format("{:.1f}%", 100 * f); };
  auto rate = [](double v) {
    if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.2f} k", v / 1e3);
    if (v >= 100) return fmt::format("{:.1f}", v);
    return fmt::format("{:.3g}", v);  // a large model's few samples per second per chip keep three figures
  };
  std::string t;
  const std::uint64_t slices = s.value("slices", std::uint64_t{1});
  const std::string slice = slices > 1 ? fmt::format("{} slices of {}", slices, s["topology"].get<std::string>())
                                       : s["topology"].get<std::string>();
  t += fmt::format("{} on {} {} ({} chips, {} cores, {} replicas{})\n", s["workload"].get<std::string>(),
                   s["hw"].get<std::string>(), slice, s["chips"].get<std::uint64_t>(), s["cores"].get<std::uint64_t>(),
                   s["replicas"].get<std::uint64_t>(), slices > 1 ? " in each" : "");
  if (s.contains("accelerator_mapping")) t += fmt::format("  accelerator    {}\n", s["accelerator_mapping"].get<std::string>());
  const std::uint32_t steps = s["steps"].get<std::uint32_t>();
  t += fmt::format("  batch          {} global, {} per replica, {} per core; {}, {}, {} step{}\n",
                   s["global_batch"].get<std::uint64_t>(), s["per_replica_batch"].get<std::uint64_t>(),
                   s["per_core_batch"].get<std::uint64_t>(), s["precision"].get<std::string>(),
                   s["optimizer"].get<std::string>(), steps, steps == 1 ? "" : "s");
  if (s.contains("slow_chips")) {
    std::string listed;
    const ojson& slow = s["slow_chips"];
    for (std::size_t i = 0; i < std::min<std::size_t>(slow.size(), 4); ++i)
      listed += fmt::format("{}chip {} at {:.1f}% clock", i ? ", " : "", slow[i]["chip"].get<std::uint32_t>(),
                            100 * slow[i]["core_freq_scale"].get<double>());
    t += fmt::format("  slow chips     {} of {}: {}{}\n", slow.size(), s["chips"].get<std::uint64_t>(), listed, slow.size() > 4 ? ", ..." : "");
  }
  if (s.value("frozen_parameters", std::uint64_t{0}) > 0)
    t += fmt::format("  parameters     {}: {} trained, {} frozen (no gradient, all-reduce or optimizer state)\n",
                     s["parameters"].get<std::uint64_t>(), s["trainable_parameters"].get<std::uint64_t>(),
                     s["frozen_parameters"].get<std::uint64_t>());
  if (s.contains("notes"))
    for (const auto& note : s["notes"]) t += "  note: " + note.get<std::string>() + "\n";
  const ojson& m = s["memory"];
  const ojson& pc = m["per_core"];
  t += fmt::format("  memory/core    {} of {} HBM ({}): params {}, grads {}, optimizer {}, activations {}\n",
                   bytes(pc["total_bytes"].get<double>()), bytes(m["hbm_capacity_bytes"].get<double>()),
                   pct(m["hbm_fraction"].get<double>()), bytes(pc["parameters_bytes"].get<double>()),
                   bytes(pc["gradients_bytes"].get<double>()), bytes(pc["optimizer_state_bytes"].get<double>()),
                   bytes(pc["activations_bytes"].get<double>()));
  if (s["step_time_s"].is_number()) {  // ok, or interrupted after a step
    const double step = s["step_time_s"].get<double>();
    if (s.value("steady_state", true))
      t += fmt::format("  step time      {} (steady state; first step {})\n", time(step),
                       time(s["first_step_time_s"].get<double>()));
    else if (s.value("steps", 1) >= 2)
      t += fmt::format("  step time      {} (the last step, not yet steady; first step {})\n", time(step),
                       time(s["first_step_time_s"].get<double>()));
    else
      t += fmt::format("  step time      {} (the first step: one step was simulated, no steady state)\n", time(step));
    t += fmt::format("  throughput     {} samples/s, {} samples/s per chip{}\n", rate(s["samples_per_s"].get<double>()),
                     rate(s["samples_per_s_per_chip"].get<double>()),
                     s.contains("tokens_per_s_per_chip") ? fmt::format(" ({} tokens/s per chip)", rate(s["tokens_per_s_per_chip"].get<double>())) : "");
    if (s.contains("samples_per_s_with_eval")) {
      const ojson& e = s["eval"];
      t += fmt::format("  with eval      {} samples/s, {} samples/s per chip{} (evaluating {} examples every {} steps: {} each)\n",
                       rate(s["samples_per_s_with_eval"].get<double>()), rate(s["samples_per_s_per_chip_with_eval"].get<double>()),
                       s.contains("tokens_per_s_per_chip_with_eval")
                           ? fmt::format(", {} tokens/s per chip", rate(s["tokens_per_s_per_chip_with_eval"].get<double>()))
                           : "",
                       e["examples"].get<std::uint64_t>(), e["every_steps"].get<double>(), time(e["time_per_eval_s"].get<double>()));
    }
    // MFU is against the bfloat16 peak, as MaxText counts it; int8 matmuls run at up to twice
    // that rate (fp8 at the MXU's fp8 rate, twice it on TPU7x), so such a step can pass 100%
    // without anything being wrong.
    const std::string quantized = s.contains("quantization") ? s["quantization"].get<std::string>().substr(0, 4) : "";
    t += fmt::format("  MFU            {}{}\n", pct(s["mfu"].get<double>()),
                     quantized == "int8"  ? " of the bfloat16 peak (int8 matmuls run at up to twice it)"
                     : quantized == "fp8" ? " of the bfloat16 peak (fp8 matmuls run at the MXU's fp8 rate, up to twice it)"
                                          : "");
    if (s.contains("validation")) t += fmt::format("  validation     {}\n", s["validation"]["text"].get<std::string>());
    const ojson& b = s["breakdown"];
    t += fmt::format("  breakdown      compute {} ({}), memory-bound {} ({}), exposed comm {} ({}), input wait {} ({}), idle {} ({})\n",
                     time(b["compute_s"]), pct(b["compute_s"].get<double>() / step), time(b["memory_bound_s"]),
                     pct(b["memory_bound_s"].get<double>() / step), time(b["exposed_communication_s"]),
                     pct(b["exposed_communication_s"].get<double>() / step), time(b["input_wait_s"]),
                     pct(b["input_wait_s"].get<double>() / step), time(b["idle_s"]), pct(b["idle_s"].get<double>() / step));
    // Only when the slice loses at least 1% of the step waiting for one core (a slow chip or link).
    const ojson& straggler = s["straggler"];
    if (straggler.is_object() && straggler["time_lost_s"].get<double>() >= 0.01 * step)
      t += fmt::format("  straggler      {}: the median core waits {} ({}) longer for it\n",
                       straggler["core"].get<std::string>(), time(straggler["time_lost_s"].get<double>()),
                       pct(straggler["time_lost_s"].get<double>() / step));
    const ojson& u = s["utilization"];
    t += fmt::format("  utilization    MXU {}, VPU {}, HBM {}, ICI {}{}\n", pct(u["mxu"]), pct(u["vpu"]), pct(u["hbm"]),
                     pct(u["ici"]), slices > 1 ? ", DCN " + pct(u["dcn"]) : "");
    const auto has_axis = [&](const char* name) { return s.contains("collectives_per_step") && s["collectives_per_step"].contains(name); };
    if (has_axis("model") || has_axis("expert") || has_axis("pipeline")) {
      const ojson& c = s["collectives_per_step"];
      std::string axes;
      for (const char* name : {"data", "model", "expert", "pipeline"})
        if (c.contains(name))
          axes += fmt::format("{}{} {} ({})", axes.empty() ? "" : ", ", name, c[name]["count"].get<std::uint64_t>(),
                              bytes(c[name]["bytes"].get<double>()));
      t += fmt::format("  collectives    per core and step, by mesh axis: {}\n", axes);
    }
    if (s.contains("pipeline")) {
      const ojson& p = s["pipeline"];
      t += fmt::format("  pipeline       {} stages of {} layers, {} microbatches{}, {} iterations: bubble {} of their {} (ideal {})\n",
                       p["stages"].get<std::uint32_t>(), p["layers_per_chunk"].get<std::uint32_t>() * p["repeats"].get<std::uint32_t>(),
                       p["microbatches"].get<std::uint32_t>(),
                       p["repeats"].get<std::uint32_t>() > 1 ? fmt::format(" x {} repeats", p["repeats"].get<std::uint32_t>()) : "",
                       p["iterations"].get<std::uint32_t>(), pct(p["bubble_fraction"]), time(p["time_s"]), pct(p["ideal_bubble_fraction"]));
    }
    t += format_cost_and_energy(s);
  } else if (s["status"] == "oom") {
    t += "  step time      none: the step does not fit in HBM (out of memory)\n";
  } else {
    t += "  step time      none: interrupted before the first step finished\n";
  }
  for (const auto& w : s["warnings"]) t += "  warning: " + w.get<std::string>() + "\n";
  return t;
}

}  // namespace tpusim
