#include "hw/symmetry.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/collective.hpp"

namespace tpusim {
namespace {

// Fills in each coordinate's class from the axis's maps.
void classify(SimulatedSlice::Axis& axis, std::uint32_t n) {
  axis.rep.assign(n, 0);
  axis.to_rep.assign(n, 0);
  axis.class_size.assign(n, 0);
  std::vector<bool> seen(n);
  for (std::uint32_t c = 0; c < n; ++c) {
    std::uint32_t best = n;
    std::fill(seen.begin(), seen.end(), false);
    for (std::uint32_t i = 0; i < axis.maps.size(); ++i) {
      const std::uint32_t image = axis.maps[i].apply(c, n);
      if (image < best) {
        best = image;
        axis.to_rep[c] = i;
      }
      if (!seen[image]) ++axis.class_size[c];
      seen[image] = true;
    }
    axis.rep[c] = best;
  }
}

SimulatedSlice every_chip(const Torus& torus, std::string because) {
  SimulatedSlice s;
  s.axes.resize(torus.axes());
  for (std::uint32_t a = 0; a < torus.axes(); ++a) {
    s.axes[a].maps = {AxisMap{}};
    classify(s.axes[a], torus.dims()[a]);
  }
  s.all_chips_because = std::move(because);
  return s;
}

// Why a reflection of `axis` (of more than two chips) does not map the program's collectives
// onto themselves, or nothing when it does: each ring along the axis must run both ways with
// equal halves, and reach its next chip in one hop (the closing hop of a ring over a line would
// cross the whole line, on a route that a reflection does not map onto itself link by link).
std::string reflection_breaker(const Torus& torus, const Program& program, std::uint32_t axis) {
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::Collective || !(op.collective.group_axes >> axis & 1u)) continue;
    const CollectiveSpec& spec = op.collective;
    const bool torus_family = spec.algorithm == CollectiveAlgorithm::Torus || spec.algorithm == CollectiveAlgorithm::TorusAllAxes;
    if (spec.kind == CollectiveKind::AllToAll || (torus_family && spec.kind != CollectiveKind::Permute)) {
      if (spec.kind == CollectiveKind::AllToAll && !torus.wraps(axis))
        return "an all-to-all's ring closes across a line";
      continue;
    }
    if (spec.algorithm != CollectiveAlgorithm::BidirRing)
      return fmt::format("{} runs one way round its ring", collective_algorithm_name(spec.algorithm));
    if (!torus.wraps(axis)) return "a ring's closing hop crosses a line";
  }
  return {};
}

// Whether `map` of axis `axis` alone takes every slow chip and slow link to one just like it.
bool keeps_slow_parts(const Torus& torus, const HwConfig& hw, std::uint32_t axis, const AxisMap& map) {
  const auto image = [&](std::uint32_t chip) {
    Coords c = torus.coords(chip);
    c[axis] = map.apply(c[axis], torus.dims()[axis]);
    return torus.chip_at(c);
  };
  for (const SlowChip& s : hw.slow_chips) {
    const SlowChip* other = hw.slow_chip(image(s.chip));
    if (other == nullptr || other->core_freq_scale != s.core_freq_scale || other->hbm_bw_scale != s.hbm_bw_scale) return false;
  }
  for (const SlowLink& l : hw.slow_links) {
    const std::uint32_t chip = image(l.chip);
    const bool positive = l.axis == axis && map.reflects ? !l.positive : l.positive;
    const bool kept = std::any_of(hw.slow_links.begin(), hw.slow_links.end(), [&](const SlowLink& o) {
      return o.chip == chip && o.axis == l.axis && o.positive == positive && o.bw_scale == l.bw_scale;
    });
    if (!kept) return false;
  }
  return true;
}

}  // namespace

bool SimulatedSlice::folded() const {
  return std::any_of(axes.begin(), axes.end(), [](const Axis& a) { return a.maps.size() > 1; });
}

