// tpusim with a collective algorithm of one's own: the whole of what a user writes to add one,
// without touching tpusim (hw/collective.hpp). test_custom_collective runs it.
//
// `halving_doubling` is Rabenseifner's all-reduce (R. Thakur, R. Rabenseifner and W. Gropp,
// "Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005): a
// reduce-scatter by recursive halving, each chip exchanging half of what it still holds with a
// partner 1, 2, 4, ... places away, then an all-gather by recursive doubling in the reverse order.
// It sends what a ring sends, 2 (p - 1) / p of the buffer, in 2 log2(p) steps where a ring takes
// 2 (p - 1): the algorithm of small, latency-bound all-reduces. Its partners are no neighbours,
// so the links route each exchange over several hops. A group whose size is not a power of two
// gets the ring.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "hw/collective.hpp"
#include "sim/cli.hpp"

namespace {

using namespace tpusim;

CollectiveSchedule halving_doubling(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec,
                                    const std::vector<std::uint8_t>& axes) {
  const std::vector<std::uint32_t> walk = group_walk(torus, chip, axes);
  const bool reduce_scatter = spec.kind != CollectiveKind::AllGather;
  const bool all_gather = spec.kind != CollectiveKind::ReduceScatter;
  CollectiveSchedule schedule;
  SchedulePart part;
  const auto p = static_cast<std::uint32_t>(walk.size());
  if ((p & (p - 1)) != 0) {
    add_ring_passes(part, walk, chip, spec.bytes, false, false, "ring", reduce_scatter, all_gather);
    schedule.parts.push_back(part);
    return schedule;
  }
  std::uint32_t position = 0;
  while (walk[position] != chip) ++position;
  std::uint32_t rounds = 0;
  while ((1u << rounds) < p) ++rounds;
  // Round k pairs each chip with the one 2^k places away, on what the rounds before left it.
  auto exchange = [&](std::uint32_t k, bool reduce) {
    const std::uint32_t partner = position ^ (1u << k);
    const std::vector<std::uint32_t> pair = {walk[std::min(position, partner)], walk[std::max(position, partner)]};
    add_ring_passes(part, pair, chip, spec.bytes >> k, false, false, std::to_string(1u << k) + " apart", reduce, !reduce);
  };
  if (reduce_scatter)
    for (std::uint32_t k = 0; k < rounds; ++k) exchange(k, true);
  if (all_gather)
    for (std::uint32_t k = rounds; k-- > 0;) exchange(k, false);
  schedule.parts.push_back(part);
  return schedule;
}

}  // namespace

int main(int argc, char** argv) {
  tpusim::register_collective_algorithm("halving_doubling",
                                        "recursive halving, then recursive doubling (Rabenseifner): 2 log2(p) steps", halving_doubling);
  return tpusim::cli_main(argc, argv);
}
