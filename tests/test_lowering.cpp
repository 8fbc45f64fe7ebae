// The training-step driver: program structure, FLOPs, memory and batch arithmetic.
#define BOOST_TEST_MODULE lowering
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "sim/config.hpp"
#include "sim/params.hpp"
#include "hw/collective.hpp"
#include "hw/tensor_core.hpp"
#include "hw/topology.hpp"
#include "workloads/layer_kind.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;

namespace {

Config example(const std::string& hw = "tpu_v2", std::vector<std::string> sets = {}) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.hw = hw;
  request.sets = std::move(sets);
  return load_config(request);
}

// The step's layer of that name; the test fails without one.
Node node_named(const LoweredStep& step, const std::string& name) {
  for (const Node& n : step.model.nodes)
    if (n.spec.name == name) return n;
  BOOST_FAIL("no layer " << name);
  return Node{};
}

std::size_t count(const Program& p, OpKind kind) {
  return static_cast<std::size_t>(std::count_if(p.ops.begin(), p.ops.end(), [&](const Op& o) { return o.kind == kind; }));
}

}  // namespace

BOOST_AUTO_TEST_CASE(mlp_step_has_forward_backward_all_reduce_and_update) {
  const Config c = example("tpu_v2", {"workload.training.all_reduce.bucket_bytes=0"});  // one all-reduce per layer
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  BOOST_TEST(step.model.params() == 784u * 128u + 128u + 128u * 10u + 10u);  // 101,770 as Keras reports
  BOOST_TEST(step.replicas == 8u);
  BOOST_TEST(step.per_core_batch == 128u);
  // 2 forward, 2 dW, 1 dX (the first layer needs none)
  BOOST_TEST(count(step.program, OpKind::Matmul) == 5u);
  BOOST_TEST(count(step.program, OpKind::Collective) == 2u);
  BOOST_TEST(count(step.program, OpKind::Infeed) == 1u);
  // FLOPs: forward 2*b*(784*128 + 128*10), dW the same again, dX of layer 2 2*b*128*10
  const double b = 128;
  const double expected = 2 * b * (784 * 128 + 128 * 10) * 2 + 2 * b * 128 * 10;
  BOOST_TEST(step.model_flops_per_core == expected);
  // Every dependency points backwards, so the sequencer can never wait on a later op.
  for (const Op& op : step.program.ops)
    for (auto d : op.deps) BOOST_TEST(d < op.id);
}

BOOST_AUTO_TEST_CASE(all_reduce_carries_each_layers_fp32_gradients) {
  const Config c = example();
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  std::uint64_t bytes = 0;
  for (const Op& op : step.program.ops)
    if (op.kind == OpKind::Collective) bytes += op.collective.bytes;
  BOOST_TEST(bytes == step.model.params() * 4);
}

BOOST_AUTO_TEST_CASE(memory_footprint_by_kind) {
  const Config c = example();
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  const std::uint64_t p = step.model.params();
  BOOST_TEST(step.memory.parameters == p * 4);
  BOOST_TEST(step.memory.gradients == p * 4);
  BOOST_TEST(step.memory.optimizer_state == p * 8);  // Adam: two fp32 slots
  // The input batch (128 x 784 x 4; flatten is a view of it), dense's relu input and output
  // (dense_1's dW needs the output), and dense_1's logits before the softmax.
  BOOST_TEST(step.memory.activations == 128u * 784 * 4 + 128u * 128 * 4 * 2 + 128u * 10 * 4);
  BOOST_TEST(step.hbm_capacity_per_core_bytes == (16ull << 30) / 2);
}

BOOST_AUTO_TEST_CASE(weight_update_sharding_scatters_updates_a_share_and_gathers) {
  const std::vector<std::string> per_layer = {"workload.training.all_reduce.bucket_bytes=0"};
  auto sharded_sets = per_layer;
  sharded_sets.push_back("workload.training.weight_update_sharding=true");
  const Config plain_config = example("tpu_v2", per_layer), sharded_config = example("tpu_v2", sharded_sets);
  const LoweredStep plain = lower_training_step(plain_config.workload, plain_config.hw);
  const LoweredStep sharded = lower_training_step(sharded_config.workload, sharded_config.hw);
  const std::uint64_t replicas = sharded.replicas;
  std::map<CollectiveKind, std::uint64_t> bytes_by_kind;
  std::uint64_t plain_update_elements = 0, sharded_update_elements = 0;
  for (const Op& op : sharded.program.ops) {
    if (op.kind == OpKind::Collective) bytes_by_kind[op.collective.kind] += op.collective.bytes;
    if (op.phase == Phase::Optimizer && op.kind == OpKind::Vector) sharded_update_elements += op.vector.elements;
    // Each all-gather waits for the update of the weights it carries.
    if (op.kind == OpKind::Collective && op.collective.kind == CollectiveKind::AllGather) {
      BOOST_REQUIRE(op.deps.size() == 1u);
      BOOST_TEST((sharded.program.ops[op.deps[0]].phase == Phase::Optimizer));
    }
  }
  for (const Op& op : plain.program.ops)
    if (op.phase == Phase::Optimizer && op.kind == OpKind::Vector) plain_update_elements += op.vector.elements;
  BOOST_TEST(bytes_by_kind.count(CollectiveKind::AllReduce) == 0u);
  BOOST_TEST(bytes_by_kind[CollectiveKind::ReduceScatter] == sharded.model.params() * 4);
  BOOST_TEST(bytes_by_kind[CollectiveKind::AllGather] == sharded.model.params() * 4);
  // Each layer's share rounds up: at most one parameter more per layer and replica.
  BOOST_TEST(sharded_update_elements * replicas >= plain_update_elements);
  BOOST_TEST(sharded_update_elements * replicas <= plain_update_elements + 2 * replicas);
  BOOST_TEST(sharded.memory.optimizer_state == plain.memory.optimizer_state / replicas);
  BOOST_TEST(sharded.memory.parameters == plain.memory.parameters);  // the weights stay replicated
}

// TF's BERT clips each replica's gradients by their global norm before summing them (in
// bfloat16 on v4): one pass reads every gradient, each bucket is scaled (and cast) by a pass of
// its own, and no all-reduce can start before the last gradient exists.
BOOST_AUTO_TEST_CASE(clipping_before_the_all_reduce_waits_for_every_gradient) {
  const std::vector<std::string> sets = {"workload.training.all_reduce.bucket_bytes=0",
                                         "workload.training.gradient_clipping=before_all_reduce",
                                         "workload.training.all_reduce.dtype=bfloat16"};
  const Config c = example("tpu_v2", sets);
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  const auto& ops = step.program.ops;
  const auto norm = std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.name == "grads/global_norm"; });
  BOOST_REQUIRE(norm != ops.end());
  BOOST_TEST(norm->vector.hbm_read_bytes == step.model.trainable() * 4);
  std::uint64_t all_reduced = 0;
  std::size_t collectives = 0;
  for (const Op& op : ops) {
    // Every gradient (a weight-gradient matmul) is computed before the norm.
    if (op.kind == OpKind::Matmul && op.phase == Phase::Backward && op.name.find("/dW") != std::string::npos)
      BOOST_TEST(op.id < norm->id);
    if (op.kind != OpKind::Collective) continue;
    ++collectives;
    all_reduced += op.collective.bytes;
    BOOST_TEST((op.collective.dtype == DType::BF16));
    BOOST_REQUIRE(op.deps.size() == 1u);
    const Op& clip = ops[op.deps[0]];
    BOOST_TEST(clip.name.find("/clip") != std::string::npos, clip.name);
    BOOST_TEST(clip.vector.hbm_write_bytes == op.collective.bytes);  // scaled and cast in one pass
    BOOST_TEST(clip.deps == std::vector<std::uint32_t>{norm->id});
  }
  BOOST_TEST(collectives == 2u);
  BOOST_TEST(all_reduced == step.model.trainable() * 2);
  // Without clipping the same bfloat16 all-reduces start as each layer's gradient exists.
  const Config plain = example("tpu_v2", {sets[0], sets[2]});
  const LoweredStep unclipped = lower_training_step(plain.workload, plain.hw);
  for (const Op& op : unclipped.program.ops) {
    BOOST_TEST(op.name.find("global_norm") == std::string::npos);
    if (op.kind == OpKind::Collective) BOOST_TEST((unclipped.program.ops[op.deps[0]].kind == OpKind::Matmul));
  }
}

// optax's clip_by_global_norm in the optimizer: the norm of the reduced gradients (each
// replica's share under weight-update sharding, whose norms are then added up), and every update
// waits for it and scales as it reads.
BOOST_AUTO_TEST_CASE(clipping_after_the_all_reduce_gates_every_update) {
  for (bool sharded : {false, true}) {
    BOOST_TEST_CONTEXT("weight_update_sharding " << sharded) {
      std::vector<std::string> sets = {"workload.training.all_reduce.bucket_bytes=0"};
      if (sharded) sets.push_back("workload.training.weight_update_sharding=true");
      const Config plain_config = example("tpu_v2", sets);
      sets.push_back("workload.training.gradient_clipping=after_all_reduce");
      const Config clipped_config = example("tpu_v2", sets);
      const LoweredStep plain = lower_training_step(plain_config.workload, plain_config.hw);
      const LoweredStep clipped = lower_training_step(clipped_config.workload, clipped_config.hw);
      const auto& ops = clipped.program.ops;
      const auto norm = std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.name == "grads/global_norm"; });
      BOOST_REQUIRE(norm != ops.end());
      std::set<std::uint32_t> reductions(norm->deps.begin(), norm->deps.end());
      std::size_t gradient_collectives = 0;
      for (const Op& op : ops)
        if (op.kind == OpKind::Collective && op.phase == Phase::Gradients) {
          ++gradient_collectives;
          BOOST_TEST(reductions.count(op.id) == 1u);
        }
      BOOST_TEST(reductions.size() == gradient_collectives);
      const auto norm_sum = std::find_if(ops.begin(), ops.end(), [](const Op& o) { return o.name == "grads/global_norm/all-reduce"; });
      BOOST_TEST((norm_sum != ops.end()) == sharded);
      const std::uint32_t gate = sharded ? norm_sum->id : norm->id;
      double plain_ops = 0, clipped_ops = 0;
      std::uint64_t updated = 0;
      for (const Op& op : plain.program.ops)
        if (op.kind == OpKind::Vector && op.phase == Phase::Optimizer) plain_ops += op.vector.vpu_ops_per_element;
      for (const Op& op : ops)
        if (op.kind == OpKind::Vector && op.phase == Phase::Optimizer && op.name.find("_update") != std::string::npos) {
          BOOST_TEST(op.deps == std::vector<std::uint32_t>{gate});
          clipped_ops += op.vector.vpu_ops_per_element - 1;  // the scaling
          updated += op.vector.elements;
        }
      BOOST_TEST(clipped_ops == plain_ops);
      BOOST_TEST(norm->vector.elements == updated);  // the norm reads what the replica updates
    }
  }
}

