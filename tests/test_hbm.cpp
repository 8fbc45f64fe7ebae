// HBM timing: the address map, the JEDEC constraints one at a time on small hand-checked cases,
// and `tpusim membench` end to end (keys, pattern behaviour, every preset).
#define BOOST_TEST_MODULE hbm
#include <boost/test/unit_test.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "hw/hbm_bench.hpp"
#include "hw/hbm_timing.hpp"
#include "sim/config.hpp"
#include "test_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// DRAMsim3's HBM2_8Gb_x128: 8 channels x 128 bits, BL4 (64-byte bursts), 2 KiB rows, 1 ns clock.
HbmConfig dramsim3_like() {
  HbmConfig c;
  c.capacity_bytes = 8ull << 30;
  c.bw_gbps = 256;
  c.channels = 8;
  c.channel_width_bits = 128;
  c.burst_length = 4;
  c.bank_groups = 4;
  c.banks_per_group = 4;
  c.row_bytes = 2048;
  c.address_mapping = "rorabgbachco";
  c.queue_depth = 32;
  c.latency_ns = 0;
  c.timing = {14, 14, 34, 14, 4, 2, 4, 6, 30, 6, 8, 2, 16, 5, 260, 3900};
  return c;
}

struct Request {
  std::uint64_t address;
  bool write;
  Picos arrival_ps = 0;
};

// Feeds the requests in arrival order, letting the scheduler decide up to each arrival, and
// returns each request's completion (the latest of its groups), in request order.
std::vector<Picos> run(HbmMemory& m, const std::vector<Request>& requests, std::uint64_t bytes) {
  std::vector<Picos> done(requests.size(), 0);
  std::vector<HbmGroupDone> out;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    std::vector<HbmMemory::Routed> routed;
    m.split(i, requests[i].address, bytes, requests[i].write, routed);
    if (requests[i].arrival_ps > 0) m.run_until(requests[i].arrival_ps - 1, out);
    for (const auto& g : routed) {
      const Picos ack = m.enqueue(g, requests[i].arrival_ps);
      if (ack != HbmChannel::kNever) done[i] = std::max(done[i], ack);
    }
  }
  while (m.next_decision_ps() != HbmChannel::kNever) m.run_until(m.next_decision_ps(), out);
  for (const auto& d : out) done[d.tag] = std::max(done[d.tag], d.done_ps);
  return done;
}

HbmConfig preset_hbm(const std::string& name) {
  ConfigRequest request;
  request.hw = name;
  return load_config(request).hw.hbm;
}

json membench(const std::string& args) {
  const CommandResult r = run_tpusim("membench " + args + " --json");
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(r.out);
}

}  // namespace

BOOST_AUTO_TEST_CASE(address_map_matches_dramsim3_bit_layout) {
  // rorabgbachco with 64-byte bursts: [10:6] column, [13:11] channel, [15:14] bank,
  // [17:16] bank group, row above.
  const HbmAddressMap map(dramsim3_like());
  const std::uint64_t address = (9ull << 6) | (5ull << 11) | (3ull << 14) | (2ull << 16) | (7ull << 18) | 17;
  const HbmLocation loc = map.decode(address);
  BOOST_TEST(loc.column == 9u);
  BOOST_TEST(loc.channel == 5u);
  BOOST_TEST(loc.bank == 3u);
  BOOST_TEST(loc.bank_group == 2u);
  BOOST_TEST(loc.row == 7u);
  BOOST_TEST(map.run_bytes(address) == 2048u - (address % 2048));
}

BOOST_AUTO_TEST_CASE(channel_counts_need_not_be_powers_of_two) {
  HbmConfig c = dramsim3_like();
  c.channels = 96;
  c.row_bytes = 1024;
  c.address_mapping = "robabgchco";
  const HbmAddressMap map(c);
  BOOST_TEST(map.decode(95 * 1024).channel == 95u);
  BOOST_TEST(map.decode(95 * 1024).bank_group == 0u);
  BOOST_TEST(map.decode(96 * 1024).channel == 0u);
  BOOST_TEST(map.decode(96 * 1024).bank_group == 1u);
}

