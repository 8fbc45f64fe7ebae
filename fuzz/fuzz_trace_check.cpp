// `tpusim trace-check` and `trace-summary` on arbitrary bytes: malformed JSON is refused by the
// parser, and any JSON value gets a verdict (valid, or a list of problems) and a summary of its
// well-formed events. Anything else is a finding.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/json_input.hpp"
#include "traces/trace_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  nlohmann::json trace;
  try {
    trace = tpusim::parse_bounded(std::string(reinterpret_cast<const char*>(data), size), "trace.json");
  } catch (const nlohmann::json::exception&) {  // syntax
    return 0;
  } catch (const tpusim::InputError&) {  // too deep, a repeated key, a number beyond a double: the
    return 0;                              // command line's verdict is "invalid", exit 2
  }
  tpusim::check_trace(trace);
  tpusim::summarize_trace(trace, 10);
  return 0;
}
