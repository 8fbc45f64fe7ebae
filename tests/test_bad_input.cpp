// Bad input through the real command line: a one-line error on stderr that names the JSON path
// and what was expected, exit code 2, and no output directory left behind.
#define BOOST_TEST_MODULE bad_input
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "sim/params.hpp"
#include "test_helpers.hpp"

using namespace tpusim::test;
namespace fs = std::filesystem;

namespace {

const std::string kValid = read_file(example_workload());

std::string replaced(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const auto at = text.find(from);
  BOOST_REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The example workload with `layer` (JSON) first, before its flatten: a layer over the MNIST
// rows as 28 steps of 28 features.
std::string with_first_layer(const std::string& layer) {
  return replaced("{\"type\": \"flatten\"}", layer + ", {\"type\": \"flatten\"}");
}

// Runs `run WORKLOAD_TEXT EXTRA` into a fresh -o directory and checks the failure contract.
void expect_input_error(const std::string& workload_text, const std::string& extra, const std::string& expected) {
  TempDir dir;
  const std::string workload = dir.write("workload.json", workload_text);
  const std::string out = dir.path("out");
  const CommandResult r = run_tpusim("run '" + workload + "' -o '" + out + "' " + extra);
  BOOST_TEST_CONTEXT("stderr: " << r.err) {
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find(expected) != std::string::npos);
    BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);  // exactly one line
    BOOST_TEST(r.out.empty());
    BOOST_TEST(!fs::exists(out));
    for (const auto& entry : fs::directory_iterator(dir.path("")))  // no staging directory left either
      BOOST_TEST(entry.path().filename().string().find("tmp") == std::string::npos);
  }
}

// Each command line (arguments, the text its one-line error holds) exits 2 with that line alone.
void expect_one_line_errors(const std::vector<std::pair<std::string, std::string>>& cases) {
  for (const auto& [args, expected] : cases) {
    const CommandResult r = run_tpusim(args);
    BOOST_TEST_CONTEXT(args << "\nstderr: " << r.err) {
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(r.err.find(expected) != std::string::npos);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(malformed_json) {
  expect_input_error(kValid.substr(0, kValid.size() / 2), "", "malformed JSON");
}

BOOST_AUTO_TEST_CASE(wrong_type) {
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": \"1024\""), "",
                     "workload.training.global_batch: expected an integer, got \"1024\"");
  expect_input_error(replaced("\"input_shape\": [28, 28]", "\"input_shape\": [28, \"x\"]"), "",
                     "workload.model.input_shape[1]: expected an integer");
}

BOOST_AUTO_TEST_CASE(unknown_key) {
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": 1024, \"batch_size\": 7"), "",
                     "workload.training.batch_size: unknown key");
  expect_input_error(replaced("\"activation\": \"relu\"", "\"activation\": \"relu\", \"kernel_size\": 3"), "",
                     "workload.model.layers[1].kernel_size: unknown key");
  expect_input_error(replaced("\"activation\": \"relu\"", "\"activation\": \"relu\", \"kernel\": 3"), "",
                     "workload.model.layers[1].kernel: not a key of a dense layer");
}

