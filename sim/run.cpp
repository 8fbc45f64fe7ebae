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
CollectivesSummary collectives_by_mesh_axis(const Program& program, const Mesh& mesh, const Torus& torus) {
  CollectivesSummary out;
  if (mesh.model_size > 1) out.model.emplace();
  if (mesh.expert_size > 1) out.expert.emplace();
  if (mesh.pipeline_size > 1) out.pipeline.emplace();
  std::uint64_t over_dcn = 0, dcn_sent_bytes = 0;
  std::optional<AxisCollectives> data_axis = AxisCollectives{};
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::Collective) continue;
    if (op.collective.dcn_slices > 1) {
      ++over_dcn;
      dcn_sent_bytes += schedule_dcn_sent_bytes(plan_collective(torus, 0, op.collective));
      if (op.collective.group_axes == 0) continue;  // over the DCN alone
    }
    const bool model = op.collective.group_axes == mesh.model_axes && mesh.model_size > 1;
    const bool stages = mesh.pipeline_size > 1 && op.collective.group_axes == mesh.pipeline_axes;
    // All-to-alls exchange experts' tokens: they count on the expert axis however their group is laid out.
    std::optional<AxisCollectives>& axis = op.collective.kind == CollectiveKind::AllToAll ? out.expert
                                           : model                                       ? out.model
                                           : stages                                      ? out.pipeline
                                                                                         : data_axis;
    if (!axis) axis.emplace();
    ++axis->count;
    axis->bytes += op.collective.bytes;
  }
  out.data = *data_axis;
  if (over_dcn > 0) out.dcn = DcnCollectives{over_dcn, dcn_sent_bytes};
  return out;
}

