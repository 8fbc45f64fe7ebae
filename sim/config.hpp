// Loading the hardware and workload documents: presets and files, --topology and --set
// overrides, validation against the parameter registry (unknown keys, types, limits, required
// keys; errors name the JSON path), defaults, and the typed structs the simulation runs on.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hw/hw_config.hpp"
#include "workloads/workload.hpp"

namespace tpusim {

struct ConfigRequest {
  std::string workload_path;  // empty: hardware only (dump-config without a workload)
  std::string hw = "tpu_v2";  // preset name or JSON file
  // Whether `hw` was asked for (--hw) rather than the default: a workload file that is an
  // effective configuration ({"hw": ..., "workload": ...}) keeps its own hardware unless asked.
  bool hw_given = true;
  std::string topology;       // empty: the preset's slice
  std::uint32_t slices = 0;   // 0: the hardware's hw.slice.count
  std::vector<std::string> sets;  // "hw.hbm.bw_gbps=1000", "workload.training.global_batch=2048"
};

struct Config {
  nlohmann::json hw_doc;        // effective, defaults filled
  nlohmann::json workload_doc;  // effective, defaults filled; null without a workload
  HwConfig hw;
  Workload workload;
  std::string origin;  // where the documents came from, to prefix later input errors
  std::vector<std::string> input_files;  // the files read (workload, hardware file): never inside an output directory
  // Every file whose contents decide the results: the workload, a hardware file, the presets
  // read, an imported model. A resumed sweep compares their digests.
  std::vector<std::string> files_read;
  // The Cloud TPU accelerator type given as --hw or --topology ("v4-32"), and what it was taken
  // to mean ("v4-32 = tpu_v4 2x2x4 (16 chips; ...)"); empty when none was.
  std::string accelerator, accelerator_note;
  // What loading did that the user should hear of (an override that cleared its exclusive twin).
  std::vector<std::string> notes;
};

// Throws InputError with a one-line message naming the file or option and the JSON path.
Config load_config(const ConfigRequest& request);

// Whether a workload file is an effective configuration ({"hw": ..., "workload": ...}, as
// `run` writes to DIR/effective_config.json and `dump-config` prints).
bool is_effective_config(const nlohmann::json& doc);

// The files `request` reads: a hardware file (not a preset) and the workload.
std::vector<std::string> input_files(const ConfigRequest& request);

// The preset directory (TPUSIM_PRESET_DIR in the environment overrides the built-in one).
std::string preset_dir();
std::vector<std::string> preset_names();
// A preset or hardware file as a complete document (its base merged in), before overrides.
// `files_read`, when given, gets every file read (a hardware file and the preset it builds on).
nlohmann::json load_hw_document(const std::string& name_or_file, std::vector<std::string>* files_read = nullptr);

}  // namespace tpusim
