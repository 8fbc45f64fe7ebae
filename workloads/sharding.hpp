// The slice as a mesh of named axes over the torus (JAX's Mesh): "data" carries replicas of the
// batch, "model" splits layers (Megatron's tensor parallelism). Sharding is a transformation of
// the layer list: the layers one core runs, from the model's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "hw/hw_config.hpp"
#include "hw/program.hpp"
#include "workloads/model.hpp"
#include "workloads/workload.hpp"

namespace tpusim {

struct Mesh {
  std::uint32_t data_axes = 0x7;   // bit a: torus axis a carries data replicas
  std::uint32_t model_axes = 0;    // bit a: torus axis a splits the model
  std::uint32_t model_size = 1;    // chips along the model axes
  std::uint32_t fsdp_axes = 0x7;   // bit a: FSDP shards the weights over torus axis a (of the data axes)
  std::uint32_t data_parallel_size = 1;  // chips along the data axes outside fsdp_axes
  std::uint32_t expert_axes = 0;   // bit a: torus axis a (a data axis) splits moe layers' experts
  std::uint32_t expert_size = 1;   // chips along the expert axes
  std::uint32_t pipeline_axes = 0; // bit a: torus axis a carries pipeline stages (and, outside them, data)
  std::uint32_t pipeline_size = 1; // stages: chips along the pipeline axes
  // Distributed batch norm (training.batch_norm_group): the axes its groups span and, on each,
  // the block of chips a group takes (0: the whole axis). No axes: each replica's own batch.
  std::uint32_t batch_norm_axes = 0;
  GroupSpan batch_norm_span{0, 0, 0};
};

// A pipeline stage's share of the model: the layers before the repeating ones (the prefix),
// one chunk of repeating layers, and the layers after (the suffix), as one layer list (the
// suffix reading the chunk's output), with where the chunk lies in it.
struct PipelineChunk {
  std::vector<LayerSpec> layers;
  std::size_t first = 0, last = 0;  // the chunk's first and last node in `layers`
  std::uint32_t model_layers = 0;   // repeating layers in the whole model
  std::uint32_t chunk_layers = 0;   // in one chunk
};
// The model's repeating layers found as the nodes between residual adds (every a-th add, the
// smallest a for which every such layer is the same as the first: the same kinds, shapes,
// parameters and FLOPs, reading only the layer before), split into `chunks` chunks. Throws
// std::invalid_argument naming workload.training.mesh.pipeline when the model has no such
// layers or they do not split.
PipelineChunk pipeline_chunk(const ModelGraph& model, std::uint32_t chunks);

// Throws std::invalid_argument naming workload.training.mesh.model (or .fsdp, .expert) for axes
// the slice lacks, FSDP or expert axes that are not data axes (or overlap), or a split the chip
// cannot take. FSDP's axes default to the data axes outside the expert axes.
Mesh resolve_mesh(const Workload& workload, const HwConfig& hw);

// Dense layers split by columns whose outputs meet the one dense layer split by rows: a plain
// MLP's first layer (one column), or a gated MLP's gate and up projections (two columns reading
// one input, joined by a product), with the featurewise layers between them and the row layer.
struct ColumnGroup {
  std::vector<const Node*> columns;  // the first: the layer asked about
  std::vector<const Node*> within;   // elementwise layers on the columns' share of the features
  const Node* row = nullptr;
};
// The group a dense layer leads; nothing when its output reaches no single dense layer through
// such layers, or reaches a norm (which needs the whole row) or branches on the way.
std::optional<ColumnGroup> column_group(const ModelGraph& model, const Node& node);

// The layers one core runs with `expert_shards` chips along the expert axis: each moe layer holds
// its share of the experts (and, per the model axis, as below).
// The layers one core of a `shards`-way model axis runs: the columns of a column group are split
// by columns (their units divided) and its row layer by rows (its input arrives divided);
// attention is split by heads (query and key/value heads alike); a language model's own head by
// its vocabulary (columns, when they divide).
// The elementwise layers between such a pair are marked "within". Everything else is replicated
// (and under sequence parallelism runs on 1/shards of the tokens). Throws std::invalid_argument
// when a split layer does not divide.
std::vector<LayerSpec> shard_layers(const ModelGraph& model, std::uint32_t shards, std::uint32_t expert_shards = 1);

}  // namespace tpusim
