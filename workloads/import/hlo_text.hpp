// XLA HLO modules as text: what `jax.jit(f).lower(...).as_text(dialect="hlo")`,
// `.compile().as_text()`, TensorFlow's experimental_get_compiler_ir(...)(stage="hlo") and
// `XLA_FLAGS=--xla_dump_to` print (HloModule::ToString). The reader keeps what a cost model needs:
// each instruction's shape, opcode, operands and attributes (verbatim, parsed on demand), and the
// computations it calls. Metadata and layouts are read past.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpusim {

// An array shape (`f32[8,128]{1,0}`) or a tuple of shapes (`(s32[], f32[8])`).
struct HloShape {
  std::string dtype;                // "f32", "bf16", "pred", "token", ...; empty for a tuple
  std::vector<std::int64_t> dims;   // empty for a scalar
  std::vector<HloShape> elements;   // a tuple's
  bool is_tuple() const { return dtype.empty(); }
  std::uint64_t element_count() const;  // of an array; a tuple's arrays summed
  std::uint64_t bytes() const;          // a tuple's arrays summed
  std::string str() const;
};

// Bytes of one element of an HLO primitive type; nullopt for a type tpusim does not know.
std::optional<double> hlo_dtype_bytes(const std::string& dtype);

struct HloInstruction {
  std::string name;  // without the leading %
  HloShape shape;
  std::string opcode;
  std::vector<std::string> operands;  // instruction names
  std::map<std::string, std::string> attributes;  // verbatim values: "{1}", "%fused_computation", "{{0,1},{2,3}}"
  bool root = false;
  std::size_t line = 0;  // in the file, 1-based
  const std::string* attribute(const std::string& key) const {
    const auto it = attributes.find(key);
    return it == attributes.end() ? nullptr : &it->second;
  }
};

struct HloComputation {
  std::string name;
  std::vector<HloInstruction> instructions;  // in the printed order (the schedule, when the module is scheduled)
  std::map<std::string, std::size_t> by_name;
  std::size_t root = 0;
  const HloInstruction* find(const std::string& name) const {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &instructions[it->second];
  }
};

struct HloModule {
  std::string name;
  std::map<std::string, std::string> attributes;  // the header's: num_partitions, replica_count, is_scheduled, ...
  std::vector<HloComputation> computations;
  std::map<std::string, std::size_t> by_name;
  std::size_t entry = 0;
  const HloComputation* find(const std::string& name) const {
    const auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &computations[it->second];
  }
};

// Parses the text; throws std::invalid_argument "ORIGIN:LINE: what" on text that is not an HLO
// module (truncated, unbalanced, an operand no instruction before it defines, a shape it cannot read).
HloModule parse_hlo_module(const std::string& text, const std::string& origin);

// Attribute values as HLO prints them: "{1,2}" -> {1, 2}; "{{0,1},{2,3}}" -> {{0, 1}, {2, 3}}.
std::vector<std::int64_t> hlo_int_list(const std::string& value);
std::vector<std::vector<std::int64_t>> hlo_int_lists(const std::string& value);

}  // namespace tpusim
