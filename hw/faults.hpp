// Faults a test injects on purpose, to prove that the end-of-run checks (sim/invariants) and the
// stuck-simulation report catch what they exist to catch: a check that never fires could be
// checking nothing. The command line sets one from TPUSIM_INJECT_FAULT ("dma-drop-chunk:3":
// chip 3's DMA engines leave out the last chunk of every transfer); none by default.
#pragma once

#include <cstdint>
#include <string>

namespace tpusim {

enum class FaultKind : std::uint8_t {
  None,
  DmaDropChunk,    // the chip's DMA engines skip the last chunk of every multi-chunk transfer
  SkipCollective,  // the chip's collective unit releases its cores without taking part
};

struct InjectedFault {
  FaultKind kind = FaultKind::None;
  std::uint32_t chip = 0;
  bool hits(FaultKind k, std::uint32_t at_chip) const { return kind == k && chip == at_chip; }
};

// The process's fault; set before elaboration, read by the modules.
InjectedFault& injected_fault();
// "KIND:CHIP" with KIND dma-drop-chunk or skip-collective; throws std::invalid_argument otherwise.
InjectedFault parse_fault(const std::string& text);

}  // namespace tpusim
