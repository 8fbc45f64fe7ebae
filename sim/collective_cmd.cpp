#include "sim/collective_cmd.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "hw/collective.hpp"
#include "hw/system.hpp"
#include "sim/errors.hpp"
#include "sim/invariants.hpp"
#include "sim/resources.hpp"
#include "sim/simulate.hpp"
#include "sim/single_op.hpp"
#include "sim/stats.hpp"

namespace tpusim {

using ojson = nlohmann::ordered_json;

std::uint32_t parse_group(const std::string& text) {
  if (text == "all") return 0x7;
  std::uint32_t mask = 0;
  for (char c : text) {
    const auto at = std::string("xyz").find(c);
    if (at == std::string::npos || text.size() > 3 || (mask >> at & 1u))
      throw InputError(fmt::format("--group {}: expected all, or torus axes such as x, y, xy, xyz", text));
    mask |= 1u << at;
  }
  if (mask == 0) throw InputError("--group: expected all, or torus axes such as x, y, xy, xyz, got nothing");
  return mask;
}

ojson run_collective(const HwConfig& hw_in, const CollectiveRequest& request) {
  CollectiveSpec spec = request.spec;
  spec.dcn_slices = hw_in.slices;  // --slices: the group spans that many slices over the DCN
  if (spec.bytes == 0 || spec.bytes > (std::uint64_t{1} << 40))
    throw InputError(fmt::format("--bytes {}: expected between 1 and {}", spec.bytes, std::uint64_t{1} << 40));
  HwConfig hw = hw_in;
  hw.chip.cores = 1;  // one rank per chip: the chip-level collective alone
  hw.chip.megacore = false;
  hw.chip.hbm_per_core = false;  // the one rank's buffers use the whole HBM
  const Torus torus = Torus::of(hw);
  for (std::uint8_t a = 0; a < 3; ++a)
    if ((request.named_axes || spec.group_axes != 0x7) && (spec.group_axes >> a & 1u) && a >= torus.axes())
      throw InputError(fmt::format("--group: a {} slice has no {} axis", torus.shape(), "xyz"[a]));
  if (spec.dcn_slices > 1 && spec.kind != CollectiveKind::AllReduce && spec.kind != CollectiveKind::ReduceScatter)
    throw InputError(fmt::format("--slices {}: only a reduction (all-reduce, reduce-scatter) crosses to other slices; "
                                 "an {} stays within one", spec.dcn_slices, collective_kind_name(spec.kind)));
  const CollectiveSchedule schedule = plan_collective(torus, 0, spec);
  const std::uint32_t p = schedule.group_size;

  if (request.concurrent == 0 || request.concurrent > 16)
    throw InputError(fmt::format("--concurrent {}: expected 1 to 16", request.concurrent));
  Program program;
  program.steps = 1;
  for (std::uint32_t i = 0; i < request.concurrent; ++i) {
    Op op;
    op.id = i;
    op.kind = OpKind::Collective;
    op.phase = Phase::Gradients;
    op.name = fmt::format("{} {} B", collective_kind_name(spec.kind), spec.bytes);
    op.collective = spec;
    op.stream = i;  // all in flight together
    program.ops.push_back(op);
  }

  const SimulatedSlice simulated = plan_simulated_slice(torus, hw, program, !request.all_chips);
  check_memory(estimate_memory(hw, program, 0, simulated), request.max_memory_bytes,
               "simulating the collective on " + torus.shape());
  Recorder recorder(1, nullptr, /*keep_spans=*/false);  // reads totals only
  System& system = elaborate(hw, program, InfeedSpec{}, &recorder, simulated);
  simulate(system, "collective");
  const Picos end = system.step_end_ps()[0];
  check_invariants({&system, &program, &hw, &recorder, end});
  const double time_s = ps_to_s(end);

  ojson out;
  out["hw"] = hw.name;
  out["topology"] = torus.shape();
  std::string wraps;
  for (std::uint32_t a = 0; a < torus.axes(); ++a) wraps += torus.wraps(a) ? "y" : "n";
  out["wraparound"] = wraps;
  out["op"] = collective_kind_name(spec.kind);
  out["algorithm"] = collective_algorithm_name(spec.algorithm);
  out["bytes"] = spec.bytes;
  out["concurrent"] = request.concurrent;
  out["group_size"] = p;
  out["groups"] = torus.chip_count() / p;
  if (spec.dcn_slices > 1) {
    out["slices"] = spec.dcn_slices;
    out["dcn_sent_bytes_per_chip"] = schedule_dcn_sent_bytes(schedule);
  }
  add_times(out, hw, time_s);
  // The fixed start the collective paid (once, as any collective with something to move does):
  // what bench/validate.py moves when it refits hw.ici.collective_start_ns.
  out["collective_start_s"] = schedule.parts.empty() ? 0.0 : hw.ici.collective_start_ns * 1e-9;
  const double alpha_beta = collective_closed_form_s(torus, schedule, hw, spec);
  out["alpha_beta_s"] = alpha_beta;
  const double algbw = static_cast<double>(spec.bytes) / time_s / 1e9;
  // nccl-tests' bus bandwidth: what each link would carry if the algorithm were ideal (a permute
  // moves the buffer once).
  const double factor = p <= 1                                   ? 0.0
                        : spec.kind == CollectiveKind::AllReduce ? 2.0 * (p - 1) / p
                        : spec.kind == CollectiveKind::Permute   ? 1.0
                                                                 : static_cast<double>(p - 1) / p;
  // A chip alone in its group moves nothing and takes no time: it has no bandwidth (infinite
  // and NaN figures are not numbers a reader can use).
  out["algbw_gbps"] = time_s > 0 ? ojson(algbw) : ojson(nullptr);
  out["busbw_gbps"] = time_s > 0 ? ojson(algbw * factor) : ojson(nullptr);

  // A simulated chip's link stands for that link of every chip in the chip's class
  // (hw/symmetry.hpp); the listing shows the simulated ones.
  ojson links = ojson::array();
  double busiest = 0;
  CountedSum busy_sum;
  std::uint64_t used = 0, link_bytes = 0;
  for (std::uint32_t u = 0; u < recorder.units().size(); ++u) {
    const UnitInfo& info = recorder.units()[u];
    if (info.kind != UnitKind::IciLink) continue;
    const StepTotals& t = recorder.totals(u, 0);
    if (t.bytes == 0) continue;
    const std::uint64_t stands_for = system.simulated().stands_for(system.torus(), info.chip);
    const double busy = static_cast<double>(t.busy_ps) / static_cast<double>(end);
    busiest = std::max(busiest, busy);
    busy_sum.add(busy, stands_for);
    used += stands_for;
    link_bytes += t.bytes * stands_for;
    if (request.list_links) links.push_back({{"link", info.path}, {"busy_fraction", busy}, {"bytes", t.bytes}});
  }
  out["links_used"] = used;
  out["link_utilization_max"] = busiest;
  out["link_utilization_mean"] = used ? busy_sum.total() / static_cast<double>(used) : 0.0;
  out["ici_bytes"] = link_bytes;
  out["simulation"] = simulation_json(system.simulated());
  // Symmetric chips differ by the order in which shared units take requests of the same instant.
  Picos first_end = end;
  for (const Chip& chip : system.chips()) first_end = std::min(first_end, chip.cores[0].step_end_ps()[0]);
  out["chip_end_spread_s"] = ps_to_s(end - first_end);
  if (request.list_links) out["links"] = links;
  return out;
}

std::string format_collective(const ojson& c) {
  std::string t = fmt::format("{} of {} bytes over {} groups of {} chips on {} {} (wraparound {}), {}\n",
                              c["op"].get<std::string>(), c["bytes"].get<std::uint64_t>(), c["groups"].get<std::uint64_t>(),
                              c["group_size"].get<std::uint32_t>(), c["hw"].get<std::string>(),
                              c["topology"].get<std::string>(), c["wraparound"].get<std::string>(),
                              c["algorithm"].get<std::string>());
  t += format_times(c, fmt::format(" (alpha-beta closed form {:.3f} us)", c["alpha_beta_s"].get<double>() * 1e6));
  if (c["algbw_gbps"].is_null())
    t += "  bandwidth      none: each chip is alone in its group, nothing moves\n";
  else
    t += fmt::format("  bandwidth      algbw {:.2f} GB/s, busbw {:.2f} GB/s\n", c["algbw_gbps"].get<double>(),
                     c["busbw_gbps"].get<double>());
  t += fmt::format("  ICI links      {} used, busy {:.1f}% at most, {:.1f}% on average; {} bytes moved\n",
                   c["links_used"].get<std::uint64_t>(), 100 * c["link_utilization_max"].get<double>(),
                   100 * c["link_utilization_mean"].get<double>(), c["ici_bytes"].get<std::uint64_t>());
  return t;
}

}  // namespace tpusim
