// The model zoo: parameter counts and forward FLOPs against the published figures, and the
// physics a training step must show on real models.
#define BOOST_TEST_MODULE models
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <map>

#include <nlohmann/json.hpp>

#include "sim/config.hpp"
#include "workloads/model.hpp"
#include "test_helpers.hpp"

using namespace tpusim;
using namespace tpusim::test;
using json = nlohmann::json;

namespace {

ModelGraph model(const std::string& name) {
  ConfigRequest request;
  request.workload_path = source_path("workloads/examples/" + name + ".json");
  return analyze_model(load_config(request).workload);
}

json run(const std::string& workload, const std::string& extra) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + source_path("workloads/examples/" + workload + ".json") + "' -o '" +
                                     dir.path("out") + "' --trace none " + extra);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  return json::parse(read_file(dir.path("out/summary.json")));
}

}  // namespace

BOOST_AUTO_TEST_CASE(parameter_counts_match_the_published_models) {
  // Exact counts of the reference implementations (Keras applications ResNet50; Hugging Face
  // BertModel with pooler, plus our 2-way classifier; timm ViT-B/16; GPT-2 with tied head), and
  // the rounded figures the papers quote.
  const std::map<std::string, std::pair<std::uint64_t, double>> expected = {
      {"resnet50", {25636712, 25.6e6}},         {"bert_base_128", {109482240 + 1538, 110e6}},
      {"bert_large_512", {335141888 + 2050, 340e6}}, {"vit_b16", {86567656, 86e6}},
      {"gpt2_small", {124439808, 124e6}},       {"gpt2_medium", {354823168, 355e6}},
      // GPT-3 (Brown et al. 2020, table 2.1: 125M and 175.0B): 12 L d^2 + 13 L d for the blocks,
      // (50,257 tokens + 2,048 positions) x d for the tables, 2 d for the final norm; the head is
      // tied. 174.6 B is the count Megatron's papers give for the 175B model.
      {"gpt3_125m", {125226240, 125e6}},        {"gpt3_175b", {174604259328, 175e9}},
      // torchvision's ResNet-50 (v1.5, no convolution bias): 25,557,032; plus the 1001st class
      // (2,049), the space-to-depth conv1's larger kernel (2,880) and the batch norms' moving
      // statistics (53,120), which the Keras count above includes too.
      {"resnet50_mlperf", {25557032 + 2049 + 2880 + 53120, 25.6e6}},
      // The Llama family as Hugging Face's released configs count it (untied heads but Gemma's;
      // RMS norms of one scale vector; no biases), and the sizes the model names quote (the 7B's
      // shapes are LLaMA 7B's, whose paper quotes 6.7B, table 2).
      {"llama2_7b", {6738415616, 6.7e9}},         {"llama2_70b", {68976648192, 70e9}},
      {"llama3_8b", {8030261248, 8e9}},         {"llama3_70b", {70553706496, 70e9}},
      {"llama3_405b", {405853388800, 405e9}},   {"gemma_2b", {2506172416, 2.5e9}},
      {"gemma_7b", {8537680896, 8.5e9}},
      // Mixtral 8x7B as its released config counts it (Jiang et al. 2024 quote 47B; Mistral's
      // 46.7B), and DeepSeekMoE 16B (Dai et al. 2024: 16.4B): the same blocks with a router of
      // width x experts and the experts' gated MLPs in place of the dense one.
      {"mixtral_8x7b", {46702792704, 46.7e9}}, {"deepseek_moe_16b", {16375728128, 16.4e9}}};
  for (const auto& [name, counts] : expected) {
    BOOST_TEST_CONTEXT(name) {
      const auto params = model(name).params();
      BOOST_TEST(params == counts.first);
      BOOST_TEST(std::abs(static_cast<double>(params) / counts.second - 1) < 0.02);
    }
  }
  BOOST_TEST(model("bert_base_128").params() == model("bert_base_512").params());
}

