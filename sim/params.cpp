#include "sim/params.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "hw/hw_config.hpp"
#include "hw/memory.hpp"
#include "sim/hw_keys.hpp"
#include "workloads/layer_kind.hpp"

namespace tpusim {
namespace {

using json = nlohmann::json;
constexpr double kInf = std::numeric_limits<double>::infinity();

ParamSpec hw(std::string path, ParamType type, std::string unit, std::string description, double min = -kInf,
             double max = kInf, std::vector<std::string> choices = {}) {
  return {"hw", std::move(path), type, std::move(unit), nullptr, std::move(description), min, max,
          std::move(choices), true};
}

ParamSpec wl(std::string path, ParamType type, std::string unit, json default_value, std::string description,
             double min = -kInf, double max = kInf, std::vector<std::string> choices = {}) {
  const bool required = default_value.is_null();
  return {"workload", std::move(path), type,   std::move(unit),   std::move(default_value),
          std::move(description), min, max, std::move(choices), required};
}

// A key that may be absent and has no default (its meaning depends on other keys).
ParamSpec optional(ParamSpec spec) {
  spec.required = false;
  return spec;
}

// Short: every line of the tables below names a type.
using T = ParamType;

// ---- hardware ----------------------------------------------------------------------------

// The knobs the registered memory models declared (hw/memory.hpp), under hw.hbm.<model>, which
// must not be a key or block of hw.hbm's own (declared before them).
void add_memory_model_keys(std::vector<ParamSpec>& r) {
  for (const auto& [model, description] : memory_models()) {
    const std::string block = "hbm." + model;
    if (memory_model_keys(model).empty()) continue;
    if (std::any_of(r.begin(), r.end(), [&](const ParamSpec& p) { return p.path == block || p.path.rfind(block + ".", 0) == 0; }))
      throw std::logic_error(fmt::format("memory model \"{}\": its knobs would be hw.{}.*, and hw.{} is a key already", model, block,
                                         block));
    for (const MemoryModelKey& key : memory_model_keys(model))
      r.push_back({"hw", block + "." + key.name, T::Float, key.unit, key.default_value,
                   fmt::format("{} (memory model {})", key.description, model), key.min, key.max, {}, false});
  }
}

void add_slice_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      {"hw", "slice.count", T::Int, "slices", 1, "Identical slices joined by the data-center network (Cloud TPU multislice; --slices sets it). They hold data-parallel replicas (MaxText's dcn_data_parallelism): gradients are reduced within each slice over ICI, all-reduced over the DCN between slices, and gathered back. One slice is simulated; its chips' peers in the others do the same at the same time", 1, 4096, {}, false},
      hw("slice.topology", T::String, "chips", "Slice shape as a torus of chips, e.g. 2x2, 4x4, 4x4x4 (--topology sets it)"),
      hw("slice.shapes", T::StringList, "", "Slice shapes the generation offers; empty: any shape within the chip and port limits"),
      hw("slice.cube_multiple", T::Int, "chips", "Also allowed: 3D shapes whose every axis is a multiple of this (optical-switch cubes); 0: none", 0, 64),
      {"hw", "slice.pod", T::String, "chips", "", "Shape of one pod (\"32x32\"), for slices of several pods; empty: a slice is at most one pod", -kInf, kInf, {}, false},
      {"hw", "slice.max_pods", T::Int, "pods", 1, "Pods joined side by side along x into one slice beyond hw.chip.max_chips (a multipod: Google's MLPerf v0.7 TPU v3-4096 and v3-8192, 2 and 4 pods of 32x32 as 64x32 and 128x32, the long axis open, each pod's 32 wrapping); 1: none", 1, 64, {}, false},
  });
}

