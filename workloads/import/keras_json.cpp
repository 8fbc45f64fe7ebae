#include "workloads/import/keras_json.hpp"

#include "workloads/import/layer_list.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

// Keras layers this importer reads, and the tpusim kinds they become.
const std::vector<std::string>& supported_classes() {
  static const std::vector<std::string> classes = {
      "InputLayer", "Dense",    "Conv2D",       "BatchNormalization", "LayerNormalization", "Activation",
      "ReLU",       "Softmax",  "MaxPooling2D", "AveragePooling2D",   "GlobalAveragePooling2D", "Add",
      "Dropout",    "Flatten",  "ZeroPadding2D", "Embedding", "Concatenate", "Multiply", "DepthwiseConv2D",
      "Conv1D",     "MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D", "GlobalMaxPooling1D", "GlobalMaxPooling2D",
      "Reshape",    "Permute"};
  return classes;
}

// A size: Python's json writes positive ints as unsigned, a JSON built in C++ as signed.
bool whole(const json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0); }

// One layer of the file, with where it sits for error messages.
struct KerasLayer {
  std::size_t index = 0;  // in the flattened list
  std::string path;       // in the file: config.layers[i], or deeper inside a nested model
  std::string name, class_name;
  json config;
  std::vector<std::string> inputs;  // names of the layers it reads
  bool frozen = false;              // its own trainable false, or a nested model's around it
};

// A model used as a layer (a pretrained backbone inside a transfer-learning model).
bool is_model_class(const std::string& class_name) {
  return class_name == "Sequential" || class_name == "Functional" || class_name == "Model";
}

// A model's layer list; Keras before 2.2 wrote a Sequential's config as the list itself.
const json& layers_of(const json& config) {
  static const json none;
  return config.is_array() ? config : config.is_object() && config.contains("layers") ? config.at("layers") : none;
}

class Importer {
 public:
  Importer(const json& keras, std::string origin) : keras_(keras), origin_(std::move(origin)) {}

  ImportedModel run() {
    if (!keras_.is_object() || !keras_.contains("class_name") || !keras_.contains("config"))
      fail_top("expected a Keras model JSON object with \"class_name\" and \"config\" (what model.to_json() writes)");
    const std::string model_class = string_at(keras_, "class_name", "class_name");
    const json& config = keras_.at("config");
    const bool sequential = model_class == "Sequential";
    if (!is_model_class(model_class))
      fail_top(fmt::format("class_name: expected Sequential, Functional or Model, got \"{}\"", model_class));
    ImportedModel out;
    out.name = config.is_object() && config.contains("name") && config.at("name").is_string() ? config.at("name").get<std::string>()
                                                                                               : "keras_model";
    const std::string output = read_model(config, sequential, "config", {}, false, 0);
    if (input_shape_.empty()) fail_top("no layer gives the input's shape (an InputLayer, or batch_input_shape on the first layer)");
    const std::vector<const KerasLayer*> order = reachable_in_order(output, out.notes);
    out.model["input_shape"] = input_shape_;
    out.model["input_dtype"] = input_dtype_;
    out.model["layers"] = convert(order, out.notes);
    return out;
  }

 private:
  [[noreturn]] void fail_top(const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {}", origin_, what));
  }
  [[noreturn]] void fail(const KerasLayer& l, const std::string& what) const {
    throw std::invalid_argument(fmt::format("{}: {} (\"{}\", {}): {}", origin_, l.path, l.name, l.class_name, what));
  }

  std::string string_at(const json& j, const std::string& key, const std::string& path) const {
    if (!j.contains(key) || !j.at(key).is_string()) fail_top(fmt::format("{}: expected a string", path));
    return j.at(key).get<std::string>();
  }

  // ---- the file's layers and their connections ----

