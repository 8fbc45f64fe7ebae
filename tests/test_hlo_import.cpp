// HLO import (issue 42): the text XLA prints of a compiled step, read and lowered into the program
// every device runs: FLOPs and per-device collective bytes against their closed forms and against
// the same model written as a workload, loops, replica groups, and damaged files.
#define BOOST_TEST_MODULE hlo_import
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "run_helpers.hpp"
#include "sim/config.hpp"
#include "workloads/import/hlo_program.hpp"
#include "workloads/import/hlo_text.hpp"
#include "workloads/lower.hpp"

using namespace tpusim;
using namespace tpusim::test;

namespace {

std::string hlo_fixture(const std::string& name) { return import_fixture("hlo/" + name); }

HloStep lower_file(const std::string& file, const std::vector<std::uint32_t>& torus) {
  return lower_hlo_module(parse_hlo_module(read_file(file), file), file, torus);
}

std::string lowering_error(const std::string& text, const std::vector<std::uint32_t>& torus = {4}) {
  try {
    lower_hlo_module(parse_hlo_module(text, "m.hlo"), "m.hlo", torus);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A module of four devices around `body` (instructions of the entry, which takes x: f32[64,32]).
std::string module(const std::string& body, const std::string& extra = "") {
  return "HloModule m, num_partitions=4\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n"
         "  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n" + extra +
         "ENTRY %main (x: f32[64,32]) -> f32[64,32] {\n  %x = f32[64,32]{1,0} parameter(0)\n" + body + "}\n";
}

}  // namespace

// One data-parallel SGD step of the MNIST MLP on 4 devices of 32 samples: forward and weight
// gradients of both layers and the second layer's input gradient (the first has none: its input
// is the data), and one all-reduce of every gradient (101,770 f32 parameters).
BOOST_AUTO_TEST_CASE(a_data_parallel_mlp_step_has_the_closed_form_flops_and_gradient_bytes) {
  const HloStep step = lower_file(hlo_fixture("mlp_dp_train_step.hlo"), {2, 2});
  const double layer1 = 2.0 * 32 * 784 * 128, layer2 = 2.0 * 32 * 128 * 10;
  BOOST_TEST(step.flops == 2 * layer1 + 3 * layer2);
  BOOST_TEST(step.devices == 4u);
  BOOST_TEST_REQUIRE(step.collectives.count("all-reduce") == 1u);
  BOOST_TEST(step.collectives.at("all-reduce").count == 1u);
  BOOST_TEST(step.collectives.at("all-reduce").bytes == 4u * (784 * 128 + 128 + 128 * 10 + 10));
  const auto collective = std::find_if(step.program.ops.begin(), step.program.ops.end(), [](const Op& op) { return op.kind == OpKind::Collective; });
  BOOST_TEST_REQUIRE((collective != step.program.ops.end()));
  BOOST_TEST((collective->collective.group_axes & 0x3u) == 0x3u);  // the whole 2x2 slice
  // Backward ops are told apart by JAX's transpose(jvp(...)) in their metadata.
  BOOST_TEST(std::count_if(step.program.ops.begin(), step.program.ops.end(), [](const Op& op) { return op.phase == Phase::Backward; }) >= 5);

  // The same model as tpusim's workload (workloads/examples/mlp_mnist.json at 32 per replica):
  // the same FLOPs per core and the same gradient bytes all-reduced.
  TempDir dir;
  ConfigRequest request;
  request.workload_path = example_workload();
  request.hw = "tpu_v5e";
  request.hw_given = true;
  request.topology = "2x2";
  request.sets = {"workload.training.global_batch=0", "workload.training.per_replica_batch=32", "workload.training.optimizer.name=sgd"};
  const Config config = load_config(request);
  const LoweredStep lowered = lower_training_step(config.workload, config.hw);
  BOOST_TEST(lowered.model_flops_per_core == step.flops);
  std::uint64_t gradient_bytes = 0;
  for (const Op& op : lowered.program.ops)
    if (op.kind == OpKind::Collective && op.collective.kind == CollectiveKind::AllReduce) gradient_bytes += op.collective.bytes;
  BOOST_TEST(gradient_bytes == step.collectives.at("all-reduce").bytes);
}

// The forward pass of a Megatron tensor-parallel block on 4 devices (2 of 8 heads, 512 of 2048
// hidden features each): the QKV, output and MLP products and attention's two batched matmuls,
// and one all-reduce of the [8, 128, 512] bf16 activations after each row-parallel product; the
// iota form of replica_groups ([1,4]<=[4]) reads as the explicit {{0,1,2,3}}.
BOOST_AUTO_TEST_CASE(a_tensor_parallel_block_has_the_closed_form_flops_and_activation_all_reduces) {
  const HloStep step = lower_file(hlo_fixture("transformer_tp_block.hlo"), {2, 2, 1});
  const double tokens = 8 * 128, d = 512;
  const double qkv = 2 * tokens * d * 384, scores = 2.0 * 8 * 2 * 128 * 64 * 128, context = scores, out = 2 * tokens * 128 * d;
  const double mlp = 2 * (2 * tokens * d * 512);
  BOOST_TEST(step.flops == qkv + scores + context + out + mlp);
  BOOST_TEST(step.collectives.at("all-reduce").count == 2u);
  BOOST_TEST(step.collectives.at("all-reduce").bytes == 2u * 8 * 128 * 512 * 2);
  std::vector<std::uint32_t> axes;
  for (const Op& op : step.program.ops)
    if (op.kind == OpKind::Collective) {
      axes.push_back(op.collective.group_axes & 0x3u);
      BOOST_TEST((op.collective.dtype == DType::BF16));
    }
  BOOST_TEST(axes == (std::vector<std::uint32_t>{0x3u, 0x3u}), boost::test_tools::per_element());
  // The MLP's first product is fused with its GELU: one matmul, the GELU in its epilogue.
  const auto up = std::find_if(step.program.ops.begin(), step.program.ops.end(), [](const Op& op) { return op.name == "mlp.up"; });
  BOOST_TEST_REQUIRE((up != step.program.ops.end()));
  BOOST_TEST((up->kind == OpKind::Matmul));
  BOOST_TEST(up->matmul.m == 1024u);
  BOOST_TEST(up->matmul.epilogue_vpu_ops_per_element > 0);
  const auto scores_op = std::find_if(step.program.ops.begin(), step.program.ops.end(), [](const Op& op) { return op.name == "scores"; });
  BOOST_TEST_REQUIRE((scores_op != step.program.ops.end()));
  BOOST_TEST(scores_op->matmul.batch == 16u);
  BOOST_TEST(scores_op->matmul.k == 64u);
}

// A scan runs its body once per trip: from the compiler's known_trip_count, or from the bound
// its condition compares the counter with.
BOOST_AUTO_TEST_CASE(while_loops_unroll_by_their_trip_counts) {
  const std::string body = "%body (p: (s32[], f32[64,32])) -> (s32[], f32[64,32]) {\n"
                           "  %p = (s32[], f32[64,32]{1,0}) parameter(0)\n"
                           "  %i = s32[] get-tuple-element((s32[], f32[64,32]{1,0}) %p), index=0\n"
                           "  %h = f32[64,32]{1,0} get-tuple-element((s32[], f32[64,32]{1,0}) %p), index=1\n"
                           "  %w = f32[32,32]{1,0} constant({...})\n"
                           "  %y = f32[64,32]{1,0} dot(f32[64,32]{1,0} %h, f32[32,32]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
                           "  %one = s32[] constant(1)\n"
                           "  %next = s32[] add(s32[] %i, s32[] %one)\n"
                           "  ROOT %t = (s32[], f32[64,32]{1,0}) tuple(s32[] %next, f32[64,32]{1,0} %y)\n}\n\n"
                           "%cond (q: (s32[], f32[64,32])) -> pred[] {\n"
                           "  %q = (s32[], f32[64,32]{1,0}) parameter(0)\n"
                           "  %j = s32[] get-tuple-element((s32[], f32[64,32]{1,0}) %q), index=0\n"
                           "  %n = s32[] constant(7)\n"
                           "  ROOT %lt = pred[] compare(s32[] %j, s32[] %n), direction=LT\n}\n\n";
  const std::string loop = "  %zero = s32[] constant(0)\n"
                           "  %init = (s32[], f32[64,32]{1,0}) tuple(s32[] %zero, f32[64,32]{1,0} %x)\n"
                           "  %loop = (s32[], f32[64,32]{1,0}) while((s32[], f32[64,32]{1,0}) %init), condition=%cond, body=%body";
  const std::string root = "\n  ROOT %r = f32[64,32]{1,0} get-tuple-element((s32[], f32[64,32]{1,0}) %loop), index=1\n";
  const HloStep by_bound = lower_hlo_module(parse_hlo_module(module(loop + root, body), "m.hlo"), "m.hlo", {4});
  BOOST_TEST(by_bound.flops == 7 * 2.0 * 64 * 32 * 32);
  BOOST_TEST(by_bound.program.ops.size() == 7u);  // the counter's scalar add is free
  for (std::size_t i = 1; i < by_bound.program.ops.size(); ++i)  // each trip waits for the one before
    BOOST_TEST(by_bound.program.ops[i].deps == std::vector<std::uint32_t>{static_cast<std::uint32_t>(i - 1)}, boost::test_tools::per_element());
  const HloStep known = lower_hlo_module(
      parse_hlo_module(module(loop + ", backend_config={\"known_trip_count\":{\"n\":\"12\"}}" + root, body), "m.hlo"), "m.hlo", {4});
  BOOST_TEST(known.flops == 12 * 2.0 * 64 * 32 * 32);
}

// Replica groups are mapped onto the torus axes they span (devices numbered x fastest); groups
// that are not whole axes are refused, naming the instruction.
BOOST_AUTO_TEST_CASE(replica_groups_map_onto_torus_axes) {
  auto axes_of = [](const std::string& groups) {
    const std::string text = "HloModule m, num_partitions=8\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                             "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
                             "ENTRY %main (x: f32[1024]) -> f32[1024] {\n  %x = f32[1024]{0} parameter(0)\n"
                             "  ROOT %ar = f32[1024]{0} all-reduce(f32[1024]{0} %x), channel_id=1, replica_groups=" + groups +
                             ", use_global_device_ids=true, to_apply=%add\n}\n";
    const HloStep step = lower_hlo_module(parse_hlo_module(text, "m.hlo"), "m.hlo", {4, 2});
    BOOST_TEST_REQUIRE(step.program.ops.size() == 1u);
    return step.program.ops[0].collective.group_axes;
  };
  BOOST_TEST(axes_of("{{0,1,2,3},{4,5,6,7}}") == 0x1u);
  BOOST_TEST(axes_of("[2,4]<=[8]") == 0x1u);
  BOOST_TEST(axes_of("{{0,4},{1,5},{2,6},{3,7}}") == 0x2u);
  BOOST_TEST(axes_of("[4,2]<=[2,4]T(1,0)") == 0x2u);
  BOOST_TEST(axes_of("{}") == 0x7u);
  BOOST_TEST(axes_of("{{0,1,2,3,4,5,6,7}}") == 0x3u);
  const std::string odd = "HloModule m, num_partitions=8\n\n%add (a: f32[], b: f32[]) -> f32[] {\n  %a = f32[] parameter(0)\n"
                          "  %b = f32[] parameter(1)\n  ROOT %s = f32[] add(f32[] %a, f32[] %b)\n}\n\n"
                          "ENTRY %main (x: f32[1024]) -> f32[1024] {\n  %x = f32[1024]{0} parameter(0)\n"
                          "  ROOT %ar = f32[1024]{0} all-reduce(f32[1024]{0} %x), channel_id=1, replica_groups={{0,2},{1,3},{4,6},{5,7}}, "
                          "to_apply=%add\n}\n";
  BOOST_TEST(contains(lowering_error(odd, {4, 2}), "m.hlo:11: %ar: a replica group of 2 devices that is not whole axes of the 4x2 torus"));
}

// Newer XLA prints operands without their shapes and names without %; tiled TPU layouts in braces.
BOOST_AUTO_TEST_CASE(both_printings_of_operands_and_tiled_layouts_read_alike) {
  const std::string old_style = module("  %w = f32[32,16]{1,0} constant({...})\n"
                                       "  ROOT %y = f32[64,16]{1,0:T(8,128)} dot(f32[64,32]{1,0:T(8,128)} %x, f32[32,16]{1,0} %w), "
                                       "lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name=\"a, b\" source_line=3}\n");
  std::string new_style = old_style;
  for (const char* typed : {"f32[64,32]{1,0:T(8,128)} %x", "f32[32,16]{1,0} %w"}) {
    const std::string t = typed;
    new_style.replace(new_style.find(t), t.size(), t.substr(t.find('%') + 1));
  }
  BOOST_TEST_REQUIRE(new_style != old_style);
  const HloStep a = lower_hlo_module(parse_hlo_module(old_style, "a.hlo"), "a.hlo", {4});
  const HloStep b = lower_hlo_module(parse_hlo_module(new_style, "b.hlo"), "b.hlo", {4});
  BOOST_TEST(a.flops == 2.0 * 64 * 32 * 16);
  BOOST_TEST(b.flops == a.flops);
}

// An unoptimized module (no is_scheduled=true) holds each elementwise op alone; XLA fuses such a
// chain into one pass, so tpusim does: x * 2 + 1, exp, then a row sum read x once and write the sums.
// The same module as XLA scheduled it is taken as it is, one pass per instruction.
BOOST_AUTO_TEST_CASE(an_unoptimized_modules_elementwise_chains_fuse_into_their_reader) {
  const std::string body = "  %two = f32[] constant(2)\n  %two.b = f32[64,32]{1,0} broadcast(f32[] %two), dimensions={}\n"
                           "  %scaled = f32[64,32]{1,0} multiply(f32[64,32]{1,0} %x, f32[64,32]{1,0} %two.b)\n"
                           "  %one = f32[] constant(1)\n  %one.b = f32[64,32]{1,0} broadcast(f32[] %one), dimensions={}\n"
                           "  %shifted = f32[64,32]{1,0} add(f32[64,32]{1,0} %scaled, f32[64,32]{1,0} %one.b)\n"
                           "  %e = f32[64,32]{1,0} exponential(f32[64,32]{1,0} %shifted)\n"
                           "  %zero = f32[] constant(0)\n"
                           "  ROOT %sums = f32[64]{0} reduce(f32[64,32]{1,0} %e, f32[] %zero), dimensions={1}, to_apply=%add\n";
  std::string text = module(body);
  text.replace(text.find("f32[64,32] {"), std::string("f32[64,32] {").size(), "f32[64] {");
  const HloStep unoptimized = lower_hlo_module(parse_hlo_module(text, "m.hlo"), "m.hlo", {4});
  BOOST_TEST_REQUIRE(unoptimized.program.ops.size() == 1u);
  const VectorWork& pass = unoptimized.program.ops[0].vector;
  BOOST_TEST(pass.hbm_read_bytes == 64u * 32 * 4 + 3 * 4);  // x, and three scalars: 2, 1 and the sum's initial 0
  BOOST_TEST(pass.hbm_write_bytes == 64u * 4);
  BOOST_TEST(pass.vpu_ops_per_element == 4);  // multiply, add, exponential, the sum
  std::string scheduled = text;
  scheduled.replace(scheduled.find("num_partitions=4"), 16, "is_scheduled=true, num_partitions=4");
  const HloStep as_scheduled = lower_hlo_module(parse_hlo_module(scheduled, "m.hlo"), "m.hlo", {4});
  BOOST_TEST(as_scheduled.program.ops.size() == 6u);  // two broadcasts, multiply, add, exponential, reduce
}

// A public dump of a real model: TensorFlow's GraphSAGE as XLA's CPU benchmarks keep it
// (openxla/xla, Apache-2.0; tests/data/import/README.md): unoptimized, one device, its weights
// elided constants. Its seven dots, read off their shapes: [1,50]x[50,128] twice, [10,50]x[50,128]
// twice, [1,256]x[256,128] twice and [1,256]x[256,121].
BOOST_AUTO_TEST_CASE(a_public_dump_of_a_real_model_imports_and_runs) {
  const HloStep step = lower_file(hlo_fixture("graphsage_tf.hlo"), {1});
  BOOST_TEST(step.devices == 1u);
  BOOST_TEST(step.flops == 2.0 * (2 * 50 * 128 + 2 * 10 * 50 * 128 + 2 * 256 * 128 + 256 * 121));
  BOOST_TEST(std::count_if(step.program.ops.begin(), step.program.ops.end(), [](const Op& op) { return op.kind == OpKind::Matmul; }) == 7);
  BOOST_TEST(step.collectives.empty());
  const CommandResult r = run_tpusim("hlo '" + hlo_fixture("graphsage_tf.hlo") + "' --hw tpu_v5e --topology 1x1 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(nlohmann::json::parse(r.out)["device_time_s"].get<double>() > 0);
}

// Bad HLO: exit 2, one line naming the line and the instruction, nothing written.
BOOST_AUTO_TEST_CASE(bad_hlo_is_refused_in_one_line_naming_the_instruction) {
  const std::string good = read_file(hlo_fixture("mlp_dp_train_step.hlo"));
  auto replaced = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const auto at = t.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    return t.replace(at, from.size(), to);
  };
  struct Case {
    std::string what, text, expected;
  };
  const std::vector<Case> cases = {
      {"truncated", good.substr(0, good.size() * 8 / 10), "mlp_dp_train_step.hlo:106: expected '(' after the opcode of %all-reduce.21"},
      {"cut after a computation", good.substr(0, good.find("ENTRY")), "no ENTRY computation"},
      {"an unknown opcode", replaced("%dot.12 = f32[32,10]{1,0} dot(", "%dot.12 = f32[32,10]{1,0} frobnicate("),
       ":95: %dot.12: unknown opcode \"frobnicate\""},
      {"contracted sizes that differ", replaced("rhs_contracting_dims={0}, metadata={op_name=\"jit(train_step)/jit(main)/jvp(mlp)/dense_1",
                                                "rhs_contracting_dims={1}, metadata={op_name=\"jit(train_step)/jit(main)/jvp(mlp)/dense_1"),
       ":95: %dot.12: contracts 128 (dimension 1 of f32[32,128]) with 10 (dimension 1 of f32[128,10])"},
      {"an elementwise op that broadcasts", module("  %y = f32[32]{0} parameter(1)\n  ROOT %z = f32[64,32]{1,0} add(f32[64,32]{1,0} %x, f32[32]{0} %y)\n"),
       "%z: operand 1 (f32[32]) does not have the result's dimensions (f32[64,32])"},
      {"an undefined operand", replaced("dot(f32[32,784]{1,0} %Arg_4.5, f32[784,128]{1,0} %Arg_0.1)", "dot(f32[32,784]{1,0} %nowhere, f32[784,128]{1,0} %Arg_0.1)"),
       ":91: %dot.10: operand %nowhere is not an instruction before it in main.50"},
      {"devices the slice lacks", replaced("num_partitions=4", "num_partitions=8"), "the module runs on 8 devices"},
      {"not HLO", "{\"name\": \"a workload\"}\n", "mlp_dp_train_step.hlo:1: not an HLO module (expected its HloModule line first)"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      TempDir dir;
      const std::string file = dir.write("mlp_dp_train_step.hlo", c.text);
      const CommandResult r = run_tpusim("hlo '" + file + "' --hw tpu_v5e --topology 2x2");
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.expected), r.err);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      BOOST_TEST(r.out.empty());
      BOOST_TEST(std::distance(std::filesystem::directory_iterator(dir.path("")), std::filesystem::directory_iterator()) == 1);
    }
  }
}