MemorySummary memory_summary(const LoweredStep& step) {
  const MemoryFootprint& m = step.memory;
  MemorySummary out;
  out.per_core = {m.parameters, m.gradients, m.optimizer_state, m.activations, m.total()};
  out.hbm_capacity_bytes = step.hbm_capacity_per_core_bytes;
  out.hbm_fraction = static_cast<double>(m.total()) / static_cast<double>(step.hbm_capacity_per_core_bytes);
  out.oom = m.total() > step.hbm_capacity_per_core_bytes;
  out.largest_per_core_batch = largest_fitting_batch(step);
  return out;
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

std::string csv_of(const RunSummary& summary) {
  // One flat row: nested objects become dotted column names, in summary order.
  std::string header, row;
  for (const auto& [name, value] : flatten_json(to_json(summary), ".")) {
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

  void publish(const RunSummary& summary, const ojson& timeline = nullptr) {
    out_.write("summary.json", to_json(summary).dump(2) + "\n");
    out_.write("summary.csv", csv_of(summary));
    out_.write("effective_config.json", effective_config(config_).dump(2) + "\n");
    if (!options_.command_line.empty()) {
      std::error_code ec;
      const std::string cwd = fs::current_path(ec).string();
      out_.write("command.txt", (ec ? "" : "# run in " + cwd + "\n") + options_.command_line + "\n");
    }
    SweepRow row;  // the run as a sweep of one point, for the report
    row.point = config_.workload.name;
    row.status = summary.status;
    row.summary = to_json(summary);
    if (!timeline.is_null()) out_.write("timeline.json", timeline.dump() + "\n");
    SweepDocument one_point;
    one_point.workload = config_.origin;
    one_point.points = 1;
    one_point.rows = {row};
    out_.write("report.html", render_sweep_report(one_point,
                                                  timeline, config_.workload.name));
    out_.commit();
  }

  // A step that did not run (out of memory) or did not finish (interrupted) gets no step time:
  // reporting one would be a number that could not happen.
  void publish_without_step(RunSummary& summary, const MemorySummary& memory, const std::vector<std::string>& warnings) {
    summary.memory = memory;
    summary.warnings = warnings;
    publish(summary);
  }

 private:
  const Config& config_;
  const RunOptions& options_;
  StagedOutput out_;
};

// What was simulated, on what, at which batch, and what made the result.
RunSummary run_identity(const Config& config, const LoweredStep& step) {
  const HwConfig& hw = config.hw;
  RunSummary summary;
  summary.tpusim_version = kVersion;
  summary.workload = config.workload.name;
  summary.hw = hw.name;
  summary.topology = topology_string(hw.slice_dims);
  if (!config.accelerator.empty()) {
    // Several slices as Cloud TPU names them: "4x v5e-256".
    summary.accelerator_type = hw.slices > 1 ? fmt::format("{}x {}", hw.slices, config.accelerator) : config.accelerator;
    summary.accelerator_mapping = config.accelerator_note;
  }
  summary.slices = hw.slices;
  summary.chips = hw.total_chip_count();
  summary.cores = hw.core_count() * hw.slices;
  // Named in hw.slow_chips, or drawn by hw.slow_chip_draw.
  for (const SlowChip& s : hw.slow_chips) summary.slow_chips.push_back({s.chip, s.core_freq_scale, s.hbm_bw_scale});
  summary.replicas = step.replicas;
  summary.global_batch = step.global_batch;
  summary.per_replica_batch = step.per_replica_batch;
  summary.per_core_batch = step.per_core_batch;
  summary.precision = config.workload.precision == Precision::MixedBfloat16 ? "mixed_bfloat16" : "float32";
  if (config.workload.quantized())
    summary.quantization = config.workload.quantized_type == DType::Fp8 ? "fp8"
                           : config.workload.quantized_weight_gradients ? "int8"
                                                                       : "int8_except_weight_gradients";
  summary.optimizer = config.workload.optimizer;
  summary.steps = config.workload.steps;
  summary.parameters = step.model.params();
  summary.trainable_parameters = step.model.trainable();
  summary.frozen_parameters = step.model.frozen();
  summary.notes = config.notes;
  // What made this result: a sweep's --resume keeps the point only when these still hold.
  summary.inputs_fnv1a64 = digest_lines(input_digests(config.files_read)).get<std::vector<std::string>>();
  summary.tpusim_fnv1a64 = tpusim_fnv1a64();
  return summary;
}

// Out of HBM: blames what does not fit (the state alone, or one sample's activations beside it)
// and names the smallest sharding that fits, in `memory` and `warnings`.
void explain_out_of_memory(const Config& config, const LoweredStep& step, MemorySummary& memory, std::vector<std::string>& warnings) {
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
  memory.fits_with.reset();
  if (!layout) return;
  std::string sets;
  if (layout->fsdp != config.workload.fsdp) sets += " --set workload.training.fsdp=true";
  if (layout->model_axes != config.workload.mesh_model_axes) sets += " --set workload.training.mesh.model=" + layout->model_axes;
  memory.fits_with = FitsWith{layout->fsdp, layout->model_axes, layout->model_shards};
  warnings.push_back(fmt::format("the step fits when sharded:{}{}", sets,
                                 layout->model_shards > 1 ? fmt::format(" (a model axis of {} chips)", layout->model_shards) : ""));
}

// The chips to simulate: one per class of symmetric chips unless --all-chips, unless the hosts
// draw their batches' jitter (each its own), or unless the trace names a chip a representative
// would stand for (a trace of it needs it simulated).
SimulatedSlice plan_slice(const Torus& torus, const HwConfig& hw, const LoweredStep& step, const RunOptions& options) {
  const Program& program = step.program;
  SimulatedSlice simulated = plan_simulated_slice(torus, hw, program, !options.all_chips);
  if (simulated.folded() && step.infeed.jittered()) {
    simulated = plan_simulated_slice(torus, hw, program, false);
    simulated.all_chips_because = "the hosts' batch jitter (workload.input_pipeline.batch_jitter_mean_s) makes them differ";
  }
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
  // What the figures are of: the last step, or with batch jitter every step after the first
  // (each a draw), `window_steps` steps; step_s is their mean.
  Window window;
  std::size_t window_steps = 1;
  double step_s = 0;
  double chips = 0;

  std::size_t steps() const { return ends.size(); }
};

// Throughput and MFU of the steady-state step, with the evaluation's share when there is one.
void add_rates(RunSummary& summary, const SimulatedRun& run) {
  const Config& config = run.config;
  const HwConfig& hw = config.hw;
  const LoweredStep& step = run.step;
  const double step_s = run.step_s, chips = run.chips;
  const double peak = hw.peak_bf16_flops_per_chip() * chips;
  summary.samples_per_s = static_cast<double>(step.global_batch) / step_s;
  summary.samples_per_s_per_chip = static_cast<double>(step.global_batch) / step_s / chips;
  // A language model's samples are sequences of token ids: its users count tokens (MLPerf's GPT-3
  // logs do).
  const Workload& w = config.workload;
  const double tokens_per_sample = w.input_dtype == "int32" && w.input_shape.size() == 1 ? static_cast<double>(w.input_shape[0]) : 0;
  if (tokens_per_sample > 0)
    summary.tokens_per_s_per_chip = tokens_per_sample * *summary.samples_per_s_per_chip;
  summary.mfu = step.model_flops_per_step / (step_s * peak);
  // How far to trust the figures above: the public points of this kind of run.
  summary.validation = validation_band(
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
    summary.eval = EvalSummary{w.eval_examples, w.eval_every_steps, device_s, w.eval_host_overhead_s, eval_s};
    summary.samples_per_s_with_eval = samples / block_s;
    summary.samples_per_s_per_chip_with_eval = samples / block_s / chips;
    if (tokens_per_sample > 0) summary.tokens_per_s_per_chip_with_eval = tokens_per_sample * samples / block_s / chips;
  }
  summary.model_flops_per_step = step.model_flops_per_step;
  summary.peak_flops_per_s = peak;
  summary.documented_peak_flops_per_s = hw.chip.documented_peak_bf16_tflops * 1e12 * chips;
}

// A core's wait in the steady-state step (its index: chip * cores per chip + core), and how many
// cores of the slice it stands for.
struct CoreWait {
  Picos wait_ps;
  std::size_t core;
  std::uint64_t stands_for;
};

// What the breakdown leaves for the rest of the summary: per simulated core, the time it waited
// (for others at a collective, for input, idle), since the core that waits least holds the
// others back; and the cores' summed input wait.
struct CoreWaits {
  std::vector<CoreWait> by_core;
  double input_s = 0;
};

// Time breakdown averaged over every core of the slice in the steady-state step. Sums are of
// integer picoseconds, exact whatever the order, so that a representative counted `stands_for`
// times gives the same figures as every chip it stands for.
CoreWaits add_breakdown(RunSummary& summary, const SimulatedRun& run) {
  const HwConfig& hw = run.config.hw;
  const Torus& torus = run.system.torus();
  Picos compute_ps = 0, memory_ps = 0, comm_ps = 0, input_ps = 0, idle_ps = 0;  // summed over cores
  std::vector<CoreWait> waits;
  for (std::uint32_t chip = 0; chip < hw.chip_count(); ++chip)
    for (std::uint32_t core = 0; core < hw.chip.cores; ++core) {
      const CoreLogs* logs = run.recorder.core_logs(chip, core);
      if (logs == nullptr) continue;  // a chip a representative stands for
      const Breakdown b = core_breakdown(*logs, run.window);
      const std::uint64_t stands_for = run.simulated.stands_for(torus, chip);
      waits.push_back({b.exposed_communication + b.input_wait + b.idle, static_cast<std::size_t>(chip) * hw.chip.cores + core, stands_for});
      compute_ps += b.compute * stands_for;
      memory_ps += b.memory_bound * stands_for;
      comm_ps += b.exposed_communication * stands_for;
      input_ps += b.input_wait * stands_for;
      idle_ps += b.idle * stands_for;
    }
  const double core_steps = static_cast<double>(hw.core_count()) * static_cast<double>(run.window_steps);
  const double input_s = seconds(input_ps);
  summary.breakdown = {seconds(compute_ps) / core_steps, seconds(memory_ps) / core_steps, seconds(comm_ps) / core_steps,
                       input_s / core_steps, seconds(idle_ps) / core_steps};
  return {std::move(waits), input_s};
}

// Busy time and bytes per kind of unit over the run's window (the last step, or with batch jitter
// every step after the first), as a fraction of it and per step.
class UnitUse {
 public:
  explicit UnitUse(const SimulatedRun& run) : window_ps_(run.window.length()), window_steps_(run.window_steps) {
    const Torus& torus = run.system.torus();
    for (std::uint32_t u = 0; u < run.recorder.units().size(); ++u) {
      const UnitInfo& info = run.recorder.units()[u];
      KindUse& k = use_[info.kind];
      // A host's chips are one class's members each (symmetries map hosts onto hosts).
      const std::uint64_t stands_for =
          run.simulated.stands_for(torus, info.chip == kHostChip ? info.first_served_chip : info.chip);
      for (std::size_t s = run.steps() - run.window_steps; s < run.steps(); ++s) {
        k.busy += run.recorder.totals(u, static_cast<std::uint32_t>(s)).busy_ps * stands_for;
        k.bytes += run.recorder.totals(u, static_cast<std::uint32_t>(s)).bytes * stands_for;
      }
      k.units += stands_for;
    }
  }
  double fraction(UnitKind kind) const {
    const auto k = use_.find(kind);
    return k == use_.end() || k->second.units == 0
               ? 0.0
               : static_cast<double>(k->second.busy) / (static_cast<double>(k->second.units) * static_cast<double>(window_ps_));
  }
  // Per step, over the window's steps.
  std::uint64_t bytes(UnitKind kind) const {
    const auto k = use_.find(kind);
    return k == use_.end() ? 0 : k->second.bytes / window_steps_;
  }

 private:
  struct KindUse {
    Picos busy = 0;
    std::uint64_t units = 0;
    std::uint64_t bytes = 0;
  };
  std::map<UnitKind, KindUse> use_;
  Picos window_ps_;
  std::uint64_t window_steps_;
};

// The steady-state step's time in pipeline iterations on its busiest core, and in the
// iterations that are a bubble on it.
PipelineSummary pipeline_summary(const SimulatedRun& run) {
  const auto [pipeline_ps, bubble_ps] = run.system.pipeline_and_bubble_ps(run.steps() - 1);
  const PipelineSchedule& p = run.step.pipeline;
  return {p.stages,
          p.microbatches,
          p.repeats,
          p.iterations,
          p.layers_per_chunk,
          p.ideal_bubble_fraction(),
          seconds(pipeline_ps),
          seconds(bubble_ps),
          pipeline_ps > 0 ? static_cast<double>(bubble_ps) / static_cast<double>(pipeline_ps) : 0.0};
}

// Which core ends the steady-state step last and which first: in a synchronous step everyone
// waits for the slowest at the all-reduce, so the spread shows what holds the slice back.
StepEndSpread step_end_spread(const SimulatedRun& run) {
  std::string last_core, first_core;
  Picos last_end = 0, first_end = ~Picos{0};
  for (const Chip& chip : run.system.chips())
    for (std::size_t k = 0; k < chip.cores.size(); ++k) {
      const Picos end = chip.cores[k].step_end_ps()[run.steps() - 1];
      if (end > last_end) std::tie(last_end, last_core) = std::make_pair(end, fmt::format("chip{}.core{}", chip.id(), k));
      if (end < first_end) std::tie(first_end, first_core) = std::make_pair(end, fmt::format("chip{}.core{}", chip.id(), k));
    }
  return {last_core, first_core, seconds(last_end - first_end)};
}

StragglerSummary straggler_of(std::vector<CoreWait> waits, std::uint32_t cores_per_chip) {
  std::sort(waits.begin(), waits.end(), [](const CoreWait& a, const CoreWait& b) {
    return std::tie(a.wait_ps, a.core) < std::tie(b.wait_ps, b.core);
  });
  const CoreWait& least = waits.front();
  // The median of the whole slice's cores, each simulated one counted for its class.
  std::uint64_t cores = 0;
  for (const CoreWait& w : waits) cores += w.stands_for;
  std::uint64_t before = 0;
  Picos median_ps = least.wait_ps;
  for (const CoreWait& w : waits) {
    median_ps = w.wait_ps;
    before += w.stands_for;
    if (before > cores / 2) break;
  }
  return {fmt::format("chip{}.core{}", least.core / cores_per_chip, least.core % cores_per_chip), seconds(least.wait_ps),
          seconds(median_ps - least.wait_ps)};
}

// The times of the steps after the first, when there are at least two: their spread under the
// hosts' batch jitter. (Without it the steps differ only while a run settles, which the steady
// state's check reports.)
std::optional<StepTimesSummary> step_times_after_the_first(const std::vector<Picos>& ends) {
  if (ends.size() < 3) return std::nullopt;
  std::vector<Picos> times;
  for (std::size_t s = 1; s < ends.size(); ++s) times.push_back(ends[s] - ends[s - 1]);
  std::sort(times.begin(), times.end());
  const auto rank = [&](double p) { return seconds(times[static_cast<std::size_t>(std::ceil(p * static_cast<double>(times.size()))) - 1]); };
  StepTimesSummary out;
  out.steps = times.size();
  out.mean_s = seconds(ends.back() - ends.front()) / static_cast<double>(times.size());
  out.p50_s = rank(0.5);
  out.p90_s = rank(0.9);
  out.p99_s = rank(0.99);
  out.max_s = seconds(times.back());
  return out;
}

// The figures of the steady-state step: rates, where the time went, how busy each kind of unit
// was, cost, energy and goodput, and the warnings they call for.
void summarize_steps(RunSummary& summary, std::vector<std::string>& warnings, const SimulatedRun& run, const MemorySummary& memory,
                     const ojson& checks, const std::optional<Goodput>& failures) {
  const Config& config = run.config;
  const HwConfig& hw = config.hw;
  const LoweredStep& step = run.step;
  const std::size_t n = run.steps();
  const double step_s = run.step_s;
  summary.step_time_s = step_s;
  // With one step there is no steady state: the one step pays the first input transfer and the
  // program's launch, which later steps overlap.
  // With three steps or more, the last two must also agree: an input pipeline can take several
  // steps to drain what it prefetched during the first.
  // With batch jitter every step is a draw, not a transient: the figures are of their mean.
  const bool jittered = step.infeed.jittered();
  const double previous_step_s = n >= 3 ? seconds(run.ends[n - 2] - run.ends[n - 3]) : step_s;
  const bool settled = jittered || std::abs(step_s - previous_step_s) <= 0.01 * step_s;
  summary.steady_state = n >= 2 && settled;
  summary.first_step_time_s = seconds(run.ends[0]);
  if (jittered) summary.step_times = step_times_after_the_first(run.ends);
  if (jittered && n < 101)
    warnings.push_back(fmt::format("batch jitter: {} step{} after the first give a rough tail (a p99 needs about 100: "
                                   "workload.training.steps)", n - 1, n == 2 ? "" : "s"));
  add_rates(summary, run);
  const CoreWaits waits = add_breakdown(summary, run);
  const UnitUse use(run);
  // The kinds of unit the table gives a utilization or traffic key (traces/event_sink.hpp).
  // Every slice moves what the simulated one does.
  for (const UnitKindTraits& kind : unit_kinds()) {
    summary.utilization[kind.kind] = use.fraction(kind.kind);
    summary.traffic_per_step[kind.kind] = use.bytes(kind.kind) * hw.slices;
  }
  summary.collectives_per_step = collectives_by_mesh_axis(step.program, step.mesh, run.system.torus());
  if (step.pipeline.stages > 1) summary.pipeline = pipeline_summary(run);
  const StepFigures figures{step_s, seconds(run.ends[0]), hw.total_chip_count(), step.global_batch, use.fraction(UnitKind::Mxu),
                            use.fraction(UnitKind::Hbm)};
  summary.cost = cost_summary(hw, config.workload, figures);
  summary.energy = energy_summary(hw, config.workload, figures);
  summary.goodput = goodput_summary(hw, config.workload, figures, failures);
  summary.memory = memory;
  const double padding = mxu_padding_efficiency(step.program, hw);
  summary.mxu_padding_efficiency = padding;
  summary.checks = checks;
  summary.simulation = simulation_summary(run.simulated);
  summary.step_end_spread = step_end_spread(run);
  summary.straggler = straggler_of(waits.by_core, hw.chip.cores);

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
  const double core_steps = static_cast<double>(hw.core_count()) * static_cast<double>(run.window_steps);
  if (waits.input_s / core_steps > 0.1 * step_s)
    warnings.push_back(fmt::format("input-bound: cores wait {:.0f}% of the step for their batch", 100 * waits.input_s / core_steps / step_s));
  summary.warnings = warnings;
}

}  // namespace

RunSummary run_simulation(const Config& config, const RunOptions& options) {
  const HwConfig& hw = config.hw;
  const LoweredStep step = lowered(config);
  const std::optional<Goodput> failures = refuse_endless_job(config, step);
  RunOutputs out(config, options);
  RunSummary summary = run_identity(config, step);
  const MemorySummary memory = memory_summary(step);
  std::vector<std::string> warnings;
  if (memory.oom) {
    summary.status = "oom";
    MemorySummary with_memory = memory;
    explain_out_of_memory(config, step, with_memory, warnings);
    out.publish_without_step(summary, with_memory, warnings);
    return summary;
  }

  const Torus torus = Torus::of(hw);
  const SimulatedSlice simulated = plan_slice(torus, hw, step, options);
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
                    {"simulation", to_json(simulation_summary(simulated))},
                    {"partial", !completed}});
  };
  std::vector<Picos> ends = system.step_end_ps();
  nlohmann::ordered_json checks;  // a run cut short has nothing complete to check
  if (completed) {
    checks = check_invariants({&system, &step.program, &hw, &recorder, ends.back(), step.textbook_flops_per_core});
  } else {
    // Interrupted: what the finished steps say, marked partial, every output still valid.
    ends.resize(system.steps_completed());
    summary.status = "interrupted";
    summary.steps_simulated = ends.size();
    warnings.push_back(fmt::format("interrupted by signal {} after {} of {} steps: partial results", interrupt_signal(),
                                   ends.size(), config.workload.steps));
  }
  if (ends.empty()) {
    close_trace();
    out.publish_without_step(summary, memory, warnings);
    return summary;
  }
  const std::size_t n = ends.size();
  const Window last{n >= 2 ? ends[n - 2] : 0, ends[n - 1]};
  // With batch jitter each step is a draw: the figures are of every step after the first.
  const std::size_t window_steps = step.infeed.jittered() && n >= 2 ? n - 1 : 1;
  const Window window = window_steps > 1 ? Window{ends[0], ends[n - 1]} : last;
  const SimulatedRun run{config,
                         step,
                         system,
                         recorder,
                         simulated,
                         ends,
                         window,
                         window_steps,
                         seconds(window.length()) / static_cast<double>(window_steps),
                         static_cast<double>(hw.total_chip_count())};
  summarize_steps(summary, warnings, run, memory, checks, failures);
  if (trace && hw.chip.power) trace_chip_power(*trace, recorder, *hw.chip.power, ends);
  close_trace();
  out.publish(summary, chip0_timeline(recorder, last));
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
std::string format_cost_and_energy(const RunSummary& s) {
  std::string t;
  if (!s.cost || !s.energy) return t;
  const CostSummary& c = *s.cost;
  if (c.price_usd_per_chip_hour)
    t += fmt::format("  cost           {} per step, {} per million samples (${} per chip-hour x {} chips)\n", usd(*c.usd_per_step),
                     usd(*c.usd_per_million_samples), *c.price_usd_per_chip_hour, s.chips);
  else
    t += "  cost           no price for this hardware: set hw.chip.price_usd_per_chip_hour (USD per chip-hour)\n";
  const EnergySummary& e = *s.energy;
  if (e.chip_power_w)
    t += fmt::format("  energy         {} per step, {} per sample; {:.1f} W per chip (activity {:.1f}%; idle {:.0f} W, max {:.0f} W)\n",
                     si(*e.joules_per_step, "J"), si(*e.joules_per_sample, "J"), *e.chip_power_w, 100 * *e.activity, *e.idle_w,
                     *e.max_w);
  else
    t += "  energy         no power figures for this hardware: set hw.chip.power.idle_w and hw.chip.power.max_w\n";
  // A whole run's time, and its USD and energy where the hardware has a price and a power model.
  auto run_text = [](double time_s, const std::optional<double>& usd_total, const std::optional<double>& kwh) {
    std::string text = seconds_text(time_s);
    if (usd_total) text += ", " + usd(*usd_total);
    if (kwh) text += ", " + si(*kwh * 1e3, "Wh");
    return text;
  };
  if (c.training_steps)
    t += fmt::format("  to train       {} steps: {}\n", *c.training_steps, run_text(*c.time_to_train_s, c.usd_to_train, e.kwh_to_train));
  if (const auto& g = s.goodput) {
    t += fmt::format("  goodput        {:.1f}% at {:.3g} failures per chip-hour (one every {} on this slice): a {} checkpoint written "
                     "in {} every {} ({}), {} to restart\n",
                     100 * g->goodput, g->failures_per_chip_hour, seconds_text(g->mtbf_s), si(g->checkpoint_bytes, "B"),
                     seconds_text(g->checkpoint_write_s), seconds_text(g->checkpoint_interval_s),
                     g->optimal_interval ? "the optimum, Young and Daly's" : "as stated", seconds_text(g->restart_and_read_s));
    if (g->time_to_train_s) t += "  with failures  " + run_text(*g->time_to_train_s, g->usd_to_train, g->kwh_to_train) + " to train\n";
  }
  return t;
}

