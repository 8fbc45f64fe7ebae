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

// `tpusim run WORKLOAD EXTRA` folded (the default) and with --all-chips: the summaries must be
// byte-identical but for how the slice was simulated. Returns the folded run's summary.
inline nlohmann::json folded_run_matching_full(const std::string& workload, const std::string& extra) {
  nlohmann::json folded = run_example(extra, workload)->summary;
  nlohmann::json full = run_example(extra + " --all-chips", workload)->summary;
  BOOST_TEST(folded["simulation"]["mode"] == "representatives");
  BOOST_TEST(full["simulation"]["mode"] == "all_chips");
  nlohmann::json folded_figures = folded, full_figures = full;
  folded_figures.erase("simulation");
  full_figures.erase("simulation");
  BOOST_TEST(folded_figures.dump() == full_figures.dump());
  return folded;
}

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
