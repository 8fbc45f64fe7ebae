// SIGINT and SIGTERM: the first one is remembered, and the simulation, the sweep and the output
// writers stop at the next safe point and close what they have as valid, partial output. The
// process then exits with 128 + the signal (130, 143).
#pragma once

#include <stdexcept>

namespace tpusim {

void install_interrupt_handlers();
// The signal that interrupted this process, or 0.
int interrupt_signal();

// Thrown where a command cannot hand back partial results (gemm, collective, membench).
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted") {}
};

}  // namespace tpusim