// "compute 1.2 ms (40.0%)" lines: the step's figures, its slice and its batch.
std::string format_time(double sec) {
  if (sec >= 1) return fmt::format("{:.3f} s", sec);
  if (sec >= 1e-3) return fmt::format("{:.3f} ms", sec * 1e3);
  return fmt::format("{:.3f} us", sec * 1e6);
}
std::string format_bytes(double b) {
  if (b >= 1ull << 30) return fmt::format("{:.2f} GiB", b / (1ull << 30));
  if (b >= 1 << 20) return fmt::format("{:.2f} MiB", b / (1 << 20));
  return fmt::format("{:.1f} KiB", b / 1024);
}
std::string format_pct(double f) { return f > 0 && f < 0.001 ? fmt::format("{:.3f}%", 100 * f) : fmt::format("{:.1f}%", 100 * f); }
std::string format_rate(double v) {
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.2f} k", v / 1e3);
  if (v >= 100) return fmt::format("{:.1f}", v);
  return fmt::format("{:.3g}", v);  // a large model's few samples per second per chip keep three figures
}

// The slice, batch, parameters, notes and memory: what every summary has, whether a step ran or not.
std::string format_run_identity(const RunSummary& s) {
  std::string t;
  const std::string slice = s.slices > 1 ? fmt::format("{} slices of {}", s.slices, s.topology) : s.topology;
  t += fmt::format("{} on {} {} ({} chips, {} cores, {} replicas{})\n", s.workload, s.hw, slice, s.chips, s.cores, s.replicas,
                   s.slices > 1 ? " in each" : "");
  if (s.accelerator_mapping) t += fmt::format("  accelerator    {}\n", *s.accelerator_mapping);
  t += fmt::format("  batch          {} global, {} per replica, {} per core; {}, {}, {} step{}\n", s.global_batch, s.per_replica_batch,
                   s.per_core_batch, s.precision, s.optimizer, s.steps, s.steps == 1 ? "" : "s");
  if (!s.slow_chips.empty()) {
    std::string listed;
    for (std::size_t i = 0; i < std::min<std::size_t>(s.slow_chips.size(), 4); ++i)
      listed += fmt::format("{}chip {} at {:.1f}% clock", i ? ", " : "", s.slow_chips[i].chip, 100 * s.slow_chips[i].core_freq_scale);
    t += fmt::format("  slow chips     {} of {}: {}{}\n", s.slow_chips.size(), s.chips, listed, s.slow_chips.size() > 4 ? ", ..." : "");
  }
  if (s.frozen_parameters > 0)
    t += fmt::format("  parameters     {}: {} trained, {} frozen (no gradient, all-reduce or optimizer state)\n", s.parameters,
                     s.trainable_parameters, s.frozen_parameters);
  for (const auto& note : s.notes) t += "  note: " + note + "\n";
  const MemorySummary& m = s.memory;
  const PerCoreMemory& pc = m.per_core;
  t += fmt::format("  memory/core    {} of {} HBM ({}): params {}, grads {}, optimizer {}, activations {}\n",
                   format_bytes(static_cast<double>(pc.total_bytes)), format_bytes(static_cast<double>(m.hbm_capacity_bytes)),
                   format_pct(m.hbm_fraction), format_bytes(static_cast<double>(pc.parameters_bytes)),
                   format_bytes(static_cast<double>(pc.gradients_bytes)), format_bytes(static_cast<double>(pc.optimizer_state_bytes)),
                   format_bytes(static_cast<double>(pc.activations_bytes)));
  return t;
}