// FSDP's textbook volumes: per step each layer's weights are all-gathered twice (before its
// forward and before its backward) in the compute type and its gradients reduce-scattered once
// in f32; each replica holds and updates 1/replicas of the state.
BOOST_AUTO_TEST_CASE(fsdp_gathers_weights_twice_scatters_gradients_once_and_holds_a_share) {
  for (const char* precision : {"float32", "mixed_bfloat16"}) {
    BOOST_TEST_CONTEXT(precision) {
      const std::vector<std::string> sets = {"workload.training.all_reduce.bucket_bytes=0",
                                             std::string("workload.training.precision=") + precision};
      auto fsdp_sets = sets;
      fsdp_sets.push_back("workload.training.fsdp=true");
      const Config plain_config = example("tpu_v2", sets), fsdp_config = example("tpu_v2", fsdp_sets);
      const LoweredStep plain = lower_training_step(plain_config.workload, plain_config.hw);
      const LoweredStep fsdp = lower_training_step(fsdp_config.workload, fsdp_config.hw);
      const std::uint64_t p = fsdp.model.params(), replicas = fsdp.replicas;
      const std::uint64_t compute_bytes = std::string(precision) == "float32" ? 4 : 2;
      std::map<std::pair<CollectiveKind, Phase>, std::uint64_t> bytes;
      std::map<std::pair<CollectiveKind, Phase>, std::size_t> ops;
      for (const Op& op : fsdp.program.ops)
        if (op.kind == OpKind::Collective) {
          bytes[{op.collective.kind, op.phase}] += op.collective.bytes;
          ++ops[{op.collective.kind, op.phase}];
        }
      const auto volume = [&](CollectiveKind kind, Phase phase) { return bytes[{kind, phase}]; };
      BOOST_TEST(volume(CollectiveKind::AllGather, Phase::Forward) == p * compute_bytes);
      BOOST_TEST(volume(CollectiveKind::AllGather, Phase::Backward) == p * compute_bytes);
      BOOST_TEST(volume(CollectiveKind::ReduceScatter, Phase::Gradients) == fsdp.model.trainable() * 4);
      BOOST_TEST(ops.size() == 3u);  // nothing else: no all-reduce, no gather after the update
      const std::size_t forward_gathers = ops[{CollectiveKind::AllGather, Phase::Forward}];
      BOOST_TEST(forward_gathers == 2u);  // one per layer (no combining here)
      // A layer's forward waits for its weights; the second layer's gather follows the first's.
      for (const Op& op : fsdp.program.ops)
        if (op.kind == OpKind::Matmul && op.phase == Phase::Forward) {
          const bool waits = std::any_of(op.deps.begin(), op.deps.end(), [&](std::uint32_t d) {
            return fsdp.program.ops[d].kind == OpKind::Collective && fsdp.program.ops[d].collective.kind == CollectiveKind::AllGather;
          });
          BOOST_TEST(waits, op.name);
        }
      BOOST_TEST(fsdp.memory.optimizer_state == plain.memory.optimizer_state / replicas);
      BOOST_TEST(fsdp.memory.gradients == fsdp.model.trainable() * 4 / replicas);
      // The f32 share, and both layers' weights gathered at once (the second prefetched under the first).
      BOOST_TEST(fsdp.memory.parameters == p * 4 / replicas + p * compute_bytes);
    }
  }
}

// And simulated: every chip sends the bandwidth-optimal share of each gather and scatter,
// (n - 1) / n of its buffer; the MLP's 101,770 parameters do not split evenly over 4 replicas,
// so each of the three collectives may round a chip's shares by up to an element each.
BOOST_AUTO_TEST_CASE(fsdp_ici_traffic_is_the_textbook_volume) {
  const auto run = tpusim::test::run_example(
      "--hw tpu_v5e --topology 2x2 --trace none --set workload.training.fsdp=true --set workload.training.precision=mixed_bfloat16");
  const double p = run->summary["parameters"].get<double>(), chips = 4, n = run->summary["replicas"].get<double>();
  BOOST_TEST(n == 4);
  const double per_chip = (n - 1) / n * (2 * p * 2 + p * 4);
  const double sent = run->summary["traffic_per_step"]["ici_bytes"].get<double>();
  BOOST_TEST(std::abs(sent - chips * per_chip) <= chips * 3 * n * 4, sent << " bytes sent, " << chips * per_chip << " ideal");
}

// FSDP over some data axes, data parallelism over the rest (MaxText's ici_fsdp_parallelism beside
// ici_data_parallelism): on a v5e 2x4 with FSDP over y, the weights are gathered over y's 4
// chips only and held 1/4 per chip; each bucket's gradients are reduce-scattered over y and the
// 1/4 shards all-reduced over x, then updated.
BOOST_AUTO_TEST_CASE(fsdp_over_one_axis_gathers_over_it_and_all_reduces_the_shards_over_the_others) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.hw = "tpu_v5e";
  request.topology = "2x4";
  request.sets = {"workload.training.fsdp=true", "workload.training.mesh.fsdp=y", "workload.training.all_reduce.bucket_bytes=0",
                  "workload.training.precision=mixed_bfloat16"};
  const Config config = load_config(request);
  const LoweredStep step = lower_training_step(config.workload, config.hw);
  BOOST_TEST(step.replicas == 8u);
  constexpr std::uint32_t x = 1u << 0, y = 1u << 1;
  const std::uint64_t p = step.model.params(), trainable = step.model.trainable(), fsdp_share = 4;
  std::uint64_t gathered = 0, scattered = 0, shard_reduced = 0;
  std::size_t other = 0;
  for (std::size_t i = 0; i < step.program.ops.size(); ++i) {
    const Op& op = step.program.ops[i];
    if (op.kind != OpKind::Collective) continue;
    const std::uint32_t axes = op.collective.group_axes & 0x3;  // the slice's two axes
    if (op.collective.kind == CollectiveKind::AllGather && axes == y) {
      gathered += op.collective.bytes;
    } else if (op.collective.kind == CollectiveKind::ReduceScatter && axes == y) {
      scattered += op.collective.bytes;
    } else if (op.collective.kind == CollectiveKind::AllReduce && axes == x) {
      shard_reduced += op.collective.bytes;
      const Op& before = step.program.ops[op.deps.at(0)];  // the scatter whose shard it sums
      BOOST_TEST((before.kind == OpKind::Collective && before.collective.kind == CollectiveKind::ReduceScatter), op.name);
      // The sequencer waits at an op for its inputs: the all-reduce comes after the next
      // bucket's backward ops (or the last bucket's, after the backward pass), never right behind
      // its reduce-scatter, where it held back the backward pass's compute.
      const bool compute_between = std::any_of(step.program.ops.begin() + op.deps.at(0) + 1, step.program.ops.begin() + i,
                                               [](const Op& o) { return o.kind != OpKind::Collective; });
      const bool last_bucket = std::none_of(step.program.ops.begin() + i, step.program.ops.end(), [&](const Op& o) {
        return o.kind == OpKind::Collective && o.collective.kind == CollectiveKind::ReduceScatter;
      });
      BOOST_TEST((compute_between || last_bucket), op.name);
    } else {
      ++other;
    }
  }
  BOOST_TEST(other == 0u);
  BOOST_TEST(gathered == 2 * p * 2);
  BOOST_TEST(scattered == trainable * 4);
  // Each layer's shard, rounded up to whole parameters.
  BOOST_TEST(shard_reduced >= trainable * 4 / fsdp_share);
  BOOST_TEST(shard_reduced <= (trainable / fsdp_share + 2) * 4);
  BOOST_TEST(step.memory.gradients == trainable * 4 / fsdp_share);
  BOOST_TEST(step.memory.parameters == p * 4 / fsdp_share + p * 2);
  request.sets.erase(request.sets.begin() + 1);  // FSDP over both axes
  const Config all_axes = load_config(request);
  const LoweredStep everywhere = lower_training_step(all_axes.workload, all_axes.hw);
  BOOST_TEST(step.memory.optimizer_state == everywhere.memory.optimizer_state * 2);  // a 1/4 share, not 1/8
}

