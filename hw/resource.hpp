// A unit that serves one request at a time. A request that arrives while the unit is busy waits
// for it: contention emerges from reservations rather than from an assumed max().
//
// Requests may be made ahead of time (a transfer that will arrive later reserves the adder for
// then). A later request that fits in an idle gap before such a reservation takes the gap, as the
// real unit would, instead of queueing behind work that has not started.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <vector>

#include "hw/units.hpp"

namespace tpusim {

struct Interval {
  Picos start = 0;
  Picos end = 0;
};

class Occupancy {
 public:
  // The earliest slot of `duration_ps` at or after `earliest_ps` that overlaps no reservation.
  // `now_ps` is the current time: reservations that ended before it are forgotten.
  Interval reserve(Picos now_ps, Picos earliest_ps, Picos duration_ps) {
    while (head_ < booked_.size() && booked_[head_].end <= now_ps) ++head_;
    if (head_ > 16 && 2 * head_ > booked_.size()) {  // drop the forgotten prefix now and then
      booked_.erase(booked_.begin(), booked_.begin() + static_cast<std::ptrdiff_t>(head_));
      head_ = 0;
    }
    Picos start = std::max(earliest_ps, now_ps);
    if (head_ == booked_.size() || booked_.back().end <= start) {  // the common case: after everything
      check_time_limit(start, duration_ps);
      if (duration_ps > 0) booked_.push_back({start, start + duration_ps});
      return {start, start + duration_ps};
    }
    std::size_t i = head_;
    for (; i < booked_.size(); ++i) {
      if (booked_[i].end <= start) continue;
      if (booked_[i].start >= start + duration_ps) break;  // fits in the gap before booking i
      start = booked_[i].end;
    }
    check_time_limit(start, duration_ps);
    const Interval slot{start, start + duration_ps};
    if (duration_ps > 0) booked_.insert(booked_.begin() + static_cast<std::ptrdiff_t>(i), slot);
    return slot;
  }
  // When the last reservation ends (or 0).
  Picos busy_until_ps() const { return booked_.empty() ? 0 : booked_.back().end; }

 private:
  std::vector<Interval> booked_;  // sorted, disjoint; [0, head_) already over
  std::size_t head_ = 0;
};

}  // namespace tpusim
