// Rendezvous for collectives across the replicas of a slice. Every replica runs its own copy of
// the program; the fabric tracks, per in-flight collective, which ring chunks have arrived at
// which rank, so a rank can send step s+1 only after it has received (and reduced) step s.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "hw/sc_support.hpp"

namespace tpusim {

struct RingMember {
  std::uint32_t chip = 0;
  std::uint32_t core = 0;
};

// Bidirectional ring all-reduce of `bytes` over `ranks` replicas, in plain numbers: each
// direction carries half the data in 2 (p - 1) steps of one chunk each.
struct RingAllReducePlan {
  std::uint32_t ranks = 1;
  std::uint64_t chunk_bytes = 0;  // per direction per step
  std::uint32_t steps = 0;        // reduce-scatter steps then all-gather steps
  std::uint32_t reduce_steps = 0;
  static RingAllReducePlan make(std::uint64_t bytes, std::uint32_t ranks);
};

class CollectiveFabric {
 public:
  explicit CollectiveFabric(std::vector<RingMember> ring);

  std::uint32_t ranks() const { return static_cast<std::uint32_t>(ring_.size()); }
  const RingMember& member(std::uint32_t rank) const { return ring_[rank]; }
  std::uint32_t next(std::uint32_t rank) const { return (rank + 1) % ranks(); }
  std::uint32_t prev(std::uint32_t rank) const { return (rank + ranks() - 1) % ranks(); }

  // Chunks of collective (step, op) delivered to `rank` in direction dir (0: from prev, 1: from next).
  void deliver(std::uint32_t step, std::uint32_t op, std::uint32_t rank, int dir);
  // Blocks until `rank` has received `count` chunks in both directions.
  void wait_arrived(std::uint32_t step, std::uint32_t op, std::uint32_t rank, std::uint32_t count);
  // A rank is done with the collective; the state goes when the last rank leaves.
  void leave(std::uint32_t step, std::uint32_t op);
  std::size_t in_flight() const { return instances_.size(); }

 private:
  struct Instance {
    std::vector<std::array<std::uint32_t, 2>> arrived;
    std::uint32_t left = 0;
  };
  Instance& instance(std::uint32_t step, std::uint32_t op);

  std::vector<RingMember> ring_;
  std::vector<std::unique_ptr<sc_core::sc_event>> arrival_;
  std::map<std::pair<std::uint32_t, std::uint32_t>, Instance> instances_;
};

}  // namespace tpusim
