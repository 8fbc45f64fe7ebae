// JSON a user hands tpusim (workload and hardware files, --set values, traces to check, sweep
// outputs to resume or merge): regular files only, bounded in size and in nesting, every failure
// an InputError naming the file. Printing and validating a document recurse once per level, so a
// document nested 80,000 levels deep (a 200 KB file) overflowed the stack.
#pragma once

#include <cstdint>
#include <set>
#include <vector>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sim/errors.hpp"

namespace tpusim {

inline constexpr int kMaxJsonDepth = 256;
inline constexpr std::uint64_t kMaxDocumentBytes = std::uint64_t{64} << 20;  // workload and hardware files

// A document nested deeper than kMaxJsonDepth.
struct JsonTooDeep : InputError {
  using InputError::InputError;
};

// Parses a stream or string into `Json` (nlohmann::json or ordered_json). Throws JsonTooDeep
// ("ORIGIN: nested deeper than ...") for deeper documents, and with `unique_keys` an InputError
// for an object with a key twice (JSON parsers keep the last, so a second "training" block would
// silently replace the first); nlohmann's own exceptions (syntax, a number beyond a double) pass
// through for the caller to word.
template <typename Json = nlohmann::json, typename Input>
Json parse_bounded(Input&& in, const std::string& origin, bool unique_keys = false) {
  std::vector<std::set<std::string>> open_objects;  // the keys seen in each object being parsed
  return Json::parse(std::forward<Input>(in), [&](int depth, typename Json::parse_event_t event, Json& parsed) {
    using Event = typename Json::parse_event_t;
    if (depth > kMaxJsonDepth)
      throw JsonTooDeep(fmt::format("{}: nested deeper than {} levels; not a document tpusim reads", origin, kMaxJsonDepth));
    if (!unique_keys) return true;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end) open_objects.pop_back();
    if (event == Event::key && !open_objects.back().insert(parsed.template get<std::string>()).second)
      throw InputError(fmt::format("{}: the key \"{}\" appears twice in one object (the second would silently replace the "
                                   "first)", origin, parsed.template get<std::string>()));
    return true;
  });
}

// Throws InputError unless `path` names a regular file (not a directory, a device or a pipe) of
// at most `max_bytes` (0: any size).
void check_input_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace tpusim
