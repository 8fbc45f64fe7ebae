// A collective algorithm of one's own (hw/collective.hpp), registered by a program that then runs
// tpusim's command line (tests/custom_collective_main.cpp, built as tpusim_custom_collective):
// its name is a choice like tpusim's own, and its plan runs on the chips' collective units.
#define BOOST_TEST_MODULE custom_collective
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"

using namespace tpusim::test;
using json = nlohmann::json;

namespace {

CommandResult run_custom(const std::string& args) { return run_program(CUSTOM_COLLECTIVE_BINARY, args); }

// `collective --json` of an all-reduce of `bytes` over a v5e 4x4 (16 chips) with `algorithm`.
json all_reduce(const std::string& algorithm, std::uint64_t bytes) {
  const CommandResult r = run_custom("collective --op all-reduce --hw tpu_v5e --topology 4x4 --json --bytes " + std::to_string(bytes) +
                                     " --algorithm " + algorithm);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

}  // namespace

// Recursive halving and doubling takes 2 log2(16) = 8 steps where a ring takes 2 x 15 = 30, but
// its partners further along the walk are several hops away, each hop paying its latency: when the steps' latency is the cost it still wins. When the bytes cost, the torus
// algorithm, which keeps every link of a chip busy, wins over exchanges whose routes share links.
BOOST_AUTO_TEST_CASE(a_users_algorithm_runs_and_pays_what_its_plan_sends) {
  const json small_ring = all_reduce("ring", 1024), small_hd = all_reduce("halving_doubling", 1024);
  BOOST_TEST(small_hd["algorithm"] == "halving_doubling");
  BOOST_TEST(small_hd["time_s"].get<double>() < small_ring["time_s"].get<double>());
  // More link bytes than the ring's, whose every step goes to a neighbour.
  BOOST_TEST(small_hd["ici_bytes"].get<std::uint64_t>() > small_ring["ici_bytes"].get<std::uint64_t>());
  BOOST_TEST(small_hd["simulation"]["mode"] == "all_chips");
  const json large_torus = all_reduce("torus_all_axes", 64ull << 20), large_hd = all_reduce("halving_doubling", 64ull << 20);
  BOOST_TEST(large_hd["time_s"].get<double>() > 1.5 * large_torus["time_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(its_name_is_a_choice_like_tpusims_own) {
  const CommandResult help = run_custom("collective --help");
  BOOST_TEST(contains(help.out, "halving_doubling (recursive halving, then recursive doubling"), help.out);
  TempDir dir;
  // A training step whose gradient all-reduce uses it: every chip simulated, the summary says why.
  const CommandResult step = run_custom("run '" + example_workload() + "' --trace none -o '" + dir.path("out") +
                                        "' --set workload.training.all_reduce.algorithm=halving_doubling");
  BOOST_REQUIRE_MESSAGE(step.exit_code == 0, step.err);
  const json summary = json::parse(read_file(dir.path("out/summary.json")));
  BOOST_TEST(summary["simulation"]["all_chips_because"] == "collective algorithm halving_doubling is a program's own");
  // The stock binary knows no such algorithm: refused, with the ones it knows.
  const CommandResult stock = run_tpusim("collective --op all-reduce --bytes 1024 --algorithm halving_doubling");
  BOOST_TEST(stock.exit_code == 2);
  BOOST_TEST(contains(stock.err, "torus_all_axes"), stock.err);
}