void add_slow_hardware_and_fault_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      {"hw", "slow_chips", T::ObjectList, "", json::array(), "Chips slower than the rest of the slice (stragglers), each {chip, core_freq_scale, hbm_bw_scale}", -kInf, kInf, {}, false},
      {"hw", "slow_chips[].chip", T::Int, "chip", nullptr, "Index of the slow chip in the slice (x fastest)", 0, 65535, {}, true},
      {"hw", "slow_chips[].core_freq_scale", T::Float, "", 1.0, "Its TensorCores' clock as a fraction of core.freq_mhz", 0.01, 1, {}, false},
      {"hw", "slow_chips[].hbm_bw_scale", T::Float, "", 1.0, "Its HBM's bandwidth as a fraction of hbm.bw_gbps (degraded memory)", 0.01, 1, {}, false},
      {"hw", "slow_chip_draw.fraction", T::Float, "", 0.0, "Fraction of the slice's chips made slow at random (a fleet's spread of slow parts), besides hw.slow_chips; the draw is seeded, so a run repeats it", 0, 1, {}, false},
      {"hw", "slow_chip_draw.core_freq_scale_min", T::Float, "", 0.9, "Slowest clock a drawn chip gets, as a fraction of core.freq_mhz (each drawn chip's is uniform between min and max)", 0.01, 1, {}, false},
      {"hw", "slow_chip_draw.core_freq_scale_max", T::Float, "", 1.0, "Fastest clock a drawn chip gets, as a fraction of core.freq_mhz", 0.01, 1, {}, false},
      {"hw", "slow_chip_draw.seed", T::Int, "", 1, "Seed of the draw (mt19937_64): another seed, another set of chips", 0, 4294967295.0, {}, false},
      {"hw", "slow_links", T::ObjectList, "", json::array(), "ICI links slower than the rest (degraded cables or optics), each {chip, direction, bw_scale}", -kInf, kInf, {}, false},
      {"hw", "slow_links[].chip", T::Int, "chip", nullptr, "Chip the link leaves (x fastest)", 0, 65535, {}, true},
      {"hw", "slow_links[].direction", T::String, "", nullptr, "Axis and direction it leaves in", -kInf, kInf, {"x+", "x-", "y+", "y-", "z+", "z-"}, true},
      {"hw", "slow_links[].bw_scale", T::Float, "", nullptr, "Its bandwidth as a fraction of ici.link_bw_gbps; 0: the link is down and routes go the other way round its ring", 0, 1, {}, true},
      {"hw", "faults", T::ObjectList, "", json::array(), "Faults injected on purpose to test the end-of-run checks, each {kind, chip}", -kInf, kInf, {}, false},
      {"hw", "faults[].kind", T::String, "", nullptr, "What breaks: the DMA engines drop the last chunk of each transfer, or the collective unit never joins", -kInf, kInf, {"dma_drop_chunk", "skip_collective"}, true},
      {"hw", "faults[].chip", T::Int, "chip", nullptr, "Chip it breaks (x fastest)", 0, 65535, {}, true},
  });
}

// About the hardware file rather than the hardware: neither key reaches the simulation.
void add_hw_file_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      {"hw", "sources", T::StringMap, "", json::object(), "Where each value comes from: key path -> citation (not used by the simulation)", -kInf, kInf, {}, false},
      {"hw", "base", T::String, "", nullptr, "Preset this file inherits every key it does not set from (e.g. tpu_v4)", -kInf, kInf, {}, false},
  });
}

// ---- workload ----------------------------------------------------------------------------

void add_workload_model_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("name", T::String, "", nullptr, "Name of the workload"),
      wl("description", T::String, "", "", "Free text"),
      wl("model.input_shape", T::IntList, "elements", nullptr, "Shape of one input sample, e.g. [28, 28]", 1, 1e9),
      wl("model.input_dtype", T::String, "", "float32", "Element type of the samples the host ships (int32 for token ids)", -kInf, kInf, {"uint8", "int32", "bfloat16", "float32"}),
      wl("model.layers", T::ObjectList, "", nullptr, "Layers in order, each an object with a type"),
      optional(wl("model.onnx", T::String, "", nullptr, "An ONNX model file (what torch.onnx.export writes; relative to the workload file) whose input and layers become this model's, in place of input_shape and layers")),
      optional(wl("model.keras_json", T::String, "", nullptr, "A Keras model JSON file (what model.to_json() writes; relative to the workload file) whose input and layers become this model's, in place of input_shape and layers")),
      wl("model.imported_from", T::String, "", "", "Set by tpusim: the file the layers were imported from (a record; not read)"),
  });
}

