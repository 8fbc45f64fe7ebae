#include "sim/membench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "hw/hbm_bench.hpp"
#include "sim/errors.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

bool draws_random_addresses(MemPattern p) { return p == MemPattern::Random || p == MemPattern::RandomWrite; }

void validate(const HwConfig& hw, const MembenchRequest& r) {
  auto fail = [](const std::string& what) { throw InputError("membench: " + what); };
  if (r.request_bytes == 0 || r.requesters == 0 || r.outstanding == 0 || r.bytes == 0)
    fail("--bytes, --request-bytes, --requesters and --outstanding must be positive");
  // Every request in flight holds a slot in memory; beyond about a million, the bench measures
  // nothing the HBM's queues would not already saturate, and 10^8 took 16 GB.
  constexpr std::uint64_t kMaxInFlight = std::uint64_t{1} << 20;
  if (std::uint64_t{r.requesters} * r.outstanding > kMaxInFlight)
    fail(fmt::format("--requesters {} x --outstanding {} requests in flight; at most {}", r.requesters, r.outstanding,
                     kMaxInFlight));
  const std::uint64_t arrays = r.pattern == MemPattern::Copy ? 2 : r.pattern == MemPattern::Triad ? 3 : 1;
  const std::uint64_t unit = arrays * r.requesters * r.request_bytes;
  if (r.bytes % unit != 0)
    fail(fmt::format("--bytes {} must be a multiple of {} ({} array(s) x {} requesters x {}-byte requests)", r.bytes,
                     unit, arrays, r.requesters, r.request_bytes));
  std::uint64_t highest = r.bytes;
  if (arrays > 1) {
    if (r.bytes / arrays > kMembenchArrayStrideBytes)
      fail(fmt::format("{} places its arrays 1 GiB apart: --bytes may be at most {} GiB", mem_pattern_name(r.pattern),
                       arrays));
    highest = (arrays - 1) * kMembenchArrayStrideBytes + r.bytes / arrays;
  }
  if (draws_random_addresses(r.pattern)) {
    if (r.footprint_bytes < r.request_bytes) fail("--footprint-bytes is smaller than one request");
    highest = r.footprint_bytes;
  }
  if (highest > hw.hbm.capacity_bytes)
    fail(fmt::format("the pattern reaches address {} but the HBM holds {} bytes", highest, hw.hbm.capacity_bytes));
}

}  // namespace

MemPattern parse_mem_pattern(const std::string& name) {
  for (MemPattern p : {MemPattern::StreamRead, MemPattern::StreamWrite, MemPattern::Copy, MemPattern::Triad,
                       MemPattern::Random, MemPattern::RandomWrite})
    if (name == mem_pattern_name(p)) return p;
  throw InputError(fmt::format("--pattern: unknown pattern \"{}\" (stream-read, stream-write, copy, triad, random, random-write)", name));
}

const char* mem_pattern_name(MemPattern pattern) {
  switch (pattern) {
    case MemPattern::StreamRead: return "stream-read";
    case MemPattern::StreamWrite: return "stream-write";
    case MemPattern::Copy: return "copy";
    case MemPattern::Triad: return "triad";
    case MemPattern::Random: return "random";
    case MemPattern::RandomWrite: return "random-write";
  }
  return "?";
}

