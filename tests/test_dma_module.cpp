// A SystemC module alone (issue 40): a core's DMA engines (hw/tensor_core.hpp) against a fake
// memory whose timing is written out here, so that every chunk's issue and every transfer's end
// has a closed form. SystemC elaborates once per process: this suite builds every scenario's
// modules, simulates them together (they share nothing but the clock), then checks each.
#define BOOST_TEST_MODULE dma_module
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include "hw/tensor_core.hpp"
#include "hw/wake_queue.hpp"

using namespace tpusim;

namespace {

constexpr std::uint64_t kChunkBytes = 1024;
constexpr Picos kPsPerByte = 1;                             // a chunk is served in 1024 ps
constexpr Picos kChunkPs = kChunkBytes * kPsPerByte;
constexpr Picos kMemoryLatencyPs = 5000;                    // longer than a chunk's service
constexpr double kIssueLatencyNs = 100;
constexpr Picos kIssuePs = 100000;

// Serves one chunk at a time, each in its length times kPsPerByte from when it arrives or the
// one before is done, and answers kMemoryLatencyPs after it is served.
class FakeMemory : public sc_core::sc_module {
 public:
  struct Chunk {
    std::uint64_t address, bytes;
    Picos arrival_ps, landed_ps;
  };
  tlm_utils::simple_target_socket<FakeMemory> socket;
  std::vector<Chunk> chunks;

  explicit FakeMemory(sc_core::sc_module_name name) : sc_module(name), socket("socket") {
    socket.register_b_transport(this, &FakeMemory::b_transport);
  }

 private:
  void b_transport(tlm::tlm_generic_payload& payload, sc_core::sc_time& delay) {
    const Picos arrival = now_ps() + delay.value();
    const Picos start = std::max(arrival, free_ps_);
    free_ps_ = start + payload.get_data_length() * kPsPerByte;
    const Picos landed = free_ps_ + kMemoryLatencyPs;
    chunks.push_back({payload.get_address(), payload.get_data_length(), arrival, landed});
    delay = ps_time(landed - now_ps());
    payload.set_response_status(tlm::TLM_OK_RESPONSE);
  }
  Picos free_ps_ = 0;
};

// Asks for one transfer at `start_ps` and records when the DMA says it is done.
class Requester : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<Requester> socket;
  Picos done_ps = 0;

  SC_HAS_PROCESS(Requester);
  Requester(sc_core::sc_module_name name, std::uint64_t address, std::uint64_t bytes, Picos start_ps)
      : sc_module(name), socket("socket"), address_(address), bytes_(bytes), start_ps_(start_ps) {
    SC_THREAD(run);
  }

 private:
  void run() {
    wait(ps_time(start_ps_));
    Request request;
    request.set_access(tlm::TLM_READ_COMMAND, address_, bytes_);
    request.job().bytes = bytes_;
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    socket->b_transport(request.payload(), delay);
    BOOST_TEST(request.payload().is_response_ok());
    done_ps = now_ps() + delay.value();
  }
  std::uint64_t address_, bytes_;
  Picos start_ps_;
};

// Asks for one transfer without waiting, as a TensorCore's DMA stages do: BEGIN_REQ from a
// method process with the start as its delay, and records when the answer (BEGIN_RESP, or the
// request completed at once) says the transfer lands.
class AsyncRequester : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<AsyncRequester> socket;
  Picos done_ps = 0;
  bool answered_later = false;

  SC_HAS_PROCESS(AsyncRequester);
  AsyncRequester(sc_core::sc_module_name name, std::uint64_t address, std::uint64_t bytes, Picos start_ps)
      : sc_module(name), socket("socket"), address_(address), bytes_(bytes), start_ps_(start_ps) {
    socket.register_nb_transport_bw(this, &AsyncRequester::answer);
    SC_METHOD(ask);  // runs once, at the start
  }

 private:
  void ask() {
    request_.set_access(tlm::TLM_READ_COMMAND, address_, bytes_);
    request_.job().bytes = bytes_;
    tlm::tlm_phase phase = tlm::BEGIN_REQ;
    sc_core::sc_time delay = ps_time(start_ps_);
    if (socket->nb_transport_fw(request_.payload(), phase, delay) == tlm::TLM_COMPLETED) done_ps = now_ps() + delay.value();
  }
  tlm::tlm_sync_enum answer(tlm::tlm_generic_payload& payload, tlm::tlm_phase& phase, sc_core::sc_time& delay) {
    BOOST_TEST(&payload == &request_.payload());
    BOOST_TEST((phase == tlm::BEGIN_RESP));
    BOOST_TEST(payload.is_response_ok());
    answered_later = true;
    done_ps = now_ps() + delay.value();
    return tlm::TLM_COMPLETED;
  }
  Request request_;
  std::uint64_t address_, bytes_;
  Picos start_ps_;
};

// One DMA (its engines and window set by `config`) with its memory and requesters (those that
// wait in b_transport, or with `async`, those that do not).
struct Scenario {
  std::unique_ptr<Dma> dma;
  std::unique_ptr<FakeMemory> memory;
  std::vector<std::unique_ptr<Requester>> requesters;
  std::vector<std::unique_ptr<AsyncRequester>> async_requesters;

