// A kind of layer, first-class: everything tpusim knows about one kind (the keys it takes, shape
// inference, parameters and FLOPs, forward and backward lowering, how it fuses) lives in one file
// under workloads/kinds/, registered by name in workloads/kinds/registry.cpp. Front-ends (the
// workload's layer list today) build a ModelGraph of nodes, each pointing at its kind; the driver
// (lower.cpp) asks the kinds and never branches on a type string, so a kind cannot be half
// supported: one the registry does not know is refused when the workload is read.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hw/config_keys.hpp"
#include "workloads/model.hpp"

namespace tpusim {

class StepEmitter;

// Shape inference's view of the node being added: its place in the layer list (for error paths)
// and the graph so far.
class InferContext {
 public:
  InferContext(const ModelGraph& graph, std::size_t layer, std::string name)
      : graph_(graph), layer_(layer), name_(std::move(name)) {}
  const ModelGraph& graph() const { return graph_; }
  const Shape& shape_of(std::size_t input) const;
  // Throws std::invalid_argument naming workload.model.layers[i].key and the layer's name (an
  // imported model's layers are known by their names, not their place in the list).
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  void need_rank(const Node& node, std::size_t rank, const char* what) const;
  // a x b, refusing tensors beyond kMaxElements.
  std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b) const;

 private:
  const ModelGraph& graph_;
  std::size_t layer_;
  std::string name_;
};

// What one node's backward emitted.
struct Backward {
  std::uint32_t dx = 0;  // the input's gradient is complete after this op
  bool has_dx = false;
  // Instead of dx, one op per input after which that input's gradient is complete (a product of
  // two activations differentiates each operand separately).
  std::vector<std::uint32_t> input_dx;
  std::vector<std::uint32_t> grads;  // the node's parameter gradients are complete after these
};

// The backward pass's view of a node: whether its input needs a gradient, whether training
// updates its parameters (a frozen layer's backward only passes the gradient on), and which input
// (if any) has its activation gradient applied in this node's input-gradient epilogue.
struct BackwardContext {
  bool needs_dx = false;
  bool needs_dw = true;
  const Node* fused_input = nullptr;
};

// One member's share of a fused elementwise pass over a chain's output of `e` elements: the
// forward's reads and writes in elements (times the activation's bytes), the backward's reads in
// bytes besides the output gradient.
struct FusedShare {
  double vpu_ops = 0;
  std::uint64_t read_elements = 0, write_elements = 0;
  std::uint64_t read_bytes = 0;
  std::uint32_t lane_reductions = 0;  // over the last axis, of what the chain's pass reads
};

// What a remat policy keeps of a layer's own results for its backward pass, so that the second
// forward does not compute them again (MaxText's checkpoint names in brackets).
struct KeptResults {
  bool qkv = false;      // attention's query, key and value projections (query_proj, key_proj, value_proj)
  bool context = false;  // attention's heads' output, its output projection's input (context)
  bool out = false;      // the layer's output: a dense layer's product (mlpwi, mlpwo), attention's output projection (out_proj)
  bool any() const { return qkv || context || out; }
};

class LayerKind {
 public:
  explicit LayerKind(std::string name) : name_(std::move(name)) {}
  virtual ~LayerKind() = default;
  LayerKind(const LayerKind&) = delete;
  LayerKind& operator=(const LayerKind&) = delete;
  const std::string& name() const { return name_; }

  // Keys of workload.model.layers[] this kind takes beyond type, name and inputs, and which of
  // them it needs.
  virtual std::vector<std::string> keys() const { return {}; }
  virtual std::vector<std::string> required_keys() const { return {}; }
  // Keys only this kind takes, declared here in full (made by layer_key()): they join the
  // parameter registry as model.layers[].<name>, are validated like every key (type, limits,
  // choices, did-you-mean), and reach the kind's nodes in LayerSpec::own at their values or
  // defaults. A new key of a kind is its declaration and its use, in the kind's file.
  virtual std::vector<ParamSpec> own_keys() const { return {}; }
  virtual bool takes_several_inputs() const { return false; }
  // A further input of the model, fed by the host with each sample (a UNet's text states beside
  // its latents): takes no layer's output, and its elements join the sample's infeed.
  virtual bool is_model_input() const { return false; }

  // Fills node.out, params, trainable and forward_flops from node.spec and node.in (the first
  // input's shape); refuses what does not fit through ctx.fail.
  virtual void infer(Node& node, const InferContext& ctx) const = 0;
  // The textbook matmul FLOPs of the node's training step per sample: a weight's gradient costs
  // what its forward product costs (when training updates the weight), and so does the input's
  // gradient when the input needs one.
  virtual double training_flops(const Node& node, bool input_needs_grad) const;

