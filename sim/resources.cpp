#include "sim/resources.hpp"

#include <sys/resource.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "hw/collective.hpp"
#include "hw/matmul_tiling.hpp"
#include "hw/tensor_core.hpp"
#include "hw/topology.hpp"
#include "sim/errors.hpp"

namespace tpusim {
namespace {

// Measured with /usr/bin/time on collective and training runs of 4 to 4096 chips (see
// docs/reliability.md): resident bytes per module and per kept interval.
constexpr double kBaseBytes = 12.0 * (1 << 20);  // the process, SystemC, the presets
constexpr double kChipBytes = 15e3;              // router, HBM, collective unit, sockets
constexpr double kLinkBytes = 9.5e3;
constexpr double kCoreBytes = 26e3;              // MXUs, VPU, DMA, sockets, reporters
constexpr double kHostBytes = 6e3;               // a host's input pipeline and wake queue (the former per-thread figure)
constexpr double kIntervalBytes = 22;            // a Span with its vector's spare capacity, less merged ones
constexpr double kCounterSampleBytes = 16;       // per counter and 10 us, averaged: idle links have none
// A matmul block while its op runs: its MatmulBlock (64), the pipeline's Block (72) and the
// closure that computes it (about 64 on the heap), with the vectors' spare capacity (fitted on
// gemm 32768^3 and 65536^3: peak RSS 34 and 170 MiB).
constexpr double kMatmulBlockBytes = 240;

}  // namespace

std::string size_text(double bytes) {
  if (bytes >= (1ull << 30)) return fmt::format("{:.2f} GiB", bytes / (1ull << 30));
  if (bytes >= (1 << 20)) return fmt::format("{:.1f} MiB", bytes / (1 << 20));
  return fmt::format("{:.0f} bytes", bytes);
}

MemoryEstimate estimate_memory(const HwConfig& hw, const Program& program, std::uint32_t traced_chips,
                               const SimulatedSlice& simulated) {
  const Torus torus = Torus::of(hw);
  const double chips = simulated.chip_count(), cores = chips * hw.chip.cores;
  double links = 0;  // directed, leaving the simulated chips
  for (std::uint32_t c : simulated.chips(torus)) links += static_cast<double>(torus.outgoing_links(c).size());

  // Per core and step: the intervals the statistics keep (op engines, MXUs, VPU).
  double intervals = 1;  // the step
  double transfers = 0;  // DMA transfers, kept for chip 0 only
  double mxu_flops = 0, dma_bytes = 0;
  double largest_matmul_blocks = 0;  // the block state of one op lives while it runs
  for (const Op& op : program.ops) {
    intervals += 1;
    if (op.kind == OpKind::Matmul) {
      mxu_flops += op.model_flops;
      MatmulTiling tiling;
      try {
        tiling = tile_matmul(op.matmul, hw.core.mxu, TensorCore::matmul_vmem_budget_bytes(hw));
      } catch (const std::runtime_error& e) {
        throw InputError(fmt::format("{}: {}", op.name, e.what()));
      }
      largest_matmul_blocks = std::max(largest_matmul_blocks, static_cast<double>(tiling.blocks.size()));
      for (const MatmulBlock& b : tiling.blocks) {
        intervals += hw.core.mxu.per_core + (b.last_k ? 1 : 0);
        transfers += 3;
        dma_bytes += static_cast<double>(b.load_bytes[0] + b.load_bytes[1] + b.store_bytes);
      }
    } else if (op.kind == OpKind::Vector) {
      const double blocks = static_cast<double>(TensorCore::vector_blocks(op.vector, hw));
      intervals += blocks;
      transfers += 2 * blocks;
      dma_bytes += static_cast<double>(TensorCore::vector_read_bytes(op.vector, hw) + op.vector.hbm_write_bytes);
    } else if (op.kind == OpKind::HostTransfer) {
      transfers += 1;
      dma_bytes += static_cast<double>(op.host_transfer.bytes);
    } else if (op.kind == OpKind::Collective) {
      // Every reduced piece that arrives is an addition on core 0's vector unit.
      const CollectiveSchedule schedule = plan_collective(torus, 0, op.collective);
      for (const SchedulePart& part : schedule.parts) {
        intervals += 1;
        for (const RingPass& pass : part.passes) {
          if (!pass.reduce || pass.shard_bytes == 0) continue;
          intervals += static_cast<double>(pass.steps * pass.directions() * ring_pieces(pass, op.collective.chunk_bytes).count) /
                       hw.chip.cores;
        }
      }
    }
  }
  // Every modelled process is a task (hw/wake_queue.hpp), a state machine without a stack; its
  // state is counted with its core, chip or host.
  const double hosts = std::ceil(chips / std::max<std::uint32_t>(1, hw.host.chips_per_host));

  MemoryEstimate e;
  e.modules_bytes = static_cast<std::uint64_t>(kBaseBytes + chips * kChipBytes + links * kLinkBytes + hosts * kHostBytes +
                                               cores * (kCoreBytes + largest_matmul_blocks * kMatmulBlockBytes));
  e.intervals_bytes =
      static_cast<std::uint64_t>((cores * intervals + hw.chip.cores * transfers) * program.steps * kIntervalBytes);
  if (traced_chips > 0) {
    // A step lasts at least its matmuls at peak or its HBM traffic at full bandwidth; real steps
    // run about twice that. One sample per counter (HBM and PCIe per chip, each link) per 10 us.
    const double core_peak = hw.peak_bf16_flops_per_chip() / hw.chip.cores;
    const double core_hbm_bytes_per_s = hw.hbm.bw_gbps * 1e9 / hw.chip.cores;
    const double step_s = 2 * std::max(mxu_flops / core_peak, dma_bytes / core_hbm_bytes_per_s);
    const double samples = std::ceil(step_s * program.steps / 10e-6);
    const double share = std::min(1.0, traced_chips / chips);
    e.trace_bytes = static_cast<std::uint64_t>((2 * chips + links) * share * samples * kCounterSampleBytes);
  }
  e.all_chips_because = simulated.all_chips_because;
  return e;
}

std::uint64_t machine_memory_bytes() {
  std::uint64_t bytes = 0;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
  // A container's limit (cgroup v2, then v1); "max" or an absurd figure means none.
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19)
      continue;
    const std::uint64_t limit = std::stoull(text);
    if (limit > 0 && (bytes == 0 || limit < bytes)) bytes = limit;
  }
  return bytes;
}

