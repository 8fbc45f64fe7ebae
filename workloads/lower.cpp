#include "workloads/lower.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/topology.hpp"

namespace tpusim {
namespace {

class ProgramBuilder {
 public:
  explicit ProgramBuilder(Program& program) : program_(program) {}

  std::uint32_t add(Op op, std::vector<std::uint32_t> deps) {
    op.id = static_cast<std::uint32_t>(program_.ops.size());
    op.deps = std::move(deps);
    program_.ops.push_back(std::move(op));
    return program_.ops.back().id;
  }

  std::uint32_t matmul(std::string name, Phase phase, MatmulWork work, std::vector<std::uint32_t> deps) {
    Op op;
    op.kind = OpKind::Matmul;
    op.phase = phase;
    op.name = std::move(name);
    op.model_flops = 2.0 * static_cast<double>(work.batch) * static_cast<double>(work.m * work.k * work.n);
    op.matmul = work;
    return add(std::move(op), std::move(deps));
  }

  Op& op(std::uint32_t id) { return program_.ops[id]; }

  std::uint32_t vector(std::string name, Phase phase, VectorWork work, std::vector<std::uint32_t> deps) {
    Op op;
    op.kind = OpKind::Vector;
    op.phase = phase;
    op.name = std::move(name);
    op.vector = work;
    return add(std::move(op), std::move(deps));
  }

 private:
  Program& program_;
};

std::string fused_name(const std::string& base, bool bias, const std::string& activation) {
  std::string name = base;
  if (bias) name += "+bias";
  if (activation != "linear") name += "+" + activation;
  return name;
}

bool matmul_layer(const Node& n) { return n.spec.type == "dense" || n.spec.type == "conv2d"; }

// Emits the ops of one step layer by layer; sizes are for this core's batch.
class StepEmitter {
 public:
  StepEmitter(ProgramBuilder& pb, const ModelGraph& g, std::uint64_t batch, DType act, std::uint32_t passes)
      : pb_(pb), g_(g), b_(batch), act_(act), act_bytes_(dtype_bytes(act)), passes_(passes) {}

  std::uint32_t matmul(const std::string& name, Phase phase, std::uint64_t m, std::uint64_t k, std::uint64_t n,
                       DType out, std::vector<std::uint32_t> deps, double epilogue_ops = 0,
                       std::uint32_t epilogue_bytes = 0, std::uint64_t batch = 1, double lhs_fraction = 1.0) {
    MatmulWork mm;
    mm.m = m;
    mm.k = k;
    mm.n = n;
    mm.batch = batch;
    mm.lhs = mm.rhs = act_;
    mm.out = out;
    mm.passes = passes_;
    mm.epilogue_vpu_ops_per_element = epilogue_ops;
    mm.epilogue_operand_bytes_per_element = epilogue_bytes;
    mm.lhs_read_fraction = std::min(1.0, lhs_fraction);
    const std::uint32_t id = pb_.matmul(name, phase, mm, std::move(deps));
    return id;
  }

  std::uint32_t vector(const std::string& name, Phase phase, std::uint64_t elements, double ops, std::uint64_t read_bytes,
                       std::uint64_t write_bytes, std::vector<std::uint32_t> deps) {
    return pb_.vector(name, phase, VectorWork{elements, ops, read_bytes, write_bytes}, std::move(deps));
  }

