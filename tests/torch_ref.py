#!/usr/bin/env python3
"""torch_ref.py: the independent PyTorch reference check for lrcnn's training engine.

What it checks: for one training iteration, lrcnn's loss, every parameter gradient, the
parameters after one optimizer step (SGD with momentum or Adam, fresh state) and BatchNorm's
running statistics, against PyTorch running the same network on the same weights and batch.

Why it is independent: the network is rebuilt here from the net text file by a parser of its own
(nets/FORMAT.md), the layers are PyTorch's (F.conv2d, F.max_pool2d, F.batch_norm, ...), the
gradients come from autograd and the step from torch.optim. Nothing of lrcnn is imported; the two
sides meet only through HDF5 files in the layout of io/weights.h:
    init     torch's default initialization -> /params (lrcnn train --init-weights reads it)
    compare  lrcnn's --dump (/params, /input, /labels, /grads, /after, attributes) -> torch
The reference runs in float32, as the LR-CNN authors' PyTorch prototype did; the differences it
accepts are those of fp32 summation order (see TOLERANCES).

Commands:
    torch_ref.py init NETFILE OUT.h5 --seed S [--image H]
    torch_ref.py compare NETFILE DUMP.h5 [--bn train|frozen]
    torch_ref.py run LRCNN_BINARY [--keep DIR]   every case: init -> lrcnn train --dump -> compare
    torch_ref.py selftest                the checker checks itself on dumps made by torch in fp64

What it deliberately does not do: per-band BatchNorm (approximate by design, no exact reference),
more than one iteration (the optimizer state after step 1 is fully determined by the gradient).
Run with Debian's /usr/bin/python3 (python3-torch 1.13.1, python3-h5py).
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn.functional as F

# ---------------------------------------------------------------------------------------------
# TOLERANCES: every acceptance threshold of this file, and why.
#
# Both sides compute in float32 but sum in different orders (oneDNN/BLAS in torch; our loops,
# which accumulate batch reductions in double). Reassociating a sum of n fp32 terms changes it by
# about n^0.5 * 6e-8 times the terms' magnitude, which for these nets (sums of up to ~10^4 terms,
# a few layers deep) is ~1e-6 relative to a tensor's norm. The thresholds sit ~100x above that
# and far below what any indexing, layout, padding or formula error produces (>= 1e-2).
LOSS_RTOL = 1e-5           # |loss_ours - loss_ref| <= LOSS_RTOL * |loss_ref|: one fp32 softmax+mean
GRAD_NORM_RTOL = 1e-4      # ||g_ours - g_ref|| <= GRAD_NORM_RTOL * ||g_ref||  (the main criterion)
GRAD_ELEM_FRAC = 1e-3      # every |g_ours - g_ref| <= GRAD_ELEM_FRAC * max|g_ref|: catches a few
                           # wrong elements (a border pixel, one channel) that the norm would hide
GRAD_FLOOR_FRAC = 1e-6     # both gradient bounds get + GRAD_FLOOR_FRAC * (largest gradient norm /
                           # max in the net): analytically zero gradients are fp noise on both sides
AFTER_ATOL = 1e-6          # parameters after the step, element-wise: AFTER_ATOL + AFTER_RTOL*|w|
AFTER_RTOL = 1e-5          #   (fp32 ulp of |w| ~ 0.1 is 7e-9; the step's own rounding is smaller)
# The after-step check compares with torch's step on torch's gradient, so it inherits the gradient
# tolerance through the step function: per element we add lr * (how far the step can move when the
# gradient moves by the allowed GRAD_ELEM_FRAC * max|g_ref|). For SGD's first step (w -= lr*g) that
# is lr * delta. For Adam's first step (w -= lr * g / (|g| + eps), i.e. ~lr*sign(g)) it is ~0 where
# |g| >> delta and up to 2*lr where |g| <= delta: a near-zero gradient may legitimately come out
# with the other sign on the other side, and Adam turns that into a full step the other way.
# A second check ("step") applies torch's optimizer to OUR gradients and must match our
# parameters after the step with no slack at all: that isolates the optimizer from the gradients.
RUNSTAT_RTOL = 1e-5        # running mean/var: RUNSTAT_RTOL*|ref| + RUNSTAT_RTOL * value scale,
                           # where the value scale (max |mean|, sqrt(max var)) bounds the rounding
                           # of a batch mean whose terms may cancel
SHOW = 5                   # mismatching elements printed per failing tensor


# ---------------------------------------------------------------------------------------------
# The net text format (nets/FORMAT.md), parsed independently of sim/net/net.c.

class NetError(Exception):
    pass


# kind -> (required keys, {optional key: default}); values are ints except bn's eps/momentum.
KINDS = {
    "input": (("c", "h", "w"), {}),
    "conv": (("c", "k"), {"s": 1, "p": 0, "d": 1, "bias": 1, "groups": 1}),
    "relu": ((), {}),
    "maxpool": (("k",), {"s": None, "p": 0}),
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


def out_size(n, k, s, p, d, where):
    o = (n + 2 * p - d * (k - 1) - 1) // s + 1
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
            l.shape = (x[0], out_size(x[1], a["k"], a["s"], a["p"], 1, where),
                       out_size(x[2], a["k"], a["s"], a["p"], 1, where))
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
            y = F.max_pool2d(src[0], a["k"], a["s"], a["p"], ceil_mode=False)
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


# ---------------------------------------------------------------------------------------------
# init

def cmd_init(netfile, out, seed, image=None):
    _, layers = parse_net(netfile, image)
    torch.manual_seed(seed)
    model = RefNet(layers)
    # BN starts at gamma 1, beta 0, mean 0, var 1, where frozen BN is the identity and a swapped
    # gamma/beta or mean/var goes unseen: perturb them (deterministically, from the same seed).
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.module_of.values():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
            elif isinstance(m, (torch.nn.GroupNorm, torch.nn.LayerNorm)):  # likewise gamma and beta
                c = m.weight.numel()
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
            elif isinstance(m, Scale):  # ConvNeXt's layer scale starts at 1e-6: a spread of values instead
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))

    def fill(f):
        write_group(f, "params", model)
        f.attrs["source"] = "tests/torch_ref.py init (torch %s default initialization)" % torch.__version__
        f.attrs["seed"] = np.int64(seed)
    write_h5_atomic(out, fill)


# ---------------------------------------------------------------------------------------------
# compare

class Report:
    def __init__(self):
        self.failures, self.worst_grad = [], 0.0

    def line(self, what, name, ours, ref, ok, extra, bad_idx=None):
        diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        mag = np.abs(ref.astype(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / mag)
        nref = float(np.linalg.norm(ref.astype(np.float64)))
        nrel = float(np.linalg.norm(diff)) / nref if nref > 0 else (0.0 if diff.max(initial=0) == 0 else math.inf)
        print("  %-6s %-36s max abs %9.3e  max rel %9.3e  norm rel %9.3e  %s%s"
              % (what, name, diff.max(initial=0), rel.max(initial=0), nrel, "OK" if ok else "FAIL", extra))
        if not ok:
            self.failures.append("%s %s" % (what, name))
            idx = bad_idx if bad_idx is not None and len(bad_idx) else np.argsort(-diff.ravel())[:SHOW]
            for i in idx[:SHOW]:
                at = np.unravel_index(i, ref.shape) if ref.ndim else ()
                print("      at %-18s ours %+.8e  ref %+.8e  diff %.3e"
                      % (tuple(int(j) for j in at), ours.ravel()[i], ref.ravel()[i], diff.ravel()[i]))
        return nrel

    def fail(self, msg):
        print("  FAIL " + msg)
        self.failures.append(msg)


def compare_elems(rep, what, name, ours, ref, tol, extra=""):
    """Element-wise |ours - ref| <= tol (array or scalar)."""
    if ours.shape != ref.shape:
        return rep.fail("%s %s: shape %s, reference %s" % (what, name, ours.shape, ref.shape))
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
    bad = np.flatnonzero(~(diff <= tol))  # NaN counts as bad
    rep.line(what, name, ours, ref, len(bad) == 0, extra, bad)


def adam_dir(g, eps):
    """Adam's first bias-corrected step direction per unit lr: m/(sqrt(v)+eps) = g/(|g|+eps)."""
    return g / (np.abs(g) + eps)


