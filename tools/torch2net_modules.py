#!/usr/bin/env python3
"""torch2net_modules: how tools/torch2net.py writes each PyTorch module and function it meets as a
line of a net file (nets/FORMAT.md) — one translator a module kind (its keys, checked against what
the format can say, or Refused naming what it cannot), the table of module kinds in the order they
are matched, and the table of functions and methods — plus the format's limits it must respect.
"""
import operator
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import fx


class Refused(Exception):
    """The module holds something the net format cannot represent."""


def pair(v, what, where):
    """An int, or a pair of equal ints (the format's windows are square)."""
    if isinstance(v, (tuple, list)):
        if len(v) != 2 or v[0] != v[1]:
            raise Refused("%s: %s %s is not square (only a conv's may differ along H and W)" % (where, what, tuple(v)))
        v = v[0]
    if not isinstance(v, int):
        raise Refused("%s: %s %r is not an integer" % (where, what, v))
    return v


def keys(**kv):
    """' k=v' for every key whose value is not None, in the order given."""
    return "".join(" %s=%s" % (k, v) for k, v in kv.items() if v is not None)


def fmt_float(x):
    return "%.9g" % x


# --- modules: each returns (kind, keys) or None (an alias: the node is its input) ------------------

def hw(v, what, where):
    """A conv's size along H and W: 'A' when they agree, else 'AxB' (the net format's pair)."""
    h, w = (v[0], v[1]) if isinstance(v, (tuple, list)) and len(v) == 2 else (v, v)
    if not isinstance(h, int) or not isinstance(w, int):
        raise Refused("%s: %s %r is not a pair of integers" % (where, what, v))
    return str(h) if h == w else "%dx%d" % (h, w)


def conv(m, where):
    if m.padding_mode != "zeros":
        raise Refused("%s: padding_mode='%s' (only zero padding)" % (where, m.padding_mode))
    if isinstance(m.padding, str):
        raise Refused("%s: padding='%s' (give the padding in pixels)" % (where, m.padding))
    k, s = hw(m.kernel_size, "kernel", where), hw(m.stride, "stride", where)
    p, d = hw(m.padding, "padding", where), hw(m.dilation, "dilation", where)
    return "conv", keys(c=m.out_channels, k=k, s=s if s != "1" else None, p=p if p != "0" else None, d=d if d != "1" else None,
                        bias=None if m.bias is not None else 0, groups=m.groups if m.groups != 1 else None)


def convt(m, where):
    if m.padding_mode != "zeros":
        raise Refused("%s: padding_mode='%s' (only zero padding)" % (where, m.padding_mode))
    k, s = pair(m.kernel_size, "kernel", where), pair(m.stride, "stride", where)
    p, d = pair(m.padding, "padding", where), pair(m.dilation, "dilation", where)
    op = pair(m.output_padding, "output padding", where)
    if p > d * (k - 1):
        raise Refused("%s: padding %d is more than dilation * (kernel - 1) = %d" % (where, p, d * (k - 1)))
    return "convt", keys(c=m.out_channels, k=k, s=s if s != 1 else None, p=p or None, op=op or None, d=d if d != 1 else None,
                         bias=None if m.bias is not None else 0, groups=m.groups if m.groups != 1 else None)


def bn(m, where):
    if not m.affine or not m.track_running_stats or m.momentum is None:
        raise Refused("%s: BatchNorm2d without affine parameters, running statistics or a momentum" % where)
    return "bn", keys(eps=None if m.eps == 1e-5 else fmt_float(m.eps),
                      momentum=None if m.momentum == 0.1 else fmt_float(m.momentum))


def gnorm(m, where):
    if not m.affine:
        raise Refused("%s: GroupNorm without affine parameters" % where)
    return "gnorm", keys(groups=m.num_groups, eps=None if m.eps == 1e-5 else fmt_float(m.eps))


