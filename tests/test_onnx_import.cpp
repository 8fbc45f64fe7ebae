// ONNX import (issue 16): the reader against what python3-onnx said of the committed torch
// exports (tests/data/import/onnx_summary.json), convolutional models against torch's parameter
// counts and make_fx's training-step FLOPs, and damaged or unsupported files.
#define BOOST_TEST_MODULE onnx_import
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "onnx/onnx.pb.h"
#include "run_helpers.hpp"
#include "workloads/import/onnx_file.hpp"
#include "workloads/import/onnx_model.hpp"
#include "workloads/import/onnx_shapes.hpp"
#include "workloads/lower.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

std::string reader_error(const std::string& bytes) {
  try {
    read_onnx(bytes, "model.onnx");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A workload of the ONNX file on one v5e core, so the per-core batch is the replica's.
LoweredStep lower_onnx(const TempDir& dir, const std::string& file, std::uint64_t batch) {
  const json w = {{"name", "imported"}, {"model", {{"onnx", file}}}, {"training", {{"per_replica_batch", batch}, {"steps", 1}}}};
  ConfigRequest request;
  request.workload_path = dir.write("workload.json", w.dump());
  request.hw = "tpu_v5e";
  request.topology = "1x1";
  const Config c = load_config(request);
  return lower_training_step(c.workload, c.hw);
}

// A minimal valid model: input x [batch, 4] -> Relu -> y, at the given opset.
onnx::ModelProto tiny_model(std::int64_t opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* o = m.add_opset_import();
  o->set_domain("");
  o->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    t->mutable_shape()->add_dim()->set_dim_value(4);
  };
  value(g->add_input(), "x");
  value(g->add_output(), "y");
  auto* n = g->add_node();
  n->set_name("relu");
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  return m;
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_reader_sees_what_python_onnx_saw) {
  const json summary = read_json(import_fixture("onnx_summary.json"));
  for (const char* name : {"resnet50", "vit_b_16", "transformer_encoder", "gpt_tiny", "written_out_norms", "resnet18_finetune", "m5_audio"}) {
    BOOST_TEST_CONTEXT(name) {
      const json& s = summary.at(name);
      const OnnxModel m = read_onnx_file(import_fixture(s["file"].get<std::string>()));
      BOOST_TEST(m.opset == 17);
      BOOST_TEST(m.nodes.size() == s["nodes"].get<std::size_t>());
      BOOST_TEST(m.initializers.size() == s["initializers"].get<std::size_t>());
      const json updated = s.value("updated_parameters", json::array());
      BOOST_TEST(m.has_training_info == !updated.empty());
      BOOST_TEST(json(m.updated_parameters) == updated);
      std::map<std::string, int> ops;
      for (const auto& n : m.nodes) ++ops[n.op_type];
      for (const auto& [op, count] : s["op_types"].items()) BOOST_TEST(ops[op] == count.get<int>(), op);
      BOOST_TEST(ops.size() == s["op_types"].size());
      // Every graph input with its shape, the batch left symbolic.
      BOOST_TEST(m.inputs.size() == s["inputs"].size());
      for (const auto& in : m.inputs) {
        BOOST_TEST_CONTEXT(in.name) {
          const json& shape = s["inputs"].at(in.name)["shape"];
          BOOST_TEST_REQUIRE(in.dims.size() == shape.size());
          for (std::size_t d = 0; d < in.dims.size(); ++d) {
            if (shape[d].is_string()) BOOST_TEST(in.dims[d].symbol == shape[d].get<std::string>());
            else BOOST_TEST(in.dims[d].value == shape[d].get<std::int64_t>());
          }
        }
      }
    }
  }
}

// torchvision's convolutional classifiers, ShuffleNet's channel shuffle (reshapes and a
// transpose of an image) and DenseNet's padded pools among them: the parameter count torch reports.
BOOST_AUTO_TEST_CASE(torchvision_classifiers_import_with_torchs_parameter_counts) {
  const json summary = read_json(import_fixture("torchvision/summary.json"));
  std::map<std::string, std::uint64_t> expected = {{"resnet50.onnx", 25557032}};  // onnx_summary.json's
  for (const auto& [name, s] : summary.items())
    if (name[0] != '_' && name != "fixed_batch/tiny_attention_b2")  // refused: below
      expected["torchvision/" + name + ".onnx"] = s["trainable_parameters"].get<std::uint64_t>();
  BOOST_TEST(read_json(import_fixture("onnx_summary.json"))["resnet50"]["trainable_parameters"] == 25557032);
  std::size_t imported = 0;
  for (const auto& [file, params] : expected) {
    BOOST_TEST_CONTEXT(file) {
      TempDir dir;
      const LoweredStep step = lower_onnx(dir, import_fixture(file), 2);
      BOOST_TEST(step.model.trainable() == params);
      ++imported;
    }
  }
  BOOST_TEST(imported == 18u);
}

// Issue 42's seven torchvision models, exported with torch.onnx.export's defaults, run: a
// workload naming each file simulates one training step on a v5e chip, to a finite step time.
BOOST_AUTO_TEST_CASE(the_seven_fixed_batch_exports_run) {
  std::size_t ran = 0;
  for (const char* name : {"resnet18", "wide_resnet50_2", "vgg16", "densenet121", "mobilenet_v2", "efficientnet_b0", "convnext_tiny"}) {
    BOOST_TEST_CONTEXT(name) {
      TempDir dir;
      const json w = {{"name", name},
                      {"model", {{"onnx", import_fixture(std::string("torchvision/fixed_batch/") + name + "_b1.onnx")}}},
                      {"training", {{"per_replica_batch", 2}, {"steps", 1}}}};
      const CommandResult r = run_tpusim("run '" + dir.write("w.json", w.dump()) + "' --hw tpu_v5e --topology 1x1 --trace none -o '" +
                                         dir.path("out") + "'");
      BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
      const json summary = read_json(dir.path("out/summary.json"));
      BOOST_TEST(summary["step_time_s"].get<double>() > 0);
      ++ran;
    }
  }
  BOOST_TEST(ran == 7u);
}

// Inception v3 factorizes its 7x7 convolutions into 1x7 and 7x1 (refused before: "kernel 1x7:
// tpusim models 2D windows with the same size on both axes"). They import as [1, 7] and [7, 1]
// kernels, and the forward pass is torchvision's published 5.71 G multiply-accumulates per 299x299
// image (inception_v3's model card, 0.14).
BOOST_AUTO_TEST_CASE(inception_v3_imports_its_factorized_non_square_convolutions) {
  const std::string file = import_fixture("torchvision/fixed_batch/inception_v3_b1.onnx");
  const ImportedModel m = read_onnx_model_file(file);
  std::map<std::string, int> kernels;
  for (const auto& l : m.model["layers"])
    if (l["type"] == "conv2d") ++kernels[l["kernel"].dump()];
  // Mixed_6b to 6e: three of each (one in the 7x7 branch, two in the double one); Mixed_7a one.
  BOOST_TEST(kernels["[1,7]"] == 13);
  BOOST_TEST(kernels["[7,1]"] == 13);
  BOOST_TEST(kernels["[1,3]"] == 4);  // Mixed_7b and 7c: two of each
  BOOST_TEST(kernels["[3,1]"] == 4);
  TempDir dir;
  const LoweredStep step = lower_onnx(dir, file, 2);
  const double forward_gmacs = step.model.forward_flops_per_sample() / 2 / 1e9;
  BOOST_TEST(std::round(forward_gmacs * 100) == 571, forward_gmacs);
}

// ConvNeXt-T permutes each block's image to channels last for its LayerNorm and MLP and back
// (refused before: "[56, 56, 96] does not hold the 516096 elements of the input [56, 96, 96]").
// tpusim holds images channels last already, so the permutes move nothing, and the layer scale
// ([c, 1, 1] in torch) applies along tpusim's last axis. Its forward pass is torchvision's
// published 4.46 G multiply-accumulates per 224x224 image (convnext_tiny's model card, 0.14).
BOOST_AUTO_TEST_CASE(convnext_permutes_around_its_channels_last_norms_move_nothing) {
  const ImportedModel m = read_onnx_model_file(import_fixture("torchvision/fixed_batch/convnext_tiny_b1.onnx"));
  std::map<std::string, int> kinds;
  for (const auto& l : m.model["layers"]) ++kinds[l["type"].get<std::string>()];
  BOOST_TEST(kinds["reshape"] == 0);
  BOOST_TEST(kinds["layer_norm"] == 23);  // 18 blocks, the stem, 3 downsamplings, the head
  BOOST_TEST(kinds["multiply_parameter"] == 18);
  for (const auto& l : m.model["layers"])
    if (l["type"] == "multiply_parameter") BOOST_TEST(l["shape"][0] == 1);
  TempDir dir;
  const LoweredStep step = lower_onnx(dir, import_fixture("torchvision/fixed_batch/convnext_tiny_b1.onnx"), 2);
  const double forward_gmacs = step.model.forward_flops_per_sample() / 2 / 1e9;
  BOOST_TEST(std::round(forward_gmacs * 100) == 446, forward_gmacs);  // the card's two decimals
}

// Issue 42: torch.onnx.export's default export fixes the batch at the traced input's (no
// dynamic_axes), and was refused ("0 axes that grow with the batch"). The input's leading axis is
// now the batch, and the shape constants the export folded it into follow it: ShuffleNet traced at
// batch 4 (its channel shuffle's reshapes carry the 4) imports as its dynamic-batch export does.
// Where the batch hides in a product (attention folds it into the heads), the error says how to
// export with a symbolic batch.
BOOST_AUTO_TEST_CASE(a_fixed_batch_export_imports_with_its_leading_axis_as_the_batch) {
  TempDir dir;
  const LoweredStep fixed = lower_onnx(dir, import_fixture("torchvision/fixed_batch/shufflenet_v2_x1_0_b4.onnx"), 2);
  const LoweredStep dynamic = lower_onnx(dir, import_fixture("torchvision/shufflenet_v2_x1_0.onnx"), 2);
  BOOST_TEST(fixed.model.nodes.size() == dynamic.model.nodes.size());
  BOOST_TEST(fixed.model.params() == dynamic.model.params());
  BOOST_TEST(fixed.model.training_flops_per_sample() == dynamic.model.training_flops_per_sample());
  BOOST_TEST(fixed.model_flops_per_core == dynamic.model_flops_per_core);
  const CommandResult r = run_tpusim("import '" + import_fixture("torchvision/fixed_batch/resnet18_b1.onnx") + "' -o '" +
                                     dir.path("r18.json") + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(contains(r.out, "11689512 trainable"), r.out);
  BOOST_TEST(contains(r.out, "note: the export has a fixed batch of 1 (no dynamic_axes): the leading axis of \"input.1\" is taken"),
             r.out);
  const CommandResult refused = run_tpusim("import '" + import_fixture("torchvision/fixed_batch/tiny_attention_b2.onnx") + "' -o '" +
                                           dir.path("attention.json") + "'");
  BOOST_TEST(refused.exit_code == 2);
  BOOST_TEST(contains(refused.err, "the export has a fixed batch of 2, taken as the leading axis of \"onnx::Transpose_0\"; export "
                                   "with torch.onnx.export(..., dynamic_axes={\"onnx::Transpose_0\": {0: \"batch\"}}) to mark the batch"),
             refused.err);
  BOOST_TEST(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
}

// The oracle traced each model's training step with torch's make_fx (make_oracle.py): its
// convolution and matmul FLOPs, and how many input- and weight-gradient products it has. A
// product of two activations (attention) has an input gradient for each operand.
BOOST_AUTO_TEST_CASE(training_steps_match_the_make_fx_oracle) {
  const json oracle = read_json(import_fixture("oracle.json"))["models"];
  for (const char* name : {"resnet50", "vit_b_16", "transformer_encoder", "gpt_tiny", "written_out_norms", "resnet18_finetune", "m5_audio"}) {
    BOOST_TEST_CONTEXT(name) {
      const json& o = oracle.at(name);
      TempDir dir;
      const LoweredStep step = lower_onnx(dir, import_fixture(o["fixture"].get<std::string>()), o["batch"].get<std::uint64_t>());
      BOOST_TEST(step.model.trainable() == o["trainable_parameters"].get<std::uint64_t>());
      const double expected = o["training_step_flops"].get<double>();
      BOOST_TEST(step.model_flops_per_core == expected, boost::test_tools::tolerance(0.01));
      BOOST_TEST(step.model.training_flops_per_sample() * o["batch"].get<double>() == expected, boost::test_tools::tolerance(0.01));
      std::size_t input_grads = 0, weight_grads = 0;
      for (const Op& op : step.program.ops) {
        if (op.kind != OpKind::Matmul) continue;
        const bool dx = contains(op.name, "/bwd/dX") || contains(op.name, "/bwd/dA") || contains(op.name, "/bwd/dB");
        input_grads += dx ? 1 : 0;
        weight_grads += contains(op.name, "/bwd/dW") ? 1 : 0;
      }
      const json& b = o["backward"];
      BOOST_TEST(input_grads == b["conv_input_grads"].get<std::size_t>() + b["matmul_input_grads"].get<std::size_t>());
      BOOST_TEST(weight_grads == b["conv_weight_grads"].get<std::size_t>() + b["matmul_weight_grads"].get<std::size_t>());
    }
  }
}

BOOST_AUTO_TEST_CASE(damaged_and_unsupported_files_are_refused_in_one_line) {
  const std::string good = read_file(import_fixture("gpt_tiny.onnx"));
  BOOST_TEST(reader_error(good).empty());
  for (std::size_t cut : {std::size_t{1}, std::size_t{100}, good.size() / 3, good.size() / 2, good.size() - 1}) {
    BOOST_TEST_CONTEXT("cut at " << cut) {
      const std::string e = reader_error(good.substr(0, cut));
      BOOST_TEST(contains(e, "model.onnx: not an ONNX model"), e);
      BOOST_TEST(std::count(e.begin(), e.end(), '\n') == 0);
    }
  }
  BOOST_TEST(contains(reader_error(""), "not an ONNX model (empty)"));
  BOOST_TEST(contains(reader_error(read_file(import_fixture("keras_mlp_mnist.json"))), "not an ONNX model"));
  std::string noise(4096, '\0');
  for (std::size_t k = 0; k < noise.size(); ++k) noise[k] = static_cast<char>((k * 2654435761u) >> 13);
  BOOST_TEST(contains(reader_error(noise), "not an ONNX model"));

  BOOST_TEST(reader_error(tiny_model().SerializeAsString()).empty());
  BOOST_TEST(contains(reader_error(tiny_model(18).SerializeAsString()),
                      "opset 18, newer than tpusim reads (17 at most); export again with opset_version=17"));
  // Issue 41: a node name that is not UTF-8 ended in "internal error: json type_error.316".
  for (const std::string& bad : {std::string("\xff"), std::string("a\xc3"), std::string("\xc0\xaf"), std::string("\xed\xa0\x80")}) {
    auto m = tiny_model();
    m.mutable_graph()->mutable_node(0)->set_name("relu" + bad);
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "node 0 (Relu): its name is not UTF-8 text"));
  }
  {
    auto m = tiny_model();
    m.mutable_graph()->mutable_node(0)->set_name("r\xc3\xa9lu \xe2\x82\xac \xf0\x9f\x98\x80");  // "rélu € 😀"
    BOOST_TEST(reader_error(m.SerializeAsString()).empty());
  }
  // Issue 41: a negative opset was accepted.
  BOOST_TEST(contains(reader_error(tiny_model(-1).SerializeAsString()), "opset -1: not an opset version"));
  {
    auto m = tiny_model();
    m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "node \"relu\" (Relu) is of domain \"com.microsoft\""));
  }
  {
    auto m = tiny_model();
    auto* w = m.mutable_graph()->add_initializer();
    w->set_name("w");
    w->add_dims(1000);
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "initializer \"w\" keeps its data in an external file"));
  }
  {
    auto m = tiny_model();  // y = Relu(z), z = Relu(y): a cycle
    auto* n = m.mutable_graph()->mutable_node(0);
    n->set_input(0, "z");
    auto* back = m.mutable_graph()->add_node();
    back->set_name("back");
    back->set_op_type("Relu");
    back->add_input("y");
    back->add_output("z");
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "node \"relu\" (Relu) reads \"z\" before node \"back\" produces it"));
  }
  {
    auto m = tiny_model();
    *m.mutable_graph()->add_node() = m.graph().node(0);
    m.mutable_graph()->mutable_node(1)->set_name("again");
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "value \"y\" is produced twice (node \"again\" and node \"relu\")"));
  }
  {
    auto m = tiny_model();
    m.mutable_graph()->mutable_node(0)->set_input(0, "nowhere");
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "reads \"nowhere\", which no node, graph input or initializer provides"));
  }
  {
    auto m = tiny_model();
    m.clear_graph();
    BOOST_TEST(contains(reader_error(m.SerializeAsString()), "not an ONNX model (no graph)"));
  }
  // Through the command: exit 2, one line, nothing written.
  TempDir dir;
  const std::string cut = dir.write("cut.onnx", good.substr(0, good.size() / 2));
  const CommandResult r = run_tpusim("import '" + cut + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  BOOST_TEST(!std::filesystem::exists(dir.path("w.json")));
  const CommandResult missing = run_tpusim("import '" + dir.path("none.onnx") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(contains(missing.err, "none.onnx: no such file"));
  // Shapes that do not fit: a weight of the wrong width, named by the node that multiplies it.
  onnx::ModelProto gpt;
  BOOST_TEST_REQUIRE(gpt.ParseFromString(good));
  for (auto& in : *gpt.mutable_graph()->mutable_input())
    if (in.name() == "blocks.0.fc.weight") in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(200);
  const CommandResult misfit =
      run_tpusim("import '" + dir.write("misfit.onnx", gpt.SerializeAsString()) + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(misfit.exit_code == 2);
  BOOST_TEST(misfit.err == "tpusim: error: " + dir.path("misfit.onnx") +
                               ": node 104 (\"/blocks.0/fc/MatMul\", MatMul): [2, 64, 256] and [200, 1024] do not multiply\n");
  BOOST_TEST(!std::filesystem::exists(dir.path("w.json")));
}

// A workload names the file; its layers are the graph's nodes, by name.
BOOST_AUTO_TEST_CASE(a_workload_runs_an_onnx_model_by_name) {
  TempDir dir;
  const json w = {{"name", "onnx_mobilenet"},
                  {"model", {{"onnx", import_fixture("torchvision/mobilenet_v2.onnx")}, {"input_dtype", "uint8"}}},
                  {"training", {{"per_replica_batch", 8}, {"precision", "mixed_bfloat16"}}}};
  const auto run = run_example("--trace ops --set workload.training.steps=2", dir.write("w.json", w.dump()));
  BOOST_TEST(run->summary["notes"].size() == 0u);
  const json effective = read_json(run->out() + "/effective_config.json");
  BOOST_TEST(effective["workload"]["model"]["imported_from"] == import_fixture("torchvision/mobilenet_v2.onnx"));
  BOOST_TEST(effective["workload"]["model"]["input_dtype"] == "uint8");
  BOOST_TEST(contains(read_file(run->out() + "/trace.json"), "\"/features/features.1/conv/conv.0/conv.0.0/Conv/fwd/conv\""));
}

// resnet18_finetune.onnx carries ONNX's training information (make_onnx.py): its update_binding
// names layer4's and fc's parameters, what torch trains of the model. The rest is frozen.
BOOST_AUTO_TEST_CASE(training_info_freezes_the_parameters_it_does_not_update) {
  TempDir dir;
  const LoweredStep step = lower_onnx(dir, import_fixture("resnet18_finetune.onnx"), 2);
  BOOST_TEST(step.model.trainable() == 8906728u);                        // torch's requires_grad parameters
  BOOST_TEST(step.model.trainable() + step.model.frozen() == 11689512u);  // ResNet-18's parameters
  for (const Node& node : step.model.nodes) {
    const bool trained = node.spec.name.rfind("/layer4/", 0) == 0 || node.spec.name.rfind("/fc/", 0) == 0;
    if (node.params > 0) BOOST_TEST(node.spec.trainable == trained, node.spec.name);
  }
  onnx::ModelProto m = tiny_model();
  auto* binding = m.add_training_info()->add_update_binding();
  binding->set_key("w");
  binding->set_value("w.updated");
  BOOST_TEST(reader_error(m.SerializeAsString()) == "");
  const std::string file = dir.write("bound.onnx", m.SerializeAsString());
  const CommandResult r = run_tpusim("import '" + file + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "training_info: update_binding names \"w\", which is not a parameter of the graph"), r.err);
}

// Shapes of every tensor of the transformer exports, with their shape arithmetic folded, at two
// batches; what the exports declare of their outputs (the batch symbolic) comes out.
BOOST_AUTO_TEST_CASE(shape_inference_folds_the_shape_arithmetic_of_every_fixture) {
  const std::map<std::string, OnnxShape> outputs = {{"resnet50.onnx", {0, 1000}},
                                                    {"vit_b_16.onnx", {0, 1000}},
                                                    {"transformer_encoder.onnx", {0, 128, 512}},
                                                    {"gpt_tiny.onnx", {0, 64, 1000}}};
  for (const auto& [file, expected] : outputs) {
    const OnnxModel m = read_onnx_file(import_fixture(file));
    for (std::int64_t batch : {2, 3}) {
      BOOST_TEST_CONTEXT(file << " at batch " << batch) {
        const OnnxShapes s = infer_onnx_shapes(m, batch, file);
        for (const auto& n : m.nodes)
          for (const auto& out : n.outputs) BOOST_TEST((out.empty() || s.shape.count(out) == 1), out);
        OnnxShape want = expected;
        want[0] = batch;
        BOOST_TEST(s.shape.at(m.outputs.at(0).name) == want, boost::test_tools::per_element());
      }
    }
  }
  // An attention score is [batch x heads, tokens, tokens] (torch's MultiheadAttention folds the
  // batch into the heads): 8 heads of 128 tokens in the encoder, 12 of 197 in ViT-B/16.
  auto softmax_shapes = [](const std::string& file, std::int64_t batch) {
    const OnnxModel m = read_onnx_file(import_fixture(file));
    const OnnxShapes s = infer_onnx_shapes(m, batch, file);
    std::vector<OnnxShape> shapes;
    for (const auto& n : m.nodes)
      if (n.op_type == "Softmax") shapes.push_back(s.shape.at(n.outputs[0]));
    return shapes;
  };
  BOOST_TEST(softmax_shapes("transformer_encoder.onnx", 3).at(0) == OnnxShape({24, 128, 128}), boost::test_tools::per_element());
  BOOST_TEST(softmax_shapes("vit_b_16.onnx", 2).at(0) == OnnxShape({24, 197, 197}), boost::test_tools::per_element());
  BOOST_TEST(softmax_shapes("gpt_tiny.onnx", 2).at(0) == OnnxShape({2, 4, 64, 64}), boost::test_tools::per_element());
}

// torchvision's ViT-B/16 as exported (generic matmuls, views, a GELU from five nodes) and the
// zoo's vit_b16 (its attention and patch embedding as single layers) are one model written two
// ways: the same parameters, and the step within 1% (0.7% apart when this was written: the zoo's
// attention keeps Q, K and V in one tensor, the import slices them).
BOOST_AUTO_TEST_CASE(imported_vit_b_16_runs_like_the_zoo_vit_b16) {
  TempDir dir;
  const std::string zoo = source_path("workloads/examples/vit_b16.json");
  const json onnx_doc = {{"name", "vit_onnx"},
                         {"model", {{"onnx", import_fixture("vit_b_16.onnx")}, {"input_dtype", "uint8"}}},
                         {"training", read_json(zoo)["training"]}};
  const std::string args =
      "--hw tpu_v5e --topology 1x1 --trace none --set workload.training.steps=2 --set workload.training.per_replica_batch=8";
  const auto onnx_run = run_example(args, dir.write("vit_onnx.json", onnx_doc.dump()));
  const auto zoo_run = run_example(args, zoo);
  BOOST_TEST(onnx_run->summary["parameters"] == zoo_run->summary["parameters"]);
  BOOST_TEST(onnx_run->summary["step_time_s"].get<double>() == zoo_run->summary["step_time_s"].get<double>(),
             boost::test_tools::tolerance(0.01));
}

// Norms written out of elementwise ops (T5's RMSNorm as Hugging Face writes it, a layer norm of
// means and a quotient) import op for op: powers, means over the last axis, broadcast differences
// and quotients, the learned scale and shift; the epsilon added is folded, 1 / sqrt a reciprocal.
BOOST_AUTO_TEST_CASE(norms_written_out_of_elementwise_ops_import_op_for_op) {
  TempDir dir;
  const CommandResult r = run_tpusim("import '" + import_fixture("written_out_norms.onnx") + "' -o '" + dir.path("w.json") + "'");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const json w = read_json(dir.path("w.json"));
  std::vector<std::string> types;
  for (const auto& l : w["model"]["layers"])
    types.push_back(l["type"] == "activation" ? l["activation"].get<std::string>() : l["type"].get<std::string>());
  const std::vector<std::string> expected = {
      "reshape", "square", "reduce_mean", "sqrt", "reciprocal", "multiply", "multiply_parameter",  // RMSNorm
      "dense", "tanh", "sigmoid", "multiply",                                                       // gated fc1
      "reduce_mean", "subtract", "square", "reduce_mean", "sqrt", "divide", "multiply_parameter", "add_parameter",
      "dense", "add"};
  BOOST_TEST(types == expected, boost::test_tools::per_element());
}

// Found by fuzz_onnx: a window's attributes of the wrong length or range (here the first
// convolution's pads, two where a 2D window has four) are refused, not read past their end.
BOOST_AUTO_TEST_CASE(window_attributes_of_the_wrong_length_are_refused) {
  onnx::ModelProto m;
  BOOST_TEST_REQUIRE(m.ParseFromString(read_file(import_fixture("resnet50.onnx"))));
  auto* conv = m.mutable_graph()->mutable_node(0);
  BOOST_TEST_REQUIRE(conv->op_type() == "Conv");
  for (auto& a : *conv->mutable_attribute())
    if (a.name() == "pads") {
      a.clear_ints();
      a.add_ints(3);
      a.add_ints(3);
    }
  const OnnxModel model = read_onnx(m.SerializeAsString(), "pads.onnx");
  std::string error;
  try {
    infer_onnx_shapes(model, 2, "pads.onnx");
  } catch (const std::invalid_argument& e) {
    error = e.what();
  }
  BOOST_TEST(contains(error, "pads.onnx: node 0 (\"/conv1/Conv\", Conv): expected 2 strides, 2 dilations and 4 pads for a 2D window"), error);
}
