// `tpusim sweep`: one row per point in a fixed order whatever -j, nothing lost on failure,
// resume, and the report.
#define BOOST_TEST_MODULE sweep
#include <boost/test/unit_test.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

using namespace tpusim::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

CommandResult sweep(const std::string& args) { return run_tpusim("sweep '" + example_workload() + "' " + args); }

// A sweep of BERT-large points on 64 v5e chips, one at a time, into OUT, that gets SIGTERM
// `delay_ms` after the file READY (under OUT) appears.
CommandResult interrupted_bert_sweep(const std::string& out, const std::string& steps, const std::string& ready, int delay_ms,
                                     int signal = SIGTERM) {
  return run_tpusim_interrupted_after("sweep '" + source_path("workloads/examples/bert_large_128.json") +
                                          "' --hw tpu_v5e --topology 8x8 --vary workload.training.steps=" + steps +
                                          " -j 1 --trace none -o '" + out + "'",
                                      signal, out + "/" + ready, delay_ms);
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_point_is_a_row_in_point_order_whatever_the_parallelism) {
  TempDir dir;
  const std::string varies = " --vary workload.training.global_batch=512,1024,2048 --vary workload.training.precision=float32,mixed_bfloat16";
  const CommandResult one = sweep("-o '" + dir.path("a") + "' -j 1" + varies);
  const CommandResult two = sweep("-o '" + dir.path("b") + "' -j 2" + varies);
  BOOST_REQUIRE_MESSAGE(one.exit_code == 0, one.err);
  BOOST_REQUIRE_MESSAGE(two.exit_code == 0, two.err);
  const std::string csv = read_file(dir.path("a/sweep.csv"));
  BOOST_TEST(csv == read_file(dir.path("b/sweep.csv")));
  const auto rows = lines(csv);
  BOOST_REQUIRE(rows.size() == 7u);  // header + 3 x 2 points
  BOOST_TEST(rows[0].rfind("point,status,reason,vary_workload_training_global_batch,vary_workload_training_precision,", 0) == 0);
  BOOST_TEST(rows[0].find("step_time_s") != std::string::npos);
  BOOST_TEST(rows[0].find("breakdown_compute_s") != std::string::npos);
  BOOST_TEST(rows[1].rfind("000_global_batch=512_precision=float32,ok,,512,float32,", 0) == 0);
  BOOST_TEST(rows[6].rfind("005_global_batch=2048_precision=mixed_bfloat16,ok,,2048,mixed_bfloat16,", 0) == 0);
  // The table carries each point's own summary.
  const json sw = json::parse(read_file(dir.path("a/sweep.json")));
  const json point = json::parse(read_file(dir.path("a/points/002_global_batch=1024_precision=float32/summary.json")));
  BOOST_TEST(sw["rows"][2]["summary"]["step_time_s"] == point["step_time_s"]);
  BOOST_TEST(point["global_batch"] == 1024);
}

// --slices varies the number of slices over the DCN as --topology varies the shape.
BOOST_AUTO_TEST_CASE(slices_vary_like_any_key) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --hw v5e-8 --slices 1,4 --set workload.training.global_batch=0 "
                                "--set workload.training.per_replica_batch=8 --trace none");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json sw = json::parse(read_file(dir.path("s/sweep.json")));
  BOOST_REQUIRE(sw["rows"].size() == 2u);
  BOOST_TEST(sw["rows"][0]["summary"]["chips"] == 8);
  BOOST_TEST(sw["rows"][1]["summary"]["chips"] == 32);
  BOOST_TEST(sw["rows"][1]["summary"]["accelerator_type"] == "4x v5e-8");
  BOOST_TEST(sw["rows"][1]["summary"]["global_batch"].get<int>() == 4 * sw["rows"][0]["summary"]["global_batch"].get<int>());
  BOOST_TEST(fs::exists(dir.path("s/points/001_slices=4/summary.json")));
}

