// Collectives on the ICI model: every algorithm against its alpha-beta closed form when nothing
// contends, and contention where it must show.
#define BOOST_TEST_MODULE collective
#include <boost/test/unit_test.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "hw/collective.hpp"
#include "hw/topology.hpp"
#include "test_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// v5e chips with every axis wrapping and any shape allowed: rings whose hops are all one link,
// every byte of whose rate is payload and which start without a fixed cost, as the textbook
// formulas count it.
// Their HBM is twice as fast as v5e's: the closed form has no memory term, and with v5e's own
// HBM (at its sustained ~92% of peak) a 4 GiB all-axes reduction on 4x4 is within 1% of being
// bound by the reduction's HBM traffic rather than by the links.
const TempDir kDir;
const std::string kWrapped =
    kDir.write("wrapped.json", R"({"base": "tpu_v5e", "name": "v5e_wrapped", "ici": {"wraparound": "always", "payload_efficiency": 1, "collective_start_ns": 0},
                                   "hbm": {"bw_gbps": 1638}, "slice": {"shapes": []}})");

json collective(const std::string& args) {
  const CommandResult r = run_tpusim("collective " + args + " --json");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, args + ": " + r.err);
  return json::parse(r.out);
}

double relative_gap(const json& c) {
  return std::abs(c["time_s"].get<double>() - c["alpha_beta_s"].get<double>()) / c["alpha_beta_s"].get<double>();
}

}  // namespace