// Issue 42: windows are one number or [height, width]; over a sequence ([steps, channels], the
// MNIST rows as 28 steps of 28 features) one number, with pads [before, after].
BOOST_AUTO_TEST_CASE(bad_windows_name_the_key_and_what_a_window_is) {
  expect_input_error(with_first_layer(R"({"type": "conv1d", "filters": 8, "kernel": [1, 2, 3]})"), "",
                     "workload.model.layers[0].kernel: expected an integer or [height, width], got [1,2,3]");
  expect_input_error(with_first_layer(R"({"type": "conv1d", "filters": 8, "kernel": [0, 3]})"), "",
                     "workload.model.layers[0].kernel[0]: expected integer or [height, width] between 1 and 1024");
  expect_input_error(with_first_layer(R"({"type": "conv1d", "filters": 8, "kernel": [1, 5]})"), "",
                     "workload.model.layers[0].kernel: [1, 5] on a sequence: expected one number (the window along its steps)");
  expect_input_error(with_first_layer(R"({"type": "conv1d", "filters": 8, "kernel": 3, "pads": [1, 1, 1, 1]})"), "",
                     "workload.model.layers[0].pads: expected [before, after] on a sequence, got 4 values");
  expect_input_error(with_first_layer(R"({"type": "conv1d", "filters": 8, "kernel": 9, "dilation": 4, "padding": "valid"})"), "",
                     "workload.model.layers[0].kernel: a 9 kernel dilated by 4 does not fit a [28, 28] input");
  expect_input_error(with_first_layer(R"({"type": "max_pool", "pool": 2, "strides": [0, 2]})"), "",
                     "workload.model.layers[0].strides: [0, 2]: 0 (the default) takes both axes or neither");
  expect_input_error(with_first_layer(R"({"type": "conv2d", "filters": 8, "kernel": 3})"), "",
                     "a conv2d layer needs an [height, width, channels] input, got [28, 28]");
  expect_input_error(with_first_layer(R"({"type": "max_pool", "pool": 2, "padding": "causal"})"), "",
                     "workload.model.layers[0].padding: causal padding is for a convolution over a sequence");
  expect_input_error(kValid, "--set 'workload.model.layers[0].type=max_pool' --set 'workload.model.layers[0].pool=2x'",
                     "expected an integer or a height and width like 1,7");
}

// Keras Reshape's -1 is a 0 in tpusim's shape, one at most; a permute names every axis once.
BOOST_AUTO_TEST_CASE(bad_reshapes_and_permutes_name_the_key) {
  expect_input_error(with_first_layer(R"({"type": "reshape", "shape": [0, 0]})"), "",
                     "workload.model.layers[0].shape: [0, 0]: at most one 0 (the size the others leave)");
  expect_input_error(with_first_layer(R"({"type": "reshape", "shape": [0, 5]})"), "",
                     "workload.model.layers[0].shape: [0, 5] leaves no whole size for its 0 from the 784 elements of the input [28, 28]");
  expect_input_error(with_first_layer(R"({"type": "permute", "perm": [0, 0]})"), "",
                     "workload.model.layers[0].perm: [0, 0] is not an order of the 2 axes of the input [28, 28] (0-based)");
  expect_input_error(with_first_layer(R"({"type": "slice", "shape": [0, 28]})"), "",
                     "workload.model.layers[0].shape: [0, 28] is not a part of the input [28, 28]");
}

BOOST_AUTO_TEST_CASE(typos_get_a_suggestion_on_one_line) {
  expect_input_error(kValid, "--hw tpu_v5", "--hw tpu_v5: unknown hardware preset (did you mean tpu_v5e or tpu_v5p?)");
  expect_input_error(kValid, "--set workload.training.global_bach=2048", "(did you mean workload.training.global_batch?)");
  expect_input_error(kValid, "--hw v5e-12", "--hw v5e-12: not a Cloud TPU v5e accelerator type");
}

BOOST_AUTO_TEST_CASE(missing_required_field) {
  expect_input_error(replaced("\"name\": \"mlp_mnist\",", ""), "", "workload.name: missing required key");
  expect_input_error(replaced("\"units\": 128, ", ""), "", "workload.model.layers[1].units: missing required key");
}

BOOST_AUTO_TEST_CASE(zero_negative_and_absurd_sizes) {
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": 0"), "",
                     "workload.training.global_batch: expected a positive batch");
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": -8"), "",
                     "workload.training.global_batch: expected integer between 0 and 1000000000");
  expect_input_error(replaced("\"units\": 128", "\"units\": 0"), "", "workload.model.layers[1].units: expected integer between 1");
  expect_input_error(kValid, "--topology 1000000x1000000x1000",
                     "hw.slice.topology: a 1000000x1000000x1000 slice has 1000000000000000 chips");
  expect_input_error(kValid, "--set workload.training.global_batch=1000000000000",
                     "workload.training.global_batch: expected integer between 0 and 1000000000");
  expect_input_error(kValid, "--topology 0x4", "hw.slice.topology: axis sizes must be at least 1");
}

BOOST_AUTO_TEST_CASE(global_batch_not_divisible_by_replicas) {
  expect_input_error(kValid, "--set workload.training.global_batch=1020",
                     "workload.training.global_batch: 1020 does not divide over the 8 replicas");
}