BOOST_AUTO_TEST_CASE(failed_and_oom_points_are_rows_with_their_reason) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --vary workload.training.global_batch=1024,1020 --vary hw.hbm.capacity_bytes=17179869184,2097152");
  BOOST_TEST(r.exit_code == 1);  // some points failed
  const auto rows = lines(read_file(dir.path("s/sweep.csv")));
  BOOST_REQUIRE(rows.size() == 5u);
  BOOST_TEST(rows[1].find(",ok,") != std::string::npos);
  BOOST_TEST(rows[2].find(",oom,\"out of HBM") != std::string::npos);  // quoted: the reason has commas
  BOOST_TEST(rows[3].find(",input_error,") != std::string::npos);
  BOOST_TEST(rows[3].find("1020 does not divide over the 8 replicas") != std::string::npos);
}

// Issue 18: a sweep over --hw tpu_v4,tpu_v5e --topology 2x2x2,4x4 was refused whole because two
// of its combinations do not exist.
BOOST_AUTO_TEST_CASE(impossible_combinations_are_rows_with_their_reason) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --hw tpu_v4,tpu_v5e --topology 2x2x2,4x4 -j 2");
  BOOST_TEST(r.exit_code == 1, r.err);  // like failed points
  const json result = json::parse(read_file(dir.path("s/sweep.json")));
  BOOST_REQUIRE(result["rows"].size() == 4u);
  const std::vector<std::string> expected = {"ok", "input_error", "input_error", "ok"};
  for (std::size_t i = 0; i < 4; ++i) BOOST_TEST(result["rows"][i]["status"] == expected[i]);
  BOOST_TEST(result["rows"][1]["reason"].get<std::string>().find("hw.slice.topology: tpu_v4 slices come in these shapes") !=
             std::string::npos);
  BOOST_TEST(result["rows"][2]["reason"].get<std::string>().find("got 2x2x2") != std::string::npos);
  // Nothing runnable at all: the sweep's own mistake, refused before anything runs.
  const CommandResult none = sweep("-o '" + dir.path("t") + "' --hw tpu_v4,tpu_v5p --topology 4x4,8x8");
  BOOST_TEST(none.exit_code == 2);
  BOOST_TEST(!fs::exists(dir.path("t")));
}

BOOST_AUTO_TEST_CASE(resume_keeps_finished_points_and_runs_the_rest) {
  TempDir dir;
  const std::string out = dir.path("s");
  const std::string args = "-o '" + out + "' --vary workload.training.global_batch=512,1024,2048";
  BOOST_REQUIRE(sweep(args).exit_code == 0);
  const std::string kept = out + "/points/000_global_batch=512.log";
  std::ofstream(kept) << "finished earlier\n";
  fs::remove_all(out + "/points/001_global_batch=1024");  // as if interrupted before this point ended
  const CommandResult again = sweep(args + " --resume");
  BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  BOOST_TEST(read_file(kept) == "finished earlier\n");  // not run again
  BOOST_TEST(fs::exists(out + "/points/001_global_batch=1024/summary.json"));
  BOOST_TEST(lines(read_file(out + "/sweep.csv")).size() == 4u);
  BOOST_TEST(sweep(args).exit_code == 2);  // neither --resume nor --force: the directory is kept
  // Issue 43: the lock goes with the sweep that held it; the progress lines count the points and,
  // once one was simulated, estimate the time left (the resumed points took none).
  BOOST_TEST(!fs::exists(out + "/.tpusim-lock"));
  BOOST_TEST(again.err.find("tpusim sweep: [3/3] ") != std::string::npos, again.err);
}

