#include "sim/config.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "hw/hbm_timing.hpp"
#include "hw/memory.hpp"
#include "hw/topology.hpp"
#include "hw/units.hpp"
#include "sim/errors.hpp"
#include "sim/hw_keys.hpp"
#include "sim/names.hpp"
#include "sim/json_input.hpp"
#include "sim/params.hpp"
#include "workloads/import/keras_json.hpp"
#include "workloads/import/onnx_model.hpp"
#include "workloads/layer_kind.hpp"

namespace tpusim {
namespace {

// "x+, x-, y+" : the links that leave `chip`.
std::string link_names(const Torus& torus, std::uint32_t chip) {
  std::string names;
  for (const LinkId& l : torus.outgoing_links(chip))
    names += fmt::format("{}{}{}", names.empty() ? "" : ", ", "xyz"[l.axis], l.positive ? '+' : '-');
  return names.empty() ? "none" : names;
}

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string brief(const json& value) {
  // Strings from the command line may hold any bytes: shown with U+FFFD, never thrown over.
  std::string s = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 48 ? s.substr(0, 45) + "..." : s;
}

[[noreturn]] void fail(const std::string& origin, const std::string& path, const std::string& what) {
  throw InputError(fmt::format("{}: {}: {}", origin, path, what));
}

// ---- validation against the registry ---------------------------------------------------------

std::string join_pattern(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : prefix + "." + key;
}

void check_number_range(const ParamSpec& spec, double v, const std::string& origin, const std::string& display,
                        const json& value) {
  // No quantity tpusim takes is that small: a subnormal is a slip (1e-320 steps between
  // evaluations gave 1.44e-313 samples/s), and dividing by one overflows.
  if (std::fpclassify(v) == FP_SUBNORMAL)
    fail(origin, display, fmt::format("expected 0 or a number of magnitude at least {:g}, got {}", DBL_MIN, brief(value)));
  if (v < spec.min || v > spec.max) {
    auto number = [](double x) {
      return std::fabs(x) < 1e15 && x == std::floor(x) ? fmt::format("{}", static_cast<long long>(x)) : fmt::format("{}", x);
    };
    std::string range;
    if (std::isinf(spec.max)) range = fmt::format("at least {}", number(spec.min));
    else range = fmt::format("between {} and {}", number(spec.min), number(spec.max));
    fail(origin, display, fmt::format("expected {} {}{}, got {}", param_type_name(spec.type), range,
                                      spec.unit.empty() ? "" : " (" + spec.unit + ")", brief(value)));
  }
}

void check_value(const ParamSpec& spec, const json& value, const std::string& origin, const std::string& display) {
  auto expected = [&](const std::string& what) {
    fail(origin, display, fmt::format("expected {}, got {}", what, brief(value)));
  };
  switch (spec.type) {
    case ParamType::Int:
      if (!value.is_number_integer()) expected("an integer");
      check_number_range(spec, value.is_number_unsigned() ? static_cast<double>(value.get<std::uint64_t>())
                                                          : static_cast<double>(value.get<std::int64_t>()),
                         origin, display, value);
      break;
    case ParamType::Float:
      if (!value.is_number()) expected("a number");
      check_number_range(spec, value.get<double>(), origin, display, value);
      break;
    case ParamType::Bool:
      if (!value.is_boolean()) expected("true or false");
      break;
    case ParamType::String:
      if (!value.is_string()) expected("a string");
      if (!spec.choices.empty() &&
          std::find(spec.choices.begin(), spec.choices.end(), value.get<std::string>()) == spec.choices.end()) {
        std::string list;
        for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
        fail(origin, display, fmt::format("expected one of {}, got {}{}", list, brief(value),
                                          did_you_mean(value.get<std::string>(), spec.choices)));
      }
      break;
    case ParamType::IntList:
      if (!value.is_array() || value.empty()) expected("a non-empty list of integers");
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_number_integer()) fail(origin, fmt::format("{}[{}]", display, i), fmt::format("expected an integer, got {}", brief(value[i])));
        check_number_range(spec, value[i].get<double>(), origin, fmt::format("{}[{}]", display, i), value[i]);
      }
      break;
    case ParamType::Window:
      if (value.is_number_integer()) {
        check_number_range(spec, value.is_number_unsigned() ? static_cast<double>(value.get<std::uint64_t>())
                                                            : static_cast<double>(value.get<std::int64_t>()),
                           origin, display, value);
        break;
      }
      if (!value.is_array() || value.size() != 2) expected("an integer or [height, width]");
      for (std::size_t i = 0; i < 2; ++i) {
        if (!value[i].is_number_integer()) fail(origin, fmt::format("{}[{}]", display, i), fmt::format("expected an integer, got {}", brief(value[i])));
        check_number_range(spec, value[i].get<double>(), origin, fmt::format("{}[{}]", display, i), value[i]);
      }
      break;
    case ParamType::StringList:
      if (!value.is_array()) expected("a list of strings");
      for (std::size_t i = 0; i < value.size(); ++i)
        if (!value[i].is_string()) fail(origin, fmt::format("{}[{}]", display, i), fmt::format("expected a string, got {}", brief(value[i])));
      break;
    case ParamType::ObjectList:
      // A list whose default is empty (hw.slow_chips) may be empty; a model's layers may not.
      if (!value.is_array()) expected("a list of objects");
      if (value.empty() && !(spec.default_value.is_array() && spec.default_value.empty())) expected("a non-empty list of objects");
      break;
    case ParamType::StringMap:
      if (!value.is_object()) expected("an object of strings");
      for (const auto& [k, v] : value.items())
        if (!v.is_string()) fail(origin, display + "." + k, fmt::format("expected a string, got {}", brief(v)));
      break;
  }
}

// Immediate children of `pattern` in the registry: name -> leaf spec (nullptr for objects).
std::vector<std::pair<std::string, const ParamSpec*>> children_of(const std::string& doc, const std::string& pattern) {
  std::vector<std::pair<std::string, const ParamSpec*>> out;
  const std::string prefix = pattern.empty() ? "" : pattern + ".";
  for (const auto& p : param_registry()) {
    if (p.doc != doc || p.path.compare(0, prefix.size(), prefix) != 0) continue;
    std::string rest = p.path.substr(prefix.size());
    if (rest.rfind("[]", 0) == 0) continue;
    const auto dot = rest.find('.');
    const std::string name = rest.substr(0, dot);
    if (name.find("[]") != std::string::npos) continue;  // elements of a list, checked per element
    const bool leaf = dot == std::string::npos;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& c) { return c.first == name; });
    if (it == out.end()) out.emplace_back(name, leaf ? &p : nullptr);
    else if (leaf) it->second = &p;
  }
  return out;
}

bool required_below(const std::string& doc, const std::string& pattern) {
  const std::string prefix = pattern + ".";
  for (const auto& p : param_registry())
    if (p.doc == doc && p.required && p.path.compare(0, prefix.size(), prefix) == 0 &&
        p.path.find("[]", prefix.size()) == std::string::npos)
      return true;
  return false;
}