BOOST_AUTO_TEST_CASE(an_evaluation_needs_its_interval) {
  expect_input_error(kValid, "--set workload.training.eval.examples=50000",
                     "workload.training.eval.every_steps: expected a positive number of steps between evaluations");
  expect_input_error(kValid, "--set workload.training.eval.host_overhead_s=-1", "workload.training.eval.host_overhead_s");
}

BOOST_AUTO_TEST_CASE(unknown_preset_and_bad_overrides) {
  expect_input_error(kValid, "--hw tpu_v9", "--hw tpu_v9: unknown hardware preset");
  expect_input_error(kValid, "--set hw.hbm.bw=3", "hw.hbm.bw: unknown key");
  expect_input_error(kValid, "--set hw.hbm.bw_gbps=lots", "hw.hbm.bw_gbps: expected a number");
  expect_input_error(kValid, "--trace everything", "--trace");
}

BOOST_AUTO_TEST_CASE(overrides_are_validated_like_the_file) {
  expect_input_error(kValid, "--set 'workload.model.layers=[{\"type\":\"dense\"}]'",
                     "workload.model.layers[0].units: missing required key for a dense layer");
  expect_input_error(kValid, "--set 'workload.model.layers=[1]'", "workload.model.layers[0]: expected an object");
  expect_input_error(kValid, "--set workload.model.layers[1].activation=foo",
                     "workload.model.layers[1].activation: expected one of linear, relu");
  expect_input_error(kValid, "--set workload.model.layers[1].units=-5", "workload.model.layers[1].units: expected integer between 1");
}

BOOST_AUTO_TEST_CASE(sizes_beyond_the_arithmetic_are_refused_not_wrapped) {
  expect_input_error(kValid, "--set workload.model.input_shape=536870912,536870912,64",
                     "workload.model.input_shape: a sample of more than 1099511627776 elements");
  expect_input_error(kValid, "--set hw.core.vmem_bytes=65536",
                     "hw.core.vmem_bytes: 65536 bytes cannot hold one double-buffered matmul block");
  expect_input_error(kValid, "--set workload.name=..", "workload.name: expected 1 to 100 letters");
}

BOOST_AUTO_TEST_CASE(simulated_time_beyond_the_limit_is_a_one_line_simulation_error) {
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + dir.path("out") +
                                     "' --set workload.input_pipeline.host_samples_per_s=0.0001");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err.find("simulated time would pass") != std::string::npos, r.err);
  // Under ASan this exit once crashed LeakSanitizer (see tests/CMakeLists.txt): stderr is shown.
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
  BOOST_TEST(!fs::exists(dir.path("out")));
}

BOOST_AUTO_TEST_CASE(missing_workload_file) {
  const CommandResult r = run_tpusim("run /nonexistent/workload.json -o /nonexistent/out");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("/nonexistent/workload.json: no such file") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(unwritable_output_directory) {
  TempDir dir;
  const std::string blocker = dir.write("a_file", "not a directory");
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + blocker + "/out'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("cannot create the output directory") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(existing_output_is_never_overwritten_without_force) {
  TempDir dir;
  const std::string out = dir.path("out");
  fs::create_directory(out);
  dir.write("out/keep.txt", "mine");
  const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + out + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("pass --force") != std::string::npos);
  BOOST_TEST(read_file(out + "/keep.txt") == "mine");
}

// Found by fuzz_hardware: a number too large for a double is refused like any malformed JSON,
// not left to escape as an internal error.
BOOST_AUTO_TEST_CASE(numbers_beyond_a_double_are_malformed_json) {
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": 13e217728"), "", "malformed JSON");
  TempDir dir;
  const std::string hw = dir.write("hw.json", R"({"base": "tpu_v5e", "name": "x", "core": {"vmem_bytes": 13e217728}})");
  const CommandResult r = run_tpusim("dump-config --hw '" + hw + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("hw.json: malformed JSON: number overflow") != std::string::npos, r.err);
  // Placed like a syntax error: the line and column where the number ends.
  expect_input_error(replaced("\"global_batch\": 1024", "\"global_batch\": 1e400"), "",
                     "malformed JSON: number overflow parsing '1e400' at line ");
}

// Found by fuzz_hardware: an override that is not UTF-8 is an input error, not an escaping
// exception from the JSON library.
BOOST_AUTO_TEST_CASE(overrides_must_be_utf8) {
  const CommandResult r = run_tpusim("dump-config --set \"$(printf 'hw.ici.wraparound=nev\\262er')\"");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("not valid UTF-8") != std::string::npos, r.err);
}

