#include "hw/system.hpp"

#include <fmt/format.h>

namespace tpusim {

Chip::Chip(sc_core::sc_module_name name, std::uint32_t index, const HwConfig& hw, const Torus& torus,
           const Program& program, Host& host, EventSink* sink)
    : sc_module(name),
      hbm("hbm", hw.hbm, index, sink),
      router("router", index, torus, torus.outgoing_links(index)),
      cores("core"),
      collective("collective", index, hw, torus, sink),
      links("link") {
  cores.init(hw.chip.cores, [&](const char* nm, std::size_t c) {
    const CoreSite site{index, static_cast<std::uint32_t>(c)};
    return new TensorCore(nm, hw, site, program, host, sink);
  });
  const auto outgoing = torus.outgoing_links(index);
  links.init(outgoing.size(), [&](const char* nm, std::size_t i) {
    const LinkId id = outgoing[i];
    UnitInfo info;
    const std::string dir = fmt::format("{}{}", "xyz"[id.axis], id.positive ? '+' : '-');
    info.path = fmt::format("chip{}.ici.{}", index, dir);
    info.kind = UnitKind::IciLink;
    info.chip = index;
    info.index = static_cast<std::uint32_t>(i);
    info.label = fmt::format("ici.{} -> chip{}", dir, torus.far_end(id));
    return new IciLink(nm, hw.ici, id, sink, info);
  });
  for (auto& core : cores) {
    core.dma.hbm_socket.bind(hbm.socket);
    core.collective_socket.bind(collective.socket);
  }
  collective.ici_socket.bind(router.in);
  collective.hbm_socket.bind(hbm.socket);
  collective.vpu_socket.bind(cores[0].vpu().socket);
  router.local.bind(collective.arrivals);
  for (std::size_t i = 0; i < links.size(); ++i) router.out[i].bind(links[i].in);
}

System::System(sc_core::sc_module_name name, const HwConfig& hw, const Program& program,
               const InfeedSpec& infeed, EventSink* sink)
    : sc_module(name),
      hw_(hw),
      torus_(hw.slice_dims, Torus::wraps_for(hw.slice_dims, hw.ici)),
      hosts_("host"),
      chips_("chip") {
  const std::uint32_t per_host = hw.host.chips_per_host;
  const std::uint32_t host_count = ceil_div(torus_.chip_count(), per_host);
  hosts_.init(host_count, [&](const char* nm, std::size_t h) {
    std::vector<std::uint32_t> served;
    for (std::uint32_t c = static_cast<std::uint32_t>(h) * per_host;
         c < std::min(torus_.chip_count(), static_cast<std::uint32_t>(h + 1) * per_host); ++c)
      served.push_back(c);
    return new Host(nm, static_cast<std::uint32_t>(h), served, hw, infeed, program.steps, sink);
  });
  chips_.init(torus_.chip_count(), [&](const char* nm, std::size_t c) {
    return new Chip(nm, static_cast<std::uint32_t>(c), hw, torus_, program, hosts_[c / per_host], sink);
  });
  for (auto& chip : chips_)
    for (auto& link : chip.links)
      link.out.bind(chips_[static_cast<std::size_t>(torus_.far_end(link.id()))].router.in);
}

bool System::finished() const {
  for (const auto& chip : chips_)
    for (const auto& core : chip.cores)
      if (!core.finished()) return false;
  return true;
}

std::size_t System::steps_completed() const {
  std::size_t steps = ~std::size_t{0};
  for (const auto& chip : chips_)
    for (const auto& core : chip.cores) steps = std::min(steps, core.step_end_ps().size());
  return steps == ~std::size_t{0} ? 0 : steps;
}

std::vector<Picos> System::step_end_ps() const {
  std::vector<Picos> ends;
  for (const auto& chip : chips_)
    for (const auto& core : chip.cores) {
      const auto& mine = core.step_end_ps();
      if (ends.size() < mine.size()) ends.resize(mine.size(), 0);
      for (std::size_t s = 0; s < mine.size(); ++s) ends[s] = std::max(ends[s], mine[s]);
    }
  return ends;
}

}  // namespace tpusim
