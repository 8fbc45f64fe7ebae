#!/usr/bin/python3
"""Regenerate oracle.json: the forward and backward convolutions and matmuls of one training step
of each fixture, and its FLOPs, as PyTorch's autograd computes them.

    /usr/bin/python3 tests/data/import/make_oracle.py [--batch 2] [name ...]

For each model: make_fx (torch.fx.experimental.proxy_tensor, tracing_mode="real") traces a function
that runs the forward pass in training mode (batch norm on batch statistics, dropout on),
a cross-entropy loss, and torch.autograd.grad of the loss with respect to every parameter (no
optimizer). The traced graph holds ATen ops in execution order; the rules for counting them are
written into oracle.json ("rules").

The ONNX fixtures are the torch models of models.py. The Keras fixtures are rebuilt in torch from
their JSON by keras_to_torch() below (NCHW, same layer shapes, the last layer's softmax fused into
the loss as Keras does), so their figures come from the committed JSON itself.
"""
import argparse
import collections
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils import stateless

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from models import MODELS  # noqa: E402

aten = torch.ops.aten

MATMULS = {"mm", "addmm", "bmm", "baddbmm", "matmul", "mv", "dot", "addmv", "addbmm", "linear"}
CONV_FWD = {"convolution", "_convolution", "conv2d"}
CONV_BWD = {"convolution_backward"}
# Ops that only move, view, copy or accumulate data: followed when deciding whether a matmul
# operand is a parameter and whether a backward matmul's result is a parameter's gradient.
LAYOUT = {"t", "view", "_reshape_alias", "_unsafe_view", "reshape", "transpose", "permute",
          "expand", "clone", "detach", "contiguous", "squeeze", "unsqueeze", "slice", "select",
          "split", "split_with_sizes", "chunk", "unbind", "alias", "unflatten", "flatten",
          "_to_copy", "getitem"}
ACCUMULATE = {"add"}


# ----------------------------------------------------------------------------------------------
# Keras JSON -> torch module (enough for the three Keras fixtures)

