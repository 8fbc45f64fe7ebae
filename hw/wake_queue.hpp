// The scheduler of one host and the chips it serves: what their modelled processes wait for
// runs in time order, ties in the order of rank.
//
// Units a host's chips share (HBM under two cores' DMA engines, the vector unit under vector ops
// and ring reductions, the host's batches) serve requests of the same picosecond in the order the
// asking processes run. The SystemC kernel keeps timed notifications in a heap that does not keep
// ties in order, and the heap is shared by the whole slice, so processes waking at one instant ran
// in an order that differed from chip to chip: symmetric chips drifted apart, and one simulated
// representative could not stand for its class exactly. A process that waits through its cell's
// WakeQueue is run by the queue, which orders ties by the process's rank: its place in the cell
// (which chip of the host, which core, which engine or DMA stage or ring part). Ranks rather than
// the order the waits were asked in: that order follows from the order of delta notifications,
// which other cells influence (a neighbour's ring piece that completes one chip's step before
// another's). Every cell of symmetric chips thus runs its processes in the same order whatever
// else shares the kernel, like a fixed-priority arbiter deciding between requests of the same
// cycle.
//
// tpusim's own processes are Tasks: state machines (a core's sequencer, engines and DMA stages, a
// DMA transfer, a collective's parts, a host's input pipeline) that the queue runs at their time,
// in their rank's place, inside its own method process. A Task costs no stack and no memory
// mapping, so a slice of thousands of chips is not bounded by how many threads the system lets a
// process have. A Task must not wait: it returns, having scheduled itself for what it waits for.
// A SystemC thread (a module of a user's own, a test's driver) may still wait here for a time.
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "hw/sc_support.hpp"

namespace tpusim {

class WakeQueue : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(WakeQueue);
  explicit WakeQueue(sc_core::sc_module_name name);

  // The calling thread's rank from now on (threads that never say so come last, in the order they
  // asked); returns the one it had, for a thread that acts for another part of the cell a while.
  std::uint64_t set_rank(std::uint64_t rank);
  static constexpr std::uint64_t kUnranked = ~std::uint64_t{0};
  // Roles within a chip (rank's last part): a core's sequencer, engines, DMA stages, the collective unit.
  static constexpr std::uint32_t kSequencerRole = 0, kEngineRoles = 1, kDmaStageRoles = 1000, kCollectiveRoles = 2000;
  // A thread's rank from its place: the host's own threads are slot 0 and core 0.
  static std::uint64_t rank(std::uint32_t chip_slot_in_host, std::uint32_t core, std::uint32_t role) {
    return (std::uint64_t{chip_slot_in_host} << 40) | (std::uint64_t{core} << 32) | role;
  }

  // Suspends the calling thread until `at_ps`; returns at once if that is not in the future.
  void wait_until(Picos at_ps);
  // Suspends it until `at_ps` or until `event` is notified, whichever comes first.
  void wait_until(Picos at_ps, const sc_core::sc_event& event);
  // Until `delay` from now (an annotated TLM delay).
  void wait_for(const sc_core::sc_time& delay) { wait_until(now_ps() + delay.value()); }

  // A step of a process without a thread. `run` is called at the time it is scheduled for, in the
  // order of `rank` among everything due then (wakes and tasks alike).
  struct Task {
    std::function<void()> run;
    std::uint64_t rank = kUnranked;
  };
  // Runs `task` at `at_ps`, or once the present evaluation is over when that is not in the future
  // (as a thread notified for the next delta cycle would run). A task scheduled twice runs twice.
  void call_at(Picos at_ps, Task& task);
  // A task's timed wait: true when `at_ps` has come; otherwise schedules `task` for then, once
  // (`armed_ps` remembers the time it is scheduled for), and the task returns to wait.
  bool reached(Picos at_ps, Task& task, Picos& armed_ps) {
    if (at_ps <= now_ps()) return true;
    if (armed_ps != at_ps) {
      armed_ps = at_ps;
      call_at(at_ps, task);
    }
    return false;
  }
  // The rank of what runs now: the task the queue is running, else the calling thread's.
  std::uint64_t running_rank() { return running_task_ != nullptr ? running_task_->rank : current().rank; }

 private:
  // A thread's own wake-up. `generation` tells a wait that is still pending from one that ended
  // early (woken by its other event).
  struct Sleeper {
    sc_core::sc_event event;
    std::uint64_t generation = 0;
    std::uint64_t rank = kUnranked;
  };
  struct Wake {
    Picos at_ps;
    std::uint64_t rank;   // the tie-break
    std::uint64_t order;  // when it was asked for: the tie-break among unranked threads
    Sleeper* sleeper;     // a thread's wake, or
    Task* task;           // a task to run
    std::uint64_t generation;
  };
  // std::push_heap keeps the greatest first: inverted, the earliest wake, ties by rank.
  static bool later(const Wake& a, const Wake& b) {
    if (a.at_ps != b.at_ps) return a.at_ps > b.at_ps;
    return a.rank != b.rank ? a.rank > b.rank : a.order > b.order;
  }
  Sleeper& current();
  Sleeper& enqueue(Picos at_ps);
  void push(const Wake& wake);
  void wake_due();  // method process: wakes every thread due now and runs every task, in order

  std::vector<Wake> heap_;  // a min-heap by (at_ps, order)
  std::unordered_map<const sc_core::sc_process_b*, std::unique_ptr<Sleeper>> sleepers_;
  sc_core::sc_event due_;
  Picos armed_for_ps_ = ~Picos{0};
  bool waking_ = false;  // wake_due is running: what becomes due now joins its loop
  const Task* running_task_ = nullptr;
  std::uint64_t next_order_ = 0;
};

}  // namespace tpusim
