// Which chips a run simulates, in plain C++.
//
// Synchronous data parallelism on a homogeneous slice is symmetric: every chip runs the same
// program on the same hardware. A translation along an axis with wraparound (by whole hosts) and
// the reflection of a two-chip axis map the torus, its rings, its routes and its hosts onto
// themselves, so chips related by one do the same work at the same times. One representative per
// class is then simulated: the chips whose coordinates lie below `box` on every axis. An ICI link
// whose far end lies outside the box delivers to the far end's representative, and the symmetry
// that takes the far end there is applied to the destination of what the link carries
// (`map_destination`), so routing goes on as if the whole slice were there.
//
//   SimulatedSlice s = plan_simulated_slice(torus, hw, program, /*fold=*/true);
//   // v4 16x16x16, 4 chips per host: box 4x1x1, each of the 4 simulated chips stands for 1024
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/topology.hpp"

namespace tpusim {

struct SimulatedSlice {
  std::vector<std::uint32_t> box;  // per axis: simulated coordinates are 0 .. box[a] - 1
  std::vector<bool> mirrored;      // per axis: folded by reflection (a two-chip axis), else by translation
  std::uint64_t multiplicity = 1;  // chips each simulated chip stands for
  std::string all_chips_because;   // why every chip is simulated (empty when folded)

  bool folded() const { return multiplicity > 1; }
  std::uint32_t chip_count() const;
  bool simulates(const Torus& torus, std::uint32_t chip) const;
  // The simulated chips' ids in the full slice, ascending.
  std::vector<std::uint32_t> chips(const Torus& torus) const;
  // The simulated chip that stands for `chip`.
  std::uint32_t representative(const Torus& torus, std::uint32_t chip) const;
  // `dest` under the symmetry that takes `far_end` (a chip outside the box, one hop from it) to
  // its representative.
  std::uint32_t map_destination(const Torus& torus, std::uint32_t far_end, std::uint32_t dest) const;
};

// With `fold`, one representative per class of chips that `program` makes equivalent on `hw`'s
// slice; every chip without it, or when something breaks the symmetry (all_chips_because says what).
//
// Exact: symmetric chips of a full simulation do the same thing at the same picosecond, since
// collective units book ring work in a canonical order and every host's threads wake in the order
// of their ranks (hw/wake_queue.hpp), so one chip's figures are its whole class's.
SimulatedSlice plan_simulated_slice(const Torus& torus, const HwConfig& hw, const Program& program, bool fold);

}  // namespace tpusim
