// `tpusim sweep`: one workload over the cartesian product of varied keys, each point a `tpusim run`
// in its own process (one SystemC elaboration each, -j of them at once), gathered into one table.
//
//   tpusim sweep w.json --vary workload.training.global_batch=256,512,1024 --hw tpu_v4,tpu_v5p -o out/sw
//   -> out/sw/sweep.csv, sweep.json, report.html, points/000_.../ (each point's own outputs)
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpusim {

struct SweepAxis {
  std::string key;  // "hw", "topology", or a --set path such as workload.training.global_batch
  std::vector<std::string> values;
};

struct SweepRequest {
  std::string workload_path;
  std::string fixed_hw = "tpu_v2";  // when the hardware does not vary
  bool hw_given = true;  // false: --hw was not given, and an effective configuration keeps its hardware
  std::string fixed_topology;       // when the topology does not vary (empty: the preset's)
  std::vector<std::string> sets;  // fixed overrides for every point
  std::vector<SweepAxis> axes;    // in order: the first varies slowest
  std::string out_dir;
  unsigned jobs = 1;
  bool resume = false;  // keep the points an earlier sweep into out_dir finished
  bool force = false;   // replace out_dir
  std::string trace = "none";
  std::string max_memory;  // passed to every point's run as --max-memory (empty: none)
  std::string self_exe;  // the tpusim binary that runs each point
  // --shard K/N: run only the points whose index is K-1 modulo N (round robin, so cheap and costly
  // points spread over the shards); `tpusim merge` joins the N outputs.
  unsigned shard_index = 1;
  unsigned shard_count = 1;
};

// "key=v1,v2,v3" -> axis; throws InputError naming --vary.
SweepAxis parse_vary(const std::string& text);

// "K/N" with 1 <= K <= N -> {K, N}; throws InputError naming --shard.
std::pair<unsigned, unsigned> parse_shard(const std::string& text);

// Runs the sweep; returns the number of points that did not finish with status ok or oom.
// Throws InputError for a sweep that cannot start (unknown key, existing output, ...).
int run_sweep(const SweepRequest& request);

// `tpusim merge DIR... -o OUT`: joins the outputs of the shards of one sweep (same workload and
// axes) into OUT/sweep.csv, sweep.json, report.html and OUT/points/. Returns the number of points
// missing or not finished ok/oom; throws InputError for directories that are not shards of one sweep.
int merge_sweeps(const std::vector<std::string>& shard_dirs, const std::string& out_dir, bool force);

}  // namespace tpusim
