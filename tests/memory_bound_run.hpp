// The run the memory models' tests compare (test_memory_model, test_custom_unit): GPT-2 small at
// 2 sequences per v5e chip, two steps, over half of its step memory-bound. Include after Boost.Test.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

namespace tpusim::test {

inline std::string memory_bound_run() {
  return "run '" + source_path("workloads/examples/gpt2_small.json") +
         "' --hw tpu_v5e --topology 2x2 --set workload.training.steps=2 --set workload.training.per_replica_batch=2";
}

// `binary` runs it with `extra` into `dir`/`name`; its summary.json (the test stops unless it ran).
inline nlohmann::json memory_bound_summary(const std::string& binary, const TempDir& dir, const std::string& name,
                                           const std::string& extra) {
  const CommandResult r = run_program(binary, memory_bound_run() + " " + extra + " -o '" + dir.path(name) + "'");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, name + ": " + r.err);
  return nlohmann::json::parse(read_file(dir.path(name + "/summary.json")));
}

}  // namespace tpusim::test