def cmd_compare(netfile, dump, bn=None):
    """Returns a Report (failures empty on success)."""
    rep = Report()
    f = h5py.File(dump, "r")
    try:
        for req in ("input", "labels", "params", "grads", "after"):
            if req not in f:
                rep.fail("dump %s has no /%s" % (dump, req))
        for k in ("optimizer", "lr", "loss"):
            if k not in f.attrs:
                rep.fail("dump %s has no attribute %s" % (dump, k))
        if rep.failures:
            return rep
        x_np, labels_np = f["input"][()], f["labels"][()]
        if x_np.dtype != np.float32 or x_np.ndim != 4 or labels_np.dtype != np.int64 or labels_np.shape[:1] != x_np.shape[:1]:
            rep.fail("/input %s %s or /labels %s %s: expected float32 (N,C,H,W) and int64 (N,) or (N,H,W)"
                     % (x_np.dtype, x_np.shape, labels_np.dtype, labels_np.shape))
            return rep
        _, layers = parse_net(netfile)
        inp = layers[0]
        if inp.args["c"] != x_np.shape[1]:
            rep.fail("/input has %d channels, %s says %d" % (x_np.shape[1], netfile, inp.args["c"]))
            return rep
        if x_np.shape[2:] != (inp.args["h"], inp.args["w"]):  # lrcnn train --image S changed it
            if x_np.shape[2] != x_np.shape[3]:
                rep.fail("/input is %dx%d, %s says %dx%d" % (x_np.shape[2], x_np.shape[3], netfile, inp.args["h"], inp.args["w"]))
                return rep
            _, layers = parse_net(netfile, int(x_np.shape[2]))
        mode_attr = attr_str(f, "bn", "auto")
        plan = attr_str(f, "plan", "?")
        if bn is None:
            if mode_attr in ("train", "frozen"):
                bn = mode_attr
            elif mode_attr == "auto" and not re.search(r"rows|2ps|overl", plan):
                bn = "train"  # auto resolves to train outside row segments (sim/plan/PLANS.md)
            else:
                rep.fail("dump bn=%s under plan '%s': no exact reference (give --bn train|frozen)" % (mode_attr, plan))
                return rep
        elif mode_attr not in (bn, "auto"):
            rep.fail("--bn %s but the dump says bn=%s" % (bn, mode_attr))
            return rep
        opt = attr_str(f, "optimizer")
        lr = float(f.attrs["lr"])
        print("  dump %s: net %s, plan %s, bn %s, optimizer %s, lr %g, batch %d, input %s"
              % (os.path.basename(dump), attr_str(f, "net", "?"), plan, bn, opt, lr, x_np.shape[0], x_np.shape[2:]))
        model = RefNet(layers)
        problems = load_params(model, f)
        # The dump must hold exactly our tensors: an extra layer means the two nets differ.
        want = {"%s/%s" % (l, d) for l, d, _ in model.tensors()}
        for g in ("params", "grads", "after"):
            have = set()
            f[g].visit(lambda p: have.add(p) if isinstance(f[g][p], h5py.Dataset) else None)
            need = want if g != "grads" else {"%s/%s" % (l, d) for l, d, _ in model.params()}
            problems += ["/%s/%s is not a tensor of the net" % (g, p) for p in sorted(have - need)]
            if g != "params":
                problems += ["missing dataset /%s/%s" % (g, p) for p in sorted(need - have)]
        if problems:
            for p in problems:
                rep.fail("layout: " + p)
            return rep
        before = {(l, d): t.detach().clone() for l, d, t in model.tensors()}
        model.set_bn(bn)
        x, labels = torch.from_numpy(x_np), torch.from_numpy(labels_np)
        logits = [layer.shape for layer in layers if layer.name == layers[-1].inputs[0]][0]
        pixel = bool(layers[-1].args["pixel"])
        classes = logits[0] if pixel else int(np.prod(logits))
        want = x_np.shape[:1] + (tuple(logits[1:]) if pixel else ())
        if labels_np.shape != want:
            rep.fail("/labels %s: the loss wants %s" % (labels_np.shape, want))
            return rep
        if labels_np.min() < 0 or labels_np.max() >= classes:
            rep.fail("/labels outside 0..%d" % (classes - 1))
            return rep

        loss = model(x, labels)
        loss.backward()
        ref_loss, our_loss = float(loss), float(f.attrs["loss"])
        ok = abs(our_loss - ref_loss) <= LOSS_RTOL * abs(ref_loss)
        print("  %-6s %-36s ours %.8f  ref %.8f  rel %9.3e  %s" % ("loss", "", our_loss, ref_loss,
              abs(our_loss - ref_loss) / abs(ref_loss), "OK" if ok else "FAIL"))
        if not ok:
            rep.failures.append("loss")

        params = model.params()
        g_ref = {(l, d): t.grad.detach().numpy().copy() for l, d, t in params}
        g_our = {(l, d): f["grads/%s/%s" % (l, d)][()] for l, d, _ in params}
        net_norm = max(float(np.linalg.norm(g)) for g in g_ref.values())
        net_max = max(float(np.abs(g).max()) for g in g_ref.values())
        delta = {}  # the per-element gradient tolerance, inherited by the after-step check
        for l, d, _ in params:
            ours, ref = g_our[(l, d)], g_ref[(l, d)]
            name = "%s.%s" % (l, d)
            if ours.shape != ref.shape or ours.dtype != np.float32:
                rep.fail("grad %s: %s %s, reference float32 %s" % (name, ours.dtype, ours.shape, ref.shape))
                continue
            diff = np.abs(ours.astype(np.float64) - ref)
            delta[(l, d)] = GRAD_ELEM_FRAC * float(np.abs(ref).max()) + GRAD_FLOOR_FRAC * net_max
            norm_ok = np.linalg.norm(diff) <= GRAD_NORM_RTOL * np.linalg.norm(ref) + GRAD_FLOOR_FRAC * net_norm
            bad = np.flatnonzero(~(diff <= delta[(l, d)]))
            nrel = rep.line("grad", name, ours, ref, bool(norm_ok) and len(bad) == 0,
                            "" if norm_ok else "  (norm rel > %g)" % GRAD_NORM_RTOL, bad)
            rep.worst_grad = max(rep.worst_grad, nrel)

        # One optimizer step, fresh state: on torch's gradients ("after") and on ours ("step").
        def make_opt(ts):
            if opt == "sgd":
                return torch.optim.SGD(ts, lr=lr, momentum=float(f.attrs["momentum"]))
            if opt == "adam":
                return torch.optim.Adam(ts, lr=lr, betas=(float(f.attrs["beta1"]), float(f.attrs["beta2"])),
                                        eps=float(f.attrs["eps"]))
            raise NetError("dump optimizer '%s' is not sgd or adam" % opt)
        ts = [t for _, _, t in params]
        make_opt(ts).step()
        after_ref = {(l, d): t.detach().numpy().copy() for l, d, t in model.tensors()}
        with torch.no_grad():
            for l, d, t in params:
                t.copy_(before[(l, d)])
                t.grad = torch.from_numpy(g_our[(l, d)]).clone()
        make_opt(ts).step()
        step_ref = {(l, d): t.detach().numpy().copy() for l, d, t in params}

        for l, d, _ in params:
            name, ours = "%s.%s" % (l, d), f["after/%s/%s" % (l, d)][()]
            ref, g = after_ref[(l, d)], g_ref[(l, d)]
            if (l, d) not in delta:
                continue
            dl = delta[(l, d)]
            if opt == "sgd":
                slack = lr * dl
            else:
                eps = float(f.attrs["eps"])
                slack = lr * np.maximum(np.abs(adam_dir(g + dl, eps) - adam_dir(g, eps)),
                                        np.abs(adam_dir(g - dl, eps) - adam_dir(g, eps)))
            compare_elems(rep, "after", name, ours, ref, AFTER_ATOL + AFTER_RTOL * np.abs(ref) + slack)
        for l, d, _ in params:
            name, ours, ref = "%s.%s" % (l, d), f["after/%s/%s" % (l, d)][()], step_ref[(l, d)]
            compare_elems(rep, "step", name, ours, ref, AFTER_ATOL + AFTER_RTOL * np.abs(ref))
        for l, m in model.module_of.items():
            if not isinstance(m, torch.nn.BatchNorm2d):
                continue
            rm, rv = after_ref[(l, "running_mean")], after_ref[(l, "running_var")]
            scale = max(float(np.abs(rm).max()), math.sqrt(float(rv.max())))
            for d, ref in (("running_mean", rm), ("running_var", rv)):
                ours = f["after/%s/%s" % (l, d)][()]
                compare_elems(rep, "after", "%s.%s" % (l, d), ours, ref,
                              RUNSTAT_RTOL * np.abs(ref) + RUNSTAT_RTOL * scale,
                              "" if bn == "train" else "  (frozen: unchanged)")
    finally:
        f.close()
    return rep