// Checks every key of `obj` and fills defaults for the optional keys it lacks.
void validate_object(json& obj, const std::string& doc, const std::string& pattern, const std::string& display,
                     const std::string& origin) {
  if (!obj.is_object()) fail(origin, display, fmt::format("expected an object, got {}", brief(obj)));
  const auto children = children_of(doc, pattern);
  for (auto& [key, value] : obj.items()) {
    const std::string child_pattern = join_pattern(pattern, key);
    const std::string child_display = display + "." + key;
    const std::string& name = key;  // a structured binding cannot be captured before C++20
    const auto it = std::find_if(children.begin(), children.end(), [&](const auto& c) { return c.first == name; });
    if (it == children.end()) {
      std::string known;
      std::vector<std::string> names;
      for (const auto& c : children) known += (known.empty() ? "" : ", ") + c.first, names.push_back(c.first);
      fail(origin, child_display, fmt::format("unknown key{} (expected one of: {})", did_you_mean(key, names), known));
    }
    if (it->second) {
      // A byte count may be written with its unit in a file too: "capacity_bytes": "16GiB".
      if (it->second->type == ParamType::Int && it->second->unit == "bytes" && value.is_string()) {
        const auto bytes = parse_byte_size(value.get<std::string>());
        if (!bytes)
          fail(origin, child_display, fmt::format("expected a whole number of bytes, e.g. 17179869184, \"16GiB\" or \"512KiB\", got {}",
                                                  brief(value)));
        value = *bytes;
      }
      check_value(*it->second, value, origin, child_display);
      if (it->second->type == ParamType::ObjectList)
        for (std::size_t i = 0; i < value.size(); ++i)
          validate_object(value[i], doc, child_pattern + "[]", fmt::format("{}[{}]", child_display, i), origin);
    } else {
      validate_object(value, doc, child_pattern, child_display, origin);
    }
  }
  for (const auto& [key, spec] : children) {
    if (obj.contains(key)) continue;
    const std::string child_pattern = join_pattern(pattern, key);
    if (spec) {
      if (spec->required) fail(origin, display + "." + key, fmt::format("missing required key ({}: {})", param_type_name(spec->type), spec->description));
      if (!spec->default_value.is_null()) obj[key] = spec->default_value;
    } else {
      if (required_below(doc, child_pattern)) fail(origin, display + "." + key, "missing required object");
      obj[key] = json::object();
      validate_object(obj[key], doc, child_pattern, display + "." + key, origin);
    }
  }
}

// ---- --set ------------------------------------------------------------------------------------

json parse_set_value(const ParamSpec& spec, const std::string& text, const std::string& origin, const std::string& display) {
  auto bad = [&](const std::string& what) -> json { fail(origin, display, fmt::format("expected {}, got \"{}\"", what, text)); };
  switch (spec.type) {
    case ParamType::Int: {
      if (spec.unit == "bytes" && !std::regex_match(text, std::regex("-?[0-9]{1,19}"))) {
        if (const auto bytes = parse_byte_size(text)) return json(*bytes);
        return bad("a whole number of bytes, e.g. 17179869184, 16GiB or 512KiB");
      }
      if (!std::regex_match(text, std::regex("-?[0-9]{1,19}"))) return bad("an integer");
      try {
        if (text[0] == '-') return json(std::stoll(text));
        return json(static_cast<std::uint64_t>(std::stoull(text)));
      } catch (const std::exception&) {
        return bad("an integer");
      }
    }
    case ParamType::Float: {
      char* end = nullptr;
      const double v = std::strtod(text.c_str(), &end);
      if (text.empty() || *end != '\0' || !std::isfinite(v)) return bad("a number");
      return json(v);
    }
    case ParamType::Bool:
      if (text == "true") return json(true);
      if (text == "false") return json(false);
      return bad("true or false");
    case ParamType::String: return json(text);
    case ParamType::IntList: {
      json list = json::array();
      std::string t = text;
      if (!t.empty() && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
      std::stringstream ss(t);
      std::string item;
      while (std::getline(ss, item, ',')) {
        if (!std::regex_match(item, std::regex(" *[0-9]{1,12} *"))) return bad("a list of integers like 28,28");
        list.push_back(std::stoull(item));
      }
      return list;
    }
    case ParamType::Window: {  // 7, or 1,7 / [1,7] / 1x7
      std::smatch m;
      if (std::regex_match(text, m, std::regex(" *([0-9]{1,12}) *"))) return json(std::stoull(m[1].str()));
      if (std::regex_match(text, m, std::regex(" *\\[? *([0-9]{1,12}) *[,x] *([0-9]{1,12}) *\\]? *")))
        return json::array({std::stoull(m[1].str()), std::stoull(m[2].str())});
      return bad("an integer or a height and width like 1,7");
    }
    case ParamType::StringList: {
      const char* expected = "a list of names like 2x2,4x4 or [\"2x2\", \"4x4\"]";
      if (!text.empty() && text.front() == '[') {  // JSON, as the document writes it: the quotes are not the names'
        try {
          const json list = parse_bounded(text, fmt::format("{}: {}", origin, display));
          if (list.is_array() && std::all_of(list.begin(), list.end(), [](const json& x) { return x.is_string(); }))
            return list;
        } catch (const json::exception&) {
        }
        return bad(expected);
      }
      json list = json::array();
      std::stringstream ss(text);
      for (std::string item; std::getline(ss, item, ',');) {
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        if (item.find_first_of("\"'[]") != std::string::npos) return bad(expected);
        if (!item.empty()) list.push_back(item);
      }
      return list;
    }
    case ParamType::ObjectList:
    case ParamType::StringMap:
      try {
        return parse_bounded(text, fmt::format("{}: {}", origin, display));
      } catch (const json::exception&) {  // syntax, or a number beyond a double
        return bad("JSON");
      }
  }
  return bad("a value");
}

void apply_set(json& hw_doc, json& workload_doc, const std::string& assignment) {
  // A long value (a whole layer list) is cut in messages: they stay one readable line.
  const std::string origin = "--set " + (assignment.size() > 100 ? assignment.substr(0, 97) + "..." : assignment);
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(fmt::format("{}: expected PATH=VALUE, e.g. hw.hbm.bw_gbps=1000", origin));
  const std::string path = assignment.substr(0, eq);
  const std::string value = assignment.substr(eq + 1);
  try {
    (void)json(assignment).dump();  // JSON strings are UTF-8: anything else cannot become a value
  } catch (const json::type_error&) {
    throw InputError(fmt::format("--set {}: not valid UTF-8", json(path).dump(-1, ' ', false, json::error_handler_t::replace)));
  }
  const auto dot = path.find('.');
  const std::string doc = path.substr(0, dot);
  if ((doc != "hw" && doc != "workload") || dot == std::string::npos)
    throw InputError(fmt::format("{}: the path must start with hw. or workload. (e.g. workload.training.global_batch)", origin));
  json* target = doc == "hw" ? &hw_doc : &workload_doc;
  if (target->is_null()) throw InputError(fmt::format("{}: no workload is loaded", origin));
  // The base is resolved when the file is read; changing it afterwards would change nothing.
  if (path == "hw.base") throw InputError(fmt::format("{}: choose the preset with --hw, not with --set", origin));

  // Walk "a.b[2].c": every [i] must name an existing element; objects are created as needed.
  static const std::regex segment_re(R"(([A-Za-z_][A-Za-z0-9_]*)(\[([0-9]{1,6})\])?)");
  std::string pattern;
  const std::string keys = path.substr(dot + 1);
  if (keys.empty() || keys.back() == '.' || keys.find("..") != std::string::npos)
    throw InputError(fmt::format("{}: malformed key path \"{}\" (an empty key)", origin, path));
  std::stringstream ss(keys);
  std::string segment;
  std::vector<std::string> segments;
  while (std::getline(ss, segment, '.')) segments.push_back(segment);
  json* node = target;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    std::smatch m;
    if (!std::regex_match(segments[i], m, segment_re))
      throw InputError(fmt::format("{}: malformed key path \"{}\"", origin, path));
    const std::string key = m[1];
    pattern = join_pattern(pattern, key);
    const bool last = i + 1 == segments.size();
    if (!find_param(doc, pattern) && !has_children(doc, pattern)) {
      std::vector<std::string> keys;
      for (const auto& p : param_registry())
        if (p.doc == doc && p.path.find("[]") == std::string::npos) keys.push_back(p.doc + "." + p.path);
      throw InputError(fmt::format("{}: {}: unknown key{} (see `tpusim list-params`)", origin, path, did_you_mean(path, keys)));
    }
    if (!node->is_object()) throw InputError(fmt::format("{}: {}: the parent is not an object", origin, path));
    json& child = (*node)[key];
    if (m[2].matched) {
      const std::size_t index = std::stoul(m[3]);
      if (!child.is_array() || index >= child.size())
        throw InputError(fmt::format("{}: {}: no element {} in {}.{}", origin, path, index, doc, pattern));
      pattern += "[]";
      node = &child[index];
    } else {
      node = &child;
    }
    if (last) {
      const ParamSpec* spec = find_param(doc, pattern);
      if (!spec) throw InputError(fmt::format("{}: {}: names an object, not a value", origin, path));
      *node = parse_set_value(*spec, value, origin, path);
      check_value(*spec, *node, origin, path);
    }
  }
}

