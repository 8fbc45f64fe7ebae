#!/usr/bin/env python3
"""Exports small torchvision classification models to graph-only ONNX for the importer's tests,
as make_onnx.py does (opset 17, export_params=False, training mode, dynamic batch), and writes
torchvision/summary.json with each model's torch parameter count and node op types.

    /usr/bin/python3 tests/data/import/make_torchvision_onnx.py      # Debian's python3-torch 1.13

efficientnet_b0 and convnext_tiny (stochastic depth: "Bernoulli, out parameter is not supported")
and googlenet (adaptive_avg_pool2d to a size that is not a factor) do not export with torch 1.13.
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
    with open(os.path.join(OUT, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1, sort_keys=False)
        f.write("\n")


if __name__ == "__main__":
    main()
