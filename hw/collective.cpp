#include "hw/collective.hpp"

#include <algorithm>

#include "hw/systolic_timing.hpp"
#include "hw/units.hpp"

namespace tpusim {
namespace {

std::vector<std::uint8_t> group_axes_of(const Torus& torus, std::uint32_t mask) {
  std::vector<std::uint8_t> axes;
  for (std::uint8_t a = 0; a < torus.axes(); ++a)
    if ((mask >> a & 1u) && torus.dims()[a] > 1) axes.push_back(a);
  return axes;
}

// The chips of `chip`'s group along `axes`, in a walk where consecutive chips are neighbours.
std::vector<std::uint32_t> snake(const Torus& torus, std::uint32_t chip, const std::vector<std::uint8_t>& axes) {
  std::vector<std::uint32_t> sub_dims;
  for (auto a : axes) sub_dims.push_back(torus.dims()[a]);
  const Torus sub(sub_dims, std::vector<bool>(sub_dims.size(), false));
  std::vector<std::uint32_t> ring;
  const auto base = torus.coords(chip);
  for (std::uint32_t s : sub.ring_order()) {
    Coords c = base;
    const auto sc = sub.coords(s);
    for (std::size_t i = 0; i < axes.size(); ++i) c[axes[i]] = sc[i];
    ring.push_back(torus.chip_at(c));
  }
  return ring;
}

std::uint32_t position_of(const std::vector<std::uint32_t>& ring, std::uint32_t chip) {
  return static_cast<std::uint32_t>(std::find(ring.begin(), ring.end(), chip) - ring.begin());
}

std::string axis_label(std::uint8_t a) { return std::string(1, "xyz"[a]); }

// Passes of one ring collective of `bytes` (the buffer each chip holds before a reduce-scatter).
void add_ring(SchedulePart& part, const CollectiveSpec& spec, std::vector<std::uint32_t> ring, std::uint32_t chip,
              std::uint64_t bytes, bool bidirectional, const std::string& where, bool reduce_scatter, bool all_gather) {
  const auto p = static_cast<std::uint64_t>(ring.size());
  bidirectional = bidirectional && p > 2;  // two chips have one link pair: both ways are the same ring
  const std::uint64_t per_direction = bidirectional ? ceil_div<std::uint64_t>(bytes, 2) : bytes;
  RingPass pass;
  pass.position = position_of(ring, chip);
  pass.ring = std::move(ring);
  pass.shard_bytes = ceil_div<std::uint64_t>(per_direction, p);
  pass.bidirectional = bidirectional;
  pass.steps = static_cast<std::uint32_t>(p - 1);
  (void)spec;
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

// Reduce-scatter along each axis in order, then all-gather back in reverse order. An axis with
// wraparound runs two rings, one each way; an axis without runs one, since a second ring's
// closing hop would cross every link of the line against the first ring's traffic.
SchedulePart torus_part(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec,
                        const std::vector<std::uint8_t>& axes, std::uint64_t bytes) {
  SchedulePart part;
  std::vector<std::uint64_t> sizes;  // the buffer entering each axis's reduce-scatter
  std::uint64_t n = bytes;
  for (auto a : axes) {
    sizes.push_back(n);
    n = ceil_div<std::uint64_t>(n, torus.dims()[a]);
  }
  const bool rs = spec.kind != CollectiveKind::AllGather;
  const bool ag = spec.kind != CollectiveKind::ReduceScatter;
  if (rs)
    for (std::size_t i = 0; i < axes.size(); ++i)
      add_ring(part, spec, snake(torus, chip, {axes[i]}), chip, sizes[i], torus.wraps(axes[i]), axis_label(axes[i]), true,
               false);
  if (ag)
    for (std::size_t i = axes.size(); i-- > 0;)
      add_ring(part, spec, snake(torus, chip, {axes[i]}), chip, sizes[i], torus.wraps(axes[i]), axis_label(axes[i]), false,
               true);
  return part;
}

}  // namespace

std::uint32_t group_size(const Torus& torus, std::uint32_t mask) {
  std::uint32_t p = 1;
  for (auto a : group_axes_of(torus, mask)) p *= torus.dims()[a];
  return p;
}

CollectiveSchedule plan_collective(const Torus& torus, std::uint32_t chip, const CollectiveSpec& spec) {
  CollectiveSchedule schedule;
  const auto axes = group_axes_of(torus, spec.group_axes);
  schedule.group_size = group_size(torus, spec.group_axes);
  if (schedule.group_size <= 1 || spec.bytes == 0) return schedule;
  if (spec.kind == CollectiveKind::Permute) {  // one step of a ring through the group, whatever the algorithm
    RingPass pass;
    pass.ring = snake(torus, chip, axes);
    pass.position = position_of(pass.ring, chip);
    pass.reduce = false;
    pass.shard_bytes = spec.bytes;
    pass.steps = 1;
    pass.label = "permute";
    schedule.parts.push_back(SchedulePart{{pass}});
    return schedule;
  }
  const bool rs = spec.kind != CollectiveKind::AllGather;
  const bool ag = spec.kind != CollectiveKind::ReduceScatter;
  switch (spec.algorithm) {
    case CollectiveAlgorithm::Ring:
    case CollectiveAlgorithm::BidirRing: {
      SchedulePart part;
      add_ring(part, spec, snake(torus, chip, axes), chip, spec.bytes, spec.algorithm == CollectiveAlgorithm::BidirRing,
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

double collective_closed_form_s(const Torus& torus, const CollectiveSchedule& schedule, const HwConfig& hw,
                                const CollectiveSpec& spec) {
  const VectorUnitShape vpu{hw.core.vpu.lanes, hw.core.vpu.sublanes, hw.core.vpu.alus_per_element};
  const Clock clock{hw.core.freq_mhz};
  if (schedule.parts.empty()) return 0;
  double slowest_part = 0;
  for (const auto& part : schedule.parts) {
    double t = 0;
    for (const auto& pass : part.passes) {
      const std::size_t p = pass.ring.size();
      std::size_t max_hops = 0;
      for (std::size_t i = 0; i < p; ++i) {
        max_hops = std::max(max_hops, torus.route(pass.ring[i], pass.ring[(i + 1) % p]).size());
        if (pass.bidirectional) max_hops = std::max(max_hops, torus.route(pass.ring[(i + 1) % p], pass.ring[i]).size());
      }
      double step = static_cast<double>(max_hops) * hw.ici.hop_latency_ns * 1e-9 +
                    ps_to_s(transfer_ps(pass.shard_bytes, hw.ici.payload_bw_gbps()));
      if (pass.reduce) {
        // Both directions' last pieces arrive together and queue on the one vector unit.
        const std::uint64_t piece = ring_piece_bytes(pass, spec.chunk_bytes);
        const std::uint64_t elements = ceil_div<std::uint64_t>(piece, dtype_bytes(spec.dtype));
        const std::uint64_t one = vector_cycles(vpu, elements, 1.0);
        step += ps_to_s(clock.cycles_to_ps(pass.bidirectional ? 2 * one : one));
      }
      t += static_cast<double>(pass.steps) * step;
    }
    slowest_part = std::max(slowest_part, t);
  }
  return hw.ici.collective_start_ns * 1e-9 + slowest_part;
}

}  // namespace tpusim
