// `tpusim gemm`: the roofline emerges from the simulation (large square matmuls are MXU-bound,
// skinny ones HBM-bound), and the output carries the promised keys.
#define BOOST_TEST_MODULE gemm
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "hw/systolic_timing.hpp"
#include "test_helpers.hpp"

using namespace tpusim::test;
using json = nlohmann::json;

namespace {

json gemm(const std::string& args) {
  const CommandResult r = run_tpusim("gemm " + args + " --json");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

}  // namespace

BOOST_AUTO_TEST_CASE(json_has_the_documented_keys) {
  const json g = gemm("1024 1024 1024 --hw tpu_v5e");
  for (const char* key : {"cycles", "time_s", "flops_per_s", "mxu_utilization", "hbm_bytes", "bound"})
    BOOST_TEST(g.contains(key), key);
  // cycles are the time in 1.5 GHz core cycles, rounded to the nearest cycle
  BOOST_TEST(std::abs(g["cycles"].get<double>() - g["time_s"].get<double>() * 1.5e9) <= 0.5);
  BOOST_TEST(g["flops_per_s"].get<double>() == 2.0 * 1024 * 1024 * 1024 / g["time_s"].get<double>(),
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(large_square_matmuls_are_mxu_bound) {
  const json g = gemm("8192 8192 8192 --hw tpu_v5e");
  BOOST_TEST(g["bound"] == "compute");
  BOOST_TEST(g["mxu_utilization"].get<double>() > 0.85);
  BOOST_TEST(g["mxu_utilization"].get<double>() <= 1.0);
}

BOOST_AUTO_TEST_CASE(skinny_matmuls_are_hbm_bound) {
  // 8 rows: 8192 x 8192 bf16 weights (128 MiB) must stream from HBM for 1 MFLOP per row.
  const json g = gemm("8 8192 8192 --hw tpu_v5e");
  BOOST_TEST(g["bound"] == "memory");
  BOOST_TEST(g["hbm_bw_gbps"].get<double>() > 0.7 * 819);
  BOOST_TEST(g["hbm_bw_gbps"].get<double>() <= 819);
  BOOST_TEST(g["hbm_bytes"].get<std::uint64_t>() >= 8192ull * 8192 * 2);
}

BOOST_AUTO_TEST_CASE(fp32_passes_and_int8_rates_scale_mxu_time) {
  const double bf16 = gemm("4096 4096 4096 --hw tpu_v5e --block 512x1024x1024")["time_s"];
  const double highest = gemm("4096 4096 4096 --hw tpu_v5e --dtype fp32 --precision highest --block 512x512x512")["time_s"];
  const double int8 = gemm("4096 4096 4096 --hw tpu_v5e --dtype int8 --block 512x1024x1024")["time_s"];
  BOOST_TEST(highest > 5 * bf16);  // six bf16 passes
  BOOST_TEST(int8 < 0.6 * bf16);   // twice the rate on v5e
  const CommandResult r = run_tpusim("gemm 128 128 128 --hw tpu_v2 --dtype int8");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("has no int8 path") != std::string::npos);
}

// TPU7x's arrays stream at the 82.9% of their documented rate that its long GEMMs are measured
// at (hw.core.mxu.sustained_fraction); utilization stays against the documented peak.
BOOST_AUTO_TEST_CASE(a_sustained_fraction_slows_the_array_and_shows_in_utilization) {
  const std::string shape = "16384 16384 16384 --hw tpu_v7";
  const json full = gemm(shape + " --set hw.core.mxu.sustained_fraction=1");
  const json preset = gemm(shape);
  const json half = gemm(shape + " --set hw.core.mxu.sustained_fraction=0.5");
  BOOST_TEST(full["bound"] == "compute");
  BOOST_TEST(full["mxu_utilization"].get<double>() > 0.99);
  // compute-bound: the time grows as the rate falls, the pipeline's fill and drain aside
  BOOST_TEST(preset["time_s"].get<double>() / full["time_s"].get<double>() == 1 / 0.829,
             boost::test_tools::tolerance(0.005));
  BOOST_TEST(half["time_s"].get<double>() / full["time_s"].get<double>() == 2.0, boost::test_tools::tolerance(0.005));
  BOOST_TEST(preset["mxu_utilization"].get<double>() <= 0.829);
  BOOST_TEST(preset["mxu_utilization"].get<double>() > 0.82);
  for (const char* bad : {"0", "1.5", "-1"})
    BOOST_TEST(run_tpusim("gemm 128 128 128 --hw tpu_v7 --set hw.core.mxu.sustained_fraction=" + std::string(bad)).exit_code == 2,
               bad);
}

BOOST_AUTO_TEST_CASE(scalesim_compat_reports_the_closed_form) {
  const json g = gemm("512 10 784 --hw tpu_v2 --scalesim-compat");
  // 7 folds of 2 x 128 + 128 + 512 - 2 cycles on one 128 x 128 array
  BOOST_TEST(g["cycles"].get<std::uint64_t>() == 7u * 894u);
  BOOST_TEST(g["mode"] == "scalesim-compat");
}

BOOST_AUTO_TEST_CASE(array_and_mxu_overrides) {
  const json g = gemm("1024 1024 1024 --hw tpu_v5e --array 256x256 --mxus 1");
  BOOST_TEST(g["array"] == "256x256");
  BOOST_TEST(g["mxus"] == 1);
  const CommandResult bad = run_tpusim("gemm 1024 1024 1024 --array 256by256");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("--array 256by256: expected ROWSxCOLS") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(two_cores_of_a_chip_contend_for_its_hbm) {
  // A skinny matmul streams its weights from HBM: two TensorCores of one v4 chip doing it at
  // once share the chip's HBM and take much longer; a large one is MXU-bound and does not care.
  const json skinny_one = gemm("64 8192 8192 --hw tpu_v4");
  const json skinny_two = gemm("64 8192 8192 --hw tpu_v4 --cores 2");
  BOOST_TEST(skinny_one["hbm_busy_fraction"].get<double>() > 0.8);  // one core nearly fills the HBM
  BOOST_TEST(skinny_two["bound"] == "memory");
  BOOST_TEST(skinny_two["time_s"].get<double>() > 1.6 * skinny_one["time_s"].get<double>());
  const json square_one = gemm("8192 8192 8192 --hw tpu_v4");
  const json square_two = gemm("8192 8192 8192 --hw tpu_v4 --cores 2");
  BOOST_TEST(square_two["time_s"].get<double>() < 1.05 * square_one["time_s"].get<double>());
  BOOST_TEST(run_tpusim("gemm 64 64 64 --hw tpu_v5e --cores 2").exit_code == 2);  // v5e has one core
}

BOOST_AUTO_TEST_CASE(each_v3_core_has_its_own_half_of_the_hbm) {
  // On v2 and v3 each TensorCore is a device with its own HBM slice: a memory-bound op on one
  // core gets half the chip's bandwidth, and the other core running the same op costs nothing.
  const auto op = [](const std::string& args) {
    const CommandResult r = run_tpusim("op add --shape 8192,4096 --hw tpu_v3 --json " + args);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const json one = op("");
  const json two = op("--cores 2");
  const json shared = op("--set hw.chip.hbm_per_core=false");
  BOOST_TEST(one["bound"] == "memory");
  BOOST_TEST(two["time_s"].get<double>() == one["time_s"].get<double>());
  BOOST_TEST(one["time_s"].get<double>() > 1.9 * shared["time_s"].get<double>());
  BOOST_TEST(one["hbm_bw_gbps"].get<double>() < 450);  // the core's share of the 900 GB/s
  BOOST_TEST(op("--set hw.chip.hbm_per_core=false --cores 2")["time_s"].get<double>() > 1.9 * shared["time_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(a_framework_timer_sees_the_launch_too) {
  const json g = gemm("1024 1024 1024 --hw tpu_v5e --set hw.host.launch_overhead_us=80");
  BOOST_TEST(g["launch_overhead_s"].get<double>() == 80e-6, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(g["framework_time_s"].get<double>() == g["time_s"].get<double>() + 80e-6, boost::test_tools::tolerance(1e-12));
  const json none = gemm("1024 1024 1024 --hw tpu_v5e --set hw.host.launch_overhead_us=0");
  BOOST_TEST(none["framework_time_s"].get<double>() == none["time_s"].get<double>());
  BOOST_TEST(none["time_s"].get<double>() == g["time_s"].get<double>());  // the device does not see it
}

BOOST_AUTO_TEST_CASE(one_vector_op_is_charged_as_a_training_step_charges_it) {
  const auto op = [](const std::string& args) {
    const CommandResult r = run_tpusim("op " + args + " --json");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  // A large bf16 softmax reads and writes its tensor once and streams at HBM's rate.
  const json softmax = op("softmax --shape 8192,4096 --hw tpu_v5e");
  BOOST_TEST(softmax["hbm_bytes"].get<std::uint64_t>() == 2ull * 8192 * 4096 * 2);
  BOOST_TEST(softmax["bound"] == "memory");
  BOOST_TEST(softmax["hbm_bw_gbps"].get<double>() > 0.8 * 819);
  // An add reads two inputs; fp32 doubles the bytes and (memory-bound) about the time.
  const json add = op("add --shape 8192x4096 --hw tpu_v5e");
  BOOST_TEST(add["hbm_bytes"].get<std::uint64_t>() == 3ull * 8192 * 4096 * 2);
  const json add32 = op("add --shape 8192x4096 --hw tpu_v5e --dtype fp32");
  BOOST_TEST(add32["time_s"].get<double>() > 1.8 * add["time_s"].get<double>());
  // More vector work per element on the same bytes can only take longer.
  const json gelu = op("gelu --shape 8192,4096 --hw tpu_v5e");
  const json relu = op("relu --shape 8192,4096 --hw tpu_v5e");
  BOOST_TEST(gelu["time_s"].get<double>() >= relu["time_s"].get<double>());
  BOOST_TEST(gelu["framework_time_s"].get<double>() == gelu["time_s"].get<double>() + gelu["launch_overhead_s"].get<double>());
  for (const char* bad : {"op softmax --shape 0,4", "op softmax --shape 4,", "op softmax --shape a", "op sofmax --shape 4",
                          "op add --shape 4 --cores 2 --hw tpu_v5e", "op add --shape 99999999,99999999"})
    BOOST_TEST(run_tpusim(bad).exit_code == 2, bad);
}

BOOST_AUTO_TEST_CASE(a_generation_that_reduces_along_lanes_in_passes_of_their_own_reads_the_input_again) {
  const auto op = [](const std::string& args) {
    const CommandResult r = run_tpusim("op " + args + " --json");
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(r.out);
  };
  const std::uint64_t tensor = 4096ull * 8192 * 4;  // f32
  const auto bytes = [&](const std::string& kind, double passes) {
    return op(kind + " --shape 4096,8192 --dtype fp32 --hw tpu_v3 --set hw.core.vpu.lane_reduction_extra_passes=" +
              std::to_string(passes))["hbm_bytes"]
        .get<std::uint64_t>();
  };
  // None: one read and one write. A softmax reduces twice along its rows (max, then sum), a layer
  // norm once (its mean and mean square together); each reduction reads the input again per pass.
  BOOST_TEST(bytes("softmax", 0) == 2 * tensor);
  BOOST_TEST(bytes("softmax", 1.5) == 2 * tensor + 3 * tensor);
  BOOST_TEST(bytes("layer_norm", 2) == 2 * tensor + 2 * tensor);
  // Elementwise ops and a batch norm (statistics over the rows, not along them) are unaffected.
  BOOST_TEST(bytes("gelu", 2) == 2 * tensor);
  BOOST_TEST(bytes("batch_norm", 2) == bytes("batch_norm", 0));
  // v3's preset sets it (fitted on a measured f32 softmax); the more it reads, the longer it takes.
  const json v3 = op("softmax --shape 4096,8192 --dtype fp32 --hw tpu_v3");
  const json none = op("softmax --shape 4096,8192 --dtype fp32 --hw tpu_v3 --set hw.core.vpu.lane_reduction_extra_passes=0");
  BOOST_TEST(v3["hbm_bytes"].get<std::uint64_t>() > none["hbm_bytes"].get<std::uint64_t>());
  BOOST_TEST(v3["time_s"].get<double>() > 3 * none["time_s"].get<double>());
  BOOST_TEST(run_tpusim("op softmax --shape 4 --hw tpu_v3 --set hw.core.vpu.lane_reduction_extra_passes=-1").exit_code == 2);
}

// The same charge in a training step: BERT's softmaxes and layer-norm chains on v3 read their
// reductions' bytes again, so the step gets longer, and by nothing where the preset says 0.
BOOST_AUTO_TEST_CASE(a_v3_training_step_pays_for_its_lane_reductions) {
  const auto step_s = [](const std::string& hw, const std::string& passes) {
    const TempDir dir;
    const CommandResult r =
        run_tpusim("run '" + source_path("workloads/examples/bert_base_128.json") + "' --hw " + hw +
                   " --topology 2x2 --set workload.training.per_replica_batch=2 --set workload.training.steps=1"
                   " --trace none -o '" + dir.path("out") + "'" +
                   (passes.empty() ? "" : " --set hw.core.vpu.lane_reduction_extra_passes=" + passes));
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return json::parse(read_file(dir.path("out/summary.json")))["step_time_s"].get<double>();
  };
  const double v3 = step_s("tpu_v3", ""), none = step_s("tpu_v3", "0");
  BOOST_TEST(v3 > 1.02 * none);
  BOOST_TEST(step_s("tpu_v3", "2") < v3);  // fewer passes, less time
  BOOST_TEST(step_s("tpu_v5e", "") == step_s("tpu_v5e", "0"));
}
