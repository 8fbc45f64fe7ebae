// A training workload, typed. sim/config builds it from the validated workload JSON; the
// driver lowers it to a per-core program.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/program.hpp"

namespace tpusim {

enum class Precision { Float32, MixedBfloat16 };
// What rematerialization keeps of a segment besides its input (MaxText's remat_policy names):
// nothing; every weight matmul's output; all of them but an MLP's first layer's; what
// RematCustom says of each named result.
enum class RematPolicy { Full, Minimal, SaveDotExceptMlpIn, Custom };
// Where MaxText's custom remat policy puts one named result: computed again in the backward pass,
// kept in HBM, or offloaded to host memory and fetched back before the backward pass needs it.
enum class Keep : std::uint8_t { Remat, Device, Offload };
// MaxText's checkpoint names (remat_policy custom), as tpusim's layers have them.
struct RematCustom {
  Keep decoder_layer_input = Keep::Device;  // each segment's input, the checkpoint (never recomputed)
  Keep qkv = Keep::Remat;                   // attention's query, key and value projections
  Keep context = Keep::Remat;               // attention's heads' output, the output projection's input
  Keep out_proj = Keep::Remat;              // attention's output projection
  Keep mlpwi = Keep::Remat;                 // an MLP's first layer (a gated MLP's gate and up projections)
  Keep mlpwo = Keep::Remat;                 // an MLP's last layer
  bool offloads() const {
    for (Keep k : {decoder_layer_input, qkv, context, out_proj, mlpwi, mlpwo})
      if (k == Keep::Offload) return true;
    return false;
  }
};
enum class GradientClipping { None, BeforeAllReduce, AfterAllReduce };

// A window's size along height and width (a kernel, a pool, strides, a dilation): the workload
// gives one number for a square window or [height, width]. Over a sequence ([steps, channels]:
// conv1d, 1-D pools) the height is 1 and the width runs along the steps.
struct WindowSize {
  std::uint64_t h = 0, w = 0;
  static WindowSize square(std::uint64_t n) { return {n, n}; }
  std::uint64_t area() const { return h * w; }
  bool operator==(const WindowSize& o) const { return h == o.h && w == o.w; }
  bool operator!=(const WindowSize& o) const { return !(*this == o); }
};

// One layer as the workload file gives it; which fields apply depends on the type (see
// docs/workload_format.md). Sizes are per sample.
struct LayerSpec {
  std::string type;
  std::string name;
  std::vector<std::string> inputs;  // layers feeding this one; empty: the previous layer
  bool trainable = true;  // false: frozen (Keras's trainable): no weight gradient, all-reduce or optimizer state
  std::string activation = "linear";
  bool use_bias = true;
  std::uint64_t units = 0;                      // dense
  bool tied_weights = false;                    // dense: reuses the embedding's table, no weights of its own
  std::uint64_t filters = 0;                    // convolutions
  WindowSize kernel;                                // convolutions, patch_embedding
  WindowSize strides;                               // convolutions, pools; 0: 1 for convolutions, the pool for pools
  WindowSize dilation = WindowSize::square(1);          // convolutions: spacing of the kernel's taps
  std::uint64_t groups = 1;                     // convolutions
  std::uint64_t depth_multiplier = 1;           // depthwise_conv2d: output channels per input channel
  std::string padding = "same";                 // convolutions, pools (conv1d also "causal")
  std::vector<std::uint64_t> pads;              // convolutions, pools: explicit [top, bottom, left, right]; empty: padding decides
  bool ceil_mode = false;                       // pools: count a last, partial window (torch's ceil_mode)
  WindowSize pool;                                  // max_pool, avg_pool
  std::uint64_t heads = 0;                      // attention: query heads
  std::uint64_t kv_heads = 0;                   // attention: key/value heads (grouped-query); 0: heads
  std::uint64_t head_dim = 0;                   // attention: each head's width; 0: the model width / heads
  bool rotary = false;                          // attention: rotary position embeddings on Q and K
  bool causal = false;                          // attention (no compute saved: the mask is applied densely)
  std::uint64_t vocab = 0, dim = 0;             // embedding; dim also patch_embedding
  std::uint64_t positions = 0, segments = 0;    // embedding, patch_embedding: learned position / segment tables
  // Tensor parallelism, set by the sharding of a mesh with a model axis (not a workload key):
  // dense "column" (its units already split) or "row" (its input split), attention "heads", an
  // elementwise layer between a column and a row layer "within".
  std::string tensor_parallel;
  std::uint32_t model_shards = 1;  // the model axis's size
  // A column layer whose input another column layer of its group also reads (a gated MLP's gate
  // and up projections): the first one's name. Their input's gradient is summed over the model
  // axis once for the group.
  std::string column_group;

