// Timing models in plain C++, against arithmetic written out by hand.
#define BOOST_TEST_MODULE timing
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <set>

#include "hw/collective.hpp"
#include "hw/hbm.hpp"
#include "hw/matmul_tiling.hpp"
#include "hw/systolic_timing.hpp"
#include "hw/topology.hpp"
#include "hw/units.hpp"
#include "sim/stats.hpp"

using namespace tpusim;

BOOST_AUTO_TEST_SUITE(systolic)

BOOST_AUTO_TEST_CASE(one_tile_pays_load_stream_and_fill_drain) {
  const SystolicArray array{128, 128, true};
  // weight load 128 + 512 rows + fill/drain 255 = 895 cycles
  BOOST_TEST(systolic_cycles(array, 512, 1, 1.0) == 895u);
}

BOOST_AUTO_TEST_CASE(double_buffering_hides_later_loads_behind_long_streams) {
  const SystolicArray array{128, 128, true};
  // 128 + 4 tiles x 512 rows + 255 = 2431: loads of tiles 2..4 hide behind 512-row streams
  BOOST_TEST(systolic_cycles(array, 512, 4, 1.0) == 2431u);
  // 8 rows per tile cannot hide a 128-cycle load: 128 + 4 x 8 + 3 x (128 - 8) + 255 = 775
  BOOST_TEST(systolic_cycles(array, 8, 4, 1.0) == 775u);
}

BOOST_AUTO_TEST_CASE(work_that_continues_a_stream_has_no_bubble_of_its_own) {
  const SystolicArray array{128, 128, true};
  // Behind the same op's previous block: no first load, no fill or drain: 4 x 512 = 2048
  BOOST_TEST(systolic_cycles(array, 512, 4, 1.0, true) == 2048u);
  // Short streams still expose each load's remainder: 4 x (8 + 120) = 512
  BOOST_TEST(systolic_cycles(array, 8, 4, 1.0, true) == 512u);
  // Without double buffering every load is exposed: 4 x (512 + 128) = 2560
  BOOST_TEST(systolic_cycles(SystolicArray{128, 128, false}, 512, 4, 1.0, true) == 2560u);
}

BOOST_AUTO_TEST_CASE(without_double_buffering_every_load_is_exposed) {
  const SystolicArray array{128, 128, false};
  // 128 + 4 x 512 + 3 x 128 + 255 = 2815
  BOOST_TEST(systolic_cycles(array, 512, 4, 1.0) == 2815u);
}

BOOST_AUTO_TEST_CASE(faster_datatypes_stream_more_rows_per_cycle) {
  const SystolicArray array{128, 128, true};
  // int8 at 2x: 512 rows in 256 cycles: 128 + 256 + 255 = 639
  BOOST_TEST(systolic_cycles(array, 512, 1, 2.0) == 639u);
}

BOOST_AUTO_TEST_CASE(plan_pads_every_dimension_and_splits_tiles_over_mxus) {
  const SystolicArray array{128, 128, true};
  // 784 x 10: K pads to 7 tiles of 128, N to 1 tile; 3 passes triple the tiles.
  const MatmulPlan plan = plan_matmul(array, 128, 784, 10, 3, 4);
  BOOST_TEST(plan.k_tiles == 7u);
  BOOST_TEST(plan.n_tiles == 1u);
  BOOST_TEST(plan.weight_tiles == 21u);
  BOOST_TEST(plan.mxus_used == 4u);
  BOOST_TEST(plan.weight_tiles_per_mxu == 6u);  // ceil(21 / 4)
  BOOST_TEST(plan.useful_macs == 128u * 784u * 10u);
  BOOST_TEST(plan.padded_macs == 21u * 128u * 128u * 128u);
}

BOOST_AUTO_TEST_CASE(scalesim_compat_pays_load_stream_and_drain_per_fold) {
  const SystolicArray array{128, 128, false};
  // 784 x 10 weights on 128 x 128: 7 x 1 folds of (2 x 128 + 128 + 512 - 2) = 894 cycles
  BOOST_TEST(scalesim_ws_cycles(array, 512, 784, 10, 1) == 7u * 894u);
  // shared by 4 arrays: ceil(7 / 4) = 2 folds on the busiest
  BOOST_TEST(scalesim_ws_cycles(array, 512, 784, 10, 4) == 2u * 894u);
}

