#include "sim/op_cmd.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/errors.hpp"
#include "sim/single_op.hpp"
#include "workloads/model.hpp"

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

// What the lowering charges for the forward op of a layer of this kind (workloads/lower.cpp).
struct VectorCost {
  double vpu_ops_per_element;
  std::uint64_t inputs_read;  // tensors of the input's size read from HBM
  std::uint32_t lane_reductions = 0;  // of the input, along its last axis, one after another
};

VectorCost cost_of(const std::string& kind) {
  if (kind == "copy") return {0, 1};  // what jnp's copy() lowers to: a read and a write, no arithmetic
  if (kind == "add" || kind == "mul") return {1, 2};
  if (kind == "layer_norm") return {kNormVpuOps, 1, 1};  // row statistics stay in vector memory
  if (kind == "batch_norm") return {kNormVpuOps, 2};     // batch statistics need the whole tensor first
  return {activation_vpu_ops(kind), 1, activation_lane_reductions(kind, false)};
}

}  // namespace

const std::vector<std::string>& vector_op_kinds() {
  static const std::vector<std::string> kinds = {"copy", "add", "mul", "relu", "gelu", "tanh", "sigmoid", "softmax", "layer_norm", "batch_norm"};
  return kinds;
}

ojson run_vector_op(const HwConfig& hw_in, const VectorOpRequest& r) {
  const auto& kinds = vector_op_kinds();
  if (std::find(kinds.begin(), kinds.end(), r.kind) == kinds.end())
    throw InputError(fmt::format("op {}: expected one of {}", r.kind, fmt::join(kinds, ", ")));
  if (r.shape.empty()) throw InputError("op --shape: expected dimensions such as 8192,4096");
  constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 36;
  std::uint64_t elements = 1;
  for (std::uint64_t d : r.shape) {
    if (d == 0 || d > kMaxElements || elements > kMaxElements / d)
      throw InputError(fmt::format("op --shape {}: expected dimensions of at least 1 and at most {} elements in all",
                                   fmt::join(r.shape, ","), kMaxElements));
    elements *= d;
  }
  const HwConfig hw = cores_alone(hw_in, r.cores, "op");

  const VectorCost cost = cost_of(r.kind);
  const std::uint64_t bytes = elements * dtype_bytes(r.dtype);
  Op op;
  op.kind = OpKind::Vector;
  op.phase = Phase::Forward;
  op.name = r.kind;
  op.vector.elements = elements;
  op.vector.vpu_ops_per_element = cost.vpu_ops_per_element;
  op.vector.hbm_read_bytes = cost.inputs_read * bytes;
  op.vector.hbm_write_bytes = bytes;
  op.vector.lane_reductions = cost.lane_reductions;
  op.vector.lane_reduced_bytes = bytes;
  const SingleOpTiming t = simulate_single_op(hw, op, r.max_memory_bytes, "simulating the op");
  const double time_s = ps_to_s(t.op_ps);

  ojson out;
  out["hw"] = hw.name;
  out["op"] = r.kind;
  out["shape"] = r.shape;
  out["dtype"] = dtype_name(r.dtype);
  out["elements"] = elements;
  out["cores"] = r.cores;
  out["hbm_per_core"] = hw.chip.hbm_per_core;
  out["vpu_ops_per_element"] = cost.vpu_ops_per_element;
  out["mode"] = "simulated";
  out["cycles"] = Clock{hw.core.freq_mhz}.ps_to_cycles(t.op_ps);
  add_times(out, hw, time_s);
  out["hbm_bytes"] = t.hbm_bytes;
  out["hbm_bw_gbps"] = static_cast<double>(t.hbm_bytes) / time_s / 1e9;
  out["vpu_busy_fraction"] = t.vpu_busy_fraction;
  out["hbm_busy_fraction"] = t.hbm_busy_fraction;
  out["bound"] = bound_of(t.vpu_busy_fraction, t.hbm_busy_fraction);
  return out;
}

std::string format_vector_op(const ojson& r) {
  const auto cores = r["cores"].get<std::uint32_t>();
  std::string t = fmt::format("{} of {} ({}, {} elements) on {} {} core{}, {} VPU ops per element [{}]\n", r["op"].get<std::string>(),
                              fmt::join(r["shape"].get<std::vector<std::uint64_t>>(), "x"), r["dtype"].get<std::string>(),
                              r["elements"].get<std::uint64_t>(), cores == 1 ? std::string("one") : std::to_string(cores),
                              r["hw"].get<std::string>(), cores_text(r),
                              r["vpu_ops_per_element"].get<double>(), r["mode"].get<std::string>());
  t += fmt::format("  cycles         {}\n", r["cycles"].get<std::uint64_t>());
  t += format_times(r);
  t += fmt::format("  HBM            {} bytes moved, {:.1f} GB/s\n", r["hbm_bytes"].get<std::uint64_t>(), r["hbm_bw_gbps"].get<double>());
  t += fmt::format("  VPU busy       {:.1f}%, HBM busy {:.1f}%\n", 100 * r["vpu_busy_fraction"].get<double>(),
                   100 * r["hbm_busy_fraction"].get<double>());
  t += fmt::format("  bound          {}\n", r["bound"].get<std::string>());
  return t;
}

}  // namespace tpusim
