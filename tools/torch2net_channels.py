"""torch2net_channels.py: the channel selections of tools/torch2net.py — a map's channels taken
apart (`x.chunk(2, dim=1)`, `torch.split`, `x.narrow(1, a, n)`, `x[:, a:b]`) become `slice` lines,
and a channel shuffle written as ShuffleNet's (view to (N, g, C/g, H, W), transpose dimensions 1
and 2, view back to (N, C, H, W)) a `shuffle` line. Shapes come from the traced graph's shape
propagation (node.meta["tensor_meta"]), so the sizes a forward computes from x.size() need not be
read. Also here: the unpacking of a proxy (`a, b = x.chunk(2, 1)`, `n, c, h, w = x.size()`), which
PyTorch 1.13's tracer cannot do on Python 3.11.
"""
import dis
import inspect
import operator

import torch

from torch2net_modules import Refused, keys

SPLITS = {"chunk", "split", "tensor_split"}  # torch.X or x.X: a tuple of pieces along a dimension
VIEWS = {"view", "reshape"}
TRANSPOSES = {"transpose", "permute"}


def unpack_count(frame):
    """How many names the instruction being run in frame unpacks into (`a, b = ...`), or None.
    torch.fx's Proxy.__iter__ finds it as the instruction at f_lasti // 2, which Python 3.11's
    inline caches broke; here it is found by its offset."""
    inst = next((i for i in dis.get_instructions(frame.f_code) if i.offset == frame.f_lasti), None)
    return inst.argval if inst is not None and inst.opname == "UNPACK_SEQUENCE" else None


class UnpackingProxy(torch.fx.Proxy):
    """A proxy that unpacks into its items where its caller unpacks it (the tracer's proxy())."""

    def __iter__(self):
        n = unpack_count(inspect.currentframe().f_back)
        return (self[i] for i in range(n)) if n is not None else self.tracer.iter(self)


def name_of(node):
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", "")


def shape(node):
    meta = node.meta.get("tensor_meta")
    return tuple(meta.shape) if meta is not None and hasattr(meta, "shape") else None


def base(node, kind):
    """A selection's line is named after the module whose forward makes it: stage2.1.slice."""
    scope = node.meta.get("scope", "")
    return (scope + "." if scope else "") + kind


def arg(node, i, key, default=None):
    if len(node.args) > i:
        return node.args[i]
    return node.kwargs.get(key, default)


