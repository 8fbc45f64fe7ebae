#include "hw/symmetry.hpp"

#include <algorithm>

#include <fmt/format.h>


namespace tpusim {
namespace {

SimulatedSlice every_chip(const Torus& torus, std::string because) {
  SimulatedSlice s;
  s.box = torus.dims();
  s.mirrored.assign(torus.axes(), false);
  s.all_chips_because = std::move(because);
  return s;
}

}  // namespace

std::uint32_t SimulatedSlice::chip_count() const {
  std::uint32_t n = 1;
  for (auto b : box) n *= b;
  return n;
}

bool SimulatedSlice::simulates(const Torus& torus, std::uint32_t chip) const {
  const Coords c = torus.coords(chip);
  for (std::size_t a = 0; a < box.size(); ++a)
    if (c[a] >= box[a]) return false;
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
  for (std::size_t a = 0; a < box.size(); ++a) c[a] = mirrored[a] ? 0 : c[a] % box[a];
  return torus.chip_at(c);
}

std::uint32_t SimulatedSlice::map_destination(const Torus& torus, std::uint32_t far_end, std::uint32_t dest) const {
  const Coords far = torus.coords(far_end);
  Coords d = torus.coords(dest);
  for (std::size_t a = 0; a < box.size(); ++a) {
    if (far[a] < box[a]) continue;
    const std::uint32_t n = torus.dims()[a];
    if (mirrored[a]) d[a] = n - 1 - d[a];
    else d[a] = (d[a] + n - (far[a] - far[a] % box[a])) % n;
  }
  return torus.chip_at(d);
}

SimulatedSlice plan_simulated_slice(const Torus& torus, const HwConfig& hw, const Program& program, bool fold) {
  if (!fold) return every_chip(torus, "asked for (--all-chips)");
  if (!hw.faults.empty()) return every_chip(torus, "a fault is injected (hw.faults)");
  if (!hw.slow_chips.empty()) return every_chip(torus, "a slow chip (hw.slow_chips) makes the chips differ");
  if (!hw.slow_links.empty()) return every_chip(torus, "a slow link (hw.slow_links) makes the chips differ");
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
      if ((op.collective.group_axes >> a & 1u) && torus.dims()[a] > 1) ++spanned;
    // One ring snaking through several axes is not invariant under translation along them.
    if (spanned > 1) return every_chip(torus, "a ring collective snakes through several torus axes");
  }

  // A host serves consecutive chips, which must form a box that the symmetries map onto
  // another host's box: translations along an axis go by whole host extents.
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

  SimulatedSlice s = every_chip(torus, "no torus axis is symmetric (no wraparound, and longer than two chips)");
  for (std::uint32_t a = 0; a < torus.axes(); ++a) {
    const std::uint32_t n = torus.dims()[a];
    if (torus.wraps(a) && host_box[a] < n) {
      s.box[a] = host_box[a];
    } else if (n == 2 && !torus.wraps(a) && host_box[a] == 1) {
      s.box[a] = 1;
      s.mirrored[a] = true;
    }
  }
  s.multiplicity = torus.chip_count() / s.chip_count();
  if (s.folded()) s.all_chips_because.clear();
  return s;
}

}  // namespace tpusim