# ---------------------------------------------------------------------------------------------
# run: the ctest entry

HERE = os.path.dirname(os.path.abspath(__file__))
NETS = os.path.join(os.path.dirname(HERE), "nets")

# One small net per layer kind, odd sizes; every pooling layer sits behind a conv so its backward
# reaches a parameter gradient. Each ends with what it needs to reach the loss.
GENERATED = {
    # channel groups: a depthwise-separable block (MobileNet's), then a strided grouped conv
    "conv-groups": """input data c=3 h=13 w=11
conv conv1 c=8 k=3 p=1
relu6 act1
conv dw c=8 k=3 p=1 groups=8 bias=0  # depthwise
relu6 act2
conv pw c=12 k=1                # pointwise
conv g4 c=12 k=3 s=2 p=1 groups=4 # 13x11 -> 7x6, three channels a group
relu r4
gap gap
fc fc c=5
loss loss
""",
    # dropout after a relu, after a strided conv and on the fc's logits, at three rates; stochastic
    # depth (a draw an image) on a residual branch
    "dropout": """input data c=3 h=12 w=10
conv conv1 c=6 k=3 p=1
relu relu1
dropout drop1 p=0.3
conv conv2 c=6 k=3 s=2 p=1      # 12x10 -> 6x5
dropout drop2
conv conv3 c=6 k=3 p=1
dropout depth p=0.5 sample=1    # with the batch of 3, p=0.5 drops some images and keeps others
add res in=depth,drop2
gap gap
fc fc c=5
dropout drop3 p=0.2
loss loss
""",
    # every elementwise activation, in and out of place (relu6 and leakyrelu after a conv run in
    # place; after an add whose input is read twice they cannot)
    "activations": """input data c=3 h=15 w=13
conv conv1 c=6 k=3 p=1
relu6 act1
conv conv2 c=6 k=3 p=1
leakyrelu act2 slope=0.1
conv conv3 c=6 k=3 p=1
sigmoid act3
conv conv4 c=6 k=3 s=2 p=1      # 15x13 -> 8x7
silu act4
conv conv5 c=6 k=3 p=1
gelu act5
conv conv6 c=6 k=1
hardswish act6
add sum in=act6,act6
leakyrelu act7
gap gap
fc fc c=5
loss loss
""",
    "conv-k5s2": """input data c=3 h=17 w=15
conv conv1 c=6 k=5 s=2          # 17x15 -> 7x6, padding 0
relu relu1
gap gap
fc fc c=5
loss loss
""",
    "conv-dil2": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 d=2 p=2      # dilated, 13x11 -> 13x11
relu relu1
conv conv2 c=4 k=3 d=2 p=1      # dilation larger than padding: 13x11 -> 11x9
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "conv-1x1": """input data c=4 h=13 w=11
conv conv1 c=6 k=1 bias=0
relu relu1
conv conv2 c=5 k=1 s=2          # 1x1 stride 2: 13x11 -> 7x6
relu relu2
gap gap
fc fc c=5 bias=0
loss loss
""",
    "maxpool": """input data c=3 h=17 w=15
conv conv1 c=4 k=3 p=1
maxpool pool1 k=3 s=2 p=1       # padding never wins: 17x15 -> 9x8
fc fc c=5                       # over 4x9x8
loss loss
""",
    "avgpool": """input data c=3 h=17 w=15
conv conv1 c=4 k=3 p=1
avgpool pool1 k=3 s=2 p=1       # zero padding counted, divisor 9: 17x15 -> 9x8
fc fc c=5
loss loss
""",
    "bn": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1 bias=0
bn bn1
relu relu1
conv conv2 c=5 k=3 s=2 bias=0   # 13x11 -> 6x5
bn bn2 eps=1e-3 momentum=0.3    # non-default keys must be honoured
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "fc-map": """input data c=3 h=7 w=5
conv conv1 c=4 k=3              # 7x5 -> 5x3
relu relu1
fc fc1 c=8                      # over 4x5x3 = 60 inputs in (C, H, W) order
relu relu2
fc fc2 c=5
loss loss
""",
    "add": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1
relu relu1
conv conv2 c=6 k=3 p=1
add add1 in=conv2,relu1         # shortcut: relu1 has two consumers
relu relu2
gap gap
fc fc c=5
loss loss
""",
    "add-later": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 p=1
relu relu1
add add1 in=conv2,relu1         # conv2 is defined further down (FORMAT.md allows it)
relu relu2
gap gap
fc fc c=5
loss loss
conv conv2 c=6 k=3 p=1 in=relu1
""",
    "many": """input data c=3 h=9 w=8
conv a c=2 k=3 p=1
conv b c=2 k=1 in=data
conv c c=2 k=3 s=1 p=2 d=2 in=data
add sum in=a,b,c,a              # four inputs, one twice: a's gradient twice over
relu r in=sum
concat dense in=data,a,r,b,c,r  # six inputs: the image, one twice (DenseNet's concat)
conv d c=3 k=3 s=2 in=dense
gap g
fc fc c=4
loss loss
""",
    "conv-hw": """input data c=3 h=11 w=13
conv conv1 c=6 k=1x7 p=0x3          # Inception's factorized 7x7: 1x7, then 7x1
conv conv2 c=6 k=7x1 p=3x0
relu relu2
conv conv3 c=4 k=3x5 s=2x1 p=1x2 d=1x2 groups=2 # 11x13 -> 6x13
relu relu3
conv conv4 c=4 k=1 s=1x2            # -> 6x7
gap gap
fc fc c=5
loss loss
""",
    "norms": """input data c=3 h=9 w=7
conv conv1 c=8 k=3 p=1
gnorm gn1 groups=4                  # two channels a group, over the whole 9x7 map
relu relu1
conv conv2 c=6 k=3 s=2 p=1          # -> 5x4
lnorm ln2 eps=1e-6                  # each place over its 6 channels (ConvNeXt's LayerNorm2d)
gelu act2
conv conv3 c=4 k=1
scale ls3                           # ConvNeXt's layer scale
gnorm gn3 groups=1                  # one group: LayerNorm over (C, H, W)
gap gap
fc fc c=5
loss loss
""",
    "bilinear": """input data c=3 h=7 w=5
conv conv1 c=4 k=3 p=1
bilinear up1 scale=3                # 7x5 -> 21x15
conv conv2 c=4 k=3 s=2              # -> 10x7
relu relu2
bilinear up2 align=1                # -> 20x14, corners aligned
conv conv3 c=3 k=3 s=2 p=1          # -> 10x7
bilinear up3 scale=4 align=1        # -> 40x28
conv conv4 c=2 k=1
loss loss pixel=1
""",
    "convt": """input data c=3 h=7 w=6
conv conv1 c=4 k=3 s=2 p=1          # 7x6 -> 4x3
relu relu1
convt up1 c=4 k=2 s=2               # -> 8x6: a U-Net's up-convolution
convt up2 c=6 k=3 s=2 p=1 op=1 groups=2 # -> 16x12
relu relu2
convt up3 c=2 k=3 p=2 d=2 bias=0    # stride 1, dilated: 16x12
loss loss pixel=1
""",
    "gap": """input data c=3 h=13 w=11
conv conv1 c=6 k=3 s=2 p=1      # 13x11 -> 7x6
relu relu1
gap gap                         # mean over 42 positions
fc fc c=5
loss loss
""",
    "upsample": """input data c=3 h=7 w=5
conv conv1 c=4 k=3 p=1
upsample up1 scale=3           # 7x5 -> 21x15
conv conv2 c=4 k=3 s=2         # -> 10x7: a strided window over the copies
relu relu2
upsample up2                   # -> 20x14
fc fc c=5
loss loss
""",
    "concat": """input data c=3 h=9 w=7
conv a c=2 k=3 p=1
conv b c=3 k=1 in=data
concat ab in=a,b               # 2 + 3 channels
concat self in=ab,ab           # a tensor with itself: both halves' gradients to it
conv c c=4 k=3 s=2
concat img in=data,data        # the image itself, twice (no gradient)
conv d c=2 k=3 s=2 in=img
concat cd in=c,d
fc fc c=5
loss loss
""",
    "loss-pixel": """input data c=3 h=6 w=5
conv conv1 c=4 k=3 p=1
relu relu1
conv conv2 c=3 k=3 s=2 p=1     # 3 classes at 3x3 places
loss loss pixel=1
""",
    "se": """input data c=3 h=7 w=6
conv conv1 c=8 k=3 p=1
hardswish act1
gap squeeze                    # squeeze-and-excitation (MobileNetV3's)
conv fc1 c=4 k=1
relu r1
conv fc2 c=8 k=1
hardsigmoid gate
mul excite in=gate,act1        # the scale first, as torchvision writes it
mul sq in=excite,excite        # a product of a tensor with itself
conv conv2 c=3 k=3 s=2
loss loss pixel=1
""",
    "apool-7": """input data c=3 h=7 w=7
conv conv1 c=4 k=3 p=1
relu relu1
apool pool o=3                  # windows [0,3) [2,5) [4,7): overlapping
fc fc c=5
loss loss
""",
    "apool-13x11": """input data c=3 h=13 w=11
conv conv1 c=4 k=3 p=1
relu relu1
apool pool o=3                  # rows [0,5) [4,9) [8,13); cols [0,4) [3,8) [7,11)
fc fc c=5
loss loss
""",
    "loss-map": """input data c=3 h=6 w=5
conv conv1 c=3 k=3 s=2          # 6x5 -> 2x2: 12 logits in (C, H, W) order
loss loss
""",
}


