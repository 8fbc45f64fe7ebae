// End to end through `tpusim run`: the outputs, the trace's structure, determinism, and the
// physics the simulation must show.
#define BOOST_TEST_MODULE run
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "hw/collective.hpp"
#include "hw/matmul_tiling.hpp"
#include "hw/systolic_timing.hpp"
#include "hw/topology.hpp"
#include "sim/config.hpp"
#include "sim/validation_band.hpp"
#include "traces/chrome_trace.hpp"
#include "traces/summary.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {



std::int64_t to_ns(const json& micros) { return std::llround(micros.get<double>() * 1000.0); }

// Sum of exact MXU cycles on chip 0 core 0 in the last step, read from the trace.
std::uint64_t traced_mxu_cycles(const json& trace, std::uint32_t step) {
  std::set<std::int64_t> mxu_tids;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1 &&
        e["args"]["name"].get<std::string>().rfind("core0.mxu", 0) == 0)
      mxu_tids.insert(e["tid"].get<std::int64_t>());
  std::uint64_t cycles = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == 1 && mxu_tids.count(e["tid"].get<std::int64_t>()) && e["args"]["step"] == step)
      cycles += e["args"]["cycles"].get<std::uint64_t>();
  return cycles;
}

// What the systolic model says one core's MXU spends on a step of the example at `global_batch`.
std::uint64_t predicted_mxu_cycles(std::uint64_t global_batch) {
  ConfigRequest request;
  request.workload_path = example_workload();
  request.sets = {"workload.training.global_batch=" + std::to_string(global_batch)};
  const Config config = load_config(request);
  const LoweredStep step = lower_training_step(config.workload, config.hw);
  const SystolicArray array{config.hw.core.mxu.rows, config.hw.core.mxu.cols, true};
  std::uint64_t cycles = 0;
  for (const Op& op : step.program.ops) {
    if (op.kind != OpKind::Matmul) continue;
    // The example's matmuls are small enough that an op's blocks follow each other on the MXU
    // with no gap: the first fills and drains the array, the others continue its stream.
    bool first = true;
    for (const MatmulBlock& b : tile_matmul(op.matmul, config.hw.core.mxu, config.hw.core.vmem_bytes / 4 * 3).blocks) {
      const auto plan = plan_matmul(array, b.m, b.k, b.n, op.matmul.passes, 1);
      cycles += systolic_cycles(array, b.m, plan.weight_tiles, 1.0, !first);  // v2: one MXU per core
      first = false;
    }
  }
  return cycles;
}

}  // namespace

BOOST_AUTO_TEST_CASE(default_example_writes_every_output_with_the_summary_fields) {
  const auto run = run_example("");
  BOOST_TEST(run->result.out.find("step time") != std::string::npos);
  for (const char* f : {"summary.json", "summary.csv", "trace.json", "effective_config.json"})
    BOOST_TEST(fs::exists(run->out() + "/" + f), f);
  // Issue 43: the outputs line named six files of the seven (not command.txt). It names exactly
  // the files in the directory now, every one but the hidden marker.
  const std::string& out = run->result.out;
  const auto line_at = out.find("  outputs        ");
  BOOST_REQUIRE(line_at != std::string::npos);
  const std::string line = out.substr(line_at, out.find('\n', line_at) - line_at);
  std::set<std::string> listed, present;
  std::stringstream names(line.substr(line.find('(') + 1, line.rfind(')') - line.find('(') - 1));
  for (std::string name; std::getline(names >> std::ws, name, ',');) listed.insert(name);
  for (const auto& entry : fs::directory_iterator(run->out()))
    if (entry.path().filename().string()[0] != '.') present.insert(entry.path().filename().string());
  BOOST_TEST(listed == present, line);
  BOOST_TEST(present.count("command.txt") == 1u);
  const json& s = run->summary;
  const double step = s["step_time_s"].get<double>();
  BOOST_TEST(step > 0);
  BOOST_TEST(s["samples_per_s"].get<double>() == 1024 / step, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(s["samples_per_s_per_chip"].get<double>() == 1024 / step / 4, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(!s.contains("tokens_per_s_per_chip"));  // its samples are images, not token ids
  BOOST_TEST(s["mfu"].get<double>() > 0);
  BOOST_TEST(s["mfu"].get<double>() < 1);
  double sum = 0;
  for (const char* k : {"compute_s", "memory_bound_s", "exposed_communication_s", "input_wait_s", "idle_s"}) {
    BOOST_TEST(s["breakdown"][k].get<double>() >= 0);
    sum += s["breakdown"][k].get<double>();
  }
  BOOST_TEST(sum == step, boost::test_tools::tolerance(1e-9));  // every instant classified once
  for (const char* u : {"mxu", "vpu", "hbm", "ici"}) {
    BOOST_TEST(s["utilization"][u].get<double>() > 0, u);
    BOOST_TEST(s["utilization"][u].get<double>() <= 1, u);
  }
  const json& m = s["memory"];
  BOOST_TEST(m["per_core"]["total_bytes"].get<std::uint64_t>() ==
             m["per_core"]["parameters_bytes"].get<std::uint64_t>() + m["per_core"]["gradients_bytes"].get<std::uint64_t>() +
                 m["per_core"]["optimizer_state_bytes"].get<std::uint64_t>() + m["per_core"]["activations_bytes"].get<std::uint64_t>());
  BOOST_TEST(m["hbm_capacity_bytes"].get<std::uint64_t>() == 8ull << 30);
  BOOST_TEST(m["oom"] == false);
  const json config = json::parse(read_file(run->out() + "/effective_config.json"));
  BOOST_TEST(config["hw"]["slice"]["topology"] == "2x2");
  BOOST_TEST(config["workload"]["training"]["global_batch"] == 1024);
}

// Issue 37: every run says how far to trust its numbers: the public points of its kind and their
// recorded errors (bench/validate.py --record), the nearest kind's when none is exactly its, or
// that there is no public measurement of it.
BOOST_AUTO_TEST_CASE(every_run_says_how_far_to_trust_its_numbers) {
  const json set = read_json(public_validation_set_path());
  // Independently of the band's code: the recorded points of a kind and their mean error as
  // predictions (leave-one-source-out).
  auto recorded = [&](const std::string& prefix, bool exact) {
    std::vector<double> all;
    for (const auto& [id, r] : set["recorded_points"].items()) {
      const std::string kind = r["kind"];
      if (exact ? kind != prefix : kind.rfind(prefix, 0) != 0) continue;
      all.push_back(std::fabs(r["loso_error_pct"].get<double>()));
    }
    double mean = 0;
    for (double e : all) mean += e / static_cast<double>(all.size());
    return std::make_pair(all.size(), mean);
  };
  // The default example: no public measurement of an MLP on v2.
  const auto none = run_example("--trace none");
  BOOST_TEST(none->summary["validation"]["kind"] == "tpu_v2 other training");
  BOOST_TEST(none->summary["validation"]["match"] == "none");
  BOOST_TEST(none->summary["validation"]["points"] == 0);
  BOOST_TEST(contains(none->result.out, "  validation     no public measurement of tpu_v2 other training: this number is unvalidated"),
             none->result.out);
  // MLPerf's ResNet-50 on v4: the v4 ResNet points of the public set.
  const auto resnet = run_example("--trace none --hw tpu_v4 --set workload.training.steps=1 --set workload.training.per_replica_batch=8",
                                  source_path("workloads/examples/resnet50_mlperf.json"));
  const json& band = resnet->summary["validation"];
  BOOST_TEST(band["kind"] == "tpu_v4 convolutional training");
  BOOST_TEST(band["match"] == "exact");
  const auto [points, mean] = recorded("tpu_v4 convolutional training", true);
  BOOST_TEST(points >= 3u);
  BOOST_TEST(band["points"] == points);
  BOOST_TEST(band["mean_abs_error_pct"].get<double>() == std::round(mean * 10) / 10);
  BOOST_TEST(contains(read_file(resnet->out() + "/report.html"), "how far to trust it"));
  // A layout the set lacks: the same generation and family's points, said to be other layouts.
  const ValidationBand nearest = validation_band("tpu_v5p transformer training", public_validation_set_path());
  BOOST_TEST(nearest.match == "nearest");
  BOOST_TEST(nearest.points == recorded("tpu_v5p transformer training", false).first);
  BOOST_TEST(contains(nearest.text, "of tpu_v5p transformer training (other layouts)"));
  BOOST_TEST(!contains(nearest.text, "DCN"));
  // Several slices: the set's single-slice points, and the DCN said to be unvalidated.
  const ValidationBand multislice = validation_band("tpu_v5p transformer training, FSDP, multislice", public_validation_set_path());
  BOOST_TEST(multislice.match == "nearest");
  BOOST_TEST(contains(multislice.text, "none over several slices: the DCN stage is unvalidated"));
  // A set that cannot be read is said to be.
  BOOST_TEST(validation_band("tpu_v4 convolutional training", "/nonexistent/public_set.json").match == "none");
}

// A point fitted on its own source quotes the error it has as a prediction, not the fit's.
BOOST_AUTO_TEST_CASE(the_band_quotes_errors_with_each_sources_own_fits_taken_out) {
  TempDir dir;
  const std::string path = dir.write("set.json", R"({"recorded_points": {
    "fit": {"kind": "tpu_v3 convolutional training", "error_pct": 1.0, "loso_error_pct": -9.0},
    "held": {"kind": "tpu_v3 convolutional training", "error_pct": 3.0, "loso_error_pct": 3.0}}})");
  const ValidationBand band = validation_band("tpu_v3 convolutional training", path);
  BOOST_TEST(band.points == 2u);
  BOOST_TEST(*band.mean_abs_error_pct == 6.0);
  BOOST_TEST(*band.worst_abs_error_pct == 9.0);
  BOOST_TEST(contains(band.text, "mean |error| 6.0%, worst 9.0%, each predicted without its own source's fits"));
}

