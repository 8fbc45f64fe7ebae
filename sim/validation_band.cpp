#include "sim/validation_band.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "workloads/layer_kind.hpp"

namespace tpusim {

namespace {

// What the band says of tpusim beyond the public set: checked against measurements outside it,
// it was two to five times less accurate, nearly always too fast (issue 37).
constexpr const char* kOffTheSet = "off the set tpusim has been 2-5x less accurate, mostly too fast";
// What marks a run over several slices in its kind.
constexpr const char* kMultislice = ", multislice";

}  // namespace

std::string training_run_kind(const std::string& hw_name, const ModelGraph& model, bool tensor_parallel, bool fsdp,
                              bool multislice, bool pipeline) {
  bool attention = false, convolution = false, experts = false;
  for (const Node& node : model.nodes) {
    attention = attention || node.spec.type == "attention";
    experts = experts || node.spec.type == "moe";
    convolution = convolution || node.spec.type == "conv2d" || node.spec.type == "depthwise_conv2d";
  }
  // A mixture of experts is a family of its own: its routing, all-to-alls and grouped matmuls are
  // nothing a dense transformer's points measured; so is a model of convolutions and attention
  // (a diffusion UNet), whose group norms, resampling and attention over pixels neither a
  // transformer's nor a convolutional network's points measured.
  const char* family = experts                   ? "mixture-of-experts"
                       : attention && convolution ? "convolution-and-attention"
                       : attention                ? "transformer"
                       : convolution              ? "convolutional"
                                                  : "other";
  return fmt::format("{} {} training{}{}{}{}", hw_name, family, tensor_parallel ? ", tensor parallel" : "", fsdp ? ", FSDP" : "",
                     pipeline ? ", pipeline" : "", multislice ? kMultislice : "");
}

std::string public_validation_set_path() { return TPUSIM_VALIDATION_SET; }

ValidationBand validation_band(const std::string& kind, const std::string& set_path) {
  ValidationBand band;
  band.kind = kind;
  nlohmann::json set;
  try {
    std::ifstream in(set_path, std::ios::binary);
    set = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    band.match = "none";
    band.text = fmt::format("the public validation set ({}) could not be read: this number's accuracy is unknown", set_path);
    return band;
  }
  // A point's error as a prediction: with every constant fitted on its own source refitted
  // without it (bench/validate.py's leave-one-source-out); a record without one gives its error.
  std::vector<double> exact, nearest;
  const std::string family_prefix = kind.substr(0, kind.find(" training") + std::string(" training").size());
  if (set.contains("recorded_points") && set["recorded_points"].is_object()) {
    for (const auto& [id, r] : set["recorded_points"].items()) {
      const char* field = r.is_object() && r.contains("loso_error_pct") ? "loso_error_pct" : "error_pct";
      if (!r.is_object() || !r.contains("kind") || !r["kind"].is_string() || !r.contains(field) || !r[field].is_number())
        continue;
      const std::string k = r["kind"].get<std::string>();
      const double error_pct = std::fabs(r[field].get<double>());
      if (k == kind) exact.push_back(error_pct);
      if (k.rfind(family_prefix, 0) == 0) nearest.push_back(error_pct);
    }
  }
  const std::vector<double>& chosen = exact.empty() ? nearest : exact;
  band.match = chosen.empty() ? "none" : exact.empty() ? "nearest" : "exact";
  band.points = chosen.size();
  if (chosen.empty()) {
    band.text = fmt::format("no public measurement of {}: this number is unvalidated ({})", family_prefix, kOffTheSet);
    return band;
  }
  double sum = 0, worst = 0;
  for (double e : chosen) {
    sum += e;
    worst = std::max(worst, e);
  }
  const double mean = sum / static_cast<double>(chosen.size());
  band.mean_abs_error_pct = std::round(mean * 10) / 10;
  band.worst_abs_error_pct = std::round(worst * 10) / 10;
  const std::string of = band.match == "exact" ? kind : family_prefix + " (other layouts)";
  // Points of one slice say nothing of the DCN between several.
  const bool unvalidated_dcn = band.match != "exact" && kind.find(kMultislice) != std::string::npos;
  band.text = fmt::format("{} public point{} of {}: mean |error| {:.1f}%, worst {:.1f}%, each predicted without its own source's "
                          "fits ({}){}", chosen.size(), chosen.size() == 1 ? "" : "s", of, mean, worst, kOffTheSet,
                          unvalidated_dcn ? "; none over several slices: the DCN stage is unvalidated" : "");
  return band;
}

}  // namespace tpusim
