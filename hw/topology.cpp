#include "hw/topology.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace tpusim {

Torus::Torus(std::vector<std::uint32_t> dims, std::vector<bool> wraps)
    : dims_(std::move(dims)), wraps_(std::move(wraps)) {
  for (auto d : dims_) chip_count_ *= d;
}

std::vector<bool> Torus::wraps_for(const std::vector<std::uint32_t>& dims, const IciConfig& ici) {
  std::vector<bool> wraps;
  for (auto d : dims) {
    bool wrap = false;
    switch (ici.wraparound) {
      case Wraparound::Never: wrap = false; break;
      case Wraparound::Always: wrap = true; break;
      case Wraparound::FullAxis: wrap = d == ici.full_axis_chips; break;
      case Wraparound::MultipleOf4: wrap = d % 4 == 0; break;
    }
    wraps.push_back(wrap && d > 2);
  }
  return wraps;
}

Coords Torus::coords(std::uint32_t chip) const {
  Coords c{};
  for (std::size_t a = 0; a < dims_.size(); ++a) {
    c[a] = chip % dims_[a];
    chip /= dims_[a];
  }
  return c;
}

std::uint32_t Torus::chip_at(const Coords& coords) const {
  std::uint32_t chip = 0;
  for (std::size_t a = dims_.size(); a-- > 0;) chip = chip * dims_[a] + coords[a];
  return chip;
}

std::int64_t Torus::far_end(const LinkId& link) const {
  auto c = coords(link.chip);
  const std::uint32_t d = dims_[link.axis];
  std::uint32_t& x = c[link.axis];
  if (link.positive) {
    if (x + 1 < d) ++x;
    else if (wraps_[link.axis]) x = 0;
    else return -1;
  } else {
    if (x > 0) --x;
    else if (wraps_[link.axis]) x = d - 1;
    else return -1;
  }
  return chip_at(c);
}

namespace {

// Direction and hop count along one axis: the direct way, or round the wraparound when shorter.
// Halfway round an axis that wraps, the positive way: a choice that depends on the distance
// alone, not on where the route starts, so translating a route along the axis keeps it a route
// (hw/symmetry.hpp relies on it).
std::pair<bool, std::int64_t> axis_move(std::int64_t from, std::int64_t to, std::int64_t d, bool wraps) {
  if (!wraps) return {to > from, std::llabs(to - from)};
  const std::int64_t forward = (to - from + d) % d;
  const bool positive = forward <= d - forward;
  return {positive, positive ? forward : d - forward};
}

}  // namespace

std::vector<LinkId> Torus::route(std::uint32_t from, std::uint32_t to) const {
  std::vector<LinkId> hops;
  std::uint32_t chip = from;
  while (chip != to) {
    hops.push_back(first_hop(chip, to));
    chip = static_cast<std::uint32_t>(far_end(hops.back()));
  }
  return hops;
}

std::vector<LinkId> Torus::outgoing_links(std::uint32_t chip) const {
  std::vector<LinkId> links;
  for (std::uint8_t axis = 0; axis < axes(); ++axis)
    for (bool positive : {true, false}) {
      const LinkId id{chip, axis, positive};
      if (link_exists(id)) links.push_back(id);
    }
  return links;
}

LinkId Torus::first_hop(std::uint32_t from, std::uint32_t to) const {
  const Coords cur = coords(from), dst = coords(to);
  for (std::uint8_t a = 0; a < dims_.size(); ++a) {
    const auto [positive, steps] = axis_move(cur[a], dst[a], dims_[a], wraps_[a]);
    if (steps == 0) continue;
    // Round the other way: every chip on the detour finds the shorter way blocked too, so the
    // hop-by-hop decisions agree.
    if (!down_.empty() && crosses_down_link(cur, a, positive, steps)) return {from, a, !positive};
    return {from, a, positive};
  }
  return {from, 0, true};  // from == to: no hop
}

bool Torus::crosses_down_link(const Coords& from, std::uint8_t axis, bool positive, std::int64_t steps) const {
  const std::int64_t d = dims_[axis];
  for (const LinkId& link : down_) {
    if (link.axis != axis || link.positive != positive) continue;
    const Coords at = coords(link.chip);
    bool same_line = true;
    for (std::size_t a = 0; a < dims_.size(); ++a) same_line = same_line && (a == axis || at[a] == from[a]);
    if (!same_line) continue;
    // How many hops from `from` the link is taken, going this way.
    const std::int64_t here = from[axis], there = at[axis];
    const std::int64_t offset = positive ? (there - here + d) % d : (here - there + d) % d;
    if (offset < steps) return true;
  }
  return false;
}