BOOST_AUTO_TEST_CASE(trace_is_structurally_valid) {
  const auto run = run_example("");
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  std::set<std::int64_t> named_pids;
  std::set<std::pair<std::int64_t, std::int64_t>> named_tids;
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<std::pair<std::int64_t, std::int64_t>>> slices;
  std::size_t x_events = 0;
  for (const auto& e : trace["traceEvents"]) {
    BOOST_REQUIRE(e.contains("name") && e["name"].is_string());
    BOOST_REQUIRE(e.contains("ph") && e.contains("pid") && e.contains("tid"));
    const auto key = std::make_pair(e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>());
    if (e["ph"] == "M") {
      if (e["name"] == "process_name") named_pids.insert(key.first);
      if (e["name"] == "thread_name") named_tids.insert(key);
      continue;
    }
    if (e["ph"] == "C") {  // counters: a value at a time, on the chip's process
      BOOST_REQUIRE(e["ts"].is_number() && e["args"].is_object());
      continue;
    }
    if (e["ph"] == "s" || e["ph"] == "f") {  // flow arrows, checked in their own test
      BOOST_REQUIRE(e["ts"].is_number() && e.contains("id"));
      continue;
    }
    BOOST_REQUIRE(e["ph"] == "X");
    ++x_events;
    BOOST_REQUIRE(e["ts"].is_number() && e["dur"].is_number());
    BOOST_REQUIRE(e["args"].contains("step"));
    BOOST_REQUIRE(e["args"].contains("cycles") || e["args"].contains("dur_ps"));
    slices[key].emplace_back(to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]));
  }
  BOOST_TEST(x_events > 100u);
  BOOST_TEST(named_pids.count(1000000) == 1u);  // the host
  for (std::int64_t chip = 1; chip <= 4; ++chip) BOOST_TEST(named_pids.count(chip) == 1u);
  for (auto& [track, spans] : slices) {
    BOOST_TEST_CONTEXT("pid " << track.first << " tid " << track.second) {
      BOOST_TEST(named_pids.count(track.first) == 1u);
      BOOST_TEST(named_tids.count(track) == 1u);
      std::sort(spans.begin(), spans.end());
      for (std::size_t i = 1; i < spans.size(); ++i) BOOST_TEST(spans[i - 1].second <= spans[i].first);
    }
  }
  BOOST_TEST(trace["otherData"]["workload"] == "mlp_mnist");
}

BOOST_AUTO_TEST_CASE(doubling_the_per_core_batch_changes_mxu_time_as_the_systolic_model_predicts) {
  const auto base = run_example("--trace tiles");  // every MXU transaction in the trace
  const auto doubled = run_example("--trace tiles --set workload.training.global_batch=2048");
  BOOST_TEST(doubled->summary["per_core_batch"] == 256);
  const std::uint32_t last = 7;  // the example simulates 8 steps
  const auto at_128 = traced_mxu_cycles(json::parse(read_file(base->out() + "/trace.json")), last);
  const auto at_256 = traced_mxu_cycles(json::parse(read_file(doubled->out() + "/trace.json")), last);
  BOOST_TEST(at_128 == predicted_mxu_cycles(1024));
  BOOST_TEST(at_256 == predicted_mxu_cycles(2048));
  // Weight loads and pipeline fill are per tile, not per row: twice the rows cost less than twice the time.
  BOOST_TEST(at_256 > at_128);
  BOOST_TEST(at_256 < 2 * at_128);
  BOOST_TEST(doubled->summary["breakdown"]["compute_s"].get<double>() > base->summary["breakdown"]["compute_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(a_step_faster_than_a_launch_waits_for_the_host_to_launch_it) {
  // The example's device step is about 40 us. Launched once per step, one launch every 200 us,
  // every step waits for its launch; launched once for the whole run, only the first does.
  const std::string slow_host = "--trace none --set hw.host.launch_overhead_us=200 --set workload.input_pipeline.host_samples_per_s=0"
                                " --set hw.host.pcie_bw_gbps=10000";
  const auto every_step = run_example(slow_host + " --set workload.training.steps_per_execution=1");
  const auto once = run_example(slow_host + " --set workload.training.steps_per_execution=1000");
  BOOST_TEST(to_ns(json(every_step->summary["step_time_s"].get<double>() * 1e6)) == 200000);
  BOOST_TEST(every_step->summary["breakdown"]["idle_s"].get<double>() > 0.7 * 200e-6);
  BOOST_TEST(once->summary["step_time_s"].get<double>() < 60e-6);
  BOOST_TEST(once->summary["first_step_time_s"].get<double>() > 200e-6);
  BOOST_TEST(once->summary["first_step_time_s"].get<double>() < 200e-6 + 2 * once->summary["step_time_s"].get<double>());
}

// Fp8 pays only where the MXU runs it faster than bfloat16: twice the rate on TPU7x, the same
// on v6e, where its scales passes are a cost with nothing to set against it. (The samples are
// shipped small: at their full 8 MiB the step would wait for the host's PCIe link.)
BOOST_AUTO_TEST_CASE(fp8_pays_where_the_mxu_runs_it_faster) {
  tpusim::test::TempDir dir;
  const std::string wide = dir.write("wide_mlp.json", R"({"name": "wide_mlp",
    "model": {"input_shape": [512, 8192], "input_dtype": "bfloat16",
      "layers": [{"type": "dense", "units": 8192, "activation": "gelu"}, {"type": "dense", "units": 8192},
                 {"type": "dense", "units": 10}],
      "loss": "sparse_categorical_crossentropy"},
    "training": {"per_replica_batch": 32, "precision": "mixed_bfloat16", "optimizer": {"name": "adam"}, "steps": 2},
    "input_pipeline": {"bytes_per_sample": 1024}})");
  const auto step_s = [&](const std::string& hw, const std::string& quantization) {
    const auto run = run_example("--trace none --hw " + hw + " --set workload.training.quantization=" + quantization, wide);
    if (quantization == "fp8") {
      BOOST_TEST(run->summary["quantization"] == "fp8");
      BOOST_TEST(contains(run->result.out, "of the bfloat16 peak (fp8 matmuls run at the MXU's fp8 rate"), run->result.out);
    }
    return run->summary["step_time_s"].get<double>();
  };
  // Faster on TPU7x, by less than the halved matmuls alone would make it.
  const double v7_fp8 = step_s("tpu_v7 --topology 2x2x1", "fp8"), v7_bf16 = step_s("tpu_v7 --topology 2x2x1", "none");
  BOOST_TEST(v7_fp8 < v7_bf16);
  BOOST_TEST(v7_fp8 > 0.5 * v7_bf16);
  BOOST_TEST(step_s("tpu_v6e --topology 2x2", "fp8") > step_s("tpu_v6e --topology 2x2", "none"));
}

// MFU is against the bfloat16 peak; int8 matmuls run at up to twice it, so an int8 step says
// which peak it is against rather than leave a figure near or past 100% unexplained. What int8
// buys depends on the matmuls' width: AQT's passes (scales, the quantized right operand) cost
// per element what the MXU saves per element times the other dimension. On an MLP 8192 wide
// int8 is faster than bfloat16, and faster still with its weight gradients quantized too; on
// GPT-2 small (768 wide) quantizing the weight gradients costs more than it saves.
BOOST_AUTO_TEST_CASE(an_int8_step_says_its_mfu_is_against_the_bfloat16_peak_and_pays_on_wide_matmuls) {
  tpusim::test::TempDir dir;
  const std::string wide = dir.write("wide_mlp.json", R"({"name": "wide_mlp",
    "model": {"input_shape": [512, 8192], "input_dtype": "bfloat16",
      "layers": [{"type": "dense", "units": 8192, "activation": "gelu"}, {"type": "dense", "units": 8192},
                 {"type": "dense", "units": 8192, "activation": "gelu"}, {"type": "dense", "units": 10}],
      "loss": "sparse_categorical_crossentropy"},
    "training": {"per_replica_batch": 32, "precision": "mixed_bfloat16", "optimizer": {"name": "adam"}, "steps": 2}})");
  const std::string common = "--trace none --hw tpu_v5p --topology 2x2x1";
  const auto mfu = [&](const std::string& quantization, const std::string& workload) {
    const auto run = run_example(common + " --set workload.training.quantization=" + quantization, workload);
    if (quantization == "none") {
      BOOST_TEST(!run->summary.contains("quantization"));
      BOOST_TEST(!contains(run->result.out, "of the bfloat16 peak"));
    } else {
      BOOST_TEST(run->summary["quantization"] == quantization);
      BOOST_TEST(contains(run->result.out, "of the bfloat16 peak (int8 matmuls run at up to twice it)"), run->result.out);
    }
    return run->summary["mfu"].get<double>();
  };
  const double bf16 = mfu("none", wide), int8 = mfu("int8", wide), partial = mfu("int8_except_weight_gradients", wide);
  BOOST_TEST(int8 > partial);
  BOOST_TEST(partial > bf16);
  const std::string gpt2 = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  BOOST_TEST(mfu("int8", gpt2) < mfu("int8_except_weight_gradients", gpt2));
}

