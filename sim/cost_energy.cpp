#include "sim/cost_energy.hpp"

#include <algorithm>
#include <cmath>

#include "workloads/model.hpp"

namespace tpusim {


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

CostSummary cost_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step) {
  const auto run = training_run(workload, step.global_batch, step.first_step_s, step.step_s);
  const auto& price = hw.chip.price_usd_per_chip_hour;
  const double chips = static_cast<double>(step.chips);
  CostSummary c;
  c.price_usd_per_chip_hour = price;
  if (price) {
    const double usd = cost_usd(step.step_s, chips, *price);
    c.usd_per_step = usd;
    c.usd_per_million_samples = usd / static_cast<double>(step.global_batch) * 1e6;
    c.samples_per_usd = static_cast<double>(step.global_batch) / usd;
    if (run) c.usd_to_train = cost_usd(run->time_s, chips, *price);
  }
  if (run) {
    c.training_steps = run->steps;
    c.time_to_train_s = run->time_s;
  }
  return c;
}

EnergySummary energy_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step) {
  EnergySummary e;
  const auto& power = hw.chip.power;
  if (!power) return e;
  // Power is linear in each chip's busy fractions and every chip has as many MXUs and HBM
  // channels as the next, so the slice's average busy fractions give the slice's exact total.
  const double watts = chip_power_w(*power, step.mxu_busy, step.hbm_busy);
  const double joules = watts * static_cast<double>(step.chips) * step.step_s;
  const auto run = training_run(workload, step.global_batch, step.first_step_s, step.step_s);
  e.activity = chip_activity(*power, step.mxu_busy, step.hbm_busy);
  e.chip_power_w = watts;
  e.idle_w = power->idle_w;
  e.max_w = power->max_w;
  e.typical_w = power->typical_w;
  e.joules_per_step = joules;
  e.joules_per_sample = joules / static_cast<double>(step.global_batch);
  // The whole run at the steady step's power: the first step's extra time is mostly waiting
  // for input, which this model does not price differently.
  if (run) e.kwh_to_train = watts * static_cast<double>(step.chips) * run->time_s / 3.6e6;
  return e;
}

double expected_wall_time_s(double solve_s, double interval_s, double write_s, double restart_s, double mtbf_s) {
  return mtbf_s * std::exp(restart_s / mtbf_s) * std::expm1((interval_s + write_s) / mtbf_s) * solve_s / interval_s;
}

double optimal_checkpoint_interval_s(double write_s, double mtbf_s) {
  if (write_s >= 2 * mtbf_s) return mtbf_s;
  const double x = std::sqrt(write_s / (2 * mtbf_s));
  return std::sqrt(2 * write_s * mtbf_s) * (1 + x / 3 + x * x / 9) - write_s;
}

double checkpoint_bytes(std::uint64_t parameters, std::uint64_t trainable_parameters, const std::string& optimizer) {
  return 4.0 * (static_cast<double>(parameters) +
                static_cast<double>(trainable_parameters) * optimizer_cost(optimizer).state_f32_per_param);
}

std::optional<Goodput> goodput(const HwConfig& hw, const Workload& workload, std::uint64_t chips, double checkpoint_bytes) {
  if (workload.failures_per_chip_hour <= 0 || chips == 0) return std::nullopt;
  const std::uint64_t hosts = (chips + hw.host.chips_per_host - 1) / hw.host.chips_per_host;
  Goodput g;
  g.mtbf_s = 3600.0 / (static_cast<double>(chips) * workload.failures_per_chip_hour);
  if (!std::isfinite(g.mtbf_s)) return std::nullopt;  // a rate too small to tell from none
  g.checkpoint_bytes = checkpoint_bytes;
  const double storage_bytes_per_s = static_cast<double>(std::max<std::uint64_t>(hosts, 1)) * workload.checkpoint_storage_gbps_per_host * 1e9;
  g.write_s = checkpoint_bytes / storage_bytes_per_s;
  g.restart_s = workload.restart_s + g.write_s;  // the checkpoint read back at the write's bandwidth
  g.optimal_interval = workload.checkpoint_interval_s <= 0;
  g.interval_s = g.optimal_interval ? optimal_checkpoint_interval_s(g.write_s, g.mtbf_s) : workload.checkpoint_interval_s;
  // The fraction does not depend on the run's length: one interval's worth of training. A
  // checkpoint that costs nothing is written continuously: the limit of that, e^(-restart / mtbf).
  g.fraction = g.interval_s > 0 ? g.interval_s / expected_wall_time_s(g.interval_s, g.interval_s, g.write_s, g.restart_s, g.mtbf_s)
                                : std::exp(-g.restart_s / g.mtbf_s);
  return g;
}

std::optional<GoodputSummary> goodput_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step,
                                              const std::optional<Goodput>& g) {
  if (!g) return std::nullopt;
  GoodputSummary j;
  j.failures_per_chip_hour = workload.failures_per_chip_hour;
  j.mtbf_s = g->mtbf_s;
  j.checkpoint_bytes = g->checkpoint_bytes;
  j.checkpoint_write_s = g->write_s;
  j.restart_and_read_s = g->restart_s;
  j.checkpoint_interval_s = g->interval_s;
  j.optimal_interval = g->optimal_interval;
  j.goodput = g->fraction;
  j.samples_per_s = static_cast<double>(step.global_batch) / step.step_s * g->fraction;
  const auto run = training_run(workload, step.global_batch, step.first_step_s, step.step_s);
  if (!run) return j;
  const double wall_s = run->time_s / g->fraction;  // Daly's expected wall time (the fraction is its ratio)
  j.time_to_train_s = wall_s;
  if (const auto& price = hw.chip.price_usd_per_chip_hour) j.usd_to_train = cost_usd(wall_s, static_cast<double>(step.chips), *price);
  if (const auto& power = hw.chip.power)
    j.kwh_to_train = chip_power_w(*power, step.mxu_busy, step.hbm_busy) * static_cast<double>(step.chips) * wall_s / 3.6e6;
  return j;
}

}  // namespace tpusim
