#include "sim/names.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

#include <fmt/format.h>

#include "sim/errors.hpp"

namespace tpusim {
namespace {

// Levenshtein distance with adjacent transpositions ("bacth" for "batch" is one edit).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i)
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

bool is_power_of_two(std::uint64_t x) { return x > 0 && (x & (x - 1)) == 0; }

// Cloud TPU's default 2D shape for a power-of-two chip count: as square as it goes, the shorter
// axis first (4x8, 8x16), as in the v2/v3, v5e and v6e tables.
std::string shape_2d(std::uint64_t chips) {
  std::uint64_t a = 1;
  while (a * a * 2 <= chips) a *= 2;
  if (a * a > chips) a /= 2;
  return fmt::format("{}x{}", a, chips / a);
}

// Cloud TPU's default 3D shape (v4, v5p): 2x2x1, 2x2x2, 2x2x4 and 2x4x4 below a cube; from 64
// chips whole 4x4x4 cubes, as cube-like as the count allows, the longest axis last (4x4x8, 4x8x8,
// 8x8x16, 16x16x24), as in the v4 and v5p tables.
std::string shape_3d(std::uint64_t chips) {
  switch (chips) {
    case 4: return "2x2x1";
    case 8: return "2x2x2";
    case 16: return "2x2x4";
    case 32: return "2x4x4";
    default: break;
  }
  if (chips < 64 || chips % 64 != 0) return "";
  const std::uint64_t cubes = chips / 64;
  std::uint64_t best[3] = {0, 0, 0};
  for (std::uint64_t a = 1; a * a * a <= cubes; ++a) {
    if (cubes % a) continue;
    for (std::uint64_t b = a; a * b * b <= cubes; ++b) {
      if ((cubes / a) % b) continue;
      const std::uint64_t c = cubes / a / b;
      if (best[0] == 0 || c < best[2] || (c == best[2] && b < best[1])) best[0] = a, best[1] = b, best[2] = c;
    }
  }
  return fmt::format("{}x{}x{}", 4 * best[0], 4 * best[1], 4 * best[2]);
}

}  // namespace

std::optional<Accelerator> parse_accelerator(const std::string& given, const std::string& option) {
  std::string name = given;
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  // "v5litepod-16" is Cloud TPU's name for v5e types; "tpu-v4-32" and "tpu_v4-32" are seen too;
  // Ironwood's are "tpu7x-8" (also written v7x-8).
  static const std::regex pattern(R"((?:tpu[-_]?)?v?(2|3|4|5p|5e|5litepod|6e|7x|7)(?:-([0-9]{1,6}))?)");
  std::smatch m;
  if (!std::regex_match(name, m, pattern)) return std::nullopt;
  // Without the v only Ironwood's tpu7x-N is a name ("tpu4-8" and "7" are not).
  if (name.find('v') == std::string::npos && (m[1] != "7x" || name.rfind("tpu", 0) != 0)) return std::nullopt;
  std::string generation = m[1];
  if (generation == "5litepod") generation = "5e";
  if (generation == "7x") generation = "7";
  Accelerator a;
  a.name = given;
  a.preset = "tpu_v" + generation;
  if (!m[2].matched) return a;
  const std::uint64_t count = std::stoull(m[2]);
  // tpu7x-8 is 4 chips of 2 TensorCores (2x2x1), as v5p-8 is.
  const bool counts_cores = generation == "2" || generation == "3" || generation == "4" || generation == "5p" || generation == "7";
  const bool three_d = generation == "4" || generation == "5p" || generation == "7";
  a.counts = counts_cores ? "TensorCores, 2 per chip" : "chips";
  a.chips = counts_cores ? count / 2 : count;
  if (counts_cores && count % 2 == 0 && a.chips > 0) {
    a.topology = three_d ? shape_3d(a.chips) : is_power_of_two(a.chips) && a.chips >= 4 ? shape_2d(a.chips) : "";
    // Beyond a v3 pod of 32x32: MLPerf v0.7's multipods, pods side by side along x (v3-8192 ran
    // as 128x32).
    if (generation == "3" && a.chips > 1024 && is_power_of_two(a.chips)) a.topology = fmt::format("{}x32", a.chips / 32);
  } else if (!counts_cores) {
    a.topology = is_power_of_two(a.chips) ? shape_2d(a.chips) : "";
  }
  if (a.topology.empty()) {
    const std::string offered = three_d ? fmt::format("v{0}-8, v{0}-16, v{0}-32, v{0}-64, then multiples of 128", generation)
                                : counts_cores ? fmt::format("v{0}-8, v{0}-32, v{0}-128, ...: 2 x a power of two, at least 8", generation)
                                               : fmt::format("v{0}-1, v{0}-4, v{0}-8, ..., v{0}-256: a power of two", generation);
    throw InputError(fmt::format("{} {}: not a Cloud TPU v{} accelerator type (expected {}; the number counts {})", option,
                                 given, generation, offered, a.counts));
  }
  return a;
}

std::optional<std::uint64_t> parse_byte_size(const std::string& text) {
  static const std::regex pattern(R"(([0-9]{1,15})(\.[0-9]{1,9})?\s*([kKmMgGtT]?)(i?[bB])?)");
  std::smatch m;
  if (!std::regex_match(text, m, pattern)) return std::nullopt;
  const char prefix = static_cast<char>(std::toupper(m[3].str().empty() ? 'B' : m[3].str()[0]));
  if (prefix == 'B' && m[4].matched && m[4].str().size() == 2) return std::nullopt;  // "16iB"
  const unsigned shift = prefix == 'K' ? 10 : prefix == 'M' ? 20 : prefix == 'G' ? 30 : prefix == 'T' ? 40 : 0;
  // Exact in integers: whole part, then the fraction's digits over its power of ten.
  const unsigned __int128 whole = static_cast<unsigned __int128>(std::stoull(m[1])) << shift;
  unsigned __int128 fraction = 0;
  if (m[2].matched) {
    const std::string digits = m[2].str().substr(1);
    unsigned __int128 ten = 1;
    for (std::size_t i = 0; i < digits.size(); ++i) ten *= 10;
    const unsigned __int128 scaled = static_cast<unsigned __int128>(std::stoull(digits)) << shift;
    if (scaled % ten != 0) return std::nullopt;  // not a whole number of bytes
    fraction = scaled / ten;
  }
  const unsigned __int128 bytes = whole + fraction;
  if (bytes > static_cast<unsigned __int128>(~std::uint64_t{0})) return std::nullopt;
  return static_cast<std::uint64_t>(bytes);
}

std::string describe(const Accelerator& a) {
  std::string generation = a.preset.substr(4);
  return fmt::format("{} = {} {} ({} chips; {} names count {})", a.name, a.preset, a.topology, a.chips, generation, a.counts);
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // Up to a third of the word may be wrong, at most 3 edits: "global_bach" finds "global_batch",
  // "tpu_v5" finds both tpu_v5e and tpu_v5p, "xyz" finds nothing.
  const std::size_t limit = std::min<std::size_t>(3, std::max<std::size_t>(1, word.size() / 3));
  // Among equally close names, those sharing the longest start with the word: "tpu_v5" is one
  // edit from tpu_v2 too, but means a v5.
  const auto shared_start = [&](const std::string& c) {
    std::size_t n = 0;
    while (n < word.size() && n < c.size() && word[n] == c[n]) ++n;
    return n;
  };
  std::size_t best = limit + 1, best_start = 0;
  std::vector<std::string> closest;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(word, c), start = shared_start(c);
    if (d < best || (d == best && start > best_start)) best = d, best_start = start, closest.clear();
    if (d == best && start == best_start && std::find(closest.begin(), closest.end(), c) == closest.end()) closest.push_back(c);
  }
  if (closest.empty() || closest.size() > 3) return "";
  std::string list = closest[0];
  for (std::size_t i = 1; i < closest.size(); ++i) list += (i + 1 == closest.size() ? " or " : ", ") + closest[i];
  return " (did you mean " + list + "?)";
}

}  // namespace tpusim