// ---- typed structs ------------------------------------------------------------------------------

template <typename T>
T get(const json& doc, const std::string& path) {
  return doc.at(key_pointer(path)).get<T>();
}

// hw.slow_chip_draw: a seeded fraction of the slice's chips, other than those hw.slow_chips names,
// made slow with a clock drawn uniformly between min and max. mt19937_64's sequence is fixed by
// the standard and the mapping to chips and clocks is written out here (not a library
// distribution, whose results differ between implementations), so a seed gives the same chips
// everywhere.
void draw_slow_chips(const json& draw, HwConfig& hw, const std::string& origin) {
  const double fraction = draw.at("fraction").get<double>();
  const double low = draw.at("core_freq_scale_min").get<double>(), high = draw.at("core_freq_scale_max").get<double>();
  if (low > high)
    fail(origin, "hw.slow_chip_draw.core_freq_scale_min",
         fmt::format("{} is above hw.slow_chip_draw.core_freq_scale_max ({})", low, high));
  std::vector<std::uint32_t> candidates;
  for (std::uint32_t chip = 0; chip < hw.chip_count(); ++chip)
    if (std::none_of(hw.slow_chips.begin(), hw.slow_chips.end(), [&](const SlowChip& s) { return s.chip == chip; }))
      candidates.push_back(chip);
  const auto count = std::min<std::size_t>(candidates.size(), static_cast<std::size_t>(std::llround(fraction * hw.chip_count())));
  if (count == 0) return;
  std::mt19937_64 rng(draw.at("seed").get<std::uint64_t>());
  for (std::size_t i = 0; i < count; ++i)  // a partial Fisher-Yates shuffle: the first `count` are drawn
    std::swap(candidates[i], candidates[i + rng() % (candidates.size() - i)]);
  std::vector<std::uint32_t> drawn(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(count));
  std::sort(drawn.begin(), drawn.end());
  for (std::uint32_t chip : drawn) {
    const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;  // in [0, 1)
    hw.slow_chips.push_back({chip, low + (high - low) * unit, 1.0});
  }
}

// The energy model needs both ends of the chip's power range; a typical figure alone is a
// reference, not a model.
void bind_chip_power(const json& d, const std::string& origin, ChipConfig& c) {
  const json& power = d.at("chip").at("power");
  const bool has_idle = power.contains("idle_w"), has_max = power.contains("max_w");
  if (has_idle != has_max)
    fail(origin, has_idle ? "hw.chip.power.max_w" : "hw.chip.power.idle_w",
         "missing: the power model needs both hw.chip.power.idle_w and hw.chip.power.max_w");
  if (has_idle) {
    ChipPower p;
    HwKeyReader(d).block("chip.power", p);  // through ChipPower's own declarations
    if (p.max_w < p.idle_w)
      fail(origin, "hw.chip.power.max_w", fmt::format("{} W is below hw.chip.power.idle_w ({} W)", p.max_w, p.idle_w));
    if (p.typical_w && (*p.typical_w < p.idle_w || *p.typical_w > p.max_w))
      fail(origin, "hw.chip.power.typical_w",
           fmt::format("{} W is outside hw.chip.power.idle_w to max_w ({} to {} W)", *p.typical_w, p.idle_w, p.max_w));
    c.power = p;
  }
}

std::vector<SlowChip> bind_slow_chips(const json& d) {
  std::vector<SlowChip> slow_chips;
  for (std::size_t i = 0; i < d.at("slow_chips").size(); ++i) {
    const json& slow = d.at("slow_chips")[i];
    slow_chips.push_back({slow.at("chip").get<std::uint32_t>(), slow.at("core_freq_scale").get<double>(),
                          slow.at("hbm_bw_scale").get<double>()});
  }
  return slow_chips;
}

std::vector<InjectedFault> bind_faults(const json& d) {
  std::vector<InjectedFault> faults;
  for (const json& fault : d.at("faults"))
    faults.push_back({fault.at("kind") == "dma_drop_chunk" ? FaultKind::DmaDropChunk : FaultKind::SkipCollective,
                      fault.at("chip").get<std::uint32_t>()});
  return faults;
}

std::vector<SlowLink> bind_slow_links(const json& d) {
  std::vector<SlowLink> slow_links;
  for (std::size_t i = 0; i < d.at("slow_links").size(); ++i) {
    const json& slow = d.at("slow_links")[i];
    const std::string direction = slow.at("direction").get<std::string>();
    slow_links.push_back({slow.at("chip").get<std::uint32_t>(), static_cast<std::uint8_t>(direction[0] - 'x'),
                          direction[1] == '+', slow.at("bw_scale").get<double>()});
  }
  return slow_links;
}

void check_hbm_timing(const HbmTimingConfig& t, const std::string& origin) {
  // Refreshing longer than the interval between refreshes would leave the banks no time at all.
  if (t.trfc_ns >= t.trefi_ns)
    fail(origin, "hw.hbm.timing.trfc_ns",
         fmt::format("a refresh of {} ns does not fit the {} ns between refreshes (tREFI, hw.hbm.timing.trefi_ns)",
                     t.trfc_ns, t.trefi_ns));
}

// Whether a slice larger than one pod is pods side by side along x, as many as hw.slice.max_pods
// allows (MLPerf's TPU v3 multipods); refuses one that is not.
bool is_multipod(const json& d, const std::string& origin, const HwConfig& hw, const std::string& topology) {
  const auto max_pods = get<std::uint32_t>(d, "slice.max_pods");
  const auto pod_text = get<std::string>(d, "slice.pod");
  if (max_pods <= 1 || pod_text.empty()) return false;
  std::vector<std::uint32_t> pod;
  try {
    pod = parse_topology(pod_text);
  } catch (const std::invalid_argument& e) {
    fail(origin, "hw.slice.pod", e.what());
  }
  const auto& dims = hw.slice_dims;
  const bool side_by_side = dims.size() == pod.size() && dims[0] % pod[0] == 0 && dims[0] / pod[0] <= max_pods &&
                            std::equal(dims.begin() + 1, dims.end(), pod.begin() + 1);
  if (!side_by_side) {
    std::string offered;
    for (std::uint32_t k = 2; k <= max_pods; ++k) {
      std::vector<std::uint32_t> shape = pod;
      shape[0] *= k;
      offered += (offered.empty() ? "" : ", ") + topology_string(shape);
    }
    fail(origin, "hw.slice.topology",
         fmt::format("a {} slice is more than one {} pod of {} chips (hw.chip.max_chips); {} pods join side by side along x: {} "
                     "(hw.slice.pod, hw.slice.max_pods)", topology, hw.name, hw.chip.max_chips, hw.name, offered));
  }
  return true;
}

