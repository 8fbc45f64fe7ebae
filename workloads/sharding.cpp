#include "workloads/sharding.hpp"

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

}  // namespace

Mesh resolve_mesh(const Workload& w, const HwConfig& hw) {
  Mesh mesh;
  if (!w.mesh_model_axes.empty() && w.mesh_model_axes != "none") {  // "none": a sweep's value for no model axis
    const std::string path = "workload.training.mesh.model";
    std::tie(mesh.model_axes, mesh.model_size) = axes_named(path, w.mesh_model_axes, hw);
    if (hw.chip.cores > 1 && !hw.chip.megacore)
      throw std::invalid_argument(fmt::format("{}: tensor parallelism is modelled over chips of one replica each (v4, v5e, v5p, v6e); "
                                              "a {} chip's {} cores are replicas of their own", path, hw.name, hw.chip.cores));
  }
  mesh.data_axes = 0x7 & ~mesh.model_axes;
  mesh.fsdp_axes = mesh.data_axes;
  if (!w.mesh_fsdp_axes.empty()) {
    const std::string path = "workload.training.mesh.fsdp";
    mesh.fsdp_axes = axes_named(path, w.mesh_fsdp_axes, hw).first;
    if (mesh.fsdp_axes & mesh.model_axes)
      throw std::invalid_argument(fmt::format("{}: \"{}\": expected data axes; training.mesh.model \"{}\" takes {}", path,
                                              w.mesh_fsdp_axes, w.mesh_model_axes, w.mesh_model_axes.size() > 1 ? "them" : "it"));
    for (std::size_t a = 0; a < hw.slice_dims.size(); ++a)
      if ((mesh.data_axes & ~mesh.fsdp_axes) >> a & 1u) mesh.data_parallel_size *= hw.slice_dims[a];
  }
  return mesh;
}

namespace {

bool is_dense(const Node& node) { return node.spec.type == "dense" && !node.spec.tied_weights; }

}  // namespace

const Node* row_partner(const ModelGraph& model, const Node& node) {
  const Node* at = &node;
  while (at->consumers.size() == 1) {
    const Node& next = model.nodes[at->consumers[0]];
    if (next.inputs.size() != 1) return nullptr;
    if (is_dense(next)) return &next;
    if (!next.kind->elementwise() || next.params > 0) return nullptr;  // a norm needs the whole row
    at = &next;
  }
  return nullptr;
}

std::vector<LayerSpec> shard_layers(const ModelGraph& model, std::uint32_t shards) {
  std::vector<LayerSpec> layers;
  for (const Node& node : model.nodes) layers.push_back(node.spec);
  if (shards == 1) return layers;
  auto fail = [&](const Node& node, const std::string& what) {
    throw std::invalid_argument(fmt::format("workload.training.mesh.model: layer \"{}\": {}", node.spec.name, what));
  };
  for (const Node& node : model.nodes) {
    LayerSpec& s = layers[node.index];
    if (node.spec.type == "attention") {
      if (node.spec.heads % shards) fail(node, fmt::format("{} heads do not split over a model axis of {}", node.spec.heads, shards));
      s.tensor_parallel = "heads";
      s.model_shards = shards;
      continue;
    }
    if (!is_dense(node) || !layers[node.index].tensor_parallel.empty()) continue;
    const Node* partner = row_partner(model, node);
    if (!partner) continue;
    if (node.spec.units % shards) fail(node, fmt::format("{} units do not split over a model axis of {}", node.spec.units, shards));
    s.units /= shards;
    s.tensor_parallel = "column";
    s.model_shards = shards;
    // The elementwise layers between the pair run on the column layer's share of the features.
    for (const Node* at = &model.nodes[node.consumers[0]]; at != partner; at = &model.nodes[at->consumers[0]]) {
      layers[at->index].tensor_parallel = "within";
      layers[at->index].model_shards = shards;
    }
    layers[partner->index].tensor_parallel = "row";
    layers[partner->index].model_shards = shards;
  }
  return layers;
}

}  // namespace tpusim
