// Mixture of experts (issue 38): the moe layer's ops against their closed forms, expert
// parallelism's all-to-alls and gradient reductions, capacity and imbalance, folding, refusals.
#define BOOST_TEST_MODULE moe
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// tests/data/moe/small.json: width 256, sequence 256; its moe layer has 8 experts of 128, 2 per
// token, and one shared expert.
constexpr std::uint64_t kWidth = 256, kSeq = 256, kExperts = 8, kTopK = 2, kUnits = 128;
const std::string kSmall = source_path("tests/data/moe/small.json");

LoweredStep lowered(std::vector<std::string> sets, const std::string& topology = "4x4x4") {
  ConfigRequest request;
  request.workload_path = kSmall;
  request.hw = "tpu_v5p";
  request.topology = topology;
  request.sets = std::move(sets);
  const Config c = load_config(request);
  return lower_training_step(c.workload, c.hw);
}

std::vector<const Op*> ops_named(const Program& p, const std::string& part) {
  std::vector<const Op*> out;
  for (const Op& op : p.ops)
    if (op.name.find(part) != std::string::npos) out.push_back(&op);
  return out;
}


}  // namespace

BOOST_AUTO_TEST_CASE(an_expert_axis_exchanges_the_dispatched_rows_and_splits_the_experts) {
  // v5p 4x4x4, experts over x (4 chips): each chip holds 2 of the 8 experts. A core's tokens:
  // its share of the batch times the sequence; each expert takes tokens x top_k / experts rows
  // from every chip (dropless and balanced), so the dispatched buffer is tokens x top_k rows.
  const LoweredStep step = lowered({"workload.training.mesh.expert=x"});
  const std::uint64_t tokens = step.per_core_batch * kSeq;
  const std::uint64_t buffer_bytes = tokens * kTopK * kWidth * 2;  // bfloat16 rows
  const auto exchanges = ops_named(step.program, "all-to-all");
  BOOST_TEST(exchanges.size() == 4u);  // dispatch and combine, forward and backward
  for (const Op* op : exchanges) {
    BOOST_TEST_CONTEXT(op->name) {
      BOOST_TEST((op->collective.kind == CollectiveKind::AllToAll));
      BOOST_TEST(op->collective.group_axes == 0x1u);
      BOOST_TEST(op->collective.bytes == buffer_bytes);
    }
  }
  // The experts' grouped matmuls: 2 local experts of 4 x (their rows from each chip).
  const auto gate_up = ops_named(step.program, "b1_moe/fwd/experts/gate_up");
  BOOST_REQUIRE(gate_up.size() == 1u);
  BOOST_TEST(gate_up[0]->matmul.batch == kExperts / 4);
  BOOST_TEST(gate_up[0]->matmul.m == 4 * tokens * kTopK / kExperts);
  BOOST_TEST(gate_up[0]->matmul.n == 2 * kUnits);
  // Per core, the layer holds its 2 experts, the router and the shared expert.
  const std::uint64_t per_expert = 3 * kWidth * kUnits;
  const auto moe_node = [](const ModelGraph& g) {
    return *std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.spec.type == "moe"; });
  };
  BOOST_TEST(moe_node(step.model).params == kExperts * per_expert + kWidth * kExperts + per_expert);
  BOOST_TEST(moe_node(step.core_model).params == 2 * per_expert + kWidth * kExperts + per_expert);
  // The experts' gradients are summed over the data axes the experts are not split over (y, z),
  // the router's and the shared expert's over every data axis with the rest of the model.
  const auto expert_grads = ops_named(step.program, "b1_moe/experts/grad");
  BOOST_REQUIRE(expert_grads.size() == 1u);
  BOOST_TEST(expert_grads[0]->collective.group_axes == 0x6u);
  BOOST_TEST(expert_grads[0]->collective.bytes == 2 * per_expert * 4);
  // The model FLOPs of the program are the layers' textbook count.
  BOOST_TEST(step.model_flops_per_core == step.textbook_flops_per_core, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(capacity_and_imbalance_pad_the_experts_rows_but_not_the_model_flops) {
  const LoweredStep balanced = lowered({});
  const LoweredStep padded = lowered({"workload.model.layers[14].capacity_factor=1.25"});
  const LoweredStep skewed = lowered({"workload.model.layers[14].routing_imbalance=1.5"});
  const std::uint64_t rows = ops_named(balanced.program, "b1_moe/fwd/experts/down")[0]->matmul.m;
  BOOST_TEST(rows == balanced.per_core_batch * kSeq * kTopK / kExperts);  // no expert axis: each chip's own rows
  BOOST_TEST(ops_named(padded.program, "b1_moe/fwd/experts/down")[0]->matmul.m == (rows * 5 + 3) / 4);
  BOOST_TEST(ops_named(skewed.program, "b1_moe/fwd/experts/down")[0]->matmul.m == (rows * 3 + 1) / 2);
  for (const LoweredStep* s : {&padded, &skewed}) {
    BOOST_TEST(s->model_flops_per_core == balanced.model_flops_per_core, boost::test_tools::tolerance(1e-12));
    BOOST_TEST(ops_named(s->program, "all-to-all").empty());
  }
}

// Megablox's and the ragged dot's grouped matmuls tile the sorted rows: each expert's first rows
// share a tile with the one before, computed again for it, so over the 8 local experts the
// kernel computes 7 tiles more (1/8 of them per expert), forward and backward, and the weight
// gradients contract over as many rows more. Executed MXU work, not model FLOPs. A v5p chip's
// two cores run the kernel over all of the chip's rows, each half its columns, so each core
// (which tpusim gives half the rows) takes half the extra tiles. With an expert axis of 4 the
// chip holds 2 experts: one tile more.
BOOST_AUTO_TEST_CASE(grouped_matmul_tiles_straddling_two_experts_are_computed_twice) {
  const LoweredStep aligned = lowered({});
  const LoweredStep tiled = lowered({"workload.model.layers[14].group_tile_rows=64"});
  const std::uint64_t rows = ops_named(aligned.program, "b1_moe/fwd/experts/down")[0]->matmul.m;
  const std::uint64_t computed = rows + (7 * 64 + 15) / 16;
  BOOST_TEST(ops_named(tiled.program, "b1_moe/fwd/experts/down")[0]->matmul.m == computed);
  BOOST_TEST(ops_named(tiled.program, "b1_moe/fwd/experts/gate_up")[0]->matmul.m == computed);
  BOOST_TEST(ops_named(tiled.program, "b1_moe/bwd/experts/down/dX")[0]->matmul.m == computed);
  BOOST_TEST(ops_named(tiled.program, "b1_moe/bwd/experts/down/dW")[0]->matmul.k == computed);
  BOOST_TEST(ops_named(tiled.program, "b1_moe/fwd/shared/down")[0]->matmul.m ==
             ops_named(aligned.program, "b1_moe/fwd/shared/down")[0]->matmul.m);  // not grouped
  BOOST_TEST(tiled.model_flops_per_core == aligned.model_flops_per_core, boost::test_tools::tolerance(1e-12));
  const LoweredStep split = lowered({"workload.model.layers[14].group_tile_rows=64", "workload.training.mesh.expert=x"});
  const LoweredStep split_aligned = lowered({"workload.training.mesh.expert=x"});
  BOOST_TEST(ops_named(split.program, "b1_moe/fwd/experts/down")[0]->matmul.m ==
             ops_named(split_aligned.program, "b1_moe/fwd/experts/down")[0]->matmul.m + 16);
}

// MaxText's dense_matmul path (capacity factor, no megablox) dispatches and combines by
// matmuls with one-hot masks of [seq, experts x capacity] per sequence, capacity
// ceil(seq x top_k / experts) x capacity_factor: MXU work, no model FLOPs.
BOOST_AUTO_TEST_CASE(einsum_dispatch_multiplies_by_masks_per_sequence) {
  const LoweredStep gather = lowered({"workload.model.layers[14].capacity_factor=1.25"});
  const LoweredStep einsum = lowered({"workload.model.layers[14].capacity_factor=1.25", "workload.model.layers[14].dispatch=einsum"});
  const std::uint64_t capacity = (kSeq * kTopK / kExperts) * 5 / 4, slots = kExperts * capacity;
  const auto dispatch = ops_named(einsum.program, "b1_moe/fwd/dispatch");
  BOOST_REQUIRE(dispatch.size() == 2u);  // the masks' pass, then the product
  const Op& product = *dispatch[1];
  BOOST_TEST((product.kind == OpKind::Matmul));
  BOOST_TEST(product.matmul.batch == einsum.per_core_batch);  // one product per sequence
  BOOST_TEST(product.matmul.m == slots);
  BOOST_TEST(product.matmul.k == kSeq);
  BOOST_TEST(product.matmul.n == kWidth);
  BOOST_TEST(product.model_flops == 0.0);
  const auto combine = ops_named(einsum.program, "b1_moe/fwd/combine");
  BOOST_REQUIRE(combine.size() == 1u);
  BOOST_TEST(combine[0]->matmul.m == kSeq);
  BOOST_TEST(combine[0]->matmul.k == slots);
  // Backward: the combine's two gradients and the dispatch's.
  BOOST_TEST(ops_named(einsum.program, "b1_moe/bwd/combine/").size() == 2u);
  BOOST_TEST(ops_named(einsum.program, "b1_moe/bwd/dispatch/dX").size() == 1u);
  // The same experts' rows, the same model FLOPs; more MXU work.
  BOOST_TEST(ops_named(einsum.program, "b1_moe/fwd/experts/down")[0]->matmul.m ==
             ops_named(gather.program, "b1_moe/fwd/experts/down")[0]->matmul.m);
  BOOST_TEST(einsum.model_flops_per_core == gather.model_flops_per_core, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(folded_and_full_runs_of_an_expert_parallel_step_are_byte_identical) {
  const json folded = folded_run_matching_full(
      kSmall, "--hw tpu_v5p --topology 4x4x4 --trace none --set workload.training.mesh.expert=x --set workload.training.fsdp=true");
  BOOST_TEST(folded["collectives_per_step"]["expert"]["count"] == 4);
  // A mixture of experts is trusted as far as the public mixtures of experts go (Llama 4 Scout's
  // point on v5p), not as far as dense transformers do.
  BOOST_TEST(folded["validation"]["kind"] == "tpu_v5p mixture-of-experts training, FSDP");
  BOOST_TEST(folded["validation"]["text"].get<std::string>().find("of tpu_v5p mixture-of-experts training") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(expert_layouts_that_cannot_be_are_refused_naming_the_key) {
  TempDir dir;
  const std::string run = "run '" + kSmall + "' --hw tpu_v5p --topology 4x4x4 --trace none -o '" + dir.path("out") + "' ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--set workload.training.mesh.expert=xy", "8 experts do not split over an expert axis of 16 chips"},
      {"--set workload.training.mesh.model=x", "a moe layer is not split over a model axis"},
      {"--set workload.training.mesh.model=x --set workload.training.mesh.expert=x", "workload.training.mesh.expert: \"x\": expected data axes"},
      {"--set workload.training.fsdp=true --set workload.training.mesh.expert=x --set workload.training.mesh.fsdp=xy",
       "expected data axes outside training.mesh.expert"},
      {"--set workload.training.mesh.expert=x --set workload.training.weight_update_sharding=true", "use training.fsdp instead"},
      {"--set 'workload.model.layers[14].capacity_factor=0.5'", "workload.model.layers[14].capacity_factor"},
      {"--set 'workload.model.layers[14].top_k=9'", "workload.model.layers[14].top_k"},
      {"--set 'workload.model.layers[14].dispatch=einsum'", "workload.model.layers[14].dispatch: einsum dispatch multiplies by masks"},
      {"--set 'workload.model.layers[14].capacity_factor=1.25' --set 'workload.model.layers[14].dispatch=einsum' "
       "--set 'workload.model.layers[14].group_tile_rows=512'",
       "workload.model.layers[14].group_tile_rows: applies to the grouped matmul of gather dispatch"},
  };
  for (const auto& [args, expected] : cases) {
    BOOST_TEST_CONTEXT(args) {
      const CommandResult r = run_tpusim(run + args);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(r.err.find(expected) != std::string::npos, r.err);
    }
  }
}
