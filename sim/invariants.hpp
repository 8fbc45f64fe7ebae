// End-of-run checks. Every simulation that finishes is checked before any result is published:
// a broken check is an error that names the unit and the figures, never a silent wrong answer.
//
// Each check compares two figures counted in different places, so that a lost or duplicated
// transfer, a misrouted piece or a dropped block shows up as a difference:
//   - per core, the HBM bytes its program asks for (the ops' sizes, matmul blocks included),
//     the bytes its DMA engines were asked to move, and the bytes of the chunks HBM accepted;
//   - per chip, the bytes HBM served and the bytes its cores' DMAs and its collective unit sent;
//   - over the slice, the ICI bytes the links carried and the bytes the collective units sent
//     times the hops of their routes, and the bytes that arrived and the bytes sent;
//   - per core, the useful FLOPs the MXUs were handed and the model's textbook count of a
//     training step's matmul FLOPs (padding to the array is reported apart, never hidden in it);
//   - per unit, busy time no longer than the simulated time;
//   - per chip, every collective of every step completed, and nothing left in flight.
// They cost one pass over the units after the run: cheap enough to stay on always.
#pragma once

#include <nlohmann/json.hpp>

#include "hw/system.hpp"
#include "sim/stats.hpp"

namespace tpusim {

struct InvariantInputs {
  const System* system = nullptr;
  const Program* program = nullptr;
  const HwConfig* hw = nullptr;
  const Recorder* recorder = nullptr;
  Picos end_ps = 0;  // when the last core finished
  // The model's textbook matmul FLOPs of one step on one core; < 0: the program's own count
  // (commands that run a hand-built program have no model).
  double analytic_flops_per_core_step = -1;
};

// Throws SimError listing every violation (at most a few per check). Returns the checked figures:
// {"dma_bytes", "hbm_bytes", "ici_link_bytes", "mxu_flops_model", "mxu_flops_useful",
//  "mxu_flops_executed", "busiest_unit", "busiest_unit_fraction", "collectives_completed"}.
nlohmann::ordered_json check_invariants(const InvariantInputs& in);


// Why the simulation stopped with work left: the collectives that never completed (the op, the
// step, which chips of the group joined and which did not and what those wait on), or else
// where the unfinished cores wait. Compact for slices of thousands of chips.
std::string describe_stuck(const System& system);

}  // namespace tpusim