// Sets hw.slices and hw.slice_dims; the shape must fit the chip, which hw.chip, hw.ici and hw.name
// already describe. Returns hw.slice.topology as written: later messages quote it as the user spelt it.
std::string bind_slice(const json& d, const std::string& origin, HwConfig& hw) {
  hw.slices = get<std::uint32_t>(d, "slice.count");
  const std::string topology = get<std::string>(d, "slice.topology");
  try {
    hw.slice_dims = parse_topology(topology);
  } catch (const std::invalid_argument& e) {
    fail(origin, "hw.slice.topology", e.what());
  }
  std::uint64_t chips = 1;  // at most 3 axes below 10^9 each: no overflow in 128 bits, capped in 64
  std::uint32_t long_axes = 0;
  for (auto dim : hw.slice_dims) {
    chips = static_cast<std::uint64_t>(std::min<unsigned __int128>(static_cast<unsigned __int128>(chips) * dim, ~std::uint64_t{0}));
    if (dim > 1) ++long_axes;
  }
  const bool multipod = chips > hw.chip.max_chips && is_multipod(d, origin, hw, topology);
  if (chips > hw.chip.max_chips && !multipod)
    fail(origin, "hw.slice.topology",
         fmt::format("a {} slice has {} chips; {} slices have at most {} (hw.chip.max_chips)", topology, chips, hw.name,
                     hw.chip.max_chips));
  const auto shapes = get<std::vector<std::string>>(d, "slice.shapes");
  const auto cube = get<std::uint32_t>(d, "slice.cube_multiple");
  if (!multipod && (!shapes.empty() || cube > 0)) {
    const bool listed = std::find(shapes.begin(), shapes.end(), topology_string(hw.slice_dims)) != shapes.end();
    const bool cubes = cube > 0 && hw.slice_dims.size() == 3 &&
                       std::all_of(hw.slice_dims.begin(), hw.slice_dims.end(), [&](std::uint32_t x) { return x % cube == 0; });
    if (!listed && !cubes) {
      std::string offered;
      for (const auto& s : shapes) offered += (offered.empty() ? "" : ", ") + s;
      if (cube > 0) offered += fmt::format("{}or AxBxC with every axis a multiple of {}", offered.empty() ? "" : ", ", cube);
      fail(origin, "hw.slice.topology",
           fmt::format("{} slices come in these shapes: {}; got {} (hw.slice.shapes)", hw.name, offered, topology));
    }
  }
  if (2 * long_axes > hw.ici.ports_per_chip)
    fail(origin, "hw.slice.topology",
         fmt::format("a {} slice needs {} ICI ports per chip; {} chips have {} (hw.ici.ports_per_chip)", topology,
                     2 * long_axes, hw.name, hw.ici.ports_per_chip));
  return topology;
}

void check_hbm_capacity_and_model(const HwConfig& hw, const std::string& origin) {
  if (hw.hbm.capacity_bytes < hw.chip.cores) fail(origin, "hw.hbm.capacity_bytes", "less than one byte per core");
  if (!memory_model_exists(hw.hbm.model)) {
    std::vector<std::string> names;
    for (const auto& entry : memory_models()) names.push_back(entry.first);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    fail(origin, "hw.hbm.model",
         fmt::format("expected a registered memory model ({}), got \"{}\"{}", list, hw.hbm.model, did_you_mean(hw.hbm.model, names)));
  }
}

// The knobs the chip's memory model declared, at the values the document gives them.
void bind_memory_model_keys(const json& d, HbmConfig& hbm) {
  for (const MemoryModelKey& key : memory_model_keys(hbm.model))
    hbm.model_keys[key.name] = get<double>(d, "hbm." + hbm.model + "." + key.name);
}

// `list`: "hw.slow_chips", "hw.faults" or "hw.slow_links", whose element `i` names `chip`.
void check_chip_in_slice(const HwConfig& hw, const std::string& topology, const std::string& origin, const char* list,
                         std::size_t i, std::uint32_t chip) {
  if (chip >= hw.chip_count())
    fail(origin, fmt::format("{}[{}].chip", list, i),
         fmt::format("chip {} is not in the {} slice (chips 0-{})", chip, topology, hw.chip_count() - 1));
}

void check_slow_chips(const HwConfig& hw, const std::string& topology, const std::string& origin) {
  for (std::size_t i = 0; i < hw.slow_chips.size(); ++i) {
    check_chip_in_slice(hw, topology, origin, "hw.slow_chips", i, hw.slow_chips[i].chip);
    for (std::size_t j = 0; j < i; ++j)
      if (hw.slow_chips[j].chip == hw.slow_chips[i].chip)
        fail(origin, fmt::format("hw.slow_chips[{}].chip", i), fmt::format("chip {} is listed twice", hw.slow_chips[i].chip));
  }
}

void check_faults(const HwConfig& hw, const std::string& topology, const std::string& origin) {
  for (std::size_t i = 0; i < hw.faults.size(); ++i) check_chip_in_slice(hw, topology, origin, "hw.faults", i, hw.faults[i].chip);
}

void check_slow_links(const HwConfig& hw, const std::string& topology, const std::string& origin) {
  if (hw.slow_links.empty()) return;
  const Torus torus = Torus::of(hw);
  for (std::size_t i = 0; i < hw.slow_links.size(); ++i) {
    const SlowLink& l = hw.slow_links[i];
    const std::string name = fmt::format("{}{}", "xyz"[l.axis], l.positive ? '+' : '-');
    check_chip_in_slice(hw, topology, origin, "hw.slow_links", i, l.chip);
    if (!torus.link_exists({l.chip, l.axis, l.positive}))
      fail(origin, fmt::format("hw.slow_links[{}].direction", i),
           fmt::format("chip {} of the {} slice has no link {} (links: {})", l.chip, topology, name,
                       link_names(torus, l.chip)));
    for (std::size_t j = 0; j < i; ++j)
      if (hw.slow_links[j].chip == l.chip && hw.slow_links[j].axis == l.axis && hw.slow_links[j].positive == l.positive)
        fail(origin, fmt::format("hw.slow_links[{}]", i), fmt::format("link {} of chip {} is listed twice", name, l.chip));
    if (l.bw_scale > 0) continue;
    // A link that is down is routed around the other way round its ring: there must be one.
    if (!torus.wraps(l.axis))
      fail(origin, fmt::format("hw.slow_links[{}].bw_scale", i),
           fmt::format("link {} of chip {} is down on an axis without wraparound, which would cut the {} slice in two "
                       "(a link can be down only on an axis that wraps)", name, l.chip, topology));
    const Coords at = torus.coords(l.chip);
    for (std::size_t j = 0; j < i; ++j) {
      const SlowLink& o = hw.slow_links[j];
      if (o.bw_scale > 0 || o.axis != l.axis) continue;
      const Coords other = torus.coords(o.chip);
      bool same_ring = true;
      for (std::size_t a = 0; a < torus.axes(); ++a) same_ring = same_ring && (a == l.axis || other[a] == at[a]);
      if (same_ring)
        fail(origin, fmt::format("hw.slow_links[{}].bw_scale", i),
             fmt::format("links of chips {} and {} are both down on one {} ring, which would cut it in two (at most one "
                         "link per ring can be down)", o.chip, l.chip, "xyz"[l.axis]));
    }
  }
}

void check_multislice(const HwConfig& hw, const std::string& origin) {
  if (hw.slices <= 1) return;
  if (hw.dcn.bw_gbps_per_chip <= 0)
    fail(origin, "hw.dcn.bw_gbps_per_chip",
         fmt::format("{} slices need the data-center network between them, and {} has no DCN bandwidth published; "
                     "set it (--set hw.dcn.bw_gbps_per_chip=GB/s per chip)", hw.slices, hw.name));
  // One slice stands for all: a chip or link unlike its peers in the other slices would make
  // them differ, which the simulation of one slice cannot show.
  const char* asymmetric = !hw.slow_chips.empty() ? "hw.slow_chips"
                           : !hw.slow_links.empty() ? "hw.slow_links"
                           : !hw.faults.empty()     ? "hw.faults"
                                                    : nullptr;
  if (asymmetric)
    fail(origin, "hw.slice.count",
         fmt::format("{} slices are simulated as one, so they must be identical; {} (or hw.slow_chip_draw) makes one "
                     "differ: not modelled with more than one slice", hw.slices, asymmetric));
}

