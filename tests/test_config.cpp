// Configuration: presets, the parameter registry, validation and overrides (in-process, no
// simulation).
#define BOOST_TEST_MODULE config
#include <regex>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "sim/hw_keys.hpp"
#include "sim/params.hpp"
#include "sim/names.hpp"
#include "sim/progress.hpp"
#include "hw/topology.hpp"
#include "workloads/lower.hpp"
#include "run_helpers.hpp"

using namespace tpusim;
using tpusim::test::TempDir;
using tpusim::test::source_path;
using tpusim::test::contains;
using tpusim::test::load_error;

namespace {



}  // namespace

BOOST_AUTO_TEST_CASE(every_preset_loads_and_reaches_its_documented_peak) {
  const auto names = preset_names();
  BOOST_TEST(names == std::vector<std::string>({"tpu_v2", "tpu_v3", "tpu_v4", "tpu_v5e", "tpu_v5p", "tpu_v6e", "tpu_v7"}));
  for (const auto& name : names) {
    BOOST_TEST_CONTEXT(name) {
      ConfigRequest request;
      request.hw = name;
      const Config config = load_config(request);
      const double modelled_tflops = config.hw.peak_bf16_flops_per_chip() / 1e12;
      BOOST_TEST(std::fabs(modelled_tflops / config.hw.chip.documented_peak_bf16_tflops - 1) < 0.01);
    }
  }
}

BOOST_AUTO_TEST_CASE(every_preset_value_cites_a_source) {
  for (const auto& name : preset_names()) {
    const auto doc = load_hw_document(name);
    for (const auto& p : param_registry()) {
      if (p.doc != "hw" || p.path == "name" || p.path == "sources" || p.path == "base") continue;
      // A user's heterogeneity or a test's fault, never a preset's value.
      if (p.path.rfind("slow_", 0) == 0 || p.path.rfind("faults", 0) == 0) continue;
      if (p.path == "slice.count") continue;  // how many slices a job takes, never the chip's
      // A source may cover a whole group of keys ("hbm.timing" for every hbm.timing.* value).
      bool cited = false;
      for (std::string key = p.path; !cited && !key.empty();) {
        cited = doc["sources"].contains(key);
        const auto dot = key.rfind('.');
        key = dot == std::string::npos ? "" : key.substr(0, dot);
      }
      BOOST_TEST_CONTEXT(name << " " << p.path) { BOOST_TEST(cited); }
    }
  }
}

