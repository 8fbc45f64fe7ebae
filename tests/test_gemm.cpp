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