BOOST_AUTO_TEST_CASE(an_evaluation_every_few_steps_costs_its_forward_passes_and_host_time) {
  // MLPerf times blocks of training that each end with an evaluation; the throughput with
  // evaluation is the block's samples over its length, and the training step is untouched.
  const std::string eval = "--trace none --set workload.training.eval.examples=3000 --set workload.training.eval.every_steps=10";
  const auto plain = run_example("--trace none");
  const auto quick = run_example(eval);
  const auto slow = run_example(eval + " --set workload.training.eval.host_overhead_s=0.001");
  const json& s = quick->summary;
  const double step_s = s["step_time_s"].get<double>();
  BOOST_TEST(step_s == plain->summary["step_time_s"].get<double>());
  BOOST_TEST(!plain->summary.contains("samples_per_s_with_eval"));
  // 3000 examples are 3 batches of the global 1024, each a forward pass, less than a step; twice
  // the examples are twice the batches.
  const double device_s = s["eval"]["device_time_s"].get<double>();
  BOOST_TEST(device_s > 0.0);
  BOOST_TEST(device_s < 3 * step_s);
  const auto twice = run_example(eval + " --set workload.training.eval.examples=6000");
  BOOST_TEST(twice->summary["eval"]["device_time_s"].get<double>() == 2 * device_s, boost::test_tools::tolerance(1e-12));
  const double batch = s["global_batch"].get<double>();
  BOOST_TEST(s["samples_per_s_with_eval"].get<double>() == 10 * batch / (10 * step_s + device_s), boost::test_tools::tolerance(1e-12));
  BOOST_TEST(s["samples_per_s_per_chip_with_eval"].get<double>() * s["chips"].get<double>() == s["samples_per_s_with_eval"].get<double>(),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(slow->summary["eval"]["time_per_eval_s"].get<double>() == device_s + 0.001, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(slow->summary["samples_per_s_with_eval"].get<double>() < s["samples_per_s_with_eval"].get<double>());
  BOOST_TEST(quick->result.out.find("  with eval ") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_run_whose_last_two_steps_differ_is_not_called_steady) {
  // The summary's step is the last; it is steady only when the one before took the same within
  // 1%. Whatever the pipeline's dynamics, the flag, the step-time line and the warning must say
  // what the steps' own ends in the trace say, over short and long runs.
  for (int steps : {3, 5, 8, 12}) {
    const auto run = run_example("--set workload.training.steps=" + std::to_string(steps));
    const json trace = json::parse(read_file(run->out() + "/trace.json"));
    std::map<std::pair<int, int>, std::string> track_names;
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "M" && e["name"] == "thread_name")
        track_names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
    std::map<int, double> end_us;  // per step, the last core's end
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const std::string& track = track_names[{e["pid"].get<int>(), e["tid"].get<int>()}];
      if (track.size() < 6 || track.compare(track.size() - 6, 6, ".steps") != 0) continue;
      double& end = end_us[e["args"]["step"].get<int>()];
      end = std::max(end, e["ts"].get<double>() + e["dur"].get<double>());
    }
    BOOST_TEST_CONTEXT(steps << " steps") {
      BOOST_REQUIRE(end_us.size() == static_cast<std::size_t>(steps));
      const double last = end_us[steps - 1] - end_us[steps - 2], before = end_us[steps - 2] - end_us[steps - 3];
      // The trace keeps nanoseconds, the summary picoseconds.
      BOOST_TEST(last * 1e-6 == run->summary["step_time_s"].get<double>(), boost::test_tools::tolerance(1e-4));
      const bool settled = std::abs(last - before) <= 0.01 * last;
      BOOST_TEST(run->summary["steady_state"].get<bool>() == settled);
      BOOST_TEST(contains(run->result.out, "not yet steady") == !settled);
      BOOST_TEST(contains(run->result.out, "(steady state;") == settled);
    }
  }
}

BOOST_AUTO_TEST_CASE(adding_chips_adds_all_reduce_traffic_over_ici) {
  std::map<std::string, std::uint64_t> ici_bytes;
  for (const std::string topology : {"1x2", "2x2", "4x4"}) {
    const std::uint64_t chips = topology == "1x2" ? 2 : topology == "2x2" ? 4 : 16;
    const auto run = run_example("--topology " + topology + " --set workload.training.global_batch=" +
                                 std::to_string(256 * chips) + " --trace none");
    ici_bytes[topology] = run->summary["traffic_per_step"]["ici_bytes"].get<std::uint64_t>();

    // Every ring step of every chip's schedule sends one shard each way it sends in; a shard loads
    // every link of its route. Gradients: fp32, one all-reduce per layer.
    const Torus torus(parse_topology(topology), std::vector<bool>(2, false));  // v2 wraps only 16-chip axes
    std::uint64_t expected = 0;
    for (std::uint64_t params : {784u * 128u + 128u, 128u * 10u + 10u}) {
      CollectiveSpec spec;
      spec.bytes = params * 4;
      for (std::uint32_t chip = 0; chip < torus.chip_count(); ++chip)
        for (const auto& part : plan_collective(torus, chip, spec).parts)
          for (const auto& pass : part.passes) {
            const std::size_t p = pass.ring.size();
            const std::uint32_t neighbour[2] = {pass.ring[(pass.position + 1) % p], pass.ring[(pass.position + p - 1) % p]};
            for (std::uint32_t dir = 0; dir < 2; ++dir)
              for (std::uint32_t s = 0; s < pass.steps; ++s)
                if (ring_sends(pass, dir, s)) expected += pass.shard_bytes * torus.route(chip, neighbour[dir]).size();
          }
    }
    BOOST_TEST(ici_bytes[topology] == expected, topology);
  }
  BOOST_TEST(ici_bytes["2x2"] > ici_bytes["1x2"]);
  BOOST_TEST(ici_bytes["4x4"] > ici_bytes["2x2"]);
}

BOOST_AUTO_TEST_CASE(same_inputs_give_byte_identical_outputs) {
  const auto a = run_example("");
  const auto b = run_example("");
  for (const char* f : {"summary.json", "summary.csv", "trace.json", "effective_config.json"})
    BOOST_TEST(read_file(a->out() + "/" + f) == read_file(b->out() + "/" + f), f);
}

// The report, the sweep and `tpusim run`'s text read a summary back through the one schema that
// wrote it (traces/summary.hpp): what it reads must be all that was written.
BOOST_AUTO_TEST_CASE(a_summary_reads_back_as_it_was_written) {
  const std::string figures = " --trace none --set workload.training.dataset_examples=60000"
                              " --set workload.training.eval.examples=10000 --set workload.training.eval.every_steps=100"
                              " --set workload.training.goodput.failures_per_chip_hour=0.001"
                              " --set workload.training.goodput.checkpoint_storage_gbps_per_host=1";
  for (const std::string& args : {figures, figures + " --set hw.hbm.capacity_bytes=2097152",
                                  std::string(" --trace none --topology 4x4 --set 'hw.slow_chips=[{\"chip\":5,\"core_freq_scale\":0.5}]'"),
                                  std::string(" --trace none --set workload.input_pipeline.batch_jitter_mean_s=0.0001")}) {
    const auto run = run_example(args);
    const std::string written = read_file(run->out() + "/summary.json");
    const RunSummary summary = run_summary_from_json(nlohmann::ordered_json::parse(written));
    BOOST_TEST(to_json(summary).dump(2) + "\n" == written, args);
    BOOST_TEST(summary.ran() == (summary.status == "ok"), args);
  }
}

// Hosts that now and then prepare a batch late (workload.input_pipeline.batch_jitter_mean_s, an
// exponentially distributed delay per host and batch) give synchronous training its tail: every
// step waits for the last host's batch.
BOOST_AUTO_TEST_CASE(batch_jitter_gives_synchronous_steps_their_tail) {
  const double mean_jitter_s = 0.01;  // against a step of about 50 us: the hosts set the pace
  const std::string jittered = " --trace none --set workload.training.steps=201 --set workload.input_pipeline.prefetch_batches=1"
                               " --set workload.input_pipeline.batch_jitter_mean_s=" + std::to_string(mean_jitter_s);
  const auto one_host = run_example(jittered + " --set hw.host.chips_per_host=4");
  const auto four_hosts = run_example(jittered + " --set hw.host.chips_per_host=1");
  const json& one = one_host->summary["step_times"];
  const json& four = four_hosts->summary["step_times"];
  BOOST_REQUIRE(one.is_object() && four.is_object());
  BOOST_TEST(one["steps"] == 200);
  // One host: each step lasts its draw. 200 draws' mean lies within three standard errors
  // (3 x 10 ms / sqrt(200) = 2.1 ms) of 10 ms.
  BOOST_TEST(std::abs(one["mean_s"].get<double>() - mean_jitter_s) < 3 * mean_jitter_s / std::sqrt(200.0));
  // Four hosts: each step waits for the last of four batches, though a host whose batch came
  // early starts its next one sooner. The mean lies above one host's and below the expected
  // maximum of four independent draws, 10 ms x (1 + 1/2 + 1/3 + 1/4).
  const double harmonic_4 = 1 + 1.0 / 2 + 1.0 / 3 + 1.0 / 4;
  BOOST_TEST(four["mean_s"].get<double>() > 1.2 * one["mean_s"].get<double>());
  BOOST_TEST(four["mean_s"].get<double>() < mean_jitter_s * harmonic_4);
  BOOST_TEST(four["p50_s"].get<double>() <= four["p90_s"].get<double>());
  BOOST_TEST(four["p90_s"].get<double>() <= four["p99_s"].get<double>());
  BOOST_TEST(four["p99_s"].get<double>() <= four["max_s"].get<double>());
  // The figures are of the mean step; every host draws its own, so every chip is simulated.
  BOOST_TEST(four_hosts->summary["step_time_s"] == four["mean_s"]);
  BOOST_TEST(four_hosts->summary["simulation"]["mode"] == "all_chips");
  BOOST_TEST(contains(four_hosts->result.out, "step times     mean"));
  // The same seed draws the same; another draws others.
  BOOST_TEST(run_example(jittered + " --set hw.host.chips_per_host=1")->summary == four_hosts->summary);
  const auto reseeded = run_example(jittered + " --set hw.host.chips_per_host=1 --set workload.input_pipeline.jitter_seed=2");
  BOOST_TEST(reseeded->summary["step_times"]["p99_s"] != four["p99_s"]);
  // A second batch prefetched hides a jitter of a fifth of the step.
  const std::string light = " --trace none --set workload.training.steps=201 --set hw.host.chips_per_host=1";
  const auto steady = run_example(light);
  const auto hidden = run_example(light + " --set workload.input_pipeline.batch_jitter_mean_s=0.00001");
  const double steady_s = steady->summary["step_time_s"].get<double>();
  BOOST_TEST(!steady->summary.contains("step_times"));  // no jitter, no distribution
  BOOST_TEST(std::abs(hidden->summary["step_times"]["p50_s"].get<double>() - steady_s) < 0.001 * steady_s);
  BOOST_TEST(std::abs(hidden->summary["step_times"]["mean_s"].get<double>() - steady_s) < 0.01 * steady_s);
  // Several slices are simulated as one, which hosts drawing their own cannot be.
  const CommandResult slices = run_tpusim("run '" + example_workload() + "' --hw tpu_v5e --topology 2x2 --slices 2 -o '" +
                                          one_host->dir.path("slices") + "'" + jittered);
  BOOST_TEST(slices.exit_code == 2);
  BOOST_TEST(contains(slices.err, "workload.input_pipeline.batch_jitter_mean_s"), slices.err);
}

BOOST_AUTO_TEST_CASE(a_step_that_does_not_fit_hbm_is_reported_as_oom_without_a_step_time) {
  const auto run = run_example("--set hw.hbm.capacity_bytes=2097152 --trace none");
  BOOST_TEST(run->summary["status"] == "oom");
  BOOST_TEST(run->summary["memory"]["oom"] == true);
  BOOST_TEST(run->summary["step_time_s"].is_null());
  BOOST_TEST(!fs::exists(run->out() + "/trace.json"));
  BOOST_TEST(run->result.out.find("out of memory") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(out_of_memory_names_the_largest_batch_that_fits) {
  const std::string small_hbm = "--set hw.hbm.capacity_bytes=16777216 --trace none";  // 8 MiB per core
  const auto oom = run_example(small_hbm + " --set workload.training.global_batch=16384");
  BOOST_REQUIRE(oom->summary["status"] == "oom");
  const std::uint64_t largest = oom->summary["memory"]["largest_per_core_batch"].get<std::uint64_t>();
  BOOST_TEST(largest > 0u);
  BOOST_TEST(largest < 2048u);
  BOOST_TEST(oom->summary["warnings"][0].get<std::string>().find(fmt::format("largest batch that fits is {} per core", largest)) !=
             std::string::npos);
  // Exactly that batch fits; one sample more does not.
  const auto fits = run_example(small_hbm + " --set workload.training.global_batch=" + std::to_string(8 * largest));
  BOOST_TEST(fits->summary["status"] == "ok");
  const auto over = run_example(small_hbm + " --set workload.training.global_batch=" + std::to_string(8 * (largest + 1)));
  BOOST_TEST(over->summary["status"] == "oom");
}

BOOST_AUTO_TEST_CASE(trace_levels_filters_and_compression) {
  auto kinds_in = [](const std::string& path) {
    std::set<std::string> cats;
    const json trace = json::parse(read_file(path));  // kept alive: the loop walks into it
    for (const auto& e : trace["traceEvents"])
      if (e["ph"] == "X") cats.insert(e["cat"].get<std::string>());
    return cats;
  };
  const auto steps = run_example("--trace steps");
  BOOST_TEST((kinds_in(steps->out() + "/trace.json") == std::set<std::string>{"steps"}));  // the host's slices are empty
  const auto ops = run_example("--trace ops");
  const auto op_kinds = kinds_in(ops->out() + "/trace.json");
  BOOST_TEST(op_kinds.count("op") == 1u);
  BOOST_TEST(op_kinds.count("mxu") == 0u);  // per-transaction units only at tiles
  const auto tiles = run_example("--trace tiles --trace-units mxu,vpu");
  BOOST_TEST((kinds_in(tiles->out() + "/trace.json") == std::set<std::string>{"mxu", "vpu"}));
  // A window keeps only the slices that overlap it.
  const auto window = run_example("--trace ops --trace-window 100:120");
  const json windowed = json::parse(read_file(window->out() + "/trace.json"));
  for (const auto& e : windowed["traceEvents"])
    if (e["ph"] == "X") {
      BOOST_TEST(e["ts"].get<double>() < 120.0);
      BOOST_TEST(e["ts"].get<double>() + e["dur"].get<double>() > 100.0);
    }
  const auto gz = run_example("--trace-gzip");
  BOOST_TEST(fs::exists(gz->out() + "/trace.json.gz"));
  BOOST_TEST(!fs::exists(gz->out() + "/trace.json"));
  const std::string unpacked = gz->dir.path("unpacked.json");
  BOOST_REQUIRE(std::system(("gzip -dc '" + gz->out() + "/trace.json.gz' > '" + unpacked + "'").c_str()) == 0);
  BOOST_TEST(read_file(unpacked) == read_file(ops->out() + "/trace.json"));  // the same trace, compressed
  const CommandResult bad = run_tpusim("run '" + example_workload() + "' -o /tmp/never --trace-units mxus");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("unknown kind \"mxus\"") != std::string::npos);
}

namespace {

// Chip processes (pid = chip + 1) with slices or counters, and host processes, in a trace.
std::pair<std::set<std::int64_t>, std::set<std::int64_t>> processes_in(const std::string& path) {
  std::set<std::int64_t> chips, hosts;
  const json trace = json::parse(read_file(path));
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" && e["ph"] != "C") continue;
    const std::int64_t pid = e["pid"].get<std::int64_t>();
    (pid >= 1000000 ? hosts : chips).insert(pid >= 1000000 ? pid - 1000000 : pid - 1);
  }
  return {chips, hosts};
}

}  // namespace

BOOST_AUTO_TEST_CASE(trace_chips_keep_the_chosen_chips_and_large_slices_default_to_sixteen) {
  const auto chosen = run_example("--trace-chips 1,3");
  BOOST_TEST((processes_in(chosen->out() + "/trace.json").first == std::set<std::int64_t>{1, 3}));
  BOOST_TEST(chosen->result.out.find("trace          chips 1,3 of 4") != std::string::npos);
  // The same simulation whatever is traced.
  const auto all = run_example("");
  BOOST_TEST(chosen->summary == all->summary);
  BOOST_TEST(all->result.out.find("trace          chips") == std::string::npos);  // every chip: nothing to say

  // 32 chips of 4 per host: chips 0-15 and the four hosts that serve them, unless asked for all
  // (every chip simulated: the line of 8 would fold by its mirror onto chips 0-15).
  const std::string large = "--topology 4x8 --all-chips --set workload.training.steps=1 --set workload.training.global_batch=4096";
  const auto by_default = run_example(large);
  const auto [chips, hosts] = processes_in(by_default->out() + "/trace.json");
  BOOST_TEST(chips.size() == 16u);
  BOOST_TEST(*chips.rbegin() == 15);
  BOOST_TEST((hosts == std::set<std::int64_t>{0, 1, 2, 3}));
  BOOST_TEST(by_default->result.out.find("trace          chips 0-15 of 32 (--trace-chips all for every chip)") != std::string::npos);
  BOOST_TEST(json::parse(read_file(by_default->out() + "/trace.json"))["otherData"]["chips"] == "0-15");
  const auto every = run_example(large + " --trace-chips all");
  BOOST_TEST(processes_in(every->out() + "/trace.json").first.size() == 32u);

  for (const char* bad : {"4", "2-1", "x", "1-2-3", "0,"}) {
    const std::string out = chosen->dir.path(std::string("bad") + bad);
    const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + out + "' --trace-chips '" + bad + "'");
    BOOST_TEST(r.exit_code == 2, bad);
    BOOST_TEST(r.err.find(std::string("--trace-chips ") + bad + ":") != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(out), bad);
  }
}

