#include "workloads/import/onnx_model.hpp"

#include "workloads/import/layer_list.hpp"
#include "workloads/import/onnx_shapes.hpp"
#include "workloads/model.hpp"

#include <algorithm>
#include <cmath>
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
      "Conv",  "BatchNormalization", "LayerNormalization", "Relu", "Sigmoid", "Tanh", "Clip", "HardSwish", "HardSigmoid",
      "Softmax", "MaxPool", "AveragePool", "GlobalAveragePool", "ReduceMean", "Flatten", "Gemm", "MatMul", "Add", "Mul",
      "Div", "Sub", "Pow", "Sqrt", "Reciprocal", "Where", "Pad", "Concat", "Dropout", "Identity", "Cast", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Split",
      "Slice", "Gather"};
  return ops;
}

// Ops that only rearrange their input: the layer list sees them as a view to their output's shape.
bool is_view_op(const std::string& op) {
  return op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" || op == "Cast";
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
    if (fixed_batch_.exported == 0) return import();
    // torch.onnx.export's default: no dynamic_axes, the batch fixed at the traced input's.
    try {
      ImportedModel out = import();
      out.notes.insert(out.notes.begin(),
                       fmt::format("the export has a fixed batch of {} (no dynamic_axes): the leading axis of \"{}\" is taken as the "
                                   "batch", fixed_batch_.exported, fixed_batch_.input));
      return out;
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{} (the export has a fixed batch of {}, taken as the leading axis of \"{}\"; export "
                                              "with torch.onnx.export(..., dynamic_axes={{\"{}\": {{0: \"batch\"}}}}) to mark the "
                                              "batch)", e.what(), fixed_batch_.exported, fixed_batch_.input, fixed_batch_.input));
    }
  }

 private:
  ImportedModel import() {
    // Evaluated at two batches, a tensor's shape says which axis carries the batch.
    at_batch2_ = infer_onnx_shapes(m_, 2, origin_, fixed_batch_);
    at_batch3_ = infer_onnx_shapes(m_, 3, origin_, fixed_batch_);
    index_graph();
    for (std::size_t i = 0; i < m_.nodes.size(); ++i)
      if (!folded_.count(i)) map_node(i);
    if (m_.outputs.empty()) fail_top("the graph has no output");
    fold_activations_into_matmuls();
    ImportedModel out;
    mark_frozen_layers(out.notes);
    const std::string output = producer_of(m_.outputs[0].name);
    if (output.empty()) fail_top(fmt::format("the graph's output \"{}\" is its input", m_.outputs[0].name));
    out.name = m_.graph_name.empty() ? "onnx_model" : m_.graph_name;
    out.model["input_shape"] = input_shape_;
    out.model["input_dtype"] = input_dtype_;
    out.model["layers"] = emit(output, out.notes);
    return out;
  }

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
    if (!x.dims.empty() && x.dims[0].value > 0 && x.dims.size() >= 2) fixed_batch_ = {x.name, x.dims[0].value};
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
    // NCHW: tpusim's images are [h, w, c]; NCL read by a 1-D convolution (torch's Conv1d): [steps, channels].
    if (sample.size() == 3) layout_rank_ = 3;
    if (sample.size() == 2 && read_by_conv1d(x.name)) layout_rank_ = 2;
    if (layout_rank_) std::rotate(sample.begin(), sample.begin() + 1, sample.end());
    if (sample.empty()) fail_top(fmt::format("graph input \"{}\": expected [batch, ...] with a sample of at least one dimension", x.name));
    input_shape_ = sample;
    // TensorProto.DataType: 1 float, 2 uint8, 6 int32, 7 int64, 16 bfloat16.
    static const std::map<std::int32_t, std::string> kDtypes = {{1, "float32"}, {2, "uint8"}, {6, "int32"}, {7, "int32"}, {16, "bfloat16"}};
    const auto it = kDtypes.find(x.elem_type);
    if (it == kDtypes.end()) fail_top(fmt::format("graph input \"{}\": element type {} is not one tpusim ships", x.name, x.elem_type));
    input_dtype_ = it->second;
    produced_[input_name_] = "";
  }

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
      if (!is_activation(n.inputs[index]))
        fail(node, fmt::format("input {} (\"{}\") is a parameter or constant where tpusim expects activations", index, n.inputs[index]));
      fail(node, fmt::format("input \"{}\" is produced by no node before it", n.inputs[index]));
    }
    return it->second;
  }

  // ---- the graph's tensors ----

  // Which tensors are activations (they depend on the data input, other than through its shape),
  // who produces and who reads each tensor.
  void index_graph() {
    activations_.insert(input_name_);
    if (layout_rank_) image_layout_.insert(input_name_);
    for (std::size_t i = 0; i < m_.nodes.size(); ++i) {
      const OnnxNode& n = m_.nodes[i];
      bool reads_activation = false;
      for (const auto& in : n.inputs) {
        if (in.empty()) continue;
        consumers_[in].push_back(i);
        reads_activation = reads_activation || activations_.count(in);
      }
      for (const auto& out : n.outputs) producer_[out] = i;
      if (reads_activation && n.op_type != "Shape")
        for (const auto& out : n.outputs) activations_.insert(out);
      if (reads_activation && n.op_type != "Shape") track_image_layout(i);
    }
  }

  // Which activations are images: ONNX holds them [c, h, w] per sample, tpusim [h, w, c]. An
  // image stays one through the ops that keep NCHW; a view that gives a [c, h, w] back (a channel
  // shuffle's reshapes, a split of the channels) makes one again from an image or from a
  // higher-rank view of one. Below rank 3 (ViT's patches flattened to tokens) it is no image.
  void track_image_layout(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const bool view_op = is_view_op(n.op_type) || n.op_type == "Slice" || n.op_type == "Split" || n.op_type == "Flatten";
    bool from_image = false, from_image_view = false;
    for (const auto& in : n.inputs) {
      from_image = from_image || image_layout_.count(in);
      from_image_view = from_image_view || image_views_.count(in);
    }
    if (const LayoutChange change = layout_transpose(i); change != LayoutChange::kNone) {
      if (change == LayoutChange::kToImage) image_layout_.insert(n.outputs.at(0));
      return;
    }
    if (!from_image && !(view_op && from_image_view)) return;
    // (Only a Split's other outputs are data: a training-mode BatchNormalization's are statistics.)
    for (std::size_t k = 0; k < (n.op_type == "Split" ? n.outputs.size() : 1); ++k) {
      const std::string& out = n.outputs[k];
      if (out.empty()) continue;
      const std::size_t rank = sample_shape(i, out).size();
      if (rank == layout_rank_) image_layout_.insert(out);
      if (view_op && rank > layout_rank_) image_views_.insert(out);
    }
  }

  // A permute between NCHW and NHWC (ConvNeXt's around its channels-last LayerNorm and MLP) moves
  // nothing in tpusim, which holds images channels last already: to channels last gives the image
  // as a plain [h, w, c] tensor, and back makes it an image again.
  enum class LayoutChange { kNone, kToChannelsLast, kToImage };
  // Over a sequence, NCL to NLC and back ({0, 2, 1}); back only into a 1-D convolution (a rank-2
  // transpose is otherwise any transpose).
  LayoutChange layout_transpose(std::size_t i) const {
    const OnnxNode& n = m_.nodes[i];
    if (n.op_type != "Transpose" || n.inputs.empty() || n.outputs.empty() || layout_rank_ == 0) return LayoutChange::kNone;
    const auto perm = n.ints_attribute("perm");
    const bool in_image = image_layout_.count(n.inputs[0]) > 0;
    const std::vector<std::int64_t> to_last = layout_rank_ == 3 ? std::vector<std::int64_t>{0, 2, 3, 1} : std::vector<std::int64_t>{0, 2, 1};
    const std::vector<std::int64_t> to_first = layout_rank_ == 3 ? std::vector<std::int64_t>{0, 3, 1, 2} : std::vector<std::int64_t>{0, 2, 1};
    if (in_image && perm == to_last) return LayoutChange::kToChannelsLast;
    if (!in_image && perm == to_first && sample_shape(i, n.inputs[0]).size() == layout_rank_ &&
        (layout_rank_ == 3 || read_by_conv1d(n.outputs[0])))
      return LayoutChange::kToImage;
    return LayoutChange::kNone;
  }

  // Whether a 1-D convolution (a weight of [out, in/groups, k]) reads `tensor`.
  bool read_by_conv1d(const std::string& tensor) const {
    for (const OnnxNode& n : m_.nodes) {
      if (n.op_type != "Conv" || n.inputs.size() < 2 || n.inputs[0] != tensor) continue;
      const auto w = params_.find(n.inputs[1]);
      if (w != params_.end() && w->second.size() == 3) return true;
    }
    return false;
  }

  // `sample_shape` as tpusim holds the tensor (an image's channels last).
  std::vector<std::uint64_t> layer_shape(std::size_t node, const std::string& tensor) const {
    auto s = sample_shape(node, tensor);
    if (image_layout_.count(tensor) && !s.empty()) std::rotate(s.begin(), s.begin() + 1, s.end());
    return s;
  }
  bool is_activation(const std::string& tensor) const { return activations_.count(tensor) > 0; }

  const OnnxShape& shape_at(const OnnxShapes& shapes, std::size_t node, const std::string& tensor) const {
    const auto it = shapes.shape.find(tensor);
    if (it == shapes.shape.end()) fail(node, fmt::format("the shape of \"{}\" is unknown", tensor));
    return it->second;
  }

  // A tensor's shape for one sample: the axis that grows with the batch divided by it, or dropped
  // when it is the batch alone (the batch folded into the heads of [batch x heads, t, d] stays).
  std::vector<std::uint64_t> sample_shape(std::size_t node, const std::string& tensor) const {
    const OnnxShape& two = shape_at(at_batch2_, node, tensor);
    const OnnxShape& three = shape_at(at_batch3_, node, tensor);
    std::vector<std::uint64_t> out;
    int batch_axes = 0;
    for (std::size_t d = 0; d < two.size(); ++d) {
      if (two[d] == three[d]) {
        out.push_back(static_cast<std::uint64_t>(two[d]));
        continue;
      }
      ++batch_axes;
      if (two[d] % 2 != 0 || two[d] / 2 * 3 != three[d])
        fail(node, fmt::format("\"{}\": axis {} is {} at batch 2 and {} at batch 3; tpusim needs the batch as a factor of one axis",
                               tensor, d, two[d], three[d]));
      if (two[d] / 2 != 1) out.push_back(static_cast<std::uint64_t>(two[d] / 2));
    }
    if (batch_axes != 1)
      fail(node, fmt::format("\"{}\" has {} axes that grow with the batch; tpusim needs exactly one", tensor, batch_axes));
    if (out.empty()) out.push_back(1);
    return out;
  }

  // The node that makes `tensor`, or nullptr for a graph input or initializer.
  const OnnxNode* producer(const std::string& tensor) const {
    const auto it = producer_.find(tensor);
    return it == producer_.end() ? nullptr : &m_.nodes[it->second];
  }
  // The parameter a non-activation tensor is taken from through views, expands and gathers
  // (Transpose(W), Expand(class_token), Gather(table, positions)); "" when none.
  std::string parameter_behind(const std::string& tensor) const {
    std::string t = tensor;
    for (int depth = 0; depth < 16; ++depth) {
      if (params_.count(t)) return t;
      const OnnxNode* n = producer(t);
      if (!n || n->inputs.empty()) return "";
      if (!is_view_op(n->op_type) && n->op_type != "Expand" && n->op_type != "Gather") return "";
      t = n->inputs[0];
    }
    return "";
  }
  // A single known number (a scale, a mask's fill value).
  bool is_scalar_constant(const std::string& tensor) const {
    if (is_activation(tensor)) return false;
    const auto it = at_batch2_.value.find(tensor);
    return it != at_batch2_.value.end() && it->second.size() == 1;
  }
  double scalar_value(const std::string& tensor) const { return at_batch2_.value.at(tensor).at(0); }
  // The only node reading `tensor`, or npos.
  std::size_t sole_consumer(const std::string& tensor) const {
    const auto it = consumers_.find(tensor);
    return it != consumers_.end() && it->second.size() == 1 ? it->second[0] : std::string::npos;
  }
  const Layer* layer_named(const std::string& name) const {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &layers_[it->second];
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

  // A window's size as the workload takes it: one number when square (or over `axes` 1, a
  // sequence), else [height, width].
  ojson window(std::size_t node, const std::vector<std::int64_t>& v, const char* what, std::uint64_t fallback, std::size_t axes = 2) const {
    if (v.empty()) return fallback;
    if (v.size() != axes || std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x <= 0 || x > 1024; }))
      fail(node, fmt::format("{} {}: expected the {} of a {}D window", what, fmt::join(v, "x"), axes == 1 ? "length" : "height and width", axes));
    if (axes == 1 || v[0] == v[1]) return v[0];
    return ojson::array({v[0], v[1]});
  }

  // A window's padding: ONNX pads [top, left, bottom, right] as tpusim's [top, bottom, left, right].
  void window_padding(std::size_t node, ojson& spec) const {
    const auto padded = pads_for_.find(m_.nodes[node].inputs.at(0));
    if (padded != pads_for_.end()) {  // a Pad before it
      spec["pads"] = padded->second;
      return;
    }
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
    const bool in_range = std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p >= 0 && p <= 1024; });
    if (pads.size() == 2 && in_range) {  // a 1D window's [begin, end]
      spec["pads"] = {pads[0], pads[1]};
      return;
    }
    if (pads.size() != 4 || !in_range)
      fail(node, fmt::format("pads [{}]: expected 4 sizes of 0 to 1024 for a 2D window (2 for a 1D one)", fmt::join(pads, ", ")));
    spec["pads"] = {pads[0], pads[2], pads[1], pads[3]};
  }

  // ---- nodes ----

  // `output`: which of the node's outputs the layer makes; `name`: the layer's, when not the node's.
  void add_layer(std::size_t node, ojson spec, std::vector<std::string> inputs, std::size_t output = 0, std::string name = "") {
    if (name.empty()) name = name_of(node);
    spec["name"] = name;
    Layer layer;
    layer.spec = std::move(spec);
    layer.inputs = std::move(inputs);
    layer.node = node;
    by_name_[name] = layers_.size();
    layers_.push_back(std::move(layer));
    produced_[m_.nodes[node].outputs.at(output)] = name;
  }

  // The node's output is its first input (a scale folded into the softmax or matmul around it,
  // a mask applied in the softmax's fusion, a cast).
  void alias(std::size_t node) { produced_[m_.nodes[node].outputs.at(0)] = activation_input(node); }

  // A view of the node's first input as its output `output` is shaped.
  void view(std::size_t node, const char* type, std::size_t output = 0, std::string name = "") {
    const OnnxNode& n = m_.nodes[node];
    const auto in_shape = sample_shape(node, n.inputs.at(0)), out_shape = sample_shape(node, n.outputs.at(output));
    if (in_shape == out_shape) {
      produced_[n.outputs[output]] = activation_input(node);
      return;
    }
    add_layer(node, {{"type", type}, {"shape", layer_shape(node, n.outputs[output])}}, {activation_input(node)}, output, std::move(name));
  }

  void activation(std::size_t node, const std::string& f, std::size_t input = 0) {
    add_layer(node, {{"type", "activation"}, {"activation", f}}, {activation_input(node, input)});
  }

  void map_node(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.outputs.empty()) fail(i, "a node with no output");
    const std::string& op = n.op_type;
    // Shapes, their arithmetic, constants and what is computed from parameters alone: folded (the shape
    // inference has their shapes and small values); the layers that read them take them in.
    if (std::none_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& t) { return is_activation(t); })) return;
    if (std::find(supported_ops().begin(), supported_ops().end(), op) == supported_ops().end())
      fail(i, fmt::format("tpusim does not import this op yet (it imports {})", fmt::join(supported_ops(), ", ")));
    if (op == "Conv") {
      const auto& w = param_dims(i, n.inputs.at(1));
      const bool one_d = w.size() == 3;
      if (w.size() != 4 && !one_d) fail(i, "tpusim imports 1D and 2D convolutions (a weight of [out, in/groups, k] or [out, in/groups, kh, kw])");
      if (one_d && !(layout_rank_ == 2 && image_layout_.count(n.inputs[0])))
        fail(i, "a 1D convolution is imported over the model's [batch, channels, steps] input and what keeps that layout");
      const std::size_t axes = one_d ? 1 : 2;
      ojson spec = {{"type", one_d ? "conv1d" : "conv2d"}, {"filters", w[0]},
                    {"kernel", one_d ? ojson(w[2]) : window(i, {w[2], w[3]}, "kernel", 1)},
                    {"strides", window(i, n.ints_attribute("strides"), "strides", 1, axes)}};
      const ojson dilation = window(i, n.ints_attribute("dilations"), "dilations", 1, axes);
      if (dilation != 1) spec["dilation"] = dilation;
      const std::int64_t groups = n.int_attribute("group", 1);
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
      if (n.inputs.size() < 3 || !is_scalar_constant(n.inputs[1]) || !is_scalar_constant(n.inputs[2]) ||
          scalar_value(n.inputs[1]) != 0 || scalar_value(n.inputs[2]) != 6)
        fail(i, "only ReLU6 (Clip between constants 0 and 6) is imported");
      activation(i, "relu6");  // torch's ReLU6 (MobileNet)
    } else if (op == "MaxPool" || op == "AveragePool") {
      const std::size_t axes = n.ints_attribute("kernel_shape").size() == 1 ? 1 : 2;
      if (window(i, n.ints_attribute("dilations"), "dilations", 1, axes) != 1) fail(i, "dilated pooling is not modelled");
      if (n.ints_attribute("kernel_shape").empty()) fail(i, "expected kernel_shape");
      ojson spec = {{"type", op == "MaxPool" ? "max_pool" : "avg_pool"},
                    {"pool", window(i, n.ints_attribute("kernel_shape"), "kernel_shape", 0, axes)},
                    {"strides", window(i, n.ints_attribute("strides"), "strides", 1, axes)}};
      window_padding(i, spec);
      if (n.int_attribute("ceil_mode", 0) != 0) spec["ceil_mode"] = true;
      add_layer(i, std::move(spec), {activation_input(i)});
    } else if (op == "GlobalAveragePool") {
      add_layer(i, {{"type", "global_avg_pool"}, {"keepdims", true}}, {activation_input(i)});  // [N, C, 1, 1]
    } else if (op == "ReduceMean") {
      auto axes = m_.nodes[i].ints_attribute("axes");
      std::sort(axes.begin(), axes.end());
      const bool keepdims = m_.nodes[i].int_attribute("keepdims", 1) != 0;
      const auto rank = static_cast<std::int64_t>(shape_at(at_batch2_, i, n.inputs.at(0)).size());
      const bool spatial = layout_rank_ == 3 ? axes == std::vector<std::int64_t>{2, 3} || axes == std::vector<std::int64_t>{-2, -1}
                                             : axes == std::vector<std::int64_t>{2} || axes == std::vector<std::int64_t>{-1};
      if (image_layout_.count(n.inputs[0]) && spatial)
        add_layer(i, {{"type", "global_avg_pool"}, {"keepdims", keepdims}}, {activation_input(i)});
      else if (axes == std::vector<std::int64_t>{-1} || axes == std::vector<std::int64_t>{rank - 1})
        add_layer(i, {{"type", "reduce_mean"}, {"keepdims", keepdims}}, {activation_input(i)});
      else
        fail(i, "only a mean over the two spatial axes of an image (a global average pool) or over the last axis is imported");
    } else if (op == "Concat") {
      map_concat(i);
    } else if (op == "Mul" || op == "Div" || op == "Sub") {
      map_binary(i);
    } else if (op == "Pow") {
      // x^2 and x^0.5 (a normalization written out) as such; another constant power as exp(p log x).
      if (n.inputs.size() != 2 || !is_scalar_constant(n.inputs[1])) fail(i, "only a power by a constant is imported");
      const double p = scalar_value(n.inputs[1]);
      if (p == 1)
        alias(i);
      else
        activation(i, p == 2 ? "square" : p == 0.5 ? "sqrt" : "pow");
    } else if (op == "Sqrt") {
      activation(i, "sqrt");
    } else if (op == "Reciprocal") {
      activation(i, "reciprocal");
    } else if (op == "Flatten") {
      const bool image = sample_shape(i, n.inputs.at(0)).size() == 3 || image_layout_.count(n.inputs.at(0)) > 0;
      if (image && m_.nodes[i].int_attribute("axis", 1) == 1)
        add_layer(i, {{"type", "flatten"}}, {activation_input(i)});
      else
        view(i, "reshape");
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
      map_matmul(i);
    } else if (op == "Add") {
      map_add(i);
    } else if (op == "Dropout") {
      // The training step's cost of a dropout does not depend on its rate, only on whether it
      // drops anything: torch gives the rate as a constant input, older exports as an attribute.
      double rate = attr_float(i, "ratio").value_or(0.5f);
      if (n.inputs.size() > 1 && is_scalar_constant(n.inputs[1])) rate = scalar_value(n.inputs[1]);
      if (rate == 0)
        alias(i);  // the identity (torchvision's ViT): kept as a layer it would part an activation from its matmul
      else
        add_layer(i, {{"type", "dropout"}, {"rate", rate}}, {activation_input(i)});
    } else if (op == "LayerNormalization") {
      const std::int64_t axis = m_.nodes[i].int_attribute("axis", -1);
      const std::size_t rank = sample_shape(i, n.inputs.at(0)).size();
      if (axis != -1) fail(i, fmt::format("axis {}: only a normalization over the last axis is imported", axis));
      if (n.inputs.size() < 3 || n.inputs[2].empty() || rank == 0) fail(i, "expected a scale and a bias");
      add_layer(i, {{"type", "layer_norm"}}, {activation_input(i)});
    } else if (op == "Softmax") {
      const std::int64_t axis = m_.nodes[i].int_attribute("axis", -1);
      if (axis != -1 && axis != static_cast<std::int64_t>(shape_at(at_batch2_, i, n.inputs.at(0)).size()) - 1)
        fail(i, fmt::format("axis {}: only a softmax over the last axis is imported", axis));
      activation(i, "softmax");
    } else if (op == "Where") {
      // A mask (attention's causal mask): the scores pass through with some set to a constant,
      // which XLA does inside the softmax's fusion.
      if (n.inputs.size() != 3 || is_activation(n.inputs[0]) || is_activation(n.inputs[1]) == is_activation(n.inputs[2]))
        fail(i, "only a mask (a constant condition choosing between activations and a constant) is imported");
      produced_[n.outputs.at(0)] = activation_input(i, is_activation(n.inputs[1]) ? 1 : 2);
    } else if (op == "Identity" || op == "Cast") {
      alias(i);
    } else if (layout_transpose(i) != LayoutChange::kNone) {
      alias(i);
    } else if (op == "Reshape" || op == "Transpose" || op == "Squeeze" || op == "Unsqueeze") {
      if (n.inputs.size() > 1 && is_activation(n.inputs[1])) fail(i, "a shape computed from activations is not imported");
      view(i, "reshape");
    } else if (op == "Split") {
      for (std::size_t k = 0; k < n.outputs.size(); ++k)
        if (!n.outputs[k].empty()) view(i, "slice", k, fmt::format("{}_{}", name_of(i), k));
    } else if (op == "Slice") {
      view(i, "slice");
    } else if (op == "Gather") {
      map_gather(i);
    } else if (op == "Pad") {
      map_pad(i);
    }
  }

  // Zeros around an image's height and width (what torch writes before an average pool that
  // counts its padding): the explicit pads of the pool or convolution that reads it alone.
  void map_pad(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    const std::string mode = attr_string(i, "mode", "constant");
    const auto it = at_batch2_.value.find(n.inputs.size() > 1 ? n.inputs[1] : "");
    const bool zeros = n.inputs.size() < 3 || n.inputs[2].empty() || (is_scalar_constant(n.inputs[2]) && scalar_value(n.inputs[2]) == 0);
    if (mode != "constant" || !zeros || it == at_batch2_.value.end())
      fail(i, "only constant zero padding of known size is imported");
    const std::vector<double>& pads = it->second;
    if (std::all_of(pads.begin(), pads.end(), [](double p) { return p == 0; })) {
      alias(i);
      return;
    }
    const std::size_t reader = sole_consumer(n.outputs.at(0));
    const bool pool_or_conv = reader != std::string::npos && (m_.nodes[reader].op_type == "AveragePool" ||
                                                              m_.nodes[reader].op_type == "MaxPool" || m_.nodes[reader].op_type == "Conv");
    // NCHW: [n, c, h, w] begins then ends; only h and w padded, by 0 to 1024.
    const bool spatial = pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0 &&
                         std::all_of(pads.begin(), pads.end(), [](double p) { return p >= 0 && p <= 1024; });
    const auto reader_pads = pool_or_conv ? m_.nodes[reader].ints_attribute("pads") : std::vector<std::int64_t>{};
    const bool reader_pads_too = std::any_of(reader_pads.begin(), reader_pads.end(), [](std::int64_t p) { return p != 0; });
    if (!pool_or_conv || !spatial || !image_layout_.count(n.inputs[0]) || reader_pads_too)
      fail(i, "a zero padding is imported only around an image's height and width, read by one pool or convolution without pads of its own");
    auto pad = [&](std::size_t k) { return static_cast<std::uint64_t>(pads[k]); };
    pads_for_[n.outputs[0]] = {pad(2), pad(6), pad(3), pad(7)};  // tpusim's [top, bottom, left, right]
    alias(i);
  }

  // Channels joined (DenseNet, SqueezeNet), or learned tokens put before a sequence (ViT's class
  // token: Concat(Expand(class_token), patches)).
  void map_concat(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() == 2 && !is_activation(n.inputs[0]) && is_activation(n.inputs[1])) {
      const std::string token = parameter_behind(n.inputs[0]);
      const auto in = sample_shape(i, n.inputs[1]), out = sample_shape(i, n.outputs.at(0));
      if (token.empty() || in.size() != 2 || out.size() != 2 || out[1] != in[1] || out[0] <= in[0])
        fail(i, "joining a constant with activations is imported only as learned tokens put before a [batch, tokens, features] sequence");
      const std::uint64_t tokens = out[0] - in[0];
      if (static_cast<std::uint64_t>(elements_of(params_.at(token))) != tokens * in[1])
        fail(i, fmt::format("\"{}\" does not hold {} tokens of {} features", token, tokens, in[1]));
      add_layer(i, {{"type", "prepend_tokens"}, {"tokens", tokens}}, {activation_input(i, 1)});
      return;
    }
    if (n.inputs.size() == 1) {  // torch.cat of one tensor (DenseNet's first layer of a block)
      alias(i);
      return;
    }
    const std::int64_t axis = m_.nodes[i].int_attribute("axis", 1);
    if (axis != 1 && axis != -3) fail(i, "only a concatenation of channels (axis 1 of NCHW) is imported");
    std::vector<std::string> inputs;
    for (std::size_t k = 0; k < n.inputs.size(); ++k) inputs.push_back(activation_input(i, k));
    add_layer(i, {{"type", "concat"}}, inputs);
  }

  // Mul, Div or Sub. By a constant scalar: folded (attention's 1/sqrt(d) scale, a shift, which
  // XLA applies in the fusion around them), except c / x, a reciprocal; Erf's GELU, recognized
  // whole; a product with a learned tensor (a normalization's scale written out); two activations,
  // the second broadcast (a gate, a squeeze-and-excitation scale, x - mean).
  void map_binary(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() != 2) fail(i, "expected two inputs");
    if (n.op_type == "Div" && map_erf_gelu(i)) return;
    const bool act0 = is_activation(n.inputs[0]), act1 = is_activation(n.inputs[1]);
    if (act0 && act1) {
      std::string x = activation_input(i, 0), s = activation_input(i, 1);
      // The broadcast operand goes second (its cost is the same either way).
      if (elements(sample_shape(i, n.inputs[0])) < elements(sample_shape(i, n.inputs[1]))) std::swap(x, s);
      const char* type = n.op_type == "Mul" ? "multiply" : n.op_type == "Div" ? "divide" : "subtract";
      add_layer(i, {{"type", type}}, {x, s});
      return;
    }
    const std::string& other = act0 ? n.inputs[1] : n.inputs[0];
    if (is_scalar_constant(other)) {
      if (n.op_type == "Div" && act1)
        activation(i, "reciprocal", 1);
      else
        produced_[n.outputs.at(0)] = activation_input(i, act0 ? 0 : 1);
      return;
    }
    if (n.op_type == "Mul") {
      add_layer(i, {{"type", "multiply_parameter"}, {"shape", learned_tensor_shape(i, other, n.inputs[act0 ? 0 : 1])}}, {activation_input(i, act0 ? 0 : 1)});
      return;
    }
    fail(i, "only a scale or shift by a constant, Erf's GELU, a product with a learned tensor or an operation on two activations is imported");
  }

  // torch's exact GELU as exported: x * (erf(x / sqrt 2) + 1) * 0.5, five nodes that XLA fuses into
  // one elementwise pass; imported as one gelu activation named after the Erf.
  bool map_erf_gelu(std::size_t div) {
    const OnnxNode& d = m_.nodes[div];
    const std::string x = d.inputs[0];
    if (!is_activation(x) || !is_scalar_constant(d.inputs[1]) || std::abs(scalar_value(d.inputs[1]) - std::sqrt(2.0)) > 1e-3)
      return false;
    // The node reading `tensor` alone, of type `op`, whose other operand is `other` (a scalar
    // when `value` is set).
    auto next = [&](const std::string& tensor, const char* op, const std::string& other, std::optional<double> value) {
      const std::size_t k = sole_consumer(tensor);
      if (k == std::string::npos || m_.nodes[k].op_type != op) return std::string::npos;
      const OnnxNode& n = m_.nodes[k];
      if (std::string(op) == "Erf") return k;
      if (n.inputs.size() != 2) return std::string::npos;
      const std::string& o = n.inputs[0] == tensor ? n.inputs[1] : n.inputs[0];
      const bool fits = value ? is_scalar_constant(o) && std::abs(scalar_value(o) - *value) < 1e-6 : o == other;
      return fits ? k : std::string::npos;
    };
    const std::size_t erf = next(d.outputs.at(0), "Erf", "", std::nullopt);
    if (erf == std::string::npos) return false;
    const std::size_t plus_one = next(m_.nodes[erf].outputs.at(0), "Add", "", 1.0);
    if (plus_one == std::string::npos) return false;
    const std::size_t times_x = next(m_.nodes[plus_one].outputs.at(0), "Mul", x, std::nullopt);
    if (times_x == std::string::npos) return false;
    const std::size_t half = next(m_.nodes[times_x].outputs.at(0), "Mul", "", 0.5);
    if (half == std::string::npos) return false;
    add_layer(erf, {{"type", "activation"}, {"activation", "gelu"}}, {activation_input(div)});
    produced_[m_.nodes[half].outputs.at(0)] = name_of(erf);
    folded_.insert({erf, plus_one, times_x, half});
    return true;
  }

  // A product by a weight (a dense layer, or a language model's head tied to its embedding
  // table), or of two activations (attention's QK^T and AV).
  void map_matmul(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() != 2) fail(i, "expected two inputs");
    if (!is_activation(n.inputs[0])) fail(i, "a product with the weight first is not imported (the activations come first)");
    if (is_activation(n.inputs[1])) {
      add_layer(i, {{"type", "matmul"}}, {activation_input(i, 0), activation_input(i, 1)});
      return;
    }
    const std::string weight = parameter_behind(n.inputs[1]);
    const OnnxShape& w = shape_at(at_batch2_, i, n.inputs[1]);
    if (weight.empty() || w.size() != 2) fail(i, "expected a weight of two dimensions");
    const auto tied = embedding_of_.find(weight);
    if (tied != embedding_of_.end()) {
      add_layer(i, {{"type", "dense"}, {"units", w[1]}, {"use_bias", false}, {"tied_weights", true}}, {activation_input(i)});
      return;
    }
    add_layer(i, {{"type", "dense"}, {"units", w[1]}, {"use_bias", false}}, {activation_input(i)});
  }

  // Rows of a table at the model input's token ids (an embedding), or the first token of a
  // sequence (ViT's class token read out for the head).
  void map_gather(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() != 2) fail(i, "expected two inputs");
    if (!is_activation(n.inputs[0])) {
      const auto it = params_.find(n.inputs[0]);
      if (it == params_.end() || it->second.size() != 2) fail(i, "only a gather of a [rows, features] table's rows is imported");
      if (activation_input(i, 1) != "") fail(i, "an embedding looks up the model input's token ids");
      add_layer(i, {{"type", "embedding"}, {"vocab", it->second[0]}, {"dim", it->second[1]}}, {""});
      embedding_of_[n.inputs[0]] = name_of(i);
      return;
    }
    const auto in = sample_shape(i, n.inputs[0]), out = sample_shape(i, n.outputs.at(0));
    if (!is_scalar_constant(n.inputs[1]) || scalar_value(n.inputs[1]) != 0 || in.size() != 2 || out != std::vector<std::uint64_t>{in[1]})
      fail(i, "only the first token of a [batch, tokens, features] sequence (a class token) is imported");
    add_layer(i, {{"type", "take_first"}}, {activation_input(i)});
  }

  // A parameter's elements; -1 when its dims are negative or their product overflows (a damaged
  // file), which no layer's count equals.
  static std::int64_t elements_of(const std::vector<std::int64_t>& dims) {
    std::int64_t n = 1;
    for (auto d : dims)
      if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
    return n;
  }

  // Two activations summed (a residual connection); an activation and a parameter: a MatMul's
  // bias, an embedding's position table, or a learned tensor added to every sample.
  void map_add(std::size_t i) {
    const OnnxNode& n = m_.nodes[i];
    if (n.inputs.size() != 2) fail(i, "expected two inputs");
    const bool act0 = is_activation(n.inputs[0]), act1 = is_activation(n.inputs[1]);
    if (act0 && act1) {
      if (sample_shape(i, n.inputs[0]) != sample_shape(i, n.inputs[1])) fail(i, "a broadcasting sum of activations is not imported");
      add_layer(i, {{"type", "add"}}, {activation_input(i, 0), activation_input(i, 1)});
      return;
    }
    const std::string& p = act0 ? n.inputs[1] : n.inputs[0];
    const std::string x = activation_input(i, act0 ? 0 : 1);
    const auto it = by_name_.find(x);
    Layer* layer = it == by_name_.end() ? nullptr : &layers_[it->second];
    const std::string type = layer ? layer->spec["type"].get<std::string>() : "";
    const OnnxShape& p_shape = shape_at(at_batch2_, i, p);
    if (type == "dense" && layer->spec["use_bias"] == false && p_shape.size() == 1 && params_.count(p)) {
      layer->spec["use_bias"] = true;
      produced_[n.outputs.at(0)] = x;
      return;
    }
    const OnnxNode* gather = producer(p);
    if (type == "embedding" && gather && gather->op_type == "Gather" && params_.count(gather->inputs.at(0)) &&
        !layer->spec.contains("positions")) {
      const auto& table = params_.at(gather->inputs[0]);
      if (table.size() != 2 || table[1] != layer->spec["dim"].get<std::int64_t>())
        fail(i, fmt::format("\"{}\" is not a position table of the embedding's width", gather->inputs[0]));
      layer->spec["positions"] = table[0];
      produced_[n.outputs.at(0)] = x;
      return;
    }
    if (is_scalar_constant(p)) {  // a shift (a normalization's epsilon), applied in the fusion around it
      produced_[n.outputs.at(0)] = x;
      return;
    }
    add_layer(i, {{"type", "add_parameter"}, {"shape", learned_tensor_shape(i, p, act0 ? n.inputs[0] : n.inputs[1])}}, {x});
  }

  // The per-sample shape of `tensor`, a learned parameter (or a view of one) that node `i`
  // applies to every sample of `activations` whole; on an image, channels last as tpusim holds it
  // (ConvNeXt's layer scale, [c, 1, 1], is tpusim's [1, 1, c]).
  std::vector<std::uint64_t> learned_tensor_shape(std::size_t i, const std::string& tensor, const std::string& activations) const {
    const std::string param = parameter_behind(tensor);
    const OnnxShape& two = shape_at(at_batch2_, i, tensor);
    if (param.empty() || shape_at(at_batch3_, i, tensor) != two)
      fail(i, "a constant operand is imported as a MatMul's bias, a position table, or a learned tensor applied to every sample");
    std::vector<std::uint64_t> shape(two.begin(), two.end());
    while (shape.size() > 1 && shape.front() == 1) shape.erase(shape.begin());  // the batch's axis
    if (static_cast<std::int64_t>(elements(shape)) != elements_of(params_.at(param)))
      fail(i, fmt::format("\"{}\" is not applied whole", param));
    if (image_layout_.count(activations) && elements(shape) > 1) {
      if (shape.size() != layout_rank_)
        fail(i, fmt::format("\"{}\" of [{}] broadcasts over the last axis alone; tpusim imports learned tensors on a channels-first "
                            "tensor with its rank ([channels, ...])", param, fmt::join(shape, ", ")));
      std::rotate(shape.begin(), shape.begin() + 1, shape.end());
    }
    return shape;
  }

  // An activation right after a dense or convolution layer that nothing else reads runs in that
  // layer's matmul epilogue, as XLA fuses it: the layer takes the activation, and the
  // activation's own layer goes.
  void fold_activations_into_matmuls() {
    std::map<std::string, int> readers;
    for (const auto& l : layers_)
      for (const auto& in : l.inputs) ++readers[in];
    std::map<std::string, std::string> renamed;
    std::vector<Layer> kept;
    std::map<std::string, std::size_t> kept_by_name;
    for (auto& l : layers_) {
      for (auto& in : l.inputs)
        if (renamed.count(in)) in = renamed.at(in);
      const std::string name = l.spec["name"];
      if (l.spec["type"] == "activation" && l.spec["activation"] != "softmax" && l.inputs.size() == 1 && readers[l.inputs[0]] == 1 &&
          kept_by_name.count(l.inputs[0])) {
        ojson& producer = kept[kept_by_name.at(l.inputs[0])].spec;
        if ((producer["type"] == "dense" || producer["type"] == "conv2d") && producer.value("activation", "linear") == "linear") {
          producer["activation"] = l.spec["activation"];
          renamed[name] = l.inputs[0];
          continue;
        }
      }
      kept_by_name[name] = kept.size();
      kept.push_back(std::move(l));
    }
    layers_ = std::move(kept);
    by_name_ = std::move(kept_by_name);
    for (auto& [tensor, layer] : produced_)
      if (renamed.count(layer)) layer = renamed.at(layer);
  }

  // With training information, a layer none of whose parameters training updates is frozen. A
  // parameter belongs to the layer of the node that reads it (through views of it): the layer the
  // node became, or the one that absorbed it (a bias, a position table).
  void mark_frozen_layers(std::vector<std::string>& notes) {
    if (!m_.has_training_info) return;
    std::set<std::string> updated;
    for (const auto& p : m_.updated_parameters) {
      if (!params_.count(p))
        fail_top(fmt::format("training_info: update_binding names \"{}\", which is not a parameter of the graph", p));
      updated.insert(p);
    }
    std::map<std::string, bool> any_updated;  // a layer reading parameters -> whether training updates one
    for (const OnnxNode& n : m_.nodes) {
      if (n.outputs.empty()) continue;
      const auto layer = produced_.find(n.outputs[0]);
      if (layer == produced_.end() || layer->second.empty()) continue;
      for (const auto& in : n.inputs) {
        if (in.empty() || is_activation(in)) continue;
        const std::string p = parameter_behind(in);
        if (p.empty()) continue;
        bool& any = any_updated[layer->second];
        any = any || updated.count(p) > 0;
      }
    }
    std::size_t frozen = 0;
    for (const auto& [name, any] : any_updated) {
      if (any) continue;
      layers_[by_name_.at(name)].spec["trainable"] = false;
      ++frozen;
    }
    notes.push_back(fmt::format("training_info updates {} of the graph's {} parameters and buffers: {} layer(s) with none updated "
                                "are frozen", updated.size(), params_.size(), frozen));
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
    // tpusim gives the model input to the first layer alone; when other layers read it too (a
    // residual around the first block), the first layer is a view of it that they all read.
    std::size_t readers = 0, first = layers_.size();
    for (std::size_t k = 0; k < layers_.size(); ++k)
      if (needed[k]) {
        first = std::min(first, k);
        for (const auto& in : layers_[k].inputs) readers += in.empty() ? 1 : 0;
      }
    const bool input_view = readers > 1 || (readers == 1 && std::find(layers_[first].inputs.begin(), layers_[first].inputs.end(),
                                                                        "") == layers_[first].inputs.end());
    std::string input_layer = "input";
    while (by_name_.count(input_layer)) input_layer += "_";
    ojson out = ojson::array();
    if (input_view) out.push_back({{"type", "reshape"}, {"shape", input_shape_}, {"name", input_layer}});
    std::size_t dropped = 0;
    for (std::size_t k = 0; k < layers_.size(); ++k) {
      if (!needed[k]) {
        ++dropped;
        continue;
      }
      const Layer& l = layers_[k];
      std::vector<std::string> inputs = l.inputs;
      if (input_view) std::replace(inputs.begin(), inputs.end(), std::string(), input_layer);
      if (!append_layer(out, l.spec, inputs)) fail(l.node, kModelInputNotFirst);
    }
    if (layers_.back().spec["name"] != output)
      notes.push_back("the graph's output is not its last node's; layers after it are dropped");
    if (dropped > 0) notes.push_back(fmt::format("dropped {} node(s) the output does not depend on", dropped));
    return out;
  }

  const OnnxModel& m_;
  std::string origin_;
  std::map<std::string, std::vector<std::int64_t>> params_;  // parameter -> its dims
  FixedBatch fixed_batch_;  // the data input's, when the export fixed it
  OnnxShapes at_batch2_, at_batch3_;
  std::set<std::string> activations_;
  std::map<std::string, std::size_t> producer_;
  std::map<std::string, std::vector<std::size_t>> consumers_;
  std::set<std::string> image_layout_, image_views_;  // see track_image_layout
  // Rank of one sample of the channels-first tensors tpusim holds channels last: 3 for images
  // ([c, h, w]), 2 for a 1-D convolution's sequences ([c, steps]), 0 for a model of neither.
  std::size_t layout_rank_ = 0;
  std::map<std::string, std::vector<std::uint64_t>> pads_for_;  // a padded image -> the pads its reader takes
  std::set<std::size_t> folded_;                   // nodes taken into a pattern's layer
  std::map<std::string, std::string> embedding_of_;  // a table parameter -> the embedding layer gathering from it
  std::string input_name_;
  std::vector<std::uint64_t> input_shape_;
  std::string input_dtype_ = "float32";
  std::map<std::string, std::string> produced_;  // tensor -> the layer that makes it ("": the model input)
  std::vector<Layer> layers_;
  std::map<std::string, std::size_t> by_name_;
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