void add_layer_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("model.layers[].type", T::String, "", nullptr, "Layer type", -kInf, kInf, layer_kind_names()),
      wl("model.layers[].name", T::String, "", "", "Layer name shown in the trace and used by inputs (default: type_index)"),
      wl("model.layers[].trainable", T::Bool, "", true, "Training updates the layer's parameters; false: frozen, as Keras's trainable (no weight gradient, all-reduce or optimizer state; the gradient still passes through to layers before it)"),
      optional(wl("model.layers[].inputs", T::StringList, "", nullptr, "Names of the layers feeding this one (add: two or more); default: the previous layer")),
      optional(wl("model.layers[].units", T::Int, "features", nullptr, "dense: output features; moe: each expert's hidden features (required)", 1, 1e7)),
      wl("model.layers[].activation", T::String, "", "linear", "dense, conv2d, activation: the activation (fused into dense and conv2d); moe: each expert's gate (or up projection)", -kInf, kInf, activation_names()),
      wl("model.layers[].use_bias", T::Bool, "", true, "dense, conv2d, attention: add bias vectors"),
      wl("model.layers[].tied_weights", T::Bool, "", false, "dense: use the embedding's table as weights (a tied language-model head: no parameters of its own)"),
      optional(wl("model.layers[].filters", T::Int, "channels", nullptr, "conv2d: output channels (required)", 1, 1e6)),
      optional(wl("model.layers[].kernel", T::Window, "pixels", nullptr, "conv2d, depthwise_conv2d: kernel size, one number for a square kernel or [height, width] (Inception's [1, 7]); conv1d: its length; patch_embedding: the patch size (required)", 1, 1024)),
      wl("model.layers[].strides", T::Window, "pixels", 0, "convolutions, pools: stride, one number or [height, width]; 0: 1 for convolutions, the pool size for pools", 0, 1024),
      wl("model.layers[].dilation", T::Window, "pixels", 1, "convolutions: spacing of the kernel's taps, one number or [height, width] (atrous convolutions, WaveNet's dilated causal conv1d); 1: adjacent", 1, 1024),
      wl("model.layers[].depth_multiplier", T::Int, "", 1, "depthwise_conv2d: output channels per input channel", 1, 1024),
      wl("model.layers[].groups", T::Int, "", 1, "conv2d: channel groups; group_norm: groups of channels that share statistics (required)", 1, 1e5),
      wl("model.layers[].padding", T::String, "", "same", "convolutions, pools: output size ceil(in/stride) (same) or floor((in-span)/stride)+1 (valid, span the dilated kernel's); conv1d also causal (Keras Conv1D's: the span - 1 steps padded before, none after)", -kInf, kInf, {"same", "valid", "causal"}),
      optional(wl("model.layers[].pads", T::IntList, "pixels", nullptr, "convolutions, pools: explicit zero padding [top, bottom, left, right] (as Keras ZeroPadding2D or ONNX pads give it; [before, after] over a sequence), instead of padding", 0, 1024)),
      wl("model.layers[].ceil_mode", T::Bool, "", false, "max_pool, avg_pool: also count a last window that overhangs the (padded) input, as torch's ceil_mode does"),
      optional(wl("model.layers[].pool", T::Window, "pixels", nullptr, "max_pool, avg_pool: window, one number for a square window (over a sequence, its length) or [height, width] (required)", 1, 1024)),
      optional(wl("model.layers[].heads", T::Int, "heads", nullptr, "attention: heads; the model width must divide by it (required)", 1, 1024)),
      wl("model.layers[].kv_heads", T::Int, "heads", 0, "attention: key/value heads, each serving a group of query heads (grouped-query attention; 1: multi-query); 0: as many as heads", 0, 1024),
      wl("model.layers[].head_dim", T::Int, "features", 0, "attention: each head's width; 0: the model width / heads", 0, 4096),
      wl("model.layers[].rotary", T::Bool, "", false, "attention: rotary position embeddings on Q and K (Llama, Gemma): a vector pass over them forward and backward"),
      wl("model.layers[].causal", T::Bool, "", false, "attention: causal mask (applied densely, as XLA does without a flash kernel)"),
      optional(wl("model.layers[].vocab", T::Int, "tokens", nullptr, "embedding: rows of the token table (required)", 1, 1e8)),
      optional(wl("model.layers[].dim", T::Int, "features", nullptr, "embedding, patch_embedding: model width (required)", 1, 1e6)),
      wl("model.layers[].positions", T::Int, "positions", 0, "embedding, patch_embedding: rows of a learned position table", 0, 1e7),
      wl("model.layers[].segments", T::Int, "segments", 0, "embedding: rows of a segment (token type) table", 0, 1e4),
      optional(wl("model.layers[].shape", T::IntList, "elements", nullptr, "reshape, slice: the output shape of one sample (reshape: one 0 stands for the size the others leave, Keras Reshape's -1); input: one sample of the further input; add_parameter, multiply_parameter: the learned tensor's shape, broadcast over the input (required)", 0, 1e9)),
      optional(wl("model.layers[].experts", T::Int, "experts", nullptr, "moe: routed experts, each a gated (or plain) MLP of units hidden features (required)", 1, 4096)),
      optional(wl("model.layers[].tokens", T::Int, "tokens", nullptr, "prepend_tokens: learned rows put before the sequence (a class token: 1) (required)", 1, 1e6)),
  });
  // The keys the kinds declare themselves (LayerKind::own_keys), each once: kinds that share one
  // must declare it alike, since a layer of any kind is checked and filled in by one declaration.
  for (const std::string& name : layer_kind_names())
    for (ParamSpec& key : layer_kind(name).own_keys()) {
      const auto same = std::find_if(r.begin(), r.end(), [&](const ParamSpec& p) { return p.doc == key.doc && p.path == key.path; });
      if (same == r.end()) {
        r.push_back(std::move(key));
      } else if (same->type != key.type || same->default_value != key.default_value || same->min != key.min ||
                 same->max != key.max || same->choices != key.choices) {
        throw std::logic_error(fmt::format("layer kind {} declares {} unlike the kind or key that has it already", name, key.path));
      }
    }
}

