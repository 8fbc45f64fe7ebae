// Keras model JSON import (issue 16): the committed tfjs fixtures against what the framework and
// torch's make_fx oracle say of them (tests/data/import/), `tpusim import`, `model.keras_json`
// in a workload, and bad files.
#define BOOST_TEST_MODULE keras_import
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "run_helpers.hpp"
#include "workloads/import/keras_json.hpp"
#include "workloads/layer_kind.hpp"
#include "workloads/lower.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

// A workload naming the Keras file, on one v5e core so the per-core batch is the replica's;
// `like`: a workload whose training and input settings it takes.
Config keras_workload(const TempDir& dir, const std::string& keras_file, std::uint64_t batch, const std::string& like = "") {
  json w = {{"name", "imported"}, {"model", {{"keras_json", keras_file}}}, {"training", {{"per_replica_batch", batch}, {"steps", 1}}}};
  if (!like.empty()) {
    const json other = read_json(like);
    w["training"] = other["training"];
    w["training"]["steps"] = 1;
    w["input_pipeline"] = other["input_pipeline"];
    w["model"]["input_dtype"] = other["model"]["input_dtype"];
  }
  ConfigRequest request;
  request.workload_path = dir.write("workload.json", w.dump());
  request.hw = "tpu_v5e";
  request.hw_given = true;
  request.topology = "1x1";
  return load_config(request);
}

std::size_t count_ops(const Program& p, OpKind kind, const std::string& part) {
  return static_cast<std::size_t>(std::count_if(p.ops.begin(), p.ops.end(), [&](const Op& op) {
    return op.kind == kind && op.name.find(part) != std::string::npos;
  }));
}

}  // namespace

BOOST_AUTO_TEST_CASE(keras_fixtures_have_the_frameworks_parameter_counts_and_shapes) {
  const json summary = read_json(import_fixture("keras_summary.json"));
  BOOST_TEST_REQUIRE(summary["models"].size() == 9u);
  std::size_t layers_checked = 0;
  for (const auto& [name, m] : summary["models"].items()) {
    BOOST_TEST_CONTEXT(name) {
      TempDir dir;
      const Config c = keras_workload(dir, import_fixture(m["file"].get<std::string>()), 2);
      const ModelGraph g = analyze_model(c.workload);
      BOOST_TEST(g.params() == m["params"].get<std::uint64_t>());
      BOOST_TEST(g.trainable() == m["trainable_params"].get<std::uint64_t>());
      std::vector<std::uint64_t> input(m["input_shape"].begin() + 1, m["input_shape"].end());
      BOOST_TEST(g.input == input, boost::test_tools::per_element());
      std::vector<std::uint64_t> output(m["output_shape"].begin() + 1, m["output_shape"].end());
      BOOST_TEST(g.nodes.back().out == output, boost::test_tools::per_element());
      // 1D, non-square, dilated and causal windows: every layer's output shape as the framework
      // gives it (make_keras.js records them).
      if (!m.contains("layer_output_shapes")) continue;
      for (const Node& node : g.nodes) {
        const json& framework = m["layer_output_shapes"].at(node.spec.name);
        const std::vector<std::uint64_t> shape(framework.begin() + 1, framework.end());
        BOOST_TEST(node.out == shape, node.spec.name << " " << framework.dump());
        ++layers_checked;
      }
    }
  }
  BOOST_TEST(layers_checked == 8u + 11u + 8u + 6u + 8u);  // text_cnn, timeseries_fcn, dilated_causal, factorized, crnn
}