def _tf_same_pad(size, k, s, d=1):
    eff = (k - 1) * d + 1
    out = math.ceil(size / s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


MODEL_CLASSES = ("Sequential", "Functional", "Model")


def flat_keras_layers(cfg):
    """A Keras model JSON's layers with nested models flattened, as one graph:
    ([(name, class_name, config, input names, frozen)], input name, input shape, output name).
    A nested model's InputLayer stands for what the model is called on, its name for its output
    layer; trainable false on a model freezes every layer inside it, as Keras does."""
    alias, flat, top = {}, [], {}

    def res(n):
        while n in alias:
            n = alias[n]
        return n

    def walk(model_cfg, cls, called_on, frozen):
        layers = model_cfg["layers"] if isinstance(model_cfg, dict) else model_cfg
        prev = called_on[0] if called_on else None
        for layer in layers:
            lcls, c = layer["class_name"], layer["config"]
            name = layer.get("name", c.get("name") if isinstance(c, dict) else None)
            fz = frozen or (isinstance(c, dict) and c.get("trainable", True) is False)
            ins = ([prev] if prev else []) if cls == "Sequential" else [res(n[0]) for n in (layer.get("inbound_nodes") or [[]])[0]]
            if lcls in MODEL_CLASSES:
                alias[name] = prev = walk(c, lcls, ins, fz)
                continue
            if lcls == "InputLayer" and called_on:
                alias[name] = called_on[0]
                continue
            if "batch_input_shape" in c and not called_on and "input" not in top:
                top["input"], top["shape"] = (name if lcls == "InputLayer" else "__input__"), c["batch_input_shape"][1:]
                if lcls != "InputLayer" and not ins:
                    ins = ["__input__"]
            if lcls != "InputLayer":
                flat.append((name, lcls, c, ins, fz))
            prev = name
        if cls == "Sequential":
            return prev
        return res(model_cfg["output_layers"][0][0])

    output = walk(cfg["config"], cfg["class_name"], [], False)
    return flat, top["input"], top["shape"], output


class KerasModel(nn.Module):
    def __init__(self, path):
        super().__init__()
        cfg = json.load(open(path))
        flat, self.input_name, self.input_shape, last = flat_keras_layers(cfg)
        self.order = []      # (name, class_name, config, input names, activation)
        self.mods = nn.ModuleDict()
        self.frozen = set()  # names of frozen layers
        shapes = {self.input_name: self._nchw(self.input_shape)}  # name -> per-sample shape, NCHW-style
        for name, cls, c, ins, frozen in flat:
            if frozen:
                self.frozen.add(name)
            s = shapes[ins[0]]
            if cls == "Conv2D":
                assert c["data_format"] == "channels_last" and c.get("groups", 1) == 1
                k, st, dil = c["kernel_size"], c["strides"], c["dilation_rate"]
                pad = (0, 0, 0, 0)
                if c["padding"] == "same":
                    ph, pw = _tf_same_pad(s[1], k[0], st[0], dil[0]), _tf_same_pad(s[2], k[1], st[1], dil[1])
                    pad = (pw[0], pw[1], ph[0], ph[1])
                self.mods[name] = nn.Conv2d(s[0], c["filters"], k, st, dilation=dil, bias=c["use_bias"])
                h = (s[1] + pad[2] + pad[3] - dil[0] * (k[0] - 1) - 1) // st[0] + 1
                w = (s[2] + pad[0] + pad[1] - dil[1] * (k[1] - 1) - 1) // st[1] + 1
                shapes[name] = [c["filters"], h, w]
                c = dict(c, _pad=pad)
            elif cls == "BatchNormalization":
                assert c["axis"] in (-1, len(s)), c["axis"]
                self.mods[name] = (nn.BatchNorm2d if len(s) == 3 else nn.BatchNorm1d)(
                    s[0], eps=c["epsilon"], affine=c["scale"] and c["center"])
                shapes[name] = s
            elif cls == "Dense":
                assert len(s) == 1
                self.mods[name] = nn.Linear(s[0], c["units"], bias=c["use_bias"])
                shapes[name] = [c["units"]]
            elif cls == "Flatten":
                shapes[name] = [math.prod(s)]
            elif cls == "ZeroPadding2D":
                (t, b), (l, r) = c["padding"]
                shapes[name] = [s[0], s[1] + t + b, s[2] + l + r]
            elif cls == "MaxPooling2D":
                assert c["padding"] == "valid"
                p, st = c["pool_size"], c["strides"]
                shapes[name] = [s[0], (s[1] - p[0]) // st[0] + 1, (s[2] - p[1]) // st[1] + 1]
            elif cls == "GlobalAveragePooling2D":
                shapes[name] = [s[0]]
            elif cls in ("Activation", "Add", "Dropout"):
                shapes[name] = s
            else:
                raise NotImplementedError(f"{path}: layer class {cls}")
            act = c.get("activation", "linear")
            if name == last and act == "softmax":
                act = "linear"  # fused into the cross-entropy loss, as Keras does
            self.order.append((name, cls, c, ins, act))
        self.output_name = last
        for name in self.frozen:  # requires_grad false: autograd computes no gradient for them
            if name in self.mods:
                for p in self.mods[name].parameters():
                    p.requires_grad_(False)

    @staticmethod
    def _nchw(shape):
        return [shape[2], shape[0], shape[1]] if len(shape) == 3 else list(shape)

    def forward(self, x):
        vals = {self.input_name: x}
        for name, cls, c, ins, act in self.order:
            a = vals[ins[0]]
            if cls == "Conv2D":
                y = self.mods[name](F.pad(a, c["_pad"]) if any(c["_pad"]) else a)
            elif cls in ("BatchNormalization", "Dense"):
                y = self.mods[name](a)
            elif cls == "Flatten":
                y = (a.permute(0, 2, 3, 1) if a.dim() == 4 else a).flatten(1)  # Keras' NHWC order
            elif cls == "ZeroPadding2D":
                (t, b), (l, r) = c["padding"]
                y = F.pad(a, (l, r, t, b))
            elif cls == "MaxPooling2D":
                y = F.max_pool2d(a, c["pool_size"], c["strides"])
            elif cls == "GlobalAveragePooling2D":
                y = a.mean(dim=(2, 3))
            elif cls == "Add":
                y = vals[ins[0]]
                for other in ins[1:]:
                    y = y + vals[other]
            elif cls == "Dropout":
                y = F.dropout(a, c["rate"], self.training)
            else:
                y = a
            if act == "relu":
                y = F.relu(y)
            elif act == "softmax":
                y = F.softmax(y, dim=-1)
            elif act != "linear":
                raise NotImplementedError(act)
            vals[name] = y
        return vals[self.output_name]


def keras_entry(fname, classes):
    def make():
        return KerasModel(os.path.join(HERE, fname))

    def make_input(b):
        shape = KerasModel(os.path.join(HERE, fname)).input_shape
        return torch.randn(b, *KerasModel._nchw(shape))

    return make, make_input, lambda b, out: torch.randint(0, classes, (b,))


ALL = {name: (*MODELS[name], name + ".onnx") for name in MODELS}
for kname, classes in (("mlp_mnist", 10), ("small_resnet", 10), ("resnet50", 1000), ("transfer", 10)):
    ALL["keras_" + kname] = (*keras_entry(f"keras_{kname}.json", classes), f"keras_{kname}.json")


# ----------------------------------------------------------------------------------------------
# Tracing and counting

def trace(model, x, y):
    originals = list(model.parameters())  # a tied parameter once
    params = [p.detach().requires_grad_(p.requires_grad) for p in originals]
    trained = [k for k, p in enumerate(originals) if p.requires_grad]  # a frozen layer's take no gradient
    # Every name a parameter goes by: torch 1.13's functional_call replaces only the names it is
    # given, so a tied weight (GPT's head) must be given under each of its names.
    index = {id(p): k for k, p in enumerate(originals)}
    names = [(f"{m}.{n}" if m else n, index[id(p)]) for m, mod in model.named_modules()
             for n, p in mod._parameters.items() if p is not None]

    def step(params, x, y):
        out = stateless.functional_call(model, {name: params[k] for name, k in names}, (x,))
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        return loss, torch.autograd.grad(loss, [params[k] for k in trained])

    return make_fx(step)(params, x, y), len(params), len(trained)


def opname(node):
    t = node.target
    if isinstance(t, torch._ops.OpOverload):
        return t.overloadpacket.__name__
    return getattr(t, "__name__", str(t))


def shape(a):
    return list(a.meta["tensor_meta"].shape)


def matmul_flops(node):
    n = opname(node)
    args = node.args
    if n in ("addmm", "baddbmm", "addmv", "addbmm"):
        args = args[1:]
    a, b = shape(args[0]), shape(args[1])
    if n in ("mm", "addmm"):
        return 2 * a[0] * a[1] * b[1]
    if n in ("bmm", "baddbmm"):
        return 2 * a[0] * a[1] * a[2] * b[2]
    if n in ("mv", "addmv"):
        return 2 * a[0] * a[1]
    if n == "dot":
        return 2 * a[0]
    raise NotImplementedError(n)


def conv_macs(grad_or_out_shape, weight_shape):
    # output elements x (input channels per group x kernel taps); weight is [O, C/g, kh, kw]
    return math.prod(grad_or_out_shape) * math.prod(weight_shape[1:])


def analyze(gm, n_params, n_grads):
    nodes = [n for n in gm.graph.nodes]
    out = [n for n in nodes if n.op == "output"][0]
    flat = list(out.args[0])  # make_fx flattens (loss, grads) into one list
    loss_node, grads = flat[0], flat[1:]
    assert len(grads) == n_grads
    split = nodes.index(loss_node)
    params = [n for n in nodes if n.op == "placeholder"][:n_params]
    param_set = set(params)

    # nodes whose value reaches a parameter gradient through layout/accumulate ops only
    to_grad = set()
    stack = [g for g in grads if isinstance(g, torch.fx.Node)]
    while stack:
        n = stack.pop()
        if n in to_grad:
            continue
        to_grad.add(n)
        if n.op == "call_function" and (opname(n) in LAYOUT or opname(n) in ACCUMULATE):
            ins = n.args if opname(n) in ACCUMULATE else n.args[:1]
            stack.extend(a for a in ins if isinstance(a, torch.fx.Node))

    def from_param(a):
        while isinstance(a, torch.fx.Node):
            if a in param_set:
                return True
            if a.op != "call_function" or opname(a) not in LAYOUT:
                return False
            a = a.args[0]
        return False

    fwd = collections.Counter()
    bwd = collections.Counter()
    f = collections.Counter()   # FLOP totals by category
    c = collections.Counter()   # counts by category
    for i, n in enumerate(nodes):
        if n.op != "call_function":
            continue
        name = opname(n)
        backward = i > split
        if name != "getitem":
            (bwd if backward else fwd)[name] += 1
        if name in ("matmul", "linear"):
            raise RuntimeError(f"composite {name} left in the trace")
        if name in MATMULS:
            fl = matmul_flops(n)
            if not backward:
                ops = n.args[1:] if name in ("addmm", "baddbmm") else n.args
                kind = "fwd_matmul_param" if any(from_param(a) for a in ops[:2]) else "fwd_matmul_act"
            else:
                kind = "bwd_matmul_weight_grad" if n in to_grad else "bwd_matmul_input_grad"
            c[kind] += 1
            f[kind] += fl
        elif name in CONV_FWD:
            assert not backward
            assert not n.args[6], "transposed convolution"
            c["fwd_conv"] += 1
            f["fwd_conv"] += 2 * conv_macs(shape(n), shape(n.args[1]))
        elif name in CONV_BWD:
            grad_out, _, weight = n.args[0], n.args[1], n.args[2]
            assert not n.args[7], "transposed convolution"
            mask = n.args[10]
            macs = conv_macs(shape(grad_out), shape(weight))
            if mask[0]:
                c["bwd_conv_input_grad"] += 1
                f["bwd_conv_input_grad"] += 2 * macs
            if mask[1]:
                c["bwd_conv_weight_grad"] += 1
                f["bwd_conv_weight_grad"] += 2 * macs
            c["bwd_conv_bias_grad"] += int(bool(mask[2]))
            c["bwd_conv_calls_mask_" + "".join("1" if m else "0" for m in mask)] += 1
    fw_flops = f["fwd_conv"] + f["fwd_matmul_param"] + f["fwd_matmul_act"]
    bw_flops = (f["bwd_conv_input_grad"] + f["bwd_conv_weight_grad"]
                + f["bwd_matmul_input_grad"] + f["bwd_matmul_weight_grad"])
    return {
        "forward": {
            "convolutions": c["fwd_conv"],
            "matmuls": c["fwd_matmul_param"] + c["fwd_matmul_act"],
            "matmuls_with_parameter": c["fwd_matmul_param"],
            "matmuls_activation_activation": c["fwd_matmul_act"],
            "conv_flops": f["fwd_conv"],
            "matmul_flops": f["fwd_matmul_param"] + f["fwd_matmul_act"],
            "matmul_flops_activation_activation": f["fwd_matmul_act"],
            "flops": fw_flops,
        },
        "backward": {
            "conv_input_grads": c["bwd_conv_input_grad"],
            "conv_weight_grads": c["bwd_conv_weight_grad"],
            "conv_bias_grads": c["bwd_conv_bias_grad"],
            "convolution_backward_calls_by_output_mask": {k[len("bwd_conv_calls_mask_"):]: v
                                                         for k, v in sorted(c.items())
                                                         if k.startswith("bwd_conv_calls_mask_")},
            "matmul_input_grads": c["bwd_matmul_input_grad"],
            "matmul_weight_grads": c["bwd_matmul_weight_grad"],
            "conv_input_grad_flops": f["bwd_conv_input_grad"],
            "conv_weight_grad_flops": f["bwd_conv_weight_grad"],
            "matmul_input_grad_flops": f["bwd_matmul_input_grad"],
            "matmul_weight_grad_flops": f["bwd_matmul_weight_grad"],
            "flops": bw_flops,
        },
        "training_step_flops": fw_flops + bw_flops,
        "aten_ops_forward": dict(sorted(fwd.items())),
        "aten_ops_backward": dict(sorted(bwd.items())),
    }


RULES = [
    "One training step = forward in training mode (batch norm on batch statistics, dropout on), "
    "cross-entropy loss on the logits (reshaped to [-1, classes]; a Keras model's final softmax is "
    "fused into the loss), and torch.autograd.grad of the loss w.r.t. every trainable parameter "
    "(a frozen Keras layer's, trainable false on it or on a model around it, take none). "
    "No optimizer update. The model input does not require a gradient.",
    "Traced with make_fx(tracing_mode='real') in torch 1.13; ops are ATen op overload packets, "
    "composites (linear, matmul, conv2d) already decomposed into mm/addmm/bmm/convolution.",
    "Forward = ops up to and including the loss; backward = every op after it.",
    "Matmuls: aten.mm, addmm, bmm, baddbmm (mv/dot/addmv/addbmm would count too; none occur). "
    "FLOPs = 2 x multiply-adds from the operand shapes: mm [m,k]x[k,n] = 2mkn, bmm [B,m,k]x[B,k,n] = "
    "2Bmkn; the bias add of addmm/baddbmm is not counted.",
    "A forward matmul is 'with_parameter' when an operand is a parameter seen through view/transpose/"
    "expand ops, else 'activation_activation' (attention's QK^T and PV).",
    "A backward matmul is a 'weight_grad' when its result reaches a parameter's gradient through "
    "view/transpose/add ops only; every other backward matmul is an 'input_grad' (gradient w.r.t. an "
    "activation, including attention's backward bmms).",
    "Convolutions: aten.convolution forward, FLOPs = 2 x N x O x Ho x Wo x (C/groups) x kh x kw. "
    "aten.convolution_backward with output_mask [input, weight, bias]: each of the input and weight "
    "gradients it computes counts once, with the forward convolution's FLOPs; the bias gradient is a "
    "reduction and is not counted. The first convolution's input gradient is not computed (mask 0xx).",
    "Only convolution and matmul FLOPs are counted: elementwise ops, normalization, softmax, pooling, "
    "embedding gathers and their gradients are not. aten_ops_forward/backward list every op call.",
    "All figures are for the stated batch; every count here scales linearly with batch.",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "oracle.json"))
    ap.add_argument("names", nargs="*", default=list(ALL))
    args = ap.parse_args()
    torch.set_num_threads(1)
    oracle = {"models": {}}
    if os.path.exists(args.out):
        oracle = json.load(open(args.out))
    for name in args.names:
        make_model, make_input, make_target, fixture = ALL[name]
        key = name if args.batch == 2 else f"{name}@{args.batch}"
        torch.manual_seed(0)
        model = make_model()
        model.train()
        x = make_input(args.batch)
        try:
            gm, n_params, n_grads = trace(model, x, make_target(args.batch, None))
            res = analyze(gm, n_params, n_grads)
        except Exception as e:  # record a failure instead of dropping the model
            oracle["models"][key] = {"fixture": fixture, "batch": args.batch,
                                     "error": f"{type(e).__name__}: {e}"}
            print(f"== {key}: FAILED {type(e).__name__}: {e}")
            continue
        entry = {"fixture": fixture, "batch": args.batch,
                 "input_shape_torch": list(x.shape), "input_dtype": str(x.dtype).replace("torch.", ""),
                 "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
                 "parameter_tensors": n_params, **res}
        oracle["models"][key] = entry
        fw, bw = res["forward"], res["backward"]
        print(f"== {key}: params {entry['trainable_parameters']}; fwd conv {fw['convolutions']} "
              f"matmul {fw['matmuls']} ({fw['matmuls_activation_activation']} act-act) "
              f"{fw['flops'] / 1e9:.3f} GFLOP; bwd conv dx {bw['conv_input_grads']} dW "
              f"{bw['conv_weight_grads']}, matmul dx {bw['matmul_input_grads']} dW "
              f"{bw['matmul_weight_grads']} {bw['flops'] / 1e9:.3f} GFLOP; step "
              f"{res['training_step_flops'] / 1e9:.3f} GFLOP")
    oracle["rules"] = RULES
    oracle["versions"] = {"torch": torch.__version__,
                          "torchvision": __import__("torchvision").__version__}
    oracle["models"] = dict(sorted(oracle["models"].items()))
    with open(args.out, "w") as f:
        json.dump({k: oracle[k] for k in ("rules", "versions", "models")}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