BOOST_AUTO_TEST_CASE(bad_mappings_are_refused_with_the_reason) {
  HbmConfig c = dramsim3_like();
  for (const char* bad : {"robabgch", "robabgchcox", "robabgchcoqq", "robabgchcoch"}) {
    c.address_mapping = bad;
    BOOST_CHECK_THROW(HbmAddressMap{c}, std::invalid_argument);
  }
}

BOOST_AUTO_TEST_CASE(a_row_streams_at_the_burst_rate_after_activate_and_cas) {
  HbmMemory m(dramsim3_like());
  // One 2 KiB row of one channel: ACT, tRCD, tCL, then 32 bursts of 2 ns back to back.
  const auto done = run(m, {{0, false}}, 2048);
  BOOST_TEST(done[0] == ns_to_ps(14 + 14 + 32 * 2));
  BOOST_TEST(m.stats().total.row_hits == 31u);
  BOOST_TEST(m.stats().total.row_misses == 1u);
}

BOOST_AUTO_TEST_CASE(a_row_conflict_costs_precharge_and_activate) {
  HbmMemory m(dramsim3_like());
  // Two one-burst reads to rows 0 and 1 of the same bank: the second waits for tRAS after the
  // first ACT, then tRP, tRCD and tCL.
  const std::uint64_t next_row = 1ull << 18;
  const auto done = run(m, {{0, false}, {next_row, false}}, 64);
  BOOST_TEST(done[0] == ns_to_ps(14 + 14 + 2));
  BOOST_TEST(done[1] == ns_to_ps(34 + 14 + 14 + 14 + 2));
  BOOST_TEST(m.stats().total.row_conflicts == 1u);
}

BOOST_AUTO_TEST_CASE(four_activates_per_faw_window) {
  HbmMemory m(dramsim3_like());
  // Eight one-burst reads to eight banks of channel 0 (spread over the bank groups): the fifth
  // ACT waits for tFAW after the first.
  std::vector<Request> reads;
  for (std::uint64_t bank = 0; bank < 8; ++bank) reads.push_back({((bank % 4) << 16) | ((bank / 4) << 14), false});
  const auto done = run(m, reads, 64);
  const Picos last = *std::max_element(done.begin(), done.end());
  BOOST_TEST(last >= ns_to_ps(30 + 3 * 4 + 14 + 14 + 2));  // ACTs 5..8 at tFAW + 3 tRRD_S
  BOOST_TEST(m.stats().total.row_misses == 8u);
}

BOOST_AUTO_TEST_CASE(turnarounds_separate_reads_from_writes_on_the_bus) {
  HbmConfig c = dramsim3_like();
  c.posted_writes = false;
  // A read, then a write to its open row: the write's data waits tRTW after the read's data.
  HbmMemory rw(c);
  const auto a = run(rw, {{0, false}, {64, true, ns_to_ps(1)}}, 64);
  BOOST_TEST(a[0] == ns_to_ps(14 + 14 + 2));
  BOOST_TEST(a[1] == a[0] + ns_to_ps(2 + 2));  // bus gap, then the write's burst
  // A write, then a read: the read's data waits tWTR_L and its CAS latency after the write data.
  HbmMemory wr(c);
  const auto b = run(wr, {{0, true}, {64, false, ns_to_ps(1)}}, 64);
  BOOST_TEST(b[0] == ns_to_ps(14 + 4 + 2));
  BOOST_TEST(b[1] == b[0] + ns_to_ps(8 + 14 + 2));
  // Writes wait in their buffer while reads are queued, then drain together: the read that
  // arrived after them is served before them, and the bus turns around once, not per write.
  HbmMemory batched(c);
  const auto d = run(batched, {{0, false}, {64, true}, {128, true}, {192, true}, {256, false}}, 64);
  BOOST_TEST(d[4] < d[1]);
  BOOST_TEST(d[1] == d[4] + ns_to_ps(2 + 2));
  BOOST_TEST(d[3] == d[1] + ns_to_ps(2 + 2));
}

BOOST_AUTO_TEST_CASE(posted_writes_complete_when_queued) {
  HbmMemory m(dramsim3_like());
  const auto done = run(m, {{0, true, ns_to_ps(5)}}, 2048);
  BOOST_TEST(done[0] == ns_to_ps(5));
  BOOST_TEST(m.stats().total.write_bursts == 32u);
}

