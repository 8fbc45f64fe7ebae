// The two visitors of the hardware blocks' key declarations (hw/config_keys.hpp): one turns them
// into parameter-registry entries (sim/params), the other reads a document's values into the
// fields (sim/config's build_hw).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/config_keys.hpp"
#include "sim/params.hpp"

namespace tpusim {

// A dotted key path ("hbm.timing.trcd_ns") as a JSON pointer into a document.
inline nlohmann::json::json_pointer key_pointer(std::string path) {
  std::replace(path.begin(), path.end(), '.', '/');
  return nlohmann::json::json_pointer("/" + path);
}

// Walks the nested blocks of a declaration, keeping the dotted path of the block it is in.
template <typename Visitor>
class KeyPathWalker {
 public:
  template <typename Block>
  void block(const char* name, Block& block) {
    const std::string outer = prefix_;
    prefix_ += std::string(name) + ".";
    block.declare_keys(static_cast<Visitor&>(*this));
    prefix_ = outer;
  }

 protected:
  std::string prefix_;
};

// The keys the hardware blocks declare beside their fields (hw/hw_config.hpp), as registry
// entries: a key inside an optional block may be left out, as may one with a default.
class HwKeyDeclarations : public KeyPathWalker<HwKeyDeclarations> {
 public:
  explicit HwKeyDeclarations(std::vector<ParamSpec>& out) : out_(out) {}

  void key(const char* name, const std::string&, const KeyInfo& info) { add(name, ParamType::String, info); }
  void key(const char* name, const bool&, const KeyInfo& info) { add(name, ParamType::Bool, info); }
  void key(const char* name, const double&, const KeyInfo& info) { add(name, ParamType::Float, info); }
  void key(const char* name, const std::uint32_t&, const KeyInfo& info) { add(name, ParamType::Int, info); }
  void key(const char* name, const std::uint64_t&, const KeyInfo& info) { add(name, ParamType::Int, info); }
  void optional(const char* name, const std::optional<double>&, const KeyInfo& info) { add(name, ParamType::Float, info, false); }
  template <typename Enum, std::size_t N>
  void choice(const char* name, const Enum&, const NameTable<Enum> (&names)[N], const KeyInfo& info) {
    std::vector<std::string> spellings;
    for (const auto& [value, spelt] : names) spellings.push_back(spelt);
    add(name, ParamType::String, info, true, std::move(spellings));
  }
  template <typename Block>
  void optional_block(const char* name, std::optional<Block>&) {
    Block keys;
    const bool outer = in_optional_block_;
    in_optional_block_ = true;
    block(name, keys);
    in_optional_block_ = outer;
  }

 private:
  void add(const char* name, ParamType type, const KeyInfo& info, bool required = true, std::vector<std::string> choices = {}) {
    const nlohmann::json default_value = info.default_value ? nlohmann::json(*info.default_value) : nlohmann::json(nullptr);
    out_.push_back({"hw", prefix_ + name, type, info.unit, default_value, info.description, info.min, info.max, std::move(choices),
                    required && !in_optional_block_ && !info.default_value});
  }

  std::vector<ParamSpec>& out_;
  bool in_optional_block_ = false;
};

// Reads a document's values into the fields the hardware blocks declare (hw/hw_config.hpp). The
// document is complete and valid by now (every key set, by the preset or a default, and checked
// against its declaration), so no read fails.
class HwKeyReader : public KeyPathWalker<HwKeyReader> {
 public:
  explicit HwKeyReader(const nlohmann::json& doc) : doc_(doc) {}

  template <typename T>
  void key(const char* name, T& field, const KeyInfo&) {
    field = key_at(prefix_ + name).template get<T>();
  }
  void optional(const char* name, std::optional<double>& field, const KeyInfo&) {
    const auto pointer = key_pointer(prefix_ + name);
    if (doc_.contains(pointer)) field = doc_.at(pointer).get<double>();
  }
  template <typename Enum, std::size_t N>
  void choice(const char* name, Enum& field, const NameTable<Enum> (&names)[N], const KeyInfo&) {
    const std::string spelt = key_at(prefix_ + name).get<std::string>();
    for (const auto& [value, spelling] : names)
      if (spelt == spelling) field = value;
  }
  // Read by its owner's binder: an optional block's keys come in pairs (bind_chip_power).
  template <typename Block>
  void optional_block(const char*, std::optional<Block>&) {}

 private:
  const nlohmann::json& key_at(const std::string& path) const { return doc_.at(key_pointer(path)); }

  const nlohmann::json& doc_;
};

}  // namespace tpusim
