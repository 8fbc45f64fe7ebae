#include "workloads/import/onnx_model.hpp"

#include "workloads/import/layer_list.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tpusim {
namespace {

using ojson = nlohmann::ordered_json;

// ONNX ops this importer maps onto tpusim's layer kinds.
const std::vector<std::string>& supported_ops() {
  static const std::vector<std::string> ops = {
      "Conv",  "BatchNormalization", "Relu",    "Sigmoid", "Tanh",     "Clip",    "HardSwish", "HardSigmoid",
      "MaxPool", "AveragePool",      "GlobalAveragePool", "ReduceMean", "Flatten", "Gemm", "MatMul", "Add", "Mul",
      "Concat", "Dropout", "Identity"};
  return ops;
}

// A layer being built, and which tensors feed it.
struct Layer {
  ojson spec;
  std::vector<std::string> inputs;  // producing layers; "" is the model input
  std::size_t node = 0;             // the ONNX node it came from
};

class OnnxImporter {
 public:
  OnnxImporter(const OnnxModel& model, std::string origin) : m_(model), origin_(std::move(origin)) {}

  ImportedModel run() {
    find_parameters_and_input();
    for (std::size_t i = 0; i < m_.nodes.size(); ++i) map_node(i);
    if (m_.outputs.empty()) fail_top("the graph has no output");
    const std::string output = producer_of(m_.outputs[0].name);
    if (output.empty()) fail_top(fmt::format("the graph's output \"{}\" is its input", m_.outputs[0].name));
    ImportedModel out;
    out.name = m_.graph_name.empty() ? "onnx_model" : m_.graph_name;
    out.model["input_shape"] = input_shape_;
    out.model["input_dtype"] = input_dtype_;
    out.model["layers"] = emit(output, out.notes);
    return out;
  }

 private:
  [[noreturn]] void fail_top(const std::string& what) const { throw std::invalid_argument(fmt::format("{}: {}", origin_, what)); }
  [[noreturn]] void fail(std::size_t node, const std::string& what) const {
    const OnnxNode& n = m_.nodes[node];
    throw std::invalid_argument(fmt::format("{}: node {} (\"{}\", {}): {}", origin_, node, name_of(node), n.op_type, what));
  }
  std::string name_of(std::size_t node) const {
    const OnnxNode& n = m_.nodes[node];
    return n.name.empty() ? fmt::format("{}_{}", n.op_type, node) : n.name;
  }

  // ---- what is data and what is a parameter ----

  // With export_params=False torch makes every parameter and buffer a graph input; the model's
  // own input is the one whose first dimension is symbolic (the batch). Without a symbolic
  // batch, the first graph input that is not an initializer.
  void find_parameters_and_input() {
    for (const auto& t : m_.initializers) params_[t.name] = t.dims;
    std::vector<const OnnxValueInfo*> data;
    for (const auto& in : m_.inputs) {
      if (params_.count(in.name)) continue;
      const bool batched = !in.dims.empty() && in.dims[0].value < 0;
      if (batched) data.push_back(&in);
    }
    if (data.empty())
      for (const auto& in : m_.inputs)
        if (!params_.count(in.name)) {
          data.push_back(&in);
          break;
        }
    if (data.size() != 1)
      fail_top(data.empty() ? "no graph input is the model's data input"
                            : fmt::format("{} graph inputs have a symbolic batch dimension; tpusim imports models with one input",
                                          data.size()));
    const OnnxValueInfo& x = *data[0];
    input_name_ = x.name;
    for (const auto& in : m_.inputs) {
      if (in.name == input_name_ || params_.count(in.name)) continue;
      std::vector<std::int64_t> dims;
      for (const auto& d : in.dims) {
        if (d.value < 0)
          fail_top(fmt::format("graph input \"{}\": dimension \"{}\" is left symbolic; tpusim takes parameters of fixed shape",
                               in.name, d.symbol));
        dims.push_back(d.value);
      }
      params_[in.name] = dims;
    }
    std::vector<std::uint64_t> sample;
    for (std::size_t d = 1; d < x.dims.size(); ++d) {
      if (x.dims[d].value <= 0)
        fail_top(fmt::format("graph input \"{}\": dimension {} (\"{}\") is left symbolic; only the batch may be (re-export "
                             "with a fixed sample shape)", x.name, d, x.dims[d].symbol));
      sample.push_back(static_cast<std::uint64_t>(x.dims[d].value));
    }
    if (sample.size() == 3) sample = {sample[1], sample[2], sample[0]};  // NCHW: tpusim's images are [h, w, c]
    if (sample.empty()) fail_top(fmt::format("graph input \"{}\": expected [batch, ...] with a sample of at least one dimension", x.name));
    input_shape_ = sample;
    // TensorProto.DataType: 1 float, 2 uint8, 6 int32, 7 int64, 16 bfloat16.
    static const std::map<std::int32_t, std::string> kDtypes = {{1, "float32"}, {2, "uint8"}, {6, "int32"}, {7, "int32"}, {16, "bfloat16"}};
    const auto it = kDtypes.find(x.elem_type);
    if (it == kDtypes.end()) fail_top(fmt::format("graph input \"{}\": element type {} is not one tpusim ships", x.name, x.elem_type));
    input_dtype_ = it->second;
    produced_[input_name_] = "";
  }