BOOST_AUTO_TEST_CASE(fsdp_axes_must_be_data_axes_of_an_fsdp_workload) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.hw = "tpu_v5e";
  request.topology = "2x4";
  request.sets = {"workload.training.mesh.fsdp=y"};
  BOOST_TEST(tpusim::test::contains(tpusim::test::load_error(request), "workload.training.mesh.fsdp: names the axes fsdp shards"));
  request.sets = {"workload.training.fsdp=true", "workload.training.mesh.fsdp=y", "workload.training.mesh.model=y"};
  const Config config = load_config(request);
  try {
    lower_training_step(config.workload, config.hw);
    BOOST_ERROR("a model axis taken for FSDP was accepted");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(tpusim::test::contains(e.what(), "workload.training.mesh.fsdp: \"y\": expected data axes"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(fsdp_and_weight_update_sharding_are_one_or_the_other) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.sets = {"workload.training.fsdp=true", "workload.training.weight_update_sharding=true"};
  BOOST_TEST(tpusim::test::contains(tpusim::test::load_error(request), "workload.training.fsdp: fsdp shards the weights and their update already"));
}

// Tensor parallelism over a mesh's model axis (Megatron): GPT-2 small on a v5p 2x2x4 with the
// model axis over z (4 chips). Each block's attention is split by heads and its MLP's first dense
// by columns, the second by rows: their FLOPs and weights per core are the whole layer's / 4, and
// each pair's activations are all-reduced once forward (after) and once backward (before it),
// tokens x width in the compute type, over z alone; gradients are all-reduced over x and y.
BOOST_AUTO_TEST_CASE(tensor_parallel_layers_do_a_quarter_of_the_work_and_all_reduce_activations) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5p";
  request.topology = "2x2x4";
  request.sets = {"workload.training.mesh.model=z"};
  const Config c = load_config(request);
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  BOOST_TEST(step.mesh.model_size == 4u);
  BOOST_TEST(step.replicas == 4u);  // 16 chips, 4 along the model axis
  std::size_t split = 0, blocks = 0;
  for (std::size_t i = 0; i < step.model.nodes.size(); ++i) {
    const Node& whole = step.model.nodes[i];
    const Node& core = step.core_model.nodes[i];
    BOOST_TEST_CONTEXT(whole.spec.name) {
      const bool tp = !core.spec.tensor_parallel.empty();
      split += tp ? 1 : 0;
      blocks += core.spec.tensor_parallel == "heads" ? 1 : 0;
      BOOST_TEST(tp == (whole.spec.type == "attention" || (whole.spec.type == "dense" && !whole.spec.tied_weights)));
      BOOST_TEST(core.forward_flops * (tp ? 4 : 1) == whole.forward_flops);
      // Weights split; a row-split layer's and the attention's output bias stays whole on each core.
      const std::uint64_t whole_bias = core.spec.tensor_parallel == "row" || core.spec.tensor_parallel == "heads" ? whole.out.back() : 0;
      BOOST_TEST((core.params - whole_bias) * (tp ? 4 : 1) == whole.params - whole_bias);
    }
  }
  BOOST_TEST(blocks == 12u);
  BOOST_TEST(split == 36u);  // attention, MLP in and MLP out of 12 blocks
  const std::uint64_t tokens = step.per_core_batch * 1024, width = 768;
  std::map<Phase, std::size_t> activation_reduces;
  std::uint64_t gradient_bytes = 0;
  for (const Op& op : step.program.ops) {
    if (op.kind != OpKind::Collective) continue;
    if (op.collective.group_axes == 0x4u) {
      ++activation_reduces[op.phase];
      BOOST_TEST(op.collective.bytes == tokens * width * 2, op.name);
    } else {
      BOOST_TEST(op.collective.group_axes == 0x3u, op.name);
      gradient_bytes += op.collective.bytes;
    }
  }
  BOOST_TEST(activation_reduces[Phase::Forward] == 24u);
  BOOST_TEST(activation_reduces[Phase::Backward] == 24u);
  BOOST_TEST(gradient_bytes == step.core_model.params() * 4);
  // The summary's model FLOPs are the whole model's at the global batch, not the cores' duplicated work.
  BOOST_TEST(step.model_flops_per_step == step.model.training_flops_per_sample() * static_cast<double>(step.global_batch));
}

namespace {

// A small Llama-style decoder: RMS norms, grouped-query attention with rotary embeddings and
// heads narrower than width / heads, and a SwiGLU MLP written as its layers.
std::string llama_like_workload(const tpusim::test::TempDir& dir) {
  using json = nlohmann::json;
  json layers = json::array({{{"type", "embedding"}, {"name", "tok"}, {"vocab", 1000}, {"dim", 256}}});
  std::string x = "tok";
  for (int i = 0; i < 2; ++i) {
    const std::string p = "l" + std::to_string(i);
    layers.push_back({{"type", "rms_norm"}, {"name", p + "_attn_norm"}, {"inputs", {x}}});
    layers.push_back({{"type", "attention"}, {"name", p + "_attn"}, {"heads", 8}, {"kv_heads", 4}, {"head_dim", 16},
                      {"rotary", true}, {"causal", true}, {"use_bias", false}});
    layers.push_back({{"type", "add"}, {"name", p + "_res1"}, {"inputs", {p + "_attn", x}}});
    layers.push_back({{"type", "rms_norm"}, {"name", p + "_ffn_norm"}});
    layers.push_back({{"type", "dense"}, {"name", p + "_gate"}, {"units", 512}, {"activation", "silu"}, {"use_bias", false}});
    layers.push_back({{"type", "dense"}, {"name", p + "_up"}, {"units", 512}, {"use_bias", false}, {"inputs", {p + "_ffn_norm"}}});
    layers.push_back({{"type", "multiply"}, {"name", p + "_gated"}, {"inputs", {p + "_gate", p + "_up"}}});
    layers.push_back({{"type", "dense"}, {"name", p + "_down"}, {"units", 256}, {"use_bias", false}});
    layers.push_back({{"type", "add"}, {"name", p + "_res2"}, {"inputs", {p + "_down", p + "_res1"}}});
    x = p + "_res2";
  }
  layers.push_back({{"type", "rms_norm"}, {"name", "norm"}});
  layers.push_back({{"type", "dense"}, {"name", "output"}, {"units", 1000}, {"use_bias", false}, {"activation", "softmax"}});
  const json w = {{"name", "llama_like"},
                  {"model", {{"input_shape", {128}}, {"input_dtype", "int32"}, {"layers", layers}}},
                  {"training", {{"per_replica_batch", 4}, {"precision", "mixed_bfloat16"}, {"steps", 1}}}};
  return dir.write("llama_like.json", w.dump());
}

LoweredStep llama_like_on_v5p(const tpusim::test::TempDir& dir, std::vector<std::string> sets) {
  ConfigRequest request;
  request.workload_path = llama_like_workload(dir);
  request.hw = "tpu_v5p";
  request.topology = "2x2x4";
  request.sets = std::move(sets);
  const Config c = load_config(request);
  return lower_training_step(c.workload, c.hw);
}

}  // namespace

// Issue 38: a gated MLP written as its layers was not split by tensor parallelism (all three
// matmuls whole on every core), nor was a language model's head (its vocabulary). Split as Megatron splits it, gate and up by columns (one group
// reading one input), down by rows; the product between runs on the columns' share; attention
// splits its query and key/value heads alike. Per block and pass the model axis carries two
// all-reduces of the residual stream forward and two backward: the MLP's input gradient is
// summed over the axis once for gate and up together, not once each.
BOOST_AUTO_TEST_CASE(a_gated_mlp_splits_as_megatron_splits_it) {
  tpusim::test::TempDir dir;
  const LoweredStep step = llama_like_on_v5p(dir, {"workload.training.mesh.model=z"});
  std::map<std::string, std::string> split;
  for (std::size_t i = 0; i < step.model.nodes.size(); ++i) {
    const Node& whole = step.model.nodes[i];
    const Node& core = step.core_model.nodes[i];
    split[whole.spec.name] = core.spec.tensor_parallel;
    BOOST_TEST_CONTEXT(whole.spec.name) {
      if (!core.spec.tensor_parallel.empty() && core.spec.tensor_parallel != "within") {
        BOOST_TEST(core.params * 4 == whole.params);
        BOOST_TEST(core.forward_flops * 4 == whole.forward_flops);
      }
    }
  }
  BOOST_TEST(split["l0_gate"] == "column");
  BOOST_TEST(split["l0_up"] == "column");
  BOOST_TEST(split["l0_gated"] == "within");
  BOOST_TEST(split["l0_down"] == "row");
  BOOST_TEST(split["l1_attn"] == "heads");
  BOOST_TEST(split["output"] == "column");  // the head split by vocabulary
  BOOST_TEST(step.core_model.nodes[5].spec.column_group == "l0_gate");  // l0_up
  // Grouped-query attention: Q 8 heads of 16, K and V 4 heads of 16, output projection.
  BOOST_TEST(step.model.nodes[2].params == 256u * (2 * 128 + 2 * 64));
  const std::uint64_t tokens = step.per_core_batch * 128, width = 256;
  std::map<Phase, std::size_t> reduces;
  std::size_t rotary_passes = 0, loss_statistics = 0;
  for (const Op& op : step.program.ops) {
    if (op.kind == OpKind::Vector && tpusim::test::contains(op.name, "/rotary")) {
      ++rotary_passes;
      BOOST_TEST(op.vector.elements == tokens * (128 + 64) / 4, op.name);  // this core's Q and K
    }
    if (op.kind != OpKind::Collective || op.collective.group_axes != 0x4u) continue;
    if (tpusim::test::contains(op.name, "output/loss/")) {  // the vocab-parallel cross-entropy's: f32 per token
      ++loss_statistics;
      BOOST_TEST(op.collective.bytes == tokens * 4, op.name);
      continue;
    }
    ++reduces[op.phase];
    BOOST_TEST(op.collective.bytes == tokens * width * 2, op.name);
  }
  BOOST_TEST(reduces[Phase::Forward] == 4u);
  BOOST_TEST(reduces[Phase::Backward] == 5u);  // and the head's input gradient
  BOOST_TEST(loss_statistics == 3u);
  BOOST_TEST(rotary_passes == 4u);  // forward and backward of two layers
  // Under sequence parallelism gate and up share one gather of their input.
  const LoweredStep sp = llama_like_on_v5p(dir, {"workload.training.mesh.model=z", "workload.training.mesh.sequence_parallel=true"});
  std::size_t forward_gathers = 0;
  for (const Op& op : sp.program.ops)
    forward_gathers += op.kind == OpKind::Collective && op.phase == Phase::Forward && op.collective.kind == CollectiveKind::AllGather;
  BOOST_TEST(forward_gathers == 5u);  // per block the attention's and the MLP's, and the head's
  // Key/value heads that do not split over the axis are refused, naming the layer.
  ConfigRequest request;
  request.workload_path = llama_like_workload(dir);
  request.hw = "tpu_v5p";
  request.topology = "4x4x8";
  request.sets = {"workload.training.mesh.model=z"};
  const Config c = load_config(request);
  BOOST_CHECK_EXCEPTION(lower_training_step(c.workload, c.hw), std::invalid_argument, [](const std::invalid_argument& e) {
    return tpusim::test::contains(e.what(), "layer \"l0_attn\": 4 key/value heads do not split over a model axis of 8");
  });
}

namespace {

Config gpt2_on_v5p_config(std::vector<std::string> sets = {}) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5p";
  request.topology = "2x2x4";
  request.sets = std::move(sets);
  return load_config(request);
}

LoweredStep gpt2_on_v5p(std::vector<std::string> sets) {
  const Config c = gpt2_on_v5p_config(std::move(sets));
  return lower_training_step(c.workload, c.hw);
}

// The zoo's Keras ResNet-50 at 8 images per replica.
LoweredStep resnet50_at_8(const std::string& hw) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/resnet50.json");
  request.hw = hw;
  request.sets = {"workload.training.per_replica_batch=8"};
  const Config c = load_config(request);
  return lower_training_step(c.workload, c.hw);
}

}  // namespace

// Sequence parallelism (Megatron-LM): each all-reduce of activations becomes a reduce-scatter
// (after the row-split layer and the attention, forward; after their input gradients, backward)
// and an all-gather (before the column-split layer and the attention, forward; of the gradient
// before the row-split layer and the attention's output projection, backward), each of the whole
// tokens x width tensor. The norms, adds, embedding and head run on a quarter of the tokens, and
// their weights' gradients are added up over the model axis. Memory for activations shrinks.
BOOST_AUTO_TEST_CASE(sequence_parallelism_gathers_and_scatters_the_residual_stream) {
  const LoweredStep tp = gpt2_on_v5p({"workload.training.mesh.model=z"});
  const LoweredStep sp = gpt2_on_v5p({"workload.training.mesh.model=z", "workload.training.mesh.sequence_parallel=true"});
  const std::uint64_t tokens = sp.per_core_batch * 1024, width = 768;
  std::map<std::pair<Phase, CollectiveKind>, std::size_t> activations;
  std::uint64_t summed_gradient_params = 0;
  for (const Op& op : sp.program.ops) {
    if (op.kind != OpKind::Collective || op.collective.group_axes != 0x4u) continue;
    if (op.phase == Phase::Gradients) {
      BOOST_TEST(tpusim::test::contains(op.name, "/grad/model/all-reduce"), op.name);
      summed_gradient_params += op.collective.bytes / 4;
      continue;
    }
    ++activations[{op.phase, op.collective.kind}];
    BOOST_TEST(op.collective.bytes == tokens * width * 2, op.name);
  }
  BOOST_TEST(activations.size() == 4u);
  for (Phase phase : {Phase::Forward, Phase::Backward})
    for (CollectiveKind kind : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather})
      BOOST_TEST(activations[std::make_pair(phase, kind)] == 24u);
  // The replicated layers with weights: the token and position tables, two norms per block, the final norm.
  std::uint64_t replicated_params = 0;
  for (const Node& node : sp.core_model.nodes)
    if (node.spec.tensor_parallel.empty()) replicated_params += node.trainable;
  BOOST_TEST(summed_gradient_params == replicated_params);
  BOOST_TEST(replicated_params == (50257ull + 1024) * 768 + 25 * 2 * 768);
  // Each layer's FLOPs: split layers a quarter of the whole model's, replicated ones a quarter of the tokens.
  double matmul_flops = 0;
  for (const Op& op : sp.program.ops) matmul_flops += op.kind == OpKind::Matmul ? op.model_flops : 0.0;
  BOOST_TEST(matmul_flops == sp.textbook_flops_per_core, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(sp.textbook_flops_per_core * 4 == sp.model.training_flops_per_sample() * static_cast<double>(sp.per_core_batch),
             boost::test_tools::tolerance(1e-9));
  BOOST_TEST(tp.textbook_flops_per_core > sp.textbook_flops_per_core);  // the head was repeated on every core
  for (const Op& op : sp.program.ops)
    if (op.name == "h3_ln2+h3_res1/fwd" || op.name == "h3_res1+h3_ln2/fwd") BOOST_TEST(op.vector.elements == tokens * width / 4);
  BOOST_TEST(sp.memory.activations < tp.memory.activations);
}

// Collective matmul (XLA's windowed einsum): the all-gather before a split layer's matmul is
// model-axis - 1 ring shifts of one core's share, and the matmul runs in as many pieces, each
// after its share arrives; the reduce-scatter after a split layer's matmul is as many pieces,
// each share's partial sums added to the running sum that arrives from the neighbour and sent on.
// Every shift sends half a share each way round the ring. No whole-tensor gather or scatter of
// activations is left, and the model FLOPs do not change.
BOOST_AUTO_TEST_CASE(collective_matmul_multiplies_each_share_as_it_arrives) {
  const std::vector<std::string> sp = {"workload.training.mesh.model=z", "workload.training.mesh.sequence_parallel=true"};
  std::vector<std::string> with_cm = sp;
  with_cm.push_back("workload.training.mesh.collective_matmul=true");
  const LoweredStep step = gpt2_on_v5p(with_cm);
  const std::uint64_t tokens = step.per_core_batch * 1024, width = 768, share_bytes = tokens / 4 * width * 2;
  std::map<std::string, std::size_t> shifts, pieces, adds;
  double fc_piece_flops = 0;
  for (const Op& op : step.program.ops) {
    for (const std::string product : {"h0_mlp_fc/fwd/", "h0_mlp_proj/fwd/", "h0_mlp_proj/bwd/dX", "h0_mlp_fc/bwd/dX"}) {
      if (op.name.rfind(product, 0) != 0) continue;
      if (op.kind == OpKind::Collective) {
        ++shifts[product];
        BOOST_TEST((op.collective.kind == CollectiveKind::Permute), op.name);
        BOOST_TEST((op.collective.algorithm == CollectiveAlgorithm::BidirRing), op.name);
        BOOST_TEST(op.collective.bytes == share_bytes, op.name);
        // A gradient's shares travel beside the recomputed forward's collectives.
        BOOST_TEST(op.stream == (op.phase == Phase::Backward && product == "h0_mlp_proj/bwd/dX" ? 1u : 0u), op.name);
      } else if (op.kind == OpKind::Matmul) {
        ++pieces[product];
        BOOST_TEST(op.matmul.m == tokens / 4, op.name);
        if (product == "h0_mlp_fc/fwd/") fc_piece_flops += op.model_flops;
      } else if (op.kind == OpKind::Vector && op.name.find("/output/add") != std::string::npos) {
        ++adds[product];
        BOOST_TEST(op.vector.elements == tokens / 4 * width, op.name);
      }
    }
  }
  for (const std::string product : {"h0_mlp_fc/fwd/", "h0_mlp_proj/fwd/", "h0_mlp_proj/bwd/dX", "h0_mlp_fc/bwd/dX"}) {
    BOOST_TEST(shifts[product] == 3u, product);
    BOOST_TEST(pieces[product] == 4u, product);
  }
  BOOST_TEST(adds["h0_mlp_proj/fwd/"] == 3u);  // the scatters
  BOOST_TEST(adds["h0_mlp_fc/bwd/dX"] == 3u);
  BOOST_TEST(adds["h0_mlp_fc/fwd/"] == 0u);  // the gathers
  BOOST_TEST(fc_piece_flops == 2.0 * static_cast<double>(tokens * width * 3072 / 4));
  for (const Op& op : step.program.ops) {
    const bool whole_tensor = op.kind == OpKind::Collective && (op.collective.kind == CollectiveKind::AllGather ||
                                                                op.collective.kind == CollectiveKind::ReduceScatter);
    BOOST_TEST(!(whole_tensor && op.collective.group_axes == 0x4u && op.phase != Phase::Gradients), op.name);
  }
  BOOST_TEST(step.textbook_flops_per_core == gpt2_on_v5p(sp).textbook_flops_per_core);
  BOOST_TEST(step.model_flops_per_core == gpt2_on_v5p(sp).model_flops_per_core, boost::test_tools::tolerance(1e-12));
}

