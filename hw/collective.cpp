#include "hw/collective.hpp"

#include <algorithm>

namespace tpusim {

RingAllReducePlan RingAllReducePlan::make(std::uint64_t bytes, std::uint32_t ranks) {
  RingAllReducePlan plan;
  plan.ranks = ranks;
  if (ranks <= 1 || bytes == 0) return plan;
  const std::uint64_t half = ceil_div<std::uint64_t>(bytes, 2);
  plan.chunk_bytes = ceil_div<std::uint64_t>(half, ranks);
  plan.reduce_steps = ranks - 1;
  plan.steps = 2 * (ranks - 1);
  return plan;
}

CollectiveFabric::CollectiveFabric(std::vector<RingMember> ring) : ring_(std::move(ring)) {
  for (std::size_t i = 0; i < ring_.size(); ++i)
    arrival_.push_back(std::make_unique<sc_core::sc_event>());
}

CollectiveFabric::Instance& CollectiveFabric::instance(std::uint32_t step, std::uint32_t op) {
  auto [it, fresh] = instances_.try_emplace({step, op});
  if (fresh) it->second.arrived.assign(ring_.size(), {0, 0});
  return it->second;
}

void CollectiveFabric::deliver(std::uint32_t step, std::uint32_t op, std::uint32_t rank, int dir) {
  ++instance(step, op).arrived[rank][dir];
  arrival_[rank]->notify(sc_core::SC_ZERO_TIME);
}

void CollectiveFabric::wait_arrived(std::uint32_t step, std::uint32_t op, std::uint32_t rank,
                                    std::uint32_t count) {
  for (;;) {
    const auto& got = instance(step, op).arrived[rank];
    if (std::min(got[0], got[1]) >= count) return;
    sc_core::wait(*arrival_[rank]);
  }
}

void CollectiveFabric::leave(std::uint32_t step, std::uint32_t op) {
  auto it = instances_.find({step, op});
  if (it != instances_.end() && ++it->second.left == ring_.size()) instances_.erase(it);
}

}  // namespace tpusim
