// Collectives over the chips of a slice, in plain C++: the schedule each chip runs (ring passes
// along the torus) and the alpha-beta closed form of a schedule. The chips' collective units
// (hw/collective_unit.*) run the schedules.
//
//   CollectiveSpec spec{CollectiveKind::AllReduce, 1 << 30};
//   spec.algorithm = CollectiveAlgorithm::Torus;
//   CollectiveSchedule s = plan_collective(torus, chip, spec);  // this chip's ring passes
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/topology.hpp"

namespace tpusim {

struct RingPass {
  bool reduce = true;               // reduce-scatter step (receive, add, forward) or all-gather (receive, forward)
  std::vector<std::uint32_t> ring;  // the chips of this ring, in ring order
  std::uint32_t position = 0;       // this chip's index in `ring`
  std::uint64_t shard_bytes = 0;    // what each chip sends per step in each direction
  std::uint32_t steps = 0;          // ring steps: ring size - 1 for a whole pass, 1 for a permute
  bool bidirectional = false;       // a second ring runs the other way with the other half of the data
  std::string label;                // "RS x", "AG y", "RS ring"
};

// A ring step's shard goes in pieces of `chunk_bytes` (0: one piece), the last possibly shorter,
// so that adding one piece overlaps receiving the next.
inline std::uint64_t ring_piece_bytes(const RingPass& pass, std::uint64_t chunk_bytes) {
  return chunk_bytes > 0 ? std::min(chunk_bytes, pass.shard_bytes) : pass.shard_bytes;
}

// A sequence of passes; the parts of a schedule run concurrently, each on its own share of data.
struct SchedulePart {
  std::vector<RingPass> passes;
};

struct CollectiveSchedule {
  std::vector<SchedulePart> parts;
  std::uint32_t group_size = 1;
};

// The chips of `chip`'s group: those that differ from it only along the group's axes.
std::uint32_t group_size(const Torus& torus, std::uint32_t group_axes_mask);

CollectiveSchedule plan_collective(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec);

// Alpha-beta time of a schedule when nothing contends: per ring step, the slowest edge's hops x
// hop latency, plus the step's bytes over one link, plus (reduce-scatter) the vector unit adding
// the last piece that arrived (gamma; earlier pieces are added while later ones arrive); parts run
// side by side. HBM traffic is assumed hidden behind the links.
double collective_closed_form_s(const Torus& torus, const CollectiveSchedule& schedule, const HwConfig& hw,
                                const CollectiveSpec& spec);

}  // namespace tpusim
