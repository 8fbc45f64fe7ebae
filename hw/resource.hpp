// A unit that serves one request at a time. A request that arrives while the unit is busy waits
// for it: contention emerges from reservations rather than from an assumed max().
#pragma once

#include <algorithm>
#include <stdexcept>

#include "hw/units.hpp"

namespace tpusim {

struct Interval {
  Picos start = 0;
  Picos end = 0;
};

class Occupancy {
 public:
  Interval reserve(Picos earliest_ps, Picos duration_ps) {
    Interval slot;
    slot.start = std::max(earliest_ps, busy_until_ps_);
    check_time_limit(slot.start, duration_ps);
    slot.end = slot.start + duration_ps;
    busy_until_ps_ = slot.end;
    return slot;
  }
  Picos busy_until_ps() const { return busy_until_ps_; }

 private:
  Picos busy_until_ps_ = 0;
};

}  // namespace tpusim
