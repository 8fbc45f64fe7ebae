// Typed hardware configuration. Built and validated once by sim/config from a preset plus
// overrides; modules receive these structs and never see JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hw/program.hpp"

namespace tpusim {

struct MxuConfig {
  std::uint32_t rows = 128;
  std::uint32_t cols = 128;
  std::uint32_t per_core = 1;
  // Calibrates generations whose documented peak needs more than one bf16 MAC per cell per
  // cycle at the assumed clock (v6e); 1 everywhere else.
  double bf16_macs_per_cell_per_cycle = 1.0;
  double int8_speedup = 0.0;  // 0: the MXU has no int8 path
  double fp8_speedup = 0.0;
  bool weight_double_buffered = true;
  // Rows each cell takes per cycle with operands of `lhs`: the bf16 rate times the type's
  // speed-up (0: the MXU has no such path; an f32 product runs as bf16 passes).
  double rows_per_cycle(DType lhs) const {
    if (lhs == DType::Int8) return bf16_macs_per_cell_per_cycle * int8_speedup;
    if (lhs == DType::Fp8) return bf16_macs_per_cell_per_cycle * fp8_speedup;
    return bf16_macs_per_cell_per_cycle;
  }
};

struct VpuConfig {
  std::uint32_t lanes = 128;
  std::uint32_t sublanes = 8;
  std::uint32_t alus_per_element = 1;  // fp32 ALUs per (lane, sublane)
  // Extra passes over its input that each reduction along the last (lane) axis of a vector op
  // costs, as XLA runs it on this generation (a softmax's max and sum, a layer norm's
  // statistics); 0: the reduction rides in the op's own pass.
  double lane_reduction_extra_passes = 0;
};

struct DmaConfig {
  std::uint32_t engines = 4;
  std::uint32_t max_outstanding_chunks = 4;
  std::uint64_t chunk_bytes = 512 * 1024;  // one HBM transaction of a DMA
  double issue_latency_ns = 100;           // descriptor issue to first byte
};

struct CoreConfig {
  double freq_mhz = 700;
  MxuConfig mxu;
  VpuConfig vpu;
  std::uint64_t vmem_bytes = 16ull << 20;
  DmaConfig dma;
  std::uint32_t op_overhead_cycles = 0;  // fixed issue cost of every op on the core
};

// JEDEC timing parameters of one HBM (pseudo-)channel, in nanoseconds (the preset converts the
// standard's clock counts at its data rate). Burst time and tCCD_S come from the bandwidth.
struct HbmTimingConfig {
  double trcd_ns = 14;    // ACT to column command
  double trp_ns = 14;     // PRE to ACT
  double tras_ns = 34;    // ACT to PRE
  double tcl_ns = 14;     // read command to data
  double tcwl_ns = 5;     // write command to data
  double tccd_l_ns = 4;   // column to column, same bank group
  double trrd_s_ns = 4;   // ACT to ACT, different bank groups
  double trrd_l_ns = 4;   // ACT to ACT, same bank group
  double tfaw_ns = 15;    // window holding at most four ACTs
  double twtr_s_ns = 6;   // end of write data to read, different bank groups
  double twtr_l_ns = 8;   // end of write data to read, same bank group
  double trtw_ns = 2;     // bus turnaround from read data to write data
  double twr_ns = 16;     // end of write data to PRE
  double trtp_ns = 5;     // read command to PRE
  double trfc_ns = 350;   // all-bank refresh
  double trefi_ns = 3900; // refresh interval
};

struct HbmConfig {
  std::uint64_t capacity_bytes = 16ull << 30;  // per chip
  double bw_gbps = 700;                        // per chip, all channels
  std::uint32_t channels = 64;                 // independent (pseudo-)channels per chip
  std::uint32_t channel_width_bits = 64;
  std::uint32_t burst_length = 4;
  std::uint32_t bank_groups = 4;
  std::uint32_t banks_per_group = 4;
  std::uint64_t row_bytes = 1024;              // row buffer (page) per bank
  std::string address_mapping = "robabgchco";  // most significant field first
  std::uint32_t queue_depth = 32;              // transaction queue per channel, bursts
  std::uint32_t bank_queue_depth = 8;          // per-bank command queue, bursts
  bool posted_writes = true;                   // a write completes when its channel queue takes it
  double latency_ns = 100;                     // on-chip path to the controllers and back
  HbmTimingConfig timing;
  std::string model = "calibrated";  // the registered memory model a chip's memory is built by (hw/memory.hpp)

