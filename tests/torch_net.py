#!/usr/bin/env python3
"""torch_net.py: lrcnn's net files rebuilt in PyTorch, independently of lrcnn — a parser of the text
format of its own (nets/FORMAT.md), shapes inferred again, and RefNet: the layers as PyTorch's own
operations (F.conv2d, F.max_pool2d, F.batch_norm, ...), autograd for the gradients. Beside it, the
weights files in the layout of io/weights.h (init, load). Used by tests/torch_ref.py (the gradient
reference), tools/torch_peak.py, tools/fp64_floor.py and bench/. Nothing of lrcnn is imported.
"""
import os
import re

import h5py
import numpy as np
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------
# The net text format (nets/FORMAT.md), parsed independently of sim/net/net.c.

class NetError(Exception):
    pass


# kind -> (required keys, {optional key: default}); values are ints except bn's eps/momentum.
KINDS = {
    "input": (("c", "h", "w"), {}),
    "conv": (("c", "k"), {"s": 1, "p": 0, "d": 1, "bias": 1, "groups": 1}),
    "relu": ((), {}),
    "maxpool": (("k",), {"s": None, "p": 0, "ceil": 0}),
    "avgpool": (("k",), {"s": None, "p": 0}),
    "bn": ((), {"eps": 1e-5, "momentum": 0.1}),
    "fc": (("c",), {"bias": 1}),
    "add": ((), {}),
    "gap": ((), {}),
    "apool": (("o",), {}),
    "loss": ((), {"pixel": 0}),
    "sigmoid": ((), {}),
    "relu6": ((), {}),
    "leakyrelu": ((), {"slope": 0.01}),
    "silu": ((), {}),
    "gelu": ((), {}),
    "hardswish": ((), {}),
    "hardsigmoid": ((), {}),
    "mul": ((), {}),
    "dropout": ((), {"p": 0.5, "sample": 0}),
    "upsample": ((), {"scale": 2}),
    "concat": ((), {}),
    "bilinear": ((), {"scale": 2, "align": 0}),
    "gnorm": (("groups",), {"eps": 1e-5}),
    "lnorm": ((), {"eps": 1e-5}),
    "scale": ((), {}),
    "slice": (("c",), {"start": 0}),
    "shuffle": (("groups",), {}),
    "convt": (("c", "k"), {"s": 1, "p": 0, "op": 0, "d": 1, "bias": 1, "groups": 1}),
}
FLOAT_KEYS = ("eps", "momentum", "slope")  # and dropout's p (a pool's p is its padding)
ACTIVATION_KINDS = ("sigmoid", "relu6", "leakyrelu", "silu", "gelu", "hardswish", "hardsigmoid")


# Dropout's masks, as engine/act.h draws them: element i (flat over the whole N, C, H, W map) is
# kept when the top 24 bits of splitmix64(key + (i + 1) * golden), over 2^24, are at least p, with
# key = mix(mix(seed + golden) ^ (iteration << 20) ^ layer). The engine's first iteration is 1;
# cmd_run trains with --seed 1. NumPy's uint64 arithmetic wraps as C's does.
DROPOUT_SEED = 1
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def dropout_mask(seed, iteration, layer, shape, p):
    with np.errstate(over="ignore"):
        key = splitmix(splitmix(np.uint64(seed) + GOLDEN) ^ (np.uint64(iteration) << np.uint64(20)) ^ np.uint64(layer))
        i = np.arange(int(np.prod(shape)), dtype=np.uint64)
        z = splitmix(key + (i + np.uint64(1)) * GOLDEN)
    u = (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return (u >= np.float32(p)).astype(np.float32).reshape(shape)


class Scale(torch.nn.Module):
    """A factor a channel, (C, 1, 1): ConvNeXt's layer scale (`layer_scale * x`)."""

    def __init__(self, c):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(c, 1, 1))

    def forward(self, x):
        return self.weight * x


