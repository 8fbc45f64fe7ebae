// The training-step driver: lowers one data-parallel step of a workload into the program every
// core replays (forward, loss, backward dX and dW, per-layer gradient all-reduce issued as soon
// as the layer's gradients exist, optimizer update), and works out the per-core memory footprint.
#pragma once

#include "hw/host.hpp"
#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "workloads/model.hpp"
#include "workloads/sharding.hpp"
#include "workloads/workload.hpp"

namespace tpusim {

struct MemoryFootprint {  // per core, bytes
  std::uint64_t parameters = 0;
  std::uint64_t gradients = 0;
  std::uint64_t optimizer_state = 0;
  std::uint64_t activations = 0;
  std::uint64_t total() const { return parameters + gradients + optimizer_state + activations; }
};

// A pipeline-parallel step (training.mesh.pipeline): stages, microbatches per replica, chunks
// each stage holds, and the iterations every stage runs (microbatches x repeats + stages - 1).
struct PipelineSchedule {
  std::uint32_t stages = 1, microbatches = 1, repeats = 1, iterations = 1;
  std::uint32_t layers_per_chunk = 0, model_layers = 0;
  // The bubble of the ideal schedule: (stages - 1) / iterations.
  double ideal_bubble_fraction() const { return static_cast<double>(stages - 1) / static_cast<double>(iterations); }
};

struct LoweredStep {
  Program program;
  ModelGraph model;       // the model, whole
  ModelGraph core_model;  // what one core runs: the model, its layers split over a mesh's model axis
  Mesh mesh;  // the slice's data and model axes (model_size 1: data parallelism only)
  PipelineSchedule pipeline;  // stages 1: no pipeline
  std::uint64_t global_batch = 0;  // over every slice
  std::uint32_t replicas = 0;      // in one slice
  std::uint64_t per_replica_batch = 0;
  std::uint64_t per_core_batch = 0;
  double model_flops_per_core = 0;  // analytic matmul FLOPs of one step on one core
  // The same from the layers' textbook counts (not from the ops), for the end-of-run check.
  double textbook_flops_per_core = 0;
  // Of every slice: the cores' sum, or, with a model axis, the whole model's count at the
  // global batch (a replicated layer's duplicated work is no model FLOP).
  double model_flops_per_step = 0;
  MemoryFootprint memory;
  std::uint64_t hbm_capacity_per_core_bytes = 0;
  InfeedSpec infeed;
};

// Throws std::invalid_argument (with the JSON path) when the batch does not divide over the
// replicas of the slice.
LoweredStep lower_training_step(const Workload& workload, const HwConfig& hw);

}  // namespace tpusim