// Found by the adversarial pass: a document nested ~80,000 levels deep (a 200 KB file) overflowed
// the stack of `run` (workload or hardware file) and of `trace-check` (exit 139, no message).
BOOST_AUTO_TEST_CASE(deeply_nested_documents_are_refused_not_a_crash) {
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  expect_input_error("{\"name\": \"x\", \"model\": " + deep + "}", "", "nested deeper than 256 levels");
  TempDir dir;
  const std::string hw = dir.write("hw.json", deep);
  const CommandResult r = run_tpusim("run '" + example_workload() + "' --hw '" + hw + "' -o '" + dir.path("out") + "'");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("hw.json: nested deeper than 256 levels") != std::string::npos, r.err);
  BOOST_TEST(!fs::exists(dir.path("out")));
  const std::string trace = dir.write("trace.json", "{\"traceEvents\": " + deep + "}");
  const CommandResult check = run_tpusim("trace-check '" + trace + "'");
  BOOST_TEST(check.exit_code == 1);
  BOOST_TEST(check.out.find("invalid: nested deeper than 256 levels") != std::string::npos, check.out);
  const CommandResult summary = run_tpusim("trace-summary '" + trace + "'");
  BOOST_TEST(summary.exit_code == 2);
  // One argument is at most 128 KiB on Linux: 1000 levels.
  const CommandResult set = run_tpusim("dump-config '" + example_workload() + "' --set 'workload.model.layers=" +
                                       std::string(1000, '[') + std::string(1000, ']') + "'");
  BOOST_TEST(set.exit_code == 2);
  BOOST_TEST(set.err.find("nested deeper than 256 levels") != std::string::npos);
  BOOST_TEST(set.err.size() < 400u);  // the value is cut, the line stays readable
}

// Found by the adversarial pass: /dev/zero as the workload was read forever, and a directory was
// reported as malformed JSON.
BOOST_AUTO_TEST_CASE(inputs_must_be_regular_files) {
  TempDir dir;
  for (const auto& [input, expected] : std::vector<std::pair<std::string, std::string>>{
           {"/dev/zero", "/dev/zero: not a regular file"}, {dir.path(""), "is a directory, not a file"}}) {
    const CommandResult r = run_tpusim("run '" + input + "' -o '" + dir.path("out") + "'");
    BOOST_TEST(r.exit_code == 2);
    BOOST_TEST(r.err.find(expected) != std::string::npos, r.err);
    BOOST_TEST(!fs::exists(dir.path("out")));
  }
  const CommandResult trace = run_tpusim("trace-check /dev/zero");
  BOOST_TEST(trace.exit_code == 2);
  BOOST_TEST(trace.err.find("not a regular file") != std::string::npos);
}

