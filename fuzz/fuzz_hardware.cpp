// The hardware parser with --set overrides on arbitrary bytes: the input is a hardware document,
// optionally followed by a line "---" and one PATH=VALUE override per line. Every input either
// loads or is refused with an InputError; anything else is a finding.
#include <cstdint>
#include <sstream>
#include <string>

#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "fuzz_support.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::size_t split = text.find("\n---\n");
  const std::string document = text.substr(0, split);
  tpusim::ConfigRequest request;
  request.hw = tpusim::fuzz::write_input("hw.json", reinterpret_cast<const std::uint8_t*>(document.data()), document.size());
  if (split != std::string::npos) {
    std::istringstream lines(text.substr(split + 5));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("--topology ", 0) == 0)
        request.topology = line.substr(11);
      else
        request.sets.push_back(line);
  }
  try {
    tpusim::load_config(request);
  } catch (const tpusim::InputError&) {
  }
  return 0;
}
