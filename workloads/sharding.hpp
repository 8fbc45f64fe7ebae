// The slice as a mesh of named axes over the torus (JAX's Mesh): "data" carries replicas of the
// batch, "model" splits layers (Megatron's tensor parallelism). Sharding is a transformation of
// the layer list: the layers one core runs, from the model's.
#pragma once

#include <cstdint>
#include <vector>

#include "hw/hw_config.hpp"
#include "workloads/model.hpp"
#include "workloads/workload.hpp"

namespace tpusim {

struct Mesh {
  std::uint32_t data_axes = 0x7;   // bit a: torus axis a carries data replicas
  std::uint32_t model_axes = 0;    // bit a: torus axis a splits the model
  std::uint32_t model_size = 1;    // chips along the model axes
  std::uint32_t fsdp_axes = 0x7;   // bit a: FSDP shards the weights over torus axis a (of the data axes)
  std::uint32_t data_parallel_size = 1;  // chips along the data axes outside fsdp_axes
};

// Throws std::invalid_argument naming workload.training.mesh.model (or .fsdp) for axes the slice
// lacks, FSDP axes that are not data axes, or a split the chip cannot take.
Mesh resolve_mesh(const Workload& workload, const HwConfig& hw);

// The dense layer a dense layer's output reaches through single-input elementwise layers, each
// the only reader of the one before (an MLP's second layer for its first); nullptr when there is
// none or the path branches.
const Node* row_partner(const ModelGraph& model, const Node& node);

// The layers one core of a `shards`-way model axis runs: a dense layer whose output reaches
// exactly one other dense layer through single-input elementwise layers is split by columns (its
// units divided) and that one by rows (its input arrives divided); attention is split by heads.
// The elementwise layers between such a pair are marked "within". Everything else is replicated
// (and under sequence parallelism runs on 1/shards of the tokens). Throws std::invalid_argument
// when a split layer does not divide.
std::vector<LayerSpec> shard_layers(const ModelGraph& model, std::uint32_t shards);

}  // namespace tpusim
