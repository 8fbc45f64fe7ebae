#include "hw/system.hpp"

#include <fmt/format.h>

namespace tpusim {

Chip::Chip(sc_core::sc_module_name name, std::uint32_t index, const HwConfig& hw, const Torus& torus,
           const Program& program, Host& host, EventSink* sink)
    : sc_module(name),
      router("router", index, torus, torus.outgoing_links(index)),
      cores("core"),
      collective("collective", index, hw, torus, host.wakes, host.slot(index), sink),
      links("link"),
      memory_(make_chip_memory(hw.hbm.model, "hbm", MemorySite{hw, index, sink})),
      id_(index) {
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
    return new IciLink(nm, hw.link_of(index, id.axis, id.positive), id, sink, info);
  });
  for (auto& core : cores) {
    core.dma.hbm_socket.bind(memory_->socket);
    core.collective_socket.bind(collective.socket);
  }
  collective.ici_socket.bind(router.in);
  collective.hbm_socket.bind(memory_->socket);
  collective.vpu_socket.bind(cores[0].vpu().socket);
  router.local.bind(collective.arrivals);
  for (std::size_t i = 0; i < links.size(); ++i) router.out[i].bind(links[i].in);
}

System::System(sc_core::sc_module_name name, const HwConfig& hw, const Program& program,
               const InfeedSpec& infeed, EventSink* sink, SimulatedSlice simulated)
    : sc_module(name),
      torus_(Torus::of(hw)),
      simulated_(std::move(simulated)),
      index_of_chip_(torus_.chip_count(), -1),
      dispatch_("ici_dispatch"),
      hosts_("host"),
      chips_("chip") {
  const std::vector<std::uint32_t> ids = simulated_.chips(torus_);
  for (std::size_t i = 0; i < ids.size(); ++i) index_of_chip_[ids[i]] = static_cast<std::int32_t>(i);
  // A host serves consecutive chips; the simulated chips fill whole hosts (hw/symmetry.cpp).
  const std::uint32_t per_host = hw.host.chips_per_host;
  std::vector<std::vector<std::uint32_t>> served;
  std::vector<std::uint32_t> host_ids;
  std::vector<std::size_t> host_of_index;  // per simulated chip: its host's index in hosts_
  for (std::uint32_t chip : ids) {
    if (host_ids.empty() || host_ids.back() != chip / per_host) {
      host_ids.push_back(chip / per_host);
      served.emplace_back();
    }
    served.back().push_back(chip);
    host_of_index.push_back(host_ids.size() - 1);
  }
  hosts_.init(host_ids.size(), [&](const char* nm, std::size_t h) {
    return new Host(nm, host_ids[h], served[h], hw, infeed, program.steps, sink);
  });
  chips_.init(ids.size(), [&](const char* nm, std::size_t i) {
    return new Chip(nm, ids[i], hw, torus_, program, hosts_[host_of_index[i]], sink);
  });
  for (auto& chip : chips_) chip.collective.send_through(dispatch_);
  const auto chip_of = [this](std::uint32_t id) -> Chip& { return chips_[static_cast<std::size_t>(index_of_chip_[id])]; };
  for (auto& chip : chips_)
    for (auto& link : chip.links) {
      const auto far_end = static_cast<std::uint32_t>(torus_.far_end(link.id()));
      // In a folded run the deliveries below replace `out`, which must still be bound.
      link.out.bind(chip_of(simulated_.representative(torus_, far_end)).router.in);
    }
  if (!simulated_.folded()) return;
  std::vector<std::vector<IciLink::Delivery>> deliveries(torus_.link_slots());
  const auto slot = [&](const LinkId& id) -> std::vector<IciLink::Delivery>& { return deliveries[torus_.link_index(id)]; };
  for (auto& chip : chips_) {
    for (auto& link : chip.links) {
      const auto far_end = static_cast<std::uint32_t>(torus_.far_end(link.id()));
      if (simulated_.simulates(torus_, far_end)) slot(link.id()).push_back({&chip_of(far_end).router, {}, false});
    }
    for (const SimulatedSlice::StandIn& in : simulated_.stand_ins(torus_, chip.id())) {
      const std::uint32_t sender = in.sender;
      slot(in.link).push_back({&chip.router,
                               [this, sender](std::uint32_t dest) { return simulated_.from_representative(torus_, sender, dest); },
                               simulated_.reverses(torus_, sender, in.link.axis)});
    }
  }
  for (auto& chip : chips_)
    for (auto& link : chip.links) link.deliver_to(std::move(slot(link.id())));
}

const Chip* System::chip_by_id(std::uint32_t chip) const {
  if (chip >= index_of_chip_.size() || index_of_chip_[chip] < 0) return nullptr;
  return &chips_[static_cast<std::size_t>(index_of_chip_[chip])];
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

Picos System::forward_span_ps(std::size_t step) const {
  Picos span = 0;
  for (const auto& chip : chips_)
    for (const auto& core : chip.cores)
      if (step < core.forward_span_ps().size()) span = std::max(span, core.forward_span_ps()[step]);
  return span;
}

std::pair<Picos, Picos> System::pipeline_and_bubble_ps(std::size_t step) const {
  std::pair<Picos, Picos> most{0, 0};
  for (const auto& chip : chips_)
    for (const auto& core : chip.cores)
      if (step < core.pipeline_ps().size()) {
        most.first = std::max(most.first, core.pipeline_ps()[step]);
        most.second = std::max(most.second, core.bubble_ps()[step]);
      }
  return most;
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
