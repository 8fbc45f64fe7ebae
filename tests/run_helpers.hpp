// What the end-to-end suites share: a `tpusim run` into a fresh temporary directory with its
// parsed summary, and the error of loading a configuration.
#pragma once

#include <memory>
#include <string>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "test_helpers.hpp"

namespace tpusim::test {

struct Run {
  TempDir dir;
  CommandResult result;
  nlohmann::json summary;
  std::string out() const { return dir.path("out"); }
};

// `tpusim run WORKLOAD -o <fresh dir>/out EXTRA`, which must succeed.
inline std::unique_ptr<Run> run_example(const std::string& extra, const std::string& workload = example_workload()) {
  auto run = std::make_unique<Run>();
  run->result = run_tpusim("run '" + workload + "' -o '" + run->out() + "' " + extra);
  BOOST_REQUIRE_MESSAGE(run->result.exit_code == 0, run->result.err);
  run->summary = nlohmann::json::parse(read_file(run->out() + "/summary.json"));
  return run;
}

inline nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(read_file(path)); }

// A model file of the import suites (tests/data/import/).
inline std::string import_fixture(const std::string& name) { return source_path("tests/data/import/" + name); }

// The error message of loading `request`, or "" when it loads.
inline std::string load_error(const ConfigRequest& request) {
  try {
    load_config(request);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace tpusim::test
