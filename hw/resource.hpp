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
      if (duration_ps > 0) {
        if (head_ < booked_.size() && booked_.back().end == start) booked_.back().end = start + duration_ps;
        else booked_.push_back({start, start + duration_ps});
      }
      return {start, start + duration_ps};
    }
    // The first booking still going at `start` (ends are sorted as the bookings are disjoint).
    std::size_t i = static_cast<std::size_t>(
        std::partition_point(booked_.begin() + static_cast<std::ptrdiff_t>(head_), booked_.end(),
                             [start](const Interval& b) { return b.end <= start; }) -
        booked_.begin());
    for (; i < booked_.size(); ++i) {
      if (booked_[i].start >= start + duration_ps) break;  // fits in the gap before booking i
      start = booked_[i].end;
    }
    check_time_limit(start, duration_ps);
    const Interval slot{start, start + duration_ps};
    if (duration_ps == 0) return slot;
    // Bookings that touch are merged: only the free gaps matter, and a unit kept busy back to back
    // (HBM under a stream of chunks) would otherwise make every later request walk them all.
    const bool joins_previous = i > head_ && booked_[i - 1].end == slot.start;
    const bool joins_next = i < booked_.size() && booked_[i].start == slot.end;
    if (joins_previous && joins_next) {
      booked_[i - 1].end = booked_[i].end;
      booked_.erase(booked_.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (joins_previous) {
      booked_[i - 1].end = slot.end;
    } else if (joins_next) {
      booked_[i].start = slot.start;
    } else {
      booked_.insert(booked_.begin() + static_cast<std::ptrdiff_t>(i), slot);
    }
    return slot;
  }
  // When the last reservation ends (or 0).
  Picos busy_until_ps() const { return booked_.empty() ? 0 : booked_.back().end; }

 private:
  std::vector<Interval> booked_;  // sorted, disjoint; [0, head_) already over
  std::size_t head_ = 0;
};

}  // namespace tpusim
