// The chip's memory is a model chosen by name (hw/memory.hpp): the built-in calibrated and
// datasheet HBM, or a user's own, registered by a program that then runs tpusim's command line
// (tests/custom_memory_main.cpp, built as tpusim_custom_memory).
#define BOOST_TEST_MODULE memory_model
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "memory_bound_run.hpp"

using namespace tpusim::test;
using json = nlohmann::json;

namespace {

json summary_of(const std::string& binary, const TempDir& dir, const std::string& name, const std::string& extra) {
  return memory_bound_summary(binary, dir, name, "--trace none " + extra);
}

}  // namespace

// The user's model serves every access of the step: the same bytes cross it, its half-rate
// single port stretches the memory-bound time, and what it reports reaches the statistics.
BOOST_AUTO_TEST_CASE(a_users_memory_model_serves_the_whole_step) {
  TempDir dir;
  const json calibrated = summary_of(CUSTOM_MEMORY_BINARY, dir, "calibrated", "");
  const json own = summary_of(CUSTOM_MEMORY_BINARY, dir, "own", "--set hw.hbm.model=one_port");
  const double memory_bound_s = calibrated["breakdown"]["memory_bound_s"].get<double>();
  BOOST_REQUIRE(memory_bound_s > 0.4 * calibrated["step_time_s"].get<double>());
  BOOST_TEST(own["traffic_per_step"]["hbm_bytes"] == calibrated["traffic_per_step"]["hbm_bytes"]);
  BOOST_TEST(own["checks"]["hbm_bytes"] == calibrated["checks"]["hbm_bytes"]);
  // Half the datasheet rate against the calibrated model's ~90% of it: the memory-bound part
  // takes about 1.8 times as long.
  BOOST_TEST(own["step_time_s"].get<double>() > calibrated["step_time_s"].get<double>() + 0.5 * memory_bound_s);
  BOOST_TEST(own["utilization"]["hbm"].get<double>() > 0.5);
  const json config = json::parse(read_file(dir.path("own/effective_config.json")));
  BOOST_TEST(config["hw"]["hbm"]["model"] == "one_port");
  BOOST_TEST(config["hw"]["hbm"]["one_port"]["bw_fraction"] == 0.5);  // its knob, at its default
}

// The model's own knob, declared in the one file that registers it, is a key like any other:
// listed, checked against its limits, and read by the model (a quarter of the rate stretches
// the memory-bound time further than half).
BOOST_AUTO_TEST_CASE(a_users_memory_model_declares_its_own_knobs) {
  const CommandResult listed = run_program(CUSTOM_MEMORY_BINARY, "list-params");
  BOOST_TEST(listed.exit_code == 0);
  BOOST_TEST(contains(listed.out, "hw.hbm.one_port.bw_fraction"), listed.out);
  BOOST_TEST(!contains(run_tpusim("list-params").out, "one_port"));
  const CommandResult outside = run_program(CUSTOM_MEMORY_BINARY, "dump-config --hw tpu_v5e --set hw.hbm.model=one_port "
                                                                  "--set hw.hbm.one_port.bw_fraction=2");
  BOOST_TEST(outside.exit_code == 2);
  BOOST_TEST(contains(outside.err, "hw.hbm.one_port.bw_fraction"), outside.err);
  const CommandResult misspelt = run_program(CUSTOM_MEMORY_BINARY, "dump-config --hw tpu_v5e --set hw.hbm.one_port.bw_fracton=0.2");
  BOOST_TEST(misspelt.exit_code == 2);
  BOOST_TEST(contains(misspelt.err, "did you mean"), misspelt.err);
  TempDir dir;
  const json half = summary_of(CUSTOM_MEMORY_BINARY, dir, "half", "--set hw.hbm.model=one_port");
  const json quarter =
      summary_of(CUSTOM_MEMORY_BINARY, dir, "quarter", "--set hw.hbm.model=one_port --set hw.hbm.one_port.bw_fraction=0.25");
  BOOST_TEST(quarter["breakdown"]["memory_bound_s"].get<double>() > 1.5 * half["breakdown"]["memory_bound_s"].get<double>());
  BOOST_TEST(quarter["traffic_per_step"]["hbm_bytes"] == half["traffic_per_step"]["hbm_bytes"]);
}