// Flash attention: the scores never reach HBM (the score matmuls write nothing and the ones that
// take them read nothing), nothing of seq x seq is kept for the backward pass, and a causal mask
// skips the blocks above the diagonal: at 1024 tokens, blocks of 512, 3 of 4 are computed. The
// model FLOPs are those of every score, as without the kernel.
BOOST_AUTO_TEST_CASE(flash_attention_keeps_the_scores_on_chip) {
  const LoweredStep dense = gpt2_on_v5p({});
  const LoweredStep flash = gpt2_on_v5p({"workload.training.flash_attention=true"});
  BOOST_TEST(flash.model_flops_per_core == dense.model_flops_per_core, boost::test_tools::tolerance(1e-12));
  std::size_t score_products = 0;
  for (const Op& op : flash.program.ops) {
    if (op.name.find("/flash/") == std::string::npos || op.kind != OpKind::Matmul) continue;
    ++score_products;
    const MatmulWork& mm = op.matmul;
    BOOST_TEST((mm.out_write_fraction == 0.0 || mm.lhs_read_fraction == 0.0), op.name);
    BOOST_TEST((mm.n == 768 || mm.k == 768), op.name);  // keys computed per query
  }
  BOOST_TEST(score_products == 12u * 7);  // QK^T and AV forward; recomputed QK^T, dV, dP, dQ, dK backward
  const std::uint64_t scores_kept = 12ull * flash.per_core_batch * 12 * 1024 * 1024 * 2;
  BOOST_TEST(dense.memory.activations - flash.memory.activations == scores_kept - 12ull * flash.per_core_batch * 12 * 1024 * 4);
}

namespace {

// GPT-2 small quantized to `type` on `hw`, whose MXU has no such path: lowering refuses it.
void refused_without_a_path(const std::string& hw, const std::string& type) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = hw;
  request.sets = {"workload.training.quantization=" + type};
  const Config c = load_config(request);
  const std::string expected = "workload.training.quantization: " + type + ": the " + hw + " MXU has no " + type + " path";
  BOOST_CHECK_EXCEPTION(lower_training_step(c.workload, c.hw), std::invalid_argument,
                        [&](const std::invalid_argument& e) { return tpusim::test::contains(e.what(), expected); });
}

}  // namespace

// Int8 (AQT, as MaxText and PAX run it): the dense layers' and projections' forward, input-gradient
// and weight-gradient matmuls take int8 operands; attention's per-head products and the tied head
// stay in bfloat16; int8_except_weight_gradients keeps the weight gradients in bfloat16 too. A
// chip without an int8 path refuses it.
BOOST_AUTO_TEST_CASE(int8_quantizes_the_weight_matmuls) {
  auto count_int8 = [](const std::string& quantization, bool weight_gradients) {
    const LoweredStep step = gpt2_on_v5p({"workload.training.quantization=" + quantization});
    std::size_t int8 = 0;
    for (const Op& op : step.program.ops) {
      if (op.kind != OpKind::Matmul) continue;
      const bool quantized = op.matmul.lhs == DType::Int8;
      int8 += quantized ? 1 : 0;
      BOOST_TEST(quantized == tpusim::test::contains(op.name, "+int8"), op.name);
      if (quantized) {  // AQT's scales pass first, which writes the right operand in int8
        BOOST_REQUIRE(op.deps.size() == 1u);
        const Op& pass = step.program.ops[op.deps[0]];
        const MatmulWork& mm = op.matmul;
        BOOST_TEST((pass.kind == OpKind::Vector), pass.name);
        BOOST_TEST(pass.name == op.name.substr(0, op.name.find("+int8")) + "/int8_scales");
        BOOST_TEST(pass.vector.hbm_read_bytes == (mm.m * mm.k + 2 * mm.k * mm.n) * 2);
        BOOST_TEST(pass.vector.hbm_write_bytes == mm.k * mm.n + 4 * (mm.m + mm.n));
        BOOST_TEST(mm.lhs_stored_bytes == 2u);  // the left operand read as bfloat16, quantized on the way in
        BOOST_TEST(mm.prologue_vpu_ops_per_lhs_element >= 5.0);
      }
      // Attention's per-head products (batched) are not weight matmuls.
      if ((!weight_gradients && tpusim::test::contains(op.name, "/dW")) || tpusim::test::contains(op.name, "lm_head") ||
          op.matmul.batch > 1)
        BOOST_TEST(!quantized, op.name);
    }
    return int8;
  };
  // QKV, out, MLP in and out; forward, input gradient (and weight gradient)
  BOOST_TEST(count_int8("int8", true) == 12u * 4 * 3);
  BOOST_TEST(count_int8("int8_except_weight_gradients", false) == 12u * 4 * 2);
  refused_without_a_path("tpu_v3", "int8");
}

// Fp8 (qwix, as MaxText's quantization=fp8_full runs it): the same matmuls as int8, weight
// gradients included, with fp8 operands and no stochastic rounding. With fixed calibration
// (qwix's "fixed", which MaxText's fp8 recipes on TPU7x set) the weights' and activations'
// scales are constants, so no pass reads them for a maximum; a gradient's is still found. A chip
// without an fp8 path refuses it.
BOOST_AUTO_TEST_CASE(fp8_quantizes_the_weight_matmuls_as_qwix_does) {
  const auto check = [](const std::vector<std::string>& sets, bool fixed) {
    const LoweredStep step = gpt2_on_v5p(sets);
    std::size_t fp8 = 0;
    for (const Op& op : step.program.ops) {
      if (op.kind != OpKind::Matmul || op.matmul.lhs != DType::Fp8) continue;
      ++fp8;
      const MatmulWork& mm = op.matmul;
      BOOST_TEST(tpusim::test::contains(op.name, "+fp8"), op.name);
      BOOST_TEST(mm.prologue_vpu_ops_per_lhs_element == 5.0, op.name);  // quantized as it arrives, not rounded stochastically
      BOOST_REQUIRE(op.deps.size() == 1u);
      const Op& pass = step.program.ops[op.deps[0]];
      BOOST_TEST(pass.name == op.name.substr(0, op.name.find("+fp8")) + "/fp8_scales");
      // Read for a maximum: every operand without fixed scales, a gradient always.
      const bool lhs_scanned = !fixed || tpusim::test::contains(op.name, "/dX");
      const bool rhs_scanned = !fixed || tpusim::test::contains(op.name, "/dW");
      BOOST_TEST(pass.vector.hbm_read_bytes == ((lhs_scanned ? mm.m * mm.k : 0) + (rhs_scanned ? 2 : 1) * mm.k * mm.n) * 2, op.name);
      BOOST_TEST(pass.vector.hbm_write_bytes == mm.k * mm.n + 4 * ((lhs_scanned ? mm.m : 0) + (rhs_scanned ? mm.n : 0)), op.name);
    }
    return fp8;
  };
  // QKV, out, MLP in and out; forward, input gradient and weight gradient
  BOOST_TEST(check({"workload.training.quantization=fp8"}, false) == 12u * 4 * 3);
  BOOST_TEST(check({"workload.training.quantization=fp8", "workload.training.quantization_calibration=fixed"}, true) == 12u * 4 * 3);
  refused_without_a_path("tpu_v5e", "fp8");
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5e";
  request.sets = {"workload.training.quantization_calibration=fixed"};
  BOOST_TEST(tpusim::test::contains(tpusim::test::load_error(request),
                                    "workload.training.quantization_calibration: fixes the scales of quantized matmuls"));
}

// Without output fusion (MaxText's MLPerf GPT-3 on v5p sets --xla_jf_conv_output_fusion=false)
// a matmul whose epilogue did work writes its raw result, int32 for an int8 product, and a vector
// pass of its own applies the epilogue: it reads that result and any operand the epilogue read,
// writes the activation, and is what the matmul's consumers wait for. Flash attention's score
// products, whose results stay in vector memory, and the f32 weight gradients are unchanged, and
// so are the model FLOPs.
BOOST_AUTO_TEST_CASE(without_output_fusion_a_pass_applies_the_epilogue) {
  const std::vector<std::string> sets = {"workload.training.quantization=int8", "workload.training.flash_attention=true"};
  std::vector<std::string> unfused_sets = sets;
  unfused_sets.push_back("workload.training.matmul_output_fusion=false");
  const LoweredStep fused = gpt2_on_v5p(sets), unfused = gpt2_on_v5p(unfused_sets);
  std::map<std::string, const Op*> fused_by_name;
  for (const Op& op : fused.program.ops) fused_by_name[op.name] = &op;
  std::size_t passes = 0;
  for (const Op& op : unfused.program.ops) {
    if (op.kind != OpKind::Matmul) continue;
    const auto it = fused_by_name.find(op.name);
    BOOST_REQUIRE_MESSAGE(it != fused_by_name.end(), op.name);
    const MatmulWork& before = it->second->matmul;
    const bool int8 = op.matmul.lhs == DType::Int8;
    const bool keeps = before.out == DType::F32 || before.out_write_fraction == 0 ||
                       (before.epilogue_vpu_ops_per_element == 0 && !int8);
    if (keeps) {
      BOOST_TEST(op.matmul.epilogue_vpu_ops_per_element == before.epilogue_vpu_ops_per_element, op.name);
      continue;
    }
    ++passes;
    BOOST_TEST(op.matmul.epilogue_vpu_ops_per_element == 0.0, op.name);
    BOOST_TEST(dtype_bytes(op.matmul.out) == (int8 ? 4u : 2u), op.name);
    const Op& pass = unfused.program.ops[op.id + 1];
    BOOST_TEST(pass.name == op.name + "/epilogue");
    BOOST_TEST(pass.deps == std::vector<std::uint32_t>{op.id});
    const std::uint64_t elements = op.matmul.batch * op.matmul.m * op.matmul.n;
    BOOST_TEST(pass.vector.vpu_ops_per_element == before.epilogue_vpu_ops_per_element, op.name);
    BOOST_TEST(pass.vector.hbm_read_bytes == elements * (dtype_bytes(op.matmul.out) + before.epilogue_operand_bytes_per_element));
    BOOST_TEST(pass.vector.hbm_write_bytes == elements * 2);
    // No op waits for the raw result but its pass.
    for (const Op& other : unfused.program.ops)
      if (other.id != pass.id) BOOST_TEST(std::count(other.deps.begin(), other.deps.end(), op.id) == 0, other.name);
  }
  // QKV, out, MLP in and out, forward and input gradient; the head's logits and their softmax.
  BOOST_TEST(passes == 12u * 4 * 2 + 1);
  BOOST_TEST(unfused.program.ops.size() == fused.program.ops.size() + passes);
  BOOST_TEST(unfused.model_flops_per_core == fused.model_flops_per_core, boost::test_tools::tolerance(1e-12));
}