ojson run_membench(const HwConfig& hw, const MembenchRequest& r) {
  validate(hw, r);
  MembenchResult bench = run_hbm_bench(hw.hbm, r);
  std::vector<Picos>& latencies = bench.latencies_ps;
  const Picos last_done = bench.last_done_ps;
  const HbmStats& stats = bench.stats;
  const double seconds = ps_to_s(last_done);
  double latency_sum_ps = 0;
  for (Picos l : latencies) latency_sum_ps += static_cast<double>(l);
  const double avg_ns = latencies.empty() ? 0 : latency_sum_ps / static_cast<double>(latencies.size()) / 1000.0;
  const double bw_gbps = seconds > 0 ? static_cast<double>(r.bytes) / seconds / 1e9 : 0;
  ojson out;
  out["hw"] = hw.name;
  out["pattern"] = mem_pattern_name(r.pattern);
  out["bytes"] = r.bytes;
  out["request_bytes"] = r.request_bytes;
  out["requesters"] = r.requesters;
  out["outstanding"] = r.outstanding;
  if (draws_random_addresses(r.pattern)) out["footprint_bytes"] = r.footprint_bytes;
  out["requests"] = latencies.size();
  out["time_s"] = seconds;
  out["bw_gbps"] = bw_gbps;
  out["peak_bw_gbps"] = hw.hbm.bw_gbps;
  out["fraction_of_peak"] = bw_gbps / hw.hbm.bw_gbps;
  out["latency_avg_ns"] = avg_ns;
  out["latency_p50_ns"] = static_cast<double>(latency_quantile(latencies, 0.50)) / 1000.0;
  out["latency_p99_ns"] = static_cast<double>(latency_quantile(latencies, 0.99)) / 1000.0;
  out["row_hit_rate"] = stats.row_hit_rate();
  const auto columns = stats.total.read_bursts + stats.total.write_bursts;
  out["row_conflict_rate"] = columns ? static_cast<double>(stats.total.row_conflicts) / static_cast<double>(columns) : 0.0;
  out["read_bytes"] = stats.total.read_bursts * hw.hbm.burst_bytes();
  out["write_bytes"] = stats.total.write_bursts * hw.hbm.burst_bytes();
  out["refreshes"] = stats.total.refreshes;
  // The rates `tpusim run` books this HBM at (measured once with this bench, see hbm_bench.hpp).
  const HbmStreamProfile& profile = hbm_stream_profile(hw.hbm);
  out["training_path"] = {{"read_efficiency", profile.read_efficiency},
                          {"write_efficiency", profile.write_efficiency},
                          {"first_access_ns", static_cast<double>(profile.first_access_ps) / 1000.0}};
  // How evenly the requests spread: each channel's data-bus busy time over the run.
  const double run_ps = static_cast<double>(std::max<Picos>(1, last_done));
  out["channel_busy_min"] = static_cast<double>(stats.idlest_channel_ps) / run_ps;
  out["channel_busy_avg"] = static_cast<double>(stats.total.bus_busy_ps) / hw.hbm.channels / run_ps;
  out["channel_busy_max"] = static_cast<double>(stats.busiest_channel_ps) / run_ps;
  return out;
}

std::string format_membench(const ojson& j) {
  std::string s = fmt::format("{} on {}: {} bytes in {}-byte requests, {} requester(s) x {} in flight\n",
                              j["pattern"].get<std::string>(), j["hw"].get<std::string>(), j["bytes"].get<std::uint64_t>(),
                              j["request_bytes"].get<std::uint64_t>(), j["requesters"].get<std::uint32_t>(),
                              j["outstanding"].get<std::uint32_t>());
  s += fmt::format("  bandwidth   {:.1f} GB/s ({:.1f}% of the {:.0f} GB/s peak)\n", j["bw_gbps"].get<double>(),
                   100 * j["fraction_of_peak"].get<double>(), j["peak_bw_gbps"].get<double>());
  s += fmt::format("  latency     {:.1f} ns average, {:.1f} ns p50, {:.1f} ns p99\n", j["latency_avg_ns"].get<double>(),
                   j["latency_p50_ns"].get<double>(), j["latency_p99_ns"].get<double>());
  s += fmt::format("  row buffer  {:.1f}% hits, {:.1f}% conflicts; {} refreshes\n", 100 * j["row_hit_rate"].get<double>(),
                   100 * j["row_conflict_rate"].get<double>(), j["refreshes"].get<std::uint64_t>());
  s += fmt::format("  channels    data bus busy {:.1f}% on average ({:.1f}% to {:.1f}%)\n",
                   100 * j["channel_busy_avg"].get<double>(), 100 * j["channel_busy_min"].get<double>(),
                   100 * j["channel_busy_max"].get<double>());
  s += fmt::format("  simulated   {:.3f} us\n", j["time_s"].get<double>() * 1e6);
  const auto& t = j["training_path"];
  s += fmt::format("  tpusim run  books this HBM at {:.1f}% of peak for reads, {:.1f}% for writes, first access {:.1f} ns\n",
                   100 * t["read_efficiency"].get<double>(), 100 * t["write_efficiency"].get<double>(),
                   t["first_access_ns"].get<double>());
  return s;
}

}  // namespace tpusim