// model.loss opens the training keys: it is what training minimizes, and the registry's order has it after the layers.
void add_training_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("model.loss", T::String, "", "sparse_categorical_crossentropy", "Loss on the last layer's output", -kInf, kInf, loss_names()),
      wl("training.global_batch", T::Int, "samples", 0, "Samples per step over all replicas; 0: per_replica_batch x replicas (set exactly one of the two)", 0, 1e9),
      wl("training.per_replica_batch", T::Int, "samples", 0, "Samples per replica per step; 0: global_batch / replicas (set exactly one of the two)", 0, 1e8),
      wl("training.precision", T::String, "", "float32", "Keras mixed-precision policy", -kInf, kInf, {"float32", "mixed_bfloat16"}),
      wl("training.fp32_matmul_precision", T::String, "", "default", "bf16 passes of a float32 matmul on the MXU: default 1, high 3, highest 6 (XLA's precision config)", -kInf, kInf, {"default", "high", "highest"}),
      wl("training.optimizer.name", T::String, "", "adam", "Optimizer", -kInf, kInf, optimizer_names()),
      wl("training.optimizer.learning_rate", T::Float, "", 0.001, "Learning rate (recorded, does not change timing)", 0, 1e6),
      wl("training.all_reduce.algorithm", T::String, "", "torus_all_axes", "Gradient all-reduce algorithm: " + collective_algorithms_described(), -kInf, kInf, collective_algorithm_names()),
      wl("training.all_reduce.chunk_bytes", T::Int, "bytes", 0, "Pieces a ring step is sent in, pipelined with the reduction; 0: one piece per step", 0, 1e12),
      wl("training.all_reduce.bucket_bytes", T::Int, "bytes", 33554432, "Gradients of consecutive layers combined into one all-reduce up to this size (like XLA's all-reduce combiner); 0: one per layer", 0, 1e12),
      wl("training.all_reduce.overlap", T::Bool, "", true, "Start each bucket's all-reduce as soon as its gradients exist (false: after the whole backward pass)"),
      wl("training.all_reduce.dtype", T::String, "", "float32", "Type the gradients cross replicas in: bfloat16 casts each gradient to bfloat16 for its all-reduce (or reduce-scatter) and back (TF1 BERT's use_bfloat16_all_reduce), half the bytes", -kInf, kInf, {"float32", "bfloat16"}),
      wl("training.gradient_clipping", T::String, "", "none", "Clipping by the global norm (tf.clip_by_global_norm, optax.clip_by_global_norm): before_all_reduce clips each replica's own gradients before they are all-reduced, as TensorFlow's BERT does (a pass reading every gradient for the norm, then a scaling pass per bucket; no all-reduce starts before the last gradient, whatever all_reduce.overlap says); after_all_reduce clips the reduced gradients in the optimizer, as optax and MaxText do (a pass reading what each core updates for the norm: its replica's gradients, its share of them, half on a megacore chip; a scalar all-reduce of the shares' norms; the scaling inside the update; no update starts before every gradient is reduced)", -kInf, kInf, {"none", "before_all_reduce", "after_all_reduce"}),
      wl("training.batch_norm_group", T::Int, "replicas", 1, "Distributed batch normalization: batch norms take their statistics over the batches of this many neighbouring replicas (a power of two: TensorFlow's distributed_group_size, JAX's axis_index_groups; MLPerf ResNet-50 sets it once a replica's batch is small), so each one's forward all-reduces its per-channel sums (and sums of squares) in f32 among the group's chips before it normalizes, and its backward the sums of dy and dy * x before its input gradient: two small all-reduces per batch norm on the step's critical path. The group's chips form a block of the torus, x first, then y, then z, doubling in turn (2x2 for four chips: a host's tray). 1: each replica's own batch", 1, 4096),
      wl("training.weight_update_sharding", T::Bool, "", false, "Cross-replica weight-update sharding (Xu et al. 2020): each bucket's gradients are reduce-scattered, each replica updates its 1/replicas share of the weights and holds that share of the optimizer state, and the updated weights are all-gathered"),
  });
}

