#include "workloads/model.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace tpusim {
namespace {

[[noreturn]] void fail(std::size_t i, const std::string& key, const std::string& what) {
  throw std::invalid_argument(fmt::format("workload.model.layers[{}]{}: {}", i, key.empty() ? "" : "." + key, what));
}

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, std::size_t layer) {
  if (a != 0 && b > kMaxElements / a)
    fail(layer, "", fmt::format("a tensor of more than {} elements is beyond what tpusim models", kMaxElements));
  return a * b;
}

std::uint64_t out_size(std::uint64_t in, std::uint64_t k, std::uint64_t s, const std::string& padding) {
  if (padding == "same") return (in + s - 1) / s;
  return in < k ? 0 : (in - k) / s + 1;
}

}  // namespace

std::uint64_t elements(const Shape& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::uint64_t ModelGraph::params() const {
  std::uint64_t n = 0;
  for (const auto& node : nodes) n += node.params;
  return n;
}

std::uint64_t ModelGraph::trainable() const {
  std::uint64_t n = 0;
  for (const auto& node : nodes) n += node.trainable;
  return n;
}

double ModelGraph::forward_flops_per_sample() const {
  double f = 0;
  for (const auto& node : nodes) f += node.forward_flops;
  return f;
}

double ModelGraph::training_flops_per_sample() const {
  // The textbook count, written from the layers and not from the lowering, so that the
  // end-of-run check compares two independent figures: a weight's gradient costs what its
  // forward product costs, and so does the input's gradient when the input needs one.
  std::vector<bool> needs_grad(nodes.size(), false);
  double f = 0;
  for (const auto& node : nodes) {
    bool input_needs_grad = false;
    for (auto input : node.inputs) input_needs_grad = input_needs_grad || (input != kModelInput && needs_grad[input]);
    needs_grad[node.index] = node.trainable > 0 || input_needs_grad;
    const double fwd = node.forward_flops;
    if (node.spec.type == "attention") {
      // The projections (4 of the 2 * seq * (4 d^2 + 2 seq d)) have weights; QK^T and AV do not
      // and need the gradients of both operands. The output projection's input gradient is
      // inside the layer; Q, K and V's input gradient is the layer's.
      const double seq = static_cast<double>(node.in[0]), d = static_cast<double>(node.in[1]);
      const double projections = 2.0 * seq * 4.0 * d * d, scores = fwd - projections;
      f += fwd + projections + 2.0 * scores + projections / 4 + (input_needs_grad ? 3 * projections / 4 : 0.0);
    } else {
      f += 2 * fwd + (input_needs_grad ? fwd : 0.0);
    }
  }
  return f;
}

std::size_t ModelGraph::embedding() const {
  for (const auto& node : nodes)
    if (node.spec.type == "embedding") return node.index;
  return kModelInput;
}

ModelGraph analyze_model(const Workload& w) {
  ModelGraph g;
  g.input = Shape(w.input_shape.begin(), w.input_shape.end());
  std::uint64_t in_elems = 1;
  for (auto d : g.input) {
    if (d > kMaxElements / in_elems)
      throw std::invalid_argument(fmt::format(
          "workload.model.input_shape: a sample of more than {} elements is beyond what tpusim models", kMaxElements));
    in_elems *= d;
  }
  std::map<std::string, std::size_t> by_name;
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    Node node;
    node.spec = w.layers[i];
    node.index = i;
    LayerSpec& s = node.spec;
    if (s.name.empty()) s.name = fmt::format("{}_{}", s.type, i);
    if (by_name.count(s.name)) fail(i, "name", fmt::format("\"{}\" names an earlier layer too", s.name));
    if (s.inputs.empty()) {
      node.inputs.push_back(i == 0 ? kModelInput : i - 1);
    } else {
      for (const auto& name : s.inputs) {
        const auto it = by_name.find(name);
        if (it == by_name.end()) fail(i, "inputs", fmt::format("no earlier layer is named \"{}\"", name));
        node.inputs.push_back(it->second);
      }
    }
    auto shape_of = [&](std::size_t input) { return input == kModelInput ? g.input : g.nodes[input].out; };
    node.in = shape_of(node.inputs[0]);
    const Shape& in = node.in;
    const std::string& t = s.type;
    auto need_rank = [&](std::size_t rank, const char* what) {
      if (in.size() != rank) fail(i, "", fmt::format("a {} layer needs {} input, got {}", t, what, shape_string(in)));
    };
    if (t != "add" && node.inputs.size() != 1) fail(i, "inputs", fmt::format("a {} layer takes one input", t));

    if (t == "flatten") {
      node.out = {elements(in)};
    } else if (t == "dense") {
      if (in.empty()) fail(i, "", "a dense layer needs an input with features");
      const std::uint64_t d = in.back(), lead = elements(in) / d;
      node.out = in;
      node.out.back() = s.units;
      if (!s.tied_weights) node.params = node.trainable = checked_mul(d, s.units, i) + (s.use_bias ? s.units : 0);
      else if (g.embedding() == kModelInput) fail(i, "tied_weights", "no embedding layer to tie the weights to");
      else if (s.units != g.nodes[g.embedding()].spec.vocab)
        fail(i, "units", fmt::format("a head tied to the embedding's table has its {} outputs, not {}",
                                     g.nodes[g.embedding()].spec.vocab, s.units));
      node.forward_flops = 2.0 * static_cast<double>(lead) * static_cast<double>(checked_mul(d, s.units, i));
    } else if (t == "conv2d") {
      need_rank(3, "an [height, width, channels]");
      const std::uint64_t stride = s.strides ? s.strides : 1;
      if (in[2] % s.groups || s.filters % s.groups) fail(i, "groups", fmt::format("{} groups do not divide {} input and {} output channels", s.groups, in[2], s.filters));
      const std::uint64_t ho = out_size(in[0], s.kernel, stride, s.padding), wo = out_size(in[1], s.kernel, stride, s.padding);
      if (ho == 0 || wo == 0) fail(i, "kernel", fmt::format("a {}x{} kernel does not fit a {} input", s.kernel, s.kernel, shape_string(in)));
      node.out = {ho, wo, s.filters};
      const std::uint64_t weights = checked_mul(s.kernel * s.kernel * (in[2] / s.groups), s.filters, i);
      node.params = node.trainable = weights + (s.use_bias ? s.filters : 0);
      node.forward_flops = 2.0 * static_cast<double>(ho * wo) * static_cast<double>(weights);
    } else if (t == "batch_norm") {
      node.out = in;
      node.params = 4 * in.back();  // gamma, beta and the two moving statistics
      node.trainable = 2 * in.back();
    } else if (t == "layer_norm") {
      node.out = in;
      node.params = node.trainable = 2 * in.back();
    } else if (t == "activation" || t == "dropout") {
      node.out = in;
    } else if (t == "max_pool" || t == "avg_pool") {
      need_rank(3, "an [height, width, channels]");
      const std::uint64_t stride = s.strides ? s.strides : s.pool;
      node.out = {out_size(in[0], s.pool, stride, s.padding), out_size(in[1], s.pool, stride, s.padding), in[2]};
      if (node.out[0] == 0 || node.out[1] == 0) fail(i, "pool", "the window does not fit the input");
    } else if (t == "global_avg_pool") {
      need_rank(3, "an [height, width, channels]");
      node.out = {in[2]};
    } else if (t == "add") {
      if (node.inputs.size() < 2) fail(i, "inputs", "an add layer needs two or more inputs");
      for (auto input : node.inputs)
        if (shape_of(input) != in)
          fail(i, "inputs", fmt::format("shapes differ: {} and {}", shape_string(in), shape_string(shape_of(input))));
      node.out = in;
    } else if (t == "embedding") {
      // Only the model input holds token ids; another layer's output is activations.
      if (node.inputs[0] != kModelInput)
        fail(i, s.inputs.empty() ? "" : "inputs",
             "an embedding looks up token ids: it reads the model input, not another layer's output");
      need_rank(1, "a [tokens] (token ids)");
      node.out = {in[0], s.dim};
      node.params = node.trainable = checked_mul(s.vocab + s.positions + s.segments, s.dim, i);
      if (s.positions && s.positions < in[0]) fail(i, "positions", fmt::format("{} positions for {} tokens", s.positions, in[0]));
    } else if (t == "patch_embedding") {
      need_rank(3, "an [height, width, channels]");
      if (in[0] % s.kernel || in[1] % s.kernel) fail(i, "kernel", fmt::format("{}x{} patches do not tile a {} image", s.kernel, s.kernel, shape_string(in)));
      const std::uint64_t patches = (in[0] / s.kernel) * (in[1] / s.kernel);
      const std::uint64_t tokens = patches + (s.class_token ? 1 : 0);
      if (s.positions && s.positions < tokens) fail(i, "positions", fmt::format("{} positions for {} tokens", s.positions, tokens));
      node.out = {tokens, s.dim};
      const std::uint64_t weights = checked_mul(s.kernel * s.kernel * in[2], s.dim, i);
      node.params = node.trainable = weights + s.dim + (s.class_token ? s.dim : 0) + checked_mul(s.positions, s.dim, i);
      node.forward_flops = 2.0 * static_cast<double>(patches) * static_cast<double>(weights);
    } else if (t == "attention") {
      need_rank(2, "a [tokens, features]");
      const std::uint64_t seq = in[0], d = in[1];
      if (d % s.heads) fail(i, "heads", fmt::format("{} heads do not divide the width {}", s.heads, d));
      node.out = in;
      node.params = node.trainable = 4 * checked_mul(d, d, i) + (s.use_bias ? 4 * d : 0);
      // Q, K, V and output projections, then QK^T and AV over all heads.
      node.forward_flops = 2.0 * static_cast<double>(seq) * (4.0 * static_cast<double>(d * d) + 2.0 * static_cast<double>(seq * d));
    } else if (t == "take_first") {
      need_rank(2, "a [tokens, features]");
      node.out = {in[1]};
    } else {
      fail(i, "type", fmt::format("unknown layer type \"{}\"", t));
    }
    if (elements(node.out) == 0) fail(i, "", "the layer's output is empty");
    checked_mul(elements(node.out), 1, i);
    by_name[s.name] = i;
    for (auto input : node.inputs)
      if (input != kModelInput) g.nodes[input].consumers.push_back(i);
    g.nodes.push_back(std::move(node));
  }
  if (g.nodes.empty()) throw std::invalid_argument("workload.model.layers: the model has no layers");
  // The loss reads the last layer; a layer nothing reads would be a branch the step computes for
  // nothing (and that XLA would drop): refused, rather than simulated as if it mattered.
  for (std::size_t i = 0; i + 1 < g.nodes.size(); ++i)
    if (g.nodes[i].consumers.empty())
      fail(i, "", fmt::format("nothing reads the output of \"{}\"; every layer but the last must feed a later one "
                              "(name it in a later layer's inputs)", g.nodes[i].spec.name));
  if (g.trainable() == 0)
    throw std::invalid_argument("workload.model.layers: the model has no layer with weights (expected at least one)");
  return g;
}