  // Forward of one node; returns the op after which its output exists.
  std::uint32_t forward(const Node& node, std::vector<std::uint32_t> deps) {
    const LayerSpec& s = node.spec;
    const std::string& t = s.type;
    const std::uint64_t e_in = b_ * elements(node.in), e_out = b_ * elements(node.out);
    const std::string base = s.name + "/fwd";
    const double epilogue = (s.use_bias ? 1.0 : 0.0) + activation_vpu_ops(s.activation);
    if (t == "dense") {
      const std::uint64_t d = node.in.back();
      return matmul(fused_name(base + "/matmul", s.use_bias, s.activation), Phase::Forward, e_in / d, d, s.units, act_,
                    deps, epilogue);
    }
    if (t == "conv2d") {
      const Conv c = conv(node);
      return matmul(fused_name(base + "/conv", s.use_bias, s.activation), Phase::Forward, c.m, c.k, c.n, act_, deps, epilogue,
                    0, 1, c.fwd_lhs_fraction);
    }
    if (t == "batch_norm" || t == "layer_norm")  // statistics then normalization: two reads
      return vector(base + "/" + t, Phase::Forward, e_in, kNormVpuOps, 2 * e_in * act_bytes_, e_out * act_bytes_, deps);
    if (t == "activation") return vector(base + "/" + s.activation, Phase::Forward, e_in, activation_vpu_ops(s.activation),
                                         e_in * act_bytes_, e_out * act_bytes_, deps);
    if (t == "dropout")
      return s.rate > 0 ? vector(base + "/dropout", Phase::Forward, e_in, 3, e_in * act_bytes_, e_out * act_bytes_ + e_out / 8, deps)
                        : deps.front();
    if (t == "max_pool" || t == "avg_pool")
      return vector(base + "/" + t, Phase::Forward, e_out, static_cast<double>(s.pool * s.pool), e_in * act_bytes_,
                    e_out * act_bytes_, deps);
    if (t == "global_avg_pool") return vector(base + "/mean", Phase::Forward, e_in, 1, e_in * act_bytes_, e_out * act_bytes_, deps);
    if (t == "add")
      return vector(base + "/add", Phase::Forward, e_out, static_cast<double>(node.inputs.size() - 1),
                    node.inputs.size() * e_out * act_bytes_, e_out * act_bytes_, deps);
    if (t == "embedding") {  // a gather of f32 table rows at the tokens' ids, plus the position and segment rows added
      VectorWork gather{e_out, 1.0 + (s.positions ? 1 : 0) + (s.segments ? 1 : 0),
                        e_out * 4 * (1 + (s.positions ? 1 : 0) + (s.segments ? 1 : 0)), e_out * act_bytes_};
      gather.hbm_read_run_bytes = s.dim * 4;
      return pb_.vector(base + "/gather", Phase::Forward, gather, deps);
    }
    if (t == "patch_embedding") {
      const std::uint64_t patches = (node.in[0] / s.kernel) * (node.in[1] / s.kernel);
      const std::uint32_t proj = matmul(base + "/patches+bias", Phase::Forward, b_ * patches, s.kernel * s.kernel * node.in[2],
                                        s.dim, act_, deps, 1);
      return vector(base + "/class_token+positions", Phase::Forward, e_out, 1, e_out * act_bytes_, e_out * act_bytes_, {proj});
    }
    if (t == "attention") {
      const Attention a = attention(node);
      const std::uint32_t qkv = matmul(fused_name(base + "/qkv", s.use_bias, "linear"), Phase::Forward, a.tokens, a.d, 3 * a.d,
                                       act_, deps, s.use_bias ? 1 : 0);
      const std::uint32_t scores = matmul(base + "/qk", Phase::Forward, a.seq, a.dh, a.seq, act_, {qkv}, 1, 0, a.heads_total);
      const std::uint32_t softmax = vector(base + "/softmax", Phase::Forward, a.score_elements, activation_vpu_ops("softmax"),
                                           a.score_elements * act_bytes_, a.score_elements * act_bytes_, {scores});
      const std::uint32_t av = matmul(base + "/av", Phase::Forward, a.seq, a.seq, a.dh, act_, {softmax}, 0, 0, a.heads_total);
      return matmul(fused_name(base + "/out", s.use_bias, "linear"), Phase::Forward, a.tokens, a.d, a.d, act_, {av},
                    s.use_bias ? 1 : 0);
    }
    return deps.front();  // flatten, take_first: a view, no work
  }

  struct Backward {
    std::uint32_t dx = 0;     // the input's gradient is complete after this op
    bool has_dx = false;
    std::vector<std::uint32_t> grads;  // the node's parameter gradients are complete after these
  };

