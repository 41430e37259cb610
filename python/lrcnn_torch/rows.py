"""Row segments in PyTorch: 2PS and OverL segments run band by band with the geometry `lrcnn lower` gives.

Band r computes, at every layer of the segment, the rows lrcnn says it computes (`out`), reading
from each producer the rows that layer's window needs — the halo — from what the band holds of it,
or from the segment input; zero padding (for a max pool, -inf) is added only at the image's borders,
never at a band's inner edges. The bands' outputs, each its cut of the segment's last layer, are
joined along H. A 2PS band also hands the next the rows it computed that the next reads (its
boundary), which the next holds above its own rows; no row is computed twice. Each band runs under
torch.utils.checkpoint (non-reentrant): backward recomputes it from the segment input and the
boundaries it received, band by band, and gradients flow back through the boundaries. So the
segment input, the boundaries and the output are kept, as lrcnn keeps them.

What a band computes: convolutions (any stride, dilation, groups; padding along W as the module's),
max and average pooling (floor mode; average counting the padding), nearest upsampling by a whole
scale, BatchNorm with its running
statistics (the plan's bn=frozen: the only mode whose statistics a band can use alone), the
elementwise modules and functions, sums and channel concatenations. Anything else in a row segment
is refused by name for now.
"""
import contextlib
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.Sigmoid, nn.SiLU, nn.GELU, nn.Hardswish, nn.Hardsigmoid, nn.Identity)
FUNCTIONS = {F.relu, torch.relu, F.relu6, torch.sigmoid, F.silu, F.gelu, F.hardswish, F.hardsigmoid}
METHODS = {"relu", "relu_", "sigmoid"}


class Unsupported(Exception):
    pass


_PLAIN = []  # a stack: the maps checkpoints hold as they are, noted while an encoding's forward runs


@contextlib.contextmanager
def plain_maps():
    """The maps (their view keys) that checkpoints — ckpt segments, bands — take as inputs during
    the block: held by the checkpoint itself for backward's recomputation, outside saved-tensor
    hooks, so an encoding of theirs would only add to them."""
    _PLAIN.append(set())
    try:
        yield _PLAIN[-1]
    finally:
        _PLAIN.pop()


def view_key(t):
    """A tensor's identity as a view: the same storage, offset, shape and strides."""
    return t.storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.stride()


def hold_plain(*ts):
    for t in ts:
        if _PLAIN and torch.is_tensor(t):
            _PLAIN[-1].add(view_key(t))


def held_plain(key):
    """Whether a checkpoint takes the map of view key `key` as an input in the current block."""
    return bool(_PLAIN) and key in _PLAIN[-1]


def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def window(node, m):
    """(k, s, p, d) along H of node (module m or None): a convolution's or a pool's; 1, 1, 0, 1 else."""
    if isinstance(m, nn.Conv2d):
        return m.kernel_size[0], m.stride[0], m.padding[0], m.dilation[0]
    if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
        return pair(m.kernel_size)[0], pair(m.stride or m.kernel_size)[0], pair(m.padding)[0], pair(getattr(m, "dilation", 1))[0]
    return 1, 1, 0, 1


def upsample_scale(m):
    """A nearest Upsample's whole scale, the same along H and W; None otherwise (or sized by size=)."""
    s = m.scale_factor
    if m.size is not None or s is None:
        return None
    h, w = pair(s)
    return int(h) if h == w and float(h) == int(h) and h >= 1 else None


def check_node(node, m, where):
    """Refuses what a band cannot compute here."""
    if node.op == "call_module":
        if isinstance(m, nn.Conv2d) and m.padding_mode != "zeros":
            raise Unsupported("%s: padding_mode %s" % (where, m.padding_mode))
        if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)) and m.ceil_mode:
            raise Unsupported("%s: a ceil-mode pool" % where)
        if isinstance(m, nn.AvgPool2d) and not m.count_include_pad:
            raise Unsupported("%s: average pooling without the padding counted" % where)
        if isinstance(m, nn.Upsample) and (m.mode != "nearest" or upsample_scale(m) is None):
            raise Unsupported("%s: %s upsampling (only nearest, by a whole scale along H and W)" % (where, m.mode))
        if not isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.BatchNorm2d, nn.Upsample) + ELEMENTWISE):
            raise Unsupported("%s: %s" % (where, type(m).__name__))
    elif node.op == "call_function":
        if node.target not in FUNCTIONS and node.target not in (operator.add, torch.add, torch.cat):
            raise Unsupported("%s: %s" % (where, getattr(node.target, "__name__", node.target)))
        if node.target is torch.cat and (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) not in (1, -3):
            raise Unsupported("%s: a concatenation along another dimension than the channels" % where)
    elif node.op == "call_method" and node.target not in METHODS:
        raise Unsupported("%s: method %s" % (where, node.target))