// The steady-state step: its time, rates, error band, breakdown, utilization and collectives.
std::string format_step(const RunSummary& s) {
  std::string t;
  const double step = *s.step_time_s;
  if (s.steady_state)
    t += fmt::format("  step time      {} (steady state; first step {})\n", format_time(step), format_time(*s.first_step_time_s));
  else if (s.steps >= 2)
    t += fmt::format("  step time      {} (the last step, not yet steady; first step {})\n", format_time(step),
                     format_time(*s.first_step_time_s));
  else
    t += fmt::format("  step time      {} (the first step: one step was simulated, no steady state)\n", format_time(step));
  if (const auto& times = s.step_times)
    t += fmt::format("  step times     mean {}, p50 {}, p90 {}, p99 {}, max {} over the {} steps after the first\n",
                     format_time(times->mean_s), format_time(times->p50_s), format_time(times->p90_s), format_time(times->p99_s),
                     format_time(times->max_s), times->steps);
  t += fmt::format("  throughput     {} samples/s, {} samples/s per chip{}\n", format_rate(*s.samples_per_s),
                   format_rate(*s.samples_per_s_per_chip),
                   s.tokens_per_s_per_chip ? fmt::format(" ({} tokens/s per chip)", format_rate(*s.tokens_per_s_per_chip)) : "");
  if (s.eval && s.samples_per_s_with_eval)
    t += fmt::format("  with eval      {} samples/s, {} samples/s per chip{} (evaluating {} examples every {} steps: {} each)\n",
                     format_rate(*s.samples_per_s_with_eval), format_rate(*s.samples_per_s_per_chip_with_eval),
                     s.tokens_per_s_per_chip_with_eval
                         ? fmt::format(", {} tokens/s per chip", format_rate(*s.tokens_per_s_per_chip_with_eval))
                         : "",
                     s.eval->examples, s.eval->every_steps, format_time(s.eval->time_per_eval_s));
  // MFU is against the bfloat16 peak, as MaxText counts it; int8 matmuls run at up to twice
  // that rate (fp8 at the MXU's fp8 rate, twice it on TPU7x), so such a step can pass 100%
  // without anything being wrong.
  const std::string quantized = s.quantization ? s.quantization->substr(0, 4) : "";
  t += fmt::format("  MFU            {}{}\n", format_pct(*s.mfu),
                   quantized == "int8"  ? " of the bfloat16 peak (int8 matmuls run at up to twice it)"
                   : quantized == "fp8" ? " of the bfloat16 peak (fp8 matmuls run at the MXU's fp8 rate, up to twice it)"
                                        : "");
  t += fmt::format("  validation     {}\n", s.validation.text);
  const BreakdownSummary& b = s.breakdown;
  t += fmt::format("  breakdown      compute {} ({}), memory-bound {} ({}), exposed comm {} ({}), input wait {} ({}), idle {} ({})\n",
                   format_time(b.compute_s), format_pct(b.compute_s / step), format_time(b.memory_bound_s),
                   format_pct(b.memory_bound_s / step), format_time(b.exposed_communication_s),
                   format_pct(b.exposed_communication_s / step), format_time(b.input_wait_s), format_pct(b.input_wait_s / step),
                   format_time(b.idle_s), format_pct(b.idle_s / step));
  // Only when the slice loses at least 1% of the step waiting for one core (a slow chip or link).
  if (s.straggler.time_lost_s >= 0.01 * step)
    t += fmt::format("  straggler      {}: the median core waits {} ({}) longer for it\n", s.straggler.core,
                     format_time(s.straggler.time_lost_s), format_pct(s.straggler.time_lost_s / step));
  const UtilizationSummary& u = s.utilization;
  std::string own_kinds;  // a program's own kinds of unit (register_unit_kind), by their names as the report shows them
  for (std::size_t k = std::size(kBuiltInUnitKinds); k < unit_kinds().size(); ++k)
    if (unit_kinds()[k].utilization) own_kinds += fmt::format(", {} {}", unit_kinds()[k].name, format_pct(u[static_cast<UnitKind>(k)]));
  t += fmt::format("  utilization    MXU {}, VPU {}, HBM {}, ICI {}{}{}\n", format_pct(u[UnitKind::Mxu]), format_pct(u[UnitKind::Vpu]),
                   format_pct(u[UnitKind::Hbm]), format_pct(u[UnitKind::IciLink]),
                   s.slices > 1 ? ", DCN " + format_pct(u[UnitKind::Dcn]) : "", own_kinds);
  const CollectivesSummary& c = s.collectives_per_step;
  if (c.model || c.expert || c.pipeline) {
    std::string axes = fmt::format("data {} ({})", c.data.count, format_bytes(static_cast<double>(c.data.bytes)));
    for (const auto& [name, axis] : {std::pair{"model", &c.model}, {"expert", &c.expert}, {"pipeline", &c.pipeline}})
      if (*axis) axes += fmt::format(", {} {} ({})", name, (*axis)->count, format_bytes(static_cast<double>((*axis)->bytes)));
    t += fmt::format("  collectives    per core and step, by mesh axis: {}\n", axes);
  }
  if (const auto& p = s.pipeline)
    t += fmt::format("  pipeline       {} stages of {} layers, {} microbatches{}, {} iterations: bubble {} of their {} (ideal {})\n",
                     p->stages, p->layers_per_chunk * p->repeats, p->microbatches,
                     p->repeats > 1 ? fmt::format(" x {} repeats", p->repeats) : "", p->iterations, format_pct(p->bubble_fraction),
                     format_time(p->time_s), format_pct(p->ideal_bubble_fraction));
  return t + format_cost_and_energy(s);
}

}  // namespace

std::string format_summary(const RunSummary& s) {
  std::string t = format_run_identity(s);
  if (s.ran())  // ok, or interrupted after a step
    t += format_step(s);
  else if (s.out_of_memory())
    t += "  step time      none: the step does not fit in HBM (out of memory)\n";
  else
    t += "  step time      none: interrupted before the first step finished\n";
  for (const auto& w : s.warnings) t += "  warning: " + w + "\n";
  return t;
}

}  // namespace tpusim
