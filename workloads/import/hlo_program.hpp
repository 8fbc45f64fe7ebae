// An XLA HLO module as the program each device runs: the entry computation's instructions in the
// order printed (XLA's schedule, when the module is scheduled), while loops unrolled by their trip
// counts, calls inlined. A dot or convolution (alone or fused with its epilogue) becomes a matmul
// of its dimension numbers; another fusion or an unfused elementwise, reduction or data-movement
// instruction a vector pass reading its operands and writing its result once; all-reduce,
// all-gather, reduce-scatter, collective-permute and all-to-all collectives over the torus axes
// their replica groups span. Bookkeeping (parameters, tuples, bitcasts, constants) costs nothing.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hw/program.hpp"
#include "workloads/import/hlo_text.hpp"

namespace tpusim {

struct HloCollectiveTotals {
  std::uint64_t count = 0;
  std::uint64_t bytes = 0;  // CollectiveSpec::bytes summed: an all-reduce's buffer, an all-gather's output, ...
};

struct HloStep {
  Program program;  // one device's; every device of an SPMD module runs the same
  std::uint32_t devices = 1;
  double flops = 0;  // dots and convolutions, per device and step (2 per multiply-accumulate)
  std::map<std::string, HloCollectiveTotals> collectives;  // by XLA's opcode name: all-reduce, all-gather, ...
  std::uint64_t parameter_bytes = 0;  // the entry computation's parameters: weights, optimizer state, the batch
  std::uint64_t instructions = 0;     // executed, loops unrolled
  std::vector<std::string> notes;     // what was assumed or left out
};

// `torus_dims`: the slice's chips per axis (x fastest), which device ids map onto in order.
// Throws std::invalid_argument "ORIGIN:LINE: %name: what" for an instruction tpusim cannot price
// (an unknown opcode, shapes that contradict each other, replica groups that are not whole axes of
// the torus, a loop without a known trip count).
HloStep lower_hlo_module(const HloModule& module, const std::string& origin, const std::vector<std::uint32_t>& torus_dims);

// The devices the module runs on: num_partitions x replica_count from its header.
std::uint32_t hlo_device_count(const HloModule& module, const std::string& origin);

}  // namespace tpusim
