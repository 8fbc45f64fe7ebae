// Pipeline parallelism (issue 38): stages over a mesh axis, microbatches and the bubble of the
// schedule, circular repeats, what each stage holds and reduces, folding, refusals.
#define BOOST_TEST_MODULE pipeline
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// GPT-2 small: 12 identical decoder layers between a token table and a head tied to it, the
// uniform model a pipeline splits. On a v5e 2x4 with the pipeline over y: 4 stages of 3 layers,
// 2 replicas along x.
const std::string kGpt2 = source_path("workloads/examples/gpt2_small.json");
const std::string kStages = "--hw tpu_v5e --topology 2x4 --set workload.training.mesh.pipeline=y";

LoweredStep lowered(std::vector<std::string> sets) {
  ConfigRequest request;
  request.workload_path = kGpt2;
  request.hw = "tpu_v5e";
  request.topology = "2x4";
  request.sets = {"workload.training.mesh.pipeline=y", "workload.training.per_replica_batch=8"};
  request.sets.insert(request.sets.end(), sets.begin(), sets.end());
  const Config c = load_config(request);
  return lower_training_step(c.workload, c.hw);
}

json summary(const TempDir& dir, const std::string& name, const std::string& args) {
  const CommandResult r = run_tpusim("run '" + kGpt2 + "' --trace none --set workload.training.steps=2 -o '" + dir.path(name) + "' " + args);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(read_file(dir.path(name + "/summary.json")));
}

std::size_t count_named(const Program& p, const std::string& part) {
  return static_cast<std::size_t>(
      std::count_if(p.ops.begin(), p.ops.end(), [&](const Op& op) { return op.name.find(part) != std::string::npos; }));
}

}  // namespace

// Every stage computes in every one of microbatches x repeats + stages - 1 iterations; on each,
// stages - 1 of them are a bubble. Every iteration of a uniform model costs the same, so the
// bubble's share of the time in the pipeline is the ideal schedule's (stages - 1) / iterations.
BOOST_AUTO_TEST_CASE(a_uniform_models_bubble_is_the_ideal_schedules) {
  TempDir dir;
  struct Case {
    int microbatches, repeats, batch;
  };
  for (const Case c : {Case{4, 1, 8}, Case{8, 1, 8}, Case{16, 1, 16}, Case{4, 3, 8}}) {
    const json s = summary(dir, std::to_string(c.microbatches) + "x" + std::to_string(c.repeats),
                           kStages + " --set workload.training.per_replica_batch=" + std::to_string(c.batch) +
                               " --set workload.training.pipeline.microbatches=" + std::to_string(c.microbatches) +
                               " --set workload.training.pipeline.repeats=" + std::to_string(c.repeats));
    BOOST_TEST_CONTEXT(c.microbatches << " microbatches x " << c.repeats) {
      const json& p = s["pipeline"];
      const double iterations = c.microbatches * c.repeats + 3;
      BOOST_TEST(p["iterations"].get<double>() == iterations);
      BOOST_TEST(p["ideal_bubble_fraction"].get<double>() == 3 / iterations, boost::test_tools::tolerance(1e-12));
      BOOST_TEST(p["bubble_fraction"].get<double>() == 3 / iterations, boost::test_tools::tolerance(0.01));
      BOOST_TEST(p["layers_per_chunk"].get<int>() == 3 / c.repeats);
      BOOST_TEST(p["bubble_s"].get<double>() > 0);
      const std::string report = read_file(dir.path(std::to_string(c.microbatches) + "x" + std::to_string(c.repeats) + "/report.html"));
      BOOST_TEST(report.find("<th class=\"left\">pipeline bubble</th>") != std::string::npos);
    }
  }
}

