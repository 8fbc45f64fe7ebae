// What a simulated step costs in money and energy, and what a whole training run takes: plain
// arithmetic on the step time, the slice and the utilizations the simulation measured, kept
// apart from the simulation so that each formula is tested on its own.
//
// Cost: a slice is billed per chip-hour while it runs, so a step costs its wall time x chips x
// the price. Energy: one chip draws idle_w + (max_w - idle_w) x activity, where activity is the
// MXUs' and HBM's busy fractions weighted by mxu_share (docs/cost_energy.md says what this is
// calibrated on and what it is not validated against).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hw/hw_config.hpp"
#include "traces/summary.hpp"
#include "workloads/workload.hpp"

namespace tpusim {

// The training run a workload states (training.dataset_examples x training.epochs).
struct TrainingRun {
  std::uint64_t steps_per_epoch = 0;
  std::uint64_t steps = 0;
  double time_s = 0;
};

// Each epoch is ceil(examples / global batch) steps: a static-shape TPU program pads the last,
// partial batch to a full one, so it costs a whole step. The first step takes its own (longer)
// time, every later one the steady-state step time. Empty when no dataset size is stated.
std::optional<TrainingRun> training_run(const Workload& workload, std::uint64_t global_batch, double first_step_s,
                                        double step_s);

// USD for `seconds` of `chips` chips at `usd_per_chip_hour`, as seconds x chips x price / 3600.
double cost_usd(double seconds, double chips, double usd_per_chip_hour);

// Between 0 (nothing busy) and 1 (MXUs and HBM busy throughout), given busy fractions in [0, 1].
double chip_activity(const ChipPower& power, double mxu_busy, double hbm_busy);
double chip_power_w(const ChipPower& power, double mxu_busy, double hbm_busy);

struct StepFigures {
  double step_s = 0;
  double first_step_s = 0;
  std::uint64_t chips = 0;
  std::uint64_t global_batch = 0;
  double mxu_busy = 0;  // busy fraction of every MXU of the slice over the step
  double hbm_busy = 0;  // likewise of every HBM channel
};

// The summary's cost: price, USD per step, per million samples, samples per USD and, when the
// workload states its dataset, the training run's steps, time and USD. Money figures are empty
// without a price; the run's steps and time are given whatever the price.
CostSummary cost_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step);

// The summary's energy: activity, average chip power, joules per step and per sample and, with a
// stated dataset, kWh to train; every figure empty when the chip has no power model.
EnergySummary energy_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step);

// Goodput over a whole run (Young 1974; J. T. Daly, "A higher order estimate of the optimum
// checkpoint interval for restart dumps", Future Generation Computer Systems 22(3), 2006): a
// synchronous job stops at any chip's failure, failures arrive at random (exponentially
// distributed, so the slice's mean time between them is 1 / (chips x rate)), and each costs a
// restart, the checkpoint's reading back and the work since the last checkpoint. Daly's expected
// wall time for `solve_s` of failure-free training, checkpointing every `interval_s` of it at
// `write_s` a checkpoint and restarting in `restart_s`, failures `mtbf_s` apart:
//   mtbf e^(restart / mtbf) (e^((interval + write) / mtbf) - 1) solve / interval.
double expected_wall_time_s(double solve_s, double interval_s, double write_s, double restart_s, double mtbf_s);
// Daly's higher-order estimate of the interval that minimizes it: sqrt(2 write mtbf) (1 + x / 3 +
// x^2 / 9) - write with x = sqrt(write / (2 mtbf)), for write < 2 mtbf; mtbf beyond. To first order
// Young's sqrt(2 write mtbf).
double optimal_checkpoint_interval_s(double write_s, double mtbf_s);

struct Goodput {
  double mtbf_s = 0;            // of the whole slice
  double checkpoint_bytes = 0;  // f32 weights and optimizer state, one copy
  double write_s = 0;           // one checkpoint, every host writing its share at once
  double restart_s = 0;         // the job's restart and the checkpoint read back (restart_and_read_s)
  double interval_s = 0;        // training time between checkpoints
  bool optimal_interval = false;
  double fraction = 0;          // failure-free time / expected wall time
};
// Empty when the workload states no failure rate. The slice's hosts write and read the checkpoint
// side by side. A fraction of 0 (or a write that never ends) is a job that would never finish.
std::optional<Goodput> goodput(const HwConfig& hw, const Workload& workload, std::uint64_t chips, double checkpoint_bytes);
// What a checkpoint holds, what a restart needs: the f32 weights (frozen ones too) and the
// trainable ones' optimizer slots, one copy of each however they are sharded or replicated.
double checkpoint_bytes(std::uint64_t parameters, std::uint64_t trainable_parameters, const std::string& optimizer);

// The summary's goodput (empty without a failure rate, `goodput` empty): its figures, the
// throughput with failures, and with a stated dataset the time, USD and kWh to train with them
// (the kWh at the steady step's power throughout: restarts and checkpoint writes draw less, so an
// upper bound).
std::optional<GoodputSummary> goodput_summary(const HwConfig& hw, const Workload& workload, const StepFigures& step,
                                              const std::optional<Goodput>& goodput);

}  // namespace tpusim