void add_mesh_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("training.mesh.model", T::String, "", "", "Torus axes the mesh's model axis spans (\"z\", \"yz\"); the other axes carry data. Dense and attention layers are split over it as Megatron splits them (a dense layer feeding another through elementwise layers by columns, the second by rows; attention by heads), with an all-reduce of activations after each pair forward and before it backward (see sequence_parallel); other layers are replicated. Empty or none: data parallelism over the whole slice"),
      wl("training.mesh.fsdp", T::String, "", "", "With fsdp: the data axes (torus axes, \"z\", \"yz\") the weights are sharded over; the other data axes hold data-parallel replicas of those shards (MaxText's ici_fsdp_parallelism beside ici_data_parallelism). The weights are gathered over these axes only, the gradients reduce-scattered over them and their shards then all-reduced over the others; parameters, gradients and optimizer state are held 1/(chips across these axes). Empty: every data axis outside training.mesh.expert"),
      wl("training.mesh.expert", T::String, "", "", "Torus axes (\"x\", \"yz\") of the data axes that the mesh's expert axis spans (MaxText's ici_expert_parallelism): each chip along it holds experts / (its chips) of every moe layer's experts, the tokens routed to them cross it in an all-to-all forward and back (and again backward), and those experts' gradients are summed over the other data axes only. With fsdp the weights are sharded over the data axes outside it (see fsdp). Empty: every chip holds every expert"),
      wl("training.mesh.pipeline", T::String, "", "", "Torus axes (\"x\", \"yz\") the mesh's pipeline axis spans (MaxText's ici_pipeline_parallelism): the model's repeating layers (decoder layers, found as the layers between residual adds that repeat) are split into as many stages as chips along it, each chip running its stage's layers; the step runs microbatches * repeats + stages - 1 iterations, each a microbatch through every stage and a shift of the activations to the next stage (and of the pipeline's input and output buffer the other way), the first and last stages - 1 iterations partly bubble (computed and thrown away, as MaxText's SPMD pipeline does); the layers before and after run on 1/stages of the replica's batch on every stage (the pipeline axis carrying data for them, their gradients summed over it too), the stages' weight gradients over the other data axes only. Not with fsdp, weight_update_sharding, an expert axis or several slices. Empty: no pipeline"),
      wl("training.pipeline.microbatches", T::Int, "microbatches", 0, "With mesh.pipeline: microbatches the replica's batch is split into (MaxText's num_pipeline_microbatches; a multiple of the stages, dividing the batch of a core); 0: as many as stages", 0, 1e6),
      wl("training.pipeline.repeats", T::Int, "", 1, "With mesh.pipeline: chunks of layers each stage holds, visited round the stages in turn (MaxText's num_pipeline_repeats: a circular pipeline, the bubble (stages - 1) / (microbatches * repeats + stages - 1)); 1: GPipe", 1, 1e4),
      wl("training.mesh.sequence_parallel", T::Bool, "", false, "With a model axis: the replicated layers between the split ones (norms, residual adds, embedding, head) run on 1/model-axis of the tokens, and each all-reduce of activations becomes a reduce-scatter after the split layers and an all-gather before the next (Megatron-LM's sequence parallelism; MaxText shards the activations' embed axis over its tensor axis, the same volumes). Their weight gradients are added up over the model axis"),
      wl("training.mesh.collective_matmul", T::Bool, "", false, "With sequence_parallel: the collectives beside a split layer's matmuls run inside them (XLA's windowed einsum, collective matmul: --xla_jf_spmd_threshold_for_windowed_einsum_mib, set to 0 by PAX's MLPerf GPT-3 on v5e; --xla_tpu_decompose_all_gather_einsum, set by MaxText's). A gather is model-axis - 1 ring shifts of one core's share, each share multiplied as it arrives; a reduce-scatter is as many pieces of the product, each share's partial sums added to the running sum arriving from the neighbour and sent on. Each shift sends half a share each way round the ring"),
  });
}

