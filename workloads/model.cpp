#include "workloads/model.hpp"

#include <map>
#include <stdexcept>

#include <fmt/format.h>

namespace tpusim {

std::uint64_t ModelShape::params() const {
  std::uint64_t total = 0;
  for (const auto& l : dense) total += l.params();
  return total;
}

double ModelShape::forward_flops_per_sample() const {
  double flops = 0;
  for (const auto& l : dense) flops += 2.0 * static_cast<double>(l.in * l.out);
  return flops;
}

ModelShape analyze_model(const Workload& workload) {
  ModelShape shape;
  shape.input_elements = 1;
  for (auto d : workload.input_shape) {
    if (d > kMaxElements / shape.input_elements)
      throw std::invalid_argument(fmt::format(
          "workload.model.input_shape: a sample of more than {} elements is beyond what tpusim models", kMaxElements));
    shape.input_elements *= d;
  }
  std::uint64_t features = shape.input_elements;
  bool flat = workload.input_shape.size() == 1;
  for (std::size_t i = 0; i < workload.layers.size(); ++i) {
    const LayerSpec& spec = workload.layers[i];
    const std::string name = spec.name.empty() ? fmt::format("{}_{}", spec.type, i) : spec.name;
    if (spec.type == "flatten") {
      flat = true;
      continue;
    }
    if (spec.type == "dense") {
      if (!flat)
        throw std::invalid_argument(fmt::format(
            "workload.model.layers[{}]: dense layer \"{}\" needs a flat input; add a flatten layer before it "
            "(the input shape has {} dimensions)", i, name, workload.input_shape.size()));
      if (spec.units > kMaxElements / features)
        throw std::invalid_argument(fmt::format(
            "workload.model.layers[{}].units: a {}x{} weight matrix is beyond what tpusim models (at most {} elements)",
            i, features, spec.units, kMaxElements));
      shape.dense.push_back({name, features, spec.units, spec.use_bias, spec.activation});
      features = spec.units;
      continue;
    }
    throw std::invalid_argument(fmt::format("workload.model.layers[{}].type: unknown layer type \"{}\"", i, spec.type));
  }
  if (shape.dense.empty())
    throw std::invalid_argument("workload.model.layers: the model has no layer with weights (expected at least one dense layer)");
  return shape;
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
  static const std::map<std::string, OptimizerCost> kCost = {
      {"sgd", {2, 0}}, {"momentum", {4, 1}}, {"adam", {14, 2}}, {"adamw", {16, 2}}, {"lamb", {20, 2}}};
  return kCost.at(optimizer);
}

}  // namespace tpusim
