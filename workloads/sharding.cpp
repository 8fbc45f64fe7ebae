#include "workloads/sharding.hpp"

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "hw/topology.hpp"
#include "workloads/layer_kind.hpp"

namespace tpusim {

namespace {

// The torus axes named by letters ("yz") as a bit mask, and the chips along them.
std::pair<std::uint32_t, std::uint32_t> axes_named(const std::string& path, const std::string& letters, const HwConfig& hw) {
  std::uint32_t mask = 0, size = 1;
  for (char c : letters) {
    const auto a = static_cast<std::uint32_t>(std::string("xyz").find(c));
    if (a >= hw.slice_dims.size())
      throw std::invalid_argument(fmt::format("{}: \"{}\": expected letters of the {} slice {}'s torus axes, \"{}\"", path, letters,
                                              hw.name, topology_string(hw.slice_dims),
                                              std::string("xyz").substr(0, hw.slice_dims.size())));
    if (mask >> a & 1u) throw std::invalid_argument(fmt::format("{}: \"{}\" names an axis twice", path, letters));
    mask |= 1u << a;
    size *= hw.slice_dims[a];
  }
  return {mask, size};
}

// Whether a mesh key names axes; "none" is a sweep's value for no such axis.
bool names_axes(const std::string& letters) { return !letters.empty() && letters != "none"; }

// Splitting work across chips (`what`: "tensor parallelism") needs a replica per chip.
void need_one_replica_per_chip(const std::string& path, const char* what, const HwConfig& hw) {
  if (hw.chip.cores > 1 && !hw.chip.megacore)
    throw std::invalid_argument(fmt::format("{}: {} is modelled over chips of one replica each (v4, v5e, v5p, v6e); a {} chip's {} "
                                            "cores are replicas of their own", path, what, hw.name, hw.chip.cores));
}

// Axes `letters` (at `path`) must be data axes: none of the model axis's.
void need_data_axes(const std::string& path, const std::string& letters, std::uint32_t mask, const Workload& w, const Mesh& mesh) {
  if (mask & mesh.model_axes)
    throw std::invalid_argument(fmt::format("{}: \"{}\": expected data axes; training.mesh.model \"{}\" takes {}", path, letters,
                                            w.mesh_model_axes, w.mesh_model_axes.size() > 1 ? "them" : "it"));
}

// Distributed batch norm's groups as blocks of the torus: the group's chips double along x, then
// y, then z, in turn (TensorFlow's and JAX's MLPerf ResNet-50 take a host's tray of 2x2 chips
// for four), each block starting at a multiple of its extent.
void place_batch_norm_groups(const Workload& w, const HwConfig& hw, Mesh& mesh) {
  const std::string path = "workload.training.batch_norm_group";
  const auto refuse = [&](const std::string& what) { throw std::invalid_argument(fmt::format("{}: {}", path, what)); };
  if (mesh.model_axes || mesh.expert_axes || mesh.pipeline_axes)
    refuse("distributed batch norm beside tensor, expert or pipeline parallelism is not modelled");
  const std::uint32_t replicas_per_chip = hw.chip.megacore ? 1 : hw.chip.cores;
  if (w.batch_norm_group <= replicas_per_chip)
    refuse(fmt::format("{} replicas: a group within one chip (of its {} cores) is not modelled; expected at least {} "
                       "replicas (two chips)", w.batch_norm_group, replicas_per_chip, 2 * replicas_per_chip));
  std::uint32_t chips = w.batch_norm_group / replicas_per_chip;
  std::array<std::uint32_t, 3> extent{1, 1, 1};
  for (std::size_t a = 0, stuck = 0; chips > 1 && stuck < hw.slice_dims.size(); a = (a + 1) % hw.slice_dims.size()) {
    if (hw.slice_dims[a] % (extent[a] * 2) != 0) {
      ++stuck;
      continue;
    }
    extent[a] *= 2;
    chips /= 2;
    stuck = 0;
  }
  if (chips > 1)
    refuse(fmt::format("a group of {} replicas ({} chips) does not fit the {} slice {} as a block", w.batch_norm_group,
                       w.batch_norm_group / replicas_per_chip, hw.name, topology_string(hw.slice_dims)));
  for (std::size_t a = 0; a < hw.slice_dims.size(); ++a) {
    if (extent[a] == 1) continue;
    mesh.batch_norm_axes |= 1u << a;
    mesh.batch_norm_span[a] = extent[a] == hw.slice_dims[a] ? 0 : extent[a];
  }
}

}  // namespace

Mesh resolve_mesh(const Workload& w, const HwConfig& hw) {
  Mesh mesh;
  if (names_axes(w.mesh_model_axes)) {
    const std::string path = "workload.training.mesh.model";
    std::tie(mesh.model_axes, mesh.model_size) = axes_named(path, w.mesh_model_axes, hw);
    need_one_replica_per_chip(path, "tensor parallelism", hw);
  }
  mesh.data_axes = 0x7 & ~mesh.model_axes;
  if (names_axes(w.mesh_expert_axes)) {
    const std::string path = "workload.training.mesh.expert";
    std::tie(mesh.expert_axes, mesh.expert_size) = axes_named(path, w.mesh_expert_axes, hw);
    need_data_axes(path, w.mesh_expert_axes, mesh.expert_axes, w, mesh);
    need_one_replica_per_chip(path, "expert parallelism", hw);
    if (w.weight_update_sharding)
      throw std::invalid_argument(fmt::format("{}: weight_update_sharding shards every weight over every replica; with experts "
                                              "split over an expert axis use training.fsdp instead", path));
  }
  if (names_axes(w.mesh_pipeline_axes)) {
    const std::string path = "workload.training.mesh.pipeline";
    std::tie(mesh.pipeline_axes, mesh.pipeline_size) = axes_named(path, w.mesh_pipeline_axes, hw);
    const auto refuse = [&](const std::string& what) { throw std::invalid_argument(fmt::format("{}: {}", path, what)); };
    if (mesh.pipeline_axes & (mesh.model_axes | mesh.expert_axes))
      refuse(fmt::format("\"{}\": expected axes of their own, not training.mesh.model's or training.mesh.expert's", w.mesh_pipeline_axes));
    need_one_replica_per_chip(path, "pipeline parallelism", hw);
    if (w.fsdp || w.weight_update_sharding) refuse("a pipeline with fsdp or weight_update_sharding is not modelled yet");
    if (mesh.expert_axes) refuse("a pipeline beside an expert axis is not modelled yet");
    if (hw.slices > 1) refuse("a pipeline over several slices is not modelled yet");
    if (w.remat_policy == RematPolicy::Custom && w.remat_custom.offloads()) refuse("a pipeline with host offload (remat_custom \"offload\") is not modelled yet");
    // The pipeline axes stay data axes: the layers around the stages' chunks run on each stage's
    // share of the batch, their gradients summed over it too (the chunks' over the others only).
  }
  // The experts' weights are split over the expert axes already: FSDP shards over the others.
  mesh.fsdp_axes = mesh.data_axes & ~mesh.expert_axes;
  if (!w.mesh_fsdp_axes.empty()) {
    const std::string path = "workload.training.mesh.fsdp";
    mesh.fsdp_axes = axes_named(path, w.mesh_fsdp_axes, hw).first;
    need_data_axes(path, w.mesh_fsdp_axes, mesh.fsdp_axes, w, mesh);
    if (mesh.fsdp_axes & mesh.expert_axes)
      throw std::invalid_argument(fmt::format("{}: \"{}\": expected data axes outside training.mesh.expert \"{}\" (the experts are "
                                              "split over those already)", path, w.mesh_fsdp_axes, w.mesh_expert_axes));
  }
  for (std::size_t a = 0; a < hw.slice_dims.size(); ++a)
    if ((mesh.data_axes & ~mesh.fsdp_axes) >> a & 1u) mesh.data_parallel_size *= hw.slice_dims[a];
  if (w.batch_norm_group > 1) place_batch_norm_groups(w, hw, mesh);
  return mesh;
}

namespace {

bool is_dense(const Node& node) { return node.spec.type == "dense" && !node.spec.tied_weights; }

// Elementwise work without parameters that keeps its input's shape: it can run on a column
// layer's share of the features.
bool featurewise(const Node& node) { return node.kind->elementwise() && node.params == 0; }

// Joins the outputs of several column layers (a gated MLP's gate times its up projection):
// several inputs of the output's own shape, no parameters, not a view.
bool joins_columns(const ModelGraph& model, const Node& node) {
  if (node.inputs.size() < 2 || node.params > 0 || node.kind->is_view()) return false;
  for (auto input : node.inputs)
    if (input == kModelInput || model.nodes[input].out != node.out) return false;
  return true;
}

}  // namespace

std::optional<ColumnGroup> column_group(const ModelGraph& model, const Node& node) {
  if (!is_dense(node)) return std::nullopt;
  ColumnGroup group;
  group.columns.push_back(&node);
  // Another branch into a join, followed back through featurewise layers (each read by the next
  // alone) to a dense layer that reads what the first does: that layer joins the group.
  auto take_branch = [&](std::size_t from) {
    std::vector<const Node*> chain;
    for (std::size_t at = from; at != kModelInput; at = model.nodes[at].inputs[0]) {
      const Node& b = model.nodes[at];
      if (b.consumers.size() != 1) return false;
      if (is_dense(b)) {
        if (b.inputs != node.inputs) return false;
        group.columns.push_back(&b);
        group.within.insert(group.within.end(), chain.begin(), chain.end());
        return true;
      }
      if (!featurewise(b) || b.inputs.size() != 1) return false;
      chain.push_back(&b);
    }
    return false;
  };
  const Node* at = &node;
  while (at->consumers.size() == 1) {
    const Node& next = model.nodes[at->consumers[0]];
    if (is_dense(next) && next.inputs.size() == 1) {
      group.row = &next;
      return group;
    }
    if (joins_columns(model, next)) {
      for (auto input : next.inputs)
        if (input != at->index && !take_branch(input)) return std::nullopt;
    } else if (!featurewise(next) || next.inputs.size() != 1) {
      return std::nullopt;  // a norm needs the whole row
    }
    group.within.push_back(&next);
    at = &next;
  }
  return std::nullopt;
}

std::vector<LayerSpec> shard_layers(const ModelGraph& model, std::uint32_t shards, std::uint32_t expert_shards) {
  std::vector<LayerSpec> layers;
  for (const Node& node : model.nodes) layers.push_back(node.spec);
  for (const Node& node : model.nodes) {
    if (node.spec.type != "moe") continue;
    if (shards > 1)  // replicated, every core of the axis would compute every expert: refused, not silently slow
      throw std::invalid_argument(fmt::format("workload.training.mesh.model: layer \"{}\": a moe layer is not split over a model axis "
                                              "in tpusim; split its experts over training.mesh.expert instead", node.spec.name));
    if (node.spec.experts % expert_shards)
      throw std::invalid_argument(fmt::format("workload.training.mesh.expert: layer \"{}\": {} experts do not split over an expert "
                                              "axis of {} chips", node.spec.name, node.spec.experts, expert_shards));
    layers[node.index].expert_shards = expert_shards;
  }
  if (shards == 1) return layers;
  auto fail = [&](const Node& node, const std::string& what) {
    throw std::invalid_argument(fmt::format("workload.training.mesh.model: layer \"{}\": {}", node.spec.name, what));
  };
  for (const Node& node : model.nodes) {
    LayerSpec& s = layers[node.index];
    if (node.spec.type == "attention") {
      if (node.spec.heads % shards) fail(node, fmt::format("{} heads do not split over a model axis of {}", node.spec.heads, shards));
      const std::uint64_t kv_heads = node.spec.key_value_heads();
      if (kv_heads % shards)
        fail(node, fmt::format("{} key/value heads do not split over a model axis of {} (tpusim does not replicate them)",
                               kv_heads, shards));
      s.tensor_parallel = "heads";
      s.model_shards = shards;
      continue;
    }
    if (!layers[node.index].tensor_parallel.empty()) continue;
    // A language model's head (its own weights, into the loss) split by vocabulary, as Megatron
    // and MaxText split it: each core computes its share of the logits, and the cross-entropy's
    // statistics are summed over the axis (lower.cpp). A vocabulary that does not divide stays whole.
    if (is_dense(node) && node.index + 1 == model.nodes.size() && node.out.size() > 1) {
      if (node.spec.units % shards == 0) {
        s.units /= shards;
        s.tensor_parallel = "column";
        s.model_shards = shards;
      }
      continue;
    }
    const std::optional<ColumnGroup> group = column_group(model, node);
    if (!group) continue;
    for (const Node* column : group->columns) {
      if (column->spec.units % shards)
        fail(*column, fmt::format("{} units do not split over a model axis of {}", column->spec.units, shards));
      LayerSpec& c = layers[column->index];
      c.units /= shards;
      c.tensor_parallel = "column";
      c.model_shards = shards;
      // Columns that share their input: its gather and its gradient's sum over the axis are the
      // group's, done once (as XLA's CSE and all-reduce reassociation leave them).
      if (group->columns.size() > 1) c.column_group = group->columns.front()->spec.name;
    }
    // The elementwise layers between the columns and the row layer run on the columns' share of
    // the features.
    for (const Node* within : group->within) {
      layers[within->index].tensor_parallel = "within";
      layers[within->index].model_shards = shards;
    }
    layers[group->row->index].tensor_parallel = "row";
    layers[group->row->index].model_shards = shards;
  }
  return layers;
}

namespace {

// Whether node `j` plays in its layer the part node `i` plays in its own (`i_start`, `j_start`:
// their layers' first nodes): the same kind, shapes, parameters and FLOPs and the same settings
// that change its cost, reading the nodes at the same places relative to its layer.
bool same_part(const ModelGraph& model, std::size_t i, std::size_t i_start, std::size_t j, std::size_t j_start) {
  const Node& a = model.nodes[i];
  const Node& b = model.nodes[j];
  const LayerSpec& s = a.spec;
  const LayerSpec& t = b.spec;
  if (s.type != t.type || a.in != b.in || a.out != b.out || a.params != b.params || a.trainable != b.trainable ||
      a.forward_flops != b.forward_flops || s.activation != t.activation || s.rotary != t.rotary || s.causal != t.causal ||
      s.use_bias != t.use_bias || s.own != t.own || a.inputs.size() != b.inputs.size())
    return false;
  for (std::size_t k = 0; k < a.inputs.size(); ++k) {
    const auto offset = [](std::size_t input, std::size_t start) {
      return input == kModelInput ? std::numeric_limits<std::int64_t>::min() : static_cast<std::int64_t>(input) - static_cast<std::int64_t>(start);
    };
    if (offset(a.inputs[k], i_start) != offset(b.inputs[k], j_start)) return false;
  }
  return true;
}

}  // namespace

PipelineChunk pipeline_chunk(const ModelGraph& model, std::uint32_t chunks) {
  const std::string path = "workload.training.mesh.pipeline";
  std::vector<std::size_t> adds;
  for (const Node& node : model.nodes)
    if (node.spec.type == "add") adds.push_back(node.index);
  const std::size_t n = model.nodes.size();
  for (std::size_t a = 1; 2 * a <= adds.size(); ++a) {
    if (adds.size() % a) continue;
    const std::size_t layers = adds.size() / a;
    const std::size_t period = adds[2 * a - 1] - adds[a - 1];
    if (adds[a - 1] + 1 < period) continue;
    const std::size_t start = adds[a - 1] + 1 - period, end = start + layers * period;  // [start, end)
    if (end > n) continue;
    bool repeats = true;
    for (std::size_t k = start; k < start + period && repeats; ++k) {
      // Within its layer a node reads its own layer's nodes or the layer before's output.
      for (auto input : model.nodes[k].inputs)
        repeats = repeats && input != kModelInput && (input >= start || input + 1 == start);
      for (std::size_t l = 1; l < layers && repeats; ++l) repeats = same_part(model, k, start, k + l * period, start + l * period);
    }
    // After them, only the last layer's output (and what follows it) is read.
    for (std::size_t k = end; k < n && repeats; ++k)
      for (auto input : model.nodes[k].inputs) repeats = repeats && input != kModelInput && input + 1 >= end;
    if (!repeats) continue;
    if (layers % chunks)
      throw std::invalid_argument(fmt::format("{}: the model's {} repeating layers (of {} nodes each) do not split into {} chunks "
                                              "(stages x training.pipeline.repeats)", path, layers, period, chunks));
    PipelineChunk chunk;
    chunk.model_layers = static_cast<std::uint32_t>(layers);
    chunk.chunk_layers = static_cast<std::uint32_t>(layers / chunks);
    chunk.first = start;
    chunk.last = start + chunk.chunk_layers * period - 1;
    const std::string& model_last = model.nodes[end - 1].spec.name;
    for (std::size_t k = 0; k < n; ++k) {
      if (k > chunk.last && k < end) continue;
      LayerSpec spec = model.nodes[k].spec;
      for (auto& input : spec.inputs)
        if (input == model_last) input = model.nodes[chunk.last].spec.name;
      chunk.layers.push_back(std::move(spec));
    }
    return chunk;
  }
  throw std::invalid_argument(fmt::format("{}: the model has no repeating layers to split into stages (layers between residual "
                                          "adds that repeat with the same kinds, shapes and parameters, each reading only the one "
                                          "before)", path));
}

}  // namespace tpusim