// The oracle traced a torch model rebuilt from each JSON (make_oracle.py): its training step's
// convolution and matmul FLOPs, and how many input- and weight-gradient products it has.
BOOST_AUTO_TEST_CASE(training_step_flops_and_backward_products_match_the_make_fx_oracle) {
  const json oracle = read_json(import_fixture("oracle.json"))["models"];
  for (const char* key : {"keras_mlp_mnist", "keras_mlp_mnist@1024", "keras_small_resnet", "keras_resnet50", "keras_transfer"}) {
    BOOST_TEST_CONTEXT(key) {
      const json& o = oracle.at(key);
      TempDir dir;
      const Config c = keras_workload(dir, import_fixture(o["fixture"].get<std::string>()), o["batch"].get<std::uint64_t>());
      const LoweredStep step = lower_training_step(c.workload, c.hw);
      BOOST_TEST_REQUIRE(step.per_core_batch == o["batch"].get<std::uint64_t>());
      const double expected = o["training_step_flops"].get<double>();
      // Two independent figures: the layers' textbook count and the lowered program's.
      BOOST_TEST(step.model.training_flops_per_sample() * static_cast<double>(step.per_core_batch) == expected,
                 boost::test_tools::tolerance(0.01));
      BOOST_TEST(step.model_flops_per_core == expected, boost::test_tools::tolerance(0.01));
      const json& bwd = o["backward"];
      std::size_t conv_dx = 0, conv_dw = 0, dense_dx = 0, dense_dw = 0;
      for (const Node& node : step.model.nodes) {
        const bool conv = node.spec.type == "conv2d", dense = node.spec.type == "dense";
        if (!conv && !dense) continue;
        const std::size_t dx = count_ops(step.program, OpKind::Matmul, node.spec.name + "/bwd/dX");
        const std::size_t dw = count_ops(step.program, OpKind::Matmul, node.spec.name + "/bwd/dW");
        (conv ? conv_dx : dense_dx) += dx;
        (conv ? conv_dw : dense_dw) += dw;
      }
      BOOST_TEST(conv_dx == bwd["conv_input_grads"].get<std::size_t>());
      BOOST_TEST(conv_dw == bwd["conv_weight_grads"].get<std::size_t>());
      BOOST_TEST(dense_dx == bwd["matmul_input_grads"].get<std::size_t>());
      BOOST_TEST(dense_dw == bwd["matmul_weight_grads"].get<std::size_t>());
    }
  }
}

