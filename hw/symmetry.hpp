// Which chips a run simulates, in plain C++.
//
// Synchronous data parallelism on a homogeneous slice is symmetric: every chip runs the same
// program on the same hardware. A symmetry of the torus that maps its rings, its routes, its
// hosts and every part that differs (a slow chip, a slow link) onto themselves relates chips
// that do the same work at the same times: a translation along an axis with wraparound (by whole
// hosts), and a reflection of an axis (through a chip or between two), where the program's rings
// run both ways alike. The symmetries used are those of one axis at a time and their products;
// a class of chips is then a product of classes of coordinates, and its representative, the chip
// simulated, has the smallest coordinate of its class on every axis. A link into a simulated chip
// from one that is not carries what the symmetry taking the sender to its representative maps
// onto a link of the representative (`stand_ins`): that link delivers to the simulated chip too,
// what it carries mapped back (its destination and, under a reflection of the link's axis, the
// ring direction it travels in). A link to a chip not simulated delivers only such copies: under
// a translation it stands in for the link into the box from the other side; on a mirror it may
// stand in for none (its far end's representative hears it from a link of its own).
//
//   SimulatedSlice s = plan_simulated_slice(torus, hw, program, /*fold=*/true);
//   // v4 16x16x16, 4 chips per host: the 4 chips of one host stand for 1024 each;
//   // with chip 0 slow, y and z fold by reflection through it: 1296 chips, classes of 1 to 4
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "hw/topology.hpp"

namespace tpusim {

// A symmetry of one torus axis of n chips: c -> c + offset, or (a reflection) offset - c, mod n.
struct AxisMap {
  bool reflects = false;
  std::uint32_t offset = 0;
  std::uint32_t apply(std::uint32_t c, std::uint32_t n) const { return reflects ? (offset + n - c) % n : (c + offset) % n; }
  AxisMap inverse(std::uint32_t n) const { return reflects ? *this : AxisMap{false, (n - offset) % n}; }
};

struct SimulatedSlice {
  // Per axis: the symmetries of its coordinates (a group, the identity first) and, per coordinate,
  // its class's smallest coordinate, the symmetry (an index in `maps`) that takes it there, and
  // the size of its class.
  struct Axis {
    std::vector<AxisMap> maps;
    std::vector<std::uint32_t> rep, to_rep, class_size;
  };
  std::vector<Axis> axes;
  std::string all_chips_because;  // why every chip is simulated (empty when folded)

  bool folded() const;
  std::uint32_t chip_count() const;
  bool simulates(const Torus& torus, std::uint32_t chip) const;
  // The simulated chips' ids in the full slice, ascending.
  std::vector<std::uint32_t> chips(const Torus& torus) const;
  // The simulated chip that stands for `chip` (the smallest id of its class).
  std::uint32_t representative(const Torus& torus, std::uint32_t chip) const;
  // How many chips of the slice the simulated `chip` stands for (itself included).
  std::uint64_t stands_for(const Torus& torus, std::uint32_t chip) const;
  // The most chips one simulated chip stands for.
  std::uint64_t largest_class() const;
  // A link into the simulated `chip` from a chip not simulated, `sender`, carries what a symmetry
  // maps onto `link`, a link of the sender's representative: that link delivers to `chip` too.
  struct StandIn {
    std::uint32_t sender;
    LinkId link;
  };
  std::vector<StandIn> stand_ins(const Torus& torus, std::uint32_t chip) const;
  // `dest` under the symmetry that takes `sender`'s representative back to `sender`.
  std::uint32_t from_representative(const Torus& torus, std::uint32_t sender, std::uint32_t dest) const;
  // Whether that symmetry reverses the rings along `axis` (a reflection of an axis of more than
  // two chips: what went to the next chip goes to the previous one).
  bool reverses(const Torus& torus, std::uint32_t sender, std::uint32_t axis) const;
};

// With `fold`, one representative per class of chips that `program` makes equivalent on `hw`'s
// slice; every chip without it, or when nothing but the identity maps everything onto itself
// (all_chips_because says what breaks it).
//
// Exact: symmetric chips of a full simulation do the same thing at the same picosecond, since
// collective units book ring work in a canonical order that does not tell one ring direction
// from the other and every host's tasks run in the order of their ranks (hw/wake_queue.hpp), so
// one chip's figures are its whole class's.
SimulatedSlice plan_simulated_slice(const Torus& torus, const HwConfig& hw, const Program& program, bool fold);

}  // namespace tpusim