BOOST_AUTO_TEST_CASE(each_stage_holds_its_layers_and_sums_their_gradients_over_the_data_axes) {
  const LoweredStep piped = lowered({"workload.training.pipeline.microbatches=4"});
  // The stage's model: the token table, 3 of the 12 decoder layers, the final norm.
  BOOST_TEST(piped.pipeline.stages == 4u);
  BOOST_TEST(piped.pipeline.iterations == 7u);
  BOOST_TEST(piped.pipeline.layers_per_chunk == 3u);
  const std::uint64_t layer = 7087872;  // a GPT-2 small decoder layer's parameters
  BOOST_TEST(piped.model.params() - piped.core_model.params() == 9 * layer);
  BOOST_TEST(piped.replicas == 2u);
  // Model FLOPs: the whole model at the global batch, the bubble's work none of them.
  ConfigRequest request;
  request.workload_path = kGpt2;
  request.hw = "tpu_v5e";
  request.topology = "2x4";
  request.sets = {"workload.training.per_replica_batch=2"};  // the same global batch, 8 replicas
  const Config flat_config = load_config(request);
  const LoweredStep flat = lower_training_step(flat_config.workload, flat_config.hw);
  BOOST_TEST(piped.model_flops_per_step == flat.model_flops_per_step, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(piped.model_flops_per_core == piped.textbook_flops_per_core, boost::test_tools::tolerance(1e-12));
  // Per iteration a shift of the chunk's output and a rotation of the buffer, forward and back:
  // one microbatch (2 sequences of 1024 tokens of 768 bfloat16 features) each.
  std::size_t permutes = 0;
  for (const Op& op : piped.program.ops) {
    if (op.kind != OpKind::Collective) continue;
    if (op.collective.kind == CollectiveKind::Permute) {
      ++permutes;
      BOOST_TEST(op.collective.group_axes == 0x2u);
      BOOST_TEST(op.collective.bytes == 2u * 1024 * 768 * 2);
    } else {  // the stage's layers' gradients over x, the layers around them over y too
      const bool around = op.name.find("wte_wpe") != std::string::npos || op.name.find("ln_f") != std::string::npos;
      BOOST_TEST((op.collective.group_axes & 0x3u) == (around ? 0x3u : 0x1u), op.name);
    }
  }
  BOOST_TEST(permutes == 4u * 7);
  // The last 3 forward iterations and the first 3 backward ones are bubbles, named as such.
  BOOST_TEST(count_named(piped.program, "bubble4/") > 0u);
  BOOST_TEST(count_named(piped.program, "bubble3/") == 0u);
  BOOST_TEST(count_named(piped.program, "iteration3/") > 0u);
  for (const Op& op : piped.program.ops)
    if (op.pipeline == PipelineRole::Bubble) BOOST_TEST(op.model_flops == 0.0, op.name);
}

BOOST_AUTO_TEST_CASE(folded_and_full_runs_of_a_pipeline_are_byte_identical) {
  const json folded = folded_run_matching_full(kGpt2, "--hw tpu_v4 --topology 4x4x4 --trace none --set workload.training.steps=2 "
                                                      "--set workload.training.mesh.pipeline=z --set workload.training.per_replica_batch=8");
  BOOST_TEST(folded["collectives_per_step"]["pipeline"]["count"] == 28);
}

BOOST_AUTO_TEST_CASE(pipelines_that_cannot_be_are_refused_naming_the_key) {
  TempDir dir;
  const std::string out = " --trace none -o '" + dir.path("out") + "' ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"'" + kGpt2 + "' " + kStages + " --set workload.training.per_replica_batch=8 --set workload.training.pipeline.microbatches=6",
       "workload.training.pipeline.microbatches: 6 microbatches do not spread evenly over the 4 stages"},
      {"'" + kGpt2 + "' " + kStages + " --set workload.training.per_replica_batch=4 --set workload.training.pipeline.microbatches=8",
       "8 microbatches do not divide the 4 samples"},
      {"'" + kGpt2 + "' " + kStages + " --set workload.training.pipeline.repeats=2",
       "the model's 12 repeating layers (of 7 nodes each) do not split into 8 chunks"},
      {"'" + kGpt2 + "' " + kStages + " --set workload.training.fsdp=true", "a pipeline with fsdp or weight_update_sharding"},
      {"'" + source_path("workloads/examples/mlp_mnist.json") + "' " + kStages, "the model has no repeating layers"},
      {"'" + kGpt2 + "' --hw tpu_v3 --topology 2x4 --set workload.training.mesh.pipeline=y", "chips of one replica each"},
  };
  for (const auto& [args, expected] : cases) {
    BOOST_TEST_CONTEXT(args) {
      const CommandResult r = run_tpusim("run " + args + out);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(r.err.find(expected) != std::string::npos, r.err);
    }
  }
}