  std::uint32_t burst_bytes() const { return channel_width_bits / 8 * burst_length; }
};

enum class Wraparound { Never, Always, FullAxis, MultipleOf4 };

struct IciConfig {
  std::uint32_t ports_per_chip = 4;
  double link_bw_gbps = 62;  // per direction
  // Of the link's rate, the share that carries payload (the rest: packet headers, flow control,
  // error checking). Measured collectives move about 96% of the datasheet rate at best.
  double payload_efficiency = 1;
  double hop_latency_ns = 1000;
  // Paid once per collective by each chip before its first byte moves: the chips of a group must
  // learn that their peers' receive buffers are free, and the transfers must be set up. Small
  // transfers are dominated by it (a 1 KiB ppermute takes microseconds, not one hop).
  double collective_start_ns = 0;
  double payload_bw_gbps() const { return link_bw_gbps * payload_efficiency; }
  Wraparound wraparound = Wraparound::FullAxis;
  std::uint32_t full_axis_chips = 16;
  std::uint64_t chunk_bytes = 1 << 20;
};

struct HostConfig {
  std::uint32_t chips_per_host = 4;
  double pcie_bw_gbps = 16;  // per chip, host to chip
  double pcie_latency_ns = 2000;
  // A framework's call of one compiled program, as its timer sees it: dispatch from the host, the
  // program's start on the device and the completion's return, beyond the device's own time.
  double launch_overhead_us = 0;
};

// The data-center network between slices (Cloud TPU multislice): a chip's traffic to its peer in
// another slice leaves by DMA to its host, crosses the network and lands by DMA in the peer's HBM.
struct DcnConfig {
  double bw_gbps_per_chip = 0;  // per direction; 0: none published, so no multislice
  double latency_us = 10;
};

// Power of one chip as the summary's energy model takes it (sim/cost_energy.hpp).
struct ChipPower {
  double idle_w = 0;
  double max_w = 0;
  std::optional<double> typical_w;  // the published fleet mean, for comparison only
  double mxu_share = 0.5;           // of (max_w - idle_w), the part that follows the MXUs' busy fraction
};

struct ChipConfig {
  std::uint32_t cores = 2;
  bool megacore = false;  // the chip's cores form one replica (v4, v5p)
  // Each core has its own share of the HBM channels (v2, v3: each core is a device with its own
  // HBM slice); otherwise every core's accesses spread over all of them.
  bool hbm_per_core = false;
  double documented_peak_bf16_tflops = 0;
  std::uint32_t max_chips = 4096;
  // Not used by the simulation: the summary turns step time into money and joules with them.
  std::optional<double> price_usd_per_chip_hour;  // absent: the chip has no price
  std::optional<ChipPower> power;                 // absent: no power figures for the chip
};

// A chip slower than the rest of its slice (a straggler): a synchronous step waits for it.
struct SlowChip {
  std::uint32_t chip = 0;
  double core_freq_scale = 1;  // its TensorCores' clock as a fraction of core.freq_mhz
  double hbm_bw_scale = 1;     // its HBM's bandwidth as a fraction of hbm.bw_gbps (degraded memory)
};

// A fault injected on purpose, to prove that the end-of-run checks (sim/invariants) and the
// stuck-simulation report catch what they exist to catch: a check that never fires could be
// checking nothing.
enum class FaultKind : std::uint8_t {
  DmaDropChunk,    // the chip's DMA engines skip the last chunk of every multi-chunk transfer
  SkipCollective,  // the chip's collective unit releases its cores without taking part
};
struct InjectedFault {
  FaultKind kind = FaultKind::DmaDropChunk;
  std::uint32_t chip = 0;
};

// An ICI link slower than the others (a degraded cable or optics), leaving `chip` along `axis`.
struct SlowLink {
  std::uint32_t chip = 0;
  std::uint8_t axis = 0;
  bool positive = true;
  double bw_scale = 1;  // its bandwidth as a fraction of ici.link_bw_gbps; 0: down
};

struct HwConfig {
  std::string name;
  ChipConfig chip;
  CoreConfig core;
  HbmConfig hbm;
  IciConfig ici;
  HostConfig host;
  DcnConfig dcn;
  std::vector<std::uint32_t> slice_dims;  // torus shape in chips, e.g. {4, 4}
  // Identical slices joined by the DCN, each holding data-parallel replicas. One is simulated:
  // by symmetry its chips' peers in the other slices do what they do, at the same time.
  std::uint32_t slices = 1;
  std::vector<SlowChip> slow_chips;       // none on a homogeneous slice
  std::vector<SlowLink> slow_links;
  std::vector<InjectedFault> faults;  // none outside the tests of the checks

  bool has_fault(FaultKind kind, std::uint32_t chip) const {
    for (const InjectedFault& f : faults)
      if (f.kind == kind && f.chip == chip) return true;
    return false;
  }
  // The TensorCore clock of `chip` (its own when it is a slow chip).
  double core_freq_mhz(std::uint32_t chip) const {
    const SlowChip* s = slow_chip(chip);
    return s ? core.freq_mhz * s->core_freq_scale : core.freq_mhz;
  }
  // The HBM of `chip` (degraded when it is a slow chip).
  HbmConfig hbm_of(std::uint32_t chip) const {
    HbmConfig h = hbm;
    if (const SlowChip* s = slow_chip(chip)) h.bw_gbps *= s->hbm_bw_scale;
    return h;
  }
  // The ICI link leaving `chip` along `axis` in direction `positive` (a link that is down keeps
  // its bandwidth: routes avoid it, Torus::link_down).
  IciConfig link_of(std::uint32_t chip, std::uint8_t axis, bool positive) const {
    IciConfig l = ici;
    for (const SlowLink& s : slow_links)
      if (s.chip == chip && s.axis == axis && s.positive == positive && s.bw_scale > 0) l.link_bw_gbps *= s.bw_scale;
    return l;
  }
  const SlowChip* slow_chip(std::uint32_t chip) const {
    for (const SlowChip& s : slow_chips)
      if (s.chip == chip) return &s;
    return nullptr;
  }

  std::uint64_t chip_count() const {
    std::uint64_t n = 1;
    for (auto d : slice_dims) n *= d;
    return n;
  }
  std::uint64_t core_count() const { return chip_count() * chip.cores; }
  // Every slice's chips (chip_count() is one slice's).
  std::uint64_t total_chip_count() const { return chip_count() * slices; }
  // Peak of the modelled MXUs (not the documented figure) so that MFU of a perfectly busy
  // MXU is exactly 1.
  double peak_bf16_flops_per_chip() const {
    return 2.0 * chip.cores * core.mxu.per_core * core.mxu.rows * core.mxu.cols *
           core.mxu.bf16_macs_per_cell_per_cycle * core.freq_mhz * 1e6;
  }
};

}  // namespace tpusim
