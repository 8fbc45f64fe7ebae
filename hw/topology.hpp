// The chips of a slice as a 1D/2D/3D torus, in plain C++: coordinates, which axes wrap around,
// dimension-ordered routes over directed links, and a ring through every chip.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hw/hw_config.hpp"

namespace tpusim {

// A directed ICI link: leaves `chip` along `axis` in `+` (positive) or `-` direction.
struct LinkId {
  std::uint32_t chip = 0;
  std::uint8_t axis = 0;
  bool positive = true;
  bool operator==(const LinkId& o) const {
    return chip == o.chip && axis == o.axis && positive == o.positive;
  }
};

using Coords = std::array<std::uint32_t, 3>;  // unused axes stay 0

class Torus {
 public:
  Torus(std::vector<std::uint32_t> dims, std::vector<bool> wraps);

  // Wraparound per axis as the generation's rule gives it (axes of size <= 2 never wrap: both
  // neighbours would be the same chip).
  static std::vector<bool> wraps_for(const std::vector<std::uint32_t>& dims, const IciConfig& ici);
  // The slice `hw` describes: its shape, its wraparound and its links that are down.
  static Torus of(const HwConfig& hw);

  // Links that carry nothing: routes go the other way round their ring (one per ring at most, on
  // an axis with wraparound; sim/config checks it).
  void set_down_links(std::vector<LinkId> down) { down_ = std::move(down); }
  bool link_down(const LinkId& link) const;

  std::uint32_t chip_count() const { return chip_count_; }
  std::uint32_t axes() const { return static_cast<std::uint32_t>(dims_.size()); }
  const std::vector<std::uint32_t>& dims() const { return dims_; }
  bool wraps(std::uint32_t axis) const { return wraps_[axis]; }

  Coords coords(std::uint32_t chip) const;
  std::uint32_t chip_at(const Coords& coords) const;
  // The chip at the far end of `link`, or -1 when the link does not exist (mesh edge).
  std::int64_t far_end(const LinkId& link) const;
  bool link_exists(const LinkId& link) const { return far_end(link) >= 0; }
  // Dense index of a link in [0, link_slots()); slots of missing links stay unused.
  std::uint32_t link_index(const LinkId& link) const {
    return (link.chip * axes() + link.axis) * 2 + (link.positive ? 0 : 1);
  }
  std::uint32_t link_slots() const { return chip_count_ * axes() * 2; }

  // Dimension-ordered route (axis 0 first), taking the shorter way round where the axis wraps, and
  // the longer one where the shorter crosses a link that is down.
  std::vector<LinkId> route(std::uint32_t from, std::uint32_t to) const;
  // The first link of route(from, to), without building the route; from != to.
  LinkId first_hop(std::uint32_t from, std::uint32_t to) const;
  // The links that leave `chip`, axis by axis, + before - (on an axis of two chips without
  // wraparound both directions reach the same neighbour through one physical link pair: one
  // direction each way).
  std::vector<LinkId> outgoing_links(std::uint32_t chip) const;
  // Every chip once, consecutive chips one hop apart (a boustrophedon walk), closing in one hop
  // where wraparound or an even number of chips over two or more axes allows it; otherwise (a
  // line, or an odd grid without wraparound) the closing hop from the last chip back is longer.
  std::vector<std::uint32_t> ring_order() const;
  std::string shape() const;

 private:
  // Whether `steps` hops along `axis` from `from` in direction `positive` cross a link that is down.
  bool crosses_down_link(const Coords& from, std::uint8_t axis, bool positive, std::int64_t steps) const;

  std::vector<std::uint32_t> dims_;
  std::vector<bool> wraps_;
  std::vector<LinkId> down_;
  std::uint32_t chip_count_ = 1;
};

// "4x4" -> {4, 4}. Throws InputError-like std::invalid_argument with a reason.
std::vector<std::uint32_t> parse_topology(const std::string& text);
std::string topology_string(const std::vector<std::uint32_t>& dims);

}  // namespace tpusim
