// The summary of a run (summary.json, summary.csv): its one schema. sim/ fills a RunSummary; the
// text `tpusim run` prints, the HTML report, a sweep's rankings and its resume read one back.
// No key of it is spelled anywhere else.
//
// Each block lists its fields once, in their order in the file, in `fields(v)`: the writer and
// the reader (summary.cpp) both walk that list, so they cannot drift apart. `v.field` is always
// written, `v.nullable` written as null when empty, `v.optional` left out when empty; a reader
// leaves a field it does not find (an older or a damaged file) at its default, NaN for figures.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/event_sink.hpp"

namespace tpusim {

inline constexpr double kNoFigure = NAN;

// How far to trust the run's figures: the public validation points of its kind (sim/validation_band.hpp).
struct ValidationBand {
  std::string kind;
  std::string match;  // "exact", "nearest" or "none"
  std::uint64_t points = 0;
  std::optional<double> mean_abs_error_pct, worst_abs_error_pct;  // leave-one-source-out
  std::string text;

  template <typename V>
  void fields(V& v) {
    v.field("kind", kind);
    v.field("match", match);
    v.field("points", points);
    v.optional("mean_abs_error_pct", mean_abs_error_pct);
    v.optional("worst_abs_error_pct", worst_abs_error_pct);
    v.field("text", text);
  }
};

struct SlowChipSummary {
  std::uint32_t chip = 0;
  double core_freq_scale = 1, hbm_bw_scale = 1;

  template <typename V>
  void fields(V& v) {
    v.field("chip", chip);
    v.field("core_freq_scale", core_freq_scale);
    v.field("hbm_bw_scale", hbm_bw_scale);
  }
};

struct EvalSummary {
  std::uint64_t examples = 0;
  double every_steps = 0;
  double device_time_s = kNoFigure, host_overhead_s = kNoFigure, time_per_eval_s = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("examples", examples);
    v.field("every_steps", every_steps);
    v.field("device_time_s", device_time_s);
    v.field("host_overhead_s", host_overhead_s);
    v.field("time_per_eval_s", time_per_eval_s);
  }
};

// The times of the steps after the first (at least two) when the hosts' batches come at random
// (workload.input_pipeline.batch_jitter_mean_s): synchronous training's tail. Percentiles by
// nearest rank.
struct StepTimesSummary {
  std::uint64_t steps = 0;
  double mean_s = kNoFigure, p50_s = kNoFigure, p90_s = kNoFigure, p99_s = kNoFigure, max_s = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("steps", steps);
    v.field("mean_s", mean_s);
    v.field("p50_s", p50_s);
    v.field("p90_s", p90_s);
    v.field("p99_s", p99_s);
    v.field("max_s", max_s);
  }
};

// Averaged over every core of the slice in the steady-state step.
struct BreakdownSummary {
  double compute_s = kNoFigure, memory_bound_s = kNoFigure, exposed_communication_s = kNoFigure, input_wait_s = kNoFigure,
         idle_s = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("compute_s", compute_s);
    v.field("memory_bound_s", memory_bound_s);
    v.field("exposed_communication_s", exposed_communication_s);
    v.field("input_wait_s", input_wait_s);
    v.field("idle_s", idle_s);
  }
};

// A figure for each kind of unit whose row (unit_kinds()) names a key for it: its busy fraction
// (`utilization`) or its bytes per step (`traffic_per_step`).
template <typename T, const char* UnitKindTraits::*Key>
struct PerUnitKind {
  std::array<T, kMaxUnitKinds> values{};

  T& operator[](UnitKind kind) { return values[static_cast<std::size_t>(kind)]; }
  T operator[](UnitKind kind) const { return values[static_cast<std::size_t>(kind)]; }

  template <typename V>
  void fields(V& v) {
    for (const UnitKindTraits& kind : unit_kinds())
      if (kind.*Key) v.field(kind.*Key, (*this)[kind.kind]);
  }
};
using UtilizationSummary = PerUnitKind<double, &UnitKindTraits::utilization>;
using TrafficSummary = PerUnitKind<std::uint64_t, &UnitKindTraits::traffic>;

