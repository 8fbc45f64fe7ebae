#include "workloads/model.hpp"

#include "workloads/layer_kind.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace tpusim {
namespace {

std::string layer_path(std::size_t layer, const std::string& key) {
  return fmt::format("workload.model.layers[{}]{}", layer, key.empty() ? "" : "." + key);
}

}  // namespace

const Shape& InferContext::shape_of(std::size_t input) const {
  return input == kModelInput ? graph_.input : graph_.nodes[input].out;
}

void InferContext::fail(const std::string& key, const std::string& what) const {
  throw std::invalid_argument(fmt::format("{}: {} (layer \"{}\")", layer_path(layer_, key), what, name_));
}

void InferContext::need_rank(const Node& node, std::size_t rank, const char* what) const {
  if (node.in.size() != rank)
    fail("", fmt::format("a {} layer needs {} input, got {}", node.spec.type, what, shape_string(node.in)));
}

std::uint64_t InferContext::checked_mul(std::uint64_t a, std::uint64_t b) const {
  if (a != 0 && b > kMaxElements / a)
    fail("", fmt::format("a tensor of more than {} elements is beyond what tpusim models", kMaxElements));
  return a * b;
}

double LayerKind::training_flops(const Node& node, bool input_needs_grad) const {
  const double fwd = node.forward_flops;
  return fwd + (node.spec.trainable ? fwd : 0.0) + (input_needs_grad ? fwd : 0.0);
}

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

