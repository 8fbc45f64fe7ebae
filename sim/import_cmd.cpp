#include "sim/import_cmd.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sim/config.hpp"
#include "sim/errors.hpp"
#include "sim/json_input.hpp"
#include "workloads/import/keras_json.hpp"
#include "workloads/import/onnx_model.hpp"
#include "workloads/lower.hpp"

namespace tpusim {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// An HLO module is XLA's program, not a model of layers: `tpusim hlo` simulates it as it is.
bool is_hlo_text(const std::string& file) {
  const std::string extension = fs::path(file).extension().string();
  if (extension == ".hlo") return true;
  std::ifstream in(file);
  std::string first;
  in >> first;
  return first == "HloModule";
}

ImportedModel import_file(const std::string& file) {
  check_input_file(file, 0);  // a missing file is named with what lies beside it
  if (is_hlo_text(file))
    throw InputError(fmt::format("{}: an XLA HLO module is simulated as it is, each device's program as XLA scheduled it: "
                                 "tpusim hlo {} --hw PRESET --topology SHAPE (docs/hlo.md)", file, file));
  try {
    return fs::path(file).extension() == ".onnx" ? read_onnx_model_file(file) : import_keras_model(read_json_file(file), file);
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  }
}

// The workload's name: the model's, in the characters a workload name allows.
std::string workload_name(const std::string& model_name) {
  std::string name = std::regex_replace(model_name, std::regex("[^A-Za-z0-9_.-]"), "_");
  if (name.empty() || name[0] == '.' || name[0] == '-') name = "imported_" + name;
  return name.substr(0, 100);
}

// An existing file is replaced only with --force, and only when an earlier import wrote it.
void check_replaceable(const std::string& out, bool force) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(out, ec))) return;
  if (!force) throw InputError(fmt::format("{}: exists; give another -o, or --force to replace a workload tpusim import wrote", out));
  bool ours = false;
  if (fs::is_regular_file(fs::symlink_status(out, ec))) {
    std::ifstream in(out);
    try {
      const auto doc = nlohmann::json::parse(in);
      ours = doc.is_object() && doc.contains("model") && doc["model"].is_object() && doc["model"].contains("imported_from");
    } catch (const nlohmann::json::exception&) {
      ours = false;
    }
  }
  if (!ours)
    throw InputError(fmt::format("{}: exists and is not a workload tpusim import wrote; --force replaces only those", out));
}

}  // namespace

std::string run_import(const ImportRequest& r) {
  if (r.out.empty()) throw InputError("import: -o FILE: expected the workload file to write");
  if (r.per_replica_batch == 0) throw InputError("import --per-replica-batch: expected a positive number of samples");
  check_replaceable(r.out, r.force);
  const ImportedModel imported = import_file(r.file);

  ojson workload;
  workload["name"] = workload_name(imported.name);
  workload["description"] = fmt::format("{} as tpusim import read it", fs::path(r.file).filename().string());
  workload["model"] = imported.model;
  workload["model"]["imported_from"] = r.file;
  workload["training"] = {{"per_replica_batch", r.per_replica_batch}};
  const std::string text = workload.dump(2) + "\n";

  // Read back as `tpusim run` will, so that a model whose shapes do not fit is refused here,
  // naming its layer, and not written.
  const fs::path target = fs::absolute(r.out);
  const fs::path staging = target.parent_path() / fmt::format(".{}.{}.tmp", target.filename().string(), ::getpid());
  {
    std::ofstream out(staging, std::ios::binary);
    out << text;
    if (!out.flush()) {
      std::error_code ec;
      fs::remove(staging, ec);
      throw InputError(fmt::format("{}: cannot write the file", r.out));
    }
  }
  ModelGraph graph;
  std::string input_dtype;
  try {
    ConfigRequest request;
    request.workload_path = staging.string();
    const Config config = load_config(request);
    graph = analyze_model(config.workload);
    input_dtype = config.workload.input_dtype;
  } catch (const std::exception& e) {
    std::error_code ec;
    fs::remove(staging, ec);
    throw InputError(fmt::format("{}: imported, but tpusim cannot use the result: {}", r.file, e.what()));
  }
  std::error_code ec;
  fs::rename(staging, target, ec);
  if (ec) {
    fs::remove(staging, ec);
    throw InputError(fmt::format("{}: cannot write the file", r.out));
  }
  const std::string frozen = graph.frozen() > 0 ? fmt::format(", {} frozen", graph.frozen()) : "";
  std::string message = fmt::format("wrote {}: {} layers, {} parameters ({} trainable{}), input {} {}\n", r.out,
                                    graph.nodes.size(), graph.params(), graph.trainable(), frozen, shape_string(graph.input),
                                    input_dtype);
  for (const auto& note : imported.notes) message += fmt::format("  note: {}\n", note);
  message += fmt::format("  run it with: tpusim run {}\n", r.out);
  return message;
}

}  // namespace tpusim