def activation(kind, x, a):
    """PyTorch's own elementwise activation for an activation layer (gelu: the exact, erf form)."""
    if kind == "leakyrelu":
        return F.leaky_relu(x, a["slope"])
    return {"sigmoid": torch.sigmoid, "relu6": F.relu6, "silu": F.silu, "gelu": F.gelu, "hardswish": F.hardswish,
            "hardsigmoid": F.hardsigmoid}[kind](x)
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")


class Layer:
    def __init__(self, kind, name, args, inputs, line):
        self.kind, self.name, self.args, self.inputs, self.line = kind, name, args, inputs, line
        self.shape = None  # (C, H, W) of the output; None for loss


def parse_net(path, image=None):
    """Returns (name, layers in topological order). image overrides the input's h and w."""
    layers, by_name, net_name = [], {}, os.path.splitext(os.path.basename(path))[0]
    with open(path) as f:
        text = f.read().splitlines()
    prev = None
    for lineno, raw in enumerate(text, 1):
        where = "%s:%d" % (path, lineno)
        tok = raw.split("#", 1)[0].split()
        if not tok:
            continue
        if tok[0] == "net":
            if len(tok) != 2:
                raise NetError("%s: 'net' takes one name" % where)
            net_name = tok[1]
            continue
        if tok[0] not in KINDS:
            raise NetError("%s: unknown kind '%s'" % (where, tok[0]))
        if len(tok) < 2 or "=" in tok[1] or not NAME_RE.match(tok[1]):
            raise NetError("%s: expected 'KIND NAME key=value ...'" % where)
        kind, name = tok[0], tok[1]
        if name in by_name:
            raise NetError("%s: duplicate name '%s'" % (where, name))
        req, opt = KINDS[kind]
        args, inputs = dict(opt), None
        for kv in tok[2:]:
            k, eq, v = kv.partition("=")
            if not eq or not v:
                raise NetError("%s: bad key=value '%s'" % (where, kv))
            if k == "in":
                inputs = v.split(",")
                continue
            if k not in req and k not in opt:
                raise NetError("%s: %s has no key '%s'" % (where, kind, k))
            try:
                if tok[0] == "conv" and k in ("k", "s", "p", "d") and "x" in v:  # HxW
                    args[k] = tuple(int(t) for t in v.split("x", 1))
                else:
                    args[k] = float(v) if k in FLOAT_KEYS or (tok[0] == "dropout" and k == "p") else int(v)
            except ValueError:
                raise NetError("%s: bad value %s=%s" % (where, k, v))
        for k in req:
            if k not in args:
                raise NetError("%s: %s needs %s=" % (where, kind, k))
        if kind in ("maxpool", "avgpool") and args["s"] is None:
            args["s"] = args["k"]
        if kind == "input":
            if layers:
                raise NetError("%s: the input layer must be the first and only one" % where)
            inputs = []
        elif inputs is None:
            if prev is None:
                raise NetError("%s: no previous layer to read" % where)
            inputs = [prev]
        want = (2, 64) if kind in ("add", "concat") else (2, 2) if kind == "mul" else (1, 1)
        if kind != "input" and not want[0] <= len(inputs) <= want[1]:
            raise NetError("%s: %s takes %d to %d input(s), got in=%s" % (where, kind, *want, ",".join(inputs)))
        layer = Layer(kind, name, args, inputs, lineno)
        layers.append(layer)
        by_name[name] = layer
        prev = name
    if not layers or layers[0].kind != "input":
        raise NetError("%s: no input layer first" % path)
    if image:
        layers[0].args["h"] = layers[0].args["w"] = image
    for l in layers:
        for i in l.inputs:
            if i not in by_name:
                raise NetError("%s:%d: unknown input '%s'" % (path, l.line, i))
    # Kahn's algorithm, taking the earliest ready layer in file order.
    order, done = [], set()
    while len(order) < len(layers):
        ready = [l for l in layers if l.name not in done and all(i in done for i in l.inputs)]
        if not ready:
            raise NetError("%s: the layers form a cycle" % path)
        order.append(ready[0])
        done.add(ready[0].name)
    infer_shapes(path, order, by_name)
    if order[-1].kind != "loss":
        raise NetError("%s: the net must end in a loss layer" % path)
    return net_name, order