// keras_resnet50.json is keras.applications' ResNet50 as Keras lists it; the zoo's resnet50.json
// is written (make_zoo.py) from the same code in the same order: the same step, op for op.
BOOST_AUTO_TEST_CASE(keras_resnet50_is_the_zoo_resnet50) {
  TempDir dir;
  const Config keras = keras_workload(dir, import_fixture("keras_resnet50.json"), 128, source_path("workloads/examples/resnet50.json"));
  ConfigRequest request;
  request.workload_path = source_path("workloads/examples/resnet50.json");
  request.hw = "tpu_v5e";
  request.hw_given = true;
  request.topology = "1x1";
  request.sets = {"workload.training.steps=1"};
  const Config zoo = load_config(request);
  const ModelGraph a = analyze_model(keras.workload), b = analyze_model(zoo.workload);
  BOOST_TEST_REQUIRE(a.nodes.size() == b.nodes.size());
  std::map<std::string, const Node*> zoo_nodes;
  for (const Node& node : b.nodes) zoo_nodes[node.spec.name] = &node;
  for (const Node& node : a.nodes) {
    BOOST_TEST_CONTEXT(node.spec.name) {
      BOOST_TEST_REQUIRE(zoo_nodes.count(node.spec.name) == 1u);
      const Node& twin = *zoo_nodes.at(node.spec.name);
      BOOST_TEST(node.spec.type == twin.spec.type);
      BOOST_TEST(node.out == twin.out, boost::test_tools::per_element());
      BOOST_TEST(node.params == twin.params);
      BOOST_TEST(node.forward_flops == twin.forward_flops);
    }
  }
  const LoweredStep ka = lower_training_step(keras.workload, keras.hw), zb = lower_training_step(zoo.workload, zoo.hw);
  BOOST_TEST(ka.model_flops_per_core == zb.model_flops_per_core);
  BOOST_TEST(ka.memory.total() == zb.memory.total());
  BOOST_TEST_REQUIRE(ka.program.ops.size() == zb.program.ops.size());
  for (std::size_t i = 0; i < ka.program.ops.size(); ++i) BOOST_TEST(ka.program.ops[i].name == zb.program.ops[i].name);
  // And simulated: the same step time to the picosecond.
  const std::string args = "--hw tpu_v5e --topology 2x2 --trace none --set workload.training.steps=2";
  const json keras_doc = {{"name", "keras_resnet50"},
                          {"model", {{"keras_json", import_fixture("keras_resnet50.json")}, {"input_dtype", "uint8"}}},
                          {"training", read_json(source_path("workloads/examples/resnet50.json"))["training"]}};
  const auto keras_run = run_example(args, dir.write("keras_resnet50.json", keras_doc.dump()));
  const auto zoo_run = run_example(args, source_path("workloads/examples/resnet50.json"));
  BOOST_TEST(keras_run->summary["step_time_s"].get<double>() == zoo_run->summary["step_time_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(tpusim_import_writes_a_workload_that_runs) {
  TempDir dir;
  const CommandResult r = run_tpusim("import '" + import_fixture("keras_small_resnet.json") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "21 layers, 20426 parameters (20138 trainable), input [32, 32, 3] float32"));
  const json w = read_json(dir.path("w.json"));
  BOOST_TEST(w["model"]["imported_from"] == import_fixture("keras_small_resnet.json"));
  BOOST_TEST(w["model"]["layers"].size() == 21u);
  // Trace op names are the file's layer names.
  const auto run = run_example("--trace ops", dir.path("w.json"));
  BOOST_TEST(contains(read_file(run->out() + "/trace.json"), "\"block2_1_conv/fwd/conv+bias\""));
  // An existing file is kept unless --force, and --force replaces only a file import wrote.
  BOOST_TEST(run_tpusim("import '" + import_fixture("keras_small_resnet.json") + "' -o '" + dir.path("w.json") + "'").exit_code == 2);
  BOOST_TEST(run_tpusim("import '" + import_fixture("keras_mlp_mnist.json") + "' -o '" + dir.path("w.json") + "' --force").exit_code == 0);
  BOOST_TEST(read_json(dir.path("w.json"))["model"]["layers"].size() == 3u);
  const std::string other = dir.write("other.json", "{\"name\": \"mine\"}");
  const CommandResult refused = run_tpusim("import '" + import_fixture("keras_mlp_mnist.json") + "' -o '" + other + "' --force");
  BOOST_TEST(refused.exit_code == 2);
  BOOST_TEST(contains(refused.err, "is not a workload tpusim import wrote"));
  BOOST_TEST(read_file(other) == "{\"name\": \"mine\"}");
}

// keras_transfer.json nests a backbone whose stem and first block are frozen (trainable false)
// under a new head: their weights take no gradient, no all-reduce and no optimizer state, and the
// counts say so apart. (The FLOPs and the backward products are the oracle's, above.)
BOOST_AUTO_TEST_CASE(frozen_layers_take_no_gradient_all_reduce_or_optimizer_state) {
  TempDir dir;
  const json keras = read_json(import_fixture("keras_transfer.json"));
  json unfrozen = keras;
  for (json& l : unfrozen["config"]["layers"][0]["config"]["layers"]) l["config"].erase("trainable");
  const std::string unfrozen_file = dir.write("unfrozen.json", unfrozen.dump());
  auto lower = [&](const std::string& file) {
    json w = {{"name", "transfer"}, {"model", {{"keras_json", file}}}, {"training", {{"per_replica_batch", 4}, {"steps", 1}}}};
    ConfigRequest request;
    request.workload_path = dir.write("workload.json", w.dump());
    request.hw = "tpu_v5e";
    request.hw_given = true;
    request.topology = "2x2";
    const Config c = load_config(request);
    return lower_training_step(c.workload, c.hw);
  };
  const LoweredStep frozen = lower(import_fixture("keras_transfer.json")), all = lower(unfrozen_file);
  BOOST_TEST(frozen.model.trainable() == 14826u);  // what tfjs counts (keras_summary.json)
  BOOST_TEST(frozen.model.frozen() == 5424u);
  BOOST_TEST(all.model.frozen() == 0u);
  BOOST_TEST(all.model.trainable() == frozen.model.trainable() + frozen.model.frozen());
  std::uint64_t reduced_bytes = 0;
  for (const Op& op : frozen.program.ops) {
    if (op.kind == OpKind::Collective && op.phase == Phase::Gradients) reduced_bytes += op.collective.bytes;
    const bool frozen_layer = op.name.rfind("stem_", 0) == 0 || op.name.rfind("block1_", 0) == 0;
    BOOST_TEST_INFO(op.name);
    BOOST_TEST(!(frozen_layer && op.phase == Phase::Backward));  // nothing behind them needs a gradient
  }
  BOOST_TEST(reduced_bytes == frozen.model.trainable() * 4);
  BOOST_TEST(frozen.memory.optimizer_state * all.model.trainable() == all.memory.optimizer_state * frozen.model.trainable());
  BOOST_TEST(frozen.memory.gradients < all.memory.gradients);
  // block2's first convolutions read the frozen block's output: their weights' gradients, but
  // no input gradient.
  BOOST_TEST(count_ops(frozen.program, OpKind::Matmul, "block2_1_conv/bwd/dW") == 1u);
  BOOST_TEST(count_ops(frozen.program, OpKind::Matmul, "block2_1_conv/bwd/dX") == 0u);
  BOOST_TEST(count_ops(all.program, OpKind::Matmul, "block2_1_conv/bwd/dX") == 1u);

  const CommandResult r = run_tpusim("import '" + import_fixture("keras_transfer.json") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "20378 parameters (14826 trainable, 5424 frozen)"));
  BOOST_TEST(contains(r.out, "2 frozen BatchNormalization layer(s)"));
  const auto run = run_example("", dir.path("w.json"));
  const json summary = read_json(run->out() + "/summary.json");
  BOOST_TEST(summary["parameters"] == 20378u);
  BOOST_TEST(summary["trainable_parameters"] == 14826u);
  BOOST_TEST(summary["frozen_parameters"] == 5424u);
  BOOST_TEST(contains(run->result.out, "parameters     20378: 14826 trained, 5424 frozen"));
}

