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
#include <functional>
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
  // An open line (an axis without wraparound): no closing hop. Data flows both ways, each
  // direction carrying whole shards to the chips on that side; a chip sends and receives only in
  // the steps its place on the line gives it (ring_sends, ring_receives).
  bool line = false;
  std::string label;                // "RS x", "AG y", "RS ring", "RS dcn"
  // A pass over the data-center network among this many slices (0: an ICI pass). Its ring is the
  // chip's peers at the same place in every slice, which are not simulated: `ring` stays empty.
  std::uint32_t dcn_slices = 0;

  // Direction 0 sends to the next chip in `ring`, direction 1 to the previous one.
  std::uint32_t directions() const { return bidirectional || line ? 2 : 1; }
  bool over_dcn() const { return dcn_slices > 0; }
  // What a reduce-scatter pass leaves on this chip: its shard from each ring direction; a line's
  // two directions both carry the same shards.
  std::uint64_t result_bytes() const { return line ? shard_bytes : shard_bytes * directions(); }
};

// Whether this chip sends (receives) a shard in direction `dir` at ring step `step`. On a ring
// every chip does in every step. On a line, k chips lie behind this one in the direction of
// travel: an all-gather forwards the k + 1 shards that reach it (its own first), a
// reduce-scatter the partial sums of the targets beyond it, its first in step k once the
// farthest target's sum has come through the k chips behind it.
bool ring_sends(const RingPass& pass, std::uint32_t dir, std::uint32_t step);
bool ring_receives(const RingPass& pass, std::uint32_t dir, std::uint32_t step);

// A ring step's shard goes in pieces of `chunk_bytes` (0: one piece), the last possibly shorter,
// so that adding one piece overlaps receiving the next.
struct RingPieces {
  std::uint64_t shard_bytes = 0, size = 0, count = 0;
  std::uint64_t bytes(std::uint64_t j) const { return j + 1 < count ? size : shard_bytes - size * (count - 1); }
};
inline RingPieces ring_pieces(const RingPass& pass, std::uint64_t chunk_bytes) {
  const std::uint64_t size = chunk_bytes > 0 ? std::min(chunk_bytes, pass.shard_bytes) : pass.shard_bytes;
  return {pass.shard_bytes, size, size > 0 ? (pass.shard_bytes + size - 1) / size : 0};
}

// A sequence of passes; the parts of a schedule run concurrently, each on its own share of data.
struct SchedulePart {
  std::vector<RingPass> passes;
};

struct CollectiveSchedule {
  std::vector<SchedulePart> parts;
  std::uint32_t group_size = 1;
};

// The chips of `chip`'s group: those that differ from it only along the group's axes (within
// its block of `span` chips on an axis that has one).
std::uint32_t group_size(const Torus& torus, std::uint32_t group_axes_mask, const GroupSpan& span = {});
// The chips of axis `a` a group spans: its span there, or the whole axis.
inline std::uint32_t group_extent(const Torus& torus, const GroupSpan& span, std::uint32_t a) {
  return span[a] > 0 ? span[a] : torus.dims()[a];
}

CollectiveSchedule plan_collective(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec);

// An algorithm of one's own: the passes `chip` makes for a reduce-scatter, an all-gather or an
// all-reduce (spec.kind) among the chips that differ from it only along `axes` (the group's axes
// longer than one chip, at least one). Every chip of the group must plan the same passes from
// its own place; a ring's next chip need not be a neighbour (the links route it). A permute and
// an all-to-all do not ask the algorithm, and the DCN stage of several slices is added to
// whatever it plans.
using CollectivePlan = std::function<CollectiveSchedule(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec,
                                                        const std::vector<std::uint8_t>& axes)>;
// Makes `name` a collective algorithm like tpusim's own (`collective --algorithm`, the workload's
// training.all_reduce.algorithm); call it before cli_main. A slice whose program uses it is
// simulated chip by chip (no folding of symmetric chips: its plan may treat them differently).
// Throws std::invalid_argument for a name taken.
CollectiveAlgorithm register_collective_algorithm(const std::string& name, const std::string& description, CollectivePlan plan);

// What plans are made of. The chips of `chip`'s group along `axes` (within its blocks of `span`),
// in a walk where consecutive chips are neighbours (a snake through them).
std::vector<std::uint32_t> group_walk(const Torus& torus, std::uint32_t chip, const std::vector<std::uint8_t>& axes,
                                      const GroupSpan& span = {});
// The passes of a ring collective over `ring` (which holds `chip`) of `bytes`, the buffer each
// chip holds before a reduce-scatter: its reduce-scatter pass, its all-gather pass or both, each
// labelled "RS <where>" / "AG <where>". `bidirectional`: two rings, one each way, half the data
// each; `line`: an open line, both ways along it (no closing hop).
void add_ring_passes(SchedulePart& part, std::vector<std::uint32_t> ring, std::uint32_t chip, std::uint64_t bytes,
                     bool bidirectional, bool line, const std::string& where, bool reduce_scatter, bool all_gather);

// The bytes the chip a schedule was planned for puts on its links (each counted once, whatever
// its hops): a shard in every direction and step it sends in. The end-of-run checks hold the
// collective units to it, so that no fault goes unseen because every chip shares it.
std::uint64_t schedule_sent_bytes(const CollectiveSchedule& schedule);
// The same for what it sends over the DCN to its peers in other slices.
std::uint64_t schedule_dcn_sent_bytes(const CollectiveSchedule& schedule);

// Alpha-beta time of a schedule when nothing contends. A ring step forwards what the step before
// brought as it arrives (cut-through), so a pass of n steps takes one step's hop latency (the
// slowest edge's hops) and transfer, plus n - 1 times the longer of the two: bandwidth-bound
// passes pay the latency once, latency-bound ones once per step. A reduce-scatter's additions
// (gamma) run as the bytes arrive and only show when the vector unit is slower than the link;
// parts run side by side. HBM traffic is assumed hidden behind the links. A DCN pass is timed
// the same way at the chip's DCN bandwidth and latency.
double collective_closed_form_s(const Torus& torus, const CollectiveSchedule& schedule, const HwConfig& hw,
                                const CollectiveSpec& spec);

}  // namespace tpusim