def cases():
    """(name, net file or generated key, image, batch, optimizer, plan, bn)."""
    v, r, k = (os.path.join(NETS, n + ".net") for n in ("vgg-small", "resnet-small", "kernels"))
    c = [("vgg-small/sgd", v, 32, 4, "sgd", "layer", None),
         ("vgg-small/adam", v, 32, 4, "adam", "layer", None),
         ("vgg-small/sgd/ckpt-sqrt", v, 32, 4, "sgd", "ckpt-sqrt", None),
         ("resnet-small/sgd/bn-train", r, 32, 4, "sgd", "layer", "train"),
         ("resnet-small/sgd/bn-frozen", r, 32, 4, "sgd", "layer", "frozen"),
         ("kernels/adam", k, None, 3, "adam", "layer", None),
         ("updown/sgd", os.path.join(NETS, "updown.net"), None, 4, "sgd", "layer", None),
         ("unet-small/adam", os.path.join(NETS, "unet-small.net"), None, 4, "adam", "layer", None),  # per-pixel loss
         ("upconv/sgd", os.path.join(NETS, "upconv.net"), None, 4, "sgd", "layer", None),  # transposed convolutions
         ("bilinear/adam", os.path.join(NETS, "bilinear.net"), None, 4, "adam", "layer", None),
         ("norms/sgd", os.path.join(NETS, "norms.net"), None, 3, "sgd", "layer", None),  # gnorm, lnorm
         # a whole torchvision net made by tools/torch2net.py (depthwise convolutions, relu6,
         # inverted residuals, dropout) with its batch norms frozen: in train mode, untrained and
         # on few values a channel, its fp32 gradients are ill-conditioned — PyTorch's own float32
         # gradient is ~1e-2 from its float64 one (frozen: 5e-7) — so two correct fp32 engines
         # differ by more than any tolerance; train mode is checked on resnet-small above, and
         # MobileNetV2's row plans against `layer` in test_exact
         ("mobilenetv2/adam/bn-frozen", os.path.join(NETS, "mobilenetv2.net"), 128, 4, "adam", "layer", "frozen"),
         # MobileNetV3-Large: squeeze-and-excitation (gap, 1x1 convs, hardsigmoid, mul), hardswish
         ("mobilenetv3/sgd/bn-frozen", os.path.join(NETS, "mobilenetv3.net"), 128, 3, "sgd", "layer", "frozen"),
         # the shipped U-Net (tools/unet.py, 34.5 M parameters): skips concatenated to upsampled
         # maps, a per-pixel loss, at 128x128, batch norm frozen as for the MobileNets: in train mode,
         # untrained, PyTorch's own fp32 gradients are 4.8e-3 from its fp64 ones (measured once, batch
         # 2; ours are 1.4e-3 from its fp32 ones); train mode is checked on unet-small above, and the
         # U-Net's row plans against `layer` in test_exact)
         ("unet/sgd/bn-frozen", os.path.join(NETS, "unet.net"), 128, 2, "sgd", "layer", "frozen"),
         # DenseNet-121: concats of up to 25 inputs
         ("densenet121/adam/bn-frozen", os.path.join(NETS, "densenet121.net"), 64, 3, "adam", "layer", "frozen"),
         # ConvNeXt-T: 7x7 depthwise convolutions, layer norm over the channels, Linears over them (1x1
         # convs), GELU, layer scale, stochastic depth; no batch norm to freeze
         ("convnext-tiny/adam", os.path.join(NETS, "convnext-tiny.net"), 64, 2, "adam", "layer", None),
         # EfficientNet-B0: SiLU, squeeze-and-excitation with sigmoid, stochastic depth (a draw an image)
         ("efficientnetb0/sgd/bn-frozen", os.path.join(NETS, "efficientnetb0.net"), 64, 4, "sgd", "layer", "frozen")]
    for i, g in enumerate(GENERATED):
        opt = "adam" if i % 2 else "sgd"
        if g == "bn":
            c += [("gen-bn/sgd/bn-train", "gen:bn", None, 3, "sgd", "layer", "train"),
                  ("gen-bn/adam/bn-frozen", "gen:bn", None, 3, "adam", "layer", "frozen")]
        else:
            c.append(("gen-%s/%s" % (g, opt), "gen:" + g, None, 3, opt, "layer", None))
    return c