// Found by the adversarial pass: each of these was silently wrong, a second line, a wrapped
// number or an "internal error".
BOOST_AUTO_TEST_CASE(adversarial_inputs_get_one_clear_line) {
  TempDir dir;
  const std::string hw9 = dir.write("hw9.json", R"({"base": "tpu_v9", "name": "x"})");
  const std::string dup = dir.write("dup.json", "{\"training\": {\"steps\": 2}, " + kValid.substr(kValid.find('{') + 1));
  const std::string workload = "'" + example_workload() + "'";
  expect_one_line_errors({
           {"run " + workload + " --topology '2x2\n' -o '" + dir.path("o") + "'", "got \"2x2\\n\""},
           {"gemm -8 128 128", "expected a whole number of elements, got -8"},
           {"gemm 128 128 128 --block 100000x100000x100000", "gemm --block: a 100000x100000x100000 matmul block needs"},
           {"run " + workload + " --hw '" + hw9 + "' -o '" + dir.path("o") + "'", "hw9.json: hw.base: unknown hardware preset \"tpu_v9\""},
           {"runn " + workload, "unknown command \"runn\" (did you mean run?); the commands are run, list-params,"},
           {"dump-config " + workload + " --set hw.base=tpu_v4", "choose the preset with --hw, not with --set"},
           {"run '" + dup + "' -o '" + dir.path("o") + "'", "the key \"training\" appears twice"},
           // The second adversarial pass (docs/reliability.md):
           {"dump-config --set hw.=3", "--set hw.=3: malformed key path \"hw.\" (an empty key)"},
           {"membench --bytes -1", "--bytes: expected a whole number of bytes such as 4096, 64KiB or 1GiB, got -1"},
           {"collective --bytes -5", "--bytes: expected a whole number of bytes such as 4096, 64KiB or 1GiB, got -5"},
           {"trace-summary '" + example_workload() + "' --top -1", "--top: expected a whole number, got -1"},
           {"collective --bytes 1024 --group ''", "--group: expected all, or torus axes such as x, y, xy, xyz, got nothing"},
           {"collective --bytes 1024 --group xyz", "--group: a 2x2 slice has no z axis"},
           // Issue 41: a quoted list item kept its quotes as part of the name.
           {"dump-config --set 'hw.slice.shapes=\"2x2\"'", "expected a list of names like 2x2,4x4 or [\"2x2\", \"4x4\"]"},
           {"run " + workload + " --set workload.model.layers[0].type=patch_embedding --set workload.model.input_shape=[32,32,3] "
            "--set workload.model.layers[0].kernel=16 --set workload.model.layers[0].dim=8 --set workload.model.layers[0].positions=2 -o '" +
                dir.path("o") + "'",
            "workload.model.layers[0].positions: 2 positions for 4 tokens"},
           {"sweep " + workload + " -o '" + dir.path("o") + "' --vary workload.training.steps=1,2 --vary workload.training.steps=1",
            "sweep: workload.training.steps varies twice"},
           {"sweep " + workload + " -o '" + dir.path("o") + "' --vary hw.slice.topology=2x2 --topology 2x2,4x4",
            "sweep: topology varies twice (--topology and --vary hw.slice.topology)"}});
  BOOST_TEST(!fs::exists(dir.path("o")));
}

// Found by the adversarial pass: an end beyond 2^64 ps overflowed into an empty trace.
// Results that cannot be written to standard output are a failure, not a success.
BOOST_AUTO_TEST_CASE(a_full_standard_output_is_an_error) {
  TempDir dir;
  const int status = std::system(
      ("'" + std::string(TPUSIM_BINARY) + "' gemm 128 128 128 --json >/dev/full 2>'" + dir.path("err") + "'").c_str());
  BOOST_TEST(WEXITSTATUS(status) == 1);
  const std::string err = read_file(dir.path("err"));
  BOOST_TEST(err.find("writing to standard output failed: No space left on device") != std::string::npos, err);
}

BOOST_AUTO_TEST_CASE(a_trace_window_beyond_any_run_keeps_everything) {
  TempDir dir;
  const std::string out = dir.path("out");
  BOOST_REQUIRE(run_tpusim("run '" + example_workload() + "' -o '" + out + "' --trace-window 0:1e20").exit_code == 0);
  const CommandResult whole = run_tpusim("run '" + example_workload() + "' -o '" + dir.path("whole") + "'");
  BOOST_REQUIRE(whole.exit_code == 0);
  BOOST_TEST(read_file(out + "/trace.json") == read_file(dir.path("whole/trace.json")));
}

// Found by the adversarial pass: legal-looking models the lowering accepted and the end-of-run
// checks then blamed on tpusim ("MXU FLOPs ... a bug in tpusim"). They are refused at input time,
// naming the layer.
BOOST_AUTO_TEST_CASE(models_the_lowering_cannot_take_are_refused_naming_the_layer) {
  expect_input_error(replaced("{\"type\": \"dense\", \"name\": \"dense_1\"",
                              "{\"type\": \"dense\", \"name\": \"dead\", \"units\": 4}, "
                              "{\"type\": \"dense\", \"name\": \"dense_1\", \"inputs\": [\"dense\"]"),
                     "", "workload.model.layers[2]: nothing reads the output of \"dead\"");
  expect_input_error(replaced("{\"type\": \"dense\", \"name\": \"dense_1\"",
                              "{\"type\": \"embedding\", \"vocab\": 100, \"dim\": 8}, {\"type\": \"dense\", \"name\": \"dense_1\""),
                     "", "workload.model.layers[2]: an embedding looks up token ids");
}