// The summary counts each core's collectives by mesh axis, and "none" is no model axis (a
// sweep's value beside the axes).
BOOST_AUTO_TEST_CASE(the_summary_counts_collectives_by_mesh_axis) {
  const std::string gpt2 = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  const std::string args = "--hw tpu_v5p --topology 2x2x4 --trace none --set workload.training.steps=1 "
                           "--set workload.training.per_replica_batch=2 --set workload.training.mesh.model=";
  const auto split = tpusim::test::run_example(args + "z", gpt2);
  const nlohmann::json& c = split->summary["collectives_per_step"];
  BOOST_TEST(c["model"]["count"] == 48);
  BOOST_TEST(c["model"]["bytes"].get<std::uint64_t>() == 48ull * 1 * 1024 * 768 * 2);  // 1 sequence per core
  BOOST_TEST(tpusim::test::contains(split->result.out, "collectives    per core and step, by mesh axis: data "));
  const auto whole = tpusim::test::run_example(args + "none", gpt2);
  BOOST_TEST(!whole->summary["collectives_per_step"].contains("model"));
  BOOST_TEST(whole->summary["collectives_per_step"]["data"]["bytes"].get<std::uint64_t>() == 124439808ull * 4);
  // Its samples are sequences of 1024 token ids: the summary counts tokens too.
  BOOST_TEST(whole->summary["tokens_per_s_per_chip"].get<double>() == 1024 * whole->summary["samples_per_s_per_chip"].get<double>(),
             boost::test_tools::tolerance(1e-12));
  BOOST_TEST(tpusim::test::contains(whole->result.out, " tokens/s per chip)"));
}

BOOST_AUTO_TEST_CASE(a_mesh_the_slice_or_the_model_cannot_take_is_refused) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5e";
  request.topology = "4x4";
  auto error = [&](const std::string& hw, const std::string& model_axes) {
    request.hw = hw;
    request.sets = {"workload.training.mesh.model=" + model_axes};
    try {
      const Config c = load_config(request);
      lower_training_step(c.workload, c.hw);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  using tpusim::test::contains;
  BOOST_TEST(contains(error("tpu_v5e", "z"), "workload.training.mesh.model: \"z\": expected letters of the tpu_v5e slice 4x4's torus axes, \"xy\""));
  BOOST_TEST(contains(error("tpu_v5e", "xx"), "names an axis twice"));
  BOOST_TEST(contains(error("tpu_v5e", "xy"), "layer \"h0_attn\": 12 heads do not split over a model axis of 16"));
  request.topology = "4x4";
  BOOST_TEST(contains(error("tpu_v3", "x"), "a tpu_v3 chip's 2 cores are replicas of their own"));
  BOOST_TEST(error("tpu_v5e", "x").empty());
}

// A model too large for the cores: the report names the least sharding under which it fits.
// GPT-3 175B on a v5p 8x8x16 without FSDP does not fit; FSDP alone is not enough (the
// activations of two sequences per chip of 2048 tokens at width 12288); FSDP with the model
// over x (8 chips) is the first that fits, and the run with it confirms.
BOOST_AUTO_TEST_CASE(out_of_memory_names_the_smallest_sharding_that_fits) {
  const std::string gpt3 = tpusim::test::source_path("workloads/examples/gpt3_175b.json");
  const auto oom = tpusim::test::run_example("--hw tpu_v5p --topology 8x8x16 --trace none --set workload.training.fsdp=false", gpt3);
  BOOST_TEST(oom->summary["status"] == "oom");
  const nlohmann::json& fit = oom->summary["memory"]["fits_with"];
  BOOST_TEST(fit["fsdp"] == true);
  BOOST_TEST(fit["mesh_model"] == "x");
  BOOST_TEST(fit["model_shards"] == 8);
  BOOST_TEST(tpusim::test::contains(oom->result.out, "warning: the step fits when sharded: --set workload.training.fsdp=true "
                                                     "--set workload.training.mesh.model=x (a model axis of 8 chips)"));
  const auto fsdp_only = tpusim::test::run_example("--hw tpu_v5p --topology 8x8x16 --trace none", gpt3);
  BOOST_TEST(fsdp_only->summary["status"] == "oom");
  const auto fits = tpusim::test::run_example(
      "--hw tpu_v5p --topology 8x8x16 --trace none --set workload.training.steps=1 --set workload.training.mesh.model=x", gpt3);
  BOOST_TEST(fits->summary["status"] == "ok");
}

namespace {

// The names of the weight matmuls (one product each, not attention's per-head ones) a step's
// backward pass computes again.
std::set<std::string> recomputed_weight_matmuls(const LoweredStep& step) {
  std::set<std::string> names;
  for (const Op& op : step.program.ops)
    if (op.kind == OpKind::Matmul && op.matmul.batch == 1 && tpusim::test::contains(op.name, "/recompute")) names.insert(op.name);
  return names;
}

}  // namespace

// Rematerialization: GPT-2 small keeps only its residual adds' outputs (24 of them, 4 x 1024 x
// 768 in bfloat16) and one segment's activations at a time; the backward pass runs every
// segment's forward matmuls again (the head's too), which are no model FLOPs.
BOOST_AUTO_TEST_CASE(remat_keeps_the_residual_stream_and_recomputes_each_segment) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5e";
  const Config plain_config = load_config(request);
  request.sets = {"workload.training.remat=true"};
  const Config remat_config = load_config(request);
  const LoweredStep plain = lower_training_step(plain_config.workload, plain_config.hw);
  const LoweredStep remat = lower_training_step(remat_config.workload, remat_config.hw);
  BOOST_TEST(remat.model_flops_per_core == plain.model_flops_per_core);
  std::size_t forward_matmuls = 0, recomputed_matmuls = 0;
  for (const Op& op : plain.program.ops) forward_matmuls += op.kind == OpKind::Matmul && op.phase == Phase::Forward ? 1 : 0;
  for (const Op& op : remat.program.ops)
    if (tpusim::test::contains(op.name, "/recompute")) {
      BOOST_TEST((op.phase == Phase::Backward));
      BOOST_TEST(op.model_flops == 0.0);
      recomputed_matmuls += op.kind == OpKind::Matmul ? 1 : 0;
    }
  BOOST_TEST(recomputed_matmuls == forward_matmuls);
  const std::uint64_t residual = 24ull * 4 * 1024 * 768 * 2;
  BOOST_TEST(remat.memory.activations > residual);
  // Beside them the largest segment's activations, here the last one's: the final norm's output
  // (the head's input) and the head's logits before the softmax the loss reads; and the input ids.
  const std::uint64_t last_segment = 4ull * 1024 * 768 * 2 + 4ull * 1024 * 50257 * 2, ids = 4 * 1024 * 4;
  BOOST_TEST(remat.memory.activations == residual + last_segment + ids);
  BOOST_TEST(remat.memory.activations * 4 < plain.memory.activations);
  // One checkpoint per block (two adds per segment): half the residual stream kept, segments twice as long.
  request.sets = {"workload.training.remat=true", "workload.training.remat_adds_per_segment=2"};
  const Config block_config = load_config(request);
  const LoweredStep block = lower_training_step(block_config.workload, block_config.hw);
  std::size_t recomputed_adds = 0;
  for (const Op& op : block.program.ops)
    recomputed_adds += tpusim::test::contains(op.name, "_res1") && tpusim::test::contains(op.name, "/recompute") ? 1 : 0;
  BOOST_TEST(recomputed_adds == 12u);
  BOOST_TEST(block.memory.activations < remat.memory.activations);
  // Policies that keep matmul outputs: minimal runs again only attention's per-head products and
  // the vector work; save_dot_except_mlpwi also each MLP's first layer. What they keep costs memory.
  auto with_policy = [&](const std::string& policy) {
    request.sets = {"workload.training.remat=true", "workload.training.remat_policy=" + policy};
    const Config c = load_config(request);
    return lower_training_step(c.workload, c.hw);
  };
  const LoweredStep minimal = with_policy("minimal"), except = with_policy("save_dot_except_mlpwi");
  BOOST_TEST(recomputed_weight_matmuls(minimal).empty());
  const auto mlp_in = recomputed_weight_matmuls(except);
  BOOST_TEST(mlp_in.size() == 12u);
  for (const auto& name : mlp_in) BOOST_TEST(tpusim::test::contains(name, "_mlp_fc/recompute/"), name);
  std::size_t per_head = 0;
  for (const Op& op : minimal.program.ops)
    per_head += op.kind == OpKind::Matmul && op.matmul.batch > 1 && tpusim::test::contains(op.name, "/recompute") ? 1 : 0;
  BOOST_TEST(per_head == 12u * 2);  // QK^T and AV of every layer
  // Kept per layer: Q, K, V, the attention's output, the MLP's two outputs (4 sequences of 1024).
  const std::uint64_t kept_per_layer = 4ull * 1024 * (3 * 768 + 768 + 3072 + 768) * 2;
  BOOST_TEST(minimal.memory.activations >= remat.memory.activations + 12 * kept_per_layer);
  BOOST_TEST(except.memory.activations + 12ull * 4 * 1024 * 3072 * 2 == minimal.memory.activations);
}

// MaxText's custom remat policy on GPT-2 small (one checkpoint per block, 4 sequences of 1024
// per core): the results it names are not computed again; those kept on the device stay in HBM,
// those offloaded go to the host after the forward pass makes them and come back before their
// segment is recomputed, in HBM only around it (that segment's, and the next one's on its way).
BOOST_AUTO_TEST_CASE(remat_custom_keeps_named_results_and_offloads_them_to_the_host) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5e";
  auto with = [&](const std::string& policy, const std::string& names) {
    request.sets = {"workload.training.remat=true", "workload.training.remat_adds_per_segment=2",
                    "workload.training.remat_policy=" + policy};
    if (!names.empty()) request.sets.push_back("workload.training.remat_custom=" + names);
    const Config c = load_config(request);
    return lower_training_step(c.workload, c.hw);
  };
  const LoweredStep full = with("full", "");
  const LoweredStep device = with("custom", R"({"query_proj":"device","key_proj":"device","value_proj":"device","out_proj":"device"})");
  const LoweredStep offload =
      with("custom", R"({"decoder_layer_input":"offload","qkv_proj":"offload","out_proj":"offload","mlpwo":"remat"})");
  BOOST_TEST(device.model_flops_per_core == full.model_flops_per_core);
  // The attention's two projections of each of the 12 blocks are not computed again.
  const auto again = recomputed_weight_matmuls(device);
  BOOST_TEST(again.size() + 24 == recomputed_weight_matmuls(full).size());
  for (const auto& name : again) BOOST_TEST(!tpusim::test::contains(name, "_attn/"), name);
  BOOST_TEST((recomputed_weight_matmuls(offload) == again));
  const std::uint64_t tokens = 4ull * 1024, qkv_and_out = tokens * (3 * 768 + 768) * 2, checkpoint = tokens * 768 * 2;
  BOOST_TEST(device.memory.activations == full.memory.activations + 12 * qkv_and_out);
  BOOST_TEST(!device.infeed.host_offload);
  // Offloaded: each block's projections and each checkpoint, out and back, the same bytes.
  BOOST_TEST(offload.infeed.host_offload);
  std::uint64_t out_bytes = 0, back_bytes = 0, copies = 0;
  for (const Op& op : offload.program.ops) {
    if (op.kind != OpKind::HostTransfer) continue;
    ++copies;
    (op.host_transfer.to_host ? out_bytes : back_bytes) += op.host_transfer.bytes;
    BOOST_TEST((op.phase == (op.host_transfer.to_host ? Phase::Forward : Phase::Backward)), op.name);
    if (!op.host_transfer.to_host) {  // after its copy out
      BOOST_TEST_REQUIRE(op.deps.size() == 1u);
      const Op& out = offload.program.ops[op.deps[0]];
      BOOST_TEST((out.kind == OpKind::HostTransfer && out.host_transfer.to_host && out.host_transfer.bytes == op.host_transfer.bytes));
    }
  }
  BOOST_TEST(copies == 2u * (12 + 12));
  BOOST_TEST(out_bytes == 12 * (qkv_and_out + checkpoint));
  BOOST_TEST(back_bytes == out_bytes);
  // The checkpoints leave HBM; a block's projections and its input are there twice at most.
  BOOST_TEST(offload.memory.activations + 12 * checkpoint == full.memory.activations + 2 * (qkv_and_out + checkpoint));
}