void check_hbm_geometry(const HbmConfig& m, const std::string& origin) {
  if (m.channel_width_bits % 8 != 0)
    fail(origin, "hw.hbm.channel_width_bits", fmt::format("expected a multiple of 8, got {}", m.channel_width_bits));
  if (m.row_bytes % m.burst_bytes() != 0)
    fail(origin, "hw.hbm.row_bytes",
         fmt::format("expected a multiple of the {}-byte burst (channel_width_bits / 8 x burst_length), got {}",
                     m.burst_bytes(), m.row_bytes));
  try {
    HbmAddressMap check(m);
  } catch (const std::invalid_argument& e) {
    fail(origin, "hw.hbm.address_mapping", e.what());
  }
}

// The matmul engine's share (3/4) of vector memory must hold one double-buffered block of the
// smallest shape it tiles to (8 rows x one R x C weight tile) in f32, with its f32 results.
void check_vmem_holds_matmul_block(const CoreConfig& c, const std::string& origin) {
  const std::uint64_t r = c.mxu.rows, cols = c.mxu.cols;
  const std::uint64_t min_block = 2 * (8 * r * 4 + r * cols * 4 + 8 * cols * 4) + 2 * 8 * cols * 4;
  if (c.vmem_bytes / 4 * 3 < min_block)
    fail(origin, "hw.core.vmem_bytes",
         fmt::format("{} bytes cannot hold one double-buffered matmul block of the {}x{} array; expected at least {}",
                     c.vmem_bytes, r, cols, ceil_div<std::uint64_t>(min_block * 4, 3)));
}

// The order of these steps is the order errors are found in, and a document with several errors must
// always report the same one first: so it stays as it is, even where it splits a block's checks.
HwConfig build_hw(const json& d, const std::string& origin) {
  HwConfig hw;
  HwKeyReader reader(d);
  hw.declare_keys(reader);
  bind_chip_power(d, origin, hw.chip);
  hw.slow_chips = bind_slow_chips(d);
  hw.faults = bind_faults(d);
  hw.slow_links = bind_slow_links(d);
  check_hbm_timing(hw.hbm.timing, origin);
  const std::string topology = bind_slice(d, origin, hw);
  check_hbm_capacity_and_model(hw, origin);
  bind_memory_model_keys(d, hw.hbm);
  check_slow_chips(hw, topology, origin);
  draw_slow_chips(d.at("slow_chip_draw"), hw, origin);
  check_faults(hw, topology, origin);
  check_slow_links(hw, topology, origin);
  check_multislice(hw, origin);
  check_hbm_geometry(hw.hbm, origin);
  check_vmem_holds_matmul_block(hw.core, origin);
  return hw;
}

// A workload may name its model in a file another tool wrote ("model": {"onnx": "m.onnx"} or
// {"keras_json": "m.json"}). The file's input and layers replace the key, so that validation,
// overrides, the summary and effective_config.json all see tpusim's own layer list;
// model.imported_from records the file.
// `replace`: the key came from --set, and the file's model replaces the workload's.
void expand_imported_model(json& workload, const std::string& workload_path, const std::string& origin,
                           std::vector<std::string>& notes, std::vector<std::string>& files_read, bool replace = false) {
  if (!workload.is_object() || !workload.contains("model") || !workload["model"].is_object()) return;
  json& model = workload["model"];
  const bool onnx = model.contains("onnx"), keras = model.contains("keras_json");
  if (!onnx && !keras) return;
  if (onnx && keras) fail(origin, "workload.model.onnx", "give model.onnx or model.keras_json, not both");
  const std::string key = onnx ? "onnx" : "keras_json";
  if (!model[key].is_string() || model[key].get<std::string>().empty())
    fail(origin, "workload.model." + key, fmt::format("expected a file name, got {}", brief(model[key])));
  if (replace)
    for (const char* other : {"layers", "input_shape", "input_dtype", "imported_from"}) model.erase(other);
  for (const char* other : {"layers", "input_shape"})
    if (model.contains(other))
      fail(origin, std::string("workload.model.") + other, fmt::format("the model comes from model.{}: give one or the other", key));
  const std::string named = model[key].get<std::string>();
  fs::path file = named;
  if (file.is_relative() && !workload_path.empty()) file = fs::path(workload_path).parent_path() / file;
  ImportedModel imported;
  try {
    const std::string path = file.lexically_normal().string();
    if (onnx) check_input_file(path, 0);  // a missing file is named with what lies beside it
    imported = onnx ? read_onnx_model_file(path) : import_keras_model(read_json_file(path), path);
    files_read.push_back(path);
  } catch (const std::exception& e) {  // the file's own error (InputError) or the importer's
    throw InputError(fmt::format("{} (workload.model.{} in {})", e.what(), key, origin));
  }
  model.erase(key);
  model["input_shape"] = imported.model["input_shape"];
  if (!model.contains("input_dtype")) model["input_dtype"] = imported.model["input_dtype"];
  model["layers"] = imported.model["layers"];
  model["imported_from"] = named;
  for (const auto& note : imported.notes) notes.push_back(fmt::format("{}: {}", named, note));
}

// training.remat_custom: MaxText's checkpoint names, each "device", "offload" or "remat". tpusim
// computes Q, K and V in one matmul and a gated MLP's first two in one group, so names that
// share one of its results must agree.
constexpr std::string_view kKeepNames[] = {"remat", "device", "offload"};  // in Keep's order

RematCustom parse_remat_custom(const json& names, RematPolicy policy, const std::string& origin) {
  const std::string path = "workload.training.remat_custom";
  RematCustom custom;
  if (names.empty()) return custom;
  if (policy != RematPolicy::Custom)
    fail(origin, path, "names what remat_policy custom keeps; set training.remat_policy to custom, or leave it empty");
  struct Target {
    Keep* keep;
    const char* result;
  };
  const std::map<std::string, Target> targets = {
      {"decoder_layer_input", {&custom.decoder_layer_input, "segment input"}},
      {"query_proj", {&custom.qkv, "qkv"}},
      {"key_proj", {&custom.qkv, "qkv"}},
      {"value_proj", {&custom.qkv, "qkv"}},
      {"qkv_proj", {&custom.qkv, "qkv"}},
      {"context", {&custom.context, "context"}},
      {"out_proj", {&custom.out_proj, "out_proj"}},
      {"mlpwi", {&custom.mlpwi, "mlpwi"}},
      {"mlpwi_0", {&custom.mlpwi, "mlpwi"}},
      {"mlpwi_1", {&custom.mlpwi, "mlpwi"}},
      {"mlpwo", {&custom.mlpwo, "mlpwo"}},
  };
  std::map<std::string, std::pair<std::string, Keep>> set_by;  // result -> the first name that set it
  for (const auto& [name, value] : names.items()) {
    const auto target = targets.find(name);
    if (target == targets.end()) {
      std::string known;
      for (const auto& [k, t] : targets) known += (known.empty() ? "" : ", ") + k;
      fail(origin, path + "." + name, "expected one of MaxText's checkpoint names tpusim's layers have: " + known);
    }
    const auto text = value.get<std::string>();
    const auto named = std::find(std::begin(kKeepNames), std::end(kKeepNames), text);
    if (named == std::end(kKeepNames))
      fail(origin, path + "." + name, fmt::format("expected \"device\", \"offload\" or \"remat\", got \"{}\"", text));
    const auto keep = static_cast<Keep>(named - std::begin(kKeepNames));
    if (name == "decoder_layer_input" && keep == Keep::Remat)
      fail(origin, path + "." + name, "a segment's input is the checkpoint remat starts from: expected \"device\" or \"offload\"");
    const auto [first, inserted] = set_by.emplace(target->second.result, std::make_pair(name, keep));
    if (!inserted && first->second.second != keep)
      fail(origin, path + "." + name,
           fmt::format("\"{}\" disagrees with {}'s \"{}\": tpusim computes them as one result", text, first->second.first,
                       kKeepNames[static_cast<int>(first->second.second)]));
    *target->second.keep = keep;
  }
  return custom;
}