// Found by the adversarial pass: accepted silently, or blamed on the wrong part.
BOOST_AUTO_TEST_CASE(inconsistent_hardware_and_heads_are_refused_and_oom_blames_the_right_part) {
  TempDir dir;
  const std::string hw = dir.write("hw.json", R"({"base": "tpu_v4", "name": "x", "hbm": {"timing": {"trfc_ns": 5000}}})");
  const CommandResult refresh = run_tpusim("dump-config --hw '" + hw + "'");
  BOOST_TEST(refresh.exit_code == 2);
  BOOST_TEST(refresh.err.find("hw.hbm.timing.trfc_ns: a refresh of 5000 ns does not fit the 3900 ns between refreshes") !=
                 std::string::npos, refresh.err);
  std::string gpt2 = read_file(source_path("workloads/examples/gpt2_small.json"));
  const std::string tied = "\"tied_weights\": true";
  BOOST_REQUIRE(gpt2.find(tied) != std::string::npos);
  const std::size_t units = gpt2.rfind("\"units\"", gpt2.find(tied));
  gpt2.replace(units, gpt2.find(',', units) - units, "\"units\": 7");
  expect_input_error(gpt2, "", "a head tied to the embedding's table has its 50257 outputs, not 7");
  // ResNet-50 on v2: 358 MB of weights, gradients and momentum per core fit in 378 MB, one
  // sample's 41 MB of activations beside them do not: the activations are to blame.
  const CommandResult oom = run_tpusim("run '" + source_path("workloads/examples/resnet50.json") +
                                       "' --set hw.hbm.capacity_bytes=756765536 --trace none -o '" + dir.path("oom") + "'");
  BOOST_TEST(oom.exit_code == 0, oom.err);
  const std::string summary = read_file(dir.path("oom/summary.json"));
  BOOST_TEST(summary.find("not even one sample's activations") != std::string::npos, summary);
}

// Found by the adversarial pass: 10^8 requests in flight took 16 GB in 30 s before anything ran.
BOOST_AUTO_TEST_CASE(membench_bounds_the_requests_in_flight) {
  const CommandResult r = run_tpusim("membench --outstanding 100000000");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("x --outstanding 100000000 requests in flight; at most 1048576") != std::string::npos, r.err);
}

// Found by the adversarial pass: `gemm 1048576 1048576 1048576 --max-memory 1` ended in
// "internal error: std::bad_alloc" while estimating, and 262144^3 was estimated at 2.76 GiB and
// peaked at 10.5 GB: the estimate now counts the block state of the largest matmul.
BOOST_AUTO_TEST_CASE(huge_matmuls_are_estimated_or_refused_before_allocating) {
  const CommandResult huge = run_tpusim("gemm 1048576 1048576 1048576 --max-memory 1");
  BOOST_TEST(huge.exit_code == 2);
  BOOST_TEST(huge.err.find("2147483648 blocks, more than the 67108864 tpusim simulates in one matmul") != std::string::npos,
             huge.err);
  const CommandResult big = run_tpusim("gemm 262144 262144 262144 --max-memory 1");
  BOOST_TEST(big.exit_code == 2);
  double gib = 0;
  const auto at = big.err.find("need about ");
  BOOST_REQUIRE(at != std::string::npos);
  BOOST_REQUIRE(std::sscanf(big.err.c_str() + at, "need about %lf GiB", &gib) == 1);
  BOOST_TEST(gib > 9.78 * 0.9);  // within -10% .. +30% of the 10.5 GB (9.78 GiB) it was measured to take
  BOOST_TEST(gib < 9.78 * 1.3);
}

// Found by the adversarial pass: a million activation layers were estimated at 12.8 MiB and
// peaked at 4.9 GB; refusing them took 16 s and 2.6 GB. The count is checked as soon as the
// file is read (and parsing is linear: a parser callback made it quadratic in an array's length).
BOOST_AUTO_TEST_CASE(a_model_of_too_many_layers_is_refused_when_read) {
  std::string layers;
  for (int i = 0; i < 100001; ++i) layers += "{\"type\": \"activation\"}, ";
  layers.resize(layers.size() - 2);  // the last ", "
  expect_input_error(replaced("{\"type\": \"flatten\"},", "{\"type\": \"flatten\"}, " + layers + ","), "",
                     "workload.model.layers: 100004 layers; tpusim takes at most 100000");
}

