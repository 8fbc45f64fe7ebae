// JSON a user hands tpusim (workload and hardware files, --set values, traces to check, sweep
// outputs to resume or merge): regular files only, bounded in size and in nesting, every failure
// an InputError naming the file. Printing and validating a document recurse once per level, so a
// document nested 80,000 levels deep (a 200 KB file) overflowed the stack.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>
#include <string>
#include <string_view>
#include <type_traits>
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

// A SAX handler that builds the document as nlohmann's own parser does, counting depth and, with
// `unique_keys`, the keys of each open object. (nlohmann's parser callback would do the same but
// takes time quadratic in the length of an array: 6 s for 100,000 elements.)
template <typename Json>
class BoundedSax {
 public:
  // `text`: the document, when it is in memory (to place a number overflow; may be empty).
  BoundedSax(Json& result, const std::string& origin, bool unique_keys, std::string_view text = {})
      : dom_(result, true), origin_(origin), unique_keys_(unique_keys), text_(text) {}
  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(typename Json::number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(typename Json::number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(typename Json::number_float_t v, const typename Json::string_t& s) { return dom_.number_float(v, s); }
  bool string(typename Json::string_t& v) { return dom_.string(v); }
  bool binary(typename Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(std::size_t n) {
    enter();
    if (unique_keys_) open_objects_.emplace_back();
    return dom_.start_object(n);
  }
  bool key(typename Json::string_t& k) {
    if (unique_keys_ && !open_objects_.back().insert(k).second)
      throw InputError(fmt::format("{}: the key \"{}\" appears twice in one object (the second would silently replace "
                                   "the first)", origin_, k));
    return dom_.key(k);
  }
  bool end_object() {
    --depth_;
    if (unique_keys_) open_objects_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    enter();
    return dom_.start_array(n);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    // nlohmann places syntax errors itself, not a number too large for a double: place it here.
    if constexpr (std::is_same_v<Exception, nlohmann::detail::out_of_range>) {
      if (!text_.empty() && position <= text_.size()) {
        const std::string_view before = text_.substr(0, position);
        const std::size_t line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
        const std::size_t line_start = before.rfind('\n');
        const std::size_t column = position - (line_start == std::string_view::npos ? 0 : line_start + 1);
        throw InputError(fmt::format("{}: malformed JSON: number overflow parsing '{}' at line {}, column {}", origin_,
                                     token.size() > 40 ? token.substr(0, 37) + "..." : token, line, column));
      }
    }
    return dom_.parse_error(position, token, e);  // throws e
  }

 private:
  void enter() {
    if (++depth_ > kMaxJsonDepth)
      throw JsonTooDeep(fmt::format("{}: nested deeper than {} levels; not a document tpusim reads", origin_, kMaxJsonDepth));
  }
  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const std::string& origin_;
  bool unique_keys_;
  std::string_view text_;
  int depth_ = 0;
  std::vector<std::set<std::string>> open_objects_;  // the keys seen in each object being parsed
};

// Parses a stream or string into `Json` (nlohmann::json or ordered_json). Throws JsonTooDeep
// ("ORIGIN: nested deeper than ...") for deeper documents, and with `unique_keys` an InputError
// for an object with a key twice (JSON parsers keep the last, so a second "training" block would
// silently replace the first); nlohmann's own exceptions (syntax, a number beyond a double) pass
// through for the caller to word.
template <typename Json = nlohmann::json, typename Input>
Json parse_bounded(Input&& in, const std::string& origin, bool unique_keys = false) {
  Json result;
  std::string_view text;
  if constexpr (std::is_convertible_v<const Input&, std::string_view>) text = in;
  BoundedSax<Json> sax(result, origin, unique_keys, text);
  Json::sax_parse(std::forward<Input>(in), &sax);
  return result;
}

// Throws InputError unless `path` names a regular file (not a directory, a device or a pipe) of
// at most `max_bytes` (0: any size).
void check_input_file(const std::string& path, std::uint64_t max_bytes);

// A JSON document from a file of at most kMaxDocumentBytes, parsed with the bounds above and
// repeated keys refused; InputError naming the file on any failure.
nlohmann::json read_json_file(const std::string& path);

}  // namespace tpusim