BOOST_AUTO_TEST_CASE(refresh_takes_its_share_of_a_long_stream) {
  HbmConfig c = dramsim3_like();
  c.channels = 1;
  c.bw_gbps = 32;
  c.capacity_bytes = 1ull << 30;
  HbmMemory m(c);
  // 2 MiB on one channel: about 65.5 us of bursts, crossing 16 refresh intervals.
  std::vector<Request> rows;
  for (std::uint64_t i = 0; i < 1024; ++i) rows.push_back({i * 2048, false});
  const auto done = run(m, rows, 2048);
  const double busy_ns = 1024 * 32 * 2;
  const double total_ns = static_cast<double>(*std::max_element(done.begin(), done.end())) / 1000;
  const double refresh_share = 1 - busy_ns / total_ns;
  BOOST_TEST(m.stats().total.refreshes >= 16u);
  BOOST_TEST(refresh_share > 260.0 / 3900 * 0.8);   // tRFC / tREFI, give or take the row switches
  BOOST_TEST(refresh_share < 260.0 / 3900 + 0.05);
}

BOOST_AUTO_TEST_CASE(membench_json_has_the_documented_keys) {
  const json j = membench("--hw tpu_v4 --pattern stream-read --bytes 4194304");
  for (const char* key : {"bw_gbps", "peak_bw_gbps", "latency_avg_ns", "latency_p99_ns", "row_hit_rate"})
    BOOST_TEST(j.contains(key), key);
  BOOST_TEST(j["peak_bw_gbps"].get<double>() == 1200.0);
  BOOST_TEST(j["bw_gbps"].get<double>() < j["peak_bw_gbps"].get<double>());
  BOOST_TEST(j["latency_p99_ns"].get<double>() >= j["latency_avg_ns"].get<double>() * 0.5);
}

BOOST_AUTO_TEST_CASE(streams_approach_the_peak_and_small_random_reads_do_not) {
  for (const auto& name : preset_names()) {
    BOOST_TEST_CONTEXT(name) {
      const json stream = membench("--hw " + name + " --pattern stream-read --bytes 67108864 --request-bytes 4096 "
                                   "--requesters 8 --outstanding 128");
      const json random = membench("--hw " + name + " --pattern random --bytes 4194304 --request-bytes 32 "
                                   "--requesters 8 --outstanding 64");
      BOOST_TEST(stream["fraction_of_peak"].get<double>() > 0.8);
      BOOST_TEST(stream["row_hit_rate"].get<double>() > 0.9);
      BOOST_TEST(random["fraction_of_peak"].get<double>() < 0.5 * stream["fraction_of_peak"].get<double>());
      BOOST_TEST(random["row_hit_rate"].get<double>() < 0.05);
    }
  }
}

BOOST_AUTO_TEST_CASE(training_path_rates_come_from_the_burst_group_model) {
  // The SystemC HBM books transfers at the stream profile's rates; membench runs the burst-group
  // model itself with enough requests in flight to saturate it. They must agree.
  for (const auto& name : preset_names()) {
    const HbmConfig hbm = preset_hbm(name);
    const HbmStreamProfile& profile = hbm_stream_profile(hbm);
    const json stream = membench("--hw " + name + " --pattern stream-read --bytes 134217728 --request-bytes 65536 "
                                 "--requesters 8 --outstanding 64");
    BOOST_TEST_CONTEXT(name << ": profile " << profile.read_efficiency << ", membench " << stream["fraction_of_peak"]) {
      BOOST_TEST(profile.read_efficiency > 0.85);
      BOOST_TEST(profile.read_efficiency < 0.99);
      BOOST_TEST(profile.write_efficiency > 0.8);
      BOOST_TEST(std::abs(profile.read_efficiency / stream["fraction_of_peak"].get<double>() - 1) < 0.03);
      BOOST_TEST(profile.first_access_ps >= ns_to_ps(hbm.timing.trcd_ns + hbm.timing.tcl_ns));
    }
  }
}

BOOST_AUTO_TEST_CASE(membench_is_deterministic) {
  const std::string args = "--hw tpu_v5e --pattern random --bytes 1048576 --request-bytes 256";
  BOOST_TEST(run_tpusim("membench " + args + " --json").out == run_tpusim("membench " + args + " --json").out);
}

