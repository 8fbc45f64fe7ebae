#!/usr/bin/python3
"""Regenerate the graph-only ONNX fixtures (no weights) and onnx_summary.json.

    /usr/bin/python3 tests/data/import/make_onnx.py [--out DIR] [name ...]

Needs Debian's python3-torch (1.13), python3-torchvision (0.14) and python3-onnx (1.12).
Every file is exported with opset 17, export_params=False (parameters and buffers become typed
graph inputs, no initializers), training=TrainingMode.TRAINING (BatchNormalization keeps
training_mode=1, Dropout stays), do_constant_folding=False and a symbolic batch dimension
named "batch" on the input and output.
"""
import argparse
import collections
import json
import os
import sys

import onnx
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models import MODELS  # noqa: E402

OPSET = 17


def export(name, out_dir):
    make_model, make_input, _ = MODELS[name]
    torch.manual_seed(0)
    model = make_model()
    model.train()
    x = make_input(2)
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(
        model, (x,), path,
        opset_version=OPSET,
        export_params=False,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=["input"],
        output_names=["output"],
        dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
    )
    add_training_info(path, model)
    return path, model


def add_training_info(path, model):
    """torch.onnx.export does not record requires_grad. ONNX's own record of what training updates
    is a TrainingInfoProto whose update_binding maps each trained parameter to the algorithm
    output that replaces it; for a model with frozen parameters, add one naming the trained
    parameters. Its algorithm here is a stand-in (an Identity per parameter): an importer reads
    the bindings, not the update rule."""
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    if len(trained) == len(list(model.parameters())):
        return
    m = onnx.load(path)
    types = {i.name: i.type for i in m.graph.input}
    algorithm = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", [n], [n + ".updated"]) for n in trained], "update",
        [onnx.helper.make_value_info(n, types[n]) for n in trained],
        [onnx.helper.make_value_info(n + ".updated", types[n]) for n in trained])
    info = m.training_info.add()
    info.algorithm.CopyFrom(algorithm)
    for n in trained:
        b = info.update_binding.add()
        b.key, b.value = n, n + ".updated"
    onnx.save(m, path)


def dims(value_info):
    t = value_info.type.tensor_type
    return [d.dim_param if d.dim_param else d.dim_value for d in t.shape.dim]


def summarize(path, model):
    m = onnx.load(path)
    onnx.checker.check_model(m)
    g = m.graph
    ops = collections.Counter(n.op_type for n in g.node)
    inputs = {i.name: {"dtype": onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type),
                       "shape": dims(i)} for i in g.input}
    # Every parameter and buffer of the torch model must be a typed graph input with its shape.
    # A tied tensor (GPT's head and token table) is one input, under its first name.
    state, seen = {}, set()
    for k, v in model.state_dict(keep_vars=True).items():
        if not k.endswith("num_batches_tracked") and id(v) not in seen:
            seen.add(id(v))
            state[k] = list(v.shape)
    missing = [k for k, shp in state.items()
               if k not in inputs or inputs[k]["shape"] != shp]
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {
        "file": os.path.basename(path),
        "bytes": os.path.getsize(path),
        "opset": [{"domain": o.domain, "version": o.version} for o in m.opset_import],
        "producer": f"{m.producer_name} {m.producer_version}",
        "nodes": len(g.node),
        "initializers": len(g.initializer),
        "updated_parameters": [b.key for t in m.training_info for b in t.update_binding],
        "trainable_parameters": n_params,
        "parameter_tensors": len(list(model.parameters())),
        "buffers_as_inputs": len(state) - len(list(model.parameters())),
        "state_tensors_missing_or_misshapen": missing,
        "op_types": dict(sorted(ops.items())),
        "graph_input": {"name": g.input[0].name, **inputs[g.input[0].name]},
        "graph_outputs": [{"name": o.name, "shape": dims(o)} for o in g.output],
        "inputs": inputs,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("names", nargs="*", default=list(MODELS))
    args = ap.parse_args()
    torch.set_num_threads(1)
    summary_path = os.path.join(args.out, "onnx_summary.json")
    summary = {}
    if os.path.exists(summary_path):
        summary = json.load(open(summary_path))
    for name in args.names:
        path, model = export(name, args.out)
        s = summarize(path, model)
        summary[name] = s
        print(f"== {name}: {s['bytes']} bytes, {s['nodes']} nodes, {s['initializers']} initializers, "
              f"{len(s['inputs'])} inputs, {s['trainable_parameters']} parameters")
        print("   input:", s["graph_input"], " outputs:", s["graph_outputs"])
        print("   ops:", ", ".join(f"{k} {v}" for k, v in s["op_types"].items()))
        if s["state_tensors_missing_or_misshapen"]:
            print("   MISSING:", s["state_tensors_missing_or_misshapen"])
    summary["_versions"] = {"torch": torch.__version__, "onnx": onnx.__version__,
                            "torchvision": __import__("torchvision").__version__}
    with open(summary_path, "w") as f:
        json.dump(dict(sorted(summary.items())), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