struct AxisCollectives {
  std::uint64_t count = 0, bytes = 0;  // one core's, per step; bytes of their buffers

  template <typename V>
  void fields(V& v) {
    v.field("count", count);
    v.field("bytes", bytes);
  }
};

struct DcnCollectives {
  std::uint64_t count = 0, sent_bytes_per_chip = 0;

  template <typename V>
  void fields(V& v) {
    v.field("count", count);
    v.field("sent_bytes_per_chip", sent_bytes_per_chip);
  }
};

// By the mesh axis the collectives span; an axis of one chip has none.
struct CollectivesSummary {
  AxisCollectives data;
  std::optional<AxisCollectives> model, expert, pipeline;
  std::optional<DcnCollectives> dcn;  // over several slices: those that cross to the others

  template <typename V>
  void fields(V& v) {
    v.field("data", data);
    v.optional("model", model);
    v.optional("expert", expert);
    v.optional("pipeline", pipeline);
    v.optional("dcn", dcn);
  }
};

struct PipelineSummary {
  std::uint32_t stages = 1, microbatches = 1, repeats = 1, iterations = 1, layers_per_chunk = 0;
  double ideal_bubble_fraction = kNoFigure, time_s = kNoFigure, bubble_s = kNoFigure, bubble_fraction = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("stages", stages);
    v.field("microbatches", microbatches);
    v.field("repeats", repeats);
    v.field("iterations", iterations);
    v.field("layers_per_chunk", layers_per_chunk);
    v.field("ideal_bubble_fraction", ideal_bubble_fraction);
    v.field("time_s", time_s);
    v.field("bubble_s", bubble_s);
    v.field("bubble_fraction", bubble_fraction);
  }
};

// Money figures are empty without a price; the training run's without a stated dataset.
struct CostSummary {
  std::optional<double> price_usd_per_chip_hour, usd_per_step, usd_per_million_samples, samples_per_usd;
  std::optional<std::uint64_t> training_steps;
  std::optional<double> time_to_train_s, usd_to_train;

  template <typename V>
  void fields(V& v) {
    v.nullable("price_usd_per_chip_hour", price_usd_per_chip_hour);
    v.nullable("usd_per_step", usd_per_step);
    v.nullable("usd_per_million_samples", usd_per_million_samples);
    v.nullable("samples_per_usd", samples_per_usd);
    v.nullable("training_steps", training_steps);
    v.nullable("time_to_train_s", time_to_train_s);
    v.nullable("usd_to_train", usd_to_train);
  }
};

// Every figure empty when the chip has no power model; kWh to train without a stated dataset.
struct EnergySummary {
  std::optional<double> activity, chip_power_w, idle_w, max_w, typical_w, joules_per_step, joules_per_sample, kwh_to_train;

  template <typename V>
  void fields(V& v) {
    v.nullable("activity", activity);
    v.nullable("chip_power_w", chip_power_w);
    v.nullable("idle_w", idle_w);
    v.nullable("max_w", max_w);
    v.nullable("typical_w", typical_w);
    v.nullable("joules_per_step", joules_per_step);
    v.nullable("joules_per_sample", joules_per_sample);
    v.nullable("kwh_to_train", kwh_to_train);
  }
};

struct GoodputSummary {
  double failures_per_chip_hour = kNoFigure, mtbf_s = kNoFigure, checkpoint_bytes = kNoFigure, checkpoint_write_s = kNoFigure,
         restart_and_read_s = kNoFigure, checkpoint_interval_s = kNoFigure;
  bool optimal_interval = false;  // "checkpoint_interval": "optimal" (Young and Daly's) or "stated"
  double goodput = kNoFigure, samples_per_s = kNoFigure;
  std::optional<double> time_to_train_s, usd_to_train, kwh_to_train;

  template <typename V>
  void fields(V& v) {
    v.field("failures_per_chip_hour", failures_per_chip_hour);
    v.field("mtbf_s", mtbf_s);
    v.field("checkpoint_bytes", checkpoint_bytes);
    v.field("checkpoint_write_s", checkpoint_write_s);
    v.field("restart_and_read_s", restart_and_read_s);
    v.field("checkpoint_interval_s", checkpoint_interval_s);
    v.choice("checkpoint_interval", optimal_interval, "optimal", "stated");
    v.field("goodput", goodput);
    v.field("samples_per_s", samples_per_s);
    v.nullable("time_to_train_s", time_to_train_s);
    v.nullable("usd_to_train", usd_to_train);
    v.nullable("kwh_to_train", kwh_to_train);
  }
};