// Issue 43: the command line's own errors were CLI11's stock messages ("The following arguments
// were not expected: 4x4 --topolgy (see tpusim --help)"). Each is now one line in tpusim's
// voice, with the name it probably meant and the subcommand's help.
BOOST_AUTO_TEST_CASE(command_line_mistakes_get_one_line_with_a_suggestion) {
  TempDir dir;
  const std::string workload = "'" + example_workload() + "' -o '" + dir.path("o") + "'";
  const std::string near_miss = example_workload().substr(0, example_workload().size() - std::string("mnist.json").size()) +
                                "minst.json";  // mlp_minst.json beside mlp_mnist.json
  expect_one_line_errors({
           {"run " + workload + " --topolgy 4x4", "tpusim run: error: unknown option --topolgy (did you mean --topology?); see tpusim run --help"},
           {"run " + workload + " --topolgy=4x4", "unknown option --topolgy (did you mean --topology?)"},
           {"rnu " + workload, "tpusim: error: unknown command \"rnu\" (did you mean run?)"},
           {"run '" + near_miss + "' -o '" + dir.path("o") + "'", "minst.json: no such file (did you mean mlp_mnist.json?)"},
           {"sweep " + workload + " --vray workload.training.steps=1,2", "tpusim sweep: error: unknown option --vray (did you mean --vary?)"},
           {"run " + workload + " --trace opss", "--trace: expected one of none, steps, ops, tiles, got \"opss\" (did you mean ops?); see tpusim run --help"},
           {"run " + workload + " --topology", "tpusim run: error: --topology needs a value; see tpusim run --help"},
           {"run " + workload + " surplus", "tpusim run: error: unexpected argument \"surplus\"; see tpusim run --help"},
           {"--verison", "tpusim: error: unknown option --verison (did you mean --version?); see tpusim --help"},
           {"", "tpusim: error: a command is required; see tpusim --help"}});
  BOOST_TEST(!fs::exists(dir.path("o")));
}

// Issue 41: `training.eval.every_steps=1e-320` ran and reported 1.44e-313 samples/s. Every
// scalar key of the parameter table, with values hostile to its type, is refused in one line or
// runs to finite figures; never "ok" beside a figure that is not a number (JSON writes NaN and
// infinity as null). Exit 1 is allowed: the contract for a simulation that cannot finish (a
// host rate of 1e-320 samples/s would overflow simulated time).
BOOST_AUTO_TEST_CASE(every_key_with_hostile_values_is_refused_in_one_line_or_runs_to_finite_figures) {
  const std::map<tpusim::ParamType, std::vector<std::string>> hostile = {
      {tpusim::ParamType::Int, {"0", "-1", "1e-320", "0.5", "18446744073709551615", "1000000000000"}},
      {tpusim::ParamType::Float, {"0", "-1", "1e-320", "1e308", "nan", "inf"}},
      {tpusim::ParamType::Bool, {"2"}},
      {tpusim::ParamType::String, {"", std::string(300, 'x')}}};
  // Figures a run leaves null when the workload does not state what they need (its dataset).
  // Likewise the goodput without a failure rate (a hostile 0 for it).
  const auto may_be_null = [](const std::string& path) {
    return path.find("_to_train") != std::string::npos || path == "/cost/training_steps" || path == "/goodput";
  };
  std::vector<std::string> not_numbers;
  std::function<void(const nlohmann::json&, const std::string&)> walk = [&](const nlohmann::json& x, const std::string& path) {
    if (x.is_object())
      for (const auto& [k, v] : x.items()) walk(v, path + "/" + k);
    else if (x.is_array())
      for (std::size_t i = 0; i < x.size(); ++i) walk(x[i], path + "/" + std::to_string(i));
    else if ((x.is_null() && !may_be_null(path)) ||
             (x.is_number_float() && (!std::isfinite(x.get<double>()) ||
                                      (x.get<double>() != 0 && std::abs(x.get<double>()) < 1e-200))))  // 1e-313 samples/s is no figure either
      not_numbers.push_back(path);
  };
  // The evaluation's and the whole run's figures too, so that their keys matter.
  const std::string with_eval_and_dataset = "--set workload.training.eval.examples=10000 --set workload.training.eval.every_steps=100 "
                                            "--set workload.training.dataset_examples=60000 "
                                            "--set workload.training.goodput.failures_per_chip_hour=1e-4 "
                                            "--set workload.training.goodput.checkpoint_storage_gbps_per_host=1";
  TempDir dir;
  const std::string out = dir.path("o");
  std::size_t ran = 0, refused = 0;
  for (const tpusim::ParamSpec& p : tpusim::param_registry()) {
    if (p.path.find("[]") != std::string::npos || hostile.count(p.type) == 0) continue;
    for (const std::string& value : hostile.at(p.type)) {
      const std::string key = p.doc + "." + p.path;
      const CommandResult r = run_tpusim("run '" + example_workload() + "' -o '" + out + "' --force --trace none " +
                                         "--set workload.training.steps=3 " + with_eval_and_dataset + " --set '" + key + "=" + value + "'");
      BOOST_TEST_CONTEXT(key << "=" << value.substr(0, 24) << "\nstderr: " << r.err) {
        BOOST_TEST((r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2));
        if (r.exit_code != 0) {
          ++refused;
          BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
          BOOST_TEST(!fs::exists(out));
          continue;
        }
        ++ran;
        const nlohmann::json summary = nlohmann::json::parse(read_file(out + "/summary.json"));
        not_numbers.clear();
        walk(summary, "");
        BOOST_TEST(not_numbers.empty(), (not_numbers.empty() ? "" : not_numbers.front()));
        BOOST_TEST(summary["status"] == "ok");
        BOOST_TEST(summary["step_time_s"].get<double>() > 0);
        for (const char* word : {" nan", " inf", "-nan", "-inf"}) BOOST_TEST(r.out.find(word) == std::string::npos, word);
        fs::remove_all(out);
      }
    }
  }
  BOOST_TEST(ran > 50u);  // both outcomes are exercised
  BOOST_TEST(refused > 300u);
}

