// A SystemC module alone (issue 40): a chip's memory as the model `datasheet` builds it
// (hw/memory.hpp, hw/hbm.hpp), asked by a fake requester, so that every booking has a closed
// form: a transfer spreads over the channels of its partition at the datasheet rate, bookings
// of one partition never overlap (a later request may take a gap before an earlier booking),
// partitions (a core's own HBM, hw.chip.hbm_per_core) are independent, and the data is there
// the on-chip latency after the booking ends. SystemC elaborates once per process: every
// scenario is built, then simulated together.
#define BOOST_TEST_MODULE hbm_module
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>

#include "hw/memory.hpp"

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
      request.set_access(tlm::TLM_READ_COMMAND, read.address, kBytes);
      request.job().bytes = kBytes;
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

  Scenario(const std::string& name, bool hbm_per_core, std::vector<Requester::Read> reads) : hw(hardware(hbm_per_core)) {
    memory = make_chip_memory(hw.hbm.model, (name + "_hbm").c_str(), MemorySite{hw, 0, nullptr});
    requester = std::make_unique<Requester>((name + "_requester").c_str(), std::move(reads));
    requester->socket.bind(memory->socket);
  }
  const std::vector<Requester::Answer>& answers() const { return requester->answers; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_datasheet_memory_books_its_channels) {
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
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
}