BOOST_AUTO_TEST_CASE(a_folded_slice_traces_what_it_says_it_traces) {
  // On a symmetric slice a few chips stand for the rest: the trace holds those it simulates, and
  // says so; `--trace-chips all` asks for every chip's tracks, so every chip is simulated.
  const std::string folded = "--hw tpu_v4 --topology 4x4x4 --set workload.training.steps=2";
  const auto by_default = run_example(folded);
  BOOST_TEST(by_default->summary["simulation"]["mode"] == "representatives");
  const json trace = json::parse(read_file(by_default->out() + "/trace.json"));
  const auto chips = processes_in(by_default->out() + "/trace.json").first;
  std::string listed = trace["otherData"]["chips"].get<std::string>();
  BOOST_TEST(listed == fmt::format("{}-{}", *chips.begin(), *chips.rbegin()));
  BOOST_TEST(chips.size() < 64u);
  const auto every = run_example(folded + " --trace-chips all");
  BOOST_TEST(every->summary["simulation"]["mode"] == "all_chips");
  BOOST_TEST(processes_in(every->out() + "/trace.json").first.size() == 64u);
  BOOST_TEST(json::parse(read_file(every->out() + "/trace.json"))["otherData"]["chips"] == "all");
  BOOST_TEST(every->summary["step_time_s"] == by_default->summary["step_time_s"]);
}

