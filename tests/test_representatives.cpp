// --representatives: one simulated chip per class of symmetric chips. The symmetry itself in plain
// C++ (which chips fold, and that a readdressed piece takes the route its original would), then
// end to end: exact where no two parts of a collective share a chip's units at one instant,
// within the full simulation's own spread of symmetric chips elsewhere, and every preset's
// largest slice.
#define BOOST_TEST_MODULE representatives
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "hw/symmetry.hpp"
#include "test_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

Program training_like_program(CollectiveAlgorithm algorithm) {
  Program p;
  Op infeed;
  infeed.kind = OpKind::Infeed;
  Op reduce;
  reduce.id = 1;
  reduce.kind = OpKind::Collective;
  reduce.collective.bytes = 1 << 20;
  reduce.collective.algorithm = algorithm;
  p.ops = {infeed, reduce};
  return p;
}

HwConfig hw_of(std::vector<std::uint32_t> dims, std::uint32_t chips_per_host) {
  HwConfig hw;
  hw.slice_dims = std::move(dims);
  hw.host.chips_per_host = chips_per_host;
  return hw;
}

json summary_of(const TempDir& dir, const std::string& name, const std::string& args) {
  const CommandResult r = run_tpusim("run " + args + " --trace none -o '" + dir.path(name) + "'");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args + ": " + r.err);
  return json::parse(read_file(dir.path(name + "/summary.json")));
}

json collective(const std::string& args) {
  const CommandResult r = run_tpusim("collective " + args + " --json");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args + ": " + r.err);
  return json::parse(r.out);
}

}  // namespace

