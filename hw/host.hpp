// A host: produces each step's input batch for its chips at a fixed preprocessing rate, ships it
// over each chip's PCIe link, and runs at most `prefetch_batches` steps ahead of the slowest of
// its cores. A core's infeed op waits for its batch; input-bound steps emerge from that wait.
#pragma once

#include <random>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/sc_support.hpp"
#include "hw/wake_queue.hpp"

namespace tpusim {

struct InfeedSpec {
  std::uint64_t bytes_per_core = 0;    // per step
  std::uint64_t samples_per_core = 0;  // per step
  double host_samples_per_s = 0;       // preprocessing rate of one host; 0: unlimited
  std::uint32_t prefetch_batches = 2;
  // A batch's preparation takes this much longer on average, drawn at random for each host and
  // batch (exponentially distributed) from `jitter_seed`; 0: never.
  double batch_jitter_mean_s = 0;
  std::uint64_t jitter_seed = 1;
  // Whether the hosts' batches come late at random: each host then differs from the next.
  bool jittered() const { return batch_jitter_mean_s > 0; }
  // The program copies activations to the host and back (OpKind::HostTransfer): the PCIe links'
  // chip-to-host direction gets tracks of its own.
  bool host_offload = false;
};

// The input pipeline is a state machine the host's WakeQueue runs (a task), not a thread.
class Host : public sc_core::sc_module {
 public:
  // The scheduler of this host's and its chips' processes (hw/wake_queue.hpp).
  WakeQueue wakes;
  Host(sc_core::sc_module_name name, std::uint32_t index, std::vector<std::uint32_t> chips,
       const HwConfig& hw, const InfeedSpec& infeed, std::uint32_t steps, EventSink* sink);

  static constexpr Picos kNotShipped = ~Picos{0};
  // When the batch of `step` is in `chip`'s HBM; kNotShipped until the host has sent it.
  Picos ready_ps(std::uint32_t chip, std::uint32_t step) const { return ready_ps_[slot(chip)][step]; }
  // Runs `task` once the next batch has been shipped (a core's infeed waiting for its batch).
  void wake_when_shipped(WakeQueue::Task& task) { shipped_waiters_.push_back(&task); }
  // A core has taken its batch of `step`; frees a prefetch slot once every core has.
  void consume(std::uint32_t chip, std::uint32_t step);
  std::uint32_t index() const { return index_; }
  // Which of this host's chips `chip` is (a chip's place in its cell: hw/wake_queue.hpp).
  std::uint32_t slot(std::uint32_t chip) const;
  // Books `bytes` on `chip`'s PCIe link one way (a link carries each way at once: to the host
  // beside the input batches coming in) from `earliest_ps`; returns when they have landed.
  Picos transfer(std::uint32_t chip, bool to_host, std::uint64_t bytes, Picos earliest_ps, const std::string* label,
                 std::uint32_t step);

 private:
  void start_of_simulation() override;
  void produce();  // goes on producing batches as far as the prefetch slots let it

  std::uint32_t index_;
  std::vector<std::uint32_t> chips_;
  const HwConfig& hw_;
  InfeedSpec infeed_;
  std::uint32_t steps_;
  std::vector<std::string> batch_names_;
  Reporter producer_reporter_;
  std::vector<Reporter> pcie_reporters_;
  std::vector<Occupancy> pcie_;                       // host to chip
  std::vector<Reporter> pcie_out_reporters_;
  std::vector<Occupancy> pcie_out_;                   // chip to host
  std::vector<std::vector<Picos>> ready_ps_;          // [chip slot][step]
  std::vector<std::uint32_t> consumed_;               // per step: cores that took it
  std::uint32_t fully_consumed_ = 0;                  // steps every core has taken
  std::uint32_t produced_ = 0;                        // batches preprocessed
  std::string buffer_counter_ = "input buffer";      // batches produced and not yet taken by every core
  void report_buffer() const;
  std::vector<WakeQueue::Task*> shipped_waiters_;
  WakeQueue::Task produce_task_;
  bool started_ = false;
  bool producing_ = false;            // a batch is being preprocessed, until produced_at_ps_
  std::uint32_t step_being_produced_ = 0;
  Picos produce_ps_ = 0;              // one batch's preprocessing, without jitter
  Picos produced_at_ps_ = 0;
  Picos armed_ps_ = 0;
  std::mt19937_64 jitter_rng_;
};

}  // namespace tpusim
