// A training workload, typed. sim/config builds it from the validated workload JSON; the
// driver lowers it to a per-core program.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hw/program.hpp"

namespace tpusim {

enum class Precision { Float32, MixedBfloat16 };

struct LayerSpec {
  std::string type;  // "dense" | "flatten"
  std::string name;
  std::uint64_t units = 0;
  std::string activation = "linear";
  bool use_bias = true;
};

struct Workload {
  std::string name;
  std::vector<std::uint64_t> input_shape;  // per sample, e.g. {28, 28}
  std::string input_dtype = "float32";    // as the host ships it
  std::vector<LayerSpec> layers;
  std::string loss = "sparse_categorical_crossentropy";

  std::uint64_t global_batch = 0;       // 0: per_replica_batch x replicas
  std::uint64_t per_replica_batch = 0;  // 0: global_batch / replicas
  Precision precision = Precision::Float32;
  std::uint32_t fp32_matmul_passes = 1;  // XLA DEFAULT / HIGH / HIGHEST: 1 / 3 / 6 bf16 passes
  std::string optimizer = "adam";
  double learning_rate = 0.001;
  std::uint32_t steps = 3;
  CollectiveAlgorithm all_reduce_algorithm = CollectiveAlgorithm::TorusAllAxes;
  std::uint64_t all_reduce_chunk_bytes = 0;

  double host_samples_per_s = 0;  // per host; 0: the host is never the bottleneck
  std::uint32_t prefetch_batches = 2;
  std::uint64_t bytes_per_sample = 0;  // 0: input_shape x input_dtype
};

}  // namespace tpusim
