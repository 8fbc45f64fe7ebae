// A SystemC module alone (issue 40): a chip's memory as each built-in model builds it
// (hw/memory.hpp, hw/hbm.hpp, hw/hbm_burst.hpp), asked by a fake requester, so that every booking
// has a closed form. `datasheet`: a transfer spreads over the channels of its partition at the
// datasheet rate, bookings of one partition never overlap (a later request may take a gap before
// an earlier booking), partitions (a core's own HBM, hw.chip.hbm_per_core) are independent, and
// the data is there the on-chip latency after the booking ends. `calibrated`: the same at the
// rates the burst-group model's stream profile gives, the data later by its first access.
// `burst_group`: the DRAM model itself, which must reproduce that profile. SystemC elaborates once
// per process: every scenario is built, then simulated together.
#define BOOST_TEST_MODULE hbm_module
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>

#include "hw/hbm_bench.hpp"
#include "hw/memory.hpp"
#include "sim/config.hpp"

using namespace tpusim;

namespace {

constexpr std::uint32_t kChannels = 64;
constexpr double kBwGbps = 64;             // 1 GB/s per channel
constexpr double kLatencyNs = 100;
constexpr Picos kLatencyPs = 100000;
constexpr std::uint64_t kBytes = 64000;    // 1000 bytes per channel of all 64: 1 us
constexpr Picos kWholeChipPs = 1000000;
constexpr std::uint64_t kCapacity = 1ull << 30;

HwConfig hardware(bool hbm_per_core) {
  HwConfig hw;
  hw.chip.cores = 2;
  hw.chip.hbm_per_core = hbm_per_core;
  hw.hbm.capacity_bytes = kCapacity;
  hw.hbm.bw_gbps = kBwGbps;
  hw.hbm.channels = kChannels;
  hw.hbm.latency_ns = kLatencyNs;
  hw.hbm.model = "datasheet";
  return hw;
}

// Asks for reads at time 0, each `not_before_ps` from now, and records the booking and when the
// data is there.
class Requester : public sc_core::sc_module {
 public:
  struct Read {
    std::uint64_t address;
    Picos not_before_ps;
    std::uint64_t bytes = kBytes;
    bool write = false;
    std::uint64_t run_bytes = 0;  // a gather's or scatter's pieces; 0: one stream
  };
  struct Answer {
    Interval served;
    Picos data_ps;
  };
  tlm_utils::simple_initiator_socket<Requester> socket;
  std::vector<Answer> answers;

  SC_HAS_PROCESS(Requester);
  Requester(sc_core::sc_module_name name, std::vector<Read> reads) : sc_module(name), socket("socket"), reads_(std::move(reads)) {
    SC_THREAD(run);
  }

 private:
  void run() {
    for (const Read& read : reads_) {
      Request request;
      request.set_access(read.write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND, read.address, read.bytes);
      request.job().bytes = read.bytes;
      request.job().run_bytes = read.run_bytes;
      sc_core::sc_time delay = ps_time(read.not_before_ps);
      socket->b_transport(request.payload(), delay);
      BOOST_TEST(request.payload().is_response_ok());
      answers.push_back({request.job().served, now_ps() + delay.value()});
    }
  }
  std::vector<Read> reads_;
};

struct Scenario {
  HwConfig hw;
  std::unique_ptr<ChipMemory> memory;
  std::unique_ptr<Requester> requester;

  Scenario(const std::string& name, bool hbm_per_core, std::vector<Requester::Read> reads)
      : Scenario(name, hardware(hbm_per_core), std::move(reads)) {}
  Scenario(const std::string& name, HwConfig config, std::vector<Requester::Read> reads) : hw(std::move(config)) {
    memory = make_chip_memory(hw.hbm.model, (name + "_hbm").c_str(), MemorySite{hw, 0, nullptr});
    requester = std::make_unique<Requester>((name + "_requester").c_str(), std::move(reads));
    requester->socket.bind(memory->socket);
  }
  const std::vector<Requester::Answer>& answers() const { return requester->answers; }
};

}  // namespace

// v5e's memory (its preset: 32 channels, 819 GB/s, HBM2e timing) under `model`.
HwConfig v5e_memory(const std::string& model) {
  ConfigRequest request;
  request.hw = "tpu_v5e";
  HwConfig hw = load_config(request).hw;
  hw.hbm.model = model;
  return hw;
}