// Issue 41: each point records what made it (its summary's input and binary digests); a resume
// keeps a point only when that record is this sweep's, and runs again one that says otherwise
// or says nothing (copied in from another sweep, finished by another build).
BOOST_AUTO_TEST_CASE(a_resume_runs_again_a_point_whose_own_record_differs) {
  TempDir dir;
  const std::string out = dir.path("s");
  const std::string args = "-o '" + out + "' --vary workload.training.global_batch=512,1024,2048";
  BOOST_REQUIRE(sweep(args).exit_code == 0);
  const std::string first = out + "/points/000_global_batch=512", second = out + "/points/001_global_batch=1024";
  json summary = json::parse(read_file(first + "/summary.json"));
  BOOST_TEST(summary["tpusim_fnv1a64"].get<std::string>().size() == 16u);
  BOOST_TEST(summary["inputs_fnv1a64"][0].get<std::string>().substr(16) == "  " + example_workload());
  summary["tpusim_fnv1a64"] = "0123456789abcdef";
  std::ofstream(first + "/summary.json") << summary.dump();
  json unrecorded = json::parse(read_file(second + "/summary.json"));
  unrecorded.erase("inputs_fnv1a64");
  std::ofstream(second + "/summary.json") << unrecorded.dump();
  const std::string third_log = out + "/points/002_global_batch=2048.log";
  std::ofstream(third_log) << "finished earlier\n";
  const CommandResult again = sweep(args + " --resume");
  BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.err);
  BOOST_TEST(read_file(third_log) == "finished earlier\n");  // its record holds: kept
  BOOST_TEST(json::parse(read_file(first + "/summary.json"))["tpusim_fnv1a64"] != "0123456789abcdef");  // run again
  BOOST_TEST(json::parse(read_file(second + "/summary.json")).contains("inputs_fnv1a64"));
}

BOOST_AUTO_TEST_CASE(a_mistyped_key_stops_the_sweep_before_anything_runs) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --vary workload.training.global_bath=512,1024");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("workload.training.global_bath: unknown key") != std::string::npos);
  BOOST_TEST(!fs::exists(dir.path("s")));
}