  // Backward of one node given the ops that complete its output gradient. `fuse_input_grad`: the
  // input's activation gradient is applied in this node's dX epilogue.
  Backward backward(const Node& node, std::vector<std::uint32_t> dy, bool needs_dx, const Node* fused_input) {
    const LayerSpec& s = node.spec;
    const std::string& t = s.type;
    const std::uint64_t e_in = b_ * elements(node.in), e_out = b_ * elements(node.out);
    const std::string base = s.name + "/bwd";
    Backward r;
    const double in_grad_ops = fused_input ? activation_grad_vpu_ops(fused_input->spec.activation) : 0;
    const std::uint32_t in_grad_bytes = fused_input ? act_bytes_ : 0;
    const std::string in_grad_name = fused_input ? "+" + fused_input->spec.activation + "_grad" : "";
    if (t == "dense" || t == "conv2d") {
      if (s.activation != "linear" && !own_grad_fused_.count(node.index)) {
        dy = {vector(base + "/" + s.activation + "_grad", Phase::Backward, e_out, activation_grad_vpu_ops(s.activation),
                     2 * e_out * act_bytes_, e_out * act_bytes_, dy)};
      }
      std::uint32_t dw, dx = 0;
      if (t == "dense") {
        const std::uint64_t d = node.in.back(), tokens = e_in / d;
        dw = matmul(base + "/dW", Phase::Backward, d, tokens, s.units, DType::F32, dy);
        if (needs_dx) dx = matmul(base + "/dX" + in_grad_name, Phase::Backward, tokens, s.units, d, act_, dy, in_grad_ops, in_grad_bytes);
      } else {
        const Conv c = conv(node);
        dw = matmul(base + "/dW", Phase::Backward, c.k, c.m, c.n, DType::F32, dy, 0, 0, 1, c.dw_lhs_fraction);
        if (needs_dx) {
          dx = matmul(base + "/dX" + in_grad_name, Phase::Backward, c.dx_m, c.dx_k, node.in[2], act_, dy, in_grad_ops,
                      in_grad_bytes, 1, c.dx_lhs_fraction);
          // Every input pixel runs through every tap, but with a stride only 1/stride^2 of the
          // taps meet an output: the rest multiply zeros. The useful work is the forward's.
          pb_.op(dx).model_flops = static_cast<double>(b_) * node.forward_flops;
        }
      }
      if (s.use_bias) fuse_bias_gradient(dw, e_out);
      r.grads.push_back(dw);
      r.dx = dx;
      r.has_dx = needs_dx;
      return r;
    }
    auto pass_through = [&](std::uint32_t op) {
      r.dx = op;
      r.has_dx = true;
      return r;
    };
    if (t == "batch_norm" || t == "layer_norm") {
      const std::uint32_t op = vector(base + "/" + t, Phase::Backward, e_in, kNormGradVpuOps, 3 * e_in * act_bytes_, e_in * act_bytes_, dy);
      r.grads.push_back(op);
      return pass_through(op);
    }
    if (t == "activation") {
      if (own_grad_fused_.count(node.index)) return pass_through(dy.front());
      return pass_through(vector(base + "/" + s.activation + "_grad", Phase::Backward, e_in, activation_grad_vpu_ops(s.activation),
                                 2 * e_in * act_bytes_, e_in * act_bytes_, dy));
    }
    if (t == "dropout")
      return pass_through(s.rate > 0 ? vector(base + "/dropout", Phase::Backward, e_in, 2, e_in * act_bytes_ + e_in / 8,
                                              e_in * act_bytes_, dy)
                                     : dy.front());
    if (t == "max_pool" || t == "avg_pool")
      return pass_through(vector(base + "/" + t, Phase::Backward, e_in, static_cast<double>(s.pool * s.pool),
                                 (e_out + (t == "max_pool" ? e_in : 0)) * act_bytes_, e_in * act_bytes_, dy));
    if (t == "global_avg_pool")
      return pass_through(vector(base + "/mean", Phase::Backward, e_in, 1, e_out * act_bytes_, e_in * act_bytes_, dy));
    if (t == "embedding") {  // rows scattered into the f32 table gradient at the tokens' ids
      VectorWork scatter{e_out, 1, e_out * act_bytes_, e_out * 4};
      scatter.hbm_write_run_bytes = s.dim * 4;
      r.grads.push_back(pb_.vector(base + "/scatter", Phase::Backward, scatter, dy));
      return r;
    }
    if (t == "patch_embedding") {
      const std::uint64_t patches = (node.in[0] / s.kernel) * (node.in[1] / s.kernel);
      r.grads.push_back(matmul(base + "/dW", Phase::Backward, s.kernel * s.kernel * node.in[2], b_ * patches, s.dim,
                               DType::F32, dy));
      r.grads.push_back(vector(base + "/dpositions", Phase::Backward, e_out, 1, e_out * act_bytes_, elements(node.out) * 4, dy));
      return r;
    }
    if (t == "attention") {
      const Attention a = attention(node);
      const std::uint32_t dw_out = matmul(base + "/out/dW", Phase::Backward, a.d, a.tokens, a.d, DType::F32, dy);
      const std::uint32_t d_av = matmul(base + "/out/dX", Phase::Backward, a.tokens, a.d, a.d, act_, dy);
      const std::uint32_t dv = matmul(base + "/dV", Phase::Backward, a.seq, a.seq, a.dh, act_, {d_av}, 0, 0, a.heads_total);
      const std::uint32_t dp = matmul(base + "/dP", Phase::Backward, a.seq, a.dh, a.seq, act_, {d_av}, 0, 0, a.heads_total);
      const std::uint32_t ds = vector(base + "/softmax_grad", Phase::Backward, a.score_elements, activation_grad_vpu_ops("softmax"),
                                      2 * a.score_elements * act_bytes_, a.score_elements * act_bytes_, {dp});
      const std::uint32_t dq = matmul(base + "/dQ", Phase::Backward, a.seq, a.seq, a.dh, act_, {ds}, 0, 0, a.heads_total);
      const std::uint32_t dk = matmul(base + "/dK", Phase::Backward, a.seq, a.seq, a.dh, act_, {ds}, 0, 0, a.heads_total);
      const std::uint32_t dw_qkv = matmul(base + "/qkv/dW", Phase::Backward, a.d, a.tokens, 3 * a.d, DType::F32, {dq, dk, dv});
      if (s.use_bias) {
        fuse_bias_gradient(dw_out, a.tokens * a.d);
        fuse_bias_gradient(dw_qkv, 3 * a.tokens * a.d);
      }
      r.grads = {dw_out, dw_qkv};
      if (needs_dx) {
        r.dx = matmul(base + "/qkv/dX" + in_grad_name, Phase::Backward, a.tokens, 3 * a.d, a.d, act_, {dq, dk, dv}, in_grad_ops,
                      in_grad_bytes);
        r.has_dx = true;
      }
      return r;
    }
    // add, flatten, take_first: the gradient passes through
    return pass_through(dy.front());
  }

