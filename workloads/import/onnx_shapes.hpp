// Shapes of every tensor of an ONNX graph at a concrete batch, with the shape arithmetic that
// exports contain (Shape, Gather, Concat, Unsqueeze, ... feeding Reshape, Expand, Slice) folded
// to values. Exports from torch carry no value_info, and libonnx's own inference misses some
// transformer outputs, so the importer infers shapes itself. Evaluated at two batches, the
// shapes tell which dimensions carry the batch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "workloads/import/onnx_file.hpp"

namespace tpusim {

using OnnxShape = std::vector<std::int64_t>;

struct OnnxShapes {
  std::map<std::string, OnnxShape> shape;           // every tensor the graph holds
  std::map<std::string, std::vector<double>> value;  // the values of small tensors the graph computes
};

// An export whose data input has a fixed batch (torch.onnx.export without dynamic_axes): the
// input's leading axis is taken as the batch, and the shape constants the export folded it into
// (a Reshape's or an Expand's leading size equal to it, where the batch flows) follow it.
struct FixedBatch {
  std::string input;          // the data input
  std::int64_t exported = 0;  // its leading size as exported; 0: the batch is symbolic
};

// The data input's symbolic dimensions (or, with `fixed`, its leading one) take `batch`. Throws
// std::invalid_argument naming `origin` and the node whose shape cannot be inferred (an op the
// inference does not know, or operands that do not fit).
OnnxShapes infer_onnx_shapes(const OnnxModel& model, std::int64_t batch, const std::string& origin, const FixedBatch& fixed = {});

}  // namespace tpusim