// Issue 40: an algorithm's name, description and ring shape live in one table, which the
// command line's help and choices and the workload key read.
BOOST_AUTO_TEST_CASE(every_collective_algorithm_is_named_and_described_once) {
  const std::vector<std::string> names = collective_algorithm_names();
  BOOST_TEST(names.size() == 4u);
  const std::string help = run_tpusim("collective --help").out;
  for (const std::string& name : names) {
    BOOST_TEST_CONTEXT(name) {
      const CollectiveAlgorithm a = parse_collective_algorithm(name);
      BOOST_TEST(collective_algorithm_name(a) == name);
      BOOST_TEST(contains(help, name + " (" + collective_algorithm_description(a) + ")"), help);
    }
  }
  BOOST_TEST(collective_algorithm_is_ring(CollectiveAlgorithm::BidirRing));
  BOOST_TEST(!collective_algorithm_is_ring(CollectiveAlgorithm::TorusAllAxes));
  BOOST_CHECK_THROW(parse_collective_algorithm("rings"), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(closed_form_matches_the_pipelined_ring) {
  // A 100 MB all-reduce, 16-chip unidirectional ring, 45 GB/s, 1 us per hop. Each step forwards
  // what the step before brings as it arrives, so each of the two passes (reduce-scatter,
  // all-gather) pays one hop and then its 15 shards back to back: 2 x 1 us + 2 x 15/16 x 100 MB /
  // 45 GB/s = 4.1687 ms. The additions (6.25 MB of f32 per step: 763 cycles at 1.5 GHz, 0.5 us)
  // keep pace with the link and add nothing.
  const json c = collective("--bytes 100000000 --hw " + kWrapped + " --topology 16 --algorithm ring");
  BOOST_TEST(c["alpha_beta_s"].get<double>() == 2e-6 + 2 * 15.0 / 16 * 100e6 / 45e9, boost::test_tools::tolerance(1e-6));
  // Latency-bound (1 KiB): every step waits for the hop, 2 x 15 x 1 us.
  const json small = collective("--bytes 1024 --hw " + kWrapped + " --topology 16 --algorithm ring");
  BOOST_TEST(small["alpha_beta_s"].get<double>() == 30e-6 + 2 * 64 / 45e9, boost::test_tools::tolerance(1e-3));
}

BOOST_AUTO_TEST_CASE(a_slow_vector_unit_shows_in_a_reduce_scatter) {
  // With the vector unit at 1/1000 of its clock, adding a 4 MiB shard takes longer than receiving
  // it: the reduce-scatter becomes bound by the additions, the all-gather does not change.
  const std::string common = " --bytes 67108864 --hw " + kWrapped + " --topology 16 --algorithm ring";
  const std::string slow = " --set hw.core.freq_mhz=1.5";
  const double rs = collective("--op reduce-scatter" + common)["time_s"];
  const json rs_slow = collective("--op reduce-scatter" + common + slow);
  BOOST_TEST(rs_slow["time_s"].get<double>() > 2 * rs);
  BOOST_TEST(relative_gap(rs_slow) <= 0.01);
  BOOST_TEST(collective("--op all-gather" + common + slow)["time_s"].get<double>() ==
                 collective("--op all-gather" + common)["time_s"].get<double>(),
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(links_carry_payload_at_their_efficiency) {
  // A 1 GiB all-reduce on a ring of 2 chips is two steps (reduce-scatter, all-gather), each moving
  // half the buffer over the link. Halving the share of the link rate that is payload doubles
  // those transfers and nothing else.
  const std::string ring = "--bytes 1073741824 --hw " + kWrapped + " --topology 2 --algorithm ring";
  const json full = collective(ring);
  const json half = collective(ring + " --set hw.ici.payload_efficiency=0.5");
  const double transfer_s = 2 * (1073741824.0 / 2) / 45e9;
  BOOST_TEST(half["alpha_beta_s"].get<double>() - full["alpha_beta_s"].get<double>() == transfer_s,
             boost::test_tools::tolerance(1e-6));
  BOOST_TEST(half["time_s"].get<double>() - full["time_s"].get<double>() == transfer_s, boost::test_tools::tolerance(0.02));
}

BOOST_AUTO_TEST_CASE(every_collective_pays_its_start_once) {
  // The start cost comes before the first byte moves, once per collective whatever its steps:
  // a 16-step ring all-reduce and a one-step permute both grow by exactly it.
  for (const std::string op : {"--op all-reduce --algorithm ring", "--op permute", "--op all-gather --algorithm torus_all_axes"}) {
    const std::string args = op + " --bytes 1048576 --hw " + kWrapped + " --topology 4x4";
    const json none = collective(args);
    const json started = collective(args + " --set hw.ici.collective_start_ns=4000");
    BOOST_TEST_CONTEXT(op) {
      BOOST_TEST(started["alpha_beta_s"].get<double>() - none["alpha_beta_s"].get<double>() == 4e-6,
                 boost::test_tools::tolerance(1e-6));
      BOOST_TEST(started["time_s"].get<double>() - none["time_s"].get<double>() == 4e-6, boost::test_tools::tolerance(1e-6));
    }
  }
  // A chip alone in its group has no peer to wait for: no start, in the simulation as in the closed form.
  const json alone = collective("--bytes 1048576 --hw " + kWrapped + " --topology 1 --set hw.ici.collective_start_ns=4000");
  BOOST_TEST(alone["alpha_beta_s"].get<double>() == 0.0);
  BOOST_TEST(alone["time_s"].get<double>() == 0.0);
  // Issue 41: it printed "algbw inf, busbw -nan"; nothing moved, so there is no bandwidth.
  BOOST_TEST(alone["algbw_gbps"].is_null());
  BOOST_TEST(alone["busbw_gbps"].is_null());
  const auto text = run_tpusim("collective --bytes 1048576 --topology 1x2 --group x");
  BOOST_TEST(text.exit_code == 0, text.err);
  BOOST_TEST(text.out.find("bandwidth      none: each chip is alone in its group") != std::string::npos, text.out);
  BOOST_TEST(text.out.find("nan") == std::string::npos, text.out);
  BOOST_TEST(text.out.find("inf") == std::string::npos, text.out);
}

BOOST_AUTO_TEST_CASE(a_permute_is_one_ring_step_of_the_whole_buffer) {
  // Each chip sends its 64 MiB to its ring neighbour once: one hop, one transfer, whatever the
  // ring's length, and every chip's links carry it once.
  for (const char* topology : {"2", "4", "8"}) {
    const json c = collective(std::string("--op permute --bytes 67108864 --hw ") + kWrapped + " --topology " + topology);
    BOOST_TEST_CONTEXT(topology) {
      BOOST_TEST(c["alpha_beta_s"].get<double>() == 1e-6 + 67108864 / 45e9, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(relative_gap(c) <= 0.01);
      BOOST_TEST(c["ici_bytes"].get<std::uint64_t>() == 67108864ull * c["group_size"].get<std::uint64_t>());
    }
  }
}

// With bidir_ring a permute sends half its buffer to each neighbour (a windowed einsum's shift):
// half the time on a ring of more than two chips, the same bytes on the links; two chips have one
// link pair, and the whole buffer crosses it.
BOOST_AUTO_TEST_CASE(a_bidirectional_permute_sends_half_each_way) {
  for (const char* topology : {"2", "4", "8"}) {
    const json c =
        collective(std::string("--op permute --algorithm bidir_ring --bytes 67108864 --hw ") + kWrapped + " --topology " + topology);
    const double per_link_bytes = std::string(topology) == "2" ? 67108864.0 : 33554432.0;
    BOOST_TEST_CONTEXT(topology) {
      BOOST_TEST(c["alpha_beta_s"].get<double>() == 1e-6 + per_link_bytes / 45e9, boost::test_tools::tolerance(1e-9));
      BOOST_TEST(relative_gap(c) <= 0.01);
      BOOST_TEST(c["ici_bytes"].get<std::uint64_t>() == 67108864ull * c["group_size"].get<std::uint64_t>());
    }
  }
}

// Issue 38: an all-to-all along a ring of p chips (each chip's buffer B holding a share of B/p for
// every chip) is bound by the ring's bisection: each link direction carries p^2/8 shares, p/2
// one-hop steps of store and forward. On 8 chips, 64 MiB: 8 shares of 8 MiB over each link
// direction at 45 GB/s, plus four hops of 1 us, 1.4953 ms; every chip's shares travel
// min(d, p - d) hops to the chip d places on, p^3/4 share-hops in all.
BOOST_AUTO_TEST_CASE(an_all_to_all_takes_the_rings_bisection_time_and_moves_each_share_its_distance) {
  const double bytes = 67108864;
  for (const std::uint64_t p : {4, 8, 16}) {
    const std::string args = "--op all-to-all --bytes 67108864 --hw " + kWrapped + " --topology " + std::to_string(p);
    const json folded = collective(args);
    const json full = collective(args + " --all-chips");
    BOOST_TEST_CONTEXT(p) {
      const double share = bytes / static_cast<double>(p);
      // (Each step's transfer is rounded up to a whole picosecond.)
      BOOST_TEST(folded["alpha_beta_s"].get<double>() == (p * p / 8.0) * share / 45e9 + (p / 2.0) * 1e-6,
                 boost::test_tools::tolerance(1e-8));
      BOOST_TEST(relative_gap(folded) <= 0.001);
      BOOST_TEST(folded["ici_bytes"].get<std::uint64_t>() == static_cast<std::uint64_t>(p * p * p / 4 * share));
      // Folded to one chip, the same to the picosecond as every chip simulated.
      BOOST_TEST(folded["simulation"]["chips_simulated"].get<int>() == 1);
      BOOST_TEST(full["time_s"].get<double>() == folded["time_s"].get<double>());
      BOOST_TEST(full["ici_bytes"] == folded["ici_bytes"]);
    }
  }
  // Over two axes each half of the buffer goes along one axis and then the other, the two halves
  // in opposite orders at once: every link carries what it carries in a 4-chip all-to-all of the
  // whole buffer, over twice the steps, so a 4x4 all-to-all takes a 4-chip one's time and two
  // more hops.
  const json square = collective("--op all-to-all --bytes 67108864 --hw " + kWrapped + " --topology 4x4");
  const json line = collective("--op all-to-all --bytes 67108864 --hw " + kWrapped + " --topology 4");
  BOOST_TEST(square["alpha_beta_s"].get<double>() == line["alpha_beta_s"].get<double>() + 2e-6, boost::test_tools::tolerance(1e-8));
  BOOST_TEST(relative_gap(square) <= 0.001);
  BOOST_TEST(square["algorithm"] == "torus");
}

BOOST_AUTO_TEST_CASE(every_algorithm_matches_its_closed_form_when_nothing_contends) {
  for (const char* algorithm : {"ring", "bidir_ring", "torus", "torus_all_axes"})
    for (const char* topology : {"2", "5", "16", "64", "2x2", "4x4", "8x8"})
      for (const char* bytes : {"1024", "1048576", "4294967296"}) {
        const json c = collective(std::string("--bytes ") + bytes + " --hw " + kWrapped + " --topology " + topology +
                                  " --algorithm " + algorithm);
        BOOST_TEST_CONTEXT(algorithm << " on " << topology << ", " << bytes << " bytes: " << c["time_s"] << " s vs "
                                     << c["alpha_beta_s"] << " s") {
          BOOST_TEST(relative_gap(c) <= 0.01);
        }
      }
}

BOOST_AUTO_TEST_CASE(reduce_scatter_and_all_gather_are_half_an_all_reduce) {
  const std::string common = " --bytes 67108864 --hw " + kWrapped + " --topology 16 --algorithm bidir_ring";
  const double ar = collective("--op all-reduce" + common)["time_s"];
  const double rs = collective("--op reduce-scatter" + common)["time_s"];
  const double ag = collective("--op all-gather" + common)["time_s"];
  BOOST_TEST(relative_gap(collective("--op reduce-scatter" + common)) <= 0.01);
  BOOST_TEST(relative_gap(collective("--op all-gather" + common)) <= 0.01);
  BOOST_TEST(rs + ag == ar, boost::test_tools::tolerance(0.01));
  BOOST_TEST(ag <= rs);  // nothing to add; the additions keep pace with the links
}

BOOST_AUTO_TEST_CASE(bus_bandwidth_follows_the_nccl_tests_convention) {
  const json c = collective("--bytes 67108864 --hw " + kWrapped + " --topology 8 --algorithm ring");
  const double algbw = 67108864 / c["time_s"].get<double>() / 1e9;
  BOOST_TEST(c["algbw_gbps"].get<double>() == algbw, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(c["busbw_gbps"].get<double>() == algbw * 2 * 7 / 8, boost::test_tools::tolerance(1e-9));
  // a bandwidth-bound unidirectional ring drives one link direction: busbw close to 45 GB/s
  BOOST_TEST(c["busbw_gbps"].get<double>() > 0.95 * 45);
  BOOST_TEST(c["busbw_gbps"].get<double>() <= 45);
}

BOOST_AUTO_TEST_CASE(two_collectives_sharing_the_links_take_about_twice_as_long) {
  const std::string common = " --bytes 67108864 --hw " + kWrapped + " --topology 16 --algorithm bidir_ring";
  const double one = collective(common)["time_s"];
  const double two = collective(common + " --concurrent 2")["time_s"];
  BOOST_TEST(two > 1.8 * one);
  BOOST_TEST(two < 2.2 * one);
}

BOOST_AUTO_TEST_CASE(missing_wraparound_about_doubles_a_bandwidth_bound_collective) {
  const std::string common = " --bytes 1073741824 --hw " + kWrapped + " --topology 16 --algorithm torus";
  const double wrapped = collective(common)["time_s"];
  const double line = collective(common + " --set hw.ici.wraparound=never")["time_s"];
  BOOST_TEST(line > 1.8 * wrapped);
  BOOST_TEST(line < 2.2 * wrapped);
}

BOOST_AUTO_TEST_CASE(replica_groups_run_side_by_side_on_their_own_axis) {
  // Four x-rows of a 4x4, each its own group of 4: as fast as one ring of 4, on a quarter of the links each.
  const json rows = collective("--bytes 16777216 --hw " + kWrapped + " --topology 4x4 --group x --algorithm bidir_ring");
  const json line = collective("--bytes 16777216 --hw " + kWrapped + " --topology 4 --algorithm bidir_ring");
  BOOST_TEST(rows["groups"] == 4);
  BOOST_TEST(rows["group_size"] == 4);
  BOOST_TEST(rows["time_s"].get<double>() == line["time_s"].get<double>(), boost::test_tools::tolerance(1e-9));
  const CommandResult bad = run_tpusim("collective --bytes 1024 --hw tpu_v5e --topology 4x4 --group z");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("--group: a 4x4 slice has no z axis") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(schedules_visit_every_chip_of_the_group_once) {
  const Torus torus({4, 4, 4}, {true, true, true});
  CollectiveSpec spec;
  spec.bytes = 1 << 20;
  spec.algorithm = CollectiveAlgorithm::TorusAllAxes;
  const auto s = plan_collective(torus, 21, spec);
  BOOST_TEST(s.group_size == 64u);
  BOOST_REQUIRE(s.parts.size() == 3u);
  for (const auto& part : s.parts) {
    BOOST_TEST(part.passes.size() == 6u);  // reduce-scatter on each axis, all-gather back
    for (const auto& pass : part.passes) {
      BOOST_TEST(pass.ring.size() == 4u);
      BOOST_TEST(pass.ring[pass.position] == 21u);
    }
  }
  // The first part's first pass carries a third of the buffer in two directions: 2^20 / 3 / 2 / 4.
  BOOST_TEST(s.parts[0].passes[0].shard_bytes == (((1u << 20) + 2) / 3 + 1) / 2 / 4 + 1);
}

// A group may take a block of an axis (a distributed batch norm's 2x2 tray): its rings stay in
// the block, aligned to multiples of its span, and are open lines, the block's ends not linked
// to each other; an axis it does not span stays out.
BOOST_AUTO_TEST_CASE(a_group_may_take_an_aligned_block_of_its_axes) {
  const Torus torus({8, 4, 4}, {true, true, true});
  CollectiveSpec spec;
  spec.bytes = 4096;
  spec.algorithm = CollectiveAlgorithm::Torus;
  spec.group_axes = 0x3;
  spec.group_span = {4, 2, 0};
  for (std::uint32_t chip : {0u, 13u, 127u}) {
    const Coords at = torus.coords(chip);
    const auto s = plan_collective(torus, chip, spec);
    BOOST_TEST_CONTEXT("chip " << chip) {
      BOOST_TEST(s.group_size == 8u);
      BOOST_REQUIRE(s.parts.size() == 1u);
      BOOST_REQUIRE(s.parts[0].passes.size() == 4u);  // RS x, RS y, AG y, AG x
      for (const RingPass& pass : s.parts[0].passes) {
        BOOST_TEST(pass.ring[pass.position] == chip);
        BOOST_TEST(pass.ring.size() == (pass.label.back() == 'x' ? 4u : 2u));
        BOOST_TEST(pass.line == (pass.ring.size() > 2));  // two chips: one link pair either way
        BOOST_TEST(!pass.bidirectional);
        for (std::uint32_t member : pass.ring) {
          const Coords m = torus.coords(member);
          BOOST_TEST(m[0] / 4 == at[0] / 4);
          BOOST_TEST(m[1] / 2 == at[1] / 2);
          BOOST_TEST(m[2] == at[2]);
        }
      }
    }
  }
  BOOST_TEST(group_size(torus, 0x3, {4, 2, 0}) == 8u);
  BOOST_TEST(group_size(torus, 0x5, {4, 2, 0}) == 16u);  // z whole: its span is 0
  BOOST_TEST(group_size(torus, 0x3) == 32u);
}

// What the end-of-run checks hold each chip's collective unit to: a ring all-reduce over p chips
// sends 2 (p - 1) shards of B / p, on a ring and on an open line alike (a line's chips send
// unevenly, but each direction's shards still add to (p - 1) B / p per chip on average).
BOOST_AUTO_TEST_CASE(a_schedules_sent_bytes_are_the_ring_all_reduces_closed_form) {
  CollectiveSpec spec;
  spec.bytes = 8 << 20;
  spec.algorithm = CollectiveAlgorithm::Ring;
  const Torus ring({8}, {true});
  for (std::uint32_t chip = 0; chip < 8; ++chip)
    BOOST_TEST(schedule_sent_bytes(plan_collective(ring, chip, spec)) == 2ull * 7 * (spec.bytes / 8));
  const Torus line({8}, {false});
  std::uint64_t total = 0;
  for (std::uint32_t chip = 0; chip < 8; ++chip) total += schedule_sent_bytes(plan_collective(line, chip, spec));
  BOOST_TEST(total == 8ull * 2 * 7 * (spec.bytes / 8));
  spec.kind = CollectiveKind::Permute;  // one hop of the whole buffer
  BOOST_TEST(schedule_sent_bytes(plan_collective(ring, 3, spec)) == spec.bytes);
}

// Several slices (--slices): a reduction's ICI stage leaves each chip 1/group of the buffer, which
// it all-reduces over the DCN with its peers in the other slices, ring by ring: 2 (k - 1) / k of
// that share leaves each chip, and the time is the alpha-beta form at the chip's DCN bandwidth.
BOOST_AUTO_TEST_CASE(a_reduction_over_slices_sends_its_share_over_the_dcn_as_a_ring_all_reduce) {
  for (const char* op : {"all-reduce", "reduce-scatter"})
    for (const char* topology : {"1", "4", "4x4", "16x16"})
      for (std::uint64_t slices : {2, 3, 8}) {
        const json c = collective(std::string("--op ") + op + " --bytes 1GiB --hw " + kWrapped + " --topology " + topology +
                                  " --slices " + std::to_string(slices) + " --algorithm torus");
        const std::uint64_t share = (1ull << 30) / c["group_size"].get<std::uint64_t>();
        BOOST_TEST_CONTEXT(op << " on " << topology << " x " << slices << " slices") {
          BOOST_TEST(c["dcn_sent_bytes_per_chip"].get<std::uint64_t>() == 2 * (slices - 1) * ((share + slices - 1) / slices));
          BOOST_TEST(relative_gap(c) <= 0.01, c["time_s"] << " s vs " << c["alpha_beta_s"] << " s");
        }
      }
  // A bandwidth-bound reduction over 4 slices of 16 chips: 2 x 3/4 x 1 GiB / 16 at v5e's 3.125 GB/s
  // per chip, 32.2 ms, beside 4 ms on the ICI.
  const json dcn = collective("--bytes 1GiB --hw " + kWrapped + " --topology 16 --slices 4 --algorithm ring");
  const double dcn_s = 2 * 3.0 / 4 * (1ull << 30) / 16 / 3.125e9;
  BOOST_TEST(dcn["time_s"].get<double>() >= dcn_s);
  BOOST_TEST(dcn["time_s"].get<double>() <= dcn_s + 2 * 15.0 / 16 * (1ull << 30) / 45e9 + 1e-3);
  // Only reductions cross: an all-gather over slices is an input error.
  const CommandResult gather = run_tpusim("collective --op all-gather --bytes 1MiB --hw tpu_v5e --slices 2");
  BOOST_TEST(gather.exit_code == 2);
  BOOST_TEST(gather.err.find("--slices 2: only a reduction") != std::string::npos, gather.err);
}
