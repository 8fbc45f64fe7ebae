// The ops a layer kind emits into one core's program: matmuls and vector passes sized for the
// core's batch, in the step's activation type.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "hw/program.hpp"
#include "workloads/model.hpp"

namespace tpusim {

class StepEmitter {
 public:
  StepEmitter(Program& program, const ModelGraph& graph, std::uint64_t batch, DType act, std::uint32_t passes)
      : program_(program), graph_(graph), batch_(batch), act_(act), act_bytes_(dtype_bytes(act)), passes_(passes) {}

  const ModelGraph& graph() const { return graph_; }
  std::uint64_t batch() const { return batch_; }  // samples on this core
  DType act() const { return act_; }
  std::uint32_t act_bytes() const { return act_bytes_; }

  std::uint32_t add(Op op, std::vector<std::uint32_t> deps);
  Op& op(std::uint32_t id) { return program_.ops[id]; }

  // A matmul of [m, k] x [k, n] (`batch` of them), inputs in the activation type. The epilogue
  // takes `epilogue_ops` VPU ops and reads `epilogue_bytes` per output element; `lhs_fraction`
  // is the share of m x k read from HBM (a convolution reads its input once, not per tap).
  std::uint32_t matmul(const std::string& name, Phase phase, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                       DType out, std::vector<std::uint32_t> deps, double epilogue_ops = 0,
                       std::uint32_t epilogue_bytes = 0, std::uint64_t batch = 1, double lhs_fraction = 1.0);
  std::uint32_t vector(const std::string& name, Phase phase, VectorWork work, std::vector<std::uint32_t> deps);
  std::uint32_t vector(const std::string& name, Phase phase, std::uint64_t elements, double ops, std::uint64_t read_bytes,
                       std::uint64_t write_bytes, std::vector<std::uint32_t> deps) {
    return vector(name, phase, VectorWork{elements, ops, read_bytes, write_bytes}, std::move(deps));
  }

  // The slice's model axis (sharding.hpp): the torus axes it spans (0: none) and the algorithm
  // its collectives use.
  void set_model_axis(std::uint32_t axes_mask, CollectiveAlgorithm algorithm) {
    model_axes_ = axes_mask;
    model_algorithm_ = algorithm;
  }
  // A collective as `spec` describes it, after `deps`.
  std::uint32_t collective(const std::string& name, Phase phase, const CollectiveSpec& spec, std::vector<std::uint32_t> deps);
  // Partial sums of `elements` activations added up over the model axis (Megatron's g forward,
  // f backward), after `deps`.
  std::uint32_t model_all_reduce(const std::string& name, Phase phase, std::uint64_t elements, std::vector<std::uint32_t> deps);

  // A bias gradient is the output gradient summed over rows. XLA computes it in the weight
  // gradient's fusion, which reads that gradient anyway (a multi-output fusion): vector work on
  // the way, no pass over HBM of its own. `sums`: the additions, one per output-gradient element.
  void fuse_bias_gradient(std::uint32_t dw, std::uint64_t sums);

  // The node's activation gradient is applied elsewhere (by its consumer's dX epilogue, or by
  // the loss for the last layer), not by a pass of its own.
  void fuse_grad_into_consumer(std::size_t node) { grad_fused_elsewhere_.insert(node); }
  bool grad_fused_elsewhere(std::size_t node) const { return grad_fused_elsewhere_.count(node) > 0; }

 private:
  Program& program_;
  const ModelGraph& graph_;
  std::uint64_t batch_;
  DType act_;
  std::uint32_t act_bytes_;
  std::uint32_t passes_;
  std::set<std::size_t> grad_fused_elsewhere_;
  std::uint32_t model_axes_ = 0;
  CollectiveAlgorithm model_algorithm_ = CollectiveAlgorithm::TorusAllAxes;
};

// "base+bias+relu": the name of a matmul with what its epilogue applies.
std::string fused_name(const std::string& base, bool bias, const std::string& activation);

}  // namespace tpusim