void add_compiled_step_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("training.remat_adds_per_segment", T::Int, "adds", 1, "With remat: residual adds per recomputed segment; only every so many adds' outputs are kept. 2: one checkpoint per transformer block (its two adds), as jax.checkpoint around each decoder layer (MaxText's remat_policy full)", 1, 1e4),
      wl("training.remat_policy", T::String, "", "full", "With remat, what a segment keeps besides its input, as MaxText's remat_policy: full nothing (the whole segment runs again); minimal the outputs of every weight matmul (dense layers, attention's projections and convolutions: only the per-head products and vector work run again, and the kept outputs stay in memory); save_dot_except_mlpwi the same but an MLP's first layer, which runs again; custom what training.remat_custom says of each named result", -kInf, kInf, {"full", "minimal", "save_dot_except_mlpwi", "custom"}),
      wl("training.remat_custom", T::StringMap, "", json::object(), "With remat_policy custom, MaxText's checkpoint names and where each result goes: \"device\" kept in HBM, \"offload\" copied to host memory over the chip's PCIe link after the forward pass makes it and back before the backward pass needs it (not held in HBM between; the copies run beside the compute, the next segment's fetched while one is recomputed), \"remat\" computed again (every name not given, but decoder_layer_input, which is \"device\" unless given). Names: decoder_layer_input (each segment's input), query_proj, key_proj, value_proj, qkv_proj (attention's Q, K and V, one result: they must agree), context (attention's heads' output), out_proj, mlpwi, mlpwi_0, mlpwi_1 (an MLP's first layer or a gated MLP's gate and up projections, one result), mlpwo (an MLP's last layer)"),
      wl("training.matmul_output_fusion", T::Bool, "", true, "Whether XLA fuses a matmul's elementwise consumers (bias, activation, int8 dequantizing) into its epilogue, as it does by default. false (libtpu's --xla_jf_conv_output_fusion=false, which MaxText's MLPerf GPT-3 runs on v5p set): the matmul writes its raw result (int32 for int8) and a vector pass of its own applies them"),
      wl("training.flash_attention", T::Bool, "", false, "Attention as a flash kernel (the Pallas TPU flash attention MaxText calls, blocks of 512): the scores stay in vector memory, the softmax runs in the QK^T matmul's epilogue, the backward recomputes them from the saved log-sum-exp (ops .../flash/recompute/..., no model FLOPs), and a causal mask skips the blocks above the diagonal"),
      wl("training.quantization", T::String, "", "none", "int8: dense layers' and attention projections' forward, input-gradient and weight-gradient matmuls in int8 at the MXU's int8 rate, int32 accumulation (AQT as MaxText's quantization=int8 runs them: its weight gradients are int8 unless quantization_local_shard_count is 0; PAX's MLPerf GPT-3 likewise); int8_except_weight_gradients: the weight gradients in the activation type (MaxText with quantization_local_shard_count=0). Quantizing costs what AQT's operations do: a pass over each matmul's operands for their scales (the absolute maximum over the contracted axis) that also writes the right operand in int8, the left operand quantized as each block arrives (stochastic rounding for a gradient), the int32 result scaled back in the epilogue (ops .../int8_scales beside each +int8 matmul); fp8: the same matmuls, weight gradients included, in fp8 at the MXU's fp8 rate (core.mxu.fp8_speedup), f32 accumulation, as qwix runs MaxText's quantization=fp8_full (e4m3 operands forward, e5m2 gradients; scales from the absolute maximum unless quantization_calibration is fixed; no stochastic rounding; ops .../fp8_scales beside each +fp8 matmul)", -kInf, kInf, {"none", "int8", "int8_except_weight_gradients", "fp8"}),
      wl("training.quantization_calibration", T::String, "", "absmax", "With quantization: how the weights' and activations' scales are found: absmax from each operand's absolute maximum over the contracted axis (a pass over it); fixed a constant range (qwix's \"fixed,-224,224\", which MaxText's fp8 recipes on TPU7x set for weights and activations): no pass for them. The gradients' scales are always absmax", -kInf, kInf, {"absmax", "fixed"}),
      wl("training.remat", T::Bool, "", false, "Rematerialization (activation checkpointing, jax.checkpoint around each residual segment; around each transformer block with remat_adds_per_segment 2): the forward pass keeps only the outputs of the residual adds, and the backward pass runs each segment between two of them forward again (ops named .../recompute/..., no model FLOPs) before its backward; memory holds the adds' outputs and one segment's activations"),
      wl("training.fsdp", T::Bool, "", false, "Fully sharded data parallelism (ZeRO-3, FSDP over the data axis as JAX shards it): parameters, gradients and optimizer state held 1/replicas per replica; each group of consecutive layers' weights (grouped up to all_reduce.bucket_bytes, as XLA's all-gather combiner does) is all-gathered in the compute type before its forward and again before its backward, the next group's gather running under the current group's compute; gradients are reduce-scattered and each replica updates its share"),
      wl("training.fusion", T::Bool, "", true, "Fuse chains of elementwise layers (normalization, activation, residual add, dropout) into one pass over HBM, as XLA does; false: one pass per layer, to compare"),
  });
}