// A model around frozen layers may carry trainable false itself (Keras passes it down); a model
// with every weighted layer frozen trains nothing and is refused.
BOOST_AUTO_TEST_CASE(trainable_false_on_a_nested_model_freezes_everything_inside) {
  json keras = read_json(import_fixture("keras_transfer.json"));
  json& backbone = keras["config"]["layers"][0];
  for (json& l : backbone["config"]["layers"]) l["config"].erase("trainable");
  backbone["config"]["trainable"] = false;
  ImportedModel m = import_keras_model(keras, "nested.json");
  std::size_t frozen = 0;
  for (const auto& l : m.model["layers"]) frozen += l.value("trainable", true) ? 0 : 1;
  BOOST_TEST(frozen == 17u);  // every backbone layer but its input
  BOOST_TEST(m.model["layers"][17]["name"] == "avg_pool");
  BOOST_TEST(m.model["layers"][17]["inputs"].is_null());  // reads block2_out, the layer before it

  keras["config"]["layers"][2]["config"]["trainable"] = false;  // the head too
  TempDir dir;
  const CommandResult r = run_tpusim("import '" + dir.write("all_frozen.json", keras.dump()) + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "every layer with weights is frozen"), r.err);
  BOOST_TEST(!std::filesystem::exists(dir.path("w.json")));
}

