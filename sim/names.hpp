// Names users bring from elsewhere: Cloud TPU accelerator types (`v4-32`, `v5litepod-16`) as
// shorthand for a preset and a slice, and "did you mean" for names that are almost right.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpusim {

// A Cloud TPU accelerator type resolved to a preset and the slice shape Cloud TPU gives it by
// default. v2, v3, v4 and v5p types count TensorCores (2 per chip: `v4-32` is 16 chips); v5e and
// v6e types count chips (`v5e-256` is 256 chips). A name without a count (`v5e`, `v4`) names
// only the preset.
struct Accelerator {
  std::string name;      // as given, e.g. "v4-32"
  std::string preset;    // "tpu_v4"
  std::string topology;  // "2x2x4"; empty when the name has no count
  std::uint64_t chips = 0;
  std::string counts;  // how the name's number counts, for the summary: "TensorCores, 2 per chip" or "chips"
};

// nullopt when `name` is not an accelerator type of a generation tpusim has a preset for.
// Throws InputError (naming `option`) for a known generation with a count Cloud TPU does not offer.
std::optional<Accelerator> parse_accelerator(const std::string& name, const std::string& option);

// "v4-32 = tpu_v4 2x2x4 (16 chips; v4 counts TensorCores, 2 per chip)".
std::string describe(const Accelerator& a);

// A byte count with an optional unit, as --max-memory takes it: "16GiB", "16G", "16GB" (binary,
// as memory sizes are: 16 x 2^30), "512KiB", "1.5MiB", "4096", "4096B". nullopt when the text is
// not such a size or not a whole number of bytes.
std::optional<std::uint64_t> parse_byte_size(const std::string& text);

// " (did you mean X?)" or " (did you mean X or Y?)" naming the candidates closest to `word` by
// edit distance when they are close enough to be a typo; "" otherwise.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tpusim
