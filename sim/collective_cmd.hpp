// `tpusim collective`: one collective over the chips of a slice (one rank per chip), simulated
// on the ICI model, reported beside its alpha-beta closed form.
#pragma once

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"

namespace tpusim {

struct CollectiveRequest {
  CollectiveSpec spec;
  bool list_links = false;      // every used link's utilization in the JSON
  std::uint32_t concurrent = 1;  // identical collectives in flight at once (sharing the links)
  std::uint64_t max_memory_bytes = 0;  // refuse slices estimated to need more; 0: the machine's memory
  bool all_chips = false;  // every chip, not one per class of symmetric chips (hw/symmetry.hpp)
  bool named_axes = false;  // spec.group_axes came from axes named in --group (not "all")
};

nlohmann::ordered_json run_collective(const HwConfig& hw, const CollectiveRequest& request);
std::string format_collective(const nlohmann::ordered_json& result);
// "xy" -> axes 0 and 1; "all" -> every axis. Throws InputError naming --group.
std::uint32_t parse_group(const std::string& text);

}  // namespace tpusim
