// A unit that serves one request at a time. A request that arrives while the unit is busy waits
// for it: contention emerges from reservations rather than from an assumed max().
//
// Requests may be made ahead of time (a transfer that will arrive later reserves the adder for
// then). A later request that fits in an idle gap before such a reservation takes the gap, as the
// real unit would, instead of queueing behind work that has not started.
#pragma once

#include <algorithm>
#include <deque>
#include <stdexcept>

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
    while (!booked_.empty() && booked_.front().end <= now_ps) booked_.pop_front();
    Picos start = std::max(earliest_ps, now_ps);
    if (booked_.empty() || booked_.back().end <= start) {  // the common case: after everything booked
      check_time_limit(start, duration_ps);
      if (duration_ps > 0) booked_.push_back({start, start + duration_ps});
      return {start, start + duration_ps};
    }
    auto it = booked_.begin();
    for (; it != booked_.end(); ++it) {
      if (it->end <= start) continue;
      if (it->start >= start + duration_ps) break;  // fits in the gap before *it
      start = it->end;
    }
    check_time_limit(start, duration_ps);
    const Interval slot{start, start + duration_ps};
    if (duration_ps > 0) booked_.insert(it, slot);
    return slot;
  }
  // When the last reservation ends (or 0).
  Picos busy_until_ps() const { return booked_.empty() ? 0 : booked_.back().end; }

 private:
  std::deque<Interval> booked_;  // sorted, disjoint
};

}  // namespace tpusim
