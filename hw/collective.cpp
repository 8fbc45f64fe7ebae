#include "hw/collective.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/systolic_timing.hpp"
#include "hw/units.hpp"

namespace tpusim {
namespace {

std::vector<std::uint8_t> group_axes_of(const Torus& torus, std::uint32_t mask, const GroupSpan& span) {
  std::vector<std::uint8_t> axes;
  for (std::uint8_t a = 0; a < torus.axes(); ++a)
    if ((mask >> a & 1u) && group_extent(torus, span, a) > 1) axes.push_back(a);
  return axes;
}

std::uint32_t position_of(const std::vector<std::uint32_t>& ring, std::uint32_t chip) {
  return static_cast<std::uint32_t>(std::find(ring.begin(), ring.end(), chip) - ring.begin());
}

std::string axis_label(std::uint8_t a) { return std::string(1, "xyz"[a]); }

}  // namespace

std::vector<std::uint32_t> group_walk(const Torus& torus, std::uint32_t chip, const std::vector<std::uint8_t>& axes,
                                      const GroupSpan& span) {
  std::vector<std::uint32_t> sub_dims;
  for (auto a : axes) sub_dims.push_back(group_extent(torus, span, a));
  const Torus sub(sub_dims, std::vector<bool>(sub_dims.size(), false));
  std::vector<std::uint32_t> ring;
  const auto base = torus.coords(chip);
  for (std::uint32_t s : sub.ring_order()) {
    Coords c = base;
    const auto sc = sub.coords(s);
    for (std::size_t i = 0; i < axes.size(); ++i) c[axes[i]] = base[axes[i]] - base[axes[i]] % sub_dims[i] + sc[i];
    ring.push_back(torus.chip_at(c));
  }
  return ring;
}

void add_ring_passes(SchedulePart& part, std::vector<std::uint32_t> ring, std::uint32_t chip, std::uint64_t bytes,
                     bool bidirectional, bool line, const std::string& where, bool reduce_scatter, bool all_gather) {
  const auto p = static_cast<std::uint64_t>(ring.size());
  // Two chips have one link pair: both ways, and the line, are the same ring.
  line = line && p > 2;
  bidirectional = bidirectional && p > 2 && !line;
  const std::uint64_t per_direction = bidirectional ? ceil_div<std::uint64_t>(bytes, 2) : bytes;
  RingPass pass;
  pass.position = position_of(ring, chip);
  pass.ring = std::move(ring);
  pass.shard_bytes = ceil_div<std::uint64_t>(per_direction, p);
  pass.bidirectional = bidirectional;
  pass.line = line;
  pass.steps = static_cast<std::uint32_t>(p - 1);
  if (reduce_scatter) {
    pass.reduce = true;
    pass.label = "RS " + where;
    part.passes.push_back(pass);
  }
  if (all_gather) {
    pass.reduce = false;
    pass.label = "AG " + where;
    part.passes.push_back(pass);
  }
}

namespace {

// Reduce-scatter along each axis in order, then all-gather back in reverse order. An axis with
// wraparound runs two rings, one each way; an axis without sends both ways along the line, where
// a ring's closing hop would cross the whole line.
SchedulePart torus_part(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec,
                        const std::vector<std::uint8_t>& axes, std::uint64_t bytes) {
  SchedulePart part;
  std::vector<std::uint64_t> sizes;  // the buffer entering each axis's reduce-scatter
  std::uint64_t n = bytes;
  for (auto a : axes) {
    sizes.push_back(n);
    n = ceil_div<std::uint64_t>(n, group_extent(torus, spec.group_span, a));
  }
  // A block shorter than its axis has no wraparound of its own.
  const auto closes = [&](std::uint8_t a) { return torus.wraps(a) && group_extent(torus, spec.group_span, a) == torus.dims()[a]; };
  const bool rs = spec.kind != CollectiveKind::AllGather;
  const bool ag = spec.kind != CollectiveKind::ReduceScatter;
  if (rs)
    for (std::size_t i = 0; i < axes.size(); ++i)
      add_ring_passes(part, group_walk(torus, chip, {axes[i]}, spec.group_span), chip, sizes[i], closes(axes[i]), !closes(axes[i]),
               axis_label(axes[i]), true, false);
  if (ag)
    for (std::size_t i = axes.size(); i-- > 0;)
      add_ring_passes(part, group_walk(torus, chip, {axes[i]}, spec.group_span), chip, sizes[i], closes(axes[i]), !closes(axes[i]),
               axis_label(axes[i]), false, true);
  return part;
}

// The DCN stage of a reduction over several slices: what each part holds after its reduce-scatter
// passes (its share of the buffer, 1/group of it) is all-reduced with the chip's peers in the
// other slices, a ring reduce-scatter and all-gather over the DCN, before the part's all-gather
// passes bring the result back to the whole group. A group of one chip all-reduces the whole buffer.
void add_dcn_stage(CollectiveSchedule& schedule, const CollectiveSpec& spec) {
  if (schedule.parts.empty()) schedule.parts.push_back(SchedulePart{});
  for (SchedulePart& part : schedule.parts) {
    auto after_reduce = part.passes.begin();
    std::uint64_t held = spec.bytes;
    for (; after_reduce != part.passes.end() && after_reduce->reduce; ++after_reduce) held = after_reduce->result_bytes();
    RingPass pass;
    pass.dcn_slices = spec.dcn_slices;
    pass.shard_bytes = ceil_div<std::uint64_t>(held, spec.dcn_slices);
    pass.steps = spec.dcn_slices - 1;
    pass.reduce = true;
    pass.label = "RS dcn";
    RingPass gather = pass;
    gather.reduce = false;
    gather.label = "AG dcn";
    part.passes.insert(after_reduce, {pass, gather});
  }
}

// An all-to-all of `bytes`, one torus axis after another (a two-dimensional all-to-all in two phases): along
// an axis of p chips each chip sends every other chip on it the 1/p of its buffer bound for that
// chip's coordinate, so the buffer keeps its size from axis to axis. The shares travel round the
// axis's ring both ways, one hop a step, store and forward: in step t every chip passes each
// neighbour the shares still bound t or more hops on that way (a chip exactly half way round of
// an even ring gets half of its share each way), so every link direction carries the ring's
// bisection load, p^2/8 shares, the load of direct routed sends, and only between neighbours.
// (On an axis without wraparound the ring's closing hop crosses the line.)
SchedulePart all_to_all_part(const Torus& torus, std::uint32_t chip, const std::vector<std::uint8_t>& axes, const GroupSpan& span,
                             std::uint64_t bytes) {
  SchedulePart part;
  for (auto a : axes) {
    RingPass pass;
    pass.ring = group_walk(torus, chip, {a}, span);
    pass.position = position_of(pass.ring, chip);
    const auto p = static_cast<std::uint64_t>(pass.ring.size());
    const std::uint64_t share = ceil_div<std::uint64_t>(bytes, p);
    pass.reduce = false;
    pass.steps = 1;
    pass.bidirectional = p > 2;
    const std::uint64_t last = p % 2 == 0 && p > 2 ? ceil_div<std::uint64_t>(share, 2) : share;  // the farthest share
    for (std::uint64_t t = 1; 2 * t <= p; ++t) {
      pass.shard_bytes = (p / 2 - t) * share + last;
      pass.label = fmt::format("A2A {} {}", axis_label(a), t);
      part.passes.push_back(pass);
    }
  }
  return part;
}

}  // namespace

bool ring_sends(const RingPass& pass, std::uint32_t dir, std::uint32_t step) {
  if (dir >= pass.directions() || step >= pass.steps) return false;
  if (!pass.line) return true;
  const auto p = static_cast<std::uint32_t>(pass.ring.size());
  const std::uint32_t behind = dir == 0 ? pass.position : p - 1 - pass.position;
  if (behind + 1 == p) return false;  // the end of the line that way
  return pass.reduce ? step >= behind : step <= behind;
}

std::uint64_t schedule_sent_bytes(const CollectiveSchedule& schedule) {
  std::uint64_t bytes = 0;
  for (const SchedulePart& part : schedule.parts)
    for (const RingPass& pass : part.passes)
      for (std::uint32_t dir = 0; dir < pass.directions() && !pass.over_dcn(); ++dir)
        for (std::uint32_t step = 0; step < pass.steps; ++step)
          if (ring_sends(pass, dir, step)) bytes += pass.shard_bytes;
  return bytes;
}

std::uint64_t schedule_dcn_sent_bytes(const CollectiveSchedule& schedule) {
  std::uint64_t bytes = 0;
  for (const SchedulePart& part : schedule.parts)
    for (const RingPass& pass : part.passes)
      if (pass.over_dcn()) bytes += pass.shard_bytes * pass.steps;
  return bytes;
}

bool ring_receives(const RingPass& pass, std::uint32_t dir, std::uint32_t step) {
  if (dir >= pass.directions() || step >= pass.steps) return false;
  if (!pass.line) return true;
  const auto p = static_cast<std::uint32_t>(pass.ring.size());
  const std::uint32_t behind = dir == 0 ? pass.position : p - 1 - pass.position;
  if (behind == 0) return false;  // nothing comes from that way
  return pass.reduce ? step + 1 >= behind : step < behind;
}

std::uint32_t group_size(const Torus& torus, std::uint32_t mask, const GroupSpan& span) {
  std::uint32_t p = 1;
  for (auto a : group_axes_of(torus, mask, span)) p *= group_extent(torus, span, a);
  return p;
}

namespace {

std::map<CollectiveAlgorithm, CollectivePlan>& registered_plans() {
  static std::map<CollectiveAlgorithm, CollectivePlan> plans;
  return plans;
}

// The passes within the slice.
CollectiveSchedule plan_ici_collective(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec) {
  CollectiveSchedule schedule;
  const auto axes = group_axes_of(torus, spec.group_axes, spec.group_span);
  schedule.group_size = group_size(torus, spec.group_axes, spec.group_span);
  if (schedule.group_size <= 1 || spec.bytes == 0) return schedule;
  if (spec.kind == CollectiveKind::Permute) {  // one step of a ring through the group
    RingPass pass;
    pass.ring = group_walk(torus, chip, axes, spec.group_span);
    pass.position = position_of(pass.ring, chip);
    pass.reduce = false;
    // BidirRing: half the buffer goes to each neighbour (two chips have one link pair).
    pass.bidirectional = spec.algorithm == CollectiveAlgorithm::BidirRing && pass.ring.size() > 2;
    pass.shard_bytes = pass.bidirectional ? ceil_div<std::uint64_t>(spec.bytes, 2) : spec.bytes;
    pass.steps = 1;
    pass.label = "permute";
    schedule.parts.push_back(SchedulePart{{pass}});
    return schedule;
  }
  if (spec.kind == CollectiveKind::AllToAll) {
    // Whatever the algorithm: axis by axis, on 1/k of the data per axis order, all k at once (as
    // torus_all_axes), so that every axis's links are busy at once, as direct routed sends keep
    // them, rather than one axis's after another's.
    const std::uint64_t share = ceil_div<std::uint64_t>(spec.bytes, axes.size());
    for (std::size_t j = 0; j < axes.size(); ++j) {
      std::vector<std::uint8_t> order;
      for (std::size_t i = 0; i < axes.size(); ++i) order.push_back(axes[(i + j) % axes.size()]);
      schedule.parts.push_back(all_to_all_part(torus, chip, order, spec.group_span, share));
    }
    return schedule;
  }
  if (const auto registered = registered_plans().find(spec.algorithm); registered != registered_plans().end()) {
    CollectiveSchedule planned = registered->second(torus, chip, spec, axes);
    planned.group_size = schedule.group_size;
    return planned;
  }
  const bool rs = spec.kind != CollectiveKind::AllGather;
  const bool ag = spec.kind != CollectiveKind::ReduceScatter;
  switch (spec.algorithm) {
    case CollectiveAlgorithm::Ring:
    case CollectiveAlgorithm::BidirRing: {
      SchedulePart part;
      add_ring_passes(part, group_walk(torus, chip, axes, spec.group_span), chip, spec.bytes, spec.algorithm == CollectiveAlgorithm::BidirRing, false,
               "ring", rs, ag);
      schedule.parts.push_back(part);
      break;
    }
    case CollectiveAlgorithm::Torus:
      schedule.parts.push_back(torus_part(torus, chip, spec, axes, spec.bytes));
      break;
    case CollectiveAlgorithm::TorusAllAxes: {
      // Part j starts on the j-th axis, so at any moment the parts keep different axes busy.
      const std::uint64_t share = ceil_div<std::uint64_t>(spec.bytes, axes.size());
      for (std::size_t j = 0; j < axes.size(); ++j) {
        std::vector<std::uint8_t> order;
        for (std::size_t i = 0; i < axes.size(); ++i) order.push_back(axes[(i + j) % axes.size()]);
        schedule.parts.push_back(torus_part(torus, chip, spec, order, share));
      }
      break;
    }
  }
  return schedule;
}

}  // namespace

CollectiveAlgorithm register_collective_algorithm(const std::string& name, const std::string& description, CollectivePlan plan) {
  if (!plan) throw std::invalid_argument("collective algorithm \"" + name + "\" has no plan");
  const CollectiveAlgorithm algorithm = add_collective_algorithm_row(name, description);
  registered_plans()[algorithm] = std::move(plan);
  return algorithm;
}

CollectiveSchedule plan_collective(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec) {
  CollectiveSchedule schedule = plan_ici_collective(torus, chip, spec);
  const bool reduces = spec.kind == CollectiveKind::AllReduce || spec.kind == CollectiveKind::ReduceScatter;
  if (spec.dcn_slices > 1 && reduces && spec.bytes > 0) add_dcn_stage(schedule, spec);
  return schedule;
}

double collective_closed_form_s(const Torus& torus, const CollectiveSchedule& schedule, const HwConfig& hw,
                                const CollectiveSpec& spec) {
  const VectorUnitShape vpu{hw.core.vpu.lanes, hw.core.vpu.sublanes, hw.core.vpu.alus_per_element};
  const Clock clock{hw.core.freq_mhz};
  if (schedule.parts.empty()) return 0;
  // The parts run their DCN passes at about the same time, on the chip's one DCN port.
  std::size_t parts_over_dcn = 0;
  for (const auto& part : schedule.parts)
    parts_over_dcn += std::any_of(part.passes.begin(), part.passes.end(), [](const RingPass& p) { return p.over_dcn(); });
  double slowest_part = 0;
  for (const auto& part : schedule.parts) {
    double t = 0;
    for (const auto& pass : part.passes) {
      const std::size_t p = pass.ring.size();
      std::size_t max_hops = 0;
      for (std::size_t i = 0; i < p; ++i) {
        if (pass.line && i + 1 == p) break;
        max_hops = std::max(max_hops, torus.route(pass.ring[i], pass.ring[(i + 1) % p]).size());
        if (pass.directions() == 2) max_hops = std::max(max_hops, torus.route(pass.ring[(i + 1) % p], pass.ring[i]).size());
      }
      const double latency_s = pass.over_dcn() ? hw.dcn.latency_us * 1e-6 : static_cast<double>(max_hops) * hw.ici.hop_latency_ns * 1e-9;
      const double transfer_s =
          ps_to_s(transfer_ps(pass.shard_bytes, pass.over_dcn() ? hw.dcn.bw_gbps_per_chip / static_cast<double>(parts_over_dcn)
                                                                : hw.ici.payload_bw_gbps()));
      // Both directions' shards arrive together and queue on the one vector unit.
      double add_s = 0;
      if (pass.reduce) {
        const std::uint64_t elements = ceil_div<std::uint64_t>(pass.shard_bytes, dtype_bytes(spec.dtype));
        add_s = pass.directions() * ps_to_s(clock.cycles_to_ps(vector_cycles(vpu, elements, 1.0)));
      }
      // A step's link starts once the step before's first bytes are in and the link is free, and
      // cannot finish before that step's last bytes are in (and added).
      // The vector unit adds one step's shards after another.
      double link_free = 0, head = 0, ready = 0, vpu_free = 0;
      for (std::uint32_t s = 0; s < pass.steps; ++s) {
        const double start = std::max(link_free, head);
        const double end = std::max(start + transfer_s, ready);
        link_free = end;
        head = start + latency_s;
        vpu_free = std::max(head, vpu_free) + add_s;
        ready = std::max(end + latency_s, vpu_free);
      }
      t += ready;
    }
    slowest_part = std::max(slowest_part, t);
  }
  return hw.ici.collective_start_ns * 1e-9 + slowest_part;
}

}  // namespace tpusim