  // Emits the node's forward ops after `deps`; returns the op after which its output exists.
  virtual std::uint32_t forward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps) const = 0;
  // Emits its backward once `dy` complete its output gradient.
  virtual Backward backward(StepEmitter& em, const Node& node, std::vector<std::uint32_t> dy,
                            const BackwardContext& ctx) const = 0;

  // Rematerialization under a policy that keeps some of a layer's results (MaxText's minimal,
  // save_dot_* and custom policies): the backward pass's second forward emits the layer's other
  // ops, returning the last of them, or nothing when it emits none (its output is one it kept);
  // whether those ops include a weight matmul (which needs the layer's weights again); and the
  // bytes on this core the kept results hold from forward to backward.
  virtual std::optional<std::uint32_t> recompute_keeping(StepEmitter& em, const Node& node, std::vector<std::uint32_t> deps,
                                                         const KeptResults&) const {
    return forward(em, node, std::move(deps));
  }
  virtual bool recomputes_weight_matmul(const Node& node, const KeptResults&) const { return node.params > 0; }
  virtual std::uint64_t kept_bytes(const StepEmitter&, const Node&, const KeptResults&) const { return 0; }

  // ---- fusion traits ----
  // Output is the input seen differently (no work, nothing stored of its own).
  virtual bool is_view() const { return false; }
  // Its output is a part of its input that its siblings do not take (Q, K and V sliced out of one
  // projection): their gradients fill one buffer together rather than being summed.
  virtual bool takes_disjoint_part() const { return false; }
  // Joins chains of elementwise layers that XLA fuses into one pass over HBM.
  virtual bool elementwise() const { return false; }
  // `stats_from_producer`: it leads the chain and its producer's epilogue computed its statistics.
  virtual FusedShare fused_forward(const Node&, std::uint64_t /*e*/, bool /*stats_from_producer*/) const { return {}; }
  virtual FusedShare fused_backward(const Node&, std::uint64_t /*e*/, std::uint32_t /*act_bytes*/) const { return {}; }
  // In a fused chain its forward is pointwise: it reduces nothing over the tensor and writes
  // nothing of its own (a batch norm whose statistics its producer's epilogue computed applies a
  // per-channel scale and shift), so the chain can ride into a consumer's input.
  virtual bool pointwise_in_chain(bool /*stats_from_producer*/) const { return false; }
  // Its forward and weight-gradient matmuls take its input as their left operand and can apply a
  // pointwise chain to it as it arrives (Cloud TPU: convolutions and matmuls support fusion into
  // their inputs), so the chain writes no output of its own.
  virtual bool input_prologue() const { return false; }
  // VPU ops per element a matmul producing its input can do for it in its epilogue (batch
  // normalization's statistics); 0: none.
  virtual double producer_epilogue_vpu_ops() const { return 0; }
  // Its output comes out of a matmul whose epilogue takes on vector work: bias, its activation,
  // and the statistics of a batch normalization that reads it.
  virtual bool matmul_epilogue() const { return false; }
  // Its input gradient comes out of a matmul whose epilogue can apply the input's activation
  // gradient.
  virtual bool input_grad_epilogue() const { return false; }
  // Applies spec.activation to its output, so a consumer with an input-gradient epilogue can
  // apply the activation's gradient for it.
  virtual bool applies_activation() const { return false; }
  // Per-channel statistics over the whole batch it normalizes with (a batch norm's sum and sum of
  // squares forward, its sums of dy and dy * x backward), in f32 bytes each way: what a
  // distributed batch norm all-reduces among its group. 0: none.
  virtual std::uint64_t batch_statistics_bytes(const Node&) const { return 0; }
  // Its backward reads its input, which the forward pass must therefore keep.
  virtual bool keeps_input(const Node&) const { return false; }
  // Bytes on this core its backward keeps besides its input (masks, pre-activations, attention
  // probabilities).
  virtual std::uint64_t saved_own_bytes(const StepEmitter&, const Node&) const { return 0; }

 private:
  std::string name_;
};

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// A key of a kind's own (LayerKind::own_keys). `default_value` null: a layer of the kind must set
// it (layers of other kinds never do, so the registry does not require it).
inline ParamSpec layer_key(std::string name, ParamType type, std::string unit, nlohmann::json default_value,
                           std::string description, double min = -kUnbounded, double max = kUnbounded,
                           std::vector<std::string> choices = {}) {
  return {"workload", "model.layers[]." + name, type, std::move(unit), std::move(default_value), std::move(description), min, max,
          std::move(choices), false};
}

// The name a key of a kind's own has within a layer ("top_k" of "model.layers[].top_k").
inline std::string layer_key_name(const ParamSpec& key) { return key.path.substr(key.path.rfind('.') + 1); }

// The kind registered under `name`; throws std::invalid_argument listing the known ones.
const LayerKind& layer_kind(const std::string& name);
// Adds a kind of one's own after tpusim's (tests/custom_layer_main.cpp is a whole program with
// one). Register before the configuration is read: the workload's types and keys are checked
// against the registered kinds. Throws std::invalid_argument for a name already taken.
void register_layer_kind(std::unique_ptr<LayerKind> kind);
std::vector<std::string> layer_kind_names();  // sorted as registered
// Keys every layer takes, whatever its kind (LayerKind::keys() lists the rest).
inline const std::vector<std::string>& keys_of_every_layer() {
  static const std::vector<std::string> keys = {"type", "name", "inputs", "trainable"};
  return keys;
}

}  // namespace tpusim