BOOST_AUTO_TEST_CASE(bandwidth_counters_stay_within_the_hardware) {
  const auto run = run_example("--trace ops");
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  std::map<std::pair<std::int64_t, std::string>, double> last_ts;
  std::set<std::int64_t> chips_with_hbm;
  std::map<std::int64_t, std::size_t> link_counter_samples;  // per chip
  std::size_t counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "C" || !e["args"].contains("GB/s")) continue;  // bandwidth counters only
    ++counters;
    const auto key = std::make_pair(e["pid"].get<std::int64_t>(), e["name"].get<std::string>());
    const double gbps = e["args"]["GB/s"].get<double>(), ts = e["ts"].get<double>();
    BOOST_TEST(gbps >= 0);
    if (key.second == "HBM GB/s") {
      BOOST_TEST(gbps <= 700.0 * 1.0001);  // tpu_v2: 700 GB/s per chip
      chips_with_hbm.insert(key.first);
    }
    if (key.second.rfind("ici.", 0) == 0) {
      BOOST_TEST(gbps <= 62.0 * 1.0001);  // one link of 62 GB/s
      ++link_counter_samples[key.first];
    }
    if (last_ts.count(key)) BOOST_TEST(ts > last_ts[key]);
    last_ts[key] = ts;
  }
  BOOST_TEST(counters > 20u);
  BOOST_TEST(chips_with_hbm.size() == 4u);
  BOOST_TEST(link_counter_samples.size() == 4u);  // every chip's links carry the all-reduce
}

// A long run's bandwidth counters coarsen (10 us, doubled as needed) rather than growing to
// millions of samples, and every byte is still in them: one second of HBM transfers, 1 MB per
// 50 us, is 100,000 intervals of 10 us and comes out as 12,500 of 80 us.
BOOST_AUTO_TEST_CASE(long_runs_keep_bandwidth_counters_bounded) {
  TempDir dir;
  const std::string path = dir.path("trace.json");
  double bytes = 0;
  {
    ChromeTraceWriter writer(path);
    UnitInfo hbm;
    hbm.path = "chip0.hbm";
    hbm.kind = UnitKind::Hbm;
    hbm.label = "hbm";
    writer.add_unit(0, hbm);
    for (std::uint64_t t = 0; t < 1'000'000'000'000ull; t += 50'000'000) {
      Activity a;
      a.start_ps = t;
      a.end_ps = t + 40'000'000;
      a.bytes = 1'000'000;
      writer.slice(hbm, a);
      bytes += static_cast<double>(a.bytes);
    }
    writer.close(json::object());
  }
  const json trace = json::parse(read_file(path));
  std::vector<std::pair<double, double>> samples;  // ts in us, GB/s
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "HBM GB/s") samples.emplace_back(e["ts"].get<double>(), e["args"]["GB/s"].get<double>());
  BOOST_REQUIRE(samples.size() > 2u);
  BOOST_TEST(samples.size() <= TraceFilter::kMaxCounterSamples + 1);
  const double interval_us = samples[1].first - samples[0].first;
  BOOST_TEST(interval_us == 80.0, boost::test_tools::tolerance(1e-9));
  double counted = 0;
  for (const auto& [ts, gbps] : samples) counted += gbps * 1e9 * interval_us * 1e-6;
  BOOST_TEST(counted == bytes, boost::test_tools::tolerance(1e-4));
}

BOOST_AUTO_TEST_CASE(collective_pieces_are_arrows_from_a_link_to_the_receiving_chip) {
  const auto run = run_example("--trace ops");
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[std::make_pair(e["pid"].get<std::int64_t>(), e["tid"].get<std::int64_t>())] = e["args"]["name"].get<std::string>();
  std::map<std::int64_t, std::pair<json, json>> flows;  // id -> start, finish
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "s") flows[e["id"].get<std::int64_t>()].first = e;
    if (e["ph"] == "f") flows[e["id"].get<std::int64_t>()].second = e;
  }
  BOOST_TEST(flows.size() > 10u);
  for (const auto& [id, pair] : flows) {
    const auto& [start, finish] = pair;
    BOOST_REQUIRE(!start.is_null());
    BOOST_REQUIRE(!finish.is_null());
    const std::string from = names[std::make_pair(start["pid"].get<std::int64_t>(), start["tid"].get<std::int64_t>())];
    const std::string to = names[std::make_pair(finish["pid"].get<std::int64_t>(), finish["tid"].get<std::int64_t>())];
    BOOST_TEST(from.rfind("ici.", 0) == 0, from);
    BOOST_TEST(to.rfind("collective.part", 0) == 0, to);
    BOOST_TEST(start["pid"] != finish["pid"]);  // across chips
    BOOST_TEST(finish["ts"].get<double>() >= start["ts"].get<double>());
  }
  const CommandResult check = run_tpusim("trace-check '" + run->out() + "/trace.json'");
  BOOST_TEST(check.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(vmem_and_input_buffer_counters_stay_within_capacity_and_drain) {
  const auto run = run_example("--trace ops");
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  const json config = json::parse(read_file(run->out() + "/effective_config.json"));
  const double vmem_mib = config["hw"]["core"]["vmem_bytes"].get<double>() / (1 << 20);
  const double prefetch = config["workload"]["input_pipeline"]["prefetch_batches"].get<double>();
  std::map<std::pair<std::int64_t, std::string>, std::vector<double>> series;  // (pid, counter) -> values in order
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && (e["name"] == "core0 VMEM" || e["name"] == "input buffer"))
      series[{e["pid"].get<std::int64_t>(), e["name"].get<std::string>()}].push_back(e["args"].begin().value().get<double>());
  std::size_t vmem_tracks = 0, buffer_tracks = 0;
  for (const auto& [key, values] : series) {
    const bool vmem = key.second == "core0 VMEM";
    (vmem ? vmem_tracks : buffer_tracks) += 1;
    const double capacity = vmem ? vmem_mib : prefetch;
    BOOST_TEST(*std::max_element(values.begin(), values.end()) <= capacity, key.second);
    BOOST_TEST(*std::max_element(values.begin(), values.end()) > 0.0, key.second);
    BOOST_TEST(*std::min_element(values.begin(), values.end()) >= 0.0, key.second);
    BOOST_TEST(values.back() == 0.0, key.second);  // everything released by the end of the run
  }
  BOOST_TEST(vmem_tracks == 4u);  // one per chip of the 2x2
  BOOST_TEST(buffer_tracks == 1u);
}