class RowSegment(nn.Module):
    """One row segment of a split module (`inner`, its submodule), band by band: OverL's bands each
    on its own, 2PS's in order, each handing the next the rows it computed that the next reads
    (`keep`: its boundary), which the next holds above the rows it computes itself."""

    def __init__(self, inner, seg, layer_of, bn):
        super().__init__()
        if seg["backward"] != "forward":
            raise Unsupported("backward band counts other than the forward's")
        self.inner, self.geo = inner, seg["forward"]
        self.modules_of = dict(inner.named_modules())
        self.layer_of = layer_of
        for node in inner.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            m = self.modules_of.get(node.target) if node.op == "call_module" else None
            check_node(node, m, "node '%s'" % node.name)
            if isinstance(m, nn.BatchNorm2d) and bn != "frozen":
                raise Unsupported("node '%s': BatchNorm with bn=%s (a band normalizes with running statistics only: bn=frozen)"
                                  % (node.name, bn))
            if self.layer_of.get(node.name) not in self.geo["band"][0]["layers"]:
                raise Unsupported("node '%s' has no layer of the segment" % node.name)
        inputs = [n for n in inner.graph.nodes if n.op == "placeholder"]
        if len(inputs) != 1:
            raise Unsupported("a row segment reading %d tensors" % len(inputs))
        bands = self.geo["band"]
        rows = lambda v: v[1] > v[0]  # noqa: E731
        self.bounded = [n for n in inner.graph.nodes if n.name in layer_of and layer_of[n.name] in bands[0]["layers"]
                        and any(rows(b["layers"][layer_of[n.name]]["keep"]) for b in bands)]

    def rows_of(self, value, lo, hi, fill):
        """Rows [lo, hi) of a band value (tensor, first row, full height): the rows it holds, and
        `fill` for those past the map's borders."""
        t, row0, h = value
        a, b = max(lo, 0), min(hi, h)
        assert t is not None and row0 <= a and b <= row0 + t.shape[2], "a band must hold what its layers read"
        x = t[:, :, a - row0:b - row0]
        if lo < 0 or hi > h:
            x = F.pad(x, (0, 0, max(-lo, 0), max(hi - h, 0)), value=fill)
        return x

    def band(self, r, x, *received):
        """Band r: the rows it computes of the segment's last layer, then the boundaries it hands
        on (one per layer in self.bounded, zero rows where it hands none)."""
        geo, prev = self.geo["band"][r]["layers"], self.geo["band"][r - 1]["layers"] if r else None
        got = dict(zip(self.bounded, received))
        env = {}
        for node in self.inner.graph.nodes:
            if node.op == "placeholder":
                env[node] = (x, 0, x.shape[2])
                continue
            if node.op == "output":
                last = node.args[0]
                t, row0, _ = env[last]
                a, b = geo[self.layer_of[last.name]]["out"]
                return (t[:, :, a - row0:b - row0],) + tuple(self.boundary(env[n], geo[self.layer_of[n.name]]["keep"])
                                                            for n in self.bounded)
            m = self.modules_of.get(node.target) if node.op == "call_module" else None
            srcs = list(node.args[0]) if node.target is torch.cat else [i for i in node.args if isinstance(i, torch.fx.Node)]
            k, s, p, d = window(node, m)
            u = upsample_scale(m) if isinstance(m, nn.Upsample) else None
            h = env[srcs[0]][2] * u if u else (env[srcs[0]][2] + 2 * p - d * (k - 1) - 1) // s + 1  # the layer's full height
            a, b = geo[self.layer_of[node.name]]["out"]
            y = None
            if b > a and u:  # output row o repeats input row o // u: the rows under [a, b), repeated, cut to it
                lo = a // u
                y = F.interpolate(self.rows_of(env[srcs[0]], lo, (b - 1) // u + 1, 0.0), scale_factor=u, mode="nearest")
                y = y[:, :, a - lo * u:b - lo * u]
            elif b > a:
                lo, hi = a * s - p, (b - 1) * s - p + d * (k - 1) + 1
                fill = float("-inf") if isinstance(m, nn.MaxPool2d) else 0.0
                y = self.compute(node, m, [self.rows_of(env[i], lo, hi, fill) for i in srcs])
            ka, kb = prev[self.layer_of[node.name]]["keep"] if prev and node in got else (a, a)
            if kb > ka:  # the boundary received, above the rows computed
                assert y is None or kb == a, "a boundary must end where the band's own rows begin"
                env[node] = (got[node] if y is None else torch.cat((got[node], y), 2), ka, h)
            else:
                env[node] = (y, a, h)

    @staticmethod
    def boundary(value, keep):
        t, row0, _ = value
        # its own storage (none for no rows): a view would keep the whole band of that layer alive
        # until backward, in the next band's checkpoint
        if keep[1] <= keep[0]:
            return t[:, :, :0].clone() if t is not None else torch.zeros(0)
        return t[:, :, keep[0] - row0:keep[1] - row0].clone()

    @staticmethod
    def compute(node, m, ins):
        x = ins[0]
        if isinstance(m, nn.Conv2d):
            return F.conv2d(x, m.weight, m.bias, m.stride, (0, m.padding[1]), m.dilation, m.groups)
        if isinstance(m, nn.MaxPool2d):
            return F.max_pool2d(x, m.kernel_size, m.stride, (0, pair(m.padding)[1]), m.dilation)
        if isinstance(m, nn.AvgPool2d):
            return F.avg_pool2d(x, m.kernel_size, m.stride, (0, pair(m.padding)[1]), count_include_pad=True,
                                divisor_override=m.divisor_override)
        if isinstance(m, nn.BatchNorm2d):
            return F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
        if m is not None:  # elementwise: never in place (the band's input may be another band's view)
            return m(x.clone()) if getattr(m, "inplace", False) else m(x)
        if node.target is torch.cat:
            return torch.cat(ins, 1)
        if node.target in (operator.add, torch.add):
            return ins[0] + ins[1]
        if node.op == "call_method":
            return getattr(torch, node.target.rstrip("_"))(x)
        return node.target(x)

    def forward(self, x):
        bands, received = [], ()
        for r in range(self.geo["bands"]):  # each band recomputed in backward from what it received
            # no random layer runs in a band: no generator state to keep (5 KB a band on the CPU)
            hold_plain(x, *received)
            out = checkpoint(self.band, r, x, *received, use_reentrant=False, preserve_rng_state=False)
            bands.append(out[0])
            received = out[1:]
        return torch.cat(bands, 2)