def lnorm(m, where):
    """torchvision's LayerNorm2d (ConvNeXt's): a LayerNorm over the channels at each place."""
    if not m.elementwise_affine or len(m.normalized_shape) != 1:
        raise Refused("%s: LayerNorm2d without affine parameters, or over more than the channels" % where)
    return "lnorm", keys(eps=None if m.eps == 1e-5 else fmt_float(m.eps))


def is_layernorm2d(m):
    return isinstance(m, nn.LayerNorm) and type(m).__name__ == "LayerNorm2d"


def layernorm(m, where):
    if is_layernorm2d(m):
        return lnorm(m, where)
    raise Refused("%s: LayerNorm over the last dimensions of a map (only over its channels: torchvision's LayerNorm2d)" % where)


def pool(kind):
    def convert(m, where):
        if m.ceil_mode and kind == "avgpool":
            raise Refused("%s: average pooling with ceil_mode=True (its divisor where the last window hangs over; "
                          "max pooling takes ceil=1)" % where)
        if kind == "maxpool" and (pair(m.dilation, "dilation", where) != 1 or m.return_indices):
            raise Refused("%s: dilated max pooling or return_indices" % where)
        if kind == "avgpool" and (not m.count_include_pad or m.divisor_override is not None):
            raise Refused("%s: average pooling that excludes padding or overrides its divisor" % where)
        k = pair(m.kernel_size, "kernel", where)
        s = pair(m.stride if m.stride is not None else k, "stride", where)
        p = pair(m.padding, "padding", where)
        return kind, keys(k=k, s=s if s != k else None, p=p or None, ceil=1 if m.ceil_mode else None)
    return convert


def adaptive(o, where):
    o = pair(o, "output size", where) if o is not None else None
    if o is None:
        raise Refused("%s: adaptive pooling to the input's size" % where)
    return ("gap", "") if o == 1 else ("apool", keys(o=o))


def linear(m, where):
    return "fc", keys(c=m.out_features, bias=None if m.bias is not None else 0)


def leaky(m, where):
    return "leakyrelu", keys(slope=None if m.negative_slope == 0.01 else fmt_float(m.negative_slope))


def gelu(m, where):
    if getattr(m, "approximate", "none") != "none":
        raise Refused("%s: GELU approximate='%s' (only the exact erf form)" % (where, m.approximate))
    return "gelu", ""


def hardtanh(m, where):
    if (m.min_val, m.max_val) != (0.0, 6.0):
        raise Refused("%s: Hardtanh(%g, %g) (only ReLU6's 0..6)" % (where, m.min_val, m.max_val))
    return "relu6", ""


def dropout(m, where):
    return ("dropout", keys(p=fmt_float(m.p))) if m.p > 0 else None


def upsample(scale, size, mode, where, align=None):
    if mode not in ("nearest", "bilinear"):
        raise Refused("%s: %s upsampling (only mode='nearest' or 'bilinear')" % (where, mode))
    if size is not None or scale is None:
        raise Refused("%s: upsampling to a size (give scale_factor)" % where)
    s = scale
    if isinstance(s, (tuple, list)):
        if len(s) != 2 or s[0] != s[1]:
            raise Refused("%s: scale_factor %s is not the same along H and W" % (where, tuple(s)))
        s = s[0]
    if float(s) != int(s) or int(s) < 1:
        raise Refused("%s: scale_factor %s is not a whole number" % (where, s))
    if mode == "bilinear":
        return "bilinear", keys(scale=int(s) if int(s) != 2 else None, align=1 if align else None)
    return "upsample", "" if int(s) == 2 else keys(scale=int(s))


def simple(kind):
    return lambda m, where: (kind, "")


