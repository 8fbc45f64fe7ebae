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

void WakeQueue::push(const Wake& wake) {
  heap_.push_back(wake);
  std::push_heap(heap_.begin(), heap_.end(), later);
  if (waking_ && wake.at_ps <= now_ps()) return;  // the running wake_due takes it
  if (wake.at_ps < armed_for_ps_) {
    // A pending later notification of due_ is replaced by this earlier one (IEEE 1666 5.10.8);
    // a task due now runs in the next delta cycle.
    armed_for_ps_ = std::max(wake.at_ps, now_ps());
    due_.notify(ps_time(armed_for_ps_ - now_ps()));
  }
}

WakeQueue::Sleeper& WakeQueue::enqueue(Picos at_ps) {
  Sleeper& sleeper = current();
  ++sleeper.generation;  // whatever this thread asked for before is no longer awaited
  push({at_ps, sleeper.rank, next_order_++, &sleeper, nullptr, sleeper.generation});
  return sleeper;
}

void WakeQueue::call_at(Picos at_ps, Task& task) {
  push({std::max(at_ps, now_ps()), task.rank, next_order_++, nullptr, &task, 0});
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
  armed_for_ps_ = ~Picos{0};
  waking_ = true;
  while (!heap_.empty() && heap_.front().at_ps <= now) {
    const Wake wake = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), later);
    heap_.pop_back();
    if (wake.task != nullptr) {
      running_task_ = wake.task;
      wake.task->run();  // may schedule more for now: they join this loop in their order
      running_task_ = nullptr;
      continue;
    }
    // Immediate notification: the thread joins the runnable queue now, behind the ones woken
    // before it, and runs in this evaluation phase.
    if (wake.generation == wake.sleeper->generation) wake.sleeper->event.notify();
  }
  waking_ = false;
  if (!heap_.empty()) {
    armed_for_ps_ = heap_.front().at_ps;
    due_.notify(ps_time(armed_for_ps_ - now));
  }
}

}  // namespace tpusim