  Scenario(const std::string& name, WakeQueue& wakes, std::uint32_t engines, bool drops_last_chunk,
           const std::vector<Picos>& starts_ps, bool async = false) {
    DmaConfig config;
    config.engines = engines;
    config.max_outstanding_chunks = 2;
    config.chunk_bytes = kChunkBytes;
    config.issue_latency_ns = kIssueLatencyNs;
    dma = std::make_unique<Dma>((name + "_dma").c_str(), config, 0, 0, wakes, drops_last_chunk, nullptr);
    memory = std::make_unique<FakeMemory>((name + "_memory").c_str());
    dma->hbm_socket.bind(memory->socket);
    for (std::size_t i = 0; i < starts_ps.size() && async; ++i) {
      async_requesters.push_back(std::make_unique<AsyncRequester>(
          (name + "_async_requester" + std::to_string(i)).c_str(), 0x100000 * i, 4 * kChunkBytes, starts_ps[i]));
      async_requesters.back()->socket.bind(dma->socket);
    }
    for (std::size_t i = 0; i < starts_ps.size() && !async; ++i) {
      requesters.push_back(std::make_unique<Requester>((name + "_requester" + std::to_string(i)).c_str(),
                                                       0x100000 * i, 4 * kChunkBytes, starts_ps[i]));
      requesters.back()->socket.bind(dma->socket);
    }
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(the_dma_streams_chunks_within_its_window) {
  sc_core::sc_set_time_resolution(1, sc_core::SC_PS);
  WakeQueue wakes("wakes");
  Scenario alone("alone", wakes, 1, false, {0});
  Scenario one_engine("one_engine", wakes, 1, false, {0, 1});
  Scenario two_engines("two_engines", wakes, 2, false, {0, 1});
  Scenario dropping("dropping", wakes, 1, true, {0});
  Scenario async_one_engine("async_one_engine", wakes, 1, false, {0, 1}, /*async=*/true);
  sc_core::sc_start();

  // A transfer of four chunks, two in flight at most: chunks 0 and 1 go at the issue latency,
  // chunk 2 when chunk 0 has landed, chunk 3 when chunk 1 has; the last lands at
  // issue + 3 chunk times + 2 latencies.
  const Picos transfer_ps = kIssuePs + 3 * kChunkPs + 2 * kMemoryLatencyPs;
  BOOST_TEST_CONTEXT("alone") {
    const auto& chunks = alone.memory->chunks;
    BOOST_TEST_REQUIRE(chunks.size() == 4u);
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      BOOST_TEST(chunks[i].address == i * kChunkBytes);
      BOOST_TEST(chunks[i].bytes == kChunkBytes);
    }
    BOOST_TEST(chunks[0].arrival_ps == kIssuePs);
    BOOST_TEST(chunks[1].arrival_ps == kIssuePs);
    BOOST_TEST(chunks[2].arrival_ps == chunks[0].landed_ps);
    BOOST_TEST(chunks[3].arrival_ps == chunks[1].landed_ps);
    BOOST_TEST(alone.requesters[0]->done_ps == transfer_ps);
    BOOST_TEST(alone.dma->asked_bytes() == 4 * kChunkBytes);
    BOOST_TEST(alone.dma->moved_bytes() == 4 * kChunkBytes);
  }
  // One engine: the second transfer waits for the first's last chunk to land, then runs alone.
  BOOST_TEST_CONTEXT("one engine") {
    BOOST_TEST(one_engine.requesters[0]->done_ps == transfer_ps);
    BOOST_TEST(one_engine.requesters[1]->done_ps == 2 * transfer_ps);
  }
  // Two engines: the transfers overlap, their chunks interleaving in the memory; the second is
  // held back only by the chunks of the first ahead of it.
  BOOST_TEST_CONTEXT("two engines") {
    BOOST_TEST(two_engines.requesters[0]->done_ps == transfer_ps);
    BOOST_TEST(two_engines.requesters[1]->done_ps < transfer_ps + 4 * kChunkPs);
    BOOST_TEST(two_engines.memory->chunks.size() == 8u);
  }
  // The injected fault (hw.faults dma_drop_chunk) skips the last chunk: what the end-of-run
  // check compares, asked against moved, differs by it.
  BOOST_TEST_CONTEXT("dropping the last chunk") {
    BOOST_TEST(dropping.memory->chunks.size() == 3u);
    BOOST_TEST(dropping.dma->asked_bytes() == 4 * kChunkBytes);
    BOOST_TEST(dropping.dma->moved_bytes() == 3 * kChunkBytes);
  }
  // Asked without waiting, the same transfers take the same times: the answer comes once the
  // last chunk is booked (the window makes that later than the request), its delay the time
  // until that chunk lands.
  BOOST_TEST_CONTEXT("asked without waiting, one engine") {
    const auto& asked = async_one_engine.async_requesters;
    BOOST_TEST(asked[0]->answered_later);
    BOOST_TEST(asked[0]->done_ps == transfer_ps);
    BOOST_TEST(asked[1]->done_ps == 2 * transfer_ps);
    BOOST_TEST(async_one_engine.memory->chunks.size() == 8u);
  }
}