  // attention: the key/value heads, kv_heads or (0) as many as the query heads.
  std::uint64_t key_value_heads() const { return kv_heads ? kv_heads : heads; }
  // moe: experts per layer (its own keys, top_k, capacity_factor, ..., are in LayerSpec::own);
  // `units` is each expert's hidden width, `activation` its gate's.
  std::uint64_t experts = 0;
  // Expert parallelism, set by the sharding of a mesh with an expert axis (not a workload key):
  // the chips along it each hold experts / expert_shards of a moe layer's experts.
  std::uint32_t expert_shards = 1;
  std::vector<std::uint64_t> shape;             // reshape, slice: one sample's output (reshape: one 0 for what the rest leave); add_parameter: the learned tensor
  std::uint64_t tokens = 0;                     // prepend_tokens: learned rows put first
  // The values of the keys the layer's kind declares itself (LayerKind::own_keys), by name.
  std::map<std::string, nlohmann::json> own;
  template <typename T>
  T own_key(const std::string& key) const {
    return own.at(key).get<T>();
  }
};

struct Workload {
  std::string name;
  std::vector<std::uint64_t> input_shape;  // per sample, e.g. {28, 28}
  std::string input_dtype = "float32";    // as the host ships it
  std::vector<LayerSpec> layers;
  std::string loss = "sparse_categorical_crossentropy";