  // Reads a model's layers into the flattened list and returns the name of the layer whose output
  // is the model's. A nested model's layers join the list with its InputLayers standing for what
  // the nested model is called on (`outer_inputs`, empty at the top: the model input) and its
  // name standing for its output layer, as XLA sees one graph. `frozen`: a model around it has
  // trainable false, which Keras passes down to every layer inside.
  std::string read_model(const json& config, bool sequential, const std::string& path, const std::vector<std::string>& outer_inputs,
                         bool frozen, int depth) {
    const json& layers = layers_of(config);
    if (!layers.is_array() || layers.empty()) fail_top(path + ".layers: expected a non-empty list of layers");
    constexpr std::size_t kMaxLayers = 100000;
    constexpr int kMaxDepth = 16;
    if (layers_.size() + layers.size() > kMaxLayers)
      fail_top(fmt::format("{}.layers: more than {} layers in all; tpusim takes at most {}", path, kMaxLayers, kMaxLayers));
    if (depth > kMaxDepth) fail_top(fmt::format("{}: models nested more than {} deep", path, kMaxDepth));
    std::string previous = outer_inputs.empty() ? "" : outer_inputs[0];  // a Sequential's chain
    std::size_t inputs_seen = 0;
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const json& l = layers[i];
      KerasLayer layer;
      layer.index = layers_.size();
      layer.path = fmt::format("{}.layers[{}]", path, i);
      if (!l.is_object() || !l.contains("class_name") || !l.at("class_name").is_string() || !l.contains("config") ||
          !(l.at("config").is_object() || l.at("config").is_array()))
        fail_top(fmt::format("{}: expected an object with \"class_name\" and a \"config\" object", layer.path));
      layer.class_name = l.at("class_name").get<std::string>();
      layer.config = l.at("config");
      const json& name = l.contains("name") ? l.at("name") : layer.config.is_object() && layer.config.contains("name") ? layer.config.at("name") : json();
      layer.name = name.is_string() ? name.get<std::string>() : fmt::format("{}_{}", layer.class_name, layer.index);
      if (by_name_.count(layer.name) || alias_.count(layer.name)) fail(layer, "a second layer of this name (Keras names are unique)");
      layer.frozen = frozen || !flag(layer, "trainable", true);
      if (is_model_class(layer.class_name)) {
        // Called on the layer before it (in a Sequential) or on its inbound layers.
        std::vector<std::string> called_on;
        if (!sequential) called_on = inbound(layer, l);
        else if (!previous.empty()) called_on = {previous};
        const std::string output =
            read_model(layer.config, layer.class_name == "Sequential", layer.path + ".config", called_on, layer.frozen, depth + 1);
        alias_[layer.name] = output;
        previous = output;
        continue;
      }
      if (std::find(supported_classes().begin(), supported_classes().end(), layer.class_name) == supported_classes().end())
        fail(layer, fmt::format("tpusim does not import this layer class yet (it imports {}, and models nested as layers)",
                                fmt::join(supported_classes(), ", ")));
      if (!layer.config.is_object()) fail(layer, "expected a \"config\" object");
      if (layer.class_name == "InputLayer" && !outer_inputs.empty()) {
        // A nested model's input: what the model is called on.
        if (inputs_seen >= outer_inputs.size()) fail(layer, "the nested model has more inputs than it is called on");
        alias_[layer.name] = outer_inputs[inputs_seen++];
        continue;
      }
      if (sequential) {
        if (!previous.empty()) layer.inputs = {previous};
      } else {
        layer.inputs = inbound(layer, l);
      }
      if (outer_inputs.empty() && (layer.class_name == "InputLayer" || (sequential && previous.empty()))) read_input(layer);
      previous = layer.name;
      by_name_[layer.name] = layers_.size();
      layers_.push_back(std::move(layer));
    }
    if (sequential) {
      if (previous.empty() || previous == (outer_inputs.empty() ? "" : outer_inputs[0]))
        fail_top(path + ".layers: the model has no layer besides its input");
      return previous;
    }
    if (outer_inputs.empty()) input_name_ = io_layer(config, path, "input_layers");
    return io_layer(config, path, "output_layers");
  }

  // The model input's shape and dtype, from an InputLayer or a Sequential's first layer.
  void read_input(const KerasLayer& l) {
    const json& c = l.config;
    const char* key = c.contains("batch_input_shape") ? "batch_input_shape" : c.contains("batch_shape") ? "batch_shape" : nullptr;
    if (!key) {
      if (l.class_name == "InputLayer") fail(l, "expected batch_input_shape (Keras 2) or batch_shape (Keras 3)");
      return;  // a Sequential whose InputLayer comes first gives it there
    }
    if (!input_shape_.empty()) fail(l, "a second model input; tpusim imports models with one input");
    const json& shape = c.at(key);
    if (!shape.is_array() || shape.size() < 2) fail(l, fmt::format("{}: expected [batch, dims...]", key));
    for (std::size_t d = 1; d < shape.size(); ++d) {
      if (!whole(shape[d]) || shape[d].get<std::uint64_t>() == 0)
        fail(l, fmt::format("{}[{}]: expected a positive size, got {} (tpusim needs every dimension of a sample but the batch)",
                            key, d, shape[d].dump()));
      input_shape_.push_back(shape[d].get<std::uint64_t>());
    }
    const std::string dtype = c.contains("dtype") && c.at("dtype").is_string() ? c.at("dtype").get<std::string>() : "float32";
    static const std::map<std::string, std::string> kDtypes = {
        {"float32", "float32"}, {"bfloat16", "bfloat16"}, {"uint8", "uint8"}, {"int32", "int32"}, {"int64", "int32"}};
    const auto it = kDtypes.find(dtype);
    if (it == kDtypes.end()) fail(l, fmt::format("dtype: expected one of float32, bfloat16, uint8, int32, int64, got \"{}\"", dtype));
    input_dtype_ = it->second;
    if (l.class_name == "InputLayer") input_name_ = l.name;  // a Sequential's first layer is a layer too
  }

  // The layers a functional model's layer reads: Keras 2's [[["name", 0, 0, {}], ...]] or
  // Keras 3's [{"args": [tensor or [tensors]], "kwargs": {}}] with keras_history.
  std::vector<std::string> inbound(const KerasLayer& layer, const json& l) const {
    if (!l.contains("inbound_nodes")) fail(layer, "expected inbound_nodes (a functional model's layers name their inputs)");
    const json& calls = l.at("inbound_nodes");
    if (!calls.is_array()) fail(layer, "inbound_nodes: expected a list");
    if (calls.empty()) return {};
    if (calls.size() > 1) fail(layer, "the layer is called more than once (shared layers are not imported)");
    const json& call = calls[0];
    std::vector<std::string> names;
    auto history = [&](const json& t) {
      if (t.is_array() && !t.empty() && t[0].is_string()) return names.push_back(t[0].get<std::string>());
      if (t.is_object() && t.contains("config") && t.at("config").is_object() && t.at("config").contains("keras_history") &&
          t.at("config").at("keras_history").is_array() && !t.at("config").at("keras_history").empty() &&
          t.at("config").at("keras_history")[0].is_string())
        return names.push_back(t.at("config").at("keras_history")[0].get<std::string>());
      fail(layer, fmt::format("inbound_nodes: expected [layer_name, node, tensor, kwargs] or a Keras tensor, got {}",
                              t.dump().substr(0, 80)));
    };
    if (call.is_array()) {
      for (const json& t : call) history(t);
    } else if (call.is_object() && call.contains("args") && call.at("args").is_array()) {
      for (const json& arg : call.at("args")) {
        if (arg.is_array())
          for (const json& t : arg) history(t);
        else
          history(arg);
      }
    } else {
      fail(layer, "inbound_nodes[0]: expected a list of inputs (Keras 2) or {\"args\", \"kwargs\"} (Keras 3)");
    }
    for (auto& name : names) {
      name = resolve(name);
      if (!by_name_.count(name)) fail(layer, fmt::format("reads \"{}\", which no earlier layer is named", name));
    }
    return names;
  }

  std::string io_layer(const json& config, const std::string& path, const char* key) const {
    if (!config.is_object() || !config.contains(key) || !config.at(key).is_array() || config.at(key).empty())
      fail_top(fmt::format("{}.{}: expected a list naming the model's {}", path, key, key));
    const json& list = config.at(key);
    if (list.size() > 1 && !(list[0].is_string()))
      fail_top(fmt::format("{}.{}: {} of them; tpusim imports models with one input and one output", path, key, list.size()));
    // [["name", 0, 0]] (Keras 2) or ["name", 0, 0] (Keras 3 with one tensor)
    const json& first = list[0].is_array() ? list[0] : list;
    if (first.empty() || !first[0].is_string()) fail_top(fmt::format("{}.{}: expected [\"layer_name\", 0, 0]", path, key));
    const std::string name = resolve(first[0].get<std::string>());
    if (!by_name_.count(name)) fail_top(fmt::format("{}.{}: no layer is named \"{}\"", path, key, name));
    return name;
  }

  // The layer a name stands for: a nested model's output layer, or what a nested model's input
  // is called on.
  std::string resolve(std::string name) const {
    for (auto it = alias_.find(name); it != alias_.end(); it = alias_.find(name)) name = it->second;
    return name;
  }

  // The layers the output depends on, in the file's order where it is topological; the rest
  // (a branch nothing reads) are dropped with a note.
  std::vector<const KerasLayer*> reachable_in_order(const std::string& output, std::vector<std::string>& notes) const {
    std::vector<bool> needed(layers_.size(), false);
    std::vector<std::size_t> stack = {by_name_.at(output)};
    while (!stack.empty()) {
      const std::size_t i = stack.back();
      stack.pop_back();
      if (needed[i]) continue;
      needed[i] = true;
      for (const auto& name : layers_[i].inputs) stack.push_back(by_name_.at(name));
    }
    std::vector<std::string> dropped;
    for (const auto& l : layers_)
      if (!needed[l.index]) dropped.push_back(l.name);
    if (!dropped.empty())
      notes.push_back(fmt::format("dropped {} layer(s) the output does not depend on: {}", dropped.size(), fmt::join(dropped, ", ")));
    std::vector<const KerasLayer*> order;
    std::vector<bool> placed(layers_.size(), false);
    std::size_t remaining = static_cast<std::size_t>(std::count(needed.begin(), needed.end(), true));
    while (remaining > 0) {
      bool progress = false;
      for (const auto& l : layers_) {
        if (!needed[l.index] || placed[l.index]) continue;
        if (!std::all_of(l.inputs.begin(), l.inputs.end(), [&](const std::string& n) { return placed[by_name_.at(n)]; })) continue;
        placed[l.index] = true;
        order.push_back(&l);
        --remaining;
        progress = true;
        break;  // restart from the first: keeps the file's order when it is already topological
      }
      if (!progress) fail_top("the layers' inbound_nodes form a cycle");
    }
    return order;
  }

  // ---- conversion ----

  static bool is(const KerasLayer& l, const char* cls) { return l.class_name == cls; }

  // A positive size from an int, or a square window's from [n, n].
  std::uint64_t size_of(const KerasLayer& l, const char* key, std::uint64_t fallback = 0) const {
    if (!l.config.contains(key) || l.config.at(key).is_null()) {
      if (fallback) return fallback;
      fail(l, fmt::format("{}: expected a size", key));
    }
    const json& v = l.config.at(key);
    if (whole(v) && v.get<std::uint64_t>() > 0) return v.get<std::uint64_t>();
    if (v.is_array() && v.size() == 2 && whole(v[0]) && v[0] == v[1] && v[0].get<std::uint64_t>() > 0)
      return v[0].get<std::uint64_t>();
    fail(l, fmt::format("{}: expected a positive size or a square [n, n], got {}", key, v.dump()));
  }

  // A window as the workload takes it: one number when square (or along a sequence, `rank` 1),
  // else [height, width]. Keras writes an int or a tuple: [n] for a 1D layer, [h, w] for a 2D one.
  ojson window_of(const KerasLayer& l, const char* key, std::uint64_t fallback, std::size_t rank) const {
    if (!l.config.contains(key) || l.config.at(key).is_null()) {
      if (fallback) return fallback;
      fail(l, fmt::format("{}: expected a size", key));
    }
    const json& v = l.config.at(key);
    auto positive = [&](const json& x) { return whole(x) && x.get<std::uint64_t>() > 0 && x.get<std::uint64_t>() <= 1024; };
    if (positive(v)) return v.get<std::uint64_t>();
    if (v.is_array() && v.size() == rank && std::all_of(v.begin(), v.end(), positive)) {
      if (rank == 1 || v[0] == v[1]) return v[0].get<std::uint64_t>();
      return ojson::array({v[0].get<std::uint64_t>(), v[1].get<std::uint64_t>()});
    }
    fail(l, fmt::format("{}: expected a size of 1 to 1024 or {}, got {}", key, rank == 1 ? "[n]" : "[height, width]", v.dump()));
  }

  // The spatial keys of a convolution or pool of `rank` spatial axes (1 or 2).
  void window_keys(const KerasLayer& l, ojson& out, std::size_t rank, const char* size_key, const char* out_key,
                   const std::map<std::string, std::vector<std::uint64_t>>& pads) const {
    channels_last(l);
    const bool pool = std::string(out_key) == "pool";
    out[out_key] = window_of(l, size_key, 0, rank);
    const bool strides_given = l.config.contains("strides") && !l.config.at("strides").is_null();
    out["strides"] = pool && !strides_given ? out[out_key] : window_of(l, "strides", 1, rank);  // a pool's default: its size
    if (!pool) {
      const ojson dilation = window_of(l, "dilation_rate", 1, rank);
      if (dilation != 1) out["dilation"] = dilation;
    }
    if (pads.count(l.name)) out["pads"] = pads.at(l.name);
    else out["padding"] = padding(l, rank == 1 && !pool);
  }

  std::string activation(const KerasLayer& l, const std::string& key = "activation") const {
    const json& v = l.config.contains(key) ? l.config.at(key) : json("linear");
    // Keras's names where they differ from tpusim's.
    static const std::map<std::string, std::string> kKnown = {
        {"linear", "linear"}, {"relu", "relu"},     {"sigmoid", "sigmoid"},         {"tanh", "tanh"},         {"gelu", "gelu"},
        {"softmax", "softmax"}, {"relu6", "relu6"}, {"hard_sigmoid", "hard_sigmoid"}, {"hard_swish", "hard_swish"},
        {"swish", "silu"},    {"silu", "silu"}};
    if (!v.is_string() || !kKnown.count(v.get<std::string>()))
      fail(l, fmt::format("{}: expected one of linear, relu, sigmoid, tanh, gelu, softmax, relu6, hard_sigmoid, hard_swish, "
                          "swish, silu, got {}", key, v.dump()));
    return kKnown.at(v.get<std::string>());
  }

  bool flag(const KerasLayer& l, const char* key, bool fallback) const {
    if (!l.config.contains(key)) return fallback;
    if (!l.config.at(key).is_boolean()) fail(l, fmt::format("{}: expected true or false", key));
    return l.config.at(key).get<bool>();
  }

  // `causal`: Conv1D's third choice.
  std::string padding(const KerasLayer& l, bool causal = false) const {
    const json& v = l.config.contains("padding") ? l.config.at("padding") : json("valid");
    if (v != "same" && v != "valid" && !(causal && v == "causal"))
      fail(l, fmt::format("padding: expected \"same\"{} or \"valid\", got {}", causal ? ", \"causal\"" : "", v.dump()));
    return v.get<std::string>();
  }

  void channels_last(const KerasLayer& l) const {
    if (l.config.contains("data_format") && l.config.at("data_format") != "channels_last")
      fail(l, "data_format: tpusim models channels_last (TPU layouts are channels-minor)");
  }

  // Normalization over the last axis only.
  void last_axis(const KerasLayer& l, std::size_t rank_hint) const {
    if (!l.config.contains("axis")) return;
    json axis = l.config.at("axis");
    if (axis.is_array() && axis.size() == 1) axis = axis[0];
    if (axis.is_number_integer() && (axis.get<std::int64_t>() == -1 || (rank_hint && axis.get<std::int64_t>() == static_cast<std::int64_t>(rank_hint))))
      return;
    fail(l, fmt::format("axis: tpusim normalizes over the last (channels or features) axis, got {}", l.config.at("axis").dump()));
  }

  // Reshape's target_shape, its -1 as tpusim's 0 (the size the others leave).
  ojson reshape_target(const KerasLayer& l) const {
    const json& v = l.config.contains("target_shape") ? l.config.at("target_shape") : json();
    if (!v.is_array() || v.empty() || v.size() > 16) fail(l, "target_shape: expected a list of sizes");
    ojson out = ojson::array();
    for (const json& d : v) {
      if (d.is_number_integer() && d.get<std::int64_t>() == -1) out.push_back(0);
      else if (whole(d) && d.get<std::uint64_t>() > 0 && d.get<std::uint64_t>() <= 1'000'000'000) out.push_back(d.get<std::uint64_t>());
      else fail(l, fmt::format("target_shape: expected positive sizes or one -1, got {}", v.dump()));
    }
    return out;
  }

  // Permute's dims (1-based over one sample's axes) as tpusim's 0-based perm.
  ojson permutation(const KerasLayer& l) const {
    const json& v = l.config.contains("dims") ? l.config.at("dims") : json();
    if (!v.is_array() || v.empty() || v.size() > 16) fail(l, "dims: expected a list of axes");
    ojson out = ojson::array();
    for (const json& d : v) {
      if (!whole(d) || d.get<std::uint64_t>() < 1 || d.get<std::uint64_t>() > 16) fail(l, fmt::format("dims: expected axes from 1, got {}", v.dump()));
      out.push_back(d.get<std::uint64_t>() - 1);
    }
    return out;
  }

  // [top, bottom, left, right] from ZeroPadding2D's padding: n, [h, w] or [[top, bottom], [left, right]].
  std::vector<std::uint64_t> zero_padding(const KerasLayer& l) const {
    const json& v = l.config.contains("padding") ? l.config.at("padding") : json(1);
    auto n = [&](const json& x) -> std::uint64_t {
      if (!whole(x) || x.get<std::uint64_t>() > 1024) fail(l, fmt::format("padding: expected sizes of 0 to 1024, got {}", v.dump()));
      return x.get<std::uint64_t>();
    };
    if (v.is_number()) return {n(v), n(v), n(v), n(v)};
    if (v.is_array() && v.size() == 2 && v[0].is_array() && v[1].is_array() && v[0].size() == 2 && v[1].size() == 2)
      return {n(v[0][0]), n(v[0][1]), n(v[1][0]), n(v[1][1])};
    if (v.is_array() && v.size() == 2) return {n(v[0]), n(v[0]), n(v[1]), n(v[1])};
    fail(l, fmt::format("padding: expected n, [h, w] or [[top, bottom], [left, right]], got {}", v.dump()));
  }

  ojson convert(const std::vector<const KerasLayer*>& order, std::vector<std::string>& notes) const {
    // Who reads each layer, to fold a zero padding into the window that reads it.
    std::map<std::string, std::vector<const KerasLayer*>> readers;
    for (const KerasLayer* l : order)
      for (const auto& in : l->inputs) readers[in].push_back(l);
    std::map<std::string, std::string> alias;              // a folded padding -> what it pads
    std::map<std::string, std::vector<std::uint64_t>> pads;  // a window layer -> the padding folded into it
    ojson layers = ojson::array();
    std::size_t folded = 0, frozen_batch_norms = 0;
    auto source = [&](const std::string& name) {
      std::string n = name;
      while (alias.count(n)) n = alias.at(n);
      return n == input_name_ ? std::string() : n;
    };
    for (const KerasLayer* lp : order) {
      const KerasLayer& l = *lp;
      if (is(l, "InputLayer")) continue;
      std::vector<std::string> inputs;
      for (const auto& in : l.inputs) inputs.push_back(source(in));
      if (inputs.empty()) inputs.push_back("");  // a Sequential's first layer
      if (is(l, "ZeroPadding2D")) {
        const auto& r = readers[l.name];
        const bool foldable = r.size() == 1 &&
                              (is(*r[0], "Conv2D") || is(*r[0], "DepthwiseConv2D") || is(*r[0], "MaxPooling2D") ||
                               is(*r[0], "AveragePooling2D")) &&
                              padding(*r[0]) == "valid";
        if (!foldable)
          fail(l, "a zero padding is imported folded into the one Conv2D or pooling layer with padding \"valid\" that reads it, "
                  "as XLA folds it into that window's padding; this one feeds something else");
        channels_last(l);
        alias[l.name] = l.inputs.at(0);
        pads[r[0]->name] = zero_padding(l);
        ++folded;
        continue;
      }
      ojson out;
      out["name"] = l.name;
      const json& c = l.config;
      if (is(l, "Dense")) {
        out["type"] = "dense";
        out["units"] = size_of(l, "units");
        out["activation"] = activation(l);
        out["use_bias"] = flag(l, "use_bias", true);
      } else if (is(l, "Conv2D") || is(l, "Conv1D")) {
        out["type"] = is(l, "Conv2D") ? "conv2d" : "conv1d";
        out["filters"] = size_of(l, "filters");
        window_keys(l, out, is(l, "Conv2D") ? 2 : 1, "kernel_size", "kernel", pads);
        const std::uint64_t groups = c.contains("groups") && whole(c.at("groups")) ? c.at("groups").get<std::uint64_t>() : 1;
        if (groups != 1) out["groups"] = groups;
        out["activation"] = activation(l);
        out["use_bias"] = flag(l, "use_bias", true);
      } else if (is(l, "DepthwiseConv2D")) {
        out["type"] = "depthwise_conv2d";
        window_keys(l, out, 2, "kernel_size", "kernel", pads);
        if (c.contains("depth_multiplier") && size_of(l, "depth_multiplier") != 1) out["depth_multiplier"] = size_of(l, "depth_multiplier");
        out["activation"] = activation(l);
        out["use_bias"] = flag(l, "use_bias", true);
      } else if (is(l, "BatchNormalization") || is(l, "LayerNormalization")) {
        last_axis(l, is(l, "BatchNormalization") ? input_shape_.size() : 0);
        if (!flag(l, "center", true) || !flag(l, "scale", true))
          fail(l, "center and scale: tpusim's normalizations have both (gamma and beta)");
        out["type"] = is(l, "BatchNormalization") ? "batch_norm" : "layer_norm";
      } else if (is(l, "Activation")) {
        out["type"] = "activation";
        out["activation"] = activation(l);
      } else if (is(l, "ReLU")) {
        const bool plain = (!c.contains("max_value") || c.at("max_value").is_null()) &&
                           c.value("negative_slope", 0.0) == 0.0 && c.value("threshold", 0.0) == 0.0;
        if (!plain) fail(l, "a capped, leaky or thresholded ReLU is not modelled (plain ReLU only)");
        out["type"] = "activation";
        out["activation"] = "relu";
      } else if (is(l, "Softmax")) {
        last_axis(l, 0);
        out["type"] = "activation";
        out["activation"] = "softmax";
      } else if (is(l, "MaxPooling2D") || is(l, "AveragePooling2D") || is(l, "MaxPooling1D") || is(l, "AveragePooling1D")) {
        out["type"] = is(l, "MaxPooling2D") || is(l, "MaxPooling1D") ? "max_pool" : "avg_pool";
        window_keys(l, out, is(l, "MaxPooling2D") || is(l, "AveragePooling2D") ? 2 : 1, "pool_size", "pool", pads);
      } else if (is(l, "GlobalAveragePooling2D") || is(l, "GlobalAveragePooling1D") || is(l, "GlobalMaxPooling2D") ||
                 is(l, "GlobalMaxPooling1D")) {
        channels_last(l);
        out["type"] = is(l, "GlobalAveragePooling2D") || is(l, "GlobalAveragePooling1D") ? "global_avg_pool" : "global_max_pool";
        if (flag(l, "keepdims", false)) out["keepdims"] = true;
      } else if (is(l, "Add")) {
        out["type"] = "add";
      } else if (is(l, "Concatenate")) {
        last_axis(l, input_shape_.size());
        out["type"] = "concat";
      } else if (is(l, "Multiply")) {
        if (l.inputs.size() != 2) fail(l, "tpusim multiplies two inputs");
        out["type"] = "multiply";
      } else if (is(l, "Dropout")) {
        out["type"] = "dropout";
        if (!c.contains("rate") || !c.at("rate").is_number() || c.at("rate").get<double>() < 0 || c.at("rate").get<double>() > 1)
          fail(l, "rate: expected a fraction from 0 to 1");
        out["rate"] = c.at("rate").get<double>();
      } else if (is(l, "Flatten")) {
        out["type"] = "flatten";
      } else if (is(l, "Reshape")) {
        out["type"] = "reshape";
        out["shape"] = reshape_target(l);
      } else if (is(l, "Permute")) {
        out["type"] = "permute";
        out["perm"] = permutation(l);
      } else if (is(l, "Embedding")) {
        out["type"] = "embedding";
        out["vocab"] = size_of(l, "input_dim");
        out["dim"] = size_of(l, "output_dim");
      }
      if (l.frozen) {
        out["trainable"] = false;
        if (is(l, "BatchNormalization")) ++frozen_batch_norms;
      }
      if (!append_layer(layers, std::move(out), inputs)) fail(l, kModelInputNotFirst);
    }
    if (layers.empty()) fail_top("the model has no layer besides its input");
    // Keras runs a frozen BatchNormalization in inference mode (its moving statistics); tpusim
    // prices the batch statistics all the same.
    if (frozen_batch_norms > 0)
      notes.push_back(fmt::format("{} frozen BatchNormalization layer(s): Keras normalizes them with their moving statistics, "
                                  "tpusim still prices computing batch statistics (a slight overestimate)", frozen_batch_norms));
    if (folded > 0)
      notes.push_back(fmt::format("folded {} ZeroPadding2D layer(s) into the padding of the window that reads each", folded));
    return layers;
  }

  const json& keras_;
  std::string origin_;
  std::vector<KerasLayer> layers_;
  std::map<std::string, std::size_t> by_name_;
  std::map<std::string, std::string> alias_;  // a nested model -> its output layer; its input -> what it is called on
  std::vector<std::uint64_t> input_shape_;
  std::string input_dtype_ = "float32";
  std::string input_name_;
};

}  // namespace

ImportedModel import_keras_model(const json& keras, const std::string& origin) { return Importer(keras, origin).run(); }

}  // namespace tpusim