struct PerCoreMemory {
  std::uint64_t parameters_bytes = 0, gradients_bytes = 0, optimizer_state_bytes = 0, activations_bytes = 0, total_bytes = 0;

  template <typename V>
  void fields(V& v) {
    v.field("parameters_bytes", parameters_bytes);
    v.field("gradients_bytes", gradients_bytes);
    v.field("optimizer_state_bytes", optimizer_state_bytes);
    v.field("activations_bytes", activations_bytes);
    v.field("total_bytes", total_bytes);
  }
};

// The least sharding under which a step that does not fit would.
struct FitsWith {
  bool fsdp = false;
  std::string mesh_model;
  std::uint32_t model_shards = 1;

  template <typename V>
  void fields(V& v) {
    v.field("fsdp", fsdp);
    v.field("mesh_model", mesh_model);
    v.field("model_shards", model_shards);
  }
};

struct MemorySummary {
  PerCoreMemory per_core;
  std::uint64_t hbm_capacity_bytes = 0;
  double hbm_fraction = kNoFigure;
  bool oom = false;
  std::uint64_t largest_per_core_batch = 0;
  std::optional<FitsWith> fits_with;  // out of memory only: null when no sharding fits

  template <typename V>
  void fields(V& v) {
    v.field("per_core", per_core);
    v.field("hbm_capacity_bytes", hbm_capacity_bytes);
    v.field("hbm_fraction", hbm_fraction);
    v.field("oom", oom);
    v.field("largest_per_core_batch", largest_per_core_batch);
    if (oom) v.nullable("fits_with", fits_with);
  }
};

// The chips simulated: every one, or one per class of symmetric chips (hw/symmetry.hpp).
struct SimulationSummary {
  bool representatives = false;  // "mode": "representatives" or "all_chips"
  std::uint64_t chips_simulated = 0;
  std::uint64_t stands_for_at_most = 1;  // the most chips one simulated chip stands for, itself included
  std::optional<std::string> all_chips_because;

  template <typename V>
  void fields(V& v) {
    v.choice("mode", representatives, "representatives", "all_chips");
    v.field("chips_simulated", chips_simulated);
    v.field("stands_for_at_most", stands_for_at_most);
    v.optional("all_chips_because", all_chips_because);
  }
};

// Which core ends the steady-state step last and which first.
struct StepEndSpread {
  std::string last_core, first_core;  // "chip3.core1"
  double spread_s = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("last_core", last_core);
    v.field("first_core", first_core);
    v.field("spread_s", spread_s);
  }
};

// The core that waits least, and how much longer than it the median core waits.
struct StragglerSummary {
  std::string core;
  double waits_s = kNoFigure, time_lost_s = kNoFigure;

  template <typename V>
  void fields(V& v) {
    v.field("core", core);
    v.field("waits_s", waits_s);
    v.field("time_lost_s", time_lost_s);
  }
};

struct RunSummary {
  // What was simulated, on what, and what made the result.
  std::string tpusim_version;
  std::string status = "ok";  // "ok", "oom" (the step does not fit) or "interrupted"
  std::string workload, hw, topology;
  std::optional<std::string> accelerator_type, accelerator_mapping;  // given as a Cloud TPU accelerator type
  std::uint64_t slices = 1, chips = 0, cores = 0;
  std::vector<SlowChipSummary> slow_chips;
  std::uint64_t replicas = 0, global_batch = 0, per_replica_batch = 0, per_core_batch = 0;
  std::string precision;
  std::optional<std::string> quantization;
  std::string optimizer;
  std::uint64_t steps = 0;
  std::uint64_t parameters = 0, trainable_parameters = 0, frozen_parameters = 0;
  std::vector<std::string> notes;
  std::vector<std::string> inputs_fnv1a64;  // "digest  path", a line per file read
  std::string tpusim_fnv1a64;