// Run, each chip's PCIe link carries its offloaded results out and back (beside the input
// batches), the copies ride under the compute, and the offload folds like everything else.
BOOST_AUTO_TEST_CASE(host_offload_crosses_each_chips_pcie_link_and_folds) {
  const std::string gpt2 = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  const std::string common = "--hw tpu_v4 --topology 4x4x4 --trace none --set workload.training.steps=2 "
                             "--set workload.training.per_replica_batch=2 --set workload.training.remat=true "
                             "--set workload.training.remat_adds_per_segment=2 ";
  const auto kept = tpusim::test::run_example(common + "--set workload.training.remat_policy=full", gpt2);
  const nlohmann::json offloaded = tpusim::test::folded_run_matching_full(
      gpt2, common + "--set workload.training.remat_policy=custom --set "
                     "'workload.training.remat_custom={\"decoder_layer_input\":\"offload\",\"qkv_proj\":\"offload\"}'");
  // 12 checkpoints and 12 blocks' Q, K and V (2 sequences of 1024 per chip), out and back, on 64 chips.
  const std::uint64_t per_chip = 12ull * 2 * 1024 * (768 + 3 * 768) * 2;
  BOOST_TEST(offloaded["traffic_per_step"]["pcie_bytes"].get<std::uint64_t>() ==
             kept->summary["traffic_per_step"]["pcie_bytes"].get<std::uint64_t>() + 64 * 2 * per_chip);
  // Carried one after another on the critical path, each way at v4's 16 GB/s, they would add 2
  // x 9.4 ms; beside the compute only the copies around the last segment wait.
  const double serial_s = 2.0 * static_cast<double>(per_chip) / 16e9;
  BOOST_TEST(offloaded["step_time_s"].get<double>() < kept->summary["step_time_s"].get<double>() + 0.25 * serial_s);
}

BOOST_AUTO_TEST_CASE(remat_custom_names_are_checked) {
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/gpt2_small.json");
  request.hw = "tpu_v5e";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"workload.training.remat=true", "workload.training.remat_policy=custom", R"(workload.training.remat_custom={"mlp_in":"device"})"},
       "workload.training.remat_custom.mlp_in: expected one of MaxText's checkpoint names"},
      {{"workload.training.remat=true", "workload.training.remat_policy=custom", R"(workload.training.remat_custom={"mlpwo":"host"})"},
       "workload.training.remat_custom.mlpwo: expected \"device\", \"offload\" or \"remat\", got \"host\""},
      {{"workload.training.remat=true", "workload.training.remat_policy=custom",
        R"(workload.training.remat_custom={"key_proj":"device","query_proj":"offload"})"},
       "disagrees with key_proj's \"device\": tpusim computes them as one result"},
      {{"workload.training.remat=true", "workload.training.remat_policy=custom",
        R"(workload.training.remat_custom={"decoder_layer_input":"remat"})"},
       "workload.training.remat_custom.decoder_layer_input: a segment's input is the checkpoint"},
      {{"workload.training.remat_policy=custom"}, "workload.training.remat_policy: custom says what remat keeps"},
      {{"workload.training.remat=true", R"(workload.training.remat_custom={"mlpwo":"device"})"},
       "workload.training.remat_custom: names what remat_policy custom keeps"},
  };
  for (const auto& [sets, message] : cases) {
    request.sets = sets;
    const std::string error = tpusim::test::load_error(request);
    BOOST_TEST(tpusim::test::contains(error, message), error);
  }
}

BOOST_AUTO_TEST_CASE(mixed_bfloat16_halves_activations_and_keeps_fp32_master_weights) {
  const Config f32 = example();
  const Config bf16 = example("tpu_v2", {"workload.training.precision=mixed_bfloat16"});
  const LoweredStep a = lower_training_step(f32.workload, f32.hw);
  const LoweredStep b = lower_training_step(bf16.workload, bf16.hw);
  BOOST_TEST(b.memory.parameters == a.memory.parameters * 3 / 2);  // fp32 master + bf16 copy
  BOOST_TEST(b.memory.activations - 128u * 784 * 4 == (a.memory.activations - 128u * 784 * 4) / 2);
}

BOOST_AUTO_TEST_CASE(megacore_chips_are_one_replica) {
  const Config c = example("tpu_v4");  // 2x2x1 chips of 2 cores
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  BOOST_TEST(step.replicas == 4u);
  BOOST_TEST(step.per_replica_batch == 256u);
  BOOST_TEST(step.per_core_batch == 128u);
}

// The chip is one device: its cores split the replica's optimizer update (and, clipping after
// the all-reduce, the norm of what they update) rather than each streaming all of it through the
// chip's one HBM; the halves' norms are added up on the chip, or with the other replicas' shares
// when the update is sharded. Run as a replica per core (TensorFlow's MLPerf BERT on v4), each
// core updates its own copy of every weight.
BOOST_AUTO_TEST_CASE(megacore_cores_split_the_update) {
  std::set<double> read_bytes_per_element;
  for (const bool megacore : {true, false})
    for (const bool sharded : {false, true}) {
      BOOST_TEST_CONTEXT("megacore " << megacore << ", weight_update_sharding " << sharded) {
        const Config c = example("tpu_v4", {"workload.training.all_reduce.bucket_bytes=0",
                                            "workload.training.gradient_clipping=after_all_reduce",
                                            megacore ? "hw.chip.megacore=true" : "hw.chip.megacore=false",
                                            sharded ? "workload.training.weight_update_sharding=true"
                                                    : "workload.training.weight_update_sharding=false"});
        const LoweredStep step = lower_training_step(c.workload, c.hw);
        const std::uint64_t trainable = step.model.trainable();
        const std::uint64_t sharers = (megacore ? 2 : 1) * (sharded ? step.replicas : 1);
        std::uint64_t updated = 0, layers = 0, normed = 0;
        const Op* norm_sum = nullptr;
        for (const Op& op : step.program.ops) {
          if (op.kind == OpKind::Vector && op.name.find("_update") != std::string::npos) {
            updated += op.vector.elements;
            ++layers;
            read_bytes_per_element.insert(static_cast<double>(op.vector.hbm_read_bytes) / op.vector.elements);
          }
          if (op.name == "grads/global_norm") normed = op.vector.elements;
          if (op.name == "grads/global_norm/all-reduce") norm_sum = &op;
        }
        BOOST_REQUIRE(layers > 0u);
        // Each layer's share rounds up: at most one parameter more per layer and sharer.
        BOOST_TEST(updated * sharers >= trainable);
        BOOST_TEST(updated * sharers <= trainable + sharers * layers);
        BOOST_TEST(normed == updated);
        BOOST_TEST((norm_sum != nullptr) == (sharers > 1));
        if (norm_sum) BOOST_TEST(norm_sum->collective.group_axes == (sharded ? step.mesh.data_axes : 0u));
        // A megacore chip holds the replica's state once for both cores.
        BOOST_TEST(step.memory.optimizer_state == trainable * 4 * 2 / sharers);
      }
    }
  // The bytes of an update shrink with its elements.
  BOOST_TEST(read_bytes_per_element.size() == 1u);
}

BOOST_AUTO_TEST_CASE(batch_that_does_not_divide_is_an_error_naming_the_key) {
  const Config c = example("tpu_v2", {"workload.training.global_batch=1020"});
  try {
    lower_training_step(c.workload, c.hw);
    BOOST_FAIL("expected an error");
  } catch (const std::invalid_argument& e) {
    BOOST_TEST(std::string(e.what()).find("workload.training.global_batch: 1020 does not divide over the 8 replicas") !=
               std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(embedding_lookups_are_gathers_and_scatters_of_table_rows) {
  // BERT-base: 768-wide f32 table rows gathered at the token ids, their gradients scattered back.
  ConfigRequest request;
  request.workload_path = tpusim::test::source_path("workloads/examples/bert_base_128.json");
  request.hw = "tpu_v5e";
  const Config config = load_config(request);
  const LoweredStep step = lower_training_step(config.workload, config.hw);
  std::size_t gathers = 0, scatters = 0;
  for (const Op& op : step.program.ops) {
    if (op.kind != OpKind::Vector) continue;
    if (op.name.find("/gather") != std::string::npos) {
      ++gathers;
      BOOST_TEST(op.vector.hbm_read_run_bytes == 768u * 4);
    } else if (op.name.find("/scatter") != std::string::npos) {
      ++scatters;
      BOOST_TEST(op.vector.hbm_write_run_bytes == 768u * 4);
    } else {
      BOOST_TEST(op.vector.hbm_read_run_bytes == 0u);  // everything else streams contiguous tensors
    }
  }
  BOOST_TEST(gathers >= 1u);
  BOOST_TEST(scatters == gathers);
}

BOOST_AUTO_TEST_CASE(every_layer_kind_declares_keys_the_parameter_table_documents) {
  const std::vector<std::string> names = layer_kind_names();
  BOOST_TEST(find_param("workload", "model.layers[].type")->choices == names);
  std::set<std::string> taken;
  for (const std::string& name : names) {
    const LayerKind& kind = layer_kind(name);
    BOOST_TEST(kind.name() == name);
    const std::vector<std::string> keys = kind.keys();
    for (const std::string& key : keys) {
      BOOST_TEST_INFO(name << "." << key);
      BOOST_TEST(find_param("workload", "model.layers[]." + key) != nullptr);
      taken.insert(key);
    }
    for (const ParamSpec& own : kind.own_keys()) {  // declared by the kind itself
      BOOST_TEST_INFO(name << "." << own.path);
      BOOST_TEST(find_param("workload", own.path) != nullptr);
      taken.insert(layer_key_name(own));
    }
    for (const std::string& key : kind.required_keys()) {
      BOOST_TEST_INFO(name << " requires " << key);
      BOOST_TEST((std::find(keys.begin(), keys.end(), key) != keys.end()));
    }
  }
  // And no documented layer key is left without a kind that takes it.
  for (const ParamSpec& p : param_registry()) {
    const std::string prefix = "model.layers[].";
    if (p.doc != "workload" || p.path.rfind(prefix, 0) != 0) continue;
    const std::string key = p.path.substr(prefix.size());
    const auto& every = keys_of_every_layer();
    if (std::find(every.begin(), every.end(), key) != every.end()) continue;
    BOOST_TEST_INFO(key);
    BOOST_TEST(taken.count(key) == 1u);
  }
  BOOST_CHECK_EXCEPTION(layer_kind("denes"), std::invalid_argument, [](const std::invalid_argument& e) {
    return std::string(e.what()).find("unknown layer type \"denes\" (expected one of flatten, dense,") != std::string::npos;
  });
}

// Issue 40: the workload's choices of activation, loss, optimizer and collective algorithm were
// lists copied by hand beside the tables that cost them (a drift surfaced as a bare map::at).
// Each choice list is now its owner's table: every choice has a cost, and nothing costed is
// left out of the choices.
BOOST_AUTO_TEST_CASE(choice_lists_are_their_owners_tables) {
  BOOST_TEST(find_param("workload", "model.layers[].activation")->choices == activation_names(), boost::test_tools::per_element());
  BOOST_TEST(find_param("workload", "model.loss")->choices == loss_names(), boost::test_tools::per_element());
  BOOST_TEST(find_param("workload", "training.optimizer.name")->choices == optimizer_names(), boost::test_tools::per_element());
  BOOST_TEST(find_param("workload", "training.all_reduce.algorithm")->choices == collective_algorithm_names(),
             boost::test_tools::per_element());
  for (const auto& a : activation_names()) BOOST_TEST(activation_vpu_ops(a) + activation_grad_vpu_ops(a) >= 0.0);
  BOOST_CHECK_EXCEPTION(optimizer_cost("adamm"), std::invalid_argument,
                        [](const std::invalid_argument& e) { return std::string(e.what()) == "unknown optimizer \"adamm\""; });
}

// A layer that is not a view must cost something in the forward pass: no kind may fall through the
// lowering for free.
BOOST_AUTO_TEST_CASE(every_layer_of_the_zoo_emits_work_unless_it_is_a_view) {
  for (const auto& entry : std::filesystem::directory_iterator(tpusim::test::source_path("workloads/examples"))) {
    if (entry.path().extension() != ".json") continue;
    ConfigRequest request;
    request.workload_path = entry.path().string();
    request.hw = "tpu_v4";
    for (const char* fusion : {"true", "false"}) {
      request.sets = {std::string("workload.training.fusion=") + fusion};
      const Config c = load_config(request);
      const LoweredStep step = lower_training_step(c.workload, c.hw);
      for (const Node& node : step.model.nodes) {
        if (node.kind->is_view() || (node.spec.type == "dropout" && node.spec.own_key<double>("rate") == 0)) continue;
        const std::string& n = node.spec.name;
        const bool named = std::any_of(step.program.ops.begin(), step.program.ops.end(), [&](const Op& op) {
          if (op.phase != Phase::Forward) return false;
          return op.name.rfind(n + "/", 0) == 0 || op.name.find("+" + n + "/") != std::string::npos ||
                 op.name.find("+" + n + "+") != std::string::npos || op.name.rfind(n + "+", 0) == 0;
        });
        BOOST_TEST_INFO(entry.path().filename().string() << " fusion=" << fusion << " layer " << n);
        BOOST_TEST(named);
      }
    }
  }
}

// A squeeze-and-excitation block on two concatenated branches: the kinds ONNX and Keras models
// of DenseNet, SqueezeNet, MobileNet v3 and RegNet need beside the classic ones.
BOOST_AUTO_TEST_CASE(concat_multiply_and_kept_pooled_axes_infer_and_lower) {
  tpusim::test::TempDir dir;
  const std::string workload = dir.write("se.json", R"({
    "name": "se", "model": {"input_shape": [8, 8, 4], "layers": [
      {"type": "conv2d", "name": "stem", "filters": 8, "kernel": 3},
      {"type": "conv2d", "name": "a", "filters": 8, "kernel": 1, "inputs": ["stem"]},
      {"type": "conv2d", "name": "b", "filters": 6, "kernel": 3, "inputs": ["stem"]},
      {"type": "concat", "name": "joined", "inputs": ["a", "b"]},
      {"type": "global_avg_pool", "name": "squeeze", "keepdims": true},
      {"type": "conv2d", "name": "excite", "filters": 14, "kernel": 1, "activation": "hard_sigmoid"},
      {"type": "multiply", "name": "scaled", "inputs": ["joined", "excite"]},
      {"type": "global_avg_pool", "name": "pool"},
      {"type": "dense", "name": "head", "units": 10}]},
    "training": {"per_replica_batch": 4}})");
  ConfigRequest request;
  request.workload_path = workload;
  const Config c = load_config(request);
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  const auto node = [&](const std::string& name) { return node_named(step, name); };
  BOOST_TEST(node("joined").out == Shape({8, 8, 14}), boost::test_tools::per_element());
  BOOST_TEST(node("squeeze").out == Shape({1, 1, 14}), boost::test_tools::per_element());
  BOOST_TEST(node("scaled").out == Shape({8, 8, 14}), boost::test_tools::per_element());
  for (const char* op : {"joined/fwd/concat", "joined/bwd/split", "scaled/fwd/multiply", "scaled/bwd/multiply"})
    BOOST_TEST(std::any_of(step.program.ops.begin(), step.program.ops.end(), [&](const Op& o) { return o.name == op; }), op);
  // The concat's gradient reaches both branches; the product's reaches both of its inputs.
  const auto& ops = step.program.ops;
  auto id = [&](const std::string& name) {
    return std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.name.rfind(name, 0) == 0; })->id;
  };
  for (const char* dx : {"a/bwd/dW", "b/bwd/dW"}) {
    const auto& deps = ops[id(dx)].deps;
    BOOST_TEST((std::find(deps.begin(), deps.end(), id("joined/bwd/split")) != deps.end()), dx);
  }
  BOOST_TEST(step.memory.activations > 0u);
  tpusim::test::TempDir bad;
  request.workload_path = bad.write("bad.json", tpusim::test::read_file(workload).replace(
      tpusim::test::read_file(workload).find("\"filters\": 14"), 13, "\"filters\": 13"));
  const Config broken = load_config(request);
  BOOST_CHECK_EXCEPTION(lower_training_step(broken.workload, broken.hw), std::invalid_argument, [](const std::invalid_argument& e) {
    return tpusim::test::contains(e.what(), "workload.model.layers[6].inputs: [1, 1, 13] does not broadcast to [8, 8, 14]");
  });
}

