// Time and rate conversions. Simulation time is integer picoseconds everywhere; every unit
// converts its own cycles through a Clock, and bandwidths through transfer_ps(), so rounding
// happens in exactly one place.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>

namespace tpusim {

using Picos = std::uint64_t;

constexpr Picos kPicosPerNano = 1000;
constexpr Picos kPicosPerMicro = 1000 * 1000;
constexpr double kPicosPerSecond = 1e12;

struct Clock {
  double freq_mhz = 1000.0;

  // Rounded to the nearest picosecond: a 700 MHz period is 1428.57 ps.
  Picos cycles_to_ps(std::uint64_t cycles) const {
    return static_cast<Picos>(std::llround(static_cast<long double>(cycles) * 1e6L / freq_mhz));
  }
  std::uint64_t ps_to_cycles(Picos ps) const {
    return static_cast<std::uint64_t>(std::llround(static_cast<long double>(ps) * freq_mhz / 1e6L));
  }
};

// Time to move `bytes` at `bw_gbps` (10^9 bytes/s), rounded up so a transfer never takes zero time.
inline Picos transfer_ps(std::uint64_t bytes, double bw_gbps) {
  return static_cast<Picos>(std::ceil(static_cast<long double>(bytes) * 1000.0L / bw_gbps));
}

// Simulated time stays below 2^62 ps (about 53 days) so that sums of times never wrap.
constexpr Picos kTimeLimitPs = Picos{1} << 62;
[[noreturn]] inline void throw_time_limit() {
  throw std::overflow_error("simulated time would pass 2^62 ps (about 53 days); check rates and sizes");
}
inline void check_time_limit(Picos start_ps, long double duration_ps) {
  if (duration_ps < 0 || static_cast<long double>(start_ps) + duration_ps >= static_cast<long double>(kTimeLimitPs))
    throw_time_limit();
}
// The same test in integers, for the units that book millions of slots: x87 long double
// arithmetic was a visible share of a large slice's run time.
inline void check_time_limit(Picos start_ps, Picos duration_ps) {
  if (duration_ps >= kTimeLimitPs || start_ps >= kTimeLimitPs - duration_ps) throw_time_limit();
}

inline Picos ns_to_ps(double ns) { return static_cast<Picos>(std::llround(ns * 1000.0)); }
inline double ps_to_s(Picos ps) { return static_cast<double>(ps) / kPicosPerSecond; }

template <typename T>
constexpr T ceil_div(T a, T b) { return (a + b - 1) / b; }
template <typename T>
constexpr T round_up(T a, T b) { return ceil_div(a, b) * b; }

}  // namespace tpusim
