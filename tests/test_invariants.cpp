// The end-of-run checks, the stuck-simulation report and the memory limit: each shown to pass on
// honest runs and to fire on an injected fault (hw.faults) or an impossible request.
#define BOOST_TEST_MODULE invariants
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

LoweredStep lower_example(const std::string& name, const std::string& hw, const std::string& topology) {
  ConfigRequest request;
  request.workload_path = source_path("workloads/examples/" + name + ".json");
  request.hw = hw;
  request.topology = topology;
  const Config config = load_config(request);
  return lower_training_step(config.workload, config.hw);
}

double program_matmul_flops(const Program& program) {
  double flops = 0;
  for (const Op& op : program.ops)
    if (op.kind == OpKind::Matmul) flops += op.model_flops;
  return flops;
}

// The --set that injects one fault.
std::string fault(const std::string& kind, int chip) {
  return "--set 'hw.faults=[{\"kind\": \"" + kind + "\", \"chip\": " + std::to_string(chip) + "}]'";
}
}  // namespace

BOOST_AUTO_TEST_CASE(training_flops_are_three_forward_passes_where_every_input_needs_a_gradient) {
  // BERT's first matmul layer sits behind the (trainable) embedding: every matmul has its dW and
  // dX, so a step is exactly three forward passes; attention's per-head products count per head.
  const LoweredStep bert = lower_example("bert_base_128", "tpu_v5e", "2x2");
  const double per_sample_forward = bert.model.forward_flops_per_sample();
  BOOST_TEST(bert.model.training_flops_per_sample() == 3 * per_sample_forward, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(program_matmul_flops(bert.program) ==
                 static_cast<double>(bert.per_core_batch) * bert.model.training_flops_per_sample(),
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(the_first_convolution_has_no_input_gradient_and_strided_ones_count_no_zeros) {
  // ResNet-50's first convolution reads the image: no dX. Its strided convolutions' dX products
  // run over every input pixel and tap, but count only what their forward counts.
  const LoweredStep resnet = lower_example("resnet50", "tpu_v2", "");
  double first_conv = 0;
  for (const Node& node : resnet.model.nodes)
    if (node.spec.type == "conv2d") {
      first_conv = node.forward_flops;
      break;
    }
  BOOST_TEST(first_conv > 0);
  const double expected = 3 * resnet.model.forward_flops_per_sample() - first_conv;
  BOOST_TEST(resnet.model.training_flops_per_sample() == expected, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(program_matmul_flops(resnet.program) == static_cast<double>(resnet.per_core_batch) * expected,
             boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_finished_run_reports_the_checked_figures) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' --trace none");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  const json summary = json::parse(read_file(dir.path("out/summary.json")));
  const json& c = summary["checks"];
  BOOST_TEST(c["mxu_flops_useful"].get<double>() == c["mxu_flops_model"].get<double>(), boost::test_tools::tolerance(1e-9));
  BOOST_TEST(c["mxu_flops_model"].get<double>() ==
                 summary["model_flops_per_step"].get<double>() * summary["steps"].get<double>(),
             boost::test_tools::tolerance(1e-9));
  // The arrays do the useful work and their padding: never less than the useful work.
  BOOST_TEST(c["mxu_flops_executed"].get<double>() >= c["mxu_flops_useful"].get<double>());
  BOOST_TEST(c["dma_bytes"].get<std::uint64_t>() > 0u);
  BOOST_TEST(c["hbm_bytes"].get<std::uint64_t>() > c["dma_bytes"].get<std::uint64_t>());  // + the reductions' traffic
  BOOST_TEST(c["ici_link_bytes"].get<std::uint64_t>() > 0u);
  BOOST_TEST(c["busiest_unit_fraction"].get<double>() > 0.0);
  BOOST_TEST(c["busiest_unit_fraction"].get<double>() <= 1.0);
  BOOST_TEST(c["collectives_completed"].get<std::uint64_t>() % (summary["chips"].get<std::uint64_t>() * 4) == 0u);
}

BOOST_AUTO_TEST_CASE(a_dma_that_drops_a_chunk_breaks_the_byte_check) {
  const CommandResult r = run_tpusim("gemm 4096 4096 4096 --hw tpu_v4 " + fault("dma_drop_chunk", 0));
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "end-of-run check failed"), r.err);
  BOOST_TEST(contains(r.err, "DMA bytes: slice.chip_0.core_0: the DMA engines were asked for"), r.err);
  // Without the fault the same matmul passes every check.
  BOOST_TEST(run_tpusim("gemm 4096 4096 4096 --hw tpu_v4").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(a_chip_that_never_joins_a_collective_is_named_with_the_op_and_the_waiting_chips) {
  const CommandResult r =
      run_tpusim("collective --bytes 1048576 --hw tpu_v4 --topology 2x2x2 " + fault("skip_collective", 2));
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "collective stuck"), r.err);
  BOOST_TEST(contains(r.err, "collective \"all-reduce 1048576 B\" (step 0) never completed: chips 0-1, 3-7 of its group of 8 "
                             "joined and wait; never joined: chip 2"),
             r.err);
}

BOOST_AUTO_TEST_CASE(a_stuck_run_leaves_no_outputs) {
  TempDir dir;
  const CommandResult r =
      run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' " + fault("skip_collective", 1));
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "simulation stuck"), r.err);
  BOOST_TEST(contains(r.err, "never joined: chip 1"), r.err);
  BOOST_TEST(!fs::exists(dir.path("out")));
  BOOST_TEST(fs::is_empty(dir.path("")));  // no staging directory left behind either
}

