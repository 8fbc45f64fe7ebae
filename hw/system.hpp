// The whole slice: chips (cores, HBM, ICI router and links) on a torus, and the hosts that feed
// them. The top module owns its children and binds every socket in its constructor.
#pragma once

#include <memory>
#include <vector>

#include "hw/collective.hpp"
#include "hw/collective_unit.hpp"
#include "hw/memory.hpp"
#include "hw/host.hpp"
#include "hw/ici.hpp"
#include "hw/symmetry.hpp"
#include "hw/tensor_core.hpp"
#include "hw/topology.hpp"

namespace tpusim {

class Chip : public sc_core::sc_module {
 public:
  IciRouter router;
  sc_core::sc_vector<TensorCore> cores;
  CollectiveUnit collective;
  sc_core::sc_vector<IciLink> links;  // outgoing, one per existing direction

  Chip(sc_core::sc_module_name name, std::uint32_t index, const HwConfig& hw, const Torus& torus,
       const Program& program, Host& host, EventSink* sink);
  std::uint32_t id() const { return id_; }  // in the whole slice
  // The chip's memory, built by the model `hw.hbm.model` names (hw/memory.hpp).
  ChipMemory& memory() { return *memory_; }
  const ChipMemory& memory() const { return *memory_; }

 private:
  std::unique_ptr<ChipMemory> memory_;
  std::uint32_t id_;
};

// The simulated chips of the slice (every chip, or one representative per class of symmetric
// chips: hw/symmetry.hpp), with their hosts. Chips keep their ids in the whole slice.
class System : public sc_core::sc_module {
 public:
  // `simulated`: which chips to build (plan_simulated_slice, planned once by the caller).
  System(sc_core::sc_module_name name, const HwConfig& hw, const Program& program,
         const InfeedSpec& infeed, EventSink* sink, SimulatedSlice simulated);

  const Torus& torus() const { return torus_; }
  const SimulatedSlice& simulated() const { return simulated_; }
  // The simulated chip with id `chip` in the whole slice; nullptr when a representative stands for it.
  const Chip* chip_by_id(std::uint32_t chip) const;
  // Reports what units summed instead of reporting as they went (ChipMemory::flush_reports).
  void flush_reports() {
    for (auto& chip : chips_) chip.memory().flush_reports();
  }
  const sc_core::sc_vector<Chip>& chips() const { return chips_; }
  sc_core::sc_vector<Chip>& chips() { return chips_; }
  std::uint32_t host_count() const { return static_cast<std::uint32_t>(hosts_.size()); }

  // True when every core finished every step.
  bool finished() const;
  // End of step s: the moment the last core finished it.
  std::vector<Picos> step_end_ps() const;
  // Of step s: the longest time any core took from the step's start to its forward pass's end.
  Picos forward_span_ps(std::size_t step) const;
  // In `step`, the longest time any core spent in pipeline iterations and in bubble iterations.
  std::pair<Picos, Picos> pipeline_and_bubble_ps(std::size_t step) const;
  // Steps every core has finished (fewer than the program's when the run was cut short).
  std::size_t steps_completed() const;

 private:
  Torus torus_;
  SimulatedSlice simulated_;
  std::vector<std::int32_t> index_of_chip_;  // by id in the slice: index in chips_, or -1
  IciDispatch dispatch_;  // every chip's ring pieces onto the ICI, in one order for the slice
  sc_core::sc_vector<Host> hosts_;
  sc_core::sc_vector<Chip> chips_;
};

}  // namespace tpusim