std::uint32_t SimulatedSlice::chip_count() const {
  std::uint32_t n = 1;
  for (const Axis& a : axes) {
    std::uint32_t reps = 0;
    for (std::uint32_t c = 0; c < a.rep.size(); ++c) reps += a.rep[c] == c ? 1 : 0;
    n *= reps;
  }
  return n;
}

bool SimulatedSlice::simulates(const Torus& torus, std::uint32_t chip) const {
  const Coords c = torus.coords(chip);
  for (std::size_t a = 0; a < axes.size(); ++a)
    if (axes[a].rep[c[a]] != c[a]) return false;
  return true;
}

std::vector<std::uint32_t> SimulatedSlice::chips(const Torus& torus) const {
  std::vector<std::uint32_t> out;
  out.reserve(chip_count());
  for (std::uint32_t c = 0; c < torus.chip_count(); ++c)
    if (simulates(torus, c)) out.push_back(c);
  return out;
}

std::uint32_t SimulatedSlice::representative(const Torus& torus, std::uint32_t chip) const {
  Coords c = torus.coords(chip);
  for (std::size_t a = 0; a < axes.size(); ++a) c[a] = axes[a].rep[c[a]];
  return torus.chip_at(c);
}

std::uint64_t SimulatedSlice::stands_for(const Torus& torus, std::uint32_t chip) const {
  const Coords c = torus.coords(chip);
  std::uint64_t n = 1;
  for (std::size_t a = 0; a < axes.size(); ++a) n *= axes[a].class_size[c[a]];
  return n;
}

std::uint64_t SimulatedSlice::largest_class() const {
  std::uint64_t n = 1;
  for (const Axis& a : axes) n *= a.class_size.empty() ? 1 : *std::max_element(a.class_size.begin(), a.class_size.end());
  return n;
}

std::vector<SimulatedSlice::StandIn> SimulatedSlice::stand_ins(const Torus& torus, std::uint32_t chip) const {
  const auto link_to = [&](std::uint32_t from, std::uint8_t axis, std::uint32_t to) {
    for (const LinkId& l : torus.outgoing_links(from))
      if (l.axis == axis && torus.far_end(l) == static_cast<std::int64_t>(to)) return l;
    throw std::logic_error("a symmetry maps a link onto no link");
  };
  std::vector<StandIn> out;
  for (const LinkId& back : torus.outgoing_links(chip)) {
    const auto sender = static_cast<std::uint32_t>(torus.far_end(back));
    if (simulates(torus, sender)) continue;
    // The symmetry that takes the sender to its representative takes the link into `chip` to a
    // link from the representative.
    const Coords s = torus.coords(sender);
    Coords image = torus.coords(chip);
    for (std::size_t a = 0; a < axes.size(); ++a) image[a] = axes[a].maps[axes[a].to_rep[s[a]]].apply(image[a], torus.dims()[a]);
    out.push_back({sender, link_to(representative(torus, sender), back.axis, torus.chip_at(image))});
  }
  return out;
}

std::uint32_t SimulatedSlice::from_representative(const Torus& torus, std::uint32_t sender, std::uint32_t dest) const {
  const Coords s = torus.coords(sender);
  Coords d = torus.coords(dest);
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const std::uint32_t n = torus.dims()[a];
    d[a] = axes[a].maps[axes[a].to_rep[s[a]]].inverse(n).apply(d[a], n);
  }
  return torus.chip_at(d);
}

bool SimulatedSlice::reverses(const Torus& torus, std::uint32_t sender, std::uint32_t axis) const {
  const Axis& a = axes[axis];
  return torus.dims()[axis] > 2 && a.maps[a.to_rep[torus.coords(sender)[axis]]].reflects;
}