  // A bias gradient is the output gradient summed over rows. XLA computes it in the weight
  // gradient's fusion, which reads that gradient anyway (a multi-output fusion): vector work on
  // the way, no pass over HBM of its own. `sums`: the additions, one per output-gradient element.
  void fuse_bias_gradient(std::uint32_t dw, std::uint64_t sums) {
    Op& op = pb_.op(dw);
    const MatmulWork& mm = op.matmul;
    op.matmul.epilogue_vpu_ops_per_element += static_cast<double>(sums) / static_cast<double>(mm.batch * mm.m * mm.n);
    op.name += "+dbias";
  }

  // The node's activation gradient will be applied by its consumer's dX epilogue.
  void fuse_grad_into_consumer(std::size_t node) { own_grad_fused_.insert(node); }

  static std::string chain_name(const std::vector<const Node*>& chain) {
    std::string name;
    for (const Node* node : chain) name += (name.empty() ? "" : "+") + node->spec.name;
    return name;
  }

  static bool elementwise(const Node& node) {
    const std::string& t = node.spec.type;
    return t == "batch_norm" || t == "layer_norm" || t == "activation" || t == "add" || t == "dropout";
  }

  // A chain of elementwise layers as one pass: its external inputs read once, its output (and any
  // intermediate the backward pass keeps) written once. `stats_in_producer`: the first layer's
  // normalization statistics come from the producing matmul's epilogue, not from a pass of their own.
  std::uint32_t fused_forward(const std::vector<const Node*>& chain, std::vector<std::uint32_t> deps, bool stats_in_producer) {
    const std::uint64_t e = b_ * elements(chain.back()->out);
    double ops = 0;
    std::uint64_t reads = e, writes = e;
    for (std::size_t i = 0; i < chain.size(); ++i) {
      const Node& node = *chain[i];
      const std::string& t = node.spec.type;
      if (t == "batch_norm" || t == "layer_norm") {
        ops += kNormVpuOps;
        // Batch statistics need the whole tensor first; row statistics (layer norm) stay in VMEM.
        if (t == "batch_norm" && !(i == 0 && stats_in_producer)) reads += e;
      } else if (t == "activation") {
        ops += activation_vpu_ops(node.spec.activation);
      } else if (t == "add") {
        ops += static_cast<double>(node.inputs.size() - 1);
        reads += (node.inputs.size() - 1) * e;
      } else if (t == "dropout" && node.spec.rate > 0) {
        ops += 3;
        writes += e / 8;
      }
      if (i + 1 < chain.size() && kept_for_backward(node)) writes += e;  // an intermediate the backward pass needs
    }
    return vector(chain_name(chain) + "/fwd", Phase::Forward, e, ops, reads * act_bytes_, writes * act_bytes_, std::move(deps));
  }

  // The backward of such a chain as one pass: reads the gradient and what the layers kept, writes
  // the input gradient (and the normalizations' parameter gradients).
  // The output gradient may come in several parts (a residual block's output feeds the next
  // block and its shortcut): the pass adds them as it reads them, as XLA fuses the sum into the
  // chain's backward instead of writing it out first.
  std::uint32_t fused_backward(const std::vector<const Node*>& chain, std::vector<std::uint32_t> dy) {
    const std::uint64_t e = b_ * elements(chain.back()->out);
    const std::uint64_t gradient_parts = std::max<std::size_t>(1, dy.size());
    double ops = static_cast<double>(gradient_parts - 1);
    std::uint64_t reads = gradient_parts * e * act_bytes_;
    for (const Node* member : chain) {
      const Node& node = *member;
      const std::string& t = node.spec.type;
      if (t == "batch_norm" || t == "layer_norm") {
        ops += kNormGradVpuOps;
        reads += e * act_bytes_;  // the normalized input
      } else if (t == "activation") {
        ops += activation_grad_vpu_ops(node.spec.activation);
        reads += node.spec.activation == "relu" ? e / 8 : e * act_bytes_;
      } else if (t == "dropout" && node.spec.rate > 0) {
        ops += 2;
        reads += e / 8;
      }
    }
    return vector(chain_name(chain) + "/bwd", Phase::Backward, e, ops, reads, e * act_bytes_, std::move(dy));
  }

