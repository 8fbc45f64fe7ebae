// A SystemC module alone (issue 40): one directed ICI link (hw/ici.hpp) between a sender and a
// fake router that records what reaches the far end, so that every reservation has a closed
// form: serialization at the link's payload rate, transfers in order, cut-through behind the
// previous link's tail, the hop latency on head and tail, and a folded run's deliveries.
// SystemC elaborates once per process: every scenario is built, then simulated together.
#define BOOST_TEST_MODULE ici_link_module
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "hw/ici.hpp"

using namespace tpusim;

namespace {

constexpr double kLinkGbps = 100;        // 1 MB in 10 us
constexpr double kHopNs = 1000;
constexpr Picos kHopPs = 1000000;
constexpr std::uint64_t kBytes = 1000000;
constexpr Picos kSerializePs = 10000000;

// The far end: records each transfer's head, tail and destination as the link hands it on.
class FakeRouter : public sc_core::sc_module {
 public:
  struct Arrival {
    Picos head_ps, tail_ps;
    std::uint32_t dest_chip;
    std::uint32_t ring_dir;
  };
  tlm_utils::simple_target_socket<FakeRouter> socket;
  std::vector<Arrival> arrivals;

  explicit FakeRouter(sc_core::sc_module_name name) : sc_module(name), socket("socket") {
    socket.register_b_transport(this, &FakeRouter::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
    const UnitRequest& job = job_of(payload);
    arrivals.push_back({job.head_ps, job.tail_ps, job.dest_chip, job.delivery ? job.delivery->dir : 99u});
    delay = ps_time(job.tail_ps - now_ps());
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }
};

// Sends transfers over the link at time 0, one after another as a chip's collective unit does
// (the next one issued when the call returns), each with the head and tail it came with.
class Sender : public sc_core::sc_module {
 public:
  struct Transfer {
    std::uint64_t bytes;
    Picos head_ps, tail_ps;
    std::uint32_t dest_chip;
  };
  tlm_utils::simple_initiator_socket<Sender> socket;

  SC_HAS_PROCESS(Sender);
  Sender(sc_core::sc_module_name name, std::vector<Transfer> transfers)
      : sc_module(name), socket("socket"), transfers_(std::move(transfers)) {
    SC_THREAD(run);
  }

 private:
  void run() {
    for (const Transfer& t : transfers_) {
      Request request;
      request.set_access(tlm::TLM_WRITE_COMMAND, 0, t.bytes);
      request.job().bytes = t.bytes;
      request.job().head_ps = t.head_ps;
      request.job().tail_ps = t.tail_ps;
      request.job().dest_chip = t.dest_chip;
      request.job().delivery = &delivery_;
      sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
      socket->b_transport(request.payload(), delay);
      BOOST_TEST(request.payload().is_response_ok());
    }
  }
  std::vector<Transfer> transfers_;
  RingDelivery delivery_;  // ring direction 0
};

struct Scenario {
  std::unique_ptr<IciLink> link;
  std::unique_ptr<FakeRouter> far_end;
  std::unique_ptr<Sender> sender;

  Scenario(const std::string& name, std::vector<Sender::Transfer> transfers) {
    IciConfig config;
    config.link_bw_gbps = kLinkGbps;
    config.payload_efficiency = 1;
    config.hop_latency_ns = kHopNs;
    link = std::make_unique<IciLink>((name + "_link").c_str(), config, LinkId{0, 0, true}, nullptr, UnitInfo{});
    far_end = std::make_unique<FakeRouter>((name + "_far_end").c_str());
    sender = std::make_unique<Sender>((name + "_sender").c_str(), std::move(transfers));
    link->out.bind(far_end->socket);
    sender->socket.bind(link->in);
  }
  const std::vector<FakeRouter::Arrival>& arrivals() const { return far_end->arrivals; }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_link_serializes_in_order_and_cuts_through) {
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  Scenario alone("alone", {{kBytes, 0, 0, 1}});
  Scenario in_order("in_order", {{kBytes, 0, 0, 1}, {kBytes, 0, 0, 1}});
  // The tail leaves the previous link well after this link could have sent it: this link ends
  // with it, not before.
  const Picos late_tail_ps = 3 * kSerializePs;
  Scenario cut_through("cut_through", {{kBytes, kHopPs, late_tail_ps, 1}});
  // Folded: the far end (as addressed) and a representative that a reflection maps onto it.
  Scenario readdressed("readdressed", {{kBytes, 0, 0, 5}});
  Scenario mirror_side("mirror", {});  // its far end stands for the representative
  FakeRouter& mirror = *mirror_side.far_end;
  readdressed.link->deliver_to({{&readdressed.far_end->socket.get_base_interface(), {}, false},
                                {&mirror.socket.get_base_interface(), [](std::uint32_t dest) { return dest == 5 ? 1u : dest; }, true}});
  sc_core::sc_start();

  BOOST_TEST_CONTEXT("alone: serialized at the payload rate, one hop on head and tail") {
    BOOST_TEST_REQUIRE(alone.arrivals().size() == 1u);
    BOOST_TEST(alone.arrivals()[0].head_ps == kHopPs);
    BOOST_TEST(alone.arrivals()[0].tail_ps == kSerializePs + kHopPs);
    BOOST_TEST(alone.link->bytes() == kBytes);
  }
  BOOST_TEST_CONTEXT("in order: the second starts where the first ends") {
    BOOST_TEST_REQUIRE(in_order.arrivals().size() == 2u);
    BOOST_TEST(in_order.arrivals()[1].head_ps == kSerializePs + kHopPs);
    BOOST_TEST(in_order.arrivals()[1].tail_ps == 2 * kSerializePs + kHopPs);
    BOOST_TEST(in_order.link->bytes() == 2 * kBytes);
  }
  BOOST_TEST_CONTEXT("cut-through: starts at the head, ends with the previous link's tail") {
    BOOST_TEST_REQUIRE(cut_through.arrivals().size() == 1u);
    BOOST_TEST(cut_through.arrivals()[0].head_ps == kHopPs + kHopPs);
    BOOST_TEST(cut_through.arrivals()[0].tail_ps == late_tail_ps + kHopPs);
  }
  BOOST_TEST_CONTEXT("folded: each delivery reads the piece as it left the link, the mirror's readdressed and reversed") {
    BOOST_TEST_REQUIRE(readdressed.arrivals().size() == 1u);
    BOOST_TEST_REQUIRE(mirror.arrivals.size() == 1u);
    BOOST_TEST(readdressed.arrivals()[0].dest_chip == 5u);
    BOOST_TEST(readdressed.arrivals()[0].ring_dir == 0u);
    BOOST_TEST(mirror.arrivals[0].dest_chip == 1u);
    BOOST_TEST(mirror.arrivals[0].ring_dir == 1u);
    BOOST_TEST(mirror.arrivals[0].head_ps == readdressed.arrivals()[0].head_ps);
    BOOST_TEST(mirror.arrivals[0].tail_ps == readdressed.arrivals()[0].tail_ps);
    BOOST_TEST(readdressed.link->bytes() == kBytes);
  }
}