std::uint64_t ModelGraph::sample_elements() const {
  std::uint64_t n = elements(input);
  for (const auto& node : nodes)
    if (node.kind->is_model_input()) n += elements(node.out);
  return n;
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

std::uint64_t ModelGraph::frozen() const {
  std::uint64_t n = 0;
  for (const auto& node : nodes) n += node.frozen;
  return n;
}

double ModelGraph::forward_flops_per_sample() const {
  double f = 0;
  for (const auto& node : nodes) f += node.forward_flops;
  return f;
}

double ModelGraph::training_flops_per_sample(const std::vector<double>& share) const {
  // The textbook count, written from the layers and not from the lowering, so that the
  // end-of-run check compares two independent figures.
  std::vector<bool> needs_grad(nodes.size(), false);
  double f = 0;
  for (const auto& node : nodes) {
    bool input_needs_grad = false;
    for (auto input : node.inputs) input_needs_grad = input_needs_grad || (input != kModelInput && needs_grad[input]);
    needs_grad[node.index] = node.trainable > 0 || input_needs_grad;
    f += node.kind->training_flops(node, input_needs_grad) * (share.empty() ? 1.0 : share[node.index]);
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
    if (by_name.count(s.name))
      throw std::invalid_argument(fmt::format("{}: \"{}\" names an earlier layer too", layer_path(i, "name"), s.name));
    const InferContext ctx(g, i, s.name);
    try {
      node.kind = &layer_kind(s.type);
    } catch (const std::invalid_argument& e) {
      ctx.fail("type", e.what());
    }
    if (node.kind->is_model_input()) {
      if (!s.inputs.empty()) ctx.fail("inputs", "an input layer takes no layer's output (the host feeds it)");
      node.inputs.push_back(kModelInput);
    } else if (s.inputs.empty()) {
      node.inputs.push_back(i == 0 ? kModelInput : i - 1);
    } else {
      for (const auto& name : s.inputs) {
        const auto it = by_name.find(name);
        if (it == by_name.end())
          throw std::invalid_argument(fmt::format("{}: no earlier layer is named \"{}\"", layer_path(i, "inputs"), name));
        node.inputs.push_back(it->second);
      }
    }
    node.in = ctx.shape_of(node.inputs[0]);
    for (auto input : node.inputs) node.input_shapes.push_back(ctx.shape_of(input));
    if (!node.kind->takes_several_inputs() && node.inputs.size() != 1)
      ctx.fail("inputs", fmt::format("a {} layer takes one input", s.type));
    node.kind->infer(node, ctx);
    if (!s.trainable) {
      std::swap(node.trainable, node.frozen);
      node.expert_local_trainable = 0;
    }
    if (elements(node.out) == 0) ctx.fail("", "the layer's output is empty");
    ctx.checked_mul(elements(node.out), 1);
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
      throw std::invalid_argument(fmt::format("{}: nothing reads the output of \"{}\"; every layer but the last must feed a "
                                              "later one (name it in a later layer's inputs)", layer_path(i, ""), g.nodes[i].spec.name));
  if (g.trainable() == 0 && g.frozen() > 0)
    throw std::invalid_argument("workload.model.layers: every layer with weights is frozen (trainable false); a training step would "
                                "update nothing (expected at least one trainable layer)");
  if (g.trainable() == 0)
    throw std::invalid_argument("workload.model.layers: the model has no layer with weights (expected at least one)");
  return g;
}

namespace {

// An activation's VPU ops per element, forward and for its gradient. The table is the list of
// activations: the workload's choices (sim/params.cpp) come from it.
struct ActivationCost {
  const char* name;
  double forward, gradient;
};
const std::vector<ActivationCost>& activation_table() {
  static const std::vector<ActivationCost> table = {
      {"linear", 0, 0}, {"relu", 1, 2}, {"sigmoid", 4, 3}, {"tanh", 4, 3}, {"gelu", 8, 10}, {"softmax", 6, 4},
      // MobileNet's: relu6 clamps (max, min); hard_sigmoid scales, shifts and clamps; hard_swish
      // multiplies by it; silu (swish) multiplies by a sigmoid.
      {"relu6", 2, 3}, {"hard_sigmoid", 3, 3}, {"hard_swish", 4, 5}, {"silu", 5, 6},
      // The pieces of a normalization written out (an imported RMSNorm): square multiplies,
      // sqrt and reciprocal are a transcendental unit's rsqrt and a multiply, pow is exp(p log x).
      {"square", 1, 2}, {"sqrt", 4, 3}, {"reciprocal", 4, 3}, {"pow", 8, 10}};
  return table;
}

template <typename Row>
const Row& row_named(const std::vector<Row>& table, const std::string& name, const char* what) {
  for (const Row& row : table)
    if (name == row.name) return row;
  throw std::invalid_argument(fmt::format("unknown {} \"{}\"", what, name));
}

template <typename Row>
std::vector<std::string> names_of(const std::vector<Row>& table) {
  std::vector<std::string> names;
  for (const Row& row : table) names.emplace_back(row.name);
  return names;
}

// A loss's VPU ops per logit: softmax (max, subtract, exp, sum, divide) plus the gradient
// (p - y), one fused pass.
struct LossCost {
  const char* name;
  double ops;
};
const std::vector<LossCost>& loss_table() {
  static const std::vector<LossCost> table = {{"sparse_categorical_crossentropy", 10}, {"categorical_crossentropy", 11}, {"mse", 4}};
  return table;
}

// LARS (You et al. 2017, MLPerf ResNet-50's optimizer at large batch): momentum with weight
// decay plus each layer's weight and gradient norms for its trust ratio, taken in a first pass
// over the weights and gradients. LAMB (You et al. 2019, MLPerf BERT's): Adam's update r plus
// weight decay, scaled by ||w|| / ||r||; r's norm needs all of r, so the update reads the
// weights and both moments again to apply it.
struct NamedOptimizerCost {
  const char* name;
  OptimizerCost cost;
};
const std::vector<NamedOptimizerCost>& optimizer_table() {
  static const std::vector<NamedOptimizerCost> table = {{"sgd", {2, 0, 0}},  {"momentum", {4, 1, 0}}, {"lars", {8, 1, 2}},
                                                        {"adam", {14, 2, 0}}, {"adamw", {16, 2, 0}},  {"lamb", {20, 2, 3}}};
  return table;
}

}  // namespace

double activation_vpu_ops(const std::string& activation) { return row_named(activation_table(), activation, "activation").forward; }
double activation_grad_vpu_ops(const std::string& activation) {
  return row_named(activation_table(), activation, "activation").gradient;
}
std::vector<std::string> activation_names() { return names_of(activation_table()); }

std::uint32_t activation_lane_reductions(const std::string& activation, bool gradient) {
  if (activation != "softmax") return 0;
  return gradient ? 1 : 2;
}

std::uint32_t loss_lane_reductions(const std::string& loss) {
  return loss == "mse" ? 0 : 2;  // cross-entropy's log-softmax: the max, then the sum
}

double loss_vpu_ops(const std::string& loss) { return row_named(loss_table(), loss, "loss").ops; }
std::vector<std::string> loss_names() { return names_of(loss_table()); }

OptimizerCost optimizer_cost(const std::string& optimizer) { return row_named(optimizer_table(), optimizer, "optimizer").cost; }
std::vector<std::string> optimizer_names() { return names_of(optimizer_table()); }

}  // namespace tpusim
