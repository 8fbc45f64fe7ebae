// A layer kind of one's own (workloads/layer_kind.hpp), registered by a program that then runs
// tpusim's command line (tests/custom_layer_main.cpp, built as tpusim_custom_layer): its type and
// the key only it takes are checked like tpusim's own, and its ops run in the step.
#define BOOST_TEST_MODULE custom_layer
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// The Keras MLP with Gemma 2's soft-capping on its logits; `cap` as given (none: the default).
std::string capped_mlp(const TempDir& dir, const std::string& name, const json& cap) {
  json soft_cap = {{"type", "soft_cap"}};
  if (!cap.is_null()) soft_cap["cap"] = cap;
  const json workload = {
      {"name", name},
      {"model",
       {{"input_shape", {784}},
        {"input_dtype", "float32"},
        {"loss", "sparse_categorical_crossentropy"},
        {"layers", {{{"type", "dense"}, {"units", 128}, {"activation", "relu"}}, {{"type", "dense"}, {"units", 10}}, soft_cap}}}},
      {"training", {{"per_replica_batch", 128}, {"steps", 2}}}};
  return dir.write(name + ".json", workload.dump(2));
}

CommandResult run_custom(const std::string& args) { return run_program(CUSTOM_LAYER_BINARY, args); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_users_layer_kind_runs_with_its_own_key) {
  TempDir dir;
  const std::string capped = capped_mlp(dir, "capped", nullptr), off = capped_mlp(dir, "off", 0);
  const CommandResult with_cap = run_custom("run '" + capped + "' --trace ops -o '" + dir.path("capped_out") + "'");
  BOOST_REQUIRE_MESSAGE(with_cap.exit_code == 0, with_cap.err);
  const CommandResult without = run_custom("run '" + off + "' --trace ops -o '" + dir.path("off_out") + "'");
  BOOST_REQUIRE_MESSAGE(without.exit_code == 0, without.err);
  const std::string trace = read_file(dir.path("capped_out/trace.json")), trace_off = read_file(dir.path("off_out/trace.json"));
  BOOST_TEST(contains(trace, "/fwd/soft_cap"));
  BOOST_TEST(contains(trace, "/bwd/soft_cap"));
  BOOST_TEST(!contains(trace_off, "soft_cap"));  // cap 0: no work at all
  const json config = json::parse(read_file(dir.path("capped_out/effective_config.json")));
  BOOST_TEST(config["workload"]["model"]["layers"][2]["cap"] == 30.0);  // its default, filled in
}

BOOST_AUTO_TEST_CASE(its_key_is_listed_and_checked_like_tpusims_own) {
  TempDir dir;
  const CommandResult listed = run_custom("list-params");
  BOOST_TEST(contains(listed.out, "workload.model.layers[].cap "), listed.out);
  BOOST_TEST(contains(listed.out, "soft_cap"), listed.out);
  const CommandResult negative = run_custom("dump-config '" + capped_mlp(dir, "negative", -1) + "'");
  BOOST_TEST(negative.exit_code == 2);
  BOOST_TEST(contains(negative.err, "workload.model.layers[2].cap"), negative.err);
  // The stock binary knows no such kind: refused with the kinds it knows.
  const CommandResult stock = run_tpusim("dump-config '" + capped_mlp(dir, "stock", nullptr) + "'");
  BOOST_TEST(stock.exit_code == 2);
  BOOST_TEST(contains(stock.err, "soft_cap"), stock.err);
  BOOST_TEST(!contains(run_tpusim("list-params").out, "workload.model.layers[].cap "));
}
