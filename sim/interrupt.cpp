#include "sim/interrupt.hpp"

#include <atomic>
#include <csignal>

namespace tpusim {
namespace {

std::atomic<int> g_signal{0};

extern "C" void remember_signal(int sig) {
  int none = 0;
  g_signal.compare_exchange_strong(none, sig);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = remember_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a sweep's waitpid() returns to notice the signal
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);  // the terminal went away: close the outputs as partial too
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

}  // namespace tpusim