BOOST_AUTO_TEST_CASE(trace_none_writes_no_trace) {
  const auto run = run_example("--trace none");
  BOOST_TEST(!fs::exists(run->out() + "/trace.json"));
  BOOST_TEST(fs::exists(run->out() + "/summary.json"));
}

// Issue 18: pcie_bytes was 0 in every run, even input-bound ones where PCIe was the busiest unit.
BOOST_AUTO_TEST_CASE(pcie_traffic_is_the_batch_shipped_to_the_chips) {
  const auto run = run_example("--trace ops");
  const json workload = json::parse(read_file(example_workload()));
  std::uint64_t sample_bytes = 4;  // float32 input
  for (const auto& d : workload["model"]["input_shape"]) sample_bytes *= d.get<std::uint64_t>();
  const std::uint64_t batch = run->summary["global_batch"].get<std::uint64_t>();
  BOOST_TEST(run->summary["traffic_per_step"]["pcie_bytes"].get<std::uint64_t>() == batch * sample_bytes);
  const json trace = json::parse(read_file(run->out() + "/trace.json"));
  const double pcie_gbps = json::parse(run_tpusim("dump-config '" + example_workload() + "'").out)["hw"]["host"]["pcie_bw_gbps"];
  // A host's counter adds up its PCIe links, one per chip it serves.
  std::map<std::int64_t, double> links, peak;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["args"]["name"].get<std::string>().rfind("pcie -> ", 0) == 0)
      links[e["pid"]] += 1;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "PCIe GB/s") peak[e["pid"]] = std::max(peak[e["pid"]], e["args"]["GB/s"].get<double>());
  BOOST_TEST(!peak.empty());
  for (const auto& [pid, gbps] : peak) {
    BOOST_TEST(gbps > 0.5 * pcie_gbps);
    BOOST_TEST(gbps <= links[pid] * pcie_gbps * 1.0001);
  }
}

// Issue 18: with one step, the first step was reported as the steady state ("1 steps").
BOOST_AUTO_TEST_CASE(a_one_step_run_says_its_step_is_the_first_and_warns) {
  const auto one = run_example("--trace none --set workload.training.steps=1");
  BOOST_TEST(one->summary["steady_state"] == false);
  BOOST_TEST(one->summary["step_time_s"] == one->summary["first_step_time_s"]);
  BOOST_TEST(one->summary["warnings"].dump().find("one step simulated") != std::string::npos, one->summary["warnings"].dump());
  BOOST_TEST(one->result.out.find("(the first step: one step was simulated, no steady state)") != std::string::npos, one->result.out);
  BOOST_TEST(one->result.out.find("steady state;") == std::string::npos);
  BOOST_TEST(one->result.out.find(", 1 step\n") != std::string::npos, one->result.out);
  const auto two = run_example("--trace none --set workload.training.steps=2");
  BOOST_TEST(two->summary["steady_state"] == true);
  BOOST_TEST(two->summary["warnings"].dump().find("one step simulated") == std::string::npos);
}

// Issue 18: `tpusim run out/x/effective_config.json` failed ("workload.hw: unknown key"), and the
// command line was not kept.
BOOST_AUTO_TEST_CASE(the_effective_configuration_reruns_as_is_and_command_txt_repeats_the_run) {
  TempDir dir;
  const std::string first = dir.path("first");
  const CommandResult a = run_tpusim("run '" + example_workload() + "' --hw tpu_v4 --topology 2x2x1 --trace none "
                                     "--set workload.training.steps=2 --set 'workload.training.optimizer.name=sgd' -o '" + first + "'");
  BOOST_REQUIRE_MESSAGE(a.exit_code == 0, a.err);
  const std::string config = dir.write("config.json", read_file(first + "/effective_config.json"));
  const CommandResult b = run_tpusim("run '" + config + "' --trace none -o '" + dir.path("again") + "'");
  BOOST_REQUIRE_MESSAGE(b.exit_code == 0, b.err);
  // The same results; only the record of which files were read differs (the rerun read config.json).
  json again = json::parse(read_file(dir.path("again/summary.json"))), was = json::parse(read_file(first + "/summary.json"));
  BOOST_TEST(again["inputs_fnv1a64"].dump().find(config) != std::string::npos, again["inputs_fnv1a64"].dump());
  BOOST_TEST(was["inputs_fnv1a64"].dump().find(example_workload()) != std::string::npos, was["inputs_fnv1a64"].dump());
  again.erase("inputs_fnv1a64");
  was.erase("inputs_fnv1a64");
  BOOST_TEST(again.dump() == was.dump());
  BOOST_TEST(read_file(dir.path("again/effective_config.json")) == read_file(first + "/effective_config.json"));
  const CommandResult dumped = run_tpusim("dump-config '" + config + "'");
  BOOST_TEST(json::parse(dumped.out) == json::parse(read_file(config)));
  // Asked-for hardware replaces the file's; the workload stays.
  const CommandResult other = run_tpusim("run '" + config + "' --hw tpu_v5e --trace none -o '" + dir.path("v5e") + "'");
  BOOST_REQUIRE_MESSAGE(other.exit_code == 0, other.err);
  const json v5e = json::parse(read_file(dir.path("v5e/summary.json")));
  BOOST_TEST(v5e["hw"] == "tpu_v5e");
  BOOST_TEST(v5e["optimizer"] == "sgd");

  // command.txt: where the run ran, then the command; running it again gives the same outputs.
  const std::string command = read_file(first + "/command.txt");
  const std::size_t newline = command.find('\n');
  BOOST_REQUIRE(command.rfind("# run in ", 0) == 0);
  const std::string cwd = command.substr(9, newline - 9);
  const std::string line = command.substr(newline + 1, command.size() - newline - 2);
  BOOST_TEST(line.find(" run " + example_workload() + " --hw tpu_v4 --topology 2x2x1") != std::string::npos, line);
  BOOST_TEST(line.find("-o " + first) != std::string::npos, line);
  const std::string saved = read_file(first + "/summary.json");
  BOOST_REQUIRE(std::system(("cd '" + cwd + "' && " + line + " --force >/dev/null 2>&1").c_str()) == 0);
  BOOST_TEST(read_file(first + "/summary.json") == saved);
  BOOST_TEST(read_file(first + "/command.txt") == command.substr(0, command.size() - 1) + " --force\n");
}

// Issue 18: `--hw v4-32` was refused; the summary says what an accelerator type was taken to mean.
BOOST_AUTO_TEST_CASE(an_accelerator_type_runs_and_the_summary_prints_its_mapping) {
  const auto run = run_example("--hw v4-32 --trace none --set workload.training.steps=2 --set workload.training.global_batch=2048");
  BOOST_TEST(run->summary["hw"] == "tpu_v4");
  BOOST_TEST(run->summary["topology"] == "2x2x4");
  BOOST_TEST(run->summary["chips"] == 16);
  BOOST_TEST(run->summary["accelerator_type"] == "v4-32");
  BOOST_TEST(run->result.out.find("  accelerator    v4-32 = tpu_v4 2x2x4 (16 chips; v4 names count TensorCores, 2 per chip)\n") !=
                 std::string::npos,
             run->result.out);
}

// Issue 18: the README's override examples failed on 8 of the 9 zoo workloads.
BOOST_AUTO_TEST_CASE(the_readme_overrides_work_on_every_zoo_workload) {
  std::size_t workloads = 0;
  for (const auto& entry : fs::directory_iterator(source_path("workloads/examples"))) {
    if (entry.path().extension() != ".json") continue;
    ++workloads;
    const json workload = json::parse(read_file(entry.path().string()));
    const bool per_replica = workload["training"].value("per_replica_batch", 0) > 0;
    for (const std::string set : {"workload.training.global_batch=2048", "hw.hbm.bw_gbps=1000",
                                  "workload.training.precision=mixed_bfloat16", "hw.hbm.capacity_bytes=16GiB"}) {
      BOOST_TEST_CONTEXT(entry.path().filename().string() << " --set " << set) {
        TempDir dir;
        const CommandResult r = run_tpusim("run '" + entry.path().string() + "' --set " + set +
                                           " --set workload.training.steps=2 --trace none -o '" + dir.path("out") + "'");
        BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
        const json summary = json::parse(read_file(dir.path("out/summary.json")));
        if (set.rfind("workload.training.global_batch", 0) == 0) {
          BOOST_TEST(summary["global_batch"] == 2048);
          BOOST_TEST((summary["notes"].size() == 1u) == per_replica, summary["notes"].dump());
          BOOST_TEST((r.out.find("  note: --set workload.training.global_batch=2048 cleared workload.training.per_replica_batch") !=
                      std::string::npos) == per_replica);
        }
      }
    }
  }
  BOOST_TEST(workloads >= 9u);
}