// A user who clones the repository has only public material: a source tagged as evidence
// ([P] primary, [S] secondary, [M] a paper's figure) must say where a reader finds it.
BOOST_AUTO_TEST_CASE(every_preset_source_is_public) {
  const std::regex evidence_tag(R"(\[(P|S|M|S/M|S/P)(:[^\]]*)?\])");
  const std::regex public_locator(R"(https://|[\w.-]+/[\w.-]+@[0-9a-f]{7,40}:|et al\.|#[0-9]+)");
  for (const auto& name : preset_names()) {
    const auto doc = load_hw_document(name);
    for (const auto& [key, value] : doc["sources"].items()) {
      const auto text = value.get<std::string>();
      BOOST_TEST_CONTEXT(name << " " << key << ": " << text) {
        BOOST_TEST(text.find("shared/") == std::string::npos);
        BOOST_TEST(text.find("../") == std::string::npos);
        for (std::sregex_iterator it(text.begin(), text.end(), evidence_tag), end; it != end; ++it) {
          BOOST_TEST(std::regex_search(it->str(), public_locator), "tag without a public source: " << it->str());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(topology_and_set_override_the_documents) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.hw = "tpu_v4";
  request.topology = "4x4x4";
  request.sets = {"hw.hbm.bw_gbps=1000", "workload.training.global_batch=2048", "workload.model.layers[1].units=256"};
  const Config config = load_config(request);
  BOOST_TEST(config.hw.chip_count() == 64u);
  BOOST_TEST(config.hw.hbm.bw_gbps == 1000.0);
  BOOST_TEST(config.workload.global_batch == 2048u);
  BOOST_TEST(config.workload.layers[1].units == 256u);
  BOOST_TEST(config.hw_doc["slice"]["topology"] == "4x4x4");
}

BOOST_AUTO_TEST_CASE(set_is_type_checked_against_the_registry) {
  ConfigRequest request;
  request.workload_path = tpusim::test::example_workload();
  request.sets = {"hw.hbm.bw_gbps=fast"};
  BOOST_TEST(contains(load_error(request), "hw.hbm.bw_gbps: expected a number"));
  request.sets = {"workload.training.global_batch=12.5"};
  BOOST_TEST(contains(load_error(request), "expected an integer"));
  request.sets = {"hw.hbm.bandwidth=1"};
  BOOST_TEST(contains(load_error(request), "hw.hbm.bandwidth: unknown key"));
  request.sets = {"workload.model.layers[7].units=3"};
  BOOST_TEST(contains(load_error(request), "no element 7"));
  request.sets = {"hw.chip.megacore=yes"};
  BOOST_TEST(contains(load_error(request), "expected true or false"));
  request.sets = {"hbm.bw_gbps=1"};
  BOOST_TEST(contains(load_error(request), "must start with hw. or workload."));
  // Issue 41: a list written as JSON kept its quotes in each name ("\"2x2\"").
  request.hw = "tpu_v4";
  request.topology = "2x2x2";
  for (const std::string shapes : {"[\"2x2x2\", \"4x4x4\"]", "2x2x2, 4x4x4", "2x2x2,4x4x4"}) {
    request.sets = {"hw.slice.shapes=" + shapes};
    BOOST_TEST(load_config(request).hw_doc["slice"]["shapes"] == nlohmann::json({"2x2x2", "4x4x4"}), shapes);
  }
}

BOOST_AUTO_TEST_CASE(hardware_files_inherit_from_a_base_preset) {
  TempDir dir;
  const auto file = dir.write("mine.json", R"({"base": "tpu_v4", "name": "my_v4", "hbm": {"bw_gbps": 2000}})");
  ConfigRequest request;
  request.hw = file;
  const Config config = load_config(request);
  BOOST_TEST(config.hw.name == "my_v4");
  BOOST_TEST(config.hw.hbm.bw_gbps == 2000.0);
  BOOST_TEST(config.hw.core.mxu.per_core == 4u);  // from tpu_v4
  dir.write("bad.json", R"({"base": "tpu_v4", "hbm": {"bw": 2000}})");
  request.hw = dir.path("bad.json");
  BOOST_TEST(contains(load_error(request), "hw.hbm.bw: unknown key"));
}

BOOST_AUTO_TEST_CASE(defaults_fill_optional_workload_keys) {
  TempDir dir;
  const auto file = dir.write("w.json", R"({"name": "tiny", "model": {"input_shape": [64], "layers": [{"type": "dense", "units": 8}]},
                                           "training": {"per_replica_batch": 16}})");
  ConfigRequest request;
  request.workload_path = file;
  const Config config = load_config(request);
  BOOST_TEST(config.workload.optimizer == "adam");
  BOOST_TEST(config.workload.steps == 3u);
  BOOST_TEST(config.workload.layers[0].activation == "linear");
  BOOST_TEST(config.workload_doc["input_pipeline"]["prefetch_batches"] == 2);
}

BOOST_AUTO_TEST_CASE(shapes_a_generation_cannot_form_are_refused) {
  ConfigRequest request;
  request.hw = "tpu_v2";
  request.topology = "4x4x4";  // three axes need 6 ports; v2 has 4
  BOOST_TEST(contains(load_error(request), "needs 6 ICI ports"));
  request.topology = "32x32";  // 1024 chips, a v2 pod has 256
  BOOST_TEST(contains(load_error(request), "at most 256"));
  // Beyond a v3 pod only MLPerf's multipods: up to four 32x32 pods side by side along x, where
  // the long axis has no wraparound and each pod's 32 does.
  request.hw = "tpu_v3";
  request.topology = "64x64";
  BOOST_TEST(contains(load_error(request), "a 64x64 slice is more than one tpu_v3 pod of 1024 chips (hw.chip.max_chips); tpu_v3 pods "
                                           "join side by side along x: 64x32, 96x32, 128x32 (hw.slice.pod, hw.slice.max_pods)"));
  request.topology = "160x32";
  BOOST_TEST(contains(load_error(request), "more than one tpu_v3 pod"));
  request.topology = "128x32";
  const Config multipod = load_config(request);
  BOOST_TEST(multipod.hw.chip_count() == 4096u);
  const Torus torus(multipod.hw.slice_dims, Torus::wraps_for(multipod.hw.slice_dims, multipod.hw.ici));
  BOOST_TEST(!torus.wraps(0));
  BOOST_TEST(torus.wraps(1));
}

BOOST_AUTO_TEST_CASE(every_key_is_documented) {
  const std::string workload_doc = tpusim::test::read_file(tpusim::test::source_path("docs/workload_format.md"));
  const std::string hw_doc = tpusim::test::read_file(tpusim::test::source_path("docs/hardware_format.md"));
  for (const auto& p : param_registry()) {
    const std::string key = "`" + p.doc + "." + p.path + "`";
    BOOST_TEST_CONTEXT(key) { BOOST_TEST(contains(p.doc == "hw" ? hw_doc : workload_doc, key)); }
  }
}

namespace {

// A hardware block of its own, as docs/extending.md adds one: its fields and their declarations.
struct ExampleLinkConfig {
  double bw_gbps = 0;
  std::uint32_t lanes = 0;
  std::optional<double> price_usd;
  Wraparound wraparound = Wraparound::Never;
  double overhead_us = 0;

  template <typename Keys>
  void declare_keys(Keys& k) {
    k.key("bw_gbps", bw_gbps, {"GB/s", "Link bandwidth", 0, 1e6});
    k.key("lanes", lanes, {"lanes", "Serial lanes", 1, 64});
    k.optional("price_usd", price_usd, {"USD", "What one costs"});
    k.choice("wraparound", wraparound, kWraparoundNames, {"", "Which axes wrap around"});
    k.key("overhead_us", overhead_us, {"us", "Cost of one message", 0, 1e6, 2.5});
  }
};

}  // namespace

// Issue 40: a hardware block declares each key once, beside its field; the same declarations
// are the registry's entries and read a document into the fields.
BOOST_AUTO_TEST_CASE(the_hardware_blocks_declare_their_keys) {
  std::vector<ParamSpec> specs;
  HwKeyDeclarations declarations(specs);
  ExampleLinkConfig block;
  declarations.block("link", block);
  BOOST_TEST_REQUIRE(specs.size() == 5u);
  BOOST_TEST(specs[0].path == "link.bw_gbps");
  BOOST_TEST((specs[0].type == ParamType::Float && specs[0].unit == "GB/s" && specs[0].max == 1e6 && specs[0].required));
  BOOST_TEST((specs[1].type == ParamType::Int && specs[1].min == 1));
  BOOST_TEST(!specs[2].required);
  BOOST_TEST(specs[3].choices == (std::vector<std::string>{"never", "always", "full_axis", "multiple_of_4"}),
             boost::test_tools::per_element());
  BOOST_TEST((!specs[4].required && specs[4].default_value == 2.5));

  const nlohmann::json doc = {{"link", {{"bw_gbps", 90.0}, {"lanes", 8}, {"wraparound", "full_axis"}, {"overhead_us", 2.5}}}};
  HwKeyReader reader(doc);
  reader.block("link", block);
  BOOST_TEST(block.bw_gbps == 90.0);
  BOOST_TEST(block.lanes == 8u);
  BOOST_TEST(!block.price_usd);
  BOOST_TEST((block.wraparound == Wraparound::FullAxis));
  BOOST_TEST(block.overhead_us == 2.5);

  // tpusim's own blocks are listed from the same declarations, in their blocks' order.
  std::vector<ParamSpec> own;
  HwKeyDeclarations own_declarations(own);
  HwConfig().declare_keys(own_declarations);
  for (const ParamSpec& spec : own) {
    const ParamSpec* listed = find_param("hw", spec.path);
    BOOST_TEST_CONTEXT(spec.path) { BOOST_TEST((listed && listed->description == spec.description)); }
  }
  BOOST_TEST(own.size() > 60u);
}

// Issue 40: fuzz/run.sh seeds its targets with the repository's own presets and the workloads
// under 40 KB, as they are today, loaded as the targets load them. A seed refused by validation
// would fuzz nothing past it (the corpus's old copies had drifted so).
BOOST_AUTO_TEST_CASE(the_fuzz_seeds_are_valid_input) {
  namespace fs = std::filesystem;
  std::size_t presets = 0, workloads = 0;
  for (const auto& entry : fs::directory_iterator(source_path("hw/presets"))) {
    ConfigRequest request;  // as fuzz_hardware loads a document
    request.hw = entry.path().string();
    BOOST_TEST_CONTEXT(entry.path().filename()) { BOOST_CHECK_NO_THROW(load_config(request)); }
    ++presets;
  }
  for (const auto& entry : fs::directory_iterator(source_path("workloads/examples"))) {
    if (entry.path().extension() != ".json" || fs::file_size(entry.path()) >= 40 * 1024) continue;
    ConfigRequest request;  // as fuzz_workload loads and lowers a workload
    request.workload_path = entry.path().string();
    request.hw = "tpu_v5e";
    BOOST_TEST_CONTEXT(entry.path().filename()) {
      BOOST_CHECK_NO_THROW({
        const Config config = load_config(request);
        lower_training_step(config.workload, config.hw);
      });
    }
    ++workloads;
  }
  BOOST_TEST(presets >= 7u);
  BOOST_TEST(workloads >= 10u);
}

// Issue 18: Cloud TPU users name slices by accelerator type; `--hw v4-32` was refused.
BOOST_AUTO_TEST_CASE(cloud_tpu_accelerator_types_name_a_preset_and_its_default_slice) {
  struct Case {
    std::string name, preset, topology;
    std::uint64_t chips;
  };
  // The default shapes of the Cloud TPU documentation's tables (docs/hardware_format.md).
  for (const Case& c : std::vector<Case>{{"v2-8", "tpu_v2", "2x2", 4},
                                         {"v2-512", "tpu_v2", "16x16", 256},
                                         {"v3-32", "tpu_v3", "4x4", 16},
                                         {"v3-64", "tpu_v3", "4x8", 32},
                                         {"v3-2048", "tpu_v3", "32x32", 1024},
                                         {"v3-4096", "tpu_v3", "64x32", 2048},   // MLPerf v0.7's multipods:
                                         {"v3-8192", "tpu_v3", "128x32", 4096},  // pods side by side along x
                                         {"v4-8", "tpu_v4", "2x2x1", 4},
                                         {"v4-32", "tpu_v4", "2x2x4", 16},
                                         {"v4-128", "tpu_v4", "4x4x4", 64},
                                         {"v4-4096", "tpu_v4", "8x16x16", 2048},
                                         {"v5p-32", "tpu_v5p", "2x2x4", 16},
                                         {"v5p-256", "tpu_v5p", "4x4x8", 128},
                                         {"v5p-12288", "tpu_v5p", "16x16x24", 6144},
                                         {"v5e-1", "tpu_v5e", "1x1", 1},
                                         {"v5litepod-8", "tpu_v5e", "2x4", 8},
                                         {"v5e-256", "tpu_v5e", "16x16", 256},
                                         {"v6e-32", "tpu_v6e", "4x8", 32},
                                         {"v6e-256", "tpu_v6e", "16x16", 256},
                                         {"tpu7x-8", "tpu_v7", "2x2x1", 4},
                                         {"v7x-128", "tpu_v7", "4x4x4", 64},
                                         {"tpu7x-18432", "tpu_v7", "16x24x24", 9216}}) {
    BOOST_TEST_CONTEXT(c.name) {
      ConfigRequest request;
      request.hw = c.name;
      const Config config = load_config(request);
      BOOST_TEST(config.hw.name == c.preset);
      BOOST_TEST(topology_string(config.hw.slice_dims) == c.topology);
      BOOST_TEST(config.hw.chip_count() == c.chips);
      BOOST_TEST(contains(config.accelerator_note, c.name + " = " + c.preset + " " + c.topology));
      // The same name as --topology, on the default hardware.
      ConfigRequest as_topology;
      as_topology.topology = c.name;
      as_topology.hw_given = false;
      const Config shaped = load_config(as_topology);
      BOOST_TEST(shaped.hw.name == c.preset);
      BOOST_TEST(topology_string(shaped.hw.slice_dims) == c.topology);
    }
  }
  ConfigRequest bare;
  bare.hw = "v5e";
  BOOST_TEST(load_config(bare).hw.name == "tpu_v5e");
  BOOST_TEST(load_config(bare).accelerator.empty());
  // Another shape of the same chips is taken; another count, or another generation, is not.
  ConfigRequest reshaped;
  reshaped.hw = "v2-32";
  reshaped.topology = "2x8";
  BOOST_TEST(topology_string(load_config(reshaped).hw.slice_dims) == "2x8");
  reshaped.topology = "4x8";
  BOOST_TEST(contains(load_error(reshaped), "--topology 4x8: 32 chips, but --hw v2-32 is 16 chips"));
  ConfigRequest mixed;
  mixed.hw = "tpu_v4";
  mixed.topology = "v5e-16";
  BOOST_TEST(contains(load_error(mixed), "--topology v5e-16: a tpu_v5e slice, but --hw is tpu_v4"));
  ConfigRequest odd;
  odd.hw = "v4-31";
  BOOST_TEST(contains(load_error(odd), "--hw v4-31: not a Cloud TPU v4 accelerator type"));
}

// Issue 18: a typo got "unknown" without a suggestion.
BOOST_AUTO_TEST_CASE(typos_in_presets_keys_and_values_get_a_suggestion) {
  ConfigRequest preset;
  preset.hw = "tpu_v5";
  BOOST_TEST(contains(load_error(preset), "unknown hardware preset (did you mean tpu_v5e or tpu_v5p?)"), load_error(preset));
  ConfigRequest key;
  key.sets = {"hw.hbm.bw_gpbs=1000"};
  BOOST_TEST(contains(load_error(key), "hw.hbm.bw_gpbs: unknown key (did you mean hw.hbm.bw_gbps?)"), load_error(key));
  TempDir dir;
  ConfigRequest workload;
  workload.workload_path = dir.write("w.json", R"({"name": "w", "model": {"input_shape": [4], "layers": [{"type": "dense", "units": 2}],
    "loss": "mse"}, "training": {"global_bach": 8}})");
  BOOST_TEST(contains(load_error(workload), "workload.training.global_bach: unknown key (did you mean global_batch?)"),
             load_error(workload));
  workload.workload_path = source_path("workloads/examples/mlp_mnist.json");
  workload.sets = {"workload.training.global_bach=2048"};
  BOOST_TEST(contains(load_error(workload), "unknown key (did you mean workload.training.global_batch?)"), load_error(workload));
  workload.sets = {"workload.training.precision=mixed_bfloat"};
  BOOST_TEST(contains(load_error(workload), "got \"mixed_bfloat\" (did you mean mixed_bfloat16?)"), load_error(workload));
  // Nothing close: no guess.
  workload.sets = {"workload.training.precision=int4"};
  BOOST_TEST(!contains(load_error(workload), "did you mean"), load_error(workload));
}

// Issue 18: `--set workload.training.global_batch=2048` failed on every workload that sets
// per_replica_batch ("set either ..., not both"); byte counts took no units.
BOOST_AUTO_TEST_CASE(overriding_one_of_an_exclusive_pair_clears_the_other_and_says_so) {
  ConfigRequest request;
  request.workload_path = source_path("workloads/examples/resnet50.json");
  request.sets = {"workload.training.global_batch=2048"};
  const Config global = load_config(request);
  BOOST_TEST(global.workload.global_batch == 2048u);
  BOOST_TEST(global.workload.per_replica_batch == 0u);
  BOOST_REQUIRE(global.notes.size() == 1u);
  BOOST_TEST(contains(global.notes[0], "cleared workload.training.per_replica_batch (was 128)"), global.notes[0]);
  request.workload_path = source_path("workloads/examples/mlp_mnist.json");
  request.sets = {"workload.training.per_replica_batch=64"};
  const Config per_replica = load_config(request);
  BOOST_TEST(per_replica.workload.global_batch == 0u);
  BOOST_TEST(per_replica.workload.per_replica_batch == 64u);
  BOOST_TEST(contains(per_replica.notes.at(0), "cleared workload.training.global_batch (was 1024)"));
  // Set the way it already is: nothing to clear, nothing to say.
  request.sets = {"workload.training.global_batch=2048"};
  BOOST_TEST(load_config(request).notes.empty());
}

BOOST_AUTO_TEST_CASE(byte_counts_take_units) {
  BOOST_TEST(parse_byte_size("16GiB").value() == 16ull << 30);
  BOOST_TEST(parse_byte_size("16G").value() == 16ull << 30);
  BOOST_TEST(parse_byte_size("16GB").value() == 16ull << 30);
  BOOST_TEST(parse_byte_size("1.5KiB").value() == 1536u);
  BOOST_TEST(parse_byte_size("4096").value() == 4096u);
  BOOST_TEST(parse_byte_size("4096B").value() == 4096u);
  BOOST_TEST(!parse_byte_size("1.3B"));
  BOOST_TEST(!parse_byte_size("16 parsecs"));
  BOOST_TEST(!parse_byte_size("-8"));
  ConfigRequest request;
  request.sets = {"hw.hbm.capacity_bytes=16GiB", "hw.core.vmem_bytes=64MiB"};
  const Config config = load_config(request);
  BOOST_TEST(config.hw.hbm.capacity_bytes == 16ull << 30);
  BOOST_TEST(config.hw_doc["core"]["vmem_bytes"] == 64ull << 20);  // the effective document holds bytes
  request.sets = {"hw.hbm.capacity_bytes=16.3B"};
  BOOST_TEST(contains(load_error(request), "hw.hbm.capacity_bytes: expected a whole number of bytes"), load_error(request));
  // In a file as well.
  TempDir dir;
  ConfigRequest file;
  file.hw = dir.write("hw.json", R"({"base": "tpu_v4", "name": "big", "hbm": {"capacity_bytes": "64GiB"}})");
  BOOST_TEST(load_config(file).hw.hbm.capacity_bytes == 64ull << 30);
  file.hw = dir.write("bad.json", R"({"base": "tpu_v4", "name": "big", "hbm": {"capacity_bytes": "lots"}})");
  BOOST_TEST(contains(load_error(file), "hw.hbm.capacity_bytes: expected a whole number of bytes"), load_error(file));
}

// Issue 43: list-params printed its unit column 10 wide, and "USD/chip-hour" pushed its row's
// default and description out of line. Every column is now as wide as its longest entry.
BOOST_AUTO_TEST_CASE(list_params_columns_hold_their_longest_entry) {
  const auto text = tpusim::test::run_tpusim("list-params --hw tpu_v5p");
  const auto rows = nlohmann::json::parse(tpusim::test::run_tpusim("list-params --hw tpu_v5p --json").out);
  BOOST_REQUIRE(text.exit_code == 0);
  std::size_t described = 0;
  std::stringstream lines(text.out);
  std::size_t description_column = 0;
  for (std::string line; std::getline(lines, line);) {
    for (const auto& row : rows) {
      const std::string key = row["key"].get<std::string>(), description = row["description"].get<std::string>();
      if (line.rfind(key + " ", 0) != 0 || line.size() < description.size()) continue;
      const std::size_t column = line.size() - description.size();
      BOOST_TEST(line.substr(column) == description, line);
      if (description_column == 0) description_column = column;
      BOOST_TEST(column == description_column, line);  // every row's description starts in one column
      ++described;
    }
  }
  BOOST_TEST(described == rows.size());
  BOOST_TEST(contains(text.out, "USD/chip-hour "));
}

BOOST_AUTO_TEST_CASE(durations_and_time_left_read_as_a_person_says_them) {
  BOOST_TEST(duration_text(0.4) == "0 s");
  BOOST_TEST(duration_text(59.4) == "59 s");
  BOOST_TEST(duration_text(190) == "3 min 10 s");
  BOOST_TEST(duration_text(7500) == "2 h 5 min");
  BOOST_TEST(time_left_text(30, 1, 4) == "about 1 min 30 s left");  // three more at 30 s each
  BOOST_TEST(time_left_text(30, 1, 4, 20) == "about 1 min 10 s left");  // 20 s of the next spent
  BOOST_TEST(time_left_text(30, 0, 4) == "");                        // no pace yet
  BOOST_TEST(time_left_text(30, 4, 4) == "");                        // done
}

// Issue 39: a fleet's spread of slow parts as configuration. hw.slow_chip_draw makes a seeded
// fraction of the slice slow, with clocks drawn between min and max: the same seed the same
// chips (written-out mapping, not a library distribution), another seed others; chips that
// hw.slow_chips names are not drawn again.
BOOST_AUTO_TEST_CASE(a_seeded_fraction_of_slow_chips_is_drawn_the_same_way_every_time) {
  auto slow_of = [](std::vector<std::string> sets) {
    ConfigRequest request;
    request.hw = "tpu_v4";
    request.topology = "4x4x4";
    request.sets = std::move(sets);
    return load_config(request).hw.slow_chips;
  };
  const std::vector<std::string> draw = {"hw.slow_chip_draw.fraction=0.125", "hw.slow_chip_draw.core_freq_scale_min=0.8",
                                         "hw.slow_chip_draw.core_freq_scale_max=0.95"};
  const auto a = slow_of(draw), b = slow_of(draw);
  BOOST_TEST_REQUIRE(a.size() == 8u);  // 12.5% of 64 chips
  std::set<std::uint32_t> chips;
  for (std::size_t i = 0; i < a.size(); ++i) {
    BOOST_TEST(a[i].chip == b[i].chip);
    BOOST_TEST(a[i].core_freq_scale == b[i].core_freq_scale);
    BOOST_TEST(a[i].core_freq_scale >= 0.8);
    BOOST_TEST(a[i].core_freq_scale <= 0.95);
    BOOST_TEST(a[i].hbm_bw_scale == 1.0);
    chips.insert(a[i].chip);
  }
  BOOST_TEST(chips.size() == 8u);
  std::vector<std::string> reseeded = draw;
  reseeded.push_back("hw.slow_chip_draw.seed=2");
  const auto c = slow_of(reseeded);
  bool same = true;
  for (std::size_t i = 0; i < c.size(); ++i) same = same && c[i].chip == a[i].chip;
  BOOST_TEST(!same);
  std::vector<std::string> named = draw;
  named.push_back(fmt::format("hw.slow_chips=[{{\"chip\": {}, \"core_freq_scale\": 0.5}}]", a[0].chip));
  const auto d = slow_of(named);
  BOOST_TEST(d.size() == 9u);  // the named chip, and eight drawn among the others
  BOOST_TEST(std::count_if(d.begin(), d.end(), [&](const SlowChip& s) { return s.chip == a[0].chip; }) == 1);
  ConfigRequest bad;
  bad.hw = "tpu_v4";
  bad.sets = {"hw.slow_chip_draw.core_freq_scale_min=0.99", "hw.slow_chip_draw.core_freq_scale_max=0.9"};
  BOOST_TEST(contains(load_error(bad), "hw.slow_chip_draw.core_freq_scale_min: 0.99 is above hw.slow_chip_draw.core_freq_scale_max (0.9)"));
}
