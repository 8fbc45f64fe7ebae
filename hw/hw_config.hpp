// Typed hardware configuration. Built and validated once by sim/config from a preset plus
// overrides; modules receive these structs and never see JSON.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hw/config_keys.hpp"
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
  // What the array streams on long matmuls, as a share of its peak rate: below 1 where a
  // generation's own microbenchmark never reaches the documented peak (TPU7x), for a reason not
  // published. The documented peak (and MFU) stay at the full rate.
  double sustained_fraction = 1.0;
  // Rows each cell takes per cycle with operands of `lhs` at the documented peak: the bf16 rate
  // times the type's speed-up (0: the MXU has no such path; an f32 product runs as bf16 passes).
  double peak_rows_per_cycle(DType lhs) const {
    const double speedup = lhs == DType::Int8 ? int8_speedup : lhs == DType::Fp8 ? fp8_speedup : 1.0;
    return bf16_macs_per_cell_per_cycle * speedup;
  }
  // What the array streams: the peak rate at its sustained share.
  double rows_per_cycle(DType lhs) const { return peak_rows_per_cycle(lhs) * sustained_fraction; }

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("rows", rows, {"cells", "Systolic array rows (the K extent of a stationary weight tile)", 8, 1024});
    k.key("cols", cols, {"cells", "Systolic array columns (the N extent of a stationary weight tile)", 8, 1024});
    k.key("per_core", per_core, {"MXUs", "Matrix units per TensorCore", 1, 16});
    k.key("bf16_macs_per_cell_per_cycle", bf16_macs_per_cell_per_cycle,
          {"MAC/cycle",
           "bf16 multiply-accumulates per array cell per cycle (calibrates generations whose published peak needs more "
           "than 1)", 0.125, 16});
    k.key("int8_speedup", int8_speedup, {"x", "int8 matmul rate relative to bf16; 0 when the MXU has no int8 path", 0, 16});
    k.key("fp8_speedup", fp8_speedup, {"x", "fp8 matmul rate relative to bf16; 0 when the MXU has no fp8 path", 0, 16});
    k.key("weight_double_buffered", weight_double_buffered, {"", "The next weight tile loads while the current one streams"});
    k.key("sustained_fraction", sustained_fraction,
          {"", "Share of the peak rate the array streams at on long matmuls (1: the documented peak; every type alike)",
           0.05, 1});
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

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("lanes", lanes, {"lanes", "Vector unit lanes", 1, 4096});
    k.key("sublanes", sublanes, {"sublanes", "Vector unit sublanes", 1, 1024});
    k.key("alus_per_element", alus_per_element, {"ALUs", "fp32 ALUs per (lane, sublane)", 1, 16});
    k.key("lane_reduction_extra_passes", lane_reduction_extra_passes,
          {"passes",
           "Extra reads of its input, in passes, that each reduction along the last (lane) axis costs a vector op (a softmax's "
           "max and sum, a layer norm's statistics), as XLA runs it on this generation; 0: the reduction rides in the op's own "
           "pass", 0, 100, 0.0});
  }
};

struct DmaConfig {
  std::uint32_t engines = 4;
  std::uint32_t max_outstanding_chunks = 4;
  std::uint64_t chunk_bytes = 512 * 1024;  // one HBM transaction of a DMA
  double issue_latency_ns = 100;           // descriptor issue to first byte

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("engines", engines, {"engines", "DMA engines per TensorCore (transfers in parallel)", 1, 64});
    k.key("max_outstanding_chunks", max_outstanding_chunks, {"chunks", "HBM requests one DMA keeps in flight", 1, 1024});
    k.key("chunk_bytes", chunk_bytes, {"bytes", "Size of one DMA request to HBM", 64, 1ull << 30});
    k.key("issue_latency_ns", issue_latency_ns, {"ns", "From DMA descriptor issue to the first request", 0, 1e6});
  }
};