// A window key as validation left it: absent (0), one number (square) or [height, width].
WindowSize window(const json& layer, const char* key) {
  if (!layer.contains(key)) return {};
  const json& v = layer.at(key);
  if (v.is_array()) return {v.at(0).get<std::uint64_t>(), v.at(1).get<std::uint64_t>()};
  return WindowSize::square(v.get<std::uint64_t>());
}

Workload build_workload(const json& d, const std::string& origin) {
  Workload w;
  w.name = get<std::string>(d, "name");
  if (!std::regex_match(w.name, std::regex("[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")))
    fail(origin, "workload.name", fmt::format("expected 1 to 100 letters, digits, '_', '-' or '.' (it names the default output directory), got \"{}\"", w.name));
  w.input_shape = get<std::vector<std::uint64_t>>(d, "model.input_shape");
  w.input_dtype = get<std::string>(d, "model.input_dtype");
  const json& layers = d.at("model").at("layers");
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const json& l = layers[i];
    const std::string at = fmt::format("workload.model.layers[{}]", i);
    LayerSpec spec;
    spec.type = l.at("type").get<std::string>();
    const LayerKind& kind = layer_kind(spec.type);  // the type is one of the registry's: checked against the parameter table
    std::vector<std::string> allowed = kind.keys(), required = kind.required_keys(), own;
    for (const ParamSpec& key : kind.own_keys()) {
      own.push_back(layer_key_name(key));
      if (key.default_value.is_null()) required.push_back(own.back());  // the others' defaults are filled in by now
    }
    allowed.insert(allowed.end(), own.begin(), own.end());
    for (const auto& [key, value] : l.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      const auto& every = keys_of_every_layer();
      if (std::find(every.begin(), every.end(), key) != every.end()) continue;
      const ParamSpec* p = find_param("workload", "model.layers[]." + key);
      if (p && !p->default_value.is_null() && value == p->default_value) continue;  // a default filled in
      fail(origin, at + "." + key, fmt::format("not a key of a {} layer", spec.type));
    }
    for (const auto& key : required)
      if (!l.contains(key)) fail(origin, at + "." + key, fmt::format("missing required key for a {} layer ({})", spec.type,
                                                                      find_param("workload", "model.layers[]." + key)->description));
    for (const std::string& name : own) spec.own[name] = l.at(name);
    spec.name = l.at("name").get<std::string>();
    if (l.contains("inputs")) spec.inputs = l.at("inputs").get<std::vector<std::string>>();
    spec.trainable = l.at("trainable").get<bool>();
    spec.activation = l.at("activation").get<std::string>();
    spec.use_bias = l.at("use_bias").get<bool>();
    spec.units = l.value("units", std::uint64_t{0});
    spec.tied_weights = l.at("tied_weights").get<bool>();
    spec.filters = l.value("filters", std::uint64_t{0});
    spec.kernel = window(l, "kernel");
    spec.strides = window(l, "strides");
    spec.dilation = window(l, "dilation");
    spec.groups = l.at("groups").get<std::uint64_t>();
    spec.depth_multiplier = l.at("depth_multiplier").get<std::uint64_t>();
    spec.padding = l.at("padding").get<std::string>();
    if (l.contains("pads")) spec.pads = l.at("pads").get<std::vector<std::uint64_t>>();
    if (l.contains("pads") && spec.pads.size() != 4 && spec.pads.size() != 2)
      fail(origin, at + ".pads", fmt::format("expected [top, bottom, left, right] (or [before, after] over a sequence), got {} values",
                                             spec.pads.size()));
    spec.pool = window(l, "pool");
    spec.heads = l.value("heads", std::uint64_t{0});
    spec.kv_heads = l.at("kv_heads").get<std::uint64_t>();
    spec.head_dim = l.at("head_dim").get<std::uint64_t>();
    spec.rotary = l.at("rotary").get<bool>();
    spec.causal = l.at("causal").get<bool>();
    spec.vocab = l.value("vocab", std::uint64_t{0});
    spec.dim = l.value("dim", std::uint64_t{0});
    spec.positions = l.at("positions").get<std::uint64_t>();
    spec.segments = l.at("segments").get<std::uint64_t>();
    spec.ceil_mode = l.at("ceil_mode").get<bool>();
    if (l.contains("shape")) spec.shape = l.at("shape").get<std::vector<std::uint64_t>>();
    spec.tokens = l.value("tokens", std::uint64_t{0});
    spec.experts = l.value("experts", std::uint64_t{0});
    w.layers.push_back(spec);
  }
  w.loss = get<std::string>(d, "model.loss");
  w.global_batch = get<std::uint64_t>(d, "training.global_batch");
  w.per_replica_batch = get<std::uint64_t>(d, "training.per_replica_batch");
  if (w.global_batch == 0 && w.per_replica_batch == 0)
    fail(origin, "workload.training.global_batch", "expected a positive batch (set global_batch or per_replica_batch)");
  if (w.global_batch > 0 && w.per_replica_batch > 0)
    fail(origin, "workload.training.per_replica_batch", "set either global_batch or per_replica_batch, not both");
  w.precision = get<std::string>(d, "training.precision") == "mixed_bfloat16" ? Precision::MixedBfloat16 : Precision::Float32;
  const auto fp32 = get<std::string>(d, "training.fp32_matmul_precision");
  w.fp32_matmul_passes = fp32 == "default" ? 1 : fp32 == "high" ? 3 : 6;
  w.optimizer = get<std::string>(d, "training.optimizer.name");
  w.learning_rate = get<double>(d, "training.optimizer.learning_rate");
  w.steps = get<std::uint32_t>(d, "training.steps");
  w.dataset_examples = get<std::uint64_t>(d, "training.dataset_examples");
  w.epochs = get<std::uint32_t>(d, "training.epochs");
  w.steps_per_execution = get<std::uint32_t>(d, "training.steps_per_execution");
  w.all_reduce_algorithm = parse_collective_algorithm(get<std::string>(d, "training.all_reduce.algorithm"));
  w.all_reduce_chunk_bytes = get<std::uint64_t>(d, "training.all_reduce.chunk_bytes");
  w.all_reduce_bucket_bytes = get<std::uint64_t>(d, "training.all_reduce.bucket_bytes");
  w.all_reduce_overlap = get<bool>(d, "training.all_reduce.overlap");
  w.all_reduce_bf16 = get<std::string>(d, "training.all_reduce.dtype") == "bfloat16";
  const auto clipping = get<std::string>(d, "training.gradient_clipping");
  w.gradient_clipping = clipping == "before_all_reduce"  ? GradientClipping::BeforeAllReduce
                        : clipping == "after_all_reduce" ? GradientClipping::AfterAllReduce
                                                         : GradientClipping::None;
  w.weight_update_sharding = get<bool>(d, "training.weight_update_sharding");
  w.batch_norm_group = get<std::uint32_t>(d, "training.batch_norm_group");
  if (w.batch_norm_group & (w.batch_norm_group - 1))
    fail(origin, "workload.training.batch_norm_group", fmt::format("expected a power of two, got {}", w.batch_norm_group));
  w.fsdp = get<bool>(d, "training.fsdp");
  w.remat = get<bool>(d, "training.remat");
  w.mesh_model_axes = get<std::string>(d, "training.mesh.model");
  w.mesh_fsdp_axes = get<std::string>(d, "training.mesh.fsdp");
  w.mesh_expert_axes = get<std::string>(d, "training.mesh.expert");
  w.mesh_pipeline_axes = get<std::string>(d, "training.mesh.pipeline");
  w.pipeline_microbatches = get<std::uint32_t>(d, "training.pipeline.microbatches");
  w.pipeline_repeats = get<std::uint32_t>(d, "training.pipeline.repeats");
  w.sequence_parallel = get<bool>(d, "training.mesh.sequence_parallel");
  w.collective_matmul = get<bool>(d, "training.mesh.collective_matmul");
  w.remat_adds_per_segment = get<std::uint32_t>(d, "training.remat_adds_per_segment");
  const auto policy = get<std::string>(d, "training.remat_policy");
  w.remat_policy = policy == "minimal"                ? RematPolicy::Minimal
                   : policy == "save_dot_except_mlpwi" ? RematPolicy::SaveDotExceptMlpIn
                   : policy == "custom"                ? RematPolicy::Custom
                                                       : RematPolicy::Full;
  w.remat_custom = parse_remat_custom(get<json>(d, "training.remat_custom"), w.remat_policy, origin);
  if (w.remat_policy == RematPolicy::Custom && !w.remat)
    fail(origin, "workload.training.remat_policy", "custom says what remat keeps of each layer; set training.remat too");
  w.flash_attention = get<bool>(d, "training.flash_attention");
  w.matmul_output_fusion = get<bool>(d, "training.matmul_output_fusion");
  const std::string quantization = get<std::string>(d, "training.quantization");
  w.quantized_type = quantization == "none" ? DType::BF16 : quantization == "fp8" ? DType::Fp8 : DType::Int8;
  w.quantized_weight_gradients = quantization == "int8" || quantization == "fp8";
  w.quantized_fixed_scales = get<std::string>(d, "training.quantization_calibration") == "fixed";
  if (w.quantized_fixed_scales && !w.quantized())
    fail(origin, "workload.training.quantization_calibration", "fixes the scales of quantized matmuls; set training.quantization too");
  if (w.fsdp && w.weight_update_sharding)
    fail(origin, "workload.training.fsdp", "fsdp shards the weights and their update already; set it or weight_update_sharding, not both");
  if (!w.mesh_fsdp_axes.empty() && !w.fsdp)
    fail(origin, "workload.training.mesh.fsdp", "names the axes fsdp shards the weights over; set training.fsdp too, or leave it empty");
  w.fusion = get<bool>(d, "training.fusion");
  w.eval_examples = get<std::uint64_t>(d, "training.eval.examples");
  w.eval_every_steps = get<double>(d, "training.eval.every_steps");
  w.eval_host_overhead_s = get<double>(d, "training.eval.host_overhead_s");
  if (w.eval_examples > 0 && w.eval_every_steps <= 0)
    fail(origin, "workload.training.eval.every_steps", "expected a positive number of steps between evaluations when training.eval.examples is set");
  w.failures_per_chip_hour = get<double>(d, "training.goodput.failures_per_chip_hour");
  w.checkpoint_storage_gbps_per_host = get<double>(d, "training.goodput.checkpoint_storage_gbps_per_host");
  w.restart_s = get<double>(d, "training.goodput.restart_s");
  w.checkpoint_interval_s = get<double>(d, "training.goodput.checkpoint_interval_s");
  if (w.failures_per_chip_hour > 0 && w.checkpoint_storage_gbps_per_host <= 0)
    fail(origin, "workload.training.goodput.checkpoint_storage_gbps_per_host",
         "expected the hosts' bandwidth to the checkpoint's storage when training.goodput.failures_per_chip_hour is set");
  w.host_samples_per_s = get<double>(d, "input_pipeline.host_samples_per_s");
  w.prefetch_batches = get<std::uint32_t>(d, "input_pipeline.prefetch_batches");
  w.bytes_per_sample = get<std::uint64_t>(d, "input_pipeline.bytes_per_sample");
  w.batch_jitter_mean_s = get<double>(d, "input_pipeline.batch_jitter_mean_s");
  w.jitter_seed = get<std::uint64_t>(d, "input_pipeline.jitter_seed");
  return w;
}