BOOST_AUTO_TEST_CASE(report_has_every_chart_and_row) {
  TempDir dir;
  BOOST_REQUIRE(sweep("-o '" + dir.path("s") + "' --vary workload.training.global_batch=512,1024 --hw tpu_v2,tpu_v3").exit_code == 0);
  const std::string html = read_file(dir.path("s/report.html"));
  for (const char* id : {"id=\"throughput\"", "id=\"step_time\"", "id=\"breakdown\"", "id=\"utilization\"", "id=\"memory\"",
                         "id=\"points\""})
    BOOST_TEST(html.find(id) != std::string::npos, id);
  BOOST_TEST(html.find("<script") == std::string::npos);  // self-contained, nothing to load
  BOOST_TEST(html.find("003_hw=tpu_v3_global_batch=1024") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(merged_shards_equal_the_whole_sweep) {
  TempDir dir;
  const std::string varies = " --vary workload.training.global_batch=512,1024,2048 --hw tpu_v2,tpu_v3 -j 2";
  BOOST_REQUIRE(sweep("-o '" + dir.path("whole") + "'" + varies).exit_code == 0);
  for (const char* k : {"1", "2", "3"}) {
    const CommandResult shard = sweep("-o '" + dir.path(std::string("s") + k) + "' --shard " + k + "/3" + varies);
    BOOST_REQUIRE_MESSAGE(shard.exit_code == 0, shard.err);
    BOOST_TEST(lines(read_file(dir.path(std::string("s") + k + "/sweep.csv"))).size() == 3u);  // header + 2 of 6
  }
  const CommandResult merged = run_tpusim("merge '" + dir.path("s1") + "' '" + dir.path("s2") + "' '" + dir.path("s3") +
                                          "' -o '" + dir.path("m") + "'");
  BOOST_REQUIRE_MESSAGE(merged.exit_code == 0, merged.err);
  for (const char* file : {"sweep.csv", "sweep.json", "report.html"})
    BOOST_TEST(read_file(dir.path("m/") + file) == read_file(dir.path("whole/") + file), file);
  BOOST_TEST(fs::exists(dir.path("m/points/004_hw=tpu_v3_global_batch=1024/summary.json")));

  // A missing shard is reported and fails the merge, but what exists is still joined.
  const CommandResult partial = run_tpusim("merge '" + dir.path("s1") + "' -o '" + dir.path("p") + "'");
  BOOST_TEST(partial.exit_code == 1);
  BOOST_TEST(partial.err.find("4 point(s) missing") != std::string::npos, partial.err);
  BOOST_TEST(json::parse(read_file(dir.path("p/sweep.json")))["finished"] == 2);

  // Overlapping shards and shards of another sweep are input errors.
  BOOST_TEST(run_tpusim("merge '" + dir.path("s1") + "' '" + dir.path("whole") + "' -o '" + dir.path("o") + "'").exit_code == 2);
  BOOST_TEST(sweep("-o '" + dir.path("other") + "' --shard 1/2 --vary workload.training.global_batch=512,1024").exit_code == 0);
  const CommandResult other = run_tpusim("merge '" + dir.path("s1") + "' '" + dir.path("other") + "' -o '" + dir.path("x") + "'");
  BOOST_TEST(other.exit_code == 2);
  BOOST_TEST(other.err.find("not a shard of the same sweep") != std::string::npos, other.err);
  BOOST_TEST(sweep("-o '" + dir.path("bad") + "' --shard 0/3" + varies).exit_code == 2);
  // A damaged sweep.json is an input error that names the file, and nothing is written.
  fs::create_directories(dir.path("damaged"));
  dir.write("damaged/sweep.json", R"({"workload": "w.json", "axes": [], "points": 2, "rows": [{"index": 0}]})");
  const CommandResult damaged = run_tpusim("merge '" + dir.path("damaged") + "' -o '" + dir.path("d") + "'");
  BOOST_TEST(damaged.exit_code == 2);
  BOOST_TEST(damaged.err.find("damaged/sweep.json") != std::string::npos, damaged.err);
  BOOST_TEST(damaged.err.find(R"(a row without "point", "status", "reason", "varied", "summary")") != std::string::npos, damaged.err);
  BOOST_TEST(!fs::exists(dir.path("d")));
}

BOOST_AUTO_TEST_CASE(an_interrupted_sweep_keeps_its_finished_points) {
  // Three BERT-large points, one at a time: SIGTERM lands 1 s after the first point finished,
  // while the second (20 steps) runs. (A fixed delay could land in the first point's last
  // moments under a sanitizer build, and interrupt nothing.)
  TempDir dir;
  const std::string out = dir.path("sweep");
  const CommandResult r = interrupted_bert_sweep(out, "1,20,20", "points/000_steps=1/summary.json", 1000);
  BOOST_TEST(r.exit_code == 143, r.err);
  const json sweep = json::parse(read_file(out + "/sweep.json"));
  std::map<std::string, int> statuses;
  for (const auto& row : sweep["rows"]) ++statuses[row["status"].get<std::string>()];
  BOOST_TEST(statuses["interrupted"] == 1);  // the point that was running
  BOOST_TEST(statuses["ok"] + statuses["interrupted"] == static_cast<int>(sweep["rows"].size()));
  BOOST_TEST(sweep["rows"].size() < 3u);  // the last point never started
  // Partial says partial everywhere: the interrupted row is not counted as finished.
  BOOST_TEST(sweep["finished"].get<int>() == statuses["ok"]);
  BOOST_TEST(sweep["interrupted"].get<int>() == 1);
  BOOST_TEST(read_file(out + "/report.html").find(fmt::format("{} of 3 points finished, 1 interrupted (partial)", statuses["ok"])) !=
             std::string::npos);
  // Issue 41: the closing line counted the interrupted point as failed.
  BOOST_TEST(r.err.find("0 failed, 1 interrupted;") != std::string::npos, r.err);
}

// An interrupt that reaches a point while it is still starting (its log just opened, its own
// handler perhaps not yet installed) leaves that point interrupted, not failed, however far
// it got.
BOOST_AUTO_TEST_CASE(a_point_interrupted_as_it_starts_is_interrupted) {
  TempDir dir;
  const std::string out = dir.path("sweep");
  const CommandResult r = interrupted_bert_sweep(out, "5,5", "points/000_steps=5.log", 0);
  BOOST_TEST(r.exit_code == 143, r.err);
  const json sweep = json::parse(read_file(out + "/sweep.json"));
  BOOST_REQUIRE(sweep["rows"].size() == 1u);
  BOOST_TEST(sweep["rows"][0]["status"] == "interrupted");
  BOOST_TEST(sweep["finished"].get<int>() == 0);
  BOOST_TEST(sweep["interrupted"].get<int>() == 1);
}

// Issue 17: a sweep over hardware answers "what to pick": every finished point is ranked by
// samples per USD and by time to train, in sweep.csv, sweep.json and the report's table.
BOOST_AUTO_TEST_CASE(points_are_ranked_by_samples_per_usd_and_time_to_train) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --hw tpu_v3,tpu_v4,tpu_v5e --set workload.training.dataset_examples=60000");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json sw = json::parse(read_file(dir.path("s/sweep.json")));
  BOOST_REQUIRE(sw["rows"].size() == 3u);
  for (const char* metric : {"samples_per_usd", "time_to_train_s"}) {
    const bool higher_is_better = std::string(metric) == "samples_per_usd";
    std::vector<std::uint64_t> ranks;
    for (const auto& row : sw["rows"]) {
      ranks.push_back(row["rank"][metric].get<std::uint64_t>());
      // The best has rank 1, and a point ranks above every point with a worse figure.
      for (const auto& other : sw["rows"]) {
        const double a = row["summary"]["cost"][metric].get<double>(), b = other["summary"]["cost"][metric].get<double>();
        if (higher_is_better ? a > b : a < b) BOOST_TEST(row["rank"][metric].get<std::uint64_t>() < other["rank"][metric].get<std::uint64_t>());
      }
    }
    std::sort(ranks.begin(), ranks.end());
    BOOST_TEST(ranks.front() == 1u, metric);
  }
  const auto rows = lines(read_file(dir.path("s/sweep.csv")));
  BOOST_TEST(rows[0].rfind("point,status,reason,vary_hw,rank_samples_per_usd,rank_time_to_train_s,", 0) == 0, rows[0]);
  BOOST_TEST(rows[0].find("cost_usd_per_step") != std::string::npos);
  const std::string html = read_file(dir.path("s/report.html"));
  BOOST_TEST(html.find("<th>samples/USD (rank)</th>") != std::string::npos);
  BOOST_TEST(html.find("<th>time to train (rank)</th>") != std::string::npos);
}

// Issue 39: with a failure rate, a sweep over slice sizes ranks the points by their throughput with
// failures, and its report charts the goodput and trains them with failures: a larger slice fails
// more often, so its goodput is lower.
BOOST_AUTO_TEST_CASE(a_sweep_over_slice_sizes_compares_them_by_goodput) {
  TempDir dir;
  const CommandResult r = sweep("-o '" + dir.path("s") + "' --topology 2x2,4x4,8x8 --set workload.training.dataset_examples=600000"
                                " --set workload.training.goodput.failures_per_chip_hour=0.05"
                                " --set workload.training.goodput.checkpoint_storage_gbps_per_host=0.001"
                                " --set workload.training.goodput.restart_s=300");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json sw = json::parse(read_file(dir.path("s/sweep.json")));
  BOOST_REQUIRE(sw["rows"].size() == 3u);
  double last_goodput = 2;
  std::vector<std::uint64_t> ranks;
  for (const auto& row : sw["rows"]) {
    const json& g = row["summary"]["goodput"];
    BOOST_TEST(g["goodput"].get<double>() < last_goodput);
    last_goodput = g["goodput"].get<double>();
    ranks.push_back(row["rank"]["goodput_samples_per_s"].get<std::uint64_t>());
    for (const auto& other : sw["rows"])
      if (g["samples_per_s"].get<double>() > other["summary"]["goodput"]["samples_per_s"].get<double>())
        BOOST_TEST(ranks.back() < other["rank"]["goodput_samples_per_s"].get<std::uint64_t>());
  }
  std::sort(ranks.begin(), ranks.end());
  BOOST_TEST(ranks.front() == 1u);
  BOOST_TEST(lines(read_file(dir.path("s/sweep.csv")))[0].find(",rank_goodput_samples_per_s,") != std::string::npos);
  const std::string html = read_file(dir.path("s/report.html"));
  BOOST_TEST(contains(html, "<h2>Goodput</h2>"));
  BOOST_TEST(contains(html, "time to train with failures"));
}

// Issue 41: --resume compared the workload's bytes alone, so a sweep resumed after its hardware
// file (or imported model, or tpusim itself) changed kept the old points as the new sweep's and
// exited 0. Each kind of input now refuses the resume naming what changed.
BOOST_AUTO_TEST_CASE(a_resume_refuses_when_any_input_changed_naming_it) {
  TempDir dir;
  const std::string binary = dir.path("tpusim");
  fs::copy_file(TPUSIM_BINARY, binary);
  const std::string presets = dir.path("presets");
  fs::copy(source_path("hw/presets"), presets, fs::copy_options::recursive);
  const std::string keras = dir.write("model.json", read_file(source_path("tests/data/import/keras_mlp_mnist.json")));
  const std::string workload = dir.write(
      "w.json", R"({"name": "w", "model": {"keras_json": "model.json"},
                   "training": {"per_replica_batch": 8, "steps": 2}})");
  const std::string hw = dir.write("hw.json", R"({"base": "tpu_v2", "name": "mine"})");
  const auto run = [&](const std::string& out, const std::string& more) {
    const std::string command = "cd '" + dir.path("") + "' && TPUSIM_PRESET_DIR='" + presets + "' '" + binary + "' sweep '" +
                                workload + "' --hw '" + hw + "' --vary workload.training.steps=2,3 -j 1 -o '" + out + "' " +
                                more + " > /dev/null 2> '" + dir.path("err") + "'";
    const int status = std::system(command.c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir.path("err")));
  };
  const auto append = [](const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::app) << bytes;
  };
  // Each change, applied after a finished sweep, and what the refusal names.
  const std::vector<std::pair<std::function<void()>, std::string>> changes = {
      {[&] { append(workload, " "); }, "w.json changed since the sweep"},
      {[&] { append(hw, " "); }, "hw.json changed since the sweep"},
      {[&] { append(keras, " "); }, "model.json changed since the sweep"},
      {[&] { append(presets + "/tpu_v2.json", " "); }, "tpu_v2.json changed since the sweep"},
      {[&] { append(binary, std::string(1, '\0')); }, "ran with another tpusim binary"}};
  int case_number = 0;
  for (const auto& [change, expected] : changes) {
    const std::string out = dir.path("s" + std::to_string(case_number++));
    const auto first = run(out, "");
    BOOST_REQUIRE_MESSAGE(first.first == 0, first.second);
    BOOST_TEST(run(out, "--resume").first == 0);  // nothing changed: resumed
    change();
    const auto resumed = run(out, "--resume");
    BOOST_TEST_CONTEXT(expected << "\nstderr: " << resumed.second) {
      BOOST_TEST(resumed.first == 2);
      BOOST_TEST(resumed.second.find(expected) != std::string::npos);
      BOOST_TEST(std::count(resumed.second.begin(), resumed.second.end(), '\n') == 1);
    }
  }
  // Finished points with no record to check them against are not trusted either.
  const std::string out = dir.path("unrecorded");
  BOOST_REQUIRE(run(out, "").first == 0);
  fs::remove(out + "/sweep.json");
  const auto resumed = run(out, "--resume");
  BOOST_TEST(resumed.first == 2);
  BOOST_TEST(resumed.second.find("holds finished points but no readable record") != std::string::npos, resumed.second);
}