struct CoreConfig {
  double freq_mhz = 700;
  MxuConfig mxu;
  VpuConfig vpu;
  std::uint64_t vmem_bytes = 16ull << 20;
  DmaConfig dma;
  std::uint32_t op_overhead_cycles = 0;  // fixed issue cost of every op on the core

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("freq_mhz", freq_mhz, {"MHz", "TensorCore clock", 1, 10000});
    k.block("mxu", mxu);
    k.block("vpu", vpu);
    k.key("vmem_bytes", vmem_bytes, {"bytes", "Vector memory (VMEM) per TensorCore", 65536, 1e12});
    k.key("op_overhead_cycles", op_overhead_cycles, {"cycles", "Fixed issue cost of every op", 0, 1e9});
    k.block("dma", dma);
  }
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

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("trcd_ns", trcd_ns, {"ns", "tRCD: ACT to column command", 0, 1e4});
    k.key("trp_ns", trp_ns, {"ns", "tRP: PRE to ACT", 0, 1e4});
    k.key("tras_ns", tras_ns, {"ns", "tRAS: ACT to PRE", 0, 1e4});
    k.key("tcl_ns", tcl_ns, {"ns", "tCL: read command to data", 0, 1e4});
    k.key("tcwl_ns", tcwl_ns, {"ns", "tCWL: write command to data", 0, 1e4});
    k.key("tccd_l_ns", tccd_l_ns, {"ns", "tCCD_L: column to column in one bank group (tCCD_S is the burst time)", 0, 1e4});
    k.key("trrd_s_ns", trrd_s_ns, {"ns", "tRRD_S: ACT to ACT in different bank groups", 0, 1e4});
    k.key("trrd_l_ns", trrd_l_ns, {"ns", "tRRD_L: ACT to ACT in one bank group", 0, 1e4});
    k.key("tfaw_ns", tfaw_ns, {"ns", "tFAW: window holding at most four ACTs", 0, 1e4});
    k.key("twtr_s_ns", twtr_s_ns, {"ns", "tWTR_S: end of write data to a read, different bank groups", 0, 1e4});
    k.key("twtr_l_ns", twtr_l_ns, {"ns", "tWTR_L: end of write data to a read, same bank group", 0, 1e4});
    k.key("trtw_ns", trtw_ns, {"ns", "Bus turnaround from the end of read data to write data", 0, 1e4});
    k.key("twr_ns", twr_ns, {"ns", "tWR: end of write data to PRE", 0, 1e4});
    k.key("trtp_ns", trtp_ns, {"ns", "tRTP: read command to PRE", 0, 1e4});
    k.key("trfc_ns", trfc_ns, {"ns", "tRFC: all-bank refresh", 0, 1e5});
    k.key("trefi_ns", trefi_ns, {"ns", "tREFI: refresh interval", 1, 1e7});
  }
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
  std::map<std::string, double> model_keys;  // the values of that model's own knobs, by name

  std::uint32_t burst_bytes() const { return channel_width_bits / 8 * burst_length; }

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("capacity_bytes", capacity_bytes, {"bytes", "HBM capacity per chip", 1 << 20, 1e14});
    k.key("bw_gbps", bw_gbps, {"GB/s", "HBM peak bandwidth per chip (10^9 bytes/s, all channels)", 1, 1e6});
    k.key("channels", channels, {"channels", "Independent HBM channels per chip (pseudo-channels count as channels)", 1, 4096});
    k.key("channel_width_bits", channel_width_bits, {"bits", "Data width of one channel", 8, 1024});
    k.key("burst_length", burst_length, {"beats", "Beats per burst (a burst moves width/8 x length bytes)", 1, 64});
    k.key("bank_groups", bank_groups, {"groups", "Bank groups per channel", 1, 64});
    k.key("banks_per_group", banks_per_group, {"banks", "Banks per bank group", 1, 64});
    k.key("row_bytes", row_bytes, {"bytes", "Row buffer (page) of one bank", 32, 1 << 20});
    k.key("address_mapping", address_mapping,
          {"",
           "Address fields from most to least significant, DRAMsim3 notation: ro row, ba bank, bg bank group, ch channel, co "
           "column, ra rank"});
    k.key("queue_depth", queue_depth,
          {"bursts",
           "Transaction queue of a channel's controller, in one-burst requests; a requester waits while it is full", 1, 1 << 20});
    k.key("bank_queue_depth", bank_queue_depth,
          {"bursts",
           "Per-bank command queue a transaction moves into when its bank has room; the scheduler picks among these (row hits "
           "first, then the oldest)", 1, 1 << 20});
    k.key("posted_writes", posted_writes,
          {"",
           "A write is acknowledged when its channel's queue takes it (a write buffer), not when its data is in the DRAM"});
    k.key("model", model,
          {"",
           "The memory model a chip's memory is built by: calibrated (the rates the burst-group DRAM model achieves), "
           "burst_group (every request through that model; slow), datasheet (hbm.bw_gbps for every access) or one a program "
           "registered before reading the configuration (hw/memory.hpp)"});
    k.key("latency_ns", latency_ns,
          {"ns",
           "On-chip path from a requester to the memory controllers and back (the DRAM timing comes on top)", 0, 1e6});
    k.block("timing", timing);
  }
};

enum class Wraparound { Never, Always, FullAxis, MultipleOf4 };
inline constexpr NameTable<Wraparound> kWraparoundNames[] = {
    {Wraparound::Never, "never"},
    {Wraparound::Always, "always"},
    {Wraparound::FullAxis, "full_axis"},
    {Wraparound::MultipleOf4, "multiple_of_4"},
};

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

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("ports_per_chip", ports_per_chip, {"ports", "ICI ports per chip (2 per torus axis)", 0, 12});
    k.key("link_bw_gbps", link_bw_gbps, {"GB/s", "ICI bandwidth per link per direction (10^9 bytes/s)", 0.001, 1e6});
    k.key("payload_efficiency", payload_efficiency,
          {"",
           "Share of ici.link_bw_gbps that carries payload (the rest: headers, flow control)", 0.01, 1});
    k.key("hop_latency_ns", hop_latency_ns, {"ns", "Latency per ICI hop", 0, 1e8});
    k.key("collective_start_ns", collective_start_ns,
          {"ns",
           "Fixed cost of starting one collective on a chip (peers signal their buffers are free, transfers are set up) before "
           "its first byte moves", 0, 1e8});
    k.choice("wraparound", wraparound, kWraparoundNames, {"", "Which torus axes wrap around"});
    k.key("full_axis_chips", full_axis_chips,
          {"chips",
           "Axis length that has wraparound when ici.wraparound is full_axis", 1, 1024});
  }
};