bool looks_like_file(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 5 && s.compare(s.size() - 5, 5, ".json") == 0);
}

}  // namespace

std::string preset_dir() {
  if (const char* env = std::getenv("TPUSIM_PRESET_DIR")) return env;
  return TPUSIM_PRESET_DIR;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(preset_dir(), ec))
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// "tpu_v2, tpu_v3, ..." when `name` is not a preset; empty when it is.
std::string presets_if_unknown(const std::string& name) {
  const auto names = preset_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return "";
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  return known;
}

}  // namespace

std::vector<std::string> input_files(const ConfigRequest& request) {
  std::vector<std::string> files;
  if (looks_like_file(request.hw)) files.push_back(request.hw);
  if (!request.workload_path.empty()) files.push_back(request.workload_path);
  return files;
}

json load_hw_document(const std::string& name_or_file, std::vector<std::string>* files_read) {
  std::string file = name_or_file;
  if (!looks_like_file(name_or_file)) {
    std::string preset = name_or_file;
    if (const auto accelerator = parse_accelerator(name_or_file, "--hw")) preset = accelerator->preset;
    if (const std::string known = presets_if_unknown(preset); !known.empty())
      throw InputError(fmt::format("--hw {}: unknown hardware preset{} (expected one of: {}, a Cloud TPU accelerator type "
                                   "such as v4-32 or v5e-256, or a JSON file)",
                                   name_or_file, did_you_mean(name_or_file, preset_names()), known));
    file = preset_dir() + "/" + preset + ".json";
  }
  json doc = read_json_file(file);
  if (files_read) files_read->push_back(file);
  if (!doc.is_object()) throw InputError(fmt::format("{}: hw: expected a JSON object, got {}", file, brief(doc)));
  if (doc.contains("base")) {
    const json& base = doc["base"];
    if (!base.is_string() || looks_like_file(base.get<std::string>()))
      throw InputError(fmt::format("{}: hw.base: expected the name of a preset, got {}", file, brief(base)));
    if (const std::string known = presets_if_unknown(base.get<std::string>()); !known.empty())
      throw InputError(fmt::format("{}: hw.base: unknown hardware preset \"{}\" (expected one of: {})", file,
                                   base.get<std::string>(), known));
    json merged = load_hw_document(base.get<std::string>(), files_read);
    merged.erase("base");
    doc.erase("base");
    merged.merge_patch(doc);
    return merged;
  }
  return doc;
}

// Keys of which a workload sets one: overriding one clears the other, since the override says
// which the user means, and the summary says what was cleared.
static void clear_the_other_of_a_pair(Config& config, const std::string& assignment) {
  static const std::pair<const char*, const char*> kPairs[] = {
      {"training.global_batch", "training.per_replica_batch"},
      {"training.per_replica_batch", "training.global_batch"}};
  const std::string path = assignment.substr(0, assignment.find('='));
  for (const auto& [set, other] : kPairs) {
    if (path != std::string("workload.") + set) continue;
    const json::json_pointer set_at("/" + std::regex_replace(set, std::regex("\\."), "/"));
    const json::json_pointer other_at("/" + std::regex_replace(other, std::regex("\\."), "/"));
    json& doc = config.workload_doc;
    if (!doc.contains(set_at) || !doc.at(set_at).is_number_integer() || doc.at(set_at).get<std::int64_t>() <= 0) continue;
    if (!doc.contains(other_at) || !doc.at(other_at).is_number_integer() || doc.at(other_at).get<std::int64_t>() == 0)
      continue;
    config.notes.push_back(fmt::format("--set {} cleared workload.{} (was {}): the two are exclusive", assignment, other,
                                       doc.at(other_at).dump()));
    doc[other_at] = 0;
  }
}