BOOST_AUTO_TEST_CASE(readme_shows_the_real_output_of_the_first_command) {
  const std::string readme = read_file(source_path("README.md"));
  const std::string open = "```\nmlp_mnist on tpu_v2 2x2";
  const auto start = readme.find(open);
  BOOST_REQUIRE(start != std::string::npos);
  const std::string shown = readme.substr(start + 4, readme.find("```", start + 4) - start - 4);
  TempDir dir;
  const std::string cmd = "cd '" + dir.path("") + "' && '" + std::string(TPUSIM_BINARY) + "' run '" + example_workload() +
                          "' -o out/mlp_mnist --force > stdout.txt 2>/dev/null";
  BOOST_REQUIRE(std::system(cmd.c_str()) == 0);
  BOOST_TEST(read_file(dir.path("stdout.txt")) == shown);
}

BOOST_AUTO_TEST_CASE(trace_check_accepts_our_traces_and_names_what_is_wrong_in_others) {
  const auto run = run_example("");
  const CommandResult ok = run_tpusim("trace-check '" + run->out() + "/trace.json'");
  BOOST_TEST(ok.exit_code == 0);
  BOOST_TEST(ok.out.find(": valid:") != std::string::npos);

  TempDir dir;
  const std::string bad = dir.write("bad.json", R"({"traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "chip 0"}},
    {"name": "thread_name", "ph": "M", "pid": 1, "tid": 1, "args": {"name": "mxu"}},
    {"name": "a", "ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 2.0},
    {"name": "b", "ph": "X", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0},
    {"name": "c", "ph": "X", "pid": 1, "tid": 2, "ts": 0.0, "dur": 1.0},
    {"name": "d", "ph": "X", "pid": 2, "tid": 1, "ts": 0.0},
    {"name": "f", "ph": "s", "pid": 1, "tid": 1, "ts": 0.0, "id": 7}]})");
  const CommandResult r = run_tpusim("trace-check '" + bad + "'");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out.find("overlaps another ending at 2000 ns without nesting") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("track pid 1 tid 2 has slices but no thread_name") != std::string::npos);
  BOOST_TEST(r.out.find("a complete event needs a non-negative \"dur\"") != std::string::npos);
  BOOST_TEST(r.out.find("flow 7 has 1 unmatched start(s)") != std::string::npos);
}

// Found by fuzz_trace_check: events of the wrong shape are problems to report, not exceptions.
BOOST_AUTO_TEST_CASE(trace_check_and_summary_take_any_json) {
  TempDir dir;
  const std::string odd = dir.write("odd.json", R"({"traceEvents": [
    {"name": {"not": "a string"}, "ph": "M", "pid": 1, "tid": 0, "args": {"name": 5}},
    {"name": 7, "ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1.0},
    {"name": "far", "ph": "X", "pid": 1, "tid": 1, "ts": 9e300, "dur": 1e300},
    {"name": "c", "ph": "C", "pid": 1, "tid": 1, "ts": 1.0}]})");
  const CommandResult check = run_tpusim("trace-check '" + odd + "'");
  BOOST_TEST(check.exit_code == 1, check.err);
  BOOST_TEST(check.out.find("event 0: \"name\" is not a string") != std::string::npos, check.out);
  BOOST_TEST(check.out.find("event 2: \"ts\" is beyond any trace's time") != std::string::npos, check.out);
  const CommandResult summary = run_tpusim("trace-summary '" + odd + "'");
  BOOST_TEST(summary.exit_code == 0, summary.err);
  const CommandResult overflow = run_tpusim("trace-check '" + dir.write("big.json", "[1e999]") + "'");
  BOOST_TEST(overflow.exit_code == 1);
  BOOST_TEST(overflow.out.find("invalid: not JSON") != std::string::npos, overflow.out);
}

// Found by the second adversarial pass: what trace-check let through, what trace-summary
// summarised silently, and the gzip traces of --trace-gzip, which neither could read.
BOOST_AUTO_TEST_CASE(trace_tools_read_gzip_and_name_every_broken_event) {
  TempDir dir;
  const std::string broken = dir.write("broken.json", R"({"traceEvents": [
    {"name": "x", "ph": "", "pid": 1, "tid": 1, "ts": 0},
    {"name": "y", "ph": "X", "pid": "one", "tid": null, "ts": 0, "dur": 1},
    {"name": "z", "ph": "X", "pid": 1, "tid": 1, "ts": 0, "dur": 1e308},
    {"name": "b", "ph": "B", "pid": 1, "tid": 1, "ts": 0},
    {"name": "e", "ph": "E", "pid": 1, "tid": 2, "ts": 1}]})");
  const CommandResult check = run_tpusim("trace-check '" + broken + "'");
  BOOST_TEST(check.exit_code == 1);
  for (const std::string expected : {"event 0: \"ph\" \"\" is not an event phase of the format", "event 1: \"pid\" is not an integer",
                                     "event 1: \"tid\" is not an integer", "event 2: \"dur\" is beyond any trace's time",
                                     "event 4: an end (E) with no begin (B) open on its track",
                                     "track pid 1 tid 1: 1 begin (B) event(s) never ended"})
    BOOST_TEST(check.out.find(expected) != std::string::npos, expected << " in\n" << check.out);
  const CommandResult summary = run_tpusim("trace-summary '" + broken + "'");
  BOOST_TEST(summary.exit_code == 0);
  BOOST_TEST(summary.err.find("warning: " + broken + ": 6 problem(s)") != std::string::npos, summary.err);
  const CommandResult not_a_trace = run_tpusim("trace-summary '" + dir.write("empty.json", "{}") + "'");
  BOOST_TEST(not_a_trace.exit_code == 2);
  BOOST_TEST(not_a_trace.err.find("not a trace: expected a JSON array of events") != std::string::npos, not_a_trace.err);

  const auto run = run_example("--trace-gzip");
  const std::string gz = run->out() + "/trace.json.gz";
  const CommandResult valid = run_tpusim("trace-check '" + gz + "'");
  BOOST_TEST(valid.exit_code == 0, valid.out);
  BOOST_TEST(valid.out.find(": valid:") != std::string::npos);
  BOOST_TEST(run_tpusim("trace-summary '" + gz + "'").out.find("Busy time per track") != std::string::npos);
  const std::string bytes = read_file(gz);
  const CommandResult cut = run_tpusim("trace-check '" + dir.write("cut.json.gz", bytes.substr(0, bytes.size() / 2)) + "'");
  BOOST_TEST(cut.exit_code == 1);
  BOOST_TEST(cut.out.find("invalid: a corrupt gzip file") != std::string::npos, cut.out);
  std::string flipped = bytes;
  flipped[flipped.size() - 6] = static_cast<char>(~flipped[flipped.size() - 6]);  // the CRC: the JSON itself is whole
  const CommandResult crc = run_tpusim("trace-summary '" + dir.write("crc.json.gz", flipped) + "'");
  BOOST_TEST(crc.exit_code == 2);
  BOOST_TEST(crc.err.find("a corrupt gzip file") != std::string::npos, crc.err);
}

BOOST_AUTO_TEST_CASE(trace_summary_lists_the_ops_and_tracks) {
  const auto run = run_example("--trace tiles");
  const CommandResult r = run_tpusim("trace-summary '" + run->out() + "/trace.json' --top 50");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.out.find("dense/fwd/matmul+bias+relu") != std::string::npos);
  BOOST_TEST(r.out.find("chip 0 / core0.mxu0") != std::string::npos);
}