struct HostConfig {
  std::uint32_t chips_per_host = 4;
  double pcie_bw_gbps = 16;  // per chip, host to chip
  double pcie_latency_ns = 2000;
  // A framework's call of one compiled program, as its timer sees it: dispatch from the host, the
  // program's start on the device and the completion's return, beyond the device's own time.
  double launch_overhead_us = 0;

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("chips_per_host", chips_per_host, {"chips", "Chips attached to one host", 1, 64});
    k.key("pcie_bw_gbps", pcie_bw_gbps, {"GB/s", "Host-to-chip PCIe bandwidth per chip (10^9 bytes/s)", 0.001, 1e5});
    k.key("pcie_latency_ns", pcie_latency_ns, {"ns", "Host-to-chip transfer latency", 0, 1e8});
    k.key("launch_overhead_us", launch_overhead_us,
          {"us",
           "Cost of launching one compiled program as a framework's timer sees it, beyond the device time (the framework-timed "
           "figure of gemm, op and collective)", 0, 1e7});
  }
};

// The data-center network between slices (Cloud TPU multislice): a chip's traffic to its peer in
// another slice leaves by DMA to its host, crosses the network and lands by DMA in the peer's HBM.
struct DcnConfig {
  double bw_gbps_per_chip = 0;  // per direction; 0: none published, so no multislice
  double latency_us = 10;

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("bw_gbps_per_chip", bw_gbps_per_chip,
          {"GB/s",
           "Data-center network bandwidth between slices per chip per direction (10^9 bytes/s); 0: none published, and more "
           "than one slice is refused until it is set", 0, 1e5});
    k.key("latency_us", latency_us,
          {"us",
           "One-way latency of a transfer between slices: DMA to the host, the network, DMA into the peer's HBM", 0, 1e6});
  }
};

// Power of one chip as the summary's energy model takes it (sim/cost_energy.hpp).
struct ChipPower {
  double idle_w = 0;
  double max_w = 0;
  std::optional<double> typical_w;  // the published fleet mean, for comparison only
  double mxu_share = 0.5;           // of (max_w - idle_w), the part that follows the MXUs' busy fraction

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("idle_w", idle_w, {"W", "Power of one chip with no unit busy (the measured minimum where one is published)", 0, 1e5});
    k.optional("typical_w", typical_w,
               {"W",
                "Published mean power of one chip over its fleet's workloads (reported beside the modelled power, not used by "
                "the model)", 0, 1e5});
    k.key("max_w", max_w,
          {"W",
           "Power of one chip with its MXUs and HBM busy all the time (the measured maximum where one is published)", 0, 1e5});
    k.key("mxu_share", mxu_share,
          {"",
           "Share of the span from idle_w to max_w that follows the MXUs' busy fraction; the rest follows the HBM's", 0, 1, 0.5});
  }
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

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("cores", cores, {"cores", "TensorCores per chip", 1, 8});
    k.key("megacore", megacore,
          {"",
           "The chip's cores act as one device (one replica per chip, its batch and optimizer update split between its cores, "
           "as JAX and XLA's megacore run v4 and v5p); false makes each core a replica with its own copy of the weights, as "
           "TensorFlow's MLPerf BERT on v4 ran (num_tpu_cores the TensorCore count)"});
    k.key("hbm_per_core", hbm_per_core,
          {"",
           "Each core has its own share of the HBM (capacity, channels and bandwidth divided by chip.cores); false: the cores "
           "share all of it"});
    k.key("documented_peak_bf16_tflops", documented_peak_bf16_tflops,
          {"TFLOP/s",
           "Published dense bf16 peak per chip (reported beside the modelled peak)", 0, 1e6});
    k.key("max_chips", max_chips, {"chips", "Largest slice the generation can form", 1, 65536});
    k.optional("price_usd_per_chip_hour", price_usd_per_chip_hour,
               {"USD/chip-hour",
                "On-demand price of one chip for one hour (the summary's cost figures); absent: no cost is reported",
                0.0001, 1e6});
    k.optional_block("power", power);
  }
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
  // Peak of the modelled MXUs (not the documented figure) at their full rate: MFU of an MXU that
  // never idles is 1, or its sustained fraction where that is below 1.
  double peak_bf16_flops_per_chip() const {
    return 2.0 * chip.cores * core.mxu.per_core * core.mxu.rows * core.mxu.cols *
           core.mxu.peak_rows_per_cycle(DType::BF16) * core.freq_mhz * 1e6;
  }

  // The keys of the blocks above; the slice, slow parts and faults are lists and objects that sim/config reads itself.
  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("name", name, {"", "Name of the hardware description"});
    k.block("chip", chip);
    k.block("core", core);
    k.block("hbm", hbm);
    k.block("ici", ici);
    k.block("host", host);
    k.block("dcn", dcn);
  }
};

}  // namespace tpusim