def out_size(n, k, s, p, d, where, ceil=False):
    span = n + 2 * p - d * (k - 1) - 1
    o = -(-span // s) + 1 if ceil else span // s + 1
    if ceil and (o - 1) * s >= n + p:  # PyTorch's rule: the last window starts inside the map or its padding
        o -= 1
    if o <= 0:
        raise NetError("%s: output becomes empty" % where)
    return o


def infer_shapes(path, order, by_name):
    for l in order:
        a, where = l.args, "%s:%d" % (path, l.line)
        ins = [by_name[i].shape for i in l.inputs]
        if any(s is None for s in ins):
            raise NetError("%s: reads the loss" % where)
        x = ins[0] if ins else None
        if l.kind == "input":
            l.shape = (a["c"], a["h"], a["w"])
        elif l.kind == "conv":  # k, s, p, d: a number, or (along H, along W)
            hw = [[v[i] if isinstance(v, tuple) else v for v in (a["k"], a["s"], a["p"], a["d"])] for i in (0, 1)]
            l.shape = (a["c"], out_size(x[1], *hw[0], where), out_size(x[2], *hw[1], where))
        elif l.kind in ("maxpool", "avgpool"):
            ceil = bool(a.get("ceil", 0))
            l.shape = (x[0], out_size(x[1], a["k"], a["s"], a["p"], 1, where, ceil),
                       out_size(x[2], a["k"], a["s"], a["p"], 1, where, ceil))
        elif l.kind in ("relu", "bn", "dropout", "gnorm", "lnorm", "scale") or l.kind in ACTIVATION_KINDS:
            l.shape = x
        elif l.kind == "add":
            if any(i != ins[0] for i in ins):
                raise NetError("%s: add of shapes %s" % (where, ins))
            l.shape = x
        elif l.kind == "convt":  # PyTorch's ConvTranspose2d formula
            size = [(v - 1) * a["s"] - 2 * a["p"] + a["d"] * (a["k"] - 1) + a["op"] + 1 for v in x[1:]]
            if min(size) < 1:
                raise NetError("%s: convt output %s is empty" % (where, size))
            l.shape = (a["c"], size[0], size[1])
        elif l.kind == "fc":
            l.shape = (a["c"], 1, 1)
        elif l.kind == "gap":
            l.shape = (x[0], 1, 1)
        elif l.kind == "apool":
            l.shape = (x[0], a["o"], a["o"])
        elif l.kind in ("upsample", "bilinear"):
            l.shape = (x[0], x[1] * a["scale"], x[2] * a["scale"])
        elif l.kind == "mul":
            scale = [s[1:] == (1, 1) for s in ins]
            if ins[0][0] != ins[1][0] or (ins[0] != ins[1] and not any(scale)):
                raise NetError("%s: mul of shapes %s and %s" % (where, ins[0], ins[1]))
            l.shape = ins[1] if scale[0] else ins[0]
        elif l.kind == "slice":
            if a["start"] + a["c"] > x[0]:
                raise NetError("%s: slice of channels %d..%d of %d" % (where, a["start"], a["start"] + a["c"] - 1, x[0]))
            l.shape = (a["c"],) + x[1:]
        elif l.kind == "shuffle":
            if x[0] % a["groups"]:
                raise NetError("%s: %d groups of %d channels" % (where, a["groups"], x[0]))
            l.shape = x
        elif l.kind == "concat":
            if any(i[1:] != ins[0][1:] for i in ins):
                raise NetError("%s: concat of shapes %s" % (where, ins))
            l.shape = (sum(i[0] for i in ins),) + x[1:]
        elif l.kind == "loss":
            l.shape = None


# ---------------------------------------------------------------------------------------------
# The network as a torch module. Parameters are keyed by our layer names ("layer1.0.conv1" is not
# a legal submodule name, so modules sit in a ModuleList and a dict maps names to them).

class RefNet(torch.nn.Module):
    def __init__(self, layers, dtype=torch.float32):
        super().__init__()
        self.layers = layers
        self.by_name = {l.name: l for l in layers}
        self.mods, self.module_of = torch.nn.ModuleList(), {}
        # Created in file order so an init seed gives the same weights whatever the topology.
        for l in sorted(layers, key=lambda l: l.line):
            a = l.args
            x = self.by_name[l.inputs[0]].shape if l.inputs else None
            if l.kind == "conv":
                m = torch.nn.Conv2d(x[0], a["c"], a["k"], stride=a["s"], padding=a["p"], dilation=a["d"],
                                    bias=bool(a["bias"]), groups=a["groups"])
            elif l.kind == "convt":
                m = torch.nn.ConvTranspose2d(x[0], a["c"], a["k"], stride=a["s"], padding=a["p"], output_padding=a["op"],
                                             dilation=a["d"], bias=bool(a["bias"]), groups=a["groups"])
            elif l.kind == "fc":
                m = torch.nn.Linear(x[0] * x[1] * x[2], a["c"], bias=bool(a["bias"]))
            elif l.kind == "bn":
                m = torch.nn.BatchNorm2d(x[0], eps=a["eps"], momentum=a["momentum"])
            elif l.kind == "gnorm":
                m = torch.nn.GroupNorm(a["groups"], x[0], eps=a["eps"])
            elif l.kind == "lnorm":  # over the channels at each place: applied to (N, H, W, C)
                m = torch.nn.LayerNorm(x[0], eps=a["eps"])
            elif l.kind == "scale":
                m = Scale(x[0])
            else:
                continue
            m.to(dtype)
            self.mods.append(m)
            self.module_of[l.name] = m

    def set_bn(self, mode):
        """train: batch statistics and running-stat update; frozen: running statistics (eval mode
        for the bn modules only), gamma and beta still learn."""
        for m in self.module_of.values():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.train(mode == "train")

    def tensors(self):
        """(layer, dataset name, tensor) in weights.h's names, parameters first."""
        out = []
        for l in self.layers:
            m = self.module_of.get(l.name)
            if m is None:
                continue
            out.append((l.name, "weight", m.weight))
            if getattr(m, "bias", None) is not None:
                out.append((l.name, "bias", m.bias))
            if isinstance(m, torch.nn.BatchNorm2d):
                out.append((l.name, "running_mean", m.running_mean))
                out.append((l.name, "running_var", m.running_var))
        return out

    def params(self):
        return [(n, d, t) for n, d, t in self.tensors() if isinstance(t, torch.nn.Parameter)]

    def forward(self, x, labels):
        v = {}
        for l in self.layers:
            y = self.layer_out(l, [v[i] for i in l.inputs], x, labels)
            if l.kind == "loss":
                return y
            v[l.name] = y
        raise AssertionError("no loss layer")

    def layer_out(self, l, src, x, labels):
        """Layer l's output from its inputs' (the loss's value for the loss)."""
        a = l.args
        if l.kind == "input":
            y = x
        elif l.kind in ("conv", "convt", "bn", "gnorm", "scale"):
            y = self.module_of[l.name](src[0])
        elif l.kind == "lnorm":
            y = self.module_of[l.name](src[0].permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        elif l.kind == "relu":
            y = F.relu(src[0])
        elif l.kind in ACTIVATION_KINDS:
            y = activation(l.kind, src[0], a)
        elif l.kind == "dropout":
            # lrcnn's mask (a hash of seed, iteration and place, not PyTorch's generator), applied
            # as native_dropout applies its own: input * mask * (1 / (1 - p))
            shape = tuple(src[0].shape[:1]) + (1, 1, 1) if a["sample"] else tuple(src[0].shape)  # sample: a draw an image
            mask = dropout_mask(DROPOUT_SEED, 1, self.layers.index(l), shape, a["p"])
            y = src[0] * torch.from_numpy(mask).to(src[0].dtype) * float(np.float32(1.0 / (1.0 - a["p"])))
        elif l.kind == "maxpool":
            y = F.max_pool2d(src[0], a["k"], a["s"], a["p"], ceil_mode=bool(a.get("ceil", 0)))
        elif l.kind == "avgpool":
            y = F.avg_pool2d(src[0], a["k"], a["s"], a["p"], ceil_mode=False, count_include_pad=True)
        elif l.kind == "fc":
            y = self.module_of[l.name](torch.flatten(src[0], 1)).reshape(x.shape[0], -1, 1, 1)
        elif l.kind == "add":
            y = src[0]
            for t in src[1:]:  # left to right, as a chain of adds
                y = y + t
        elif l.kind == "gap":
            y = src[0].mean(dim=(2, 3), keepdim=True)
        elif l.kind == "apool":
            y = F.adaptive_avg_pool2d(src[0], a["o"])
        elif l.kind == "upsample":
            y = F.interpolate(src[0], scale_factor=a["scale"], mode="nearest")
        elif l.kind == "bilinear":
            y = F.interpolate(src[0], scale_factor=a["scale"], mode="bilinear", align_corners=bool(a["align"]))
        elif l.kind == "concat":
            y = torch.cat(src, 1)
        elif l.kind == "slice":  # a view, as torch.chunk's and torch.narrow's
            y = src[0].narrow(1, a["start"], a["c"])
        elif l.kind == "shuffle":  # torchvision's channel_shuffle
            n, ch, h, w = src[0].shape
            y = src[0].view(n, a["groups"], ch // a["groups"], h, w).transpose(1, 2).contiguous().view(n, ch, h, w)
        elif l.kind == "mul":
            y = src[0] * src[1]  # a (N, C, 1, 1) side broadcasts
        elif l.kind == "loss":
            if a["pixel"]:  # (N, C, H, W) logits, (N, H, W) labels: the mean over every pixel
                y = F.cross_entropy(src[0], labels.reshape(src[0].shape[0], *src[0].shape[2:]))
            else:
                y = F.cross_entropy(torch.flatten(src[0], 1), labels)
        return y


# ---------------------------------------------------------------------------------------------
# HDF5 (io/weights.h layout)

def write_h5_atomic(path, fill):
    """Writes through a temporary name so a failure leaves nothing half-written."""
    tmp = path + ".tmp%d" % os.getpid()
    try:
        with h5py.File(tmp, "w") as f:
            fill(f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_group(f, group, model, values=None):
    """values: {(layer, dataset): ndarray}; default: the model's current tensors."""
    for layer, ds, t in model.tensors():
        a = values[(layer, ds)] if values is not None else t.detach().cpu().numpy()
        if a is not None:
            f.create_dataset("%s/%s/%s" % (group, layer, ds), data=np.asarray(a, dtype=np.float32))


def load_params(model, f, group="params"):
    """Copies /params into the model; returns a list of problems (missing, shape, dtype)."""
    problems = []
    with torch.no_grad():
        for layer, ds, t in model.tensors():
            path = "%s/%s/%s" % (group, layer, ds)
            if path not in f:
                problems.append("missing dataset /%s" % path)
                continue
            d = f[path]
            if d.dtype != np.float32 or tuple(d.shape) != tuple(t.shape):
                problems.append("/%s is %s %s, expected float32 %s" % (path, d.dtype, tuple(d.shape), tuple(t.shape)))
                continue
            t.copy_(torch.from_numpy(d[()]).to(t.dtype))
    return problems


def attr_str(f, k, default=None):
    v = f.attrs.get(k, default)
    return v.decode() if isinstance(v, bytes) else v