MODULES = [  # order matters: ReLU6 is a Hardtanh
    (nn.Conv2d, conv), (nn.ConvTranspose2d, convt), (nn.GroupNorm, gnorm), (nn.LayerNorm, layernorm), (nn.BatchNorm2d, bn), (nn.MaxPool2d, pool("maxpool")), (nn.AvgPool2d, pool("avgpool")),
    (nn.AdaptiveAvgPool2d, lambda m, where: adaptive(m.output_size, where)), (nn.Linear, linear),
    (nn.ReLU, simple("relu")), (nn.ReLU6, simple("relu6")), (nn.Hardtanh, hardtanh), (nn.LeakyReLU, leaky),
    (nn.Sigmoid, simple("sigmoid")), (nn.SiLU, simple("silu")), (nn.GELU, gelu), (nn.Hardswish, simple("hardswish")),
    (nn.Hardsigmoid, simple("hardsigmoid")),
    (nn.Dropout, dropout), (nn.Identity, lambda m, where: None), (nn.Flatten, lambda m, where: "flatten"),
    (nn.Upsample, lambda m, where: upsample(m.scale_factor, m.size, m.mode, where, m.align_corners)),
]

NET_MAX_IN = 64  # the most inputs of an add or concat (sim/net/net.h)
NET_NAME_MAX = 47  # the longest layer name (sim/net/net.h: NET_NAME_LEN - 1)
# Kinds that act on each value alone: they run on a channels-last tensor as on a map.
ELEMENTWISE = ("relu", "relu6", "leakyrelu", "sigmoid", "silu", "gelu", "hardswish", "hardsigmoid", "dropout")

FUNCTIONS = {  # function or method name -> kind (None: an alias of its first input)
    F.relu: "relu", torch.relu: "relu", "relu": "relu", "relu_": "relu",
    F.relu6: "relu6", torch.sigmoid: "sigmoid", "sigmoid": "sigmoid", F.silu: "silu", F.hardswish: "hardswish",
    F.hardsigmoid: "hardsigmoid", operator.mul: "mul", torch.mul: "mul", "mul": "mul",
    operator.add: "add", operator.iadd: "add", torch.add: "add", "add": "add", "add_": "add",
    torch.flatten: "flatten", "flatten": "flatten", "view": "flatten", "reshape": "flatten",
    F.adaptive_avg_pool2d: "adaptive", F.interpolate: "interpolate", torch.cat: "cat", torch.concat: "cat",
    F.max_pool2d: "maxpool", F.avg_pool2d: "avgpool", torch.mean: "mean", "mean": "mean",
    torch.permute: "permute", "permute": "permute", F.gelu: "gelu",
    "contiguous": None,
}


def main_output(graph):
    """A model that returns several outputs — a tuple, a dict (torchvision's segmentation models:
    'out' and 'aux'), a named tuple (GoogLeNet's and Inception-v3's auxiliary heads in training) —
    is imported with its main output (the first, or 'out'); the heads that feed only the others
    are left out of the net, and a note says so."""
    out = next(n for n in graph.nodes if n.op == "output")
    res, what, kept, rest = out.args[0], None, None, []
    if isinstance(res, (tuple, list)) and res:
        what, kept, rest = "a %s of %d" % (type(res).__name__, len(res)), res[0], ["[%d]" % i for i in range(1, len(res))]
    elif isinstance(res, dict) and res:
        key = "out" if "out" in res else next(iter(res))
        what, kept, rest = "a dict (%s)" % ", ".join(map(str, res)), res[key], [repr(k) for k in res if k != key]
    elif isinstance(res, fx.Node) and res.op == "call_function" and isinstance(res.target, type) and \
            issubclass(res.target, tuple) and hasattr(res.target, "_fields"):
        fields = res.target._fields
        values = list(res.args) + [res.kwargs[f] for f in fields[len(res.args):] if f in res.kwargs]
        what, kept, rest = "%s(%s)" % (res.target.__name__, ", ".join(fields)), values[0], list(fields[1:])
    if what is None:
        return False
    if not isinstance(kept, fx.Node):
        raise Refused("the model returns %s whose main output is not a tensor" % what)
    out.args = (kept,)
    graph.eliminate_dead_code()
    if rest:  # a lone output in a dict or tuple ({'out': ...}) needs no word
        print("torch2net: note: the model returns %s; the net takes its main output and leaves out %s (and the layers "
              "only they use)" % (what, ", ".join(rest)), file=sys.stderr)
    return True