  // Activations this node's backward keeps from the forward pass, bytes on this core: the output
  // of a layer is kept when a consumer's gradient needs it (a matmul's input for dW, a
  // normalization's input, a max pool's input); relu and dropout keep one bit per element.
  std::uint64_t saved_bytes(const Node& node) const {
    const std::string& t = node.spec.type;
    const std::uint64_t out = b_ * elements(node.out);
    std::uint64_t bytes = 0;
    if (!is_view(node) && kept_for_backward(node)) bytes += out * act_bytes_;
    if ((t == "activation" && node.spec.activation == "relu") || (t == "dropout" && node.spec.rate > 0)) bytes += out / 8;
    if (matmul_layer(node) && node.spec.activation != "linear") bytes += out * act_bytes_;  // the pre-activation, for its gradient
    if (t == "attention") {
      const Attention a = attention(node);
      bytes += a.score_elements * act_bytes_ + 3 * a.tokens * a.d * act_bytes_;  // probabilities, Q, K, V
    }
    return bytes;
  }

 private:
  // Layers whose output is their input seen differently: they store nothing of their own.
  static bool is_view(const Node& node) { return node.spec.type == "flatten" || node.spec.type == "take_first"; }
  // Whether a consumer's gradient needs this output (looking through views).
  bool kept_for_backward(const Node& node) const {
    for (auto c : node.consumers) {
      const Node& consumer = g_.nodes[c];
      const std::string& ct = consumer.spec.type;
      if (is_view(consumer) ? kept_for_backward(consumer)
                            : ct == "dense" || ct == "conv2d" || ct == "batch_norm" || ct == "layer_norm" || ct == "attention" ||
                                  ct == "max_pool" || (ct == "activation" && consumer.spec.activation != "relu"))
        return true;
    }
    return false;
  }

  struct Conv {
    std::uint64_t m, k, n;        // forward im2col product
    std::uint64_t dx_m, dx_k;     // input gradient: rows of the input, K of the transposed product
    double fwd_lhs_fraction, dx_lhs_fraction, dw_lhs_fraction;
  };
  Conv conv(const Node& node) const {
    const LayerSpec& s = node.spec;
    const double in_px = static_cast<double>(node.in[0] * node.in[1]), out_px = static_cast<double>(node.out[0] * node.out[1]);
    const double taps = static_cast<double>(s.kernel * s.kernel), g = static_cast<double>(s.groups);
    Conv c;
    c.m = b_ * node.out[0] * node.out[1];
    c.k = s.kernel * s.kernel * node.in[2] / s.groups;
    c.n = s.filters;
    c.dx_m = b_ * node.in[0] * node.in[1];
    c.dx_k = s.kernel * s.kernel * s.filters / s.groups;
    // Each input pixel is read once however many output windows use it.
    c.fwd_lhs_fraction = in_px * g / (out_px * taps);
    c.dx_lhs_fraction = out_px * g / (in_px * taps);
    c.dw_lhs_fraction = c.fwd_lhs_fraction;
    return c;
  }
  struct Attention {
    std::uint64_t seq, d, dh, heads_total, tokens, score_elements;
  };
  Attention attention(const Node& node) const {
    Attention a;
    a.seq = node.in[0];
    a.d = node.in[1];
    a.dh = a.d / node.spec.heads;
    a.heads_total = b_ * node.spec.heads;
    a.tokens = b_ * a.seq;
    a.score_elements = a.heads_total * a.seq * a.seq;
    return a;
  }

