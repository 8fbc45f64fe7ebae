// An ONNX graph (what torch.onnx.export writes) as tpusim's own layer list: one front-end over
// the layer kinds of workloads/kinds/, beside Keras JSON.
#pragma once

#include <string>

#include "workloads/import/keras_json.hpp"  // ImportedModel
#include "workloads/import/onnx_file.hpp"

namespace tpusim {

// Convolutional classification graphs (torchvision's ResNets, VGG, AlexNet, MobileNet v2,
// ResNeXt, ...). Throws std::invalid_argument naming `origin` and the first node tpusim cannot
// import (its name, op type, and what to do).
ImportedModel import_onnx_model(const OnnxModel& model, const std::string& origin);
ImportedModel read_onnx_model_file(const std::string& path);

}  // namespace tpusim