// Stable Diffusion 2's UNet trains 865,910,724 parameters (the stabilityai/stable-diffusion-2
// release's count; MLPerf quotes 865M). Its frozen text encoder is OpenCLIP ViT-H/14's text tower
// up to the penultimate layer: 23 pre-norm blocks of 12 d^2 + 13 d, the token and position tables
// and the final norm, d = 1024.
BOOST_AUTO_TEST_CASE(the_sd2_unet_trains_the_published_count_beside_its_frozen_text_encoder) {
  const ModelGraph unet = model("sd2_unet");
  BOOST_TEST(unet.trainable() == 865910724u);
  const std::uint64_t d = 1024;
  BOOST_TEST(unet.frozen() == 23 * (12 * d * d + 13 * d) + (49408 + 77) * d + 2 * d);
  BOOST_TEST(unet.nodes.back().out == Shape({64, 64, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(forward_flops_match_the_published_figures) {
  // ResNet-50 v1: 3.8 G multiply-adds per 224x224 image (He et al. 2015, table 1); the 4.1 G
  // often quoted is v1.5, with the stride on the 3x3 convolution.
  BOOST_TEST(model("resnet50").forward_flops_per_sample() / 2 == 3.8e9, boost::test_tools::tolerance(0.02));
  BOOST_TEST(model("resnet50_mlperf").forward_flops_per_sample() / 2 == 4.1e9, boost::test_tools::tolerance(0.02));
  // GPT-2 small at 1024 tokens: 2 x tokens x (12 layers x (4 d^2 + 8 d^2) + d x vocab for the
  // head) for the matmuls, plus 12 layers x 4 x tokens^2 x d for QK^T and AV.
  const double d = 768, t = 1024;
  const double gpt2 = 2 * t * (12 * 12 * d * d + d * 50257) + 12 * 4 * t * t * d;
  BOOST_TEST(model("gpt2_small").forward_flops_per_sample() == gpt2, boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(mixed_bfloat16_is_faster_than_float32) {
  const std::string common = "--hw tpu_v5e --topology 2x2 --set workload.training.steps=2";
  const json bf16 = run("bert_base_128", common);
  const json f32 = run("bert_base_128", common + " --set workload.training.precision=float32");
  BOOST_TEST(f32["step_time_s"].get<double>() > 1.3 * bf16["step_time_s"].get<double>());
  BOOST_TEST(f32["memory"]["per_core"]["activations_bytes"].get<double>() >
             1.9 * bf16["memory"]["per_core"]["activations_bytes"].get<double>());
}

BOOST_AUTO_TEST_CASE(overlapping_the_all_reduce_hides_communication) {
  const std::string common = "--hw tpu_v5e --topology 2x2 --set workload.training.steps=2 --set workload.training.all_reduce.bucket_bytes=4194304";
  const json on = run("bert_base_128", common);
  const json off = run("bert_base_128", common + " --set workload.training.all_reduce.overlap=false");
  BOOST_TEST(on["breakdown"]["exposed_communication_s"].get<double>() <
             0.5 * off["breakdown"]["exposed_communication_s"].get<double>());
  BOOST_TEST(on["step_time_s"].get<double>() < off["step_time_s"].get<double>());
}

BOOST_AUTO_TEST_CASE(a_model_that_cannot_fit_is_out_of_memory) {
  const json s = run("bert_large_512", "--hw tpu_v2");  // 8 GiB per core
  BOOST_TEST(s["status"] == "oom");
  BOOST_TEST(s["memory"]["per_core"]["total_bytes"].get<double>() > s["memory"]["hbm_capacity_bytes"].get<double>());
  BOOST_TEST(s["step_time_s"].is_null());
}

BOOST_AUTO_TEST_CASE(resnet50_throughput_rises_with_the_batch_then_flattens) {
  std::vector<double> per_chip;
  for (int batch : {8, 32, 128}) {
    const json s = run("resnet50", "--hw tpu_v5e --topology 1x1 --set workload.training.steps=2 --set workload.training.per_replica_batch=" +
                                       std::to_string(batch));
    per_chip.push_back(s["samples_per_s_per_chip"].get<double>());
  }
  BOOST_TEST(per_chip[1] > 1.1 * per_chip[0]);
  BOOST_TEST(per_chip[2] > per_chip[1]);
  BOOST_TEST(per_chip[2] / per_chip[1] < per_chip[1] / per_chip[0]);  // the gain shrinks as the MXUs fill
}

BOOST_AUTO_TEST_CASE(every_zoo_model_runs_on_every_preset) {
  // At each preset's default slice; where a model cannot fit, the result must say OOM.
  for (const char* hw : {"tpu_v2", "tpu_v3", "tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e", "tpu_v7"})
    for (const char* m : {"resnet50", "bert_large_512", "vit_b16", "gpt2_medium"}) {
      BOOST_TEST_CONTEXT(m << " on " << hw) {
        const json s = run(m, std::string("--hw ") + hw + " --set workload.training.steps=1");
        BOOST_TEST((s["status"] == "ok" || s["status"] == "oom"));
        if (s["status"] == "ok") {
          BOOST_TEST(s["mfu"].get<double>() > 0.02);
          BOOST_TEST(s["mfu"].get<double>() < 1.0);
        }
      }
    }
}

BOOST_AUTO_TEST_CASE(fusing_elementwise_chains_saves_hbm_traffic_and_time) {
  const std::string common = "--hw tpu_v5e --topology 1x1 --set workload.training.steps=2 --set workload.training.per_replica_batch=32";
  const json fused = run("resnet50", common);
  const json unfused = run("resnet50", common + " --set workload.training.fusion=false");
  BOOST_TEST(fused["traffic_per_step"]["hbm_bytes"].get<double>() < 0.8 * unfused["traffic_per_step"]["hbm_bytes"].get<double>());
  BOOST_TEST(fused["step_time_s"].get<double>() < unfused["step_time_s"].get<double>());
  BOOST_TEST(fused["model_flops_per_step"] == unfused["model_flops_per_step"]);  // the same matmuls either way
}
