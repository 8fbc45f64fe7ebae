#include "sim/cost_energy.hpp"

#include <algorithm>

namespace tpusim {

using ojson = nlohmann::ordered_json;

std::optional<TrainingRun> training_run(const Workload& workload, std::uint64_t global_batch, double first_step_s,
                                        double step_s) {
  if (workload.dataset_examples == 0 || global_batch == 0) return std::nullopt;
  TrainingRun run;
  run.steps_per_epoch = (workload.dataset_examples + global_batch - 1) / global_batch;
  run.steps = run.steps_per_epoch * workload.epochs;
  run.time_s = first_step_s + static_cast<double>(run.steps - 1) * step_s;
  return run;
}

double cost_usd(double seconds, double chips, double usd_per_chip_hour) {
  return seconds * chips * usd_per_chip_hour / 3600.0;
}

double chip_activity(const ChipPower& power, double mxu_busy, double hbm_busy) {
  const double a = power.mxu_share * mxu_busy + (1.0 - power.mxu_share) * hbm_busy;
  return std::clamp(a, 0.0, 1.0);  // busy fractions are at most 1 (an end-of-run check), so is a
}

double chip_power_w(const ChipPower& power, double mxu_busy, double hbm_busy) {
  return power.idle_w + (power.max_w - power.idle_w) * chip_activity(power, mxu_busy, hbm_busy);
}

ojson cost_json(const HwConfig& hw, const Workload& workload, const StepFigures& step) {
  const auto run = training_run(workload, step.global_batch, step.first_step_s, step.step_s);
  const auto& price = hw.chip.price_usd_per_chip_hour;
  const double chips = static_cast<double>(step.chips);
  ojson c;
  c["price_usd_per_chip_hour"] = price ? ojson(*price) : ojson(nullptr);
  ojson per_step = nullptr, per_million = nullptr, per_usd = nullptr, to_train = nullptr;
  if (price) {
    const double usd = cost_usd(step.step_s, chips, *price);
    per_step = usd;
    per_million = usd / static_cast<double>(step.global_batch) * 1e6;
    per_usd = static_cast<double>(step.global_batch) / usd;
    if (run) to_train = cost_usd(run->time_s, chips, *price);
  }
  c["usd_per_step"] = per_step;
  c["usd_per_million_samples"] = per_million;
  c["samples_per_usd"] = per_usd;
  c["training_steps"] = run ? ojson(run->steps) : ojson(nullptr);
  c["time_to_train_s"] = run ? ojson(run->time_s) : ojson(nullptr);
  c["usd_to_train"] = to_train;
  return c;
}

ojson energy_json(const HwConfig& hw, const Workload& workload, const StepFigures& step) {
  ojson e;
  const auto& power = hw.chip.power;
  if (!power) {
    for (const char* key : {"activity", "chip_power_w", "idle_w", "max_w", "typical_w", "joules_per_step", "joules_per_sample",
                            "kwh_to_train"})
      e[key] = nullptr;
    return e;
  }
  // Power is linear in each chip's busy fractions and every chip has as many MXUs and HBM
  // channels as the next, so the slice's average busy fractions give the slice's exact total.
  const double watts = chip_power_w(*power, step.mxu_busy, step.hbm_busy);
  const double joules = watts * static_cast<double>(step.chips) * step.step_s;
  const auto run = training_run(workload, step.global_batch, step.first_step_s, step.step_s);
  e["activity"] = chip_activity(*power, step.mxu_busy, step.hbm_busy);
  e["chip_power_w"] = watts;
  e["idle_w"] = power->idle_w;
  e["max_w"] = power->max_w;
  e["typical_w"] = power->typical_w ? ojson(*power->typical_w) : ojson(nullptr);
  e["joules_per_step"] = joules;
  e["joules_per_sample"] = joules / static_cast<double>(step.global_batch);
  // The whole run at the steady step's power: the first step's extra time is mostly waiting
  // for input, which this model does not price differently.
  e["kwh_to_train"] = run ? ojson(watts * static_cast<double>(step.chips) * run->time_s / 3.6e6) : ojson(nullptr);
  return e;
}

}  // namespace tpusim
