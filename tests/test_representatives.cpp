// One simulated chip per class of symmetric chips, the default (--all-chips simulates every chip).
// The symmetry itself in plain C++ (which chips fold, and that a readdressed piece takes the route
// its original would), then end to end: collectives and training steps exact, byte for byte, and
// every preset's largest slice.
#define BOOST_TEST_MODULE representatives
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

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

// With no --trace in `args`, none.
json summary_of(const TempDir& dir, const std::string& name, const std::string& args) {
  const std::string trace = args.find("--trace ") == std::string::npos ? " --trace none" : "";
  const CommandResult r = run_tpusim("run " + args + trace + " -o '" + dir.path(name) + "'");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args + ": " + r.err);
  return json::parse(read_file(dir.path(name + "/summary.json")));
}

// Each case (a workload of workloads/examples and its arguments) for two steps, with --all-chips
// and folded: the folded run simulates fewer chips, and its summary is the full one's, byte for
// byte, apart from which chips ran.
void check_folded_runs_are_exact(const std::vector<std::string>& cases) {
  TempDir dir;
  int i = 0;
  for (const std::string& c : cases) {
    const std::string run = "'" + source_path("workloads/examples/") + c.substr(0, c.find(' ')) + "'" + c.substr(c.find(' ')) +
                            " --set workload.training.steps=2";
    json full = summary_of(dir, std::to_string(i) + "full", run + " --all-chips");
    json folded = summary_of(dir, std::to_string(i++) + "folded", run);
    BOOST_TEST_CONTEXT(c) {
      BOOST_TEST(full["simulation"]["mode"] == "all_chips");
      BOOST_TEST(folded["simulation"]["mode"] == "representatives");
      BOOST_TEST(folded["simulation"]["chips_simulated"].get<std::uint32_t>() < full["simulation"]["chips_simulated"].get<std::uint32_t>());
      full.erase("simulation");
      folded.erase("simulation");
      BOOST_TEST(folded.dump() == full.dump());
    }
  }
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
  BOOST_TEST(s.chips(pod) == std::vector<std::uint32_t>({0, 1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(s.stands_for(pod, 3) == 1024u);
  BOOST_TEST(s.largest_class() == 1024u);
  BOOST_TEST(s.representative(pod, 4095) == 3u);  // (15, 15, 15): x 15 mod 4
  // 2x2x4 without wraparound on the two-chip axes: hosts of 2x2 chips, z wraps.
  const Torus small({2, 2, 4}, {false, false, true});
  const SimulatedSlice t = plan_simulated_slice(small, hw_of({2, 2, 4}, 4), program, true);
  BOOST_TEST(t.chips(small) == std::vector<std::uint32_t>({0, 1, 2, 3}), boost::test_tools::per_element());
  // Without an infeed there are no hosts to respect: the two-chip axes fold by reflection too.
  Program no_infeed = program;
  no_infeed.ops.erase(no_infeed.ops.begin());
  const SimulatedSlice u = plan_simulated_slice(small, hw_of({2, 2, 4}, 4), no_infeed, true);
  BOOST_TEST(u.chips(small) == std::vector<std::uint32_t>({0}), boost::test_tools::per_element());
  BOOST_TEST(u.representative(small, 3) == 0u);  // (1, 1, 0), mirrored on x and y
}

// A slow chip breaks every translation, but not the reflections through it along the axes no
// host spans; classes are then of 1, 2 or 4 chips, and together they are the whole pod.
BOOST_AUTO_TEST_CASE(a_slow_chip_folds_by_the_reflections_through_it) {
  const Torus pod({16, 16, 16}, {true, true, true});
  HwConfig hw = hw_of({16, 16, 16}, 4);
  hw.slow_chips = {{0, 0.9, 1}};
  const SimulatedSlice s = plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(s.chip_count() == 16u * 9u * 9u);  // y and z: 0, {1, 15}, ..., {7, 9}, 8
  BOOST_TEST(s.largest_class() == 4u);
  std::uint64_t chips = 0;
  for (std::uint32_t c : s.chips(pod)) chips += s.stands_for(pod, c);
  BOOST_TEST(chips == 4096u);
  BOOST_TEST(s.stands_for(pod, 0) == 1u);
  BOOST_TEST(s.representative(pod, pod.chip_at({5, 15, 9})) == pod.chip_at({5, 1, 7}));
  // Two slow chips related by a translation keep it: y folds by 8 and by the reflections.
  hw.slow_chips = {{0, 0.9, 1}, {pod.chip_at({0, 8, 0}), 0.9, 1}};
  const SimulatedSlice two = plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(two.chip_count() == 16u * 5u * 9u);
  // A slow chip of another speed is not the same part.
  hw.slow_chips[1].core_freq_scale = 0.8;
  BOOST_TEST(plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true).chip_count() == 16u * 9u * 9u);
  // A ring that runs one way is not mapped onto itself by a reflection.
  hw.slow_chips = {{0, 0.9, 1}};
  Program one_way = training_like_program(CollectiveAlgorithm::Ring);
  one_way.ops[1].collective.group_axes = 1u << 2;  // along z only: no snake
  BOOST_TEST(plan_simulated_slice(pod, hw, one_way, true).chip_count() == 16u * 9u * 16u);
  // A slow link is kept only where its image is slow alike: both directions of one cable fold
  // the reflection that swaps its ends.
  hw.slow_chips.clear();
  hw.slow_links = {{0, 2, true, 0.5}, {pod.chip_at({0, 0, 1}), 2, false, 0.5}};
  const SimulatedSlice cable = plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(cable.chip_count() == 16u * 9u * 8u);
  hw.slow_links.pop_back();
  BOOST_TEST(plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true).chip_count() == 16u * 9u * 16u);
  // A link that is down sends its ring round the long way, in pieces that queue on its axis's
  // links in the order they were sent: its axis is not reflected, the others are, through it.
  hw.slow_links = {{0, 2, true, 0}};
  BOOST_TEST(plan_simulated_slice(pod, hw, training_like_program(CollectiveAlgorithm::TorusAllAxes), true).chip_count() == 16u * 9u * 16u);
}

BOOST_AUTO_TEST_CASE(what_breaks_the_symmetry_keeps_every_chip) {
  // No wraparound, axes longer than two chips: a line folds only by its mirror, and a host along
  // x keeps x from it.
  const Torus line({8, 8}, {false, false});
  const SimulatedSlice a = plan_simulated_slice(line, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(a.chip_count() == 32u);
  const Torus torus({8, 8}, {true, true});
  const SimulatedSlice b = plan_simulated_slice(torus, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::Ring), true);
  BOOST_TEST(!b.folded());
  BOOST_TEST(b.all_chips_because.find("snakes") != std::string::npos);
  const SimulatedSlice c = plan_simulated_slice(torus, hw_of({8, 8}, 3), training_like_program(CollectiveAlgorithm::Torus), true);
  BOOST_TEST(c.all_chips_because.find("different numbers of chips") != std::string::npos);  // 64 chips, 3 per host
  const SimulatedSlice d = plan_simulated_slice(torus, hw_of({8, 8}, 4), training_like_program(CollectiveAlgorithm::Torus), false);
  BOOST_TEST(!d.folded());  // not asked
  // One slow chip on a line of even length: no mirror of the line keeps it.
  HwConfig slow = hw_of({8, 8}, 8);
  slow.slow_chips = {{9, 0.5, 1}};
  const SimulatedSlice e = plan_simulated_slice(line, slow, training_like_program(CollectiveAlgorithm::TorusAllAxes), true);
  BOOST_TEST(!e.folded());
  BOOST_TEST(e.all_chips_because.find("slow chips") != std::string::npos);
}

// A link into a simulated chip from one that is not carries what the symmetry taking the sender
// to its representative maps onto a link of the representative, which delivers a copy. That
// link must lead from the representative to the image of the receiving chip, and whatever it
// carries further must take the links its original would have taken (the same axis; the same
// direction under a translation, the opposite under a reflection), to the image of its
// destination.
BOOST_AUTO_TEST_CASE(readdressed_pieces_follow_the_routes_of_their_originals) {
  struct Case {
    std::vector<std::uint32_t> dims;
    std::vector<bool> wraps;
    std::uint32_t per_host;
    bool infeed;
    std::vector<SlowChip> slow;
  };
  for (const Case& k : {Case{{16, 16, 16}, {true, true, true}, 4, true, {}}, Case{{2, 2, 4}, {false, false, true}, 4, false, {}},
                        Case{{16, 16}, {true, true}, 8, true, {}}, Case{{8, 2, 5}, {true, false, false}, 2, true, {}},
                        Case{{8, 8, 8}, {true, true, true}, 4, true, {{0, 0.9, 1}}},
                        Case{{4, 6, 5}, {true, true, false}, 4, true, {{4 * 3, 0.9, 1}}}}) {
    const Torus torus(k.dims, k.wraps);
    Program program = training_like_program(CollectiveAlgorithm::Torus);
    if (!k.infeed) program.ops.erase(program.ops.begin());
    HwConfig hw = hw_of(k.dims, k.per_host);
    hw.slow_chips = k.slow;
    const SimulatedSlice s = plan_simulated_slice(torus, hw, program, true);
    BOOST_TEST_CONTEXT(torus.shape() << " with " << k.slow.size() << " slow chips") {
      BOOST_TEST(s.folded());
      std::size_t stand_ins = 0;
      for (std::uint32_t chip : s.chips(torus))
        for (const SimulatedSlice::StandIn& in : s.stand_ins(torus, chip)) {
          ++stand_ins;
          const std::uint32_t sender = in.sender, rep = s.representative(torus, sender);
          BOOST_TEST(!s.simulates(torus, sender));
          BOOST_TEST(in.link.chip == rep);
          BOOST_TEST(s.from_representative(torus, sender, rep) == sender);
          BOOST_TEST(s.from_representative(torus, sender, static_cast<std::uint32_t>(torus.far_end(in.link))) == chip);
          for (std::uint32_t dest = 0; dest < torus.chip_count(); dest += 7) {
            if (dest == rep) continue;
            const std::uint32_t original_dest = s.from_representative(torus, sender, dest);
            BOOST_TEST(s.representative(torus, original_dest) == s.representative(torus, dest));
            const LinkId image = torus.first_hop(rep, dest), original = torus.first_hop(sender, original_dest);
            // Half way round a ring both ways are as short and routes take the + way, which no
            // reflection keeps; no collective that folds by a reflection routes that far.
            const std::uint32_t n = torus.dims()[image.axis];
            if (torus.wraps(image.axis) && 2 * ((torus.coords(dest)[image.axis] + n - torus.coords(rep)[image.axis]) % n) == n) continue;
            BOOST_TEST(original.axis == image.axis);
            const SimulatedSlice::Axis& axis = s.axes[image.axis];
            const bool reflected = axis.maps[axis.to_rep[torus.coords(sender)[image.axis]]].reflects;
            BOOST_TEST(original.positive == (reflected ? !image.positive : image.positive));
          }
        }
      BOOST_TEST(stand_ins > 0u);
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
                                 "--hw tpu_v4 --topology 4x8x4 --algorithm torus --op all-gather --chunk-bytes 65536",
                                 "--hw tpu_v5e --topology 16x16 --slices 4",
                                 "--hw tpu_v5p --topology 4x4x4 --slices 3 --op reduce-scatter --chunk-bytes 1048576"}) {
    json full = collective("--bytes 16777216 --all-chips " + args);
    json folded = collective("--bytes 16777216 " + args);
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

// The same for training steps: every core of a host wakes in the order of its threads' ranks
// (hw/wake_queue.hpp), so symmetric chips do the same thing at the same picosecond and the folded
// simulation's summary is the full one's, byte for byte, apart from which chips ran. The matrix
// spans 1-D, 2-D and 3-D slices with and without wraparound, every preset (megacore and two-core
// chips), odd and non-cubic shapes, a two-chip axis folded by reflection, each all-reduce
// algorithm that folds, overlap on and off, weight-update sharding, chunked and per-layer
// all-reduces, unfused vector passes and input-bound steps.
BOOST_AUTO_TEST_CASE(training_steps_are_exact) {
  const std::string mlp = "mlp_mnist.json";
  const std::string per8 = " --set workload.training.global_batch=0 --set workload.training.per_replica_batch=8";
  const std::string input_bound = " --set workload.input_pipeline.host_samples_per_s=20000";
  const std::vector<std::string> cases = {
      mlp + " --hw tpu_v4 --topology 8x8x8",
      mlp + " --hw tpu_v4 --topology 2x2x2",
      mlp + " --hw tpu_v4 --topology 2x2x4",
      mlp + " --hw tpu_v4 --topology 4x4x4",
      mlp + " --hw tpu_v4 --topology 4x8x4",
      mlp + " --hw tpu_v4 --topology 4x4x12" + per8,
      mlp + " --hw tpu_v4 --topology 8x4x4 --set workload.training.all_reduce.algorithm=torus",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.all_reduce.overlap=false",
      mlp + " --hw tpu_v4 --topology 4x4x4" + input_bound,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.weight_update_sharding=true",
      "gpt2_small.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.fsdp=true",
      "gpt2_small.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.mesh.model=z",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.mesh.model=z",
      "gpt2_small.json --hw tpu_v4 --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.remat=true",
      mlp + " --hw tpu_v5e --topology 16x16 --set workload.training.mesh.model=y --set workload.training.fsdp=true",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.all_reduce.chunk_bytes=65536",
      mlp + " --hw tpu_v4 --topology 4x4x8 --set workload.training.all_reduce.bucket_bytes=0",
      "resnet50.json --hw tpu_v4 --topology 2x2x4" + per8,
      // Distributed batch norm over 2x2 trays: a block of the x and y axes folds like a host.
      "resnet50.json --hw tpu_v4 --topology 2x4x4 --set workload.training.batch_norm_group=4" + per8,
      "resnet50.json --hw tpu_v3 --topology 32x2 --set workload.training.batch_norm_group=8" + per8,
      mlp + " --hw tpu_v5p --topology 4x4x8",
      mlp + " --hw tpu_v5p --topology 4x4x4 --set workload.training.all_reduce.overlap=false" + input_bound,
      "bert_base_128.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2",
      mlp + " --hw tpu_v5e --topology 16x16",
      mlp + " --hw tpu_v5e --topology 8x16",
      mlp + " --hw tpu_v5e --topology 16x16 --set workload.training.all_reduce.algorithm=torus",
      mlp + " --hw tpu_v5e --topology 16x16 --set workload.input_pipeline.host_samples_per_s=60000",
      mlp + " --hw tpu_v6e --topology 16x16 --set workload.training.weight_update_sharding=true",
      mlp + " --hw tpu_v6e --topology 8x16 --set workload.training.fusion=false",
      mlp + " --hw tpu_v2 --topology 16x16",
      mlp + " --hw tpu_v2 --topology 16x4",
      mlp + " --hw tpu_v2 --topology 16" + per8,
      mlp + " --hw tpu_v2 --topology 16x16 --set workload.training.weight_update_sharding=true",
      mlp + " --hw tpu_v3 --topology 8x32 --set workload.training.all_reduce.algorithm=torus",
      mlp + " --hw tpu_v3 --topology 32x2",
      mlp + " --hw tpu_v3 --topology 32x8 --set workload.training.precision=mixed_bfloat16",
      "gpt2_small.json --hw tpu_v3 --topology 32 --set workload.training.per_replica_batch=1",
      "vit_b16.json --hw tpu_v4 --topology 2x2x4 --set workload.training.per_replica_batch=2",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.optimizer.name=sgd" + input_bound,
      // Several slices: each is folded as one slice is.
      mlp + " --hw tpu_v5e --topology 16x16 --slices 4",
      "gpt2_small.json --hw tpu_v5p --topology 2x2x4 --slices 2 --set workload.training.per_replica_batch=2 --set workload.training.fsdp=true",
      mlp + " --hw tpu_v6e --topology 16x16 --slices 3 --set workload.training.weight_update_sharding=true" + per8,
  };
  BOOST_TEST(cases.size() >= 30u);
  check_folded_runs_are_exact(cases);
}

// Slices where some part differs fold by what still maps everything onto itself (reflections
// through a slow chip or a slow cable, translations that keep several slow chips), and the
// partly folded run is the full one byte for byte: the mirror of a ring swaps its directions,
// and the collective units book what arrives in an order that does not tell them apart. Slow
// clocks, slow HBM and slow links, 2-D and 3-D tori, lines, megacore and two-core chips, every
// kind of parallelism that folds (tensor, FSDP, experts), overlap off, chunking, weight-update
// sharding and an input-bound step.
BOOST_AUTO_TEST_CASE(asymmetric_slices_fold_exactly) {
  const std::string mlp = "mlp_mnist.json";
  const auto slow = [](const std::string& chips) { return " --set 'hw.slow_chips=[" + chips + "]'"; };
  const std::string chip0 = slow(R"({"chip": 0, "core_freq_scale": 0.9})");
  const std::string half0 = slow(R"({"chip": 0, "core_freq_scale": 0.5})");
  const std::vector<std::string> cases = {
      mlp + " --hw tpu_v4 --topology 4x4x4" + chip0,
      mlp + " --hw tpu_v4 --topology 4x4x4" + slow(R"({"chip": 21, "core_freq_scale": 0.8, "hbm_bw_scale": 0.7})"),
      mlp + " --hw tpu_v4 --topology 4x4x4" + slow(R"({"chip": 0, "core_freq_scale": 0.9}, {"chip": 8, "core_freq_scale": 0.9})"),
      mlp + " --hw tpu_v4 --topology 4x4x4" + slow(R"({"chip": 0, "core_freq_scale": 0.9}, {"chip": 8, "core_freq_scale": 0.8})"),
      mlp + " --hw tpu_v4 --topology 4x4x4" + slow(R"({"chip": 0, "core_freq_scale": 0.9}, {"chip": 42, "core_freq_scale": 0.9})"),
      mlp + " --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"z+\", \"bw_scale\": 0.5}, "
            "{\"chip\": 16, \"direction\": \"z-\", \"bw_scale\": 0.5}]'",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 5, \"direction\": \"x+\", \"bw_scale\": 0.25}]'",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"x+\", \"bw_scale\": 0}]'",
      mlp + " --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"z+\", \"bw_scale\": 0}]'" + chip0,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"y+\", \"bw_scale\": 0}]'",
      mlp + " --hw tpu_v4 --topology 4x4x8 --set workload.training.all_reduce.algorithm=torus" +
          slow(R"({"chip": 0, "hbm_bw_scale": 0.5})"),
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.all_reduce.overlap=false" + half0,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.input_pipeline.host_samples_per_s=20000" + half0,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.weight_update_sharding=true" + half0,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.all_reduce.chunk_bytes=65536" + half0,
      mlp + " --hw tpu_v4 --topology 4x4x4 --set workload.training.mesh.model=z" + half0,
      "resnet50.json --hw tpu_v4 --topology 2x2x4 --set workload.training.global_batch=0 --set workload.training.per_replica_batch=8" + chip0,
      "gpt2_small.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.fsdp=true" +
          slow(R"({"chip": 4, "core_freq_scale": 0.9})"),
      "gpt2_small.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.mesh.model=z" +
          slow(R"({"chip": 4, "core_freq_scale": 0.9})"),
      "bert_base_128.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2" +
          slow(R"({"chip": 8, "core_freq_scale": 0.7})"),
      "deepseek_moe_16b.json --hw tpu_v5p --topology 2x2x4 --set workload.training.per_replica_batch=2 --set workload.training.mesh.expert=z "
      "--set workload.training.fsdp=true" + chip0,
      "vit_b16.json --hw tpu_v4 --topology 2x2x4 --set workload.training.per_replica_batch=2" + slow(R"({"chip": 12, "core_freq_scale": 0.9})"),
      mlp + " --hw tpu_v5e --topology 16x16" + chip0,
      mlp + " --hw tpu_v5e --topology 16x16 --set workload.training.all_reduce.algorithm=torus" + slow(R"({"chip": 37, "core_freq_scale": 0.9})"),
      mlp + " --hw tpu_v5e --topology 8x8" + slow(R"({"chip": 25, "core_freq_scale": 0.9}, {"chip": 33, "core_freq_scale": 0.9})"),
      mlp + " --hw tpu_v6e --topology 16x16 --set workload.training.weight_update_sharding=true" + chip0,
      mlp + " --hw tpu_v2 --topology 16x16" + chip0,
  };
  BOOST_TEST(cases.size() >= 20u);
  check_folded_runs_are_exact(cases);
}

// Every zoo model on the largest slice of every preset: a step, or out of memory, never a failure.
BOOST_AUTO_TEST_CASE(every_zoo_model_runs_on_the_largest_slice_of_every_preset) {
#ifdef TPUSIM_ASAN
  // Under a sanitizer each model runs on one preset, the presets in turn (every model and every
  // preset at least once): the whole cross product took 7 minutes there on a 2-core machine, and
  // the release build runs it.
  constexpr bool one_preset_per_model = true;
#else
  constexpr bool one_preset_per_model = false;
#endif
  TempDir dir;
  int i = 0, models = 0;
  // In name order, so that a sanitizer build pairs the same models with the same presets everywhere.
  std::vector<std::filesystem::directory_entry> entries(std::filesystem::directory_iterator(source_path("workloads/examples")), {});
  std::sort(entries.begin(), entries.end());
  for (const auto& entry : entries) {
    if (entry.path().extension() != ".json") continue;
    // The Llama family by its two smallest (grouped-query attention with a SwiGLU MLP; multi-query
    // with GeGLU and a tied head) at a shorter context: their larger siblings differ in sizes
    // alone, and a step of 8 sequences of 8192 tokens on every chip class costs minutes.
    const std::string stem = entry.path().stem().string();
    const bool llama_family = stem.rfind("llama", 0) == 0 || stem.rfind("gemma", 0) == 0;
    if (llama_family && stem != "llama3_8b" && stem != "gemma_2b") continue;
    // The mixtures of experts (Mixtral's grouped-query blocks, DeepSeekMoE's fine-grained and
    // shared experts) at the same shorter context.
    const bool experts = stem == "mixtral_8x7b" || stem == "deepseek_moe_16b";
    const std::string context = llama_family || experts ? " --set 'workload.model.input_shape=[1024]'" : "";
    const std::vector<std::pair<std::string, std::string>> largest_slices{
        {"tpu_v2", "16x16"}, {"tpu_v3", "32x32"}, {"tpu_v4", "16x16x16"}, {"tpu_v5p", "16x20x28"},
        {"tpu_v5e", "16x16"}, {"tpu_v6e", "16x16"}, {"tpu_v7", "16x24x24"}};
    const int model = models++;
    for (std::size_t p = 0; p < largest_slices.size(); ++p) {
      if (one_preset_per_model && p != static_cast<std::size_t>(model) % largest_slices.size()) continue;
      const auto& [preset, topology] = largest_slices[p];
      const json s = summary_of(dir, std::to_string(i++), "'" + entry.path().string() + "' --hw " + preset + " --topology " + topology +
                                                              " --set workload.training.steps=1 --set workload.training.global_batch=0"
                                                              " --set workload.training.per_replica_batch=8" + context);
      BOOST_TEST_CONTEXT(entry.path().filename() << " " << preset << " " << topology) {
        BOOST_TEST((s["status"] == "ok" || s["status"] == "oom"));
        if (s["status"] != "ok") continue;
        BOOST_TEST(s["simulation"]["mode"] == "representatives");
        BOOST_TEST(s["simulation"]["chips_simulated"].get<std::uint64_t>() * s["simulation"]["stands_for_at_most"].get<std::uint64_t>() ==
                   s["chips"].get<std::uint64_t>());
      }
    }
  }
  BOOST_TEST(i >= (one_preset_per_model ? models : 54));
  BOOST_TEST(models >= 8);
}

// Every chip of a pod simulated used to need a SystemC thread per modelled process, more than the
// kernel's memory mappings allow (about 103,000 for this run), and was refused for it. The
// processes are tasks now (hw/wake_queue.hpp): what limits such a run is memory, which the
// estimate still guards (here a limit far below it).
BOOST_AUTO_TEST_CASE(a_whole_pod_is_limited_by_memory_not_by_threads) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + source_path("workloads/examples/resnet50.json") +
                                     "' --hw tpu_v4 --topology 16x16x16 --set workload.training.steps=1 --trace none --all-chips "
                                     "--max-memory 64M -o '" + dir.path("out") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("SystemC threads") == std::string::npos, r.err);
  BOOST_TEST(r.err.find("the --max-memory limit") != std::string::npos, r.err);
  BOOST_TEST(!std::filesystem::exists(dir.path("out")));
}

// A trace of a chip that a representative would stand for simulates every chip; a trace of
// simulated chips does not.
BOOST_AUTO_TEST_CASE(tracing_a_chip_a_representative_would_stand_for_simulates_every_chip) {
  TempDir dir;
  const json all = summary_of(dir, "all", "'" + example_workload() + "' --hw tpu_v4 --topology 4x4x4 --trace ops --trace-chips 0-5");
  BOOST_TEST(all["simulation"]["mode"] == "all_chips");
  BOOST_TEST(all["simulation"]["all_chips_because"] == "--trace-chips names chip 4, for which chip 0 would stand");
  BOOST_TEST(read_file(dir.path("all/trace.json")).find("\"chip 5\"") != std::string::npos);
  const json folded = summary_of(dir, "folded", "'" + example_workload() + "' --hw tpu_v4 --topology 4x4x4 --trace ops --trace-chips 0-3");
  BOOST_TEST(folded["simulation"]["mode"] == "representatives");
  BOOST_TEST(read_file(dir.path("folded/trace.json")).find("\"chip 4\"") == std::string::npos);
}

// What breaks the symmetry is configuration: one chip at 90% clock. A synchronous step waits for
// it at the all-reduce, so a compute-bound step grows by up to that chip's extra compute time
// (compute / 0.9 - compute), less the communication the others were left waiting on (which
// the slow chip's extra compute overlaps: on a 4x4 without wraparound the line collectives
// outlast the backward pass); the summary names it, and every chip is simulated.
BOOST_AUTO_TEST_CASE(a_slow_chip_slows_a_compute_bound_step_by_its_extra_compute_time) {
  TempDir dir;
  const std::string workload = source_path("bench/straggler/wide_mlp.json");
  const std::string slow = source_path("bench/straggler/v5e_chip5_at_90pct.json");
  const json even = summary_of(dir, "even", "'" + workload + "' --hw tpu_v5e --topology 4x4");
  const json uneven = summary_of(dir, "uneven", "'" + workload + "' --hw '" + slow + "' --topology 4x4");
  const double step = even["step_time_s"].get<double>(), compute = even["breakdown"]["compute_s"].get<double>();
  BOOST_REQUIRE(compute > 0.7 * step);  // compute-bound
  const double expected = compute / 0.9 - compute;
  const double hidden = even["breakdown"]["exposed_communication_s"].get<double>();
  BOOST_REQUIRE(hidden < 0.9 * expected);  // something left for the growth to show
  const double grew = uneven["step_time_s"].get<double>() - step;
  BOOST_TEST(grew > 0.8 * (expected - hidden));
  BOOST_TEST(grew < 1.25 * expected);
  BOOST_TEST(uneven["straggler"]["core"] == "chip5.core0");
  const std::string report = read_file(dir.path("uneven/report.html"));
  const std::size_t cell = report.find("<td class=\"left\">chip5.core0, ");
  BOOST_REQUIRE(cell != std::string::npos);
  BOOST_TEST(report.substr(cell, 60).find("ms lost") != std::string::npos);
  BOOST_TEST(read_file(dir.path("even/report.html")).find("lost</td>") == std::string::npos);
  BOOST_TEST(uneven["straggler"]["time_lost_s"].get<double>() > 0.5 * expected);
  BOOST_TEST(even["straggler"]["time_lost_s"].get<double>() < 0.05 * expected);
  BOOST_TEST(uneven["simulation"]["mode"] == "all_chips");
  BOOST_TEST(uneven["simulation"]["all_chips_because"].get<std::string>().find("slow chip") != std::string::npos);
  const CommandResult outside = run_tpusim("dump-config --hw tpu_v5e --topology 2x2 --set 'hw.slow_chips=[{\"chip\": 4}]'");
  BOOST_TEST(outside.exit_code == 2);
  BOOST_TEST(outside.err.find("hw.slow_chips[0].chip: chip 4 is not in the 2x2 slice") != std::string::npos, outside.err);
}

// Degraded memory and a degraded link are configuration too, and cost what the physics says. A
// synchronous step waits for the chip whose HBM runs at half bandwidth, so the slice steps as
// slowly as one whose every chip has such HBM; a bidirectional ring is as slow as its slowest
// link, so one link at half bandwidth makes an all-reduce along that ring as slow as when every
// link runs at half; a link that is down is routed around.
BOOST_AUTO_TEST_CASE(slow_hbm_slow_links_and_links_that_are_down_cost_what_the_slowest_part_does) {
  TempDir dir;
  const std::string gpt2 = "'" + source_path("workloads/examples/gpt2_small.json") +
                           "' --hw tpu_v5e --topology 4x4 --set workload.training.steps=2 --set workload.training.per_replica_batch=2";
  const json even = summary_of(dir, "even", gpt2);
  const json one = summary_of(dir, "one", gpt2 + " --set 'hw.slow_chips=[{\"chip\": 5, \"hbm_bw_scale\": 0.5}]'");
  const json all = summary_of(dir, "all", gpt2 + " --set hw.hbm.bw_gbps=409.5");
  const double one_s = one["step_time_s"].get<double>(), all_s = all["step_time_s"].get<double>();
  BOOST_TEST(one_s > 1.5 * even["step_time_s"].get<double>());  // memory-bound enough to show it
  BOOST_TEST(std::abs(one_s - all_s) < 0.01 * all_s);
  BOOST_TEST(one["straggler"]["core"] == "chip5.core0");
  BOOST_TEST(one["simulation"]["mode"] == "all_chips");

  auto ring = [](const std::string& set) {
    return collective("--bytes 268435456 --hw tpu_v4 --topology 4x4x4 --algorithm torus --group x " + set)["time_s"].get<double>();
  };
  const double healthy = ring(""), slow_link = ring("--set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"x+\", \"bw_scale\": 0.5}]'");
  const double slow_all = ring("--set hw.ici.link_bw_gbps=22.5");  // the preset's 45 GB/s halved
  BOOST_TEST(slow_link > 1.8 * healthy);
  BOOST_TEST(std::abs(slow_link - slow_all) < 0.02 * slow_all);
  // A link that is down carries nothing: what it would have carried goes the other way round the
  // ring, where it shares the links of the opposite direction, which then carry twice as much.
  const json down = collective("--bytes 268435456 --hw tpu_v4 --topology 4x4x4 --algorithm torus --group x --links "
                               "--set 'hw.slow_links=[{\"chip\": 0, \"direction\": \"x+\", \"bw_scale\": 0}]'");
  BOOST_TEST(down["time_s"].get<double>() > 1.8 * healthy);
  std::uint64_t most = 0;
  for (const json& link : down["links"]) {
    BOOST_TEST(link["link"] != "chip0.ici.x+");  // unused
    most = std::max(most, link["bytes"].get<std::uint64_t>());
  }
  // A link of a bidirectional ring carries 3/4 of the bytes (half each way, reduce-scatter and
  // all-gather); the links the detour takes carry that twice.
  BOOST_TEST(most == 2 * (268435456u / 4 * 3));
  const CommandResult cut = run_tpusim("dump-config --hw tpu_v4 --topology 4x4x4 --set 'hw.slow_links=[{\"chip\": 1, \"direction\": "
                                       "\"x+\", \"bw_scale\": 0}, {\"chip\": 2, \"direction\": \"x-\", \"bw_scale\": 0}]'");
  BOOST_TEST(cut.exit_code == 2);
  BOOST_TEST(cut.err.find("hw.slow_links[1].bw_scale: links of chips 1 and 2 are both down on one x ring") != std::string::npos, cut.err);
  const CommandResult missing = run_tpusim("dump-config --hw tpu_v5e --topology 4x4 --set 'hw.slow_links=[{\"chip\": 3, \"direction\": \"x+\", \"bw_scale\": 0.5}]'");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(missing.err.find("hw.slow_links[0].direction: chip 3 of the 4x4 slice has no link x+ (links: x-, y+)") != std::string::npos,
             missing.err);
}
