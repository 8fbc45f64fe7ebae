#!/usr/bin/env python3
"""Exports small torchvision classification models to graph-only ONNX for the importer's tests,
as make_onnx.py does (opset 17, export_params=False, training mode, dynamic batch), and writes
torchvision/summary.json with each model's torch parameter count and node op types.

    /usr/bin/python3 tests/data/import/make_torchvision_onnx.py      # Debian's python3-torch 1.13

Also torchvision/fixed_batch/: models exported with torch.onnx.export's defaults (no dynamic_axes).

efficientnet_b0 and convnext_tiny export in training mode only with stochastic depth off (torch
1.13 refuses its bernoulli_: "Bernoulli, out parameter is not supported"); at probability 0
torchvision's stochastic_depth returns its input, so the graph lacks only that per-sample scaling.
googlenet (adaptive_avg_pool2d to a size that is not a factor) does not export with torch 1.13.
"""
import collections
import json
import os

import onnx
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "torchvision")
MODELS = ["alexnet", "vgg11", "squeezenet1_0", "mobilenet_v2", "mobilenet_v3_small", "regnet_y_400mf",
          "shufflenet_v2_x1_0", "densenet121"]
# Exported as torch.onnx.export does by default: no dynamic_axes (the batch fixed at the traced
# input's), shape arithmetic constant-folded, torch's own input name; -> (batch traced at).
# The seven of issue 42 at batch 1 (as a user exports one image), ShuffleNet at 4 (its reshapes carry it).
FIXED_BATCH = {"resnet18": 1, "wide_resnet50_2": 1, "vgg16": 1, "densenet121": 1, "mobilenet_v2": 1, "efficientnet_b0": 1,
               "convnext_tiny": 1, "shufflenet_v2_x1_0": 4, "inception_v3": 1}
NO_STOCHASTIC_DEPTH = {"stochastic_depth_prob": 0.0}
# Inception v3 without its auxiliary classifier (a second output, which the importer would drop)
# and without torchvision's truncated-normal initialization (slow, and irrelevant to a graph).
CONSTRUCTOR_ARGS = {"efficientnet_b0": NO_STOCHASTIC_DEPTH, "convnext_tiny": NO_STOCHASTIC_DEPTH,
                    "inception_v3": {"aux_logits": False, "init_weights": False}}
IMAGE_SIDE = {"inception_v3": 299}


class TinyAttention(torch.nn.Module):
    """One nn.TransformerEncoderLayer (d 32, 4 heads, batch first): its attention folds the batch
    into the heads of a reshape, which a fixed-batch export leaves as a constant."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)

    def forward(self, x):
        return self.layer(x)


def export_fixed_batch(summary):
    out = os.path.join(OUT, "fixed_batch")
    os.makedirs(out, exist_ok=True)
    models = {name: (getattr(torchvision.models, name), (batch, 3, IMAGE_SIDE.get(name, 224), IMAGE_SIDE.get(name, 224)))
              for name, batch in FIXED_BATCH.items()}
    models["tiny_attention"] = (TinyAttention, (2, 16, 32))  # [batch, sequence, features]
    for name, (make, shape) in models.items():
        torch.manual_seed(0)
        model = make(weights=None, **CONSTRUCTOR_ARGS.get(name, {})) if make is not TinyAttention else make()
        model.train()
        file = f"{name}_b{shape[0]}.onnx"
        path = os.path.join(out, file)
        torch.onnx.export(model, torch.randn(*shape), path, opset_version=17, export_params=False,
                          training=torch.onnx.TrainingMode.TRAINING)
        summary["fixed_batch/" + file[:-5]] = {
            "bytes": os.path.getsize(path),
            "input_shape": list(shape),
            "trainable_parameters": sum(p.numel() for p in model.parameters()),
        }


def main():
    os.makedirs(OUT, exist_ok=True)
    summary = {"_versions": {"torch": torch.__version__, "torchvision": torchvision.__version__, "onnx": onnx.__version__}}
    for name in MODELS:
        torch.manual_seed(0)
        model = getattr(torchvision.models, name)(weights=None)
        model.train()
        path = os.path.join(OUT, name + ".onnx")
        torch.onnx.export(model, torch.randn(2, 3, 224, 224), path, opset_version=17, export_params=False,
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        graph = onnx.load(path).graph
        summary[name] = {
            "bytes": os.path.getsize(path),
            "trainable_parameters": sum(p.numel() for p in model.parameters()),
            "op_types": dict(sorted(collections.Counter(n.op_type for n in graph.node).items())),
        }
    export_fixed_batch(summary)
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