// Issue 41: the memory estimate was checked against the machine's memory and --max-memory, not
// the process's address-space limit (`ulimit -v`), so such a run died in bad_alloc mid-way.
BOOST_AUTO_TEST_CASE(the_memory_estimate_heeds_the_address_space_limit) {
#ifdef TPUSIM_ASAN
  BOOST_TEST_MESSAGE("skipped: AddressSanitizer reserves more address space than any such limit allows");
#else
  TempDir dir;
  const CommandResult r = run_tpusim("run '" + source_path("workloads/examples/resnet50.json") +
                                         "' --hw tpu_v4 --topology 8x8x8 --all-chips --trace none -o '" + dir.path("o") + "'",
                                     "ulimit -v 400000;");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("more than 390.6 MiB (the process's address-space limit (ulimit -v))") != std::string::npos, r.err);
  BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  BOOST_TEST(!fs::exists(dir.path("o")));
#endif
}

// Issue 41: a 2 MB gzip trace that inflates to 2 GiB was expanded whole by trace-check and
// trace-summary (6 GB peak, or bad_alloc). What is read is now bounded by the memory the parsed
// trace would take, and a larger trace refused as it is read.
BOOST_AUTO_TEST_CASE(a_trace_that_inflates_beyond_memory_is_refused_as_it_is_read) {
#ifdef TPUSIM_ASAN
  BOOST_TEST_MESSAGE("skipped: AddressSanitizer reserves more address space than any such limit allows");
#else
  TempDir dir;
  const std::string bomb = dir.path("bomb.json.gz");  // 200 MB of spaces in under 1 MB
  BOOST_REQUIRE(std::system(("head -c 200000000 /dev/zero | tr '\\0' ' ' | gzip -1 > '" + bomb + "'").c_str()) == 0);
  BOOST_REQUIRE(fs::file_size(bomb) < 2000000u);
  for (const char* command : {"trace-check", "trace-summary"}) {
    const CommandResult r = run_tpusim(std::string(command) + " '" + bomb + "'", "ulimit -v 900000;");
    BOOST_TEST_CONTEXT(command << "\nstderr: " << r.err) {
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(r.err.find("bytes of text once inflated") != std::string::npos);
      BOOST_TEST(r.err.find("(the process's address-space limit (ulimit -v))") != std::string::npos);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  }
#endif
}