  bool is_param(const std::string& tensor) const { return params_.count(tensor) > 0 || constants_.count(tensor) > 0; }
  const std::vector<std::int64_t>& param_dims(std::size_t node, const std::string& tensor) const {
    const auto it = params_.find(tensor);
    if (it == params_.end()) fail(node, fmt::format("expected \"{}\" to be a parameter of known shape", tensor));
    return it->second;
  }
  std::string producer_of(const std::string& tensor) const {
    const auto it = produced_.find(tensor);
    return it == produced_.end() ? std::string("?") : it->second;
  }
  std::string activation_input(std::size_t node, std::size_t index = 0) const {
    const OnnxNode& n = m_.nodes[node];
    if (index >= n.inputs.size() || n.inputs[index].empty()) fail(node, fmt::format("expected input {}", index));
    const auto it = produced_.find(n.inputs[index]);
    if (it == produced_.end()) {
      if (is_param(n.inputs[index]))
        fail(node, fmt::format("input {} (\"{}\") is a parameter or constant where tpusim expects activations", index, n.inputs[index]));
      fail(node, fmt::format("input \"{}\" is produced by no node before it", n.inputs[index]));
    }
    return it->second;
  }

  // ---- attributes ----

  std::string attr_string(std::size_t node, const std::string& name, const std::string& fallback) const {
    const OnnxAttribute* a = m_.nodes[node].attribute(name);
    return a ? a->s : fallback;
  }
  std::optional<float> attr_float(std::size_t node, const std::string& name) const {
    const OnnxAttribute* a = m_.nodes[node].attribute(name);
    if (!a) return std::nullopt;
    return a->f;
  }

  // One size for both spatial axes (tpusim models square windows).
  std::uint64_t square(std::size_t node, const std::vector<std::int64_t>& v, const char* what, std::uint64_t fallback) const {
    if (v.empty()) return fallback;
    if (v.size() != 2 || v[0] != v[1] || v[0] <= 0)
      fail(node, fmt::format("{} {}: tpusim models 2D windows with the same size on both axes", what, fmt::join(v, "x")));
    return static_cast<std::uint64_t>(v[0]);
  }

