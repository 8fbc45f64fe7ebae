#include "hw/wake_queue.hpp"

#include <algorithm>
#include <utility>

namespace tpusim {

WakeQueue::WakeQueue(sc_core::sc_module_name name) : sc_module(name) {
  SC_METHOD(wake_due);
  sensitive << due_;
  dont_initialize();
}

WakeQueue::Sleeper& WakeQueue::current() {
  std::unique_ptr<Sleeper>& slot = sleepers_[sc_core::sc_get_current_process_b()];
  if (!slot) slot = std::make_unique<Sleeper>();
  return *slot;
}

std::uint64_t WakeQueue::set_rank(std::uint64_t rank) {
  Sleeper& sleeper = current();
  return std::exchange(sleeper.rank, rank);
}

WakeQueue::Sleeper& WakeQueue::enqueue(Picos at_ps) {
  Sleeper& sleeper = current();
  ++sleeper.generation;  // whatever this thread asked for before is no longer awaited
  heap_.push_back({at_ps, sleeper.rank, next_order_++, &sleeper, sleeper.generation});
  std::push_heap(heap_.begin(), heap_.end(), later);
  if (at_ps < armed_for_ps_) {
    // A pending later notification of due_ is replaced by this earlier one (IEEE 1666 5.10.8).
    armed_for_ps_ = at_ps;
    due_.notify(ps_time(at_ps - now_ps()));
  }
  return sleeper;
}

void WakeQueue::wait_until(Picos at_ps) {
  if (at_ps <= now_ps()) return;
  sc_core::wait(enqueue(at_ps).event);
}

void WakeQueue::wait_until(Picos at_ps, const sc_core::sc_event& event) {
  if (at_ps <= now_ps()) return;
  Sleeper& sleeper = enqueue(at_ps);
  sc_core::wait(sleeper.event | event);
  ++sleeper.generation;  // woken by `event`: the pending wake must not wake a later wait
}

void WakeQueue::wake_due() {
  const Picos now = now_ps();
  while (!heap_.empty() && heap_.front().at_ps <= now) {
    const Wake wake = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
    // Immediate notification: the thread joins the runnable queue now, behind the ones woken
    // before it, and runs in this evaluation phase.
    if (wake.generation == wake.sleeper->generation) wake.sleeper->event.notify();
  }
  armed_for_ps_ = ~Picos{0};
  if (!heap_.empty()) {
    armed_for_ps_ = heap_.front().at_ps;
    due_.notify(ps_time(armed_for_ps_ - now));
  }
}

}  // namespace tpusim