def check_loaded(rep, init, dump):
    """--init-weights must have taken effect: the dump's /params (before the step) are the init
    file's, bit for bit. Otherwise compare() would happily check lrcnn against its own init."""
    with h5py.File(init, "r") as a, h5py.File(dump, "r") as b:
        names = []
        a["params"].visit(lambda p: names.append(p) if isinstance(a["params"][p], h5py.Dataset) else None)
        for p in names:
            if "params/" + p not in b:
                rep.fail("init: /params/%s of the init file is not in the dump" % p)
            elif not np.array_equal(a["params/" + p][()], b["params/" + p][()]):
                rep.fail("init: /params/%s in the dump differs from the --init-weights file" % p)


def cmd_run(binary, keep=None, only=None):
    passed, failed, rows = 0, 0, []
    with tempfile.TemporaryDirectory(prefix="torch_ref.") as tmp:
        if keep:
            os.makedirs(keep, exist_ok=True)
            tmp = os.path.abspath(keep)
        for i, (name, net, image, batch, opt, plan, bn) in enumerate(cases()):
            if only and only not in name:
                continue
            if net.startswith("gen:"):
                path = os.path.join(tmp, net[4:] + ".net")
                with open(path, "w") as fh:
                    fh.write("# generated by tests/torch_ref.py\n" + GENERATED[net[4:]])
                net = path
            stem = os.path.join(tmp, "case%02d" % i)
            init, dump = stem + ".init.h5", stem + ".dump.h5"
            for old in (init, dump):
                if os.path.exists(old):
                    os.remove(old)
            cmd = [binary, "train", "--net", net, "--batch", str(batch), "--plan", plan, "--iters", "1",
                   "--optimizer", opt, "--seed", "1", "--init-weights", init, "--dump", dump]
            if image:
                cmd[4:4] = ["--image", str(image)]
            if bn:
                cmd += ["--bn", bn]
            print("== %s\n  %s" % (name, " ".join(os.path.basename(a) if a.startswith(tmp) else a for a in cmd)))
            why, worst = None, None
            try:
                cmd_init(net, init, seed=100 + i, image=image)
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                if p.returncode != 0:
                    why = "lrcnn train exited %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[-2000:])
                else:
                    rep = cmd_compare(net, dump, bn)
                    check_loaded(rep, init, dump)
                    worst = rep.worst_grad
                    if rep.failures:
                        why = "%d check(s) failed: %s" % (len(rep.failures), ", ".join(rep.failures[:8]))
            except (NetError, OSError, KeyError, ValueError) as e:
                why = "%s: %s" % (type(e).__name__, e)
            if why:
                failed += 1
                print("  CASE FAIL %s: %s" % (name, why))
            else:
                passed += 1
                print("  case ok (worst gradient norm rel %.2e)" % worst)
            rows.append((name, "FAIL" if why else "ok", worst))
    print("\n%-32s %-5s %s" % ("case", "", "worst grad norm rel"))
    for name, st, worst in rows:
        print("%-32s %-5s %s" % (name, st, "-" if worst is None else "%.2e" % worst))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# selftest: the checker on dumps that torch writes, no lrcnn needed. The fake "engine" side is