std::pair<std::uint64_t, std::string> memory_limit(std::uint64_t max_memory_bytes) {
  std::uint64_t limit = 0;
  std::string name;
  for (const auto& [bytes, what] : {std::pair<std::uint64_t, const char*>{machine_memory_bytes(), "this machine's memory"},
                                    {address_space_limit_bytes(), "the process's address-space limit (ulimit -v)"},
                                    {max_memory_bytes, "the --max-memory limit"}})
    if (bytes > 0 && (limit == 0 || bytes <= limit)) limit = bytes, name = what;
  return {limit, name};
}

std::uint64_t address_space_limit_bytes() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 0;
  return static_cast<std::uint64_t>(limit.rlim_cur);
}

std::uint64_t parse_memory_size(const std::string& text, const std::string& option) {
  const auto fail = [&] {
    return InputError(fmt::format("{} {}: expected a size such as 512M, 4G or 4GiB (or a number of bytes)", option, text));
  };
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw fail();
  }
  std::string unit = text.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() > 1 && (unit.substr(1) == "IB" || unit.substr(1) == "B")) unit = unit.substr(0, 1);
  double scale = 1;
  if (unit == "K") scale = 1ull << 10;
  else if (unit == "M") scale = 1ull << 20;
  else if (unit == "G") scale = 1ull << 30;
  else if (unit == "T") scale = 1ull << 40;
  else if (!unit.empty() && unit != "B") throw fail();
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 1 || bytes > 1e18) throw fail();
  return static_cast<std::uint64_t>(bytes);
}

void check_memory(const MemoryEstimate& estimate, std::uint64_t limit_bytes, const std::string& what) {
  const auto [limit, limit_name] = memory_limit(limit_bytes);
  if (limit == 0 || estimate.total_bytes() <= limit) return;
  throw InputError(fmt::format(
      "{} would need about {} of memory ({} for the modelled chips, {} for the statistics' busy intervals{}), "
      "more than {} ({}); simulate a smaller slice or fewer steps{}{}",
      what, size_text(static_cast<double>(estimate.total_bytes())), size_text(static_cast<double>(estimate.modules_bytes)),
      size_text(static_cast<double>(estimate.intervals_bytes)),
      estimate.trace_bytes ? fmt::format(", {} for the trace's bandwidth counters", size_text(static_cast<double>(estimate.trace_bytes))) : "",
      size_text(static_cast<double>(limit)), limit_name,
      estimate.trace_bytes ? ", or pass --trace none" : "",
      estimate.all_chips_because.empty() ? "" : " (every chip is simulated: " + estimate.all_chips_because + ")"));
}

}  // namespace tpusim