  // A window's padding: ONNX pads [top, left, bottom, right] as tpusim's [top, bottom, left, right].
  void window_padding(std::size_t node, ojson& spec) const {
    const std::string auto_pad = attr_string(node, "auto_pad", "NOTSET");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      spec["padding"] = "same";
      return;
    }
    if (auto_pad != "NOTSET" && auto_pad != "VALID") fail(node, fmt::format("auto_pad {} is not one tpusim knows", auto_pad));
    const auto pads = m_.nodes[node].ints_attribute("pads");
    if (pads.empty() || std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; })) {
      spec["padding"] = "valid";
      return;
    }
    if (pads.size() != 4 || std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0 || p > 1024; }))
      fail(node, fmt::format("pads [{}]: expected 4 sizes of 0 to 1024 for a 2D window", fmt::join(pads, ", ")));
    spec["pads"] = {pads[0], pads[2], pads[1], pads[3]};
  }

  // ---- nodes ----

  void add_layer(std::size_t node, ojson spec, std::vector<std::string> inputs) {
    spec["name"] = name_of(node);
    Layer layer;
    layer.spec = std::move(spec);
    layer.inputs = std::move(inputs);
    layer.node = node;
    // A tensor pooled to 1x1 stays so through 1x1 convolutions and activations (a
    // squeeze-and-excitation branch), which tells a broadcast product's operands apart.
    const std::string type = layer.spec["type"];
    bool pooled = type == "global_avg_pool" && layer.spec.value("keepdims", false);
    if (type == "conv2d" || type == "activation" || type == "batch_norm" || type == "dropout")
      pooled = !layer.inputs[0].empty() && pooled_.count(layer.inputs[0]);
    if (pooled) pooled_.insert(name_of(node));
    by_name_[name_of(node)] = layers_.size();
    layers_.push_back(std::move(layer));
    produced_[m_.nodes[node].outputs.at(0)] = name_of(node);
  }

  void activation(std::size_t node, const std::string& f) {
    add_layer(node, {{"type", "activation"}, {"activation", f}}, {activation_input(node)});
  }

  void map_node(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.outputs.empty()) fail(i, "a node with no output");
    const std::string& op = n.op_type;
    if (op == "Constant") {
      for (const auto& out : n.outputs) constants_.insert(out);
      return;
    }
    if (std::find(supported_ops().begin(), supported_ops().end(), op) == supported_ops().end())
      fail(i, fmt::format("tpusim does not import this op yet (it imports {})", fmt::join(supported_ops(), ", ")));
    if (op == "Conv") {
      const auto& w = param_dims(i, n.inputs.at(1));
      if (w.size() != 4) fail(i, "tpusim imports 2D convolutions (a weight of [out, in/groups, kh, kw])");
      const std::uint64_t kernel = square(i, {w[2], w[3]}, "kernel", 1);
      if (square(i, m_.nodes[i].ints_attribute("dilations"), "dilations", 1) != 1) fail(i, "dilated convolutions are not modelled");
      ojson spec = {{"type", "conv2d"}, {"filters", w[0]}, {"kernel", kernel},
                    {"strides", square(i, m_.nodes[i].ints_attribute("strides"), "strides", 1)}};
      const std::int64_t groups = m_.nodes[i].int_attribute("group", 1);
      if (groups < 1) fail(i, "group: expected a positive number");
      if (groups != 1) spec["groups"] = groups;
      window_padding(i, spec);
      spec["use_bias"] = n.inputs.size() > 2 && !n.inputs[2].empty();
      add_layer(i, std::move(spec), {activation_input(i)});
    } else if (op == "BatchNormalization") {
      add_layer(i, {{"type", "batch_norm"}}, {activation_input(i)});
    } else if (op == "Relu") {
      activation(i, "relu");
    } else if (op == "Sigmoid") {
      activation(i, "sigmoid");
    } else if (op == "Tanh") {
      activation(i, "tanh");
    } else if (op == "HardSwish") {
      activation(i, "hard_swish");
    } else if (op == "HardSigmoid") {
      activation(i, "hard_sigmoid");
    } else if (op == "Clip") {
      if (n.inputs.size() < 3 || !constants_.count(n.inputs[1]) || !constants_.count(n.inputs[2]))
        fail(i, "only ReLU6 (Clip between constants 0 and 6) is imported");
      activation(i, "relu6");  // torch's ReLU6 (MobileNet)
    } else if (op == "MaxPool" || op == "AveragePool") {
      if (square(i, m_.nodes[i].ints_attribute("dilations"), "dilations", 1) != 1) fail(i, "dilated pooling is not modelled");
      const std::uint64_t pool = square(i, m_.nodes[i].ints_attribute("kernel_shape"), "kernel_shape", 0);
      if (pool == 0) fail(i, "expected kernel_shape");
      ojson spec = {{"type", op == "MaxPool" ? "max_pool" : "avg_pool"}, {"pool", pool},
                    {"strides", square(i, m_.nodes[i].ints_attribute("strides"), "strides", 1)}};
      window_padding(i, spec);
      if (m_.nodes[i].int_attribute("ceil_mode", 0) != 0) spec["ceil_mode"] = true;
      add_layer(i, std::move(spec), {activation_input(i)});
    } else if (op == "GlobalAveragePool") {
      add_layer(i, {{"type", "global_avg_pool"}, {"keepdims", true}}, {activation_input(i)});  // [N, C, 1, 1]
    } else if (op == "ReduceMean") {
      auto axes = m_.nodes[i].ints_attribute("axes");
      std::sort(axes.begin(), axes.end());
      if (axes != std::vector<std::int64_t>{2, 3} && axes != std::vector<std::int64_t>{-2, -1})
        fail(i, "only a mean over the two spatial axes (a global average pool) is imported");
      add_layer(i, {{"type", "global_avg_pool"}, {"keepdims", m_.nodes[i].int_attribute("keepdims", 1) != 0}}, {activation_input(i)});
    } else if (op == "Concat") {
      const std::int64_t axis = m_.nodes[i].int_attribute("axis", 1);
      if (axis != 1 && axis != -3) fail(i, "only a concatenation of channels (axis 1 of NCHW) is imported");
      std::vector<std::string> inputs;
      for (std::size_t k = 0; k < n.inputs.size(); ++k) inputs.push_back(activation_input(i, k));
      add_layer(i, {{"type", "concat"}}, inputs);
    } else if (op == "Mul") {
      if (n.inputs.size() != 2 || is_param(n.inputs[0]) || is_param(n.inputs[1]))
        fail(i, "only a product of two activations (a gate or a squeeze-and-excitation scale) is imported");
      std::string x = activation_input(i, 0), s = activation_input(i, 1);
      if (pooled_.count(x) && !pooled_.count(s)) std::swap(x, s);  // the broadcast operand goes second
      add_layer(i, {{"type", "multiply"}}, {x, s});
    } else if (op == "Flatten") {
      if (m_.nodes[i].int_attribute("axis", 1) != 1) fail(i, "only Flatten(axis=1), which keeps the batch, is imported");
      add_layer(i, {{"type", "flatten"}}, {activation_input(i)});
    } else if (op == "Gemm") {
      if (m_.nodes[i].int_attribute("transA", 0) != 0) fail(i, "transA 1 is not imported (the activations come first)");
      if (attr_float(i, "alpha").value_or(1) != 1 || attr_float(i, "beta").value_or(1) != 1)
        fail(i, "alpha and beta other than 1 are not imported");
      const auto& w = param_dims(i, n.inputs.at(1));
      if (w.size() != 2) fail(i, "expected a weight of two dimensions");
      const std::int64_t units = m_.nodes[i].int_attribute("transB", 0) ? w[0] : w[1];
      add_layer(i, {{"type", "dense"}, {"units", units}, {"use_bias", n.inputs.size() > 2 && !n.inputs[2].empty()}},
                {activation_input(i)});
    } else if (op == "MatMul") {
      if (!is_param(n.inputs.at(1)) || params_.count(n.inputs[1]) == 0)
        fail(i, "a product of two activations (attention) is not imported yet; tpusim imports MatMul by a weight");
      const auto& w = param_dims(i, n.inputs[1]);
      if (w.size() != 2) fail(i, "expected a weight of two dimensions");
      add_layer(i, {{"type", "dense"}, {"units", w[1]}, {"use_bias", false}}, {activation_input(i)});
    } else if (op == "Add") {
      map_add(i);
    } else if (op == "Dropout") {
      // The training step's cost of a dropout does not depend on its rate, only on whether it
      // drops anything; a rate given as a tensor is not read, and taken as ONNX's default.
      const std::optional<float> ratio = attr_float(i, "ratio");
      add_layer(i, {{"type", "dropout"}, {"rate", ratio.value_or(0.5f)}}, {activation_input(i)});
    } else if (op == "Identity") {
      produced_[n.outputs.at(0)] = activation_input(i);
    }
  }

  // Two activations summed (a residual connection), or a bias added to a MatMul's result.
  void map_add(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() != 2) fail(i, "expected two inputs");
    const bool param0 = is_param(n.inputs[0]), param1 = is_param(n.inputs[1]);
    if (param0 && param1) fail(i, "a sum of two constants is not imported");
    if (param0 || param1) {
      const std::string x = activation_input(i, param0 ? 1 : 0);
      const auto it = by_name_.find(x);
      if (it == by_name_.end() || layers_[it->second].spec["type"] != "dense" || layers_[it->second].spec["use_bias"] == true)
        fail(i, "adding a constant is imported only as the bias of the MatMul before it");
      layers_[it->second].spec["use_bias"] = true;
      produced_[n.outputs.at(0)] = x;
      return;
    }
    add_layer(i, {{"type", "add"}}, {activation_input(i, 0), activation_input(i, 1)});
  }

  // The layers the output depends on, in the graph's (topological) order; the first reads the
  // model input, which tpusim gives to its first layer only.
  ojson emit(const std::string& output, std::vector<std::string>& notes) const {
    std::vector<bool> needed(layers_.size(), false);
    std::vector<std::size_t> stack = {by_name_.at(output)};
    while (!stack.empty()) {
      const std::size_t k = stack.back();
      stack.pop_back();
      if (needed[k]) continue;
      needed[k] = true;
      for (const auto& in : layers_[k].inputs)
        if (!in.empty()) stack.push_back(by_name_.at(in));
    }
    ojson out = ojson::array();
    std::size_t dropped = 0;
    for (std::size_t k = 0; k < layers_.size(); ++k) {
      if (!needed[k]) {
        ++dropped;
        continue;
      }
      const Layer& l = layers_[k];
      if (!append_layer(out, l.spec, l.inputs)) fail(l.node, kModelInputNotFirst);
    }
    if (layers_.back().spec["name"] != output)
      notes.push_back("the graph's output is not its last node's; layers after it are dropped");
    if (dropped > 0) notes.push_back(fmt::format("dropped {} node(s) the output does not depend on", dropped));
    return out;
  }

  const OnnxModel& m_;
  std::string origin_;
  std::map<std::string, std::vector<std::int64_t>> params_;  // parameter -> its dims
  std::set<std::string> constants_;
  std::string input_name_;
  std::vector<std::uint64_t> input_shape_;
  std::string input_dtype_ = "float32";
  std::map<std::string, std::string> produced_;  // tensor -> the layer that makes it ("": the model input)
  std::vector<Layer> layers_;
  std::map<std::string, std::size_t> by_name_;
  std::set<std::string> pooled_;  // layers whose output is [1, 1, c]
};

}  // namespace

ImportedModel import_onnx_model(const OnnxModel& model, const std::string& origin) { return OnnxImporter(model, origin).run(); }

// Named after the file: torch names every exported graph "torch_jit".
ImportedModel read_onnx_model_file(const std::string& path) {
  ImportedModel imported = import_onnx_model(read_onnx_file(path), path);
  imported.name = std::filesystem::path(path).stem().string();
  return imported;
}

}  // namespace tpusim