# computed in float64 and rounded to float32, so the passing cases also show that the tolerances
# accept an honest difference in arithmetic; then single perturbations must be caught by name.

def fake_dump(netfile, init, out, opt, bn, batch=3, seed=7, edit=None):
    _, layers = parse_net(netfile)
    model = RefNet(layers, torch.float64)
    with h5py.File(init, "r") as f:
        assert not load_params(model, f)
    before = {(l, d): t.detach().numpy().astype(np.float32) for l, d, t in model.tensors()}
    gen = torch.Generator().manual_seed(seed)
    c, h, w = layers[0].shape
    x = torch.randn(batch, c, h, w, generator=gen).float()
    classes = int(np.prod(next(l for l in layers if l.name == layers[-1].inputs[0]).shape))
    labels = torch.randint(0, classes, (batch,), generator=gen)
    model.set_bn(bn)
    loss = model(x.double(), labels)
    loss.backward()
    hp = {"lr": 0.01, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    if opt == "adam":
        hp["lr"] = 1e-3
    grads = {(l, d): t.grad.numpy().astype(np.float32) for l, d, t in model.params()}
    if opt == "sgd":
        o = torch.optim.SGD([t for _, _, t in model.params()], lr=hp["lr"], momentum=hp["momentum"])
    else:
        o = torch.optim.Adam([t for _, _, t in model.params()], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    o.step()
    after = {(l, d): t.detach().numpy().astype(np.float32) for l, d, t in model.tensors()}
    attrs = dict(hp, net="selftest", plan="layer", bn=bn, optimizer=opt, batch=batch, iteration=0, loss=float(loss))
    if edit:
        edit(attrs, grads, after)

    def fill(f):
        for k, v in attrs.items():
            f.attrs[k] = v
        f.create_dataset("input", data=x.numpy())
        f.create_dataset("labels", data=labels.numpy().astype(np.int64))
        write_group(f, "params", model, before)
        write_group(f, "grads", model, {k: grads.get(k) for k in before})
        write_group(f, "after", model, after)
    write_h5_atomic(out, fill)


def cmd_selftest():
    ok = True
    with tempfile.TemporaryDirectory(prefix="torch_ref_self.") as tmp:
        nets = {}
        for g in ("bn", "add-later", "maxpool", "fc-map", "loss-map"):
            nets[g] = os.path.join(tmp, g + ".net")
            with open(nets[g], "w") as fh:
                fh.write(GENERATED[g])
        for n in ("vgg-small", "resnet-small", "kernels"):
            nets[n] = os.path.join(NETS, n + ".net")

        def case(label, net, opt, bn, expect_fail, edit=None):
            nonlocal ok
            init, dump = os.path.join(tmp, "i.h5"), os.path.join(tmp, "d.h5")
            for p in (init, dump):
                if os.path.exists(p):
                    os.remove(p)
            cmd_init(nets[net], init, seed=3)
            fake_dump(nets[net], init, dump, opt, bn, edit=edit)
            print("== selftest %s (%s, %s, bn %s): expect %s" % (label, net, opt, bn, "FAIL" if expect_fail else "pass"))
            rep = cmd_compare(nets[net], dump)
            got = bool(rep.failures)
            if got != bool(expect_fail) or (expect_fail and not any(expect_fail in m for m in rep.failures)):
                ok = False
                print("SELFTEST WRONG: %s: failures %s, expected %s" % (label, rep.failures, expect_fail or "none"))

        def bump(group, key, idx, by):
            def edit(attrs, grads, after):
                t = (grads if group == "grads" else after)[key]
                t.ravel()[idx] += by
            return edit

        for net in ("vgg-small", "resnet-small", "kernels", "bn", "add-later", "maxpool", "fc-map", "loss-map"):
            for opt in ("sgd", "adam"):
                for bn in (("train", "frozen") if net in ("bn", "resnet-small") else ("train",)):
                    case("fp64 fake", net, opt, bn, None)

        def lossbump(attrs, grads, after):
            attrs["loss"] *= 1 + 1e-4

        def swapped(attrs, grads, after):
            grads[("conv1", "weight")] = np.ascontiguousarray(np.swapaxes(grads[("conv1", "weight")], 2, 3))

        case("loss +1e-4 rel", "kernels", "sgd", "train", "loss", lossbump)
        case("one grad element +1% of max", "kernels", "sgd", "train", "grad conv2.weight",
             lambda a, g, af: bump("grads", ("conv2", "weight"), 17, 0.01 * np.abs(g[("conv2", "weight")]).max())(a, g, af))
        case("conv kernel transposed", "kernels", "sgd", "train", "grad conv1.weight", swapped)
        case("after element +1e-4", "vgg-small", "adam", "train", "step fc4.weight", bump("after", ("fc4", "weight"), 5, 1e-4))
        case("bn running var", "bn", "sgd", "train", "after bn2.running_var", bump("after", ("bn2", "running_var"), 1, 1e-3))
        case("frozen bn updated its stats", "bn", "sgd", "frozen", "after bn1.running_mean",
             bump("after", ("bn1", "running_mean"), 0, 1e-3))
        case("bn bias grad", "resnet-small", "sgd", "frozen", "grad layer2.0.bn3.bias",
             bump("grads", ("layer2.0.bn3", "bias"), 3, 1e-2))

        def missing(attrs, grads, after):
            del grads[("fc", "bias")]
        case("missing grad dataset", "bn", "sgd", "train", "missing dataset /grads/fc/bias", missing)
    print("selftest %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("init", help="write torch-initialized /params for lrcnn --init-weights")
    p.add_argument("netfile")
    p.add_argument("out")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--image", type=int)
    p = sub.add_parser("compare", help="check an lrcnn --dump against torch")
    p.add_argument("netfile")
    p.add_argument("dump")
    p.add_argument("--bn", choices=("train", "frozen"))
    p = sub.add_parser("run", help="every case against LRCNN_BINARY (the ctest entry)")
    p.add_argument("binary")
    p.add_argument("--keep", metavar="DIR", help="write the nets, init files and dumps here and keep them")
    p.add_argument("--only", metavar="TEXT", help="only the cases whose name contains TEXT")
    sub.add_parser("selftest", help="check the checker on fake dumps written by torch")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    try:
        if a.cmd == "init":
            cmd_init(a.netfile, a.out, a.seed, a.image)
            return 0
        if a.cmd == "compare":
            rep = cmd_compare(a.netfile, a.dump, a.bn)
            print("%s: %s" % (a.dump, "%d check(s) failed" % len(rep.failures) if rep.failures else "all match"))
            return 1 if rep.failures else 0
        if a.cmd == "run":
            return cmd_run(a.binary, a.keep, a.only)
        if a.cmd == "selftest":
            return cmd_selftest()
    except (NetError, OSError) as e:
        print("torch_ref.py: %s" % e, file=sys.stderr)
        return 2
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