  std::uint64_t global_batch = 0;       // 0: per_replica_batch x replicas
  std::uint64_t per_replica_batch = 0;  // 0: global_batch / replicas
  Precision precision = Precision::Float32;
  std::uint32_t fp32_matmul_passes = 1;  // XLA DEFAULT / HIGH / HIGHEST: 1 / 3 / 6 bf16 passes
  std::string optimizer = "adam";
  double learning_rate = 0.001;
  std::uint32_t steps = 3;
  // The training run the summary prices: examples per epoch (0: not stated) and epochs.
  std::uint64_t dataset_examples = 0;
  std::uint32_t epochs = 1;
  std::uint32_t steps_per_execution = 1;  // steps per launch of the compiled program (Keras)
  // Failures over a whole run and the checkpoints that bound what each one costs (the summary's
  // goodput): failures per chip-hour (0: not stated, no goodput), each host's bandwidth to the
  // checkpoint's storage, the time to restart the job before the checkpoint is read back, and the
  // interval between checkpoints (0: the optimum, Young and Daly's).
  double failures_per_chip_hour = 0;
  double checkpoint_storage_gbps_per_host = 0;
  double restart_s = 0;
  double checkpoint_interval_s = 0;
  CollectiveAlgorithm all_reduce_algorithm = CollectiveAlgorithm::TorusAllAxes;
  std::uint64_t all_reduce_chunk_bytes = 0;
  std::uint64_t all_reduce_bucket_bytes = 32ull << 20;  // gradients of consecutive layers combined up to this
  bool all_reduce_overlap = true;  // start each bucket as soon as its gradients exist
  bool all_reduce_bf16 = false;    // gradients cross replicas in bfloat16 (cast from f32 and back)
  // Clipping by the global norm (tf.clip_by_global_norm): of each replica's own gradients before
  // they are all-reduced (TF's BERT: no all-reduce can start before the last gradient, the norm
  // and a scaling pass), or of the reduced gradients in the optimizer (optax, MaxText).
  GradientClipping gradient_clipping = GradientClipping::None;
  // Reduce-scatter the gradients, update a 1/replicas share, all-gather the weights.
  bool weight_update_sharding = false;
  // Replicas whose batches a batch norm's statistics are taken over (distributed batch norm).
  std::uint32_t batch_norm_group = 1;
  std::string mesh_model_axes;      // torus axes ("x", "yz") the model axis spans; the rest carry data
  // With fsdp: the data axes the weights are sharded over; the others hold data-parallel replicas
  // of those shards (MaxText's ici_fsdp_parallelism beside ici_data_parallelism). Empty: all.
  std::string mesh_fsdp_axes;
  // Torus axes (data axes) the mesh's expert axis spans: moe layers' experts are split over its
  // chips, and the tokens routed to them cross it in all-to-alls (expert parallelism).
  std::string mesh_expert_axes;
  // Torus axes the mesh's pipeline axis spans: the model's repeating layers are split into that
  // many stages, microbatches flowing through them (MaxText's ici_pipeline_parallelism).
  std::string mesh_pipeline_axes;
  std::uint32_t pipeline_microbatches = 0;  // 0: as many as stages
  std::uint32_t pipeline_repeats = 1;       // > 1: circular, each stage holding that many chunks of layers
  // The replicated layers between the split ones run on 1/model-axis of the tokens, all-gathers
  // and reduce-scatters in place of the all-reduces (Megatron-LM's sequence parallelism).
  bool sequence_parallel = false;
  bool collective_matmul = false;  // those gathers and scatters run inside the matmuls beside them
  bool remat = false;               // the backward pass recomputes each segment between residual adds
  std::uint32_t remat_adds_per_segment = 1;  // 2: one checkpoint per transformer block (MaxText's full remat)
  RematPolicy remat_policy = RematPolicy::Full;
  RematCustom remat_custom;         // with RematPolicy::Custom
  bool flash_attention = false;     // attention's scores stay in vector memory (a Pallas flash kernel)
  bool matmul_output_fusion = true;  // a matmul's elementwise consumers run in its epilogue
  // Dense layers' forward and input-gradient matmuls in this type (training.quantization): Int8
  // as AQT runs them, Fp8 as qwix does (MaxText's fp8_full); BF16: not quantized.
  DType quantized_type = DType::BF16;
  bool quantized_weight_gradients = false;  // their weight-gradient matmuls too (drhs)
  bool quantized_fixed_scales = false;      // weights' and activations' scales constant (qwix "fixed" calibration)
  bool quantized() const { return quantized_type != DType::BF16; }
  bool fsdp = false;                // parameters, gradients and optimizer state sharded; weights gathered per layer group
  bool fusion = true;              // chains of elementwise layers run as one pass, as XLA fuses them
  // An evaluation pass every so many steps (MLPerf evaluates every few epochs inside the blocks it
  // times): its examples' forward passes at the training step's rate, plus the host's own work.
  std::uint64_t eval_examples = 0;  // 0: no evaluation
  double eval_every_steps = 0;
  double eval_host_overhead_s = 0;

  double host_samples_per_s = 0;  // per host; 0: the host is never the bottleneck
  std::uint32_t prefetch_batches = 2;
  std::uint64_t bytes_per_sample = 0;  // 0: input_shape x input_dtype
  // Each host's batches take this much longer on average, at random (exponentially distributed,
  // drawn per host and batch from the seed): a storage read, a pause of the host's runtime.
  double batch_jitter_mean_s = 0;
  std::uint64_t jitter_seed = 1;
};

}  // namespace tpusim