bool Torus::link_down(const LinkId& link) const {
  for (const LinkId& l : down_)
    if (l == link) return true;
  return false;
}

Torus Torus::of(const HwConfig& hw) {
  Torus torus(hw.slice_dims, wraps_for(hw.slice_dims, hw.ici));
  std::vector<LinkId> down;
  for (const SlowLink& l : hw.slow_links)
    if (l.bw_scale == 0) down.push_back({l.chip, l.axis, l.positive});
  torus.set_down_links(std::move(down));
  return torus;
}

std::vector<std::uint32_t> Torus::ring_order() const {
  // Reflected mixed-radix Gray code: each step changes one coordinate by one.
  std::vector<std::uint32_t> order;
  order.reserve(chip_count_);
  Coords c{};
  std::vector<int> dir(dims_.size(), 1);
  for (std::uint32_t i = 0; i < chip_count_; ++i) {
    order.push_back(chip_at(c));
    for (std::size_t a = 0; a < dims_.size(); ++a) {
      const std::int64_t next = static_cast<std::int64_t>(c[a]) + dir[a];
      if (next >= 0 && next < static_cast<std::int64_t>(dims_[a])) {
        c[a] = static_cast<std::uint32_t>(next);
        break;
      }
      dir[a] = -dir[a];
    }
  }
  if (chip_count_ < 3 || route(order.back(), order.front()).size() <= 1) return order;
  // Without wraparound the walk ends far from where it began, and a ring through it pays that
  // walk back on every step. A grid of an even number of chips over two or more axes has a
  // closed walk: view it as (first axis of more than one chip) x (the Gray walk of the others),
  // snake through all but one column of that plane and come back along the one left out.
  std::size_t first = 0;
  while (first < dims_.size() && dims_[first] == 1) ++first;
  if (first == dims_.size() || chip_count_ % 2 != 0 || dims_[first] == chip_count_) return order;
  const std::uint32_t width = dims_[first];  // columns: the first axis
  const std::uint32_t height = chip_count_ / width;  // rows: the Gray walk of the other axes
  std::vector<std::uint32_t> rows;  // the chips of column 0, in walk order
  for (std::uint32_t chip : order)
    if (coords(chip)[first] == 0) rows.push_back(chip);
  auto at = [&](std::uint32_t row, std::uint32_t col) {
    Coords rc = coords(rows[row]);
    rc[first] = col;
    return chip_at(rc);
  };
  std::vector<std::uint32_t> cycle;
  cycle.reserve(chip_count_);
  if (height % 2 == 0) {  // snake over the rows in columns 1.., back up column 0
    for (std::uint32_t r = 0; r < height; ++r)
      for (std::uint32_t k = 1; k < width; ++k) cycle.push_back(at(r, r % 2 == 0 ? k : width - k));
    for (std::uint32_t r = height; r-- > 0;) cycle.push_back(at(r, 0));
  } else {  // width is even: snake over the columns in rows 1.., back along row 0
    for (std::uint32_t col = 0; col < width; ++col)
      for (std::uint32_t k = 1; k < height; ++k) cycle.push_back(at(col % 2 == 0 ? k : height - k, col));
    for (std::uint32_t col = width; col-- > 0;) cycle.push_back(at(0, col));
  }
  return cycle;
}

std::string Torus::shape() const { return topology_string(dims_); }

std::vector<std::uint32_t> parse_topology(const std::string& text) {
  std::vector<std::uint32_t> dims;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t x = text.find('x', pos);
    const std::string part = text.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument(fmt::format(
          "expected a torus shape like \"4x4\" or \"4x4x4\" (1 to 3 positive sizes), got \"{}\"", text));
    const auto d = std::stoul(part);
    if (d == 0) throw std::invalid_argument(fmt::format("axis sizes must be at least 1, got \"{}\"", text));
    dims.push_back(static_cast<std::uint32_t>(d));
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (dims.empty() || dims.size() > 3)
    throw std::invalid_argument(fmt::format(
        "expected a torus shape like \"4x4\" or \"4x4x4\" (1 to 3 positive sizes), got \"{}\"", text));
  return dims;
}

std::string topology_string(const std::vector<std::uint32_t>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? "x" : "") + std::to_string(dims[i]);
  return s;
}

}  // namespace tpusim