void add_training_run_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("training.eval.examples", T::Int, "samples", 0, "Examples of one evaluation pass between stretches of training; 0: none. The summary then gives the throughput with evaluation beside the training throughput", 0, 1e12),
      wl("training.eval.every_steps", T::Int, "steps", 0, "Training steps between evaluation passes, a whole number as the training loop runs them (MLPerf ResNet-50: 4 epochs rounded up to whole steps, e.g. 157 at a global batch of 32768)", 0, 1e12),
      wl("training.eval.host_overhead_s", T::Float, "s", 0, "Host time of one evaluation pass beyond the device's forward passes (switching programs, feeding the evaluation set, computing the metric)", 0, 1e6),
      wl("training.dataset_examples", T::Int, "samples", 0, "Examples in one epoch of the training set; with training.epochs the summary gives the time, cost and energy to train; 0: not stated", 0, 1e15),
      wl("training.epochs", T::Int, "epochs", 1, "Passes over training.dataset_examples (each epoch ends with a partial batch padded to a full step, as a static-shape TPU program runs it)", 1, 1e6),
      wl("training.goodput.failures_per_chip_hour", T::Float, "1/h", 0, "Failures that stop the job, per chip and hour of running (each restarts it from the last checkpoint); with it the summary gives the goodput, Young and Daly's checkpoint interval and the time, cost and energy to train with failures. 0: not stated. No TPU figure is public: Meta's Llama 3 run had 419 unexpected interruptions in 54 days on 16,384 GPUs, 2.0e-5 per GPU-hour (arXiv:2407.21783)", 0, 1),
      wl("training.goodput.checkpoint_storage_gbps_per_host", T::Float, "GB/s", 0, "Each host's bandwidth to the checkpoint's storage, writing and reading: a checkpoint (f32 weights and optimizer state, one copy, split over every host) takes its bytes / (hosts x this). Needed with failures_per_chip_hour", 0, 1e6),
      wl("training.goodput.restart_s", T::Float, "s", 0, "Time from a failure to the job running again, before the checkpoint is read back (detection, rescheduling, compilation)", 0, 1e7),
      wl("training.goodput.checkpoint_interval_s", T::Float, "s", 0, "Training time between checkpoints; 0: the interval that maximizes goodput (J. T. Daly's higher-order estimate, Future Generation Computer Systems 22(3), 2006; Young's sqrt(2 x write x MTBF) to first order)", 0, 1e9),
      wl("training.steps", T::Int, "steps", 3, "Training steps to simulate; the summary's step time is the last one's", 1, 10000),
      wl("training.steps_per_execution", T::Int, "steps", 1, "Steps per launch of the compiled program (Keras steps_per_execution, TPUEstimator iterations_per_loop). The host launches one execution per hw.host.launch_overhead_us, ahead of the device, so a launch costs a step only when the device runs an execution faster than that", 1, 1000000),
  });
}