// A UNet's pieces on a toy: a second and third model input (a timestep's features, caption
// tokens), a timestep embedding added at every position, group norm, upsampling, and
// cross-attention written as its products.
BOOST_AUTO_TEST_CASE(unet_pieces_infer_and_lower) {
  tpusim::test::TempDir dir;
  const std::string workload = dir.write("unet.json", R"({
    "name": "unet", "model": {"input_shape": [8, 8, 4], "loss": "mse", "layers": [
      {"type": "conv2d", "name": "conv_in", "filters": 32, "kernel": 3},
      {"type": "input", "name": "t", "shape": [16]},
      {"type": "dense", "name": "temb", "units": 32},
      {"type": "input", "name": "tokens", "shape": [6]},
      {"type": "embedding", "name": "text", "vocab": 100, "dim": 24, "trainable": false},
      {"type": "add", "name": "with_time", "inputs": ["conv_in", "temb"]},
      {"type": "group_norm", "name": "norm", "groups": 8},
      {"type": "upsample", "name": "up"},
      {"type": "reshape", "name": "tokens_of_image", "shape": [256, 32]},
      {"type": "dense", "name": "k", "units": 32, "inputs": ["text"]},
      {"type": "permute", "name": "k_t", "perm": [1, 0]},
      {"type": "matmul", "name": "scores", "inputs": ["tokens_of_image", "k_t"]},
      {"type": "activation", "name": "softmax", "activation": "softmax"},
      {"type": "dense", "name": "v", "units": 32, "inputs": ["text"]},
      {"type": "matmul", "name": "context", "inputs": ["softmax", "v"]},
      {"type": "reshape", "name": "image", "shape": [16, 16, 32]},
      {"type": "conv2d", "name": "conv_out", "filters": 4, "kernel": 3}]},
    "training": {"per_replica_batch": 4, "fusion": false, "precision": "mixed_bfloat16"}})");
  ConfigRequest request;
  request.workload_path = workload;
  request.hw = "tpu_v5e";
  const Config c = load_config(request);
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  const auto node = [&](const std::string& name) { return node_named(step, name); };
  BOOST_TEST(node("with_time").out == Shape({8, 8, 32}), boost::test_tools::per_element());
  BOOST_TEST(node("up").out == Shape({16, 16, 32}), boost::test_tools::per_element());
  BOOST_TEST(node("scores").out == Shape({256, 6}), boost::test_tools::per_element());
  BOOST_TEST(node("norm").params == 2u * 32);
  BOOST_TEST(node("text").frozen == 100u * 24);
  // The host feeds each sample's latents, timestep features and tokens (float32 by default).
  const std::uint64_t b = step.per_core_batch;
  BOOST_TEST(step.infeed.bytes_per_core == b * (8 * 8 * 4 + 16 + 6) * 4);
  const auto& ops = step.program.ops;
  auto op = [&](const std::string& name) -> const Op& {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const Op& o) { return o.name == name; });
    if (it == ops.end())
      for (const Op& o : ops) BOOST_TEST_MESSAGE(o.name);
    BOOST_REQUIRE_MESSAGE(it != ops.end(), "no op " << name);
    return *it;
  };
  // Upsampling copies each element to a 2x2 block; its gradient adds the block back up.
  const std::uint64_t act = 2, e_in = b * 8 * 8 * 32, e_out = 4 * e_in;
  BOOST_TEST(op("up/fwd/upsample").vector.hbm_read_bytes == e_in * act);
  BOOST_TEST(op("up/fwd/upsample").vector.hbm_write_bytes == e_out * act);
  BOOST_TEST(op("up/bwd/upsample").vector.hbm_read_bytes == e_out * act);
  BOOST_TEST(op("up/bwd/upsample").vector.hbm_write_bytes == e_in * act);
  // The timestep embedding's gradient is the output gradient summed over the positions: the
  // projection's weight gradient waits for that sum, which reads the whole output gradient.
  const Op& sum = op("with_time/bwd/sum1");
  BOOST_TEST(sum.vector.hbm_read_bytes == e_in * act);
  BOOST_TEST(sum.vector.hbm_write_bytes == b * 32 * act);
  const auto& dw_deps = op("temb/bwd/dW+dbias").deps;
  BOOST_TEST((std::find(dw_deps.begin(), dw_deps.end(), sum.id) != dw_deps.end()));
  // The frozen text table gets no gradient; nothing flows back into the inputs.
  BOOST_TEST(std::none_of(ops.begin(), ops.end(), [](const Op& o) { return o.name.rfind("text/bwd", 0) == 0; }));

  auto refused = [&](const std::string& from, const std::string& to, const std::string& message) {
    tpusim::test::TempDir bad;
    std::string text = tpusim::test::read_file(workload);
    text.replace(text.find(from), from.size(), to);
    request.workload_path = bad.write("bad.json", text);
    BOOST_CHECK_EXCEPTION(
        {
          const Config broken = load_config(request);
          lower_training_step(broken.workload, broken.hw);
        },
        std::exception, [&](const std::exception& e) {
      BOOST_TEST_INFO(e.what());
      return tpusim::test::contains(e.what(), message);
    });
  };
  refused("\"groups\": 8", "\"groups\": 5", "workload.model.layers[6].groups: 5 groups do not divide the 32 channels");
  refused("\"name\": \"t\", \"shape\": [16]", "\"name\": \"t\", \"shape\": [16], \"inputs\": [\"conv_in\"]",
          "workload.model.layers[1].inputs: an input layer takes no layer's output");
  refused("\"units\": 32}", "\"units\": 31}", "workload.model.layers[5].inputs: [31] does not broadcast to [8, 8, 32]");
}

// A projection shortcut's batch norm feeds only the block's add: XLA's loop fusion takes it into
// the add's fusion, which reads both convolutions' raw outputs, so it has no pass of its own
// either way; its statistics come from its convolution's epilogue, and the fused backward writes
// both branches' input gradients.
BOOST_AUTO_TEST_CASE(a_shortcut_batch_norm_fuses_into_the_blocks_add) {
  const LoweredStep step = resnet50_at_8("tpu_v5e");
  const auto& ops = step.program.ops;
  auto named = [&](const std::string& part, const std::string& suffix) -> const Op* {
    for (const Op& o : ops)
      if (o.name.find(part) != std::string::npos && o.name.size() >= suffix.size() &&
          o.name.compare(o.name.size() - suffix.size(), suffix.size(), suffix) == 0)
        return &o;
    return nullptr;
  };
  BOOST_TEST(named("conv2_block1_0_bn/fwd/batch_norm", "") == nullptr);
  BOOST_TEST(named("conv2_block1_0_bn/bwd/batch_norm", "") == nullptr);
  const Op* forward = named("conv2_block1_0_bn+", "/fwd");
  if (!forward) forward = named("+conv2_block1_0_bn+", "/fwd");
  BOOST_REQUIRE(forward != nullptr);
  BOOST_TEST(forward->name.find("conv2_block1_add") != std::string::npos);
  const std::uint64_t tensor_bytes = forward->vector.hbm_write_bytes;  // the block's output, written once
  BOOST_TEST(forward->vector.hbm_read_bytes == 2 * tensor_bytes);     // both convolutions' outputs
  const Op* shortcut_conv = named("conv2_block1_0_conv/fwd", "");
  BOOST_REQUIRE(shortcut_conv != nullptr);
  BOOST_TEST(shortcut_conv->matmul.epilogue_vpu_ops_per_element >= 3.0);  // the batch statistics
  const Op* backward = named(forward->name.substr(0, forward->name.size() - 4), "/bwd");
  BOOST_REQUIRE(backward != nullptr);
  BOOST_TEST(backward->vector.hbm_write_bytes == 2 * tensor_bytes);
  const Op* shortcut_dw = named("conv2_block1_0_conv/bwd/dW", "");
  BOOST_REQUIRE(shortcut_dw != nullptr);
  BOOST_TEST((std::find(shortcut_dw->deps.begin(), shortcut_dw->deps.end(), backward->id) != shortcut_dw->deps.end()));
}