BOOST_AUTO_TEST_CASE(matmul_blocks_fit_vector_memory_and_cover_the_product) {
  MxuConfig mxu;  // 128 x 128
  MatmulWork mm;
  mm.m = 8192;
  mm.k = 8192;
  mm.n = 8192;
  mm.lhs = mm.rhs = DType::BF16;
  mm.out = DType::F32;
  // 512 x 1024 x 1024 bf16: 2 x (1 MiB + 2 MiB) + 2 x 2 MiB f32 results = 10 MiB
  const auto big = tile_matmul(mm, mxu, 96ull << 20);
  BOOST_TEST(big.bm == 512u);
  BOOST_TEST(big.bk == 1024u);
  BOOST_TEST(big.bn == 1024u);
  BOOST_TEST(big.working_set_bytes == 10u << 20);
  BOOST_TEST(big.blocks.size() == 16u * 8u * 8u);
  // Under 4 MiB the largest dimension halves first: bk 1024 -> 512, bn 1024 -> 512, ...
  const auto small = tile_matmul(mm, mxu, 4ull << 20);
  BOOST_TEST(small.working_set_bytes <= (4u << 20));
  std::uint64_t macs = 0, stored = 0;
  for (const auto& b : small.blocks) {
    macs += b.m * b.k * b.n;
    stored += b.store_bytes;
  }
  BOOST_TEST(macs == 8192ull * 8192 * 8192);
  BOOST_TEST(stored == 8192ull * 8192 * 4);
  mm.block_m = 4096;
  mm.block_k = 4096;
  mm.block_n = 4096;
  BOOST_CHECK_THROW(tile_matmul(mm, mxu, 4ull << 20), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(few_tiles_split_the_rows_over_the_mxus) {
  const SystolicArray array{128, 128, true};
  // One 128 x 128 tile, 1024 rows, 4 MXUs: each loads the tile and streams 256 rows.
  const MatmulPlan plan = plan_matmul(array, 1024, 128, 128, 1, 4);
  BOOST_REQUIRE(plan.shares.size() == 4u);
  for (const auto& s : plan.shares) {
    BOOST_TEST(s.rows == 256u);
    BOOST_TEST(s.weight_tiles == 1u);
  }
  // Two tiles, 20 rows: 2 row groups of 16 and 4 rows per tile.
  const MatmulPlan two = plan_matmul(array, 20, 256, 128, 1, 4);
  BOOST_REQUIRE(two.shares.size() == 4u);
  BOOST_TEST(two.shares[0].rows == 16u);
  BOOST_TEST(two.shares[1].rows == 4u);
  // Eight rows are one vreg: never split.
  BOOST_TEST(plan_matmul(array, 8, 128, 128, 1, 4).shares.size() == 1u);
}

BOOST_AUTO_TEST_CASE(tiles_that_do_not_divide_over_the_mxus_split_the_rows_to_balance_them) {
  const SystolicArray array{128, 128, true};
  // A 3x3x64 -> 64 convolution's im2col product: K 576 is 5 tiles. Dealt whole to 4 MXUs, one
  // would stream every row twice while three idle for the second round; in 4 row groups the 20
  // (tile, group) pairs give each MXU 5 of a quarter of the rows.
  const std::uint64_t m = 401408;
  const MatmulPlan plan = plan_matmul(array, m, 576, 64, 1, 4);
  BOOST_REQUIRE(plan.shares.size() == 4u);
  for (const auto& s : plan.shares) {
    BOOST_TEST(s.rows == m / 4);
    BOOST_TEST(s.weight_tiles == 5u);
  }
  const std::uint64_t busiest = systolic_cycles(array, m / 4, plan.weight_tiles_per_mxu, 1.0);
  BOOST_TEST(busiest < systolic_cycles(array, m, 2, 1.0) * 13 / 20);  // 5/8 of the unbalanced 2 rounds, and fill
  // Work the arrays do is the product's whatever the split.
  std::uint64_t streamed = 0;
  for (const auto& s : plan.shares) streamed += s.rows * s.weight_tiles;
  BOOST_TEST(streamed == m * plan.weight_tiles);
  // Tiles that divide evenly are not split.
  BOOST_TEST(plan_matmul(array, m, 512, 128, 1, 4).shares[0].rows == m);
  // Two MXUs (v2, v3) with 5 tiles: 2 row groups, 5 tiles' worth of half the rows each.
  const MatmulPlan v3 = plan_matmul(array, m, 576, 64, 1, 2);
  BOOST_TEST(v3.shares[0].rows == m / 2);
  BOOST_TEST(v3.weight_tiles_per_mxu == 5u);
}

BOOST_AUTO_TEST_CASE(vector_unit_works_in_whole_vregs) {
  const VectorUnitShape vpu{128, 8, 2};
  // 1025 elements occupy 2 vregs of 1024; 3 ops each over 2 ALUs: ceil(2 x 3 / 2) = 3 cycles
  BOOST_TEST(vector_cycles(vpu, 1025, 3.0) == 3u);
  BOOST_TEST(vector_cycles(vpu, 0, 3.0) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(conversions)

BOOST_AUTO_TEST_CASE(clock_and_bandwidth) {
  const Clock clock{700};
  BOOST_TEST(clock.cycles_to_ps(7) == 10000u);  // 7 cycles at 700 MHz = 10 ns
  BOOST_TEST(clock.ps_to_cycles(10000) == 7u);
  BOOST_TEST(transfer_ps(1000, 1.0) == 1000000u);  // 1000 B at 1 GB/s = 1 us
  BOOST_TEST(transfer_ps(1, 3.0) == 334u);         // rounded up, never zero
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(torus)

BOOST_AUTO_TEST_CASE(wraparound_follows_the_generation_rule) {
  IciConfig ici;
  ici.wraparound = Wraparound::FullAxis;
  ici.full_axis_chips = 16;
  BOOST_TEST(Torus::wraps_for({16, 8}, ici) == std::vector<bool>({true, false}));
  ici.wraparound = Wraparound::MultipleOf4;
  BOOST_TEST(Torus::wraps_for({4, 4, 8}, ici) == std::vector<bool>({true, true, true}));
  BOOST_TEST(Torus::wraps_for({2, 2, 1}, ici) == std::vector<bool>({false, false, false}));
}

BOOST_AUTO_TEST_CASE(routes_are_dimension_ordered_and_take_the_short_way_round) {
  const Torus t({4, 4}, {true, false});
  // (0,0) -> (3,2): x wraps, so one hop in -x, then two hops in +y.
  const auto hops = t.route(t.chip_at({0, 0}), t.chip_at({3, 2}));
  BOOST_REQUIRE(hops.size() == 3u);
  BOOST_TEST(hops[0].axis == 0);
  BOOST_TEST(!hops[0].positive);
  BOOST_TEST(hops[1].axis == 1);
  BOOST_TEST(hops[2].chip == t.chip_at({3, 1}));
  // Without wraparound on y, (0,3) -> (0,0) walks all three links back.
  BOOST_TEST(t.route(t.chip_at({0, 3}), t.chip_at({0, 0})).size() == 3u);
  BOOST_TEST(!t.link_exists({t.chip_at({0, 3}), 1, true}));
}

BOOST_AUTO_TEST_CASE(ring_order_visits_every_chip_with_single_hops) {
  for (const auto& dims : {std::vector<std::uint32_t>{8}, {4, 4}, {2, 4}, {3, 3}, {4, 4, 4}, {2, 2, 1}}) {
    const Torus t(dims, std::vector<bool>(dims.size(), false));
    const auto order = t.ring_order();
    BOOST_TEST(order.size() == t.chip_count());
    BOOST_TEST(std::set<std::uint32_t>(order.begin(), order.end()).size() == t.chip_count());
    for (std::size_t i = 1; i < order.size(); ++i) BOOST_TEST(t.route(order[i - 1], order[i]).size() == 1u);
  }
}

BOOST_AUTO_TEST_CASE(ring_order_closes_in_one_hop_wherever_a_grid_allows) {
  // An even number of chips over two or more axes has a closed walk even without wraparound.
  for (const auto& dims : {std::vector<std::uint32_t>{2, 4}, {4, 2}, {4, 4}, {3, 4}, {4, 3}, {2, 3}, {4, 8},
                           {2, 2, 2}, {3, 3, 2}, {4, 4, 4}, {1, 4, 2}}) {
    const Torus t(dims, std::vector<bool>(dims.size(), false));
    const auto order = t.ring_order();
    BOOST_TEST_CONTEXT(topology_string(dims)) {
      BOOST_TEST(std::set<std::uint32_t>(order.begin(), order.end()).size() == t.chip_count());
      for (std::size_t i = 0; i < order.size(); ++i)
        BOOST_TEST(t.route(order[i], order[(i + 1) % order.size()]).size() == 1u);
    }
  }
  // A line or an odd grid cannot close: the walk back is longer, and still every chip appears once.
  for (const auto& dims : {std::vector<std::uint32_t>{8}, {3, 3}, {1, 5}}) {
    const Torus t(dims, std::vector<bool>(dims.size(), false));
    const auto order = t.ring_order();
    BOOST_TEST(std::set<std::uint32_t>(order.begin(), order.end()).size() == t.chip_count());
    BOOST_TEST(t.route(order.back(), order.front()).size() > 1u);
  }
}

BOOST_AUTO_TEST_CASE(topology_strings) {
  BOOST_TEST(parse_topology("4x4x4") == std::vector<std::uint32_t>({4, 4, 4}));
  BOOST_TEST(topology_string({2, 2, 1}) == "2x2x1");
  for (const char* bad : {"", "4x", "x4", "0x4", "4x4x4x4", "4*4", "-1", "1000000000x2", "4x0"})
    BOOST_CHECK_THROW(parse_topology(bad), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

// SCALE-Sim v2's weight-stationary compute cycles for 27 GEMM shapes on 32x32, 128x128 and
// 256x256 arrays, recorded in tests/data (how: tests/data/scalesim_ws_gemm.md).
BOOST_AUTO_TEST_CASE(scalesim_compat_within_one_percent_of_scalesim_on_every_shape) {
  std::ifstream csv(std::string(TPUSIM_SOURCE_DIR) + "/tests/data/scalesim_ws_gemm.csv");
  BOOST_REQUIRE(csv);
  std::string line;
  std::getline(csv, line);  // header
  int rows = 0;
  while (std::getline(csv, line)) {
    std::stringstream cells(line);
    std::vector<std::string> f;
    for (std::string cell; std::getline(cells, cell, ',');) f.push_back(cell);
    BOOST_REQUIRE(f.size() == 10u);
    const std::uint64_t m = std::stoull(f[2]), n = std::stoull(f[3]), k = std::stoull(f[4]);
    const SystolicArray array{static_cast<std::uint32_t>(std::stoul(f[5])), static_cast<std::uint32_t>(std::stoul(f[6])), false};
    const double scalesim = std::stod(f[9]);
    const double ours = static_cast<double>(scalesim_ws_cycles(array, m, k, n, 1));
    BOOST_TEST_CONTEXT(f[0] << " on " << f[5] << "x" << f[6]) { BOOST_TEST(std::abs(ours - scalesim) / scalesim <= 0.01); }
    ++rows;
  }
  BOOST_TEST(rows >= 75);  // 25+ shapes on 3 arrays
}

// A core's breakdown reads, per source, the union of what its units report: overlapping and
// touching intervals of its MXUs and VPU merge into one as they come, a report out of order is
// kept beside them, and only chip 0's units keep intervals of their own (the timeline's).
BOOST_AUTO_TEST_CASE(core_breakdown_reads_the_union_of_each_sources_intervals) {
  Recorder recorder(1, nullptr);
  const auto unit = [&](std::uint32_t chip, UnitKind kind, OpEngine engine = OpEngine::None) {
    UnitInfo info;
    info.path = "unit";
    info.kind = kind;
    info.chip = chip;
    info.core = 0;
    info.engine = engine;
    return recorder.add_unit(info);
  };
  const std::uint32_t op = unit(0, UnitKind::Sequencer, OpEngine::Matmul);
  const std::uint32_t comm = unit(0, UnitKind::Sequencer, OpEngine::Collective);
  const std::uint32_t mxu0 = unit(0, UnitKind::Mxu), mxu1 = unit(0, UnitKind::Mxu), vpu = unit(0, UnitKind::Vpu);
  const std::uint32_t other_chip_mxu = unit(1, UnitKind::Mxu);
  const auto busy = [&](std::uint32_t u, std::uint64_t start, std::uint64_t end) {
    Activity a;
    a.unit = u;
    a.start_ps = start;
    a.end_ps = end;
    recorder.record(a);
  };
  busy(op, 0, 100);
  busy(mxu0, 10, 40);
  busy(mxu1, 30, 60);   // overlaps: [10, 60)
  busy(vpu, 60, 70);    // touches: [10, 70)
  busy(mxu0, 80, 90);   // after a gap
  busy(mxu1, 5, 8);     // out of order
  busy(comm, 90, 150);  // exposed from 100 on
  busy(other_chip_mxu, 0, 50);

  const CoreLogs* logs = recorder.core_logs(0, 0);
  BOOST_REQUIRE(logs != nullptr);
  BOOST_TEST((*logs)[static_cast<std::size_t>(BreakdownSource::Compute)].size() == 3u);
  BOOST_TEST(recorder.core_logs(1, 0) != nullptr);
  BOOST_TEST(recorder.core_logs(2, 0) == nullptr);
  BOOST_TEST(recorder.spans(mxu0).size() == 2u);  // chip 0: the timeline's own intervals
  BOOST_TEST(recorder.spans(other_chip_mxu).empty());

  const Breakdown b = core_breakdown(*logs, Window{0, 200});
  BOOST_TEST(b.compute == 3u + 60u + 10u);  // [5, 8), [10, 70), [80, 90) within the op
  BOOST_TEST(b.memory_bound == 100u - 73u);
  BOOST_TEST(b.exposed_communication == 50u);
  BOOST_TEST(b.input_wait == 0u);
  BOOST_TEST(b.idle == 50u);
  // A window clips the intervals.
  const Breakdown clipped = core_breakdown(*logs, Window{20, 120});
  BOOST_TEST(clipped.compute == 50u + 10u);
  BOOST_TEST(clipped.memory_bound == 80u - 60u);
  BOOST_TEST(clipped.exposed_communication == 20u);
  BOOST_TEST(clipped.idle == 0u);
}