// Keras 3 writes inbound_nodes as {"args": [keras tensors], "kwargs": {}} and InputLayer's shape
// as batch_shape; the same model in both formats imports to the same layers.
BOOST_AUTO_TEST_CASE(keras_3_inbound_nodes_import_like_keras_2) {
  auto tensor = [](const std::string& layer) {
    return json{{"class_name", "__keras_tensor__"}, {"config", {{"shape", {nullptr, 8}}, {"keras_history", {layer, 0, 0}}}}};
  };
  auto dense = [](const std::string& name, int units, json inbound) {
    return json{{"module", "keras.layers"}, {"class_name", "Dense"}, {"name", name},
                {"config", {{"name", name}, {"units", units}, {"activation", "relu"}, {"use_bias", true}}},
                {"inbound_nodes", std::move(inbound)}};
  };
  json k3 = {{"module", "keras"}, {"class_name", "Functional"}, {"config", {{"name", "k3"}, {"layers", json::array()}}}};
  json& layers = k3["config"]["layers"];
  layers.push_back({{"class_name", "InputLayer"}, {"name", "x"}, {"config", {{"batch_shape", {nullptr, 8}}, {"dtype", "float32"}}},
                    {"inbound_nodes", json::array()}});
  layers.push_back(dense("a", 8, json::array({{{"args", {tensor("x")}}, {"kwargs", json::object()}}})));
  layers.push_back(dense("b", 8, json::array({{{"args", {tensor("a")}}, {"kwargs", json::object()}}})));
  layers.push_back({{"class_name", "Add"}, {"name", "sum"}, {"config", {{"name", "sum"}}},
                    {"inbound_nodes", json::array({{{"args", {json::array({tensor("a"), tensor("b")})}}, {"kwargs", json::object()}}})}});
  layers.push_back(dense("head", 4, json::array({{{"args", {tensor("sum")}}, {"kwargs", json::object()}}})));
  k3["config"]["input_layers"] = {"x", 0, 0};
  k3["config"]["output_layers"] = {"head", 0, 0};

  json k2 = k3;
  k2["class_name"] = "Model";
  for (json& l : k2["config"]["layers"]) {
    if (l["class_name"] == "InputLayer") {
      l["config"]["batch_input_shape"] = l["config"]["batch_shape"];
      l["config"].erase("batch_shape");
      continue;
    }
    json inputs = json::array();
    for (const json& arg : l["inbound_nodes"][0]["args"])
      for (const json& t : arg.is_array() ? arg : json::array({arg}))
        inputs.push_back({t["config"]["keras_history"][0], 0, 0, json::object()});
    l["inbound_nodes"] = json::array({inputs});
  }
  k2["config"]["input_layers"] = {{"x", 0, 0}};
  k2["config"]["output_layers"] = {{"head", 0, 0}};

  const ImportedModel a = import_keras_model(k3, "k3.json"), b = import_keras_model(k2, "k2.json");
  BOOST_TEST(a.model.dump() == b.model.dump());
  BOOST_TEST(a.model["layers"].size() == 4u);
  BOOST_TEST(a.model["layers"][2]["inputs"].dump() == R"(["a","b"])");
}

// Keras's Reshape may leave one size to the others (-1): tpusim's reshape takes it as a 0 and
// gives the same model as the sizes written out (the CRNN's [128, 256]).
BOOST_AUTO_TEST_CASE(a_reshape_with_minus_one_imports_as_its_sizes_written_out) {
  json k = read_json(import_fixture("keras_crnn.json"));
  for (json& layer : k["config"]["layers"])
    if (layer["class_name"] == "Reshape") layer["config"]["target_shape"] = {128, -1};
  const ImportedModel open = import_keras_model(k, "crnn.json");
  const ImportedModel written = import_keras_model(read_json(import_fixture("keras_crnn.json")), "crnn.json");
  TempDir dir;
  auto graph_of = [&](const ImportedModel& m, const std::string& name) {
    json w = {{"name", "crnn"}, {"model", m.model}, {"training", {{"per_replica_batch", 2}, {"steps", 1}}}};
    ConfigRequest request;
    request.workload_path = dir.write(name, w.dump());
    request.hw = "tpu_v5e";
    request.topology = "1x1";
    return analyze_model(load_config(request).workload);
  };
  const ModelGraph a = graph_of(open, "open.json"), b = graph_of(written, "written.json");
  BOOST_TEST_REQUIRE(a.nodes.size() == b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) BOOST_TEST(a.nodes[i].out == b.nodes[i].out, boost::test_tools::per_element());
  BOOST_TEST(a.params() == b.params());
}