// Issue 18: "top ops" listed `step 0` and `batch 0` and summed one all-reduce over every track
// that carries it; the track list and the trace's own track order did not follow chip, core, unit.
BOOST_AUTO_TEST_CASE(trace_summary_ranks_ops_per_step_per_core_and_tracks_in_chip_core_unit_order) {
  const auto run = run_example("--trace tiles");
  const std::string path = run->out() + "/trace.json";
  const CommandResult r = run_tpusim("trace-summary '" + path + "' --top 1000");
  BOOST_REQUIRE(r.exit_code == 0);
  const std::size_t ops_at = r.out.find("ops by time per step per core"), tracks_at = r.out.find("Busy time per track");
  BOOST_REQUIRE(ops_at != std::string::npos && tracks_at != std::string::npos);
  const std::string ops = r.out.substr(ops_at, tracks_at - ops_at);
  BOOST_TEST(ops.find("  step 0\n") == std::string::npos, ops);
  BOOST_TEST(ops.find("  batch 0\n") == std::string::npos, ops);

  // Each op's figure, computed from the trace: its time on the cores' op tracks over steps x cores.
  const json trace = json::parse(read_file(path));
  std::map<std::pair<std::int64_t, std::int64_t>, std::string> names;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> order;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
    else if (e["ph"] == "M" && e["name"] == "thread_sort_index") order[{e["pid"], e["tid"]}] = e["args"]["sort_index"];
  std::map<std::string, double> op_us;
  std::set<std::pair<std::int64_t, std::string>> cores;
  std::set<std::int64_t> steps;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string track = names[{e["pid"], e["tid"]}];
    const std::size_t dot = track.find(".ops.");
    if (dot == std::string::npos) continue;
    cores.emplace(e["pid"].get<std::int64_t>(), track.substr(0, dot));
    steps.insert(e["args"]["step"].get<std::int64_t>());
    op_us[e["name"]] += e["dur"].get<double>();
  }
  BOOST_TEST(cores.size() == run->summary["cores"].get<std::size_t>());
  BOOST_TEST(steps.size() == run->summary["steps"].get<std::size_t>());
  const std::string all_reduce = "grads[dense_1..dense]/all-reduce";
  BOOST_REQUIRE(op_us.count(all_reduce));
  const double per_step_per_core_us = op_us[all_reduce] / static_cast<double>(cores.size() * steps.size());
  const std::string row = fmt::format("{:.3f}", per_step_per_core_us);
  const std::size_t line = ops.find(all_reduce + "\n");
  BOOST_REQUIRE(line != std::string::npos);
  const std::string all_reduce_row = ops.substr(ops.rfind('\n', line) + 1, line - ops.rfind('\n', line) - 1);
  BOOST_TEST(all_reduce_row.find(row) != std::string::npos, all_reduce_row << " should show " << row);
  BOOST_TEST(all_reduce_row.find("  1  ") != std::string::npos, all_reduce_row << ": once per step per core");

  // The track list: chips in order, and within a chip each core's tracks together, in core order.
  std::stringstream lines(r.out.substr(tracks_at));
  std::vector<std::pair<int, int>> seen;  // (chip, core; 99 for the chip's shared units)
  for (std::string l; std::getline(lines, l);) {
    int chip = -1, core = 99;
    const std::size_t at = l.find("%  chip ");
    if (at == std::string::npos || std::sscanf(l.c_str() + at + 8, "%d / core%d", &chip, &core) < 1) continue;
    seen.emplace_back(chip, core);
  }
  BOOST_REQUIRE(seen.size() > 8);
  BOOST_TEST(std::is_sorted(seen.begin(), seen.end()));

  // The trace itself: per process, tracks by their sort index run core0's, core1's, then the chip's.
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::string>>> by_pid;
  for (const auto& [track, name] : names) {
    BOOST_REQUIRE(order.count(track));
    by_pid[track.first].emplace_back(order[track], name);
  }
  for (auto& [pid, pid_tracks] : by_pid) {
    auto& tracks = pid_tracks;  // a lambda below reads it: C++17 lambdas cannot capture a structured binding
    std::sort(tracks.begin(), tracks.end());
    int last_core = -1;
    bool shared_seen = false;
    for (const auto& [index, name] : tracks) {
      int core = -1;
      if (std::sscanf(name.c_str(), "core%d.", &core) == 1) {
        BOOST_TEST(!shared_seen, name << " after the chip's shared units");
        BOOST_TEST(core >= last_core, name << " after core" << last_core);
        last_core = core;
      } else if (pid < 1000000) {
        shared_seen = true;
      }
    }
    const auto at = [&](const std::string& name) {
      return std::find_if(tracks.begin(), tracks.end(), [&](const auto& t) { return t.second == name; }) - tracks.begin();
    };
    if (pid < 1000000) {
      BOOST_TEST(at("core0.steps") < at("core0.ops.matmul"));
      BOOST_TEST(at("core0.ops.matmul") < at("core0.mxu0"));
    }
  }
}

BOOST_AUTO_TEST_CASE(an_interrupted_run_closes_every_output_as_valid_partial_results) {
  // BERT-large on 64 v5e chips takes seconds per step: SIGINT arrives part-way through.
  TempDir dir;
  const std::string out = dir.path("out");
  const CommandResult r = run_tpusim_interrupted(
      "run '" + source_path("workloads/examples/bert_large_128.json") + "' --hw tpu_v5e --topology 8x8 " +
          "--set workload.training.steps=20 -o '" + out + "'",
      SIGINT, 2500);
  BOOST_TEST(r.exit_code == 130, r.err);
  const json summary = json::parse(read_file(out + "/summary.json"));
  BOOST_TEST(summary["status"] == "interrupted");
  BOOST_TEST(summary["partial"] == true);
  BOOST_TEST(summary["steps_simulated"].get<std::uint32_t>() < 20u);
  BOOST_TEST(r.out.find("interrupted") != std::string::npos, r.out);
  const CommandResult check = run_tpusim("trace-check '" + out + "/trace.json'");
  BOOST_TEST(check.exit_code == 0, check.out);
  BOOST_TEST(fs::exists(out + "/report.html"));
}

// Cloud TPU multislice (--slices): identical slices hold data-parallel replicas and reduce the
// gradients over the DCN; one slice is simulated for all of them.
BOOST_AUTO_TEST_CASE(several_slices_hold_replicas_and_reduce_their_gradients_over_the_dcn) {
  const std::string per8 = "--hw v5e-8 --set workload.training.global_batch=0 --set workload.training.per_replica_batch=8 ";
  const auto one = run_example(per8);
  const auto four = run_example(per8 + "--slices 4");
  const json& s = four->summary;
  BOOST_TEST(s["slices"] == 4);
  BOOST_TEST(s["chips"] == 32);
  BOOST_TEST(s["accelerator_type"] == "4x v5e-8");
  BOOST_TEST(s["replicas"] == one->summary["replicas"]);
  BOOST_TEST(s["global_batch"].get<std::uint64_t>() == 4 * one->summary["global_batch"].get<std::uint64_t>());
  BOOST_TEST(four->result.out.find("tpu_v5e 4 slices of 2x4 (32 chips, 32 cores, 8 replicas in each)") != std::string::npos,
             four->result.out);
  // Each chip sends 2 (k - 1) / k of its 1/8 share of every gradient bucket over the DCN (up to
  // the rounding of the shares); every slice's chips send as much. Over the ICI the bucket's
  // all-reduce becomes a reduce-scatter before the DCN stage and an all-gather after it.
  const std::uint64_t grad_bytes = one->summary["collectives_per_step"]["data"]["bytes"].get<std::uint64_t>();
  BOOST_TEST(s["collectives_per_step"]["data"]["bytes"].get<std::uint64_t>() == 2 * grad_bytes);
  const double expected = 2.0 * 3 / 4 * static_cast<double>(grad_bytes) / 8;
  const auto sent = s["collectives_per_step"]["dcn"]["sent_bytes_per_chip"].get<std::uint64_t>();
  BOOST_TEST(std::abs(static_cast<double>(sent) - expected) <= 64.0, sent << " vs " << expected);
  BOOST_TEST(s["traffic_per_step"]["dcn_bytes"].get<std::uint64_t>() == sent * 32);
  BOOST_TEST(one->summary["traffic_per_step"]["dcn_bytes"] == 0);
  BOOST_TEST(!one->summary["collectives_per_step"].contains("dcn"));
  BOOST_TEST(s["utilization"]["dcn"].get<double>() > 0.0);
  // The DCN's 3.125 GB/s per chip is slower than anything on the slice: the step waits for it.
  BOOST_TEST(s["step_time_s"].get<double>() > one->summary["step_time_s"].get<double>() + sent / 3.125e9 / 2);
  // The DCN port has its own track in the trace.
  const json trace = read_json(four->out() + "/trace.json");
  bool dcn_track = false;
  for (const json& e : trace["traceEvents"])
    dcn_track = dcn_track || (e["name"] == "thread_name" && e["args"]["name"] == "dcn");
  BOOST_TEST(dcn_track);
  // --slices 1 is the single slice, byte for byte.
  const auto single = run_example(per8 + "--slices 1");
  BOOST_TEST(read_file(single->out() + "/summary.csv") == read_file(one->out() + "/summary.csv"));
}

BOOST_AUTO_TEST_CASE(several_slices_need_a_dcn_and_identical_slices) {
  ConfigRequest request;
  request.workload_path = example_workload();
  request.hw = "tpu_v4";
  request.slices = 2;
  BOOST_TEST(load_error(request).find("hw.dcn.bw_gbps_per_chip: 2 slices need the data-center network between them, and "
                                      "tpu_v4 has no DCN bandwidth published") != std::string::npos, load_error(request));
  request.sets = {"hw.dcn.bw_gbps_per_chip=6.25"};
  BOOST_TEST(load_error(request) == "");
  request.sets.push_back("hw.slow_chip_draw.fraction=0.5");
  BOOST_TEST(load_error(request).find("hw.slice.count: 2 slices are simulated as one, so they must be identical") != std::string::npos,
             load_error(request));
  const CommandResult zero = run_tpusim("run '" + example_workload() + "' --slices 0 -o /nonexistent/out");
  BOOST_TEST(zero.exit_code == 2);
  BOOST_TEST(zero.err.find("--slices") != std::string::npos, zero.err);
}