  // An interrupted run: how many steps finished.
  std::optional<std::uint64_t> steps_simulated;

  // The steady-state step; empty when no step ran (out of memory) or finished (interrupted).
  std::optional<double> step_time_s;
  bool steady_state = false;
  std::optional<double> first_step_time_s, samples_per_s, samples_per_s_per_chip;
  std::optional<StepTimesSummary> step_times;
  std::optional<double> tokens_per_s_per_chip;  // a language model's
  std::optional<double> mfu;
  ValidationBand validation;
  std::optional<EvalSummary> eval;
  std::optional<double> samples_per_s_with_eval, samples_per_s_per_chip_with_eval, tokens_per_s_per_chip_with_eval;
  double model_flops_per_step = kNoFigure, peak_flops_per_s = kNoFigure, documented_peak_flops_per_s = kNoFigure;
  BreakdownSummary breakdown;
  UtilizationSummary utilization;
  TrafficSummary traffic_per_step;
  CollectivesSummary collectives_per_step;
  std::optional<PipelineSummary> pipeline;
  std::optional<CostSummary> cost;
  std::optional<EnergySummary> energy;
  std::optional<GoodputSummary> goodput;  // without a failure rate, empty
  MemorySummary memory;
  double mxu_padding_efficiency = kNoFigure;
  nlohmann::ordered_json checks;  // the end-of-run checks' own record (sim/invariants.hpp)
  SimulationSummary simulation;
  StepEndSpread step_end_spread;
  StragglerSummary straggler;
  std::vector<std::string> warnings;

  bool ran() const { return step_time_s.has_value(); }
  bool ok() const { return status == "ok"; }
  bool out_of_memory() const { return status == "oom"; }
  bool interrupted() const { return status == "interrupted"; }

  template <typename V>
  void fields(V& v) {
    v.field("tpusim_version", tpusim_version);
    v.field("status", status);
    v.field("workload", workload);
    v.field("hw", hw);
    v.field("topology", topology);
    v.optional("accelerator_type", accelerator_type);
    v.optional("accelerator_mapping", accelerator_mapping);
    v.field("slices", slices);
    v.field("chips", chips);
    v.field("cores", cores);
    v.unless_empty("slow_chips", slow_chips);
    v.field("replicas", replicas);
    v.field("global_batch", global_batch);
    v.field("per_replica_batch", per_replica_batch);
    v.field("per_core_batch", per_core_batch);
    v.field("precision", precision);
    v.optional("quantization", quantization);
    v.field("optimizer", optimizer);
    v.field("steps", steps);
    v.field("parameters", parameters);
    v.field("trainable_parameters", trainable_parameters);
    v.field("frozen_parameters", frozen_parameters);
    v.field("notes", notes);
    v.field("inputs_fnv1a64", inputs_fnv1a64);
    v.field("tpusim_fnv1a64", tpusim_fnv1a64);
    if (interrupted()) {
      bool partial = true;
      v.field("partial", partial);
      v.optional("steps_simulated", steps_simulated);
    }
    v.nullable("step_time_s", step_time_s);  // read first: whether a step ran decides what follows
    if (ran()) v.field("steady_state", steady_state);
    v.nullable("first_step_time_s", first_step_time_s);
    if (ran()) v.optional("step_times", step_times);
    v.nullable("samples_per_s", samples_per_s);
    v.nullable("samples_per_s_per_chip", samples_per_s_per_chip);
    if (ran()) v.optional("tokens_per_s_per_chip", tokens_per_s_per_chip);
    v.nullable("mfu", mfu);
    if (ran()) {
      v.field("validation", validation);
      v.optional("eval", eval);
      v.optional("samples_per_s_with_eval", samples_per_s_with_eval);
      v.optional("samples_per_s_per_chip_with_eval", samples_per_s_per_chip_with_eval);
      v.optional("tokens_per_s_per_chip_with_eval", tokens_per_s_per_chip_with_eval);
      v.field("model_flops_per_step", model_flops_per_step);
      v.field("peak_flops_per_s", peak_flops_per_s);
      v.field("documented_peak_flops_per_s", documented_peak_flops_per_s);
      v.field("breakdown", breakdown);
      v.field("utilization", utilization);
      v.field("traffic_per_step", traffic_per_step);
      v.field("collectives_per_step", collectives_per_step);
      v.optional("pipeline", pipeline);
    }
    v.nullable("cost", cost);
    v.nullable("energy", energy);
    if (ran()) v.nullable("goodput", goodput);
    v.field("memory", memory);
    if (ran()) {
      v.field("mxu_padding_efficiency", mxu_padding_efficiency);
      v.field("checks", checks);
      v.field("simulation", simulation);
      v.field("step_end_spread", step_end_spread);
      v.field("straggler", straggler);
    }
    v.field("warnings", warnings);
  }
};