bool is_effective_config(const json& doc) {
  return doc.is_object() && doc.size() == 2 && doc.contains("hw") && doc.contains("workload") && doc["hw"].is_object() &&
         doc["workload"].is_object();
}

Config load_config(const ConfigRequest& request_as_given) {
  Config config;
  // A Cloud TPU accelerator type names a preset and, with a count, a slice: "--hw v4-32" is
  // tpu_v4 in 2x2x4 unless --topology gives another shape of the same 16 chips; "--topology
  // v4-32" is that shape on tpu_v4 hardware.
  ConfigRequest request = request_as_given;
  std::optional<Accelerator> accelerator;
  if (!looks_like_file(request.hw)) accelerator = parse_accelerator(request.hw, "--hw");
  if (const auto shape = parse_accelerator(request.topology, "--topology")) {
    if (shape->topology.empty())
      throw InputError(fmt::format("--topology {}: names hardware, not a slice (expected a shape such as 4x4, or an "
                                   "accelerator type such as v4-32)", request.topology));
    if (request.hw_given && accelerator && accelerator->preset != shape->preset)
      throw InputError(fmt::format("--topology {}: a {} slice, but --hw is {}", request.topology, shape->preset,
                                   request.hw == accelerator->preset ? request.hw
                                                                     : request.hw + " (" + accelerator->preset + ")"));
    if (request.hw_given && !accelerator && !looks_like_file(request.hw) && request.hw != shape->preset)
      throw InputError(fmt::format("--topology {}: a {} slice, but --hw is {} (give --hw {} or a shape such as 4x4)",
                                   request.topology, shape->preset, request.hw, request.topology));
    if (!request.hw_given || (accelerator && accelerator->topology.empty())) {
      request.hw = shape->preset;
      request.hw_given = true;
    }
    accelerator = shape;
    request.topology = shape->topology;
  } else if (accelerator && !accelerator->topology.empty()) {
    if (request.topology.empty()) {
      request.topology = accelerator->topology;
    } else {
      std::uint64_t chips = 0;
      try {
        chips = 1;
        for (auto d : parse_topology(request.topology)) chips *= d;
      } catch (const std::invalid_argument&) {
        chips = 0;  // the topology's own check names the problem
      }
      if (chips != 0 && chips != accelerator->chips)
        throw InputError(fmt::format("--topology {}: {} chips, but --hw {} is {} chips ({} counts {})", request.topology, chips,
                                     request.hw, accelerator->chips, request.hw, accelerator->counts));
    }
  }
  if (accelerator && !looks_like_file(request.hw)) request.hw = accelerator->preset;
  if (accelerator && !accelerator->topology.empty()) {
    config.accelerator = accelerator->name;
    config.accelerator_note = describe(*accelerator);
    if (request.topology != accelerator->topology) config.accelerator_note += fmt::format(", shaped {} by --topology", request.topology);
  }
  std::string hw_origin = looks_like_file(request.hw) ? request.hw : "hw/presets/" + request.hw + ".json";
  config.input_files = input_files(request);
  // Hardware asked for is loaded first, so that a bad --hw is the error whatever the workload.
  if (request.hw_given) config.hw_doc = load_hw_document(request.hw, &config.files_read);
  bool hw_loaded = request.hw_given;
  if (!request.workload_path.empty()) {
    config.workload_doc = read_json_file(request.workload_path);
    config.files_read.push_back(request.workload_path);
    // DIR/effective_config.json (or dump-config's output) reruns as it is: the workload and the
    // hardware it was simulated on, unless --hw asks for other hardware.
    if (is_effective_config(config.workload_doc)) {
      json both = std::move(config.workload_doc);
      config.workload_doc = std::move(both["workload"]);
      if (!request.hw_given) {
        config.hw_doc = std::move(both["hw"]);
        hw_origin = request.workload_path;
        hw_loaded = true;
      }
    }
    if (!config.workload_doc.is_object())
      throw InputError(fmt::format("{}: workload: expected a JSON object, got {}", request.workload_path, brief(config.workload_doc)));
    expand_imported_model(config.workload_doc, request.workload_path, request.workload_path, config.notes, config.files_read);
    // Checked before anything walks the layers: lowering takes about 5 KB a layer (100,000
    // activation layers: 8 s and 0.5 GB), and the zoo's largest model has a few hundred.
    constexpr std::size_t kMaxLayers = 100000;
    const json::json_pointer layers("/model/layers");
    if (config.workload_doc.contains(layers) && config.workload_doc.at(layers).is_array() &&
        config.workload_doc.at(layers).size() > kMaxLayers)
      fail(request.workload_path, "workload.model.layers",
           fmt::format("{} layers; tpusim takes at most {}", config.workload_doc.at(layers).size(), kMaxLayers));
  }
  if (!hw_loaded) config.hw_doc = load_hw_document(request.hw, &config.files_read);
  // Validate the documents as written first, so an error blames the file, then apply overrides.
  validate_object(config.hw_doc, "hw", "", "hw", hw_origin);
  if (!request.workload_path.empty()) validate_object(config.workload_doc, "workload", "", "workload", request.workload_path);
  if (!request.topology.empty()) apply_set(config.hw_doc, config.workload_doc, "hw.slice.topology=" + request.topology);
  if (request.slices > 0) apply_set(config.hw_doc, config.workload_doc, fmt::format("hw.slice.count={}", request.slices));
  for (const auto& s : request.sets) {
    apply_set(config.hw_doc, config.workload_doc, s);
    clear_the_other_of_a_pair(config, s);
  }
  if (!request.sets.empty() || !request.topology.empty()) {
    expand_imported_model(config.workload_doc, "", "--set overrides", config.notes, config.files_read, true);  // --set workload.model.keras_json=FILE
    // An override may replace a whole subtree (a list of layers): check the result as a whole.
    validate_object(config.hw_doc, "hw", "", "hw", "--set overrides");
    if (!request.workload_path.empty()) validate_object(config.workload_doc, "workload", "", "workload", "--set overrides");
  }

  // A source names one key or a group of them ("hbm.timing").
  for (const auto& item : config.hw_doc["sources"].items()) {
    const std::string& key = item.key();
    const bool names_keys = find_param("hw", key) ||
                            std::any_of(param_registry().begin(), param_registry().end(), [&](const ParamSpec& p) {
                              return p.doc == "hw" && p.path.rfind(key + ".", 0) == 0;
                            });
    if (!names_keys) fail(hw_origin, "hw.sources." + key, "names no hardware key or group of keys");
  }
  const std::string overrides = request.sets.empty() && request.topology.empty() ? hw_origin : hw_origin + " with overrides";
  config.hw = build_hw(config.hw_doc, overrides);
  config.origin = request.workload_path.empty() ? hw_origin : request.workload_path;
  if (!request.sets.empty() || !request.topology.empty()) config.origin += " with overrides";
  if (!request.workload_path.empty()) config.workload = build_workload(config.workload_doc, config.origin);
  // One slice stands for all: hosts whose batches come at random would make them differ.
  if (config.hw.slices > 1 && config.workload.batch_jitter_mean_s > 0)
    fail(config.origin, "workload.input_pipeline.batch_jitter_mean_s",
         fmt::format("{} slices are simulated as one, so their hosts must be identical; batch jitter makes them differ: not "
                     "modelled with more than one slice", config.hw.slices));
  return config;
}

}  // namespace tpusim