class Channels:
    """What the converter tracks between the nodes of a selection: a split's pieces (node -> the
    input and each piece's first channel and count), and the stages of a shuffle (node -> the map
    and its groups, once viewed to 5-d and once transposed)."""

    def __init__(self, conv):
        self.conv = conv
        self.pieces, self.grouped, self.swapped = {}, {}, {}

    def handles(self, node, where):
        """Converts node if it is part of a channel selection; False if it is none of this."""
        if node.op not in ("call_function", "call_method"):
            return False
        name = name_of(node)
        src = node.args[0] if node.args and isinstance(node.args[0], torch.fx.Node) else None
        if name in SPLITS:
            self.split(node, where)
        elif node.target is operator.getitem and src in self.pieces:
            first, count = self.pieces[src][1][node.args[1]]
            self.select(node, self.pieces[src][0], first, count)
        elif node.target is operator.getitem and shape(src) is not None and len(shape(src)) == 4:
            self.index(node, where)
        elif name == "narrow":
            dim, start, length = arg(node, 1, "dim"), arg(node, 2, "start"), arg(node, 3, "length")
            if dim not in (1, -3) or len(shape(src) or ()) != 4:
                raise Refused("%s: narrow along dimension %s (only the channels of (N, C, H, W) maps)" % (where, dim))
            self.select(node, src, start, length)
        elif src in self.grouped or src in self.swapped:
            self.shuffle_stage(node, name, src, where)
        elif name in VIEWS and len(shape(node) or ()) == 5:
            self.group(node, src, where)
        else:
            return False
        return True

    def select(self, node, src, first, count):
        c = shape(src)[1]
        if first == 0 and count == c:
            self.conv.alias[node] = self.conv.source(src, node)
        else:
            self.conv.emit(node, "slice", keys(start=first or None, c=count), [self.conv.source(src, node)], base(node, "slice"))

    def split(self, node, where):
        src, dim = node.args[0], arg(node, 2, "dim", 0)
        parts = node.meta.get("tensor_meta")
        if len(shape(src) or ()) != 4 or dim not in (1, -3) or not isinstance(parts, (tuple, list)):
            raise Refused("%s: %s along dimension %s (only the channels of (N, C, H, W) maps)" % (where, name_of(node), dim))
        first, ranges = 0, []
        for p in parts:
            ranges.append((first, p.shape[1]))
            first += p.shape[1]
        self.pieces[node] = (src, ranges)

    def index(self, node, where):
        """x[:, a:b] (and x[:, a:b, :, :]): a slice of the channels."""
        src, idx = node.args
        idx = idx if isinstance(idx, tuple) else (idx,)
        full = slice(None, None, None)
        c = shape(src)[1]
        if len(idx) >= 2 and idx[0] == full and isinstance(idx[1], slice) and idx[1].step in (None, 1) and \
                all(i == full for i in idx[2:]):
            first, stop, _ = idx[1].indices(c)
            if stop > first:
                self.select(node, src, first, stop - first)
                return
        raise Refused("%s: indexes a map with %s (only x[:, a:b], a slice of its channels)" % (where, idx))

    def group(self, node, src, where):
        """view(N, g, C/g, H, W) of an (N, C, H, W) map: the first stage of a shuffle."""
        x, y = shape(src), shape(node)
        if x is None or len(x) != 4 or y[0] != x[0] or y[1] * y[2] != x[1] or y[3:] != x[2:]:
            raise Refused("%s: a view to %s (5-d: only a channel shuffle's (N, g, C/g, H, W))" % (where, y))
        self.grouped[node] = (src, y[1])

    def shuffle_stage(self, node, name, src, where):
        """transpose(1, 2) of the grouped view, contiguous, then a view, reshape or flatten back to
        (N, C, H, W): a shuffle of its groups."""
        if name == "contiguous":
            (self.grouped if src in self.grouped else self.swapped)[node] = (self.grouped.get(src) or self.swapped[src])
            return
        if src in self.grouped and name in TRANSPOSES:
            rest = node.args[1:]
            if name == "permute" and len(rest) == 1 and isinstance(rest[0], (list, tuple)):
                rest = rest[0]
            dims = [d % 5 if isinstance(d, int) else d for d in rest]
            if (sorted(dims) == [1, 2]) if name == "transpose" else (dims == [0, 2, 1, 3, 4]):
                self.swapped[node] = self.grouped[src]
                return
        if src in self.swapped and (name in VIEWS or name == "flatten") and shape(node) == shape(self.swapped[src][0]):
            x, g = self.swapped[src]
            self.conv.emit(node, "shuffle", keys(groups=g), [self.conv.source(x, node)], base(node, "shuffle"))
            return
        raise Refused("%s: %s of a map viewed as (N, g, C/g, H, W) (only a channel shuffle: transpose(1, 2), then a view "
                      "back to (N, C, H, W))" % (where, name))


def is_size(node):
    """x.size() and what is computed from it alone (an item, a quotient): sizes, not data."""
    if node.op == "call_method" and node.target == "size":
        return True
    if node.op != "call_function" or node.target not in (operator.getitem, operator.floordiv, operator.mul,
                                                          operator.add, operator.sub, torch.floor_divide):
        return False
    nodes = [a for a in node.args if hasattr(a, "op")]
    return bool(nodes) and all(is_size(a) for a in nodes)