BOOST_AUTO_TEST_CASE(wrapping_axes_fold_by_whole_hosts_and_two_chip_axes_by_reflection) {
  const Program program = training_like_program(CollectiveAlgorithm::TorusAllAxes);
  // v4 16x16x16, 4 chips per host along x: one host's four chips stand for the pod.
  const Torus pod({16, 16, 16}, {true, true, true});
  const SimulatedSlice s = plan_simulated_slice(pod, hw_of({16, 16, 16}, 4), program, true);
  BOOST_TEST(s.box == std::vector<std::uint32_t>({4, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(s.multiplicity == 1024u);
  BOOST_TEST(s.chips(pod) == std::vector<std::uint32_t>({0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(s.representative(pod, 4095) == 3u);  // (15, 15, 15): x 15 mod 4
  // 2x2x4 without wraparound on the two-chip axes: hosts of 2x2 chips, z wraps.
  const Torus small({2, 2, 4}, {false, false, true});
  const SimulatedSlice t = plan_simulated_slice(small, hw_of({2, 2, 4}, 4), program, true);
  BOOST_TEST(t.box == std::vector<std::uint32_t>({2, 2, 1}), boost::test_tools::per_element());
  // Without an infeed there are no hosts to respect: the two-chip axes fold by reflection too.
  Program no_infeed = program;
  no_infeed.ops.erase(no_infeed.ops.begin());
  const SimulatedSlice u = plan_simulated_slice(small, hw_of({2, 2, 4}, 4), no_infeed, true);
  BOOST_TEST(u.box == std::vector<std::uint32_t>({1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(u.mirrored[0]);
  BOOST_TEST(!u.mirrored[2]);
}

BOOST_AUTO_TEST_CASE(what_breaks_the_symmetry_keeps_every_chip) {
  const Torus line({8, 8}, {false, false});  // no wraparound, axes longer than two chips
  const SimulatedSlice a = plan_simulated_slice(line, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(!a.folded());
  BOOST_TEST(a.chip_count() == 64u);
  const Torus torus({8, 8}, {true, true});
  const SimulatedSlice b = plan_simulated_slice(torus, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::Ring), true);
  BOOST_TEST(!b.folded());
  BOOST_TEST(b.all_chips_because.find("snakes") != std::string::npos);
  const SimulatedSlice c = plan_simulated_slice(torus, hw_of({8, 8}, 3), training_like_program(CollectiveAlgorithm::Torus), true);
  BOOST_TEST(c.all_chips_because.find("different numbers of chips") != std::string::npos);  // 64 chips, 3 per host
  const SimulatedSlice d = plan_simulated_slice(torus, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::Torus), false);
  BOOST_TEST(!d.folded());  // not asked
}

// A piece that leaves the simulated box is readdressed by the symmetry that maps the link's far
// end to its representative; from there on it must take the links its original would have taken
// (the same axis and direction under a translation, the opposite direction under a reflection)
// and arrive at the representative of its destination.
BOOST_AUTO_TEST_CASE(readdressed_pieces_follow_the_routes_of_their_originals) {
  struct Case {
    std::vector<std::uint32_t> dims;
    std::vector<bool> wraps;
    std::uint32_t per_host;
    bool infeed;
  };
  for (const Case& k : {Case{{16, 16, 16}, {true, true, true}, 4, true}, Case{{2, 2, 4}, {false, false, true}, 4, false},
                        Case{{16, 16}, {true, true}, 8, true}, Case{{8, 2, 5}, {true, false, false}, 2, true}}) {
    const Torus torus(k.dims, k.wraps);
    Program program = training_like_program(CollectiveAlgorithm::Torus);
    if (!k.infeed) program.ops.erase(program.ops.begin());
    const SimulatedSlice s = plan_simulated_slice(torus, hw_of(k.dims, k.per_host), program, true);
    BOOST_TEST_CONTEXT(torus.shape()) {
      BOOST_TEST(s.folded());
      std::size_t crossings = 0;
      for (std::uint32_t chip : s.chips(torus))
        for (const LinkId& link : torus.outgoing_links(chip)) {
          const auto far = static_cast<std::uint32_t>(torus.far_end(link));
          if (s.simulates(torus, far)) continue;
          ++crossings;
          const std::uint32_t rep = s.representative(torus, far);
          BOOST_TEST(s.map_destination(torus, far, far) == rep);
          for (std::uint32_t dest = 0; dest < torus.chip_count(); dest += 7) {
            const std::uint32_t mapped = s.map_destination(torus, far, dest);
            BOOST_TEST(s.representative(torus, mapped) == s.representative(torus, dest));
            if (dest == far) continue;
            const LinkId original = torus.first_hop(far, dest), image = torus.first_hop(rep, mapped);
            BOOST_TEST(original.axis == image.axis);
            const bool reflected = s.mirrored[original.axis] && torus.coords(far)[original.axis] >= s.box[original.axis];
            BOOST_TEST(original.positive == (reflected ? !image.positive : image.positive));
          }
        }
      BOOST_TEST(crossings > 0u);
    }
  }
}

// A collective unit books the work of its ring steps in a canonical order, so nothing in a
// collective depends on the order in which the kernel runs equal-time processes: the folded
// simulation gives exactly the full one's figures, and the full one's chips all end together.
BOOST_AUTO_TEST_CASE(collectives_are_exact) {
  for (const std::string args : {"--hw tpu_v4 --topology 4x4x4", "--hw tpu_v4 --topology 8x4x4 --concurrent 2",
                                 "--hw tpu_v5e --topology 16x16 --op reduce-scatter --chunk-bytes 1048576",
                                 "--hw tpu_v4 --topology 4x4x4 --algorithm torus", "--hw tpu_v4 --topology 2x2x4 --algorithm torus",
                                 "--hw tpu_v4 --topology 4x4x4 --algorithm bidir_ring --group z",
                                 "--hw tpu_v5e --topology 16x16 --algorithm torus",
                                 "--hw tpu_v3 --topology 32x2 --algorithm torus --op reduce-scatter",
                                 "--hw tpu_v4 --topology 4x8x4 --algorithm torus --op all-gather --chunk-bytes 65536"}) {
    json full = collective("--bytes 16777216 " + args);
    json folded = collective("--bytes 16777216 --representatives " + args);
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(folded["simulation"]["mode"] == "representatives");
      BOOST_TEST(full["chip_end_spread_s"].get<double>() == 0.0);
      BOOST_TEST(folded["simulation"]["chips_simulated"].get<std::uint32_t>() < full["simulation"]["chips_simulated"].get<std::uint32_t>());
      full.erase("simulation");
      folded.erase("simulation");
      BOOST_TEST(folded.dump() == full.dump());
    }
  }
}

// Elsewhere symmetric chips of the full simulation differ by the order in which shared units take
// requests of the same instant, and the folded simulation has such an order of its own: it stays
// within that spread of the full one, to a hundredth of a percent of the step.
BOOST_AUTO_TEST_CASE(training_steps_stay_within_the_full_simulations_spread) {
  TempDir dir;
  int i = 0;
  for (const std::string args :
       {"workloads/examples/resnet50.json --hw tpu_v4 --topology 2x2x4 --set workload.training.per_replica_batch=32",
        "workloads/examples/mlp_mnist.json --hw tpu_v4 --topology 4x4x4",
        "workloads/examples/mlp_mnist.json --hw tpu_v5e --topology 16x16",
        "workloads/examples/gpt2_small.json --hw tpu_v4 --topology 2x2x4 --set workload.training.per_replica_batch=4"}) {
    const std::string run = "'" + source_path("") + args.substr(0, args.find(' ')) + "'" + args.substr(args.find(' ')) +
                            " --set workload.training.steps=2";
    const json full = summary_of(dir, std::to_string(i) + "full", run);
    const json folded = summary_of(dir, std::to_string(i++) + "folded", run + " --representatives");
    BOOST_TEST_CONTEXT(args) {
      BOOST_TEST(full["simulation"]["mode"] == "all_chips");
      BOOST_TEST(folded["simulation"]["mode"] == "representatives");
      BOOST_TEST(folded["global_batch"] == full["global_batch"]);
      const double f = full["step_time_s"].get<double>(), r = folded["step_time_s"].get<double>();
      BOOST_TEST(std::abs(r - f) <= full["step_end_spread"]["spread_s"].get<double>() + 1e-4 * f);
      BOOST_TEST(folded["traffic_per_step"] == full["traffic_per_step"]);  // bytes scale exactly
      BOOST_TEST(folded["checks"]["collectives_completed"] == full["checks"]["collectives_completed"]);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_largest_slice_of_every_preset_runs) {
  TempDir dir;
  for (const auto& [preset, topology] : std::vector<std::pair<std::string, std::string>>{
           {"tpu_v2", "16x16"}, {"tpu_v3", "32x32"}, {"tpu_v4", "16x16x16"}, {"tpu_v5p", "16x20x28"},
           {"tpu_v5e", "16x16"}, {"tpu_v6e", "16x16"}}) {
    const json s = summary_of(dir, preset, "'" + example_workload() + "' --hw " + preset + " --topology " + topology +
                                               " --set workload.training.steps=1 --set workload.training.global_batch=0"
                                               " --set workload.training.per_replica_batch=128 --representatives");
    BOOST_TEST_CONTEXT(preset << " " << topology) {
      BOOST_TEST(s["status"] == "ok");
      BOOST_TEST(s["simulation"]["mode"] == "representatives");
      BOOST_TEST(s["simulation"]["chips_simulated"].get<std::uint64_t>() * s["simulation"]["each_stands_for"].get<std::uint64_t>() ==
                 s["chips"].get<std::uint64_t>());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_slice_beyond_the_machines_memory_mappings_is_refused_before_it_starts) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + source_path("workloads/examples/resnet50.json") +
                                     "' --hw tpu_v4 --topology 16x16x16 --set workload.training.steps=1 --trace none -o '" +
                                     dir.path("out") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("SystemC threads") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("--representatives") != std::string::npos);
  BOOST_TEST(!std::filesystem::exists(dir.path("out")));
}

BOOST_AUTO_TEST_CASE(tracing_a_chip_a_representative_stands_for_is_refused) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + example_workload() +
                                     "' --hw tpu_v4 --topology 4x4x4 --representatives --trace-chips 0-5 -o '" + dir.path("out") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("chip 4 is not simulated") != std::string::npos, r.err);
  const CommandResult ok = run_tpusim("run '" + example_workload() +
                                      "' --hw tpu_v4 --topology 4x4x4 --representatives --trace-chips 0-3 -o '" + dir.path("ok") + "'");
  BOOST_TEST(ok.exit_code == 0, ok.err);
  BOOST_TEST(read_file(dir.path("ok/trace.json")).find("\"chip4") == std::string::npos);
}

// What breaks the symmetry is configuration: one chip at 90% clock. A synchronous step waits for
// it at the all-reduce, so a compute-bound step grows by about that chip's extra compute time
// (compute / 0.9 - compute), the summary names it, and --representatives simulates every chip.
BOOST_AUTO_TEST_CASE(a_slow_chip_slows_a_compute_bound_step_by_its_extra_compute_time) {
  TempDir dir;
  const std::string workload = source_path("bench/straggler/wide_mlp.json");
  const std::string slow = source_path("bench/straggler/v5e_chip5_at_90pct.json");
  const json even = summary_of(dir, "even", "'" + workload + "' --hw tpu_v5e --topology 4x4");
  const json uneven = summary_of(dir, "uneven", "'" + workload + "' --hw '" + slow + "' --topology 4x4 --representatives");
  const double step = even["step_time_s"].get<double>(), compute = even["breakdown"]["compute_s"].get<double>();
  BOOST_REQUIRE(compute > 0.7 * step);  // compute-bound
  const double expected = compute / 0.9 - compute;
  const double grew = uneven["step_time_s"].get<double>() - step;
  BOOST_TEST(grew > 0.8 * expected);
  BOOST_TEST(grew < 1.25 * expected);
  BOOST_TEST(uneven["straggler"]["core"] == "chip5.core0");
  BOOST_TEST(uneven["straggler"]["time_lost_s"].get<double>() > 0.5 * expected);
  BOOST_TEST(even["straggler"]["time_lost_s"].get<double>() < 0.05 * expected);
  BOOST_TEST(uneven["simulation"]["mode"] == "all_chips");
  BOOST_TEST(uneven["simulation"]["all_chips_because"].get<std::string>().find("slow chip") != std::string::npos);
  const CommandResult outside = run_tpusim("dump-config --hw tpu_v5e --topology 2x2 --set 'hw.slow_chips=[{\"chip\": 4}]'");
  BOOST_TEST(outside.exit_code == 2);
  BOOST_TEST(outside.err.find("hw.slow_chips[0].chip: chip 4 is not in the 2x2 slice") != std::string::npos, outside.err);
}