BOOST_AUTO_TEST_CASE(bad_keras_files_are_refused_naming_the_layer_and_nothing_is_written) {
  const json good = read_json(import_fixture("keras_small_resnet.json"));
  struct Case {
    std::string what;
    std::function<void(json&)> edit;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"an unknown layer class", [](json& k) { k["config"]["layers"][4]["class_name"] = "Conv3D"; },
       "config.layers[4] (\"block1_1_conv\", Conv3D): tpusim does not import this layer class yet"},
      {"causal padding on an image", [](json& k) { k["config"]["layers"][1]["config"]["padding"] = "causal"; },
       "padding: expected \"same\" or \"valid\", got \"causal\""},
      {"a window beyond 1024", [](json& k) { k["config"]["layers"][1]["config"]["kernel_size"] = {1, 2000}; },
       "kernel_size: expected a size of 1 to 1024 or [height, width], got [1,2000]"},
      {"an activation tpusim lacks", [](json& k) { k["config"]["layers"][3]["config"]["activation"] = "selu"; },
       "activation: expected one of linear, relu, sigmoid, tanh, gelu, softmax, relu6, hard_sigmoid, hard_swish, swish, silu, "
       "got \"selu\""},
      {"a dangling input", [](json& k) { k["config"]["layers"][2]["inbound_nodes"][0][0][0] = "nowhere"; },
       "reads \"nowhere\", which no earlier layer is named"},
      {"a shared layer", [](json& k) { k["config"]["layers"][2]["inbound_nodes"].push_back(k["config"]["layers"][2]["inbound_nodes"][0]); },
       "called more than once"},
      {"an open dimension", [](json& k) { k["config"]["layers"][0]["config"]["batch_input_shape"][1] = nullptr; },
       "batch_input_shape[1]: expected a positive size"},
      {"not a model", [](json& k) { k = json::array({1, 2}); }, "expected a Keras model JSON object"},
      {"shapes that do not fit", [](json& k) { k["config"]["layers"][7]["config"]["filters"] = 8; },
       "imported, but tpusim cannot use the result: workload.model.layers[8].inputs: [32, 32, 8] does not broadcast to [32, 32, 16], "
       "the first input's shape (layer \"block1_add\")"},
  };
  for (const Case& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      TempDir dir;
      json k = good;
      c.edit(k);
      const std::string in = dir.write("model.json", k.dump());
      const CommandResult r = run_tpusim("import '" + in + "' -o '" + dir.path("w.json") + "'");
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(contains(r.err, c.expected), r.err);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
      BOOST_TEST(!std::filesystem::exists(dir.path("w.json")));
      BOOST_TEST(std::distance(std::filesystem::directory_iterator(dir.path("")), std::filesystem::directory_iterator()) == 1);
    }
  }
  TempDir dir;
  const CommandResult not_json = run_tpusim("import '" + dir.write("m.json", "{\"class_name\": ") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(not_json.exit_code == 2);
  BOOST_TEST(contains(not_json.err, "m.json: malformed JSON"));
  // A workload may not give both the file and layers of its own.
  json w = {{"name", "both"},
            {"model", {{"keras_json", import_fixture("keras_mlp_mnist.json")}, {"input_shape", {28, 28}}}},
            {"training", {{"per_replica_batch", 8}}}};
  ConfigRequest request;
  request.workload_path = dir.write("both.json", w.dump());
  BOOST_TEST(contains(load_error(request), "workload.model.input_shape: the model comes from model.keras_json: give one or the other"));
}

// MobileNet's DepthwiseConv2D: a convolution with as many groups as input channels, Keras's
// parameter count (kernel taps x channels x multiplier, and a bias per output channel).
BOOST_AUTO_TEST_CASE(depthwise_convolutions_import_with_keras_parameter_counts) {
  const json keras = json::parse(R"({"class_name": "Sequential", "config": {"name": "dw", "layers": [
    {"class_name": "DepthwiseConv2D", "config": {"name": "dw", "batch_input_shape": [null, 8, 8, 4], "kernel_size": [3, 3],
     "strides": [1, 1], "padding": "same", "depth_multiplier": 2, "activation": "relu", "use_bias": true}},
    {"class_name": "Flatten", "config": {"name": "flat"}},
    {"class_name": "Dense", "config": {"name": "head", "units": 10, "activation": "softmax"}}]}})");
  TempDir dir;
  const std::string file = dir.write("dw.json", keras.dump());
  const Config c = keras_workload(dir, file, 4);
  const LoweredStep step = lower_training_step(c.workload, c.hw);
  const Node& dw = step.model.nodes.at(0);
  BOOST_TEST(dw.spec.type == "depthwise_conv2d");
  BOOST_TEST(dw.out == Shape({8, 8, 8}), boost::test_tools::per_element());
  BOOST_TEST(dw.params == 3u * 3u * 4u * 2u + 8u);
  BOOST_TEST(step.model.params() == 80u + 8u * 8u * 8u * 10u + 10u);
  BOOST_TEST(dw.forward_flops == 2.0 * 64 * 72);  // each output pixel: 9 taps of one channel, 8 outputs
}