// Between a bottleneck block's convolutions the batch norm (statistics from the convolution
// before) and ReLU ride into the next convolution's input: no pass of their own, the next
// convolution's forward and weight gradient apply them, and their output is neither written nor
// kept. Without fusion every one of those is a pass of its own.
BOOST_AUTO_TEST_CASE(a_batch_norm_and_relu_between_convolutions_ride_into_the_next_ones_input) {
  auto lower = [](const char* fusion) {
    ConfigRequest request;
    request.workload_path = tpusim::test::source_path("workloads/examples/resnet50_mlperf.json");
    request.hw = "tpu_v4";
    request.sets = {"workload.training.per_replica_batch=16", std::string("workload.training.fusion=") + fusion};
    const Config c = load_config(request);
    return lower_training_step(c.workload, c.hw);
  };
  const LoweredStep fused = lower("true");
  auto find = [&](const LoweredStep& step, const std::string& name) -> const Op* {
    for (const Op& o : step.program.ops)
      if (o.name == name) return &o;
    return nullptr;
  };
  const std::string chain = "conv2_block1_1_bn+conv2_block1_1_relu";
  BOOST_TEST(find(fused, chain + "/fwd") == nullptr);
  const Op* conv = find(fused, chain + "+conv2_block1_2_conv/fwd/conv");
  BOOST_REQUIRE(conv != nullptr);
  BOOST_TEST(conv->matmul.prologue_vpu_ops_per_lhs_element > 0.0);
  const Op* dw = find(fused, chain + "+conv2_block1_2_conv/bwd/dW");
  BOOST_REQUIRE(dw != nullptr);
  BOOST_TEST(dw->matmul.prologue_vpu_ops_per_lhs_element == conv->matmul.prologue_vpu_ops_per_lhs_element);
  // The statistics still come from the convolution before, and the chain's backward still runs.
  const Op* producer = find(fused, "conv2_block1_1_conv/fwd/conv");
  BOOST_REQUIRE(producer != nullptr);
  BOOST_TEST(producer->matmul.epilogue_vpu_ops_per_element >= 3.0);
  BOOST_TEST(find(fused, chain + "/bwd") != nullptr);
  // The block's output feeds two layers (the next block and its shortcut): it is written.
  BOOST_TEST(find(fused, "conv2_block1_3_bn+conv2_block1_0_bn+conv2_block1_add+conv2_block1_out/fwd") != nullptr);

  const LoweredStep unfused = lower("false");
  BOOST_TEST(find(unfused, "conv2_block1_2_conv/fwd/conv")->matmul.prologue_vpu_ops_per_lhs_element == 0.0);
  BOOST_TEST(fused.memory.activations < unfused.memory.activations);
}

// Reductions along the last axis are marked where the step makes them: attention's softmax (max
// then sum) and its gradient (one sum), every layer norm's pass forward and backward, alone or in
// a chain, and the loss's log-softmax; a batch norm reduces over the rows and carries none. What
// each one reduces is bytes the pass reads. The marks cost nothing on a generation that does not
// reduce in passes of their own (v5p: 0) and add those bytes again per pass where it does.
// A row fits in vector memory between its statistics and its normalization: a layer norm that
// stands alone (GPT-2's pre-norms, whose input also feeds the residual) reads its input once
// forward, and dy and its input once each backward, as a chained one does.
BOOST_AUTO_TEST_CASE(a_layer_norm_on_its_own_reads_each_input_once) {
  std::size_t forward = 0, backward = 0;
  for (const Op& op : gpt2_on_v5p({}).program.ops) {
    if (op.kind != OpKind::Vector) continue;
    const VectorWork& v = op.vector;
    if (op.name.find("/fwd/layer_norm") != std::string::npos) {
      ++forward;
      BOOST_TEST(v.hbm_read_bytes == v.hbm_write_bytes, op.name);
      BOOST_TEST(v.lane_reduced_bytes == v.hbm_read_bytes, op.name);
    } else if (op.name.find("/bwd/layer_norm") != std::string::npos) {
      ++backward;
      BOOST_TEST(v.hbm_read_bytes == 2 * v.hbm_write_bytes, op.name);
    }
  }
  BOOST_TEST(forward > 0u);
  BOOST_TEST(backward == forward);
}

BOOST_AUTO_TEST_CASE(lane_reductions_are_marked_where_the_step_reduces_along_rows) {
  const LoweredStep gpt2 = gpt2_on_v5p({});
  std::size_t softmax = 0, softmax_grad = 0, norms = 0, loss = 0;
  for (const Op& op : gpt2.program.ops) {
    if (op.kind != OpKind::Vector) continue;
    const VectorWork& v = op.vector;
    const auto ends_with = [&](const std::string& s) {
      return op.name.size() >= s.size() && op.name.compare(op.name.size() - s.size(), s.size(), s) == 0;
    };
    if (ends_with("/softmax")) {
      ++softmax;
      BOOST_TEST(v.lane_reductions == 2u, op.name);
      BOOST_TEST(v.lane_reduced_bytes == v.hbm_read_bytes, op.name);
    } else if (ends_with("/softmax_grad")) {
      ++softmax_grad;
      BOOST_TEST(v.lane_reductions == 1u, op.name);
      BOOST_TEST(v.lane_reduced_bytes == v.hbm_read_bytes, op.name);  // dP and P
    } else if (op.name.find("ln") != std::string::npos && v.lane_reductions > 0) {
      ++norms;
      BOOST_TEST(v.lane_reductions == 1u, op.name);
      BOOST_TEST(v.lane_reduced_bytes > 0u, op.name);
      BOOST_TEST(v.lane_reduced_bytes <= v.hbm_read_bytes, op.name);
    } else if (op.name.find("crossentropy") != std::string::npos) {
      ++loss;
      BOOST_TEST(v.lane_reductions == 2u, op.name);
    }
  }
  BOOST_TEST(softmax == 12u);
  BOOST_TEST(softmax_grad == 12u);
  BOOST_TEST(norms == 2u * (2 * 12 + 1));  // two per block and the final one, forward and backward
  BOOST_TEST(loss == 1u);

  for (const Op& op : resnet50_at_8("tpu_v3").program.ops)
    if (op.kind == OpKind::Vector && op.name.find("crossentropy") == std::string::npos)
      BOOST_TEST(op.vector.lane_reductions == 0u, op.name);

  // The bytes a core's DMA moves: as lowered where reductions ride in their pass, and each marked
  // reduction's bytes again per extra pass where they do not.
  const Config v5p = gpt2_on_v5p_config();
  HwConfig passes = v5p.hw;
  passes.core.vpu.lane_reduction_extra_passes = 2;
  std::uint64_t lowered = 0, reduced = 0;
  for (const Op& op : gpt2.program.ops) {
    if (op.kind != OpKind::Vector) continue;
    BOOST_TEST(TensorCore::vector_read_bytes(op.vector, v5p.hw) == op.vector.hbm_read_bytes);
    lowered += op.vector.hbm_read_bytes;
    reduced += op.vector.lane_reductions * op.vector.lane_reduced_bytes;
    BOOST_TEST(TensorCore::vector_read_bytes(op.vector, passes) ==
               op.vector.hbm_read_bytes + 2 * op.vector.lane_reductions * op.vector.lane_reduced_bytes);
  }
  BOOST_TEST(reduced > lowered / 10);  // attention's scores dominate a GPT-2 step's vector reads
}

// Distributed batch norm (MLPerf ResNet-50's distributed_group_size, JAX's axis_index_groups):
// every pass that normalizes with batch statistics waits for them to be all-reduced, in f32,
// among the group's chips, a block of the torus (four v4 chips: a 2x2 tray), forward and
// backward, on a collective stream of their own beside the gradients'. A group that a chip holds
// alone, that is not a power of two or that the slice cannot take as a block is refused.
BOOST_AUTO_TEST_CASE(distributed_batch_norm_all_reduces_the_statistics_among_a_tray) {
  auto lower = [](const std::string& hw, const std::string& topology, std::uint32_t group) {
    ConfigRequest request;
    request.workload_path = tpusim::test::source_path("workloads/examples/resnet50_mlperf.json");
    request.hw = hw;
    request.topology = topology;
    request.sets = {"workload.training.per_replica_batch=16", "workload.training.batch_norm_group=" + std::to_string(group)};
    const Config c = load_config(request);
    return lower_training_step(c.workload, c.hw);
  };
  const LoweredStep step = lower("tpu_v4", "4x4x4", 4);
  std::size_t batch_norms = 0;
  std::uint64_t channels = 0;
  for (const Node& n : step.model.nodes)
    if (n.spec.type == "batch_norm") {
      ++batch_norms;
      channels += n.in.back();
    }
  BOOST_REQUIRE(batch_norms == 53u);
  std::map<Phase, std::uint64_t> bytes;
  std::map<Phase, std::size_t> exchanges;
  for (const Op& o : step.program.ops) {
    if (o.name.find("/stats/all-reduce") == std::string::npos) continue;
    BOOST_TEST_CONTEXT(o.name) {
      BOOST_TEST((o.kind == OpKind::Collective));
      BOOST_TEST((o.collective.kind == CollectiveKind::AllReduce));
      BOOST_TEST((o.collective.dtype == DType::F32));
      BOOST_TEST(o.collective.group_axes == 0x3u);
      BOOST_TEST(o.collective.group_span[0] == 2u);
      BOOST_TEST(o.collective.group_span[1] == 2u);
      BOOST_TEST(o.stream != 0u);
      BOOST_TEST(group_size(Torus({4, 4, 4}, {true, true, true}), o.collective.group_axes, o.collective.group_span) == 4u);
    }
    ++exchanges[o.phase];
    bytes[o.phase] += o.collective.bytes;
  }
  // One per chain of fused layers each way; together every batch norm's sum and sum of squares.
  BOOST_TEST(exchanges[Phase::Forward] > 0u);
  BOOST_TEST(exchanges[Phase::Forward] == exchanges[Phase::Backward]);
  BOOST_TEST(bytes[Phase::Forward] == 2 * channels * 4);
  BOOST_TEST(bytes[Phase::Backward] == 2 * channels * 4);
  // Each waits for its producer and is waited for: a chain riding into a convolution's input
  // makes the convolution wait.
  const auto named = [&](const std::string& name) -> const Op& {
    for (const Op& o : step.program.ops)
      if (o.name == name) return o;
    BOOST_FAIL("no op " << name);
    return step.program.ops.front();
  };
  const Op& stats = named("conv2_block1_1_bn+conv2_block1_1_relu/fwd/stats/all-reduce");
  BOOST_TEST(stats.deps == std::vector<std::uint32_t>{named("conv2_block1_1_conv/fwd/conv").id});
  const Op& consumer = named("conv2_block1_1_bn+conv2_block1_1_relu+conv2_block1_2_conv/fwd/conv");
  BOOST_TEST(std::count(consumer.deps.begin(), consumer.deps.end(), stats.id) == 1);

  // Two-core v3 chips: eight replicas are four chips, a 2x2 tray again.
  const LoweredStep v3 = lower("tpu_v3", "8x8", 8);
  const auto v3_exchange = std::find_if(v3.program.ops.begin(), v3.program.ops.end(),
                                        [](const Op& o) { return o.name.find("/stats/all-reduce") != std::string::npos; });
  BOOST_REQUIRE(v3_exchange != v3.program.ops.end());
  BOOST_TEST(v3_exchange->collective.group_span[0] == 2u);
  BOOST_TEST(v3_exchange->collective.group_span[1] == 2u);
  // Without a group: none.
  const LoweredStep own = lower("tpu_v4", "4x4x4", 1);
  BOOST_TEST(std::none_of(own.program.ops.begin(), own.program.ops.end(),
                          [](const Op& o) { return o.name.find("/stats/") != std::string::npos; }));

  auto error = [&](const std::string& hw, const std::string& topology, std::uint32_t group) {
    try {
      lower(hw, topology, group);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  using tpusim::test::contains;
  BOOST_TEST(contains(error("tpu_v4", "4x4x4", 3), "workload.training.batch_norm_group: expected a power of two, got 3"));
  BOOST_TEST(contains(error("tpu_v3", "8x8", 2), "workload.training.batch_norm_group: 2 replicas: a group within one chip"));
  BOOST_TEST(contains(error("tpu_v4", "2x2x1", 8), "a group of 8 replicas (8 chips) does not fit the tpu_v4 slice 2x2x1 as a block"));
}