// The datasheet model is the calibrated one without DRAM timing: an upper bound on what the
// memory can give, so the same step is faster but moves the same bytes.
BOOST_AUTO_TEST_CASE(the_datasheet_model_bounds_the_calibrated_one) {
  TempDir dir;
  const json calibrated = summary_of(TPUSIM_BINARY, dir, "calibrated", "--set hw.hbm.model=calibrated");
  const json datasheet = summary_of(TPUSIM_BINARY, dir, "datasheet", "--set hw.hbm.model=datasheet");
  BOOST_TEST(datasheet["step_time_s"].get<double>() < calibrated["step_time_s"].get<double>());
  BOOST_TEST(datasheet["breakdown"]["memory_bound_s"].get<double>() < calibrated["breakdown"]["memory_bound_s"].get<double>());
  BOOST_TEST(datasheet["traffic_per_step"]["hbm_bytes"] == calibrated["traffic_per_step"]["hbm_bytes"]);
}

// A name no program registered is bad input: the field, the names there are, exit code 2.
BOOST_AUTO_TEST_CASE(an_unknown_model_name_is_refused_with_the_registered_names) {
  const CommandResult stock = run_tpusim("dump-config --hw tpu_v5e --set hw.hbm.model=datashet");
  BOOST_TEST(stock.exit_code == 2);
  BOOST_TEST(contains(stock.err, "hw.hbm.model"), stock.err);
  BOOST_TEST(contains(stock.err, "(burst_group, calibrated, datasheet)"), stock.err);
  BOOST_TEST(contains(stock.err, "did you mean datasheet?"), stock.err);
  const CommandResult own = run_program(CUSTOM_MEMORY_BINARY, "dump-config --hw tpu_v5e --set hw.hbm.model=one_prt");
  BOOST_TEST(own.exit_code == 2);
  BOOST_TEST(contains(own.err, "(burst_group, calibrated, datasheet, one_port)"), own.err);
  BOOST_TEST(run_program(CUSTOM_MEMORY_BINARY, "dump-config --hw tpu_v5e --set hw.hbm.model=one_port").exit_code == 0);
}

// The burst-group model runs each access through the DRAM model the calibrated rates were
// measured on: a long stream comes out at about the calibrated time (a little slower: its
// transfers queue one after another instead of overlapping), both slower than the datasheet's.
BOOST_AUTO_TEST_CASE(the_burst_group_model_streams_at_about_the_calibrated_rate) {
  auto device_s = [](const std::string& model) {
    const CommandResult r = run_tpusim("op copy --shape 4096,2048 --dtype fp32 --hw tpu_v5e --json --set hw.hbm.model=" + model);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, model + ": " + r.err);
    return json::parse(r.out)["time_s"].get<double>();
  };
  const double calibrated = device_s("calibrated"), burst = device_s("burst_group"), datasheet = device_s("datasheet");
  BOOST_TEST(burst > datasheet);
  BOOST_TEST(burst > 0.95 * calibrated);
  BOOST_TEST(burst < 1.15 * calibrated);
  // A training step's traffic is counted whole, posted writes acknowledged at once included.
  TempDir dir;
  auto step = [&](const std::string& model) {
    const CommandResult r = run_tpusim("run '" + example_workload() + "' --trace none --set hw.hbm.model=" + model + " -o '" +
                                       dir.path(model) + "'");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, model + ": " + r.err);
    return json::parse(read_file(dir.path(model + "/summary.json")));
  };
  const json calibrated_step = step("calibrated"), burst_step = step("burst_group");
  BOOST_TEST(burst_step["traffic_per_step"]["hbm_bytes"] == calibrated_step["traffic_per_step"]["hbm_bytes"]);
  BOOST_TEST(burst_step["checks"]["hbm_bytes"] == calibrated_step["checks"]["hbm_bytes"]);
}