double activation_vpu_ops(const std::string& activation) {
  static const std::map<std::string, double> kOps = {
      {"linear", 0}, {"relu", 1}, {"sigmoid", 4}, {"tanh", 4}, {"gelu", 8}, {"softmax", 6}};
  return kOps.at(activation);
}

double activation_grad_vpu_ops(const std::string& activation) {
  static const std::map<std::string, double> kOps = {
      {"linear", 0}, {"relu", 2}, {"sigmoid", 3}, {"tanh", 3}, {"gelu", 10}, {"softmax", 4}};
  return kOps.at(activation);
}

double loss_vpu_ops(const std::string& loss) {
  // Softmax (max, subtract, exp, sum, divide) plus the gradient (p - y), one fused pass.
  static const std::map<std::string, double> kOps = {
      {"sparse_categorical_crossentropy", 10}, {"categorical_crossentropy", 11}, {"mse", 4}};
  return kOps.at(loss);
}

OptimizerCost optimizer_cost(const std::string& optimizer) {
  // LARS (You et al. 2017, MLPerf ResNet-50's optimizer at large batch): momentum with weight
  // decay plus each layer's weight and gradient norms for its trust ratio.
  static const std::map<std::string, OptimizerCost> kCost = {
      {"sgd", {2, 0}}, {"momentum", {4, 1}}, {"lars", {8, 1}}, {"adam", {14, 2}}, {"adamw", {16, 2}}, {"lamb", {20, 2}}};
  return kCost.at(optimizer);
}

}  // namespace tpusim
