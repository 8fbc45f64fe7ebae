// The whole slice: chips (cores, HBM, ICI router and links) on a torus, and the hosts that feed
// them. The top module owns its children and binds every socket in its constructor.
#pragma once

#include <memory>
#include <vector>

#include "hw/collective.hpp"
#include "hw/collective_unit.hpp"
#include "hw/hbm.hpp"
#include "hw/host.hpp"
#include "hw/ici.hpp"
#include "hw/tensor_core.hpp"
#include "hw/topology.hpp"

namespace tpusim {

class Chip : public sc_core::sc_module {
 public:
  Hbm hbm;
  IciRouter router;
  sc_core::sc_vector<TensorCore> cores;
  CollectiveUnit collective;
  sc_core::sc_vector<IciLink> links;  // outgoing, one per existing direction

  Chip(sc_core::sc_module_name name, std::uint32_t index, const HwConfig& hw, const Torus& torus,
       const Program& program, Host& host, EventSink* sink);
};

class System : public sc_core::sc_module {
 public:
  System(sc_core::sc_module_name name, const HwConfig& hw, const Program& program,
         const InfeedSpec& infeed, EventSink* sink);

  const Torus& torus() const { return torus_; }
  // Reports what units summed instead of reporting as they went (Hbm::flush_reports).
  void flush_reports() {
    for (auto& chip : chips_) chip.hbm.flush_reports();
  }
  const sc_core::sc_vector<Chip>& chips() const { return chips_; }
  sc_core::sc_vector<Chip>& chips() { return chips_; }
  std::uint32_t host_count() const { return static_cast<std::uint32_t>(hosts_.size()); }

  // True when every core finished every step.
  bool finished() const;
  // End of step s: the moment the last core finished it.
  std::vector<Picos> step_end_ps() const;
  // Steps every core has finished (fewer than the program's when the run was cut short).
  std::size_t steps_completed() const;

 private:
  const HwConfig& hw_;
  Torus torus_;
  sc_core::sc_vector<Host> hosts_;
  sc_core::sc_vector<Chip> chips_;
};

}  // namespace tpusim
