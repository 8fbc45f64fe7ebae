#include "hw/faults.hpp"

#include <stdexcept>

namespace tpusim {

InjectedFault& injected_fault() {
  static InjectedFault fault;
  return fault;
}

InjectedFault parse_fault(const std::string& text) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  InjectedFault fault;
  if (kind == "dma-drop-chunk") fault.kind = FaultKind::DmaDropChunk;
  else if (kind == "skip-collective") fault.kind = FaultKind::SkipCollective;
  const std::string chip = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (fault.kind == FaultKind::None || chip.empty() || chip.size() > 9 ||
      chip.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument("TPUSIM_INJECT_FAULT=" + text +
                                ": expected dma-drop-chunk:CHIP or skip-collective:CHIP (CHIP a chip number)");
  fault.chip = static_cast<std::uint32_t>(std::stoul(chip));
  return fault;
}

}  // namespace tpusim