// Keys of one's own choosing and their values, in order: a JSON object.
template <typename T>
using NamedValues = std::vector<std::pair<std::string, T>>;

// A row of sweep.json (and of a run's report): one point, how it ended, and its run's summary.
struct SweepRow {
  std::string point;                   // its directory under points/
  std::optional<std::uint64_t> index;  // its number in the sweep; a single run's row has none
  std::string status;                  // its summary's, or "input_error" / "sim_error" when it did not run
  std::string reason;                  // why it is not ok: the error, or its summary's first warning
  NamedValues<std::string> varied;     // each varied key and its value, as given
  nlohmann::ordered_json summary;      // the point's summary.json as the point wrote it; null when it did not run
  NamedValues<std::optional<std::uint64_t>> rank;  // its place by each ranking, 1 the best; empty: no such figure

  bool ok() const { return status == "ok"; }
  bool out_of_memory() const { return status == "oom"; }
  bool interrupted() const { return status == "interrupted"; }
  // The point's summary read back, when it has one.
  std::optional<RunSummary> run_summary() const;

  template <typename V>
  void fields(V& v) {
    v.field("point", point);
    v.optional("index", index);
    v.field("status", status);
    v.field("reason", reason);
    v.field("varied", varied);
    v.field("summary", summary);
    v.unless_empty("rank", rank);
  }
};

struct SweepAxisValues {
  std::string key;  // a workload.* or hw.* key, or hw / topology / slices
  std::vector<std::string> values;

  template <typename V>
  void fields(V& v) {
    v.field("key", key);
    v.field("values", values);
  }
};

// sweep.json: the sweep, what its points ran with, and a row per finished point. A run's report
// reads its one point as such a document without axes.
struct SweepDocument {
  std::string workload;  // the workload file
  std::optional<std::vector<SweepAxisValues>> axes;
  std::uint64_t points = 0;                          // in the whole sweep
  std::optional<std::string> shard;                  // "K/N": this document holds the K-th of N shards
  std::optional<nlohmann::ordered_json> arguments;   // what the points ran with (sim/sweep.cpp): --resume and merge check it
  std::optional<std::uint64_t> finished, interrupted;  // rows that finished, and that were cut short
  std::vector<SweepRow> rows;

  template <typename V>
  void fields(V& v) {
    v.field("workload", workload);
    v.optional("axes", axes);
    v.field("points", points);
    v.optional("shard", shard);
    v.optional("arguments", arguments);
    v.optional("finished", finished);
    v.optional("interrupted", interrupted);
    v.field("rows", rows);
  }
};

nlohmann::ordered_json to_json(const RunSummary& summary);
nlohmann::ordered_json to_json(const SweepRow& row);
nlohmann::ordered_json to_json(const SweepDocument& sweep);
// `unread`, when given, gets the names of the document's always-written fields that `json` lacks
// or holds with another type (not those of its rows: sweep_row_from_json checks a row).
SweepDocument sweep_document_from_json(const nlohmann::ordered_json& json, std::vector<std::string>* unread = nullptr);
// `unread`, when given, gets the names of the row's always-written fields that `json` lacks or
// holds with another type.
SweepRow sweep_row_from_json(const nlohmann::ordered_json& json, std::vector<std::string>* unread = nullptr);
nlohmann::ordered_json to_json(const SimulationSummary& simulation);
// Whatever of a summary `json` holds; a field missing or of another type keeps its default.
RunSummary run_summary_from_json(const nlohmann::ordered_json& json);

}  // namespace tpusim
