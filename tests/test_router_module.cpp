// A SystemC module alone (issue 40): one chip's ICI router (hw/ici.hpp) between a sender and fake
// links and a fake collective unit, so that where each transfer goes has an answer worked out by
// hand: dimension order (x before y), the shorter way round an axis that wraps, the only way
// along one that does not, the other way round a ring whose shorter way crosses a link that is
// down, and the chip's own transfers handed to its collective unit only when they carry a ring
// step's delivery. SystemC elaborates once per process: every scenario is built, then simulated
// together.
#define BOOST_TEST_MODULE router_module
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "hw/ici.hpp"

using namespace tpusim;

namespace {

// What a fake target was handed: the transfer's destination, and through which of the router's
// sockets it came ("+x", "-y", "local").
struct Handed {
  std::string via;
  std::uint32_t dest_chip;
};

class FakeTarget : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<FakeTarget> socket;

  FakeTarget(sc_core::sc_module_name name, std::string via, std::vector<Handed>& log)
      : sc_module(name), socket("socket"), via_(std::move(via)), log_(log) {
    socket.register_b_transport(this, &FakeTarget::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
    log_.push_back({via_, job_of(payload).dest_chip});
    delay = sc_core::SC_ZERO_TIME;
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }
  std::string via_;
  std::vector<Handed>& log_;
};

// Sends one transfer per destination into the router, in order; `delivered`: whether each carries
// a ring step's delivery (what the collective unit takes at the destination).
class Sender : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<Sender> socket;

  SC_HAS_PROCESS(Sender);
  Sender(sc_core::sc_module_name name, std::vector<std::pair<std::uint32_t, bool>> sends)
      : sc_module(name), socket("socket"), sends_(std::move(sends)) {
    SC_THREAD(run);
  }

 private:
  void run() {
    static const RingDelivery delivery{};
    for (const auto& [dest, delivered] : sends_) {
      Request request;
      request.set_access(tlm::TLM_WRITE_COMMAND, 0, 1024);
      request.job().bytes = 1024;
      request.job().dest_chip = dest;
      request.job().delivery = delivered ? &delivery : nullptr;
      sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
      socket->b_transport(request.payload(), delay);
      BOOST_TEST(request.payload().is_response_ok());
    }
  }
  std::vector<std::pair<std::uint32_t, bool>> sends_;
};

std::string direction_name(const LinkId& link) { return std::string(link.positive ? "+" : "-") + "xyz"[link.axis]; }

// Chip `chip`'s router on `torus`, each outgoing link a fake target named by its direction.
struct Scenario {
  std::unique_ptr<Torus> torus;
  std::unique_ptr<IciRouter> router;
  std::vector<std::unique_ptr<FakeTarget>> links;
  std::unique_ptr<FakeTarget> unit;
  std::unique_ptr<Sender> sender;
  std::vector<Handed> handed;

  Scenario(const std::string& name, Torus shape, std::uint32_t chip, std::vector<std::pair<std::uint32_t, bool>> sends)
      : torus(std::make_unique<Torus>(std::move(shape))) {
    const std::vector<LinkId> outgoing = torus->outgoing_links(chip);
    router = std::make_unique<IciRouter>((name + "_router").c_str(), chip, *torus, outgoing);
    for (std::size_t i = 0; i < outgoing.size(); ++i) {
      links.push_back(std::make_unique<FakeTarget>((name + "_link" + std::to_string(i)).c_str(), direction_name(outgoing[i]), handed));
      router->out[i].bind(links.back()->socket);
    }
    unit = std::make_unique<FakeTarget>((name + "_unit").c_str(), "local", handed);
    router->local.bind(unit->socket);
    sender = std::make_unique<Sender>((name + "_sender").c_str(), std::move(sends));
    sender->socket.bind(router->in);
  }

  std::vector<std::string> ways() const {
    std::vector<std::string> out;
    for (const Handed& h : handed) out.push_back(h.via);
    return out;
  }
};

// Chip numbers on a 4x4 slice: x fastest, chip = x + 4 y.
constexpr std::uint32_t at(std::uint32_t x, std::uint32_t y) { return x + 4 * y; }

}  // namespace

BOOST_AUTO_TEST_CASE(a_router_sends_each_transfer_the_way_dimension_order_and_the_shorter_way_round_give) {
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  const std::uint32_t origin = at(0, 0);
  // 4x4 with wraparound on both axes, from chip (0, 0).
  Scenario torus("torus", Torus({4, 4}, {true, true}), origin,
                 {{at(1, 0), false},    // one hop along +x
                  {at(3, 0), false},    // three hops +x or one -x round the ring
                  {at(1, 1), false},    // x first
                  {at(3, 3), false},    // x first, the shorter way: -x
                  {at(0, 1), false},    // y only
                  {at(0, 3), false},    // -y round the ring
                  {origin, true},       // its own, with a ring step: to the collective unit
                  {origin, false}});    // its own, a tail only: nobody takes it
  // The same slice with chip (0, 0)'s +x link down: to (1, 0) the other way round, three hops.
  Torus broken({4, 4}, {true, true});
  broken.set_down_links({LinkId{origin, 0, true}});
  Scenario detour("detour", broken, origin, {{at(1, 0), false}, {at(1, 1), false}, {at(0, 1), false}});
  // A line of four chips without wraparound, from its far end: only one way to go.
  Scenario line("line", Torus({4}, {false}), 3, {{0, false}, {2, false}});
  sc_core::sc_start();

  BOOST_TEST(torus.ways() == (std::vector<std::string>{"+x", "-x", "+x", "-x", "+y", "-y", "local"}), boost::test_tools::per_element());
  BOOST_TEST(detour.ways() == (std::vector<std::string>{"-x", "-x", "+y"}), boost::test_tools::per_element());
  BOOST_TEST(line.ways() == (std::vector<std::string>{"-x", "-x"}), boost::test_tools::per_element());
  // Each transfer keeps its destination whichever way it leaves.
  BOOST_TEST(torus.handed[1].dest_chip == at(3, 0));
  BOOST_TEST(detour.handed[0].dest_chip == at(1, 0));
}
