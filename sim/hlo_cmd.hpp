// `tpusim hlo STEP.hlo`: an XLA HLO module (what JAX, TensorFlow and PyTorch/XLA print of a
// compiled step) simulated as the program every device of the slice runs.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"

namespace tpusim {

struct HloRequest {
  std::string file;
  std::string out_dir;  // empty: print only; else summary.json, trace.json and command.txt there
  bool force = false;   // replace an output directory an earlier tpusim command wrote
  bool trace = true;    // trace.json at the ops level (with out_dir)
  std::string command_line;
  std::uint64_t max_memory_bytes = 0;  // refuse slices estimated to need more; 0: the machine's memory
  bool all_chips = false;              // every chip, not one per class of symmetric chips
};

// Throws InputError (exit 2) for a file that is not an HLO module tpusim can price, naming the
// line and instruction.
nlohmann::ordered_json run_hlo(const HwConfig& hw, const HloRequest& request);
std::string format_hlo(const nlohmann::ordered_json& result);

}  // namespace tpusim
