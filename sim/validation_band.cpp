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
  // nothing a dense transformer's points measured.
  const char* family = experts ? "mixture-of-experts" : attention ? "transformer" : convolution ? "convolutional" : "other";
  return fmt::format("{} {} training{}{}{}{}", hw_name, family, tensor_parallel ? ", tensor parallel" : "", fsdp ? ", FSDP" : "",
                     pipeline ? ", pipeline" : "", multislice ? kMultislice : "");
}

std::string public_validation_set_path() { return TPUSIM_VALIDATION_SET; }

nlohmann::ordered_json validation_band(const std::string& kind, const std::string& set_path) {
  nlohmann::ordered_json band = {{"kind", kind}};
  nlohmann::json set;
  try {
    std::ifstream in(set_path, std::ios::binary);
    set = nlohmann::json::parse(in);
  } catch (const std::exception&) {
    band["match"] = "none";
    band["points"] = 0;
    band["text"] = fmt::format("the public validation set ({}) could not be read: this number's accuracy is unknown", set_path);
    return band;
  }
  struct Recorded {
    double error_pct;
    bool held_out;
  };
  std::vector<Recorded> exact, nearest;
  const std::string family_prefix = kind.substr(0, kind.find(" training") + std::string(" training").size());
  if (set.contains("recorded_points") && set["recorded_points"].is_object()) {
    for (const auto& [id, r] : set["recorded_points"].items()) {
      if (!r.is_object() || !r.contains("kind") || !r["kind"].is_string() || !r.contains("error_pct") || !r["error_pct"].is_number())
        continue;
      const std::string k = r["kind"].get<std::string>();
      const Recorded rec{r["error_pct"].get<double>(), r.value("held_out", false)};
      if (k == kind) exact.push_back(rec);
      if (k.rfind(family_prefix, 0) == 0) nearest.push_back(rec);
    }
  }
  const std::vector<Recorded>& chosen = exact.empty() ? nearest : exact;
  band["match"] = chosen.empty() ? "none" : exact.empty() ? "nearest" : "exact";
  band["points"] = chosen.size();
  if (chosen.empty()) {
    band["text"] = fmt::format("no public measurement of {}: this number is unvalidated ({})", family_prefix, kOffTheSet);
    return band;
  }
  const auto held = static_cast<std::size_t>(std::count_if(chosen.begin(), chosen.end(), [](const Recorded& r) { return r.held_out; }));
  double sum = 0, worst = 0;
  for (const Recorded& r : chosen) {
    if (held > 0 && !r.held_out) continue;
    sum += std::fabs(r.error_pct);
    worst = std::max(worst, std::fabs(r.error_pct));
  }
  const double mean = sum / static_cast<double>(held > 0 ? held : chosen.size());
  band["held_out_points"] = held;
  band["mean_abs_error_pct"] = std::round(mean * 10) / 10;
  band["worst_abs_error_pct"] = std::round(worst * 10) / 10;
  const std::string of = band["match"] == "exact" ? kind : family_prefix + " (other layouts)";
  // Points of one slice say nothing of the DCN between several.
  const bool unvalidated_dcn = band["match"] != "exact" && kind.find(kMultislice) != std::string::npos;
  band["text"] = fmt::format("{} public point{} of {}: {} mean |error| {:.1f}%, worst {:.1f}% ({}){}", chosen.size(),
                             chosen.size() == 1 ? "" : "s", of, held > 0 ? "held-out" : "fitted, in-set", mean, worst, kOffTheSet,
                             unvalidated_dcn ? "; none over several slices: the DCN stage is unvalidated" : "");
  return band;
}

}  // namespace tpusim
