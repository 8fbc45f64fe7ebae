// A bench for the burst-group HBM model: requesters stream or scatter requests at one chip's
// HBM, each keeping a fixed number in flight, and the achieved bandwidth, latencies and the
// memory's counters come back. `tpusim membench` prints it; the SystemC HBM's stream rates
// come from it (hbm_stream_profile). docs/validation/hbm.md defines the patterns, which the
// DRAMsim3 comparison runs too.
#pragma once

#include <cstdint>
#include <vector>

#include "hw/hbm_timing.hpp"
#include "hw/hw_config.hpp"

namespace tpusim {

enum class MemPattern { StreamRead, StreamWrite, Copy, Triad, Random, RandomWrite };

struct MembenchRequest {
  MemPattern pattern = MemPattern::StreamRead;
  std::uint64_t bytes = 64ull << 20;          // moved in total, reads plus writes
  std::uint64_t request_bytes = 4096;
  std::uint32_t requesters = 8;
  std::uint32_t outstanding = 32;             // requests in flight per requester
  std::uint64_t footprint_bytes = 1ull << 30;  // random: addresses drawn from [0, footprint)
  std::uint64_t seed = 1;
};

// Copy and triad place their arrays this far apart.
constexpr std::uint64_t kMembenchArrayStrideBytes = 1ull << 30;

struct MembenchResult {
  Picos last_done_ps = 0;
  std::vector<Picos> latencies_ps;   // one per request, in completion order
  std::vector<Picos> completions_ps;  // when each request completed, in order
  HbmStats stats;
};

// The caller checks that the layout fits (sizes that divide, addresses within the capacity).
MembenchResult run_hbm_bench(const HbmConfig& config, const MembenchRequest& request);

// What the burst-group model says a long sequential stream achieves per channel: the share of
// the peak left after row switches, refresh and (for writes) recovery, and the time an idle
// memory takes to return the first burst. The training path books channels at these rates, so
// that it pays the DRAM's overheads without an event per burst group.
struct HbmStreamProfile {
  double read_efficiency = 1;
  double write_efficiency = 1;
  Picos first_access_ps = 0;
};
// Measured once per distinct configuration with the bench (deep queues, several streams) and
// remembered.
const HbmStreamProfile& hbm_stream_profile(const HbmConfig& config);

// What a gather (reads) or scatter (writes) of `run_bytes`-long pieces at random places achieves,
// as a fraction of the peak: the rate `tpusim run` books such transfers at. Runs are rounded up
// to a power of two of bursts; from a row up, they cost what a stream does. Measured on first use
// per configuration and run size, and remembered.
double hbm_gather_efficiency(const HbmConfig& config, std::uint64_t run_bytes, bool write);

// p-quantile: the value at index ceil(p*n)-1 of the sorted sample (reorders the sample).
Picos latency_quantile(std::vector<Picos>& sample, double p);

}  // namespace tpusim