void add_input_pipeline_keys(std::vector<ParamSpec>& r) {
  r.insert(r.end(), {
      wl("input_pipeline.host_samples_per_s", T::Float, "samples/s", 0, "Preprocessing rate of one host; 0: never the bottleneck", 0, 1e12),
      wl("input_pipeline.prefetch_batches", T::Int, "batches", 2, "Batches the host may prepare ahead of the TPU (tf.data prefetch)", 1, 1024),
      wl("input_pipeline.bytes_per_sample", T::Int, "bytes", 0, "Bytes of one sample on the host-to-chip link; 0: input_shape and the input layers' shapes x input_dtype", 0, 1e10),
      wl("input_pipeline.batch_jitter_mean_s", T::Float, "s", 0,
         "Mean extra time a host takes to prepare a batch, drawn at random per host and batch (exponentially distributed): "
         "the tail of synchronous training; 0: none", 0, 1e4),
      wl("input_pipeline.jitter_seed", T::Int, "", 1, "Seed of the hosts' batch jitter (mt19937_64): another seed, other draws", 0, 1e18),
  });
}

// The order is the registry's: list-params prints it, and a document's checks follow it (which missing key is reported first).
std::vector<ParamSpec> build() {
  std::vector<ParamSpec> r;
  HwKeyDeclarations declarations(r);
  HwConfig().declare_keys(declarations);
  add_memory_model_keys(r);
  add_slice_keys(r);
  add_slow_hardware_and_fault_keys(r);
  add_hw_file_keys(r);
  add_workload_model_keys(r);
  add_layer_keys(r);
  add_training_keys(r);
  add_mesh_keys(r);
  add_compiled_step_keys(r);
  add_training_run_keys(r);
  add_input_pipeline_keys(r);
  return r;
}

}  // namespace

const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::Int: return "integer";
    case ParamType::Float: return "number";
    case ParamType::Bool: return "boolean";
    case ParamType::String: return "string";
    case ParamType::IntList: return "list of integers";
    case ParamType::Window: return "integer or [height, width]";
    case ParamType::StringList: return "list of strings";
    case ParamType::ObjectList: return "list of objects";
    case ParamType::StringMap: return "object of strings";
  }
  return "?";
}

const std::vector<ParamSpec>& param_registry() {
  static const std::vector<ParamSpec> registry = build();
  return registry;
}

const ParamSpec* find_param(const std::string& doc, const std::string& path) {
  for (const auto& p : param_registry())
    if (p.doc == doc && p.path == path) return &p;
  return nullptr;
}

bool has_children(const std::string& doc, const std::string& path) {
  const std::string prefix = path + ".";
  for (const auto& p : param_registry())
    if (p.doc == doc && p.path.compare(0, prefix.size(), prefix) == 0) return true;
  return false;
}

}  // namespace tpusim
