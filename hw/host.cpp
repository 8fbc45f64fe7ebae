#include "hw/host.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

namespace tpusim {
namespace {

// A host's own stream of draws: splitmix64 of the seed and the host's index, so that a host draws
// the same sequence whichever others are simulated.
std::uint64_t host_stream_seed(std::uint64_t seed, std::uint32_t host) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(host) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// An exponentially distributed time of mean `mean_s`, by inverting its distribution on a uniform
// draw in (0, 1] (mt19937_64's sequence is fixed by the standard; std::exponential_distribution's
// results differ between implementations).
Picos exponential_ps(std::mt19937_64& rng, double mean_s) {
  const double u = static_cast<double>((rng() >> 11) + 1) * 0x1.0p-53;
  return static_cast<Picos>(std::llround(-mean_s * std::log(u) * kPicosPerSecond));
}

}  // namespace

Host::Host(sc_core::sc_module_name name, std::uint32_t index, std::vector<std::uint32_t> chips,
           const HwConfig& hw, const InfeedSpec& infeed, std::uint32_t steps, EventSink* sink)
    : sc_module(name), wakes("wakes"), index_(index), chips_(std::move(chips)), hw_(hw), infeed_(infeed), steps_(steps),
      pcie_(chips_.size()), ready_ps_(chips_.size(), std::vector<Picos>(steps, kNotShipped)),
      consumed_(steps, 0) {
  UnitInfo producer;
  producer.path = fmt::format("host{}.input_pipeline", index);
  producer.kind = UnitKind::Host;
  producer.chip = kHostChip;
  producer.index = index;
  producer.label = "input_pipeline";
  producer.first_served_chip = chips_.front();  // a host serves consecutive chips (System)
  producer.served_chips = static_cast<std::uint32_t>(chips_.size());
  producer_reporter_ = Reporter(sink, producer);
  for (std::uint32_t s = 0; s < steps; ++s) batch_names_.push_back(fmt::format("batch {}", s));
  // A chip's PCIe link, one way: host to chip (the batches, and offloaded activations coming
  // back) or chip to host.
  const auto link = [&](std::size_t i, bool to_host) {
    UnitInfo pcie;
    pcie.path = fmt::format("host{}.pcie{}{}", index, i, to_host ? ".out" : "");
    pcie.kind = UnitKind::Pcie;
    pcie.chip = kHostChip;
    pcie.index = index;
    pcie.label = fmt::format("pcie {} chip{}", to_host ? "<-" : "->", chips_[i]);
    pcie.first_served_chip = chips_[i];
    pcie.served_chips = 1;
    return Reporter(sink, pcie);
  };
  for (std::size_t i = 0; i < chips_.size(); ++i) pcie_reporters_.push_back(link(i, false));
  if (infeed_.host_offload) {
    pcie_out_.resize(chips_.size());
    for (std::size_t i = 0; i < chips_.size(); ++i) pcie_out_reporters_.push_back(link(i, true));
  }
  produce_task_.rank = WakeQueue::rank(0, 0, 0);  // before any chip's
  produce_task_.run = [this] { produce(); };
}

std::uint32_t Host::slot(std::uint32_t chip) const {
  for (std::uint32_t i = 0; i < chips_.size(); ++i)
    if (chips_[i] == chip) return i;
  sc_assert(false && "chip not served by this host");
  return 0;
}

Picos Host::transfer(std::uint32_t chip, bool to_host, std::uint64_t bytes, Picos earliest_ps, const std::string* label,
                     std::uint32_t step) {
  const std::uint32_t i = slot(chip);
  sc_assert((!to_host || infeed_.host_offload) && "a copy to the host in a program without host offload");
  Occupancy& link = to_host ? pcie_out_[i] : pcie_[i];
  const Interval booked = link.reserve(now_ps(), earliest_ps, transfer_ps(bytes, hw_.host.pcie_bw_gbps));
  UnitRequest job;
  job.label = label;
  job.step = step;
  (to_host ? pcie_out_reporters_ : pcie_reporters_)[i].busy(booked, job, bytes);
  return booked.end + ns_to_ps(hw_.host.pcie_latency_ns);
}

void Host::consume(std::uint32_t, std::uint32_t step) {
  const std::uint32_t cores = static_cast<std::uint32_t>(chips_.size()) * hw_.chip.cores;
  if (++consumed_[step] == cores) {
    while (fully_consumed_ < steps_ && consumed_[fully_consumed_] == cores) ++fully_consumed_;
    wakes.call_at(now_ps(), produce_task_);  // a prefetch slot may have come free
    report_buffer();
  }
}

void Host::report_buffer() const {
  producer_reporter_.level(&buffer_counter_, "batches", now_ps(), produced_ - fully_consumed_);
}

void Host::start_of_simulation() { wakes.call_at(0, produce_task_); }

void Host::produce() {
  if (!started_) {
    started_ = true;
    const std::uint64_t samples =
        infeed_.samples_per_core * hw_.chip.cores * static_cast<std::uint64_t>(chips_.size());
    const long double exact_produce_ps =
        infeed_.host_samples_per_s > 0
            ? static_cast<long double>(samples) / infeed_.host_samples_per_s * kPicosPerSecond
            : 0.0L;
    check_time_limit(0, exact_produce_ps * steps_);
    produce_ps_ = static_cast<Picos>(exact_produce_ps);
    jitter_rng_.seed(host_stream_seed(infeed_.jitter_seed, index_));
  }
  const std::uint64_t bytes_per_chip = infeed_.bytes_per_core * hw_.chip.cores;
  while (step_being_produced_ < steps_) {
    const std::uint32_t step = step_being_produced_;
    if (!producing_) {
      if (step >= fully_consumed_ + infeed_.prefetch_batches) return;  // woken when a batch is consumed
      const Picos jitter_ps = infeed_.jittered() ? exponential_ps(jitter_rng_, infeed_.batch_jitter_mean_s) : 0;
      check_time_limit(now_ps(), produce_ps_ + jitter_ps);
      const Interval work{now_ps(), now_ps() + produce_ps_ + jitter_ps};
      producer_reporter_.busy(work, &batch_names_[step], step);
      produced_at_ps_ = work.end;
      producing_ = true;
    }
    if (!wakes.reached(produced_at_ps_, produce_task_, armed_ps_)) return;
    producing_ = false;
    ++produced_;
    report_buffer();
    for (std::size_t i = 0; i < chips_.size(); ++i) {
      const Interval link = pcie_[i].reserve(now_ps(), now_ps(), transfer_ps(bytes_per_chip, hw_.host.pcie_bw_gbps));
      UnitRequest shipment;
      shipment.label = &batch_names_[step];
      shipment.step = step;
      pcie_reporters_[i].busy(link, shipment, bytes_per_chip);
      ready_ps_[i][step] = link.end + ns_to_ps(hw_.host.pcie_latency_ns);
    }
    for (WakeQueue::Task* waiter : shipped_waiters_) wakes.call_at(now_ps(), *waiter);
    shipped_waiters_.clear();
    ++step_being_produced_;
  }
}

}  // namespace tpusim