// `tpusim import` writes workloads of layers; given an HLO module it says which command runs it.
BOOST_AUTO_TEST_CASE(import_points_an_hlo_module_to_the_hlo_command) {
  TempDir dir;
  const CommandResult r = run_tpusim("import '" + hlo_fixture("mlp_dp_train_step.hlo") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "an XLA HLO module is simulated as it is, each device's program as XLA scheduled it: tpusim hlo "), r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  BOOST_TEST(!std::filesystem::exists(dir.path("w.json")));
}

// The command simulates the module on the slice: the device time and the FLOPs it printed.
BOOST_AUTO_TEST_CASE(the_hlo_command_simulates_every_device) {
  const CommandResult r = run_tpusim("hlo '" + hlo_fixture("transformer_tp_block.hlo") + "' --hw tpu_v5p --topology 2x2x1 --json");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["devices"] == 4);
  BOOST_TEST(j["ops"]["collective"] == 2);
  BOOST_TEST(j["device_time_s"].get<double>() > 0);
  // No faster than the MXUs could do its FLOPs, nor than its two all-reduces alone.
  BOOST_TEST(j["device_time_s"].get<double>() > j["flops_per_device"].get<double>() / 459e12);
  BOOST_TEST(j["mfu"].get<double>() < 1);

  // With -o: the same summary and a trace of XLA's instructions on the simulated cores, which
  // trace-check accepts; an existing directory is replaced only with --force.
  TempDir dir;
  const std::string out = dir.path("block");
  const std::string command = "hlo '" + hlo_fixture("transformer_tp_block.hlo") + "' --hw tpu_v5p --topology 2x2x1 -o '" + out + "'";
  const CommandResult written = run_tpusim(command);
  BOOST_TEST_REQUIRE(written.exit_code == 0, written.err);
  const nlohmann::json summary = nlohmann::json::parse(read_file(out + "/summary.json"));
  BOOST_TEST(summary["device_time_s"] == j["device_time_s"]);
  const std::string trace = read_file(out + "/trace.json");
  for (const char* op : {"\"qkv\"", "\"scores\"", "\"mlp.up\"", "\"attn\""}) BOOST_TEST(contains(trace, op), op);
  BOOST_TEST(run_tpusim("trace-check '" + out + "/trace.json'").exit_code == 0);
  const CommandResult again = run_tpusim(command);
  BOOST_TEST(again.exit_code == 2);
  BOOST_TEST(contains(again.err, "the directory exists; pass --force to replace it"), again.err);
  BOOST_TEST(run_tpusim(command + " --force").exit_code == 0);
}