// Issue 41: with every chip of the slice skipping its collectives, no chip waited on another,
// and the run passed its checks with a step half as long and no ICI bytes. The bytes each chip's
// collectives must send are now counted from their plans.
BOOST_AUTO_TEST_CASE(a_fault_every_chip_shares_is_caught_by_the_bytes_the_program_asks_for) {
  TempDir dir;
  std::string all_chips;
  for (int chip = 0; chip < 4; ++chip)
    all_chips += std::string(all_chips.empty() ? "" : ", ") + "{\"kind\": \"skip_collective\", \"chip\": " + std::to_string(chip) + "}";
  const CommandResult r =
      run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' --set 'hw.faults=[" + all_chips + "]'");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(contains(r.err, "ICI bytes: slice.chip_0.collective: the program's collectives ask it to send"), r.err);
  BOOST_TEST(contains(r.err, "it sent 0"), r.err);
  BOOST_TEST(!fs::exists(dir.path("out")));
  const CommandResult c = run_tpusim("collective --bytes 1048576 --hw tpu_v4 --topology 2x2x1 --set 'hw.faults=[" + all_chips + "]'");
  BOOST_TEST(c.exit_code == 1);
  BOOST_TEST(contains(c.err, "it sent 0"), c.err);
}

BOOST_AUTO_TEST_CASE(an_unknown_fault_is_an_input_error) {
  const CommandResult r = run_tpusim("collective --bytes 1024 " + fault("dma_drop_everything", 0));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "hw.faults[0].kind: expected one of dma_drop_chunk, skip_collective"), r.err);
  const CommandResult outside = run_tpusim("collective --bytes 1024 --hw tpu_v4 --topology 2x2x1 " + fault("skip_collective", 4));
  BOOST_TEST(outside.exit_code == 2);
  BOOST_TEST(contains(outside.err, "hw.faults[0].chip: chip 4 is not in the 2x2x1 slice (chips 0-3)"), outside.err);
}

BOOST_AUTO_TEST_CASE(a_run_over_the_memory_limit_is_refused_before_it_starts) {
  TempDir dir;
  const CommandResult r =
      run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' --max-memory 1M");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "would need about"), r.err);
  BOOST_TEST(contains(r.err, "more than 1.0 MiB (the --max-memory limit)"), r.err);
  BOOST_TEST(!fs::exists(dir.path("out")));
  BOOST_TEST(run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") + "' --max-memory 4GiB").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(a_slice_larger_than_the_limit_is_refused_without_being_built) {
  // 4096 chips would take minutes to simulate; the refusal must come first.
  const CommandResult r =
      run_tpusim("collective --bytes 1073741824 --hw tpu_v4 --topology 16x16x16 --all-chips --max-memory 100M");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "simulating the collective on 16x16x16 would need about"), r.err);
}

BOOST_AUTO_TEST_CASE(a_malformed_memory_size_names_the_option) {
  const CommandResult r = run_tpusim("gemm 128 128 128 --max-memory lots");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "--max-memory lots: expected a size such as 512M, 4G or 4GiB"), r.err);
}

BOOST_AUTO_TEST_CASE(a_sweep_passes_its_memory_limit_to_every_point) {
  TempDir dir;
  const CommandResult r = run_tpusim("sweep '" + example_workload() + "' --vary workload.training.steps=1,2 -j 1 " +
                                     "--max-memory 1M -o '" + dir.path("sweep") + "'");
  BOOST_TEST(r.exit_code == 1);  // every point refused
  const json sweep = json::parse(read_file(dir.path("sweep/sweep.json")));
  BOOST_REQUIRE(sweep["rows"].size() == 2u);
  for (const auto& row : sweep["rows"]) {
    BOOST_TEST(row["status"] == "input_error");
    BOOST_TEST(contains(row["reason"].get<std::string>(), "more than 1.0 MiB (the --max-memory limit)"));
  }
  BOOST_TEST(run_tpusim("sweep '" + example_workload() + "' --max-memory lots -o '" + dir.path("bad") + "'").exit_code == 2);
}
