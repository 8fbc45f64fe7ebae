// `tpusim membench`: requesters stream or scatter requests at one chip's HBM, keeping a fixed
// number in flight each, and the memory's achieved bandwidth, latency and row-buffer hit rate
// come back. The same patterns drive DRAMsim3 in docs/validation/hbm.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "hw/hbm_bench.hpp"
#include "hw/hw_config.hpp"

namespace tpusim {

MemPattern parse_mem_pattern(const std::string& name);  // throws InputError
const char* mem_pattern_name(MemPattern pattern);

// Throws InputError when the request cannot be laid out (sizes that do not divide, regions
// beyond the capacity).
nlohmann::ordered_json run_membench(const HwConfig& hw, const MembenchRequest& request);
std::string format_membench(const nlohmann::ordered_json& result);

}  // namespace tpusim