  ProgramBuilder& pb_;
  const ModelGraph& g_;
  std::uint64_t b_;
  DType act_;
  std::uint32_t act_bytes_;
  std::uint32_t passes_;
  std::set<std::size_t> own_grad_fused_;
};

}  // namespace

LoweredStep lower_training_step(const Workload& w, const HwConfig& hw) {
  LoweredStep out;
  out.model = analyze_model(w);
  const ModelGraph& model = out.model;

  // Data parallelism: one replica per core, or per chip when the chip's cores form one device.
  const std::uint64_t chips = hw.chip_count();
  out.replicas = static_cast<std::uint32_t>(hw.chip.megacore ? chips : chips * hw.chip.cores);
  const std::uint32_t cores_per_replica = hw.chip.megacore ? hw.chip.cores : 1;
  const char* batch_key = w.per_replica_batch > 0 ? "per_replica_batch" : "global_batch";
  if (w.per_replica_batch > 0) {
    out.per_replica_batch = w.per_replica_batch;
    out.global_batch = w.per_replica_batch * out.replicas;
  } else {
    out.global_batch = w.global_batch;
    if (w.global_batch % out.replicas != 0)
      throw std::invalid_argument(fmt::format(
          "workload.training.global_batch: {} does not divide over the {} replicas of a {} {} slice "
          "(expected a multiple of {})", w.global_batch, out.replicas, topology_string(hw.slice_dims), hw.name, out.replicas));
    out.per_replica_batch = w.global_batch / out.replicas;
  }
  if (out.per_replica_batch % cores_per_replica != 0)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: the per-replica batch {} does not split over the {} cores of a megacore chip", batch_key,
        out.per_replica_batch, cores_per_replica));
  const std::uint64_t b = out.per_replica_batch / cores_per_replica;
  out.per_core_batch = b;
  std::uint64_t widest = elements(model.input);
  for (const auto& node : model.nodes) widest = std::max(widest, elements(node.out));
  if (widest > kMaxElements / b)
    throw std::invalid_argument(fmt::format(
        "workload.training.{}: {} samples per core of {} elements is beyond what tpusim models (at most {} elements per tensor)",
        batch_key, b, widest, kMaxElements));

  const bool mixed = w.precision == Precision::MixedBfloat16;
  const DType act = mixed ? DType::BF16 : DType::F32;
  const std::uint32_t act_bytes = dtype_bytes(act);
  const std::uint32_t passes = mixed ? 1 : w.fp32_matmul_passes;
  const OptimizerCost opt = optimizer_cost(w.optimizer);

  Program& program = out.program;
  program.steps = w.steps;
  program.steps_per_launch = w.steps_per_execution;
  program.launch_ps = ns_to_ps(hw.host.launch_overhead_us * 1000);
  ProgramBuilder pb(program);
  StepEmitter em(pb, model, b, act, passes);

  // Input: this core's share of the batch arrives from the host.
  out.infeed.samples_per_core = b;
  const std::uint32_t in_elem_bytes = w.input_dtype == "uint8" ? 1 : w.input_dtype == "bfloat16" ? 2 : 4;
  const std::uint64_t sample_bytes = w.bytes_per_sample > 0 ? w.bytes_per_sample : elements(model.input) * in_elem_bytes;
  out.infeed.bytes_per_core = b * sample_bytes;
  out.infeed.host_samples_per_s = w.host_samples_per_s;
  out.infeed.prefetch_batches = w.prefetch_batches;
  Op infeed;
  infeed.kind = OpKind::Infeed;
  infeed.phase = Phase::Input;
  infeed.name = "infeed";
  infeed.infeed.bytes = out.infeed.bytes_per_core;
  const std::uint32_t input_op = pb.add(std::move(infeed), {});

  // Chains of elementwise layers, each layer feeding only the next, run fused as one pass.
  const std::size_t n = model.nodes.size();
  std::vector<std::size_t> chain_of(n, kModelInput);
  std::vector<std::vector<const Node*>> chains;
  if (w.fusion)
    for (const Node& node : model.nodes) {
      if (!StepEmitter::elementwise(node)) continue;
      const std::size_t in0 = node.inputs[0];
      if (in0 != kModelInput && chain_of[in0] != kModelInput && model.nodes[in0].consumers.size() == 1 &&
          chains[chain_of[in0]].back() == &model.nodes[in0]) {
        chain_of[node.index] = chain_of[in0];
        chains[chain_of[in0]].push_back(&node);
      } else {
        chain_of[node.index] = chains.size();
        chains.push_back({&node});
      }
    }
  auto fused = [&](std::size_t i) { return chain_of[i] != kModelInput && chains[chain_of[i]].size() > 1; };

  // Forward, in layer order, each op after the ops that produce its inputs.
  std::vector<std::uint32_t> fwd(n);
  for (const Node& node : model.nodes) {
    if (fused(node.index)) {
      const auto& chain = chains[chain_of[node.index]];
      if (chain.back() != &node) continue;  // emitted with the chain's last layer
      std::vector<std::uint32_t> deps;
      std::set<std::size_t> inside;
      for (const Node* member : chain) inside.insert(member->index);
      for (const Node* member : chain)
        for (auto input : member->inputs)
          if (!inside.count(input)) deps.push_back(input == kModelInput ? input_op : fwd[input]);
      const std::size_t producer = chain.front()->inputs[0];
      const bool stats_in_producer = producer != kModelInput && matmul_layer(model.nodes[producer]) &&
                                     chain.front()->spec.type == "batch_norm";
      if (stats_in_producer) program.ops[fwd[producer]].matmul.epilogue_vpu_ops_per_element += 3;
      const std::uint32_t op = em.fused_forward(chain, deps, stats_in_producer);
      for (const Node* member : chain) fwd[member->index] = op;
      continue;
    }
    std::vector<std::uint32_t> deps;
    for (auto input : node.inputs) deps.push_back(input == kModelInput ? input_op : fwd[input]);
    fwd[node.index] = em.forward(node, deps);
  }

  // Loss and its gradient on the last layer's output (per token for sequence outputs).
  const Node& head = model.nodes.back();
  const std::uint64_t logits = b * elements(head.out);
  const std::uint64_t labels = b * (head.out.size() > 1 ? elements(head.out) / head.out.back() : 1);
  const std::uint32_t loss = em.vector(head.spec.activation + "+" + w.loss, Phase::Backward, logits,
                                       activation_vpu_ops(head.spec.activation) + loss_vpu_ops(w.loss),
                                       logits * act_bytes + labels * 4, logits * act_bytes, {fwd.back()});
  // The head's own activation is part of the loss, as Keras fuses softmax into cross-entropy.
  em.fuse_grad_into_consumer(head.index);

  // A layer needs its input's gradient only when something with weights lies behind it.
  std::vector<bool> requires_grad(n, false);
  for (const Node& node : model.nodes) {
    requires_grad[node.index] = node.trainable > 0;
    for (auto input : node.inputs)
      if (input != kModelInput && requires_grad[input]) requires_grad[node.index] = true;
  }

  // Backward, last layer first. A layer's output gradient is complete when every consumer has
  // produced its share (summed in one pass when there are several).
  std::vector<std::vector<std::uint32_t>> dy(n);
  dy[n - 1] = {loss};
  struct Bucket {
    std::vector<std::uint32_t> grads;
    std::uint64_t params = 0;
    std::string first, last;
    std::uint32_t all_reduce = 0;
  };
  std::vector<Bucket> buckets(1);
  std::vector<std::uint32_t> all_grads;
  // The sequencer issues ops in program order, so a bucket's all-reduce is placed where its last
  // gradient is, to start while the rest of the backward pass runs (or after it, without overlap).
  // Gradients and weights cross replicas as f32, with the workload's algorithm and chunking.
  auto f32_collective = [&](CollectiveKind kind, Phase phase, std::string name, std::uint64_t params,
                            const std::vector<std::uint32_t>& deps) {
    Op op;
    op.kind = OpKind::Collective;
    op.phase = phase;
    op.name = std::move(name);
    op.collective.kind = kind;
    op.collective.bytes = params * 4;
    op.collective.dtype = DType::F32;
    op.collective.algorithm = w.all_reduce_algorithm;
    op.collective.chunk_bytes = w.all_reduce_chunk_bytes;
    return pb.add(std::move(op), deps);
  };
  auto issue_all_reduce = [&](Bucket& bk, const std::vector<std::uint32_t>& deps) {
    const char* what = w.weight_update_sharding ? "reduce-scatter" : "all-reduce";
    bk.all_reduce = f32_collective(w.weight_update_sharding ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce,
                                   Phase::Gradients,
                                   bk.first == bk.last ? fmt::format("{}/grad/{}", bk.first, what)
                                                       : fmt::format("grads[{}..{}]/{}", bk.first, bk.last, what),
                                   bk.params, deps);
  };
  for (std::size_t i = n; i-- > 0;) {
    const Node& node = model.nodes[i];
    if (dy[i].empty()) continue;  // not on the loss's path
    std::vector<std::uint32_t> deps = dy[i];
    if (deps.size() > 1 && !fused(i))
      deps = {em.vector(node.spec.name + "/bwd/sum_grads", Phase::Backward, b * elements(node.out),
                        static_cast<double>(deps.size() - 1), deps.size() * b * elements(node.out) * act_bytes,
                        b * elements(node.out) * act_bytes, deps)};
    if (fused(i)) {
      // The whole chain's backward, reached at its last layer; its gradient flows to the chain's
      // input and to the residual inputs of its adds.
      const auto& chain = chains[chain_of[i]];
      const std::uint32_t op = em.fused_backward(chain, deps);
      std::set<std::size_t> inside;
      for (const Node* member : chain) inside.insert(member->index);
      std::uint64_t trainable = 0;
      for (const Node* member : chain) {
        trainable += member->trainable;
        for (auto input : member->inputs)
          if (!inside.count(input) && input != kModelInput && requires_grad[input]) dy[input].push_back(op);
      }
      for (const Node* member : chain)
        if (member != &node) dy[member->index].clear();  // handled here
      if (trainable > 0) {
        Bucket& bk = buckets.back();
        bk.grads.push_back(op);
        bk.params += trainable;
        if (bk.first.empty()) bk.first = chain.back()->spec.name;
        bk.last = chain.front()->spec.name;
        all_grads.push_back(op);
        if (bk.params * 4 >= w.all_reduce_bucket_bytes) {
          if (w.all_reduce_overlap) issue_all_reduce(bk, bk.grads);
          buckets.emplace_back();
        }
      }
      continue;
    }
    // An input whose activation is applied elementwise, with this layer its only consumer, gets
    // its activation gradient in this layer's dX epilogue.
    const Node* fused_input = nullptr;
    const std::size_t in0 = node.inputs[0];
    if (matmul_layer(node) || node.spec.type == "attention")
      if (in0 != kModelInput && model.nodes[in0].consumers.size() == 1 && !fused(in0) &&
          ((matmul_layer(model.nodes[in0]) || model.nodes[in0].spec.type == "activation") &&
           model.nodes[in0].spec.activation != "linear")) {
        fused_input = &model.nodes[in0];
        em.fuse_grad_into_consumer(in0);
      }
    const bool needs_dx = std::any_of(node.inputs.begin(), node.inputs.end(),
                                      [&](std::size_t x) { return x != kModelInput && requires_grad[x]; });
    const auto r = em.backward(node, deps, needs_dx, fused_input);
    if (r.has_dx)
      for (auto input : node.inputs)
        if (input != kModelInput && requires_grad[input]) dy[input].push_back(r.dx);
    if (node.trainable > 0) {
      Bucket& bk = buckets.back();
      bk.grads.insert(bk.grads.end(), r.grads.begin(), r.grads.end());
      bk.params += node.trainable;
      if (bk.first.empty()) bk.first = node.spec.name;
      bk.last = node.spec.name;
      all_grads.insert(all_grads.end(), r.grads.begin(), r.grads.end());
      if (bk.params * 4 >= w.all_reduce_bucket_bytes) {
        if (w.all_reduce_overlap) issue_all_reduce(bk, bk.grads);
        buckets.emplace_back();
      }
    }
  }
  if (buckets.back().params == 0) buckets.pop_back();
  for (auto& bk : buckets)
    if (!w.all_reduce_overlap) issue_all_reduce(bk, all_grads);
  if (w.all_reduce_overlap && !buckets.empty() && buckets.back().grads.size() > 0 &&
      buckets.back().params * 4 < w.all_reduce_bucket_bytes)
    issue_all_reduce(buckets.back(), buckets.back().grads);  // the last, partly filled bucket

  // The optimizer updates each bucket's weights once its gradients are reduced.
  std::vector<std::uint32_t> reduced;
  for (const auto& bk : buckets) reduced.push_back(bk.all_reduce);
  // With weight-update sharding a replica updates only its share (rounded up: the last replica's
  // is no larger) and the updated f32 weights are all-gathered back into every replica.
  const std::uint64_t update_share = w.weight_update_sharding ? out.replicas : 1;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const std::uint64_t p = (buckets[k].params + update_share - 1) / update_share;
    const std::string params_name = buckets[k].first == buckets[k].last
                                        ? buckets[k].first
                                        : fmt::format("params[{}..{}]", buckets[k].first, buckets[k].last);
    const std::uint32_t update =
        em.vector(params_name + "/" + w.optimizer + "_update", Phase::Optimizer, p, opt.vpu_ops_per_param,
                  p * (4 + 4 + 4ull * opt.state_f32_per_param), p * (4 + 4ull * opt.state_f32_per_param + (mixed ? 2 : 0)),
                  {reduced[k]});
    if (!w.weight_update_sharding) continue;
    f32_collective(CollectiveKind::AllGather, Phase::Optimizer, params_name + "/all-gather", buckets[k].params, {update});
  }

  for (const Op& op : program.ops) out.model_flops_per_core += op.model_flops;

  // Memory per core. A megacore chip holds one copy of the replica's state for its cores.
  const std::uint64_t params = model.params(), trainable = model.trainable();
  MemoryFootprint& mem = out.memory;
  mem.parameters = (params * 4 + (mixed ? trainable * 2 : 0)) / cores_per_replica;
  mem.gradients = trainable * 4 / cores_per_replica;
  mem.optimizer_state = trainable * 4ull * opt.state_f32_per_param / cores_per_replica / update_share;
  mem.activations = b * sample_bytes;
  for (const Node& node : model.nodes) mem.activations += em.saved_bytes(node);
  out.hbm_capacity_per_core_bytes = hw.hbm.capacity_bytes / hw.chip.cores;
  return out;
}

}  // namespace tpusim