BOOST_AUTO_TEST_CASE(membench_refuses_layouts_it_cannot_make) {
  const CommandResult uneven = run_tpusim("membench --hw tpu_v4 --bytes 1000 --request-bytes 64");
  BOOST_TEST(uneven.exit_code == 2);
  BOOST_TEST(uneven.err.find("--bytes 1000 must be a multiple of") != std::string::npos, uneven.err);
  const CommandResult mapping = run_tpusim("membench --hw tpu_v4 --set hw.hbm.address_mapping=robabgch");
  BOOST_TEST(mapping.exit_code == 2);
  BOOST_TEST(mapping.err.find("hw.hbm.address_mapping") != std::string::npos, mapping.err);
  const CommandResult beyond = run_tpusim("membench --hw tpu_v5e --pattern random --footprint-bytes 68719476736");
  BOOST_TEST(beyond.exit_code == 2);
  BOOST_TEST(beyond.err.find("HBM holds") != std::string::npos, beyond.err);
}

// The same requests on DRAMsim3's HBM2_8Gb_x128 (recorded in tests/data, docs/validation/hbm.md
// says how) and on tpusim's model of that configuration: achieved bandwidth within 10% on every
// pattern.
BOOST_AUTO_TEST_CASE(bandwidth_matches_dramsim3_on_every_pattern) {
  const json peer = json::parse(read_file(source_path("tests/data/dramsim3_hbm2_results.json")));
  const std::string hw = source_path("tests/data/dramsim3_hbm2_8gb_x128.json");
  for (const json& c : peer["results"]) {
    std::string args = "--hw " + hw + " --pattern " + c["pattern"].get<std::string>() +
                       " --bytes " + std::to_string(c["bytes"].get<std::uint64_t>()) +
                       " --request-bytes " + std::to_string(c["request_bytes"].get<std::uint64_t>()) +
                       " --requesters " + std::to_string(c["requesters"].get<std::uint32_t>()) +
                       " --outstanding " + std::to_string(c["outstanding"].get<std::uint32_t>());
    if (c["pattern"] == "random") args += " --footprint-bytes " + std::to_string(c["footprint_bytes"].get<std::uint64_t>());
    const json ours = membench(args);
    const double error = ours["bw_gbps"].get<double>() / c["bw_gbps"].get<double>() - 1;
    BOOST_TEST_CONTEXT(args << ": DRAMsim3 " << c["bw_gbps"] << " GB/s, tpusim " << ours["bw_gbps"] << " GB/s") {
      BOOST_TEST(std::abs(error) <= 0.10);
    }
  }
}

BOOST_AUTO_TEST_CASE(gathers_of_small_runs_cost_more_than_streams_on_fast_hbm) {
  // Every 64-byte piece of a gather opens a row. On HBM2 at 1.4-2.4 Gb/s its bursts take longer
  // on the bus than tRRD and tFAW/4, so with enough in flight the bus still limits; from 3.2 Gb/s
  // on (v5e, v5p, v6e) the activations do.
  for (const auto& name : preset_names()) {
    const HbmConfig hbm = preset_hbm(name);
    const HbmStreamProfile& stream = hbm_stream_profile(hbm);
    const double small = hbm_gather_efficiency(hbm, 64, false);
    const double scatter = hbm_gather_efficiency(hbm, 64, true);
    BOOST_TEST_CONTEXT(name << ": 64 B gather " << small << ", scatter " << scatter << ", stream "
                            << stream.read_efficiency) {
      BOOST_TEST(small <= stream.read_efficiency * 1.01);
      BOOST_TEST(hbm_gather_efficiency(hbm, 256, false) >= small * 0.99);
      BOOST_TEST(hbm_gather_efficiency(hbm, 4096, false) == stream.read_efficiency);  // a row or more: a stream
      const double rate_gbps_per_pin = hbm.bw_gbps / hbm.channels * 8 / hbm.channel_width_bits;
      if (rate_gbps_per_pin >= 3) {
        BOOST_TEST(small < 0.7 * stream.read_efficiency);
        BOOST_TEST(scatter < 0.7 * stream.write_efficiency);
      }
    }
  }
}