BOOST_AUTO_TEST_CASE(each_memory_model_books_as_its_closed_form_says) {
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  // The calibrated model: a read, a write and a gather of 64-byte pieces, each 1 MiB, one after
  // another.
  constexpr std::uint64_t kMiB = 1 << 20;
  Scenario calibrated("calibrated", v5e_memory("calibrated"),
                      {{0, 0, kMiB}, {0, 0, kMiB, true}, {0, 0, kMiB, false, 64}});
  // The DRAM model itself: one burst on an idle memory, then a long stream.
  const HwConfig v5e = v5e_memory("burst_group");
  Scenario burst("burst", v5e, {{0, 0, v5e.hbm.burst_bytes()}, {0, 0, 64 * kMiB}});
  // Two reads at once, a third that may only start at 5 us, a fourth that fits before it.
  Scenario shared("shared", false, {{0, 0}, {0, 0}, {0, 5 * kWholeChipPs}, {0, 0}});
  // Each core's HBM is half the channels: a read takes twice as long, and a read of the other
  // core's half does not wait for it.
  Scenario per_core("per_core", true, {{0, 0}, {kCapacity / 2, 0}, {0, 0}});
  sc_core::sc_start();

  BOOST_TEST_CONTEXT("every channel of the chip") {
    const auto& a = shared.answers();
    BOOST_TEST_REQUIRE(a.size() == 4u);
    BOOST_TEST(a[0].served.start == 0u);
    BOOST_TEST(a[0].served.end == kWholeChipPs);
    BOOST_TEST(a[0].data_ps == kWholeChipPs + kLatencyPs);
    BOOST_TEST(a[1].served.start == kWholeChipPs);  // behind the first
    BOOST_TEST(a[2].served.start == 5 * kWholeChipPs);
    BOOST_TEST(a[3].served.start == 2 * kWholeChipPs);  // the gap before the third's booking
    BOOST_TEST(shared.memory->bytes_read() == 4 * kBytes);
  }
  BOOST_TEST_CONTEXT("a partition per core") {
    const auto& a = per_core.answers();
    BOOST_TEST_REQUIRE(a.size() == 3u);
    BOOST_TEST(a[0].served.end == 2 * kWholeChipPs);
    BOOST_TEST(a[1].served.start == 0u);  // the other core's partition
    BOOST_TEST(a[2].served.start == 2 * kWholeChipPs);
    BOOST_TEST(a[2].data_ps == 4 * kWholeChipPs + kLatencyPs);
  }
  BOOST_TEST_CONTEXT("calibrated: the burst-group model's stream rates and first access") {
    const HbmConfig& hbm = calibrated.hw.hbm;
    const HbmStreamProfile& profile = hbm_stream_profile(hbm);
    const double channel_gbps = hbm.bw_gbps / hbm.channels;
    const std::uint64_t channel_bytes = kMiB / hbm.channels;
    const auto& a = calibrated.answers();
    BOOST_TEST_REQUIRE(a.size() == 3u);
    BOOST_TEST(a[0].served.start == 0u);
    BOOST_TEST(a[0].served.end == transfer_ps(channel_bytes, channel_gbps * profile.read_efficiency));
    BOOST_TEST(a[0].data_ps == a[0].served.end + ns_to_ps(hbm.latency_ns) + profile.first_access_ps);
    BOOST_TEST(a[1].served.start == a[0].served.end);
    BOOST_TEST(a[1].served.end - a[1].served.start == transfer_ps(channel_bytes, channel_gbps * profile.write_efficiency));
    const double gather = hbm_gather_efficiency(hbm, 64, false);
    BOOST_TEST(a[2].served.end - a[2].served.start == transfer_ps(channel_bytes, channel_gbps * gather));
    // What a DRAM costs: row switches and refresh below the peak, writes' recovery below reads,
    // and a 64-byte piece a row activation of its own: a channel activates at most one row per
    // tRRD, so 64 bytes per tRRD bound the gather (0.63 of v5e's channel peak; a stream, 0.90).
    BOOST_TEST(profile.read_efficiency < 1.0);
    BOOST_TEST(profile.write_efficiency < profile.read_efficiency);
    BOOST_TEST(gather < profile.read_efficiency);
    BOOST_TEST(gather <= 64 / hbm.timing.trrd_s_ns / channel_gbps);
  }
  BOOST_TEST_CONTEXT("burst_group: the DRAM model the calibrated rates come from") {
    const HbmConfig& hbm = burst.hw.hbm;
    const HbmStreamProfile& profile = hbm_stream_profile(hbm);
    const auto& a = burst.answers();
    BOOST_TEST_REQUIRE(a.size() == 2u);
    // One burst from an idle memory: the profile's first access, measured the same way.
    BOOST_TEST(a[0].served.end == profile.first_access_ps);
    BOOST_TEST(a[0].data_ps == profile.first_access_ps + ns_to_ps(hbm.latency_ns));
    // A long stream through the model runs at the rate the profile measured with eight streams.
    const double achieved_gbps = static_cast<double>(64 * kMiB) / static_cast<double>(a[1].served.end - a[1].served.start) * 1000;
    BOOST_TEST(achieved_gbps == hbm.bw_gbps * profile.read_efficiency, boost::test_tools::tolerance(0.02));
  }
}