// Issue 41: `kill -9` of a sweep left its point processes running outside the lock, and an
// immediate --resume started the same points again and reported a finished one as input_error.
// The points now end when their sweep does (as interrupted), and hold its lock until they have.
BOOST_AUTO_TEST_CASE(a_killed_sweeps_points_end_with_it_and_a_resume_finishes_the_sweep) {
  TempDir dir;
  const std::string out = dir.path("sweep");
  const CommandResult killed = interrupted_bert_sweep(out, "8,8", "points/000_steps=8.log", 500, SIGKILL);
  BOOST_TEST(killed.exit_code != 0);
  CommandResult resumed;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  do {  // refused while the killed sweep's point still closes its outputs
    resumed = run_tpusim("sweep '" + source_path("workloads/examples/bert_large_128.json") +
                         "' --hw tpu_v5e --topology 8x8 --vary workload.training.steps=8,8 -j 1 --trace none -o '" + out +
                         "' --resume");
  } while (resumed.exit_code == 2 && resumed.err.find("another tpusim sweep or merge is writing") != std::string::npos &&
           std::chrono::steady_clock::now() < give_up);
  BOOST_REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.err);
  const json sweep = json::parse(read_file(out + "/sweep.json"));
  BOOST_TEST(sweep["rows"].size() == 2u);
  for (const auto& row : sweep["rows"]) BOOST_TEST(row["status"] == "ok", row["point"] << ": " << row["reason"]);
}