SimulatedSlice plan_simulated_slice(const Torus& torus, const HwConfig& hw, const Program& program, bool fold) {
  if (!fold) return every_chip(torus, "asked for (--all-chips)");
  if (!hw.faults.empty()) return every_chip(torus, "a fault is injected (hw.faults)");
  // A link that is down sends its ring's pieces the long way round, over many hops, where they
  // queue behind one another in the order they were sent (hw/ici.hpp's dispatch): a reflection of
  // its axis would not keep that order. Its axis keeps every chip (nothing else maps the link
  // onto itself), and the other axes fold by reflections through it.
  std::vector<bool> has_down_link(torus.axes(), false);
  for (const SlowLink& l : hw.slow_links)
    if (l.bw_scale == 0) has_down_link[l.axis] = true;
  bool infeed = false;
  for (const Op& op : program.ops) {
    if (op.kind == OpKind::Infeed) infeed = true;
    if (op.kind != OpKind::Collective) continue;
    if (collective_algorithm_is_registered(op.collective.algorithm) && op.collective.kind != CollectiveKind::Permute &&
        op.collective.kind != CollectiveKind::AllToAll)
      return every_chip(torus, fmt::format("collective algorithm {} is a program's own", collective_algorithm_name(op.collective.algorithm)));
    const bool ring = collective_algorithm_is_ring(op.collective.algorithm) ||
                      op.collective.kind == CollectiveKind::Permute;  // a permute is one step of a ring
    if (!ring) continue;
    std::uint32_t spanned = 0;
    for (std::uint32_t a = 0; a < torus.axes(); ++a)
      if ((op.collective.group_axes >> a & 1u) && group_extent(torus, op.collective.group_span, a) > 1) ++spanned;
    // One ring snaking through several axes is not invariant under translation along them.
    if (spanned > 1) return every_chip(torus, "a ring collective snakes through several torus axes");
  }

  // A host serves consecutive chips, which must form a box that the symmetries map onto
  // another host's box, its chips in the same order: translations along an axis go by whole
  // host extents, and an axis a host spans is not reflected.
  std::vector<std::uint32_t> host_box(torus.axes(), 1);
  const std::uint32_t per_host = hw.host.chips_per_host;
  if (infeed && torus.chip_count() > per_host) {
    if (torus.chip_count() % per_host != 0) return every_chip(torus, "the hosts serve different numbers of chips");
    std::uint32_t left = per_host;
    for (std::uint32_t a = 0; a < torus.axes() && left > 1; ++a) {
      const std::uint32_t n = torus.dims()[a];
      if (left % n == 0) {
        host_box[a] = n;
        left /= n;
      } else if (n % left == 0) {
        host_box[a] = left;
        left = 1;
      } else {
        return every_chip(torus, "a host's chips do not form a box of the torus");
      }
    }
  } else if (infeed) {
    host_box = torus.dims();  // one host serves the slice
  }

  // A group's block of an axis (a batch norm's tray) is a box of its own, mapped onto another
  // like a host's.
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::Collective) continue;
    for (std::uint32_t a = 0; a < torus.axes(); ++a)
      if ((op.collective.group_axes >> a & 1u) && op.collective.group_span[a] > 0)
        host_box[a] = std::lcm(host_box[a], op.collective.group_span[a]);
  }

  SimulatedSlice s = every_chip(torus, "");
  for (std::uint32_t a = 0; a < torus.axes(); ++a) {
    const std::uint32_t n = torus.dims()[a];
    SimulatedSlice::Axis& axis = s.axes[a];
    for (std::uint32_t offset = 1; offset < n && torus.wraps(a); ++offset) {
      const AxisMap translation{false, offset};
      if (offset % host_box[a] == 0 && keeps_slow_parts(torus, hw, a, translation)) axis.maps.push_back(translation);
    }
    if (host_box[a] == 1 && !has_down_link[a] && (n <= 2 || reflection_breaker(torus, program, a).empty()))
      for (std::uint32_t offset = torus.wraps(a) ? 0 : n - 1; offset < n && n > 1; ++offset) {
        const AxisMap reflection{true, offset};
        if (keeps_slow_parts(torus, hw, a, reflection)) axis.maps.push_back(reflection);
      }
    classify(axis, n);
  }
  if (!s.folded())
    s.all_chips_because = hw.slow_chips.empty() && hw.slow_links.empty()
                              ? "no symmetry of the torus maps its hosts and its rings onto themselves"
                              : "no symmetry of the torus maps its hosts, its rings and its slow chips and links onto themselves";
  return s;
}

}  // namespace tpusim
