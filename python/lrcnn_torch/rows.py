"""Row segments in PyTorch: 2PS and OverL segments run band by band with the geometry `lrcnn lower` gives.

Band r computes, at every layer of the segment, the rows lrcnn says it computes (`out`), reading
from each producer the rows that layer's window needs — the halo — from what the band holds of it,
or from the segment input; zero padding (for a max pool, -inf) is added only at the image's borders,
never at a band's inner edges. The bands' outputs, each its cut of the segment's last layer, are
joined along H. A 2PS band also hands the next the rows it computed that the next reads (its
boundary), which the next holds above its own rows; no row is computed twice. Each band runs under
torch.utils.checkpoint (non-reentrant): backward recomputes it from the segment input and the
boundaries it received, band by band, and gradients flow back through the boundaries. So the
segment input, the boundaries and the output are kept, as lrcnn keeps them; the boundaries reach
a band beside the checkpoint's inputs (Boundaries), so that its recomputation lets go of each once
its layer has it, as lrcnn's lowering does.

While a band runs (and while backward recomputes it) it holds what lrcnn's lowering holds, which
is what lrcnn predicts PyTorch's allocator to hold: each value only until its last reader; a
convolution or pool at a border keeps its rows, not a padded copy (Bordered); a boundary's gradient
waits at the boundary's size, not its band's (Handoff, Received); a ReLU that receives rows is one
map with them (its output is what its backward keeps). Before these, ResNet-50 2ps:4 at 224x224
b8 held 37% above the prediction at its peak (PyTorch 2.5.1, CPU).

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


def cat(tensors, dim=0):
    """torch.cat, but a cat of one tensor is that tensor, not a copy of it, as lrcnn's importer takes
    it (apply_plan puts it in place of torch.cat([x], dim): DenseNet's first layer of each block).
    Named as torch's: split_module names a segment's nodes after their functions, numbered in order,
    and the segments find their layers by those names, so a node must keep its function's name."""
    return tensors[0] if len(tensors) == 1 else torch.cat(tensors, dim)


def is_cat(node):
    return node.op == "call_function" and node.target in (torch.cat, cat)


def is_same_map(node):
    """A cat of one map, which is that map (cat)."""
    return node.op == "call_function" and node.target is cat and len(node.args[0]) == 1


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


def storage(t):
    """t's storage, untyped (PyTorch 2.x) or typed (1.13)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def view_key(t):
    """A tensor's identity as a view: the same storage, offset, shape and strides."""
    return storage(t).data_ptr(), t.storage_offset(), tuple(t.shape), t.stride()


def hold_plain(*ts):
    for t in ts:
        if _PLAIN and torch.is_tensor(t):
            _PLAIN[-1].add(view_key(t))


def held_plain(key):
    """Whether a checkpoint takes the map of view key `key` as an input in the current block."""
    return bool(_PLAIN) and key in _PLAIN[-1]


def cut(t, a, b):
    """Rows [a, b) of t: t itself when that is all of it, else one narrow. Every slice autograd
    records widens its gradient in backward into a zero-filled copy of its input, a second map
    beside the gradient while it runs, and t[:, :, a:b] records three (PyTorch 1.13 and 2.5.1 keep
    even the whole-range slices of N and C)."""
    return t if a == 0 and b == t.shape[2] else t.narrow(2, a, b - a)


def pair(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v)


def window(node, m):
    """(k, s, p, d) along H of node (module m or None): a convolution's or a pool's; 1, 1, 0, 1 else."""
    if isinstance(m, nn.Conv2d):
        return m.kernel_size[0], m.stride[0], m.padding[0], m.dilation[0]
    if isinstance(m, (nn.MaxPool2d, nn.AvgPool2d)):
        return pair(m.kernel_size)[0], pair(m.stride or m.kernel_size)[0], pair(m.padding)[0], pair(getattr(m, "dilation", 1))[0]
    return 1, 1, 0, 1


def out_height(h, k, s, p, d, ceil):
    """The height of a window's output over h rows, as PyTorch's pools count it: in ceil mode the last
    window may hang over the map's end, but not start past it and its padding."""
    n = h + 2 * p - d * (k - 1) - 1
    out = (-(-n // s) if ceil else n // s) + 1
    return out - 1 if ceil and (out - 1) * s >= h + p else out


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
        if isinstance(m, nn.AvgPool2d) and m.ceil_mode:
            raise Unsupported("%s: a ceil-mode average pool" % where)
        if isinstance(m, nn.AvgPool2d) and not m.count_include_pad:
            raise Unsupported("%s: average pooling without the padding counted" % where)
        if isinstance(m, nn.Upsample) and (m.mode != "nearest" or upsample_scale(m) is None):
            raise Unsupported("%s: %s upsampling (only nearest, by a whole scale along H and W)" % (where, m.mode))
        if not isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.BatchNorm2d, nn.Upsample) + ELEMENTWISE):
            raise Unsupported("%s: %s" % (where, type(m).__name__))
    elif node.op == "call_function":
        if node.target not in FUNCTIONS and node.target not in (operator.add, torch.add) and not is_cat(node):
            raise Unsupported("%s: %s" % (where, getattr(node.target, "__name__", node.target)))
        if is_cat(node) and (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) not in (1, -3):
            raise Unsupported("%s: a concatenation along another dimension than the channels" % where)
    elif node.op == "call_method" and node.target not in METHODS:
        raise Unsupported("%s: method %s" % (where, node.target))


class Handoff(torch.autograd.Function):
    """A band's map t, and a copy of its rows [lo, hi) in their own storage for the next band (a
    view would keep all of t alive until backward, in the next band's checkpoint). That copy's
    gradient arrives first: the next band's backward runs before this band's. Sliced out of t, it
    would be widened to t's size at once, zeros elsewhere, and held so until this band's backward
    reaches t; through a Handoff it waits at its own size, and is added into t's gradient when that
    arrives (autograd runs a node once every output's gradient is in)."""

    @staticmethod
    def forward(ctx, t, lo, hi):
        ctx.set_materialize_grads(False)
        ctx.lo, ctx.hi, ctx.shape = lo, hi, t.shape
        return t.view_as(t), t[:, :, lo:hi].clone()

    @staticmethod
    def backward(ctx, g, handed):
        if handed is None:
            return g, None, None
        if g is None:
            g = handed.new_zeros(ctx.shape)
        # in place: every gradient of t is a slice's widening (band values are read through rows_of
        # and the output's cut), a fresh tensor no other node holds
        g[:, :, ctx.lo:ctx.hi] += handed
        return g, None, None


class Received(torch.autograd.Function):
    """Rows a band received, as they are; their gradient, which the band's backward cuts out of a
    wider one (a view that would hold all of it), copied to their own size before it leaves."""

    @staticmethod
    def forward(ctx, t):
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        return g.clone() if storage(g).nbytes() > g.numel() * g.element_size() else g


class Boundaries:
    """The boundaries a band received, for its forward and then backward's one recomputation of
    it, and let go of after that: as lrcnn's lowering frees a boundary once the recomputed band
    has copied it. Taken by the checkpoint as its inputs they would stay until the band's whole
    backward is done (the U-Net's 2ps:4 at 128x128 b4 held 28 MiB, 4%, above the prediction so)."""

    def __init__(self, ts):
        self.ts, self.calls = ts, 0

    def take(self):
        ts, self.calls = self.ts, self.calls + 1
        if ts is None:
            raise RuntimeError("a row segment's band recomputed twice: a plan's row segments run one backward per "
                               "forward (no retain_graph)")
        if self.calls == 2:
            self.ts = None
        return ts


class Bordered(torch.autograd.Function):
    """A convolution or pool m over rows x of a map, with `top` and `bottom` rows of padding past its
    borders (zeros; -inf for a max pool) and its own padding along W. It keeps x for backward as
    the engine does, not a padded copy of x: that copy lives only while the op runs, forward and
    backward. The same ATen calls as F.conv2d's and the pools' backward: the same gradients."""

    @staticmethod
    def forward(ctx, x, m, top, bottom, *params):
        ctx.m, ctx.top, ctx.bottom = m, top, bottom
        xp = Bordered.padded(x, m, top, bottom)
        if isinstance(m, nn.Conv2d):
            ctx.save_for_backward(x, params[0])
            return F.conv2d(xp, params[0], params[1], m.stride, (0, m.padding[1]), m.dilation, m.groups)
        k, st, pw, d = Bordered.pool(m)
        if isinstance(m, nn.MaxPool2d):
            # ceil mode along W as the module has it; along H the band's rows are exactly its windows'
            # (the overhang of the map's last one padded with -inf: a max over what the map holds)
            y, idx = torch.ops.aten.max_pool2d_with_indices(xp, k, st, pw, d, m.ceil_mode)
            ctx.save_for_backward(x, idx)
            return y
        ctx.save_for_backward(x)
        return F.avg_pool2d(xp, k, st, pw, False, True, m.divisor_override)

    @staticmethod
    def backward(ctx, g):
        m, (x, *kept) = ctx.m, ctx.saved_tensors
        # in the dtype the forward computed in (autocast may have cast x and the weights to it)
        xp, params = Bordered.padded(x, m, ctx.top, ctx.bottom).to(g.dtype), ()
        if isinstance(m, nn.Conv2d):
            w, need = kept[0], ctx.needs_input_grad
            bias = [w.shape[0]] if m.bias is not None else None
            gx, gw, gb = torch.ops.aten.convolution_backward(g, xp, w.to(g.dtype), bias, list(m.stride), [0, m.padding[1]],
                                                            list(m.dilation), False, [0, 0], m.groups,
                                                            [need[0], need[4], bias is not None and need[5]])
            params = (gw.to(w.dtype) if gw is not None else None, gb.to(w.dtype) if m.bias is not None and gb is not None else None)
        elif isinstance(m, nn.MaxPool2d):
            gx = torch.ops.aten.max_pool2d_with_indices_backward(g, xp, *Bordered.pool(m), m.ceil_mode, kept[0])
        else:
            k, st, pw, _ = Bordered.pool(m)
            gx = torch.ops.aten.avg_pool2d_backward(g, xp, k, st, pw, False, True, m.divisor_override)
        if gx is not None:
            gx = gx[:, :, ctx.top:ctx.top + x.shape[2]].to(x.dtype)
        return (gx, None, None, None) + params

    @staticmethod
    def padded(x, m, top, bottom):
        if not top and not bottom:
            return x
        return F.pad(x, (0, 0, top, bottom), value=float("-inf") if isinstance(m, nn.MaxPool2d) else 0.0)

    @staticmethod
    def pool(m):
        """A pool's kernel, stride, padding (none along H: the band's rows carry it) and dilation."""
        return (list(pair(m.kernel_size)), list(pair(m.stride or m.kernel_size)), [0, pair(m.padding)[1]],
                list(pair(getattr(m, "dilation", 1))))


def rectifies(node, m):
    """Whether node is a ReLU: relu(relu(x)) = relu(x), and its gradient is a mask of its output."""
    if m is not None:
        return isinstance(m, nn.ReLU)
    return node.target in (F.relu, torch.relu) or (node.op == "call_method" and node.target in ("relu", "relu_"))


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
        # a cat of one map is that map (cat): it hands no boundary of its own, which would be the
        # same rows again (DenseNet's, over a transition's pool: 0.37 MB kept twice at 96x96)
        self.bounded = [n for n in inner.graph.nodes if n.op != "placeholder" and n.name in layer_of and layer_of[n.name] in bands[0]["layers"]
                        and not is_same_map(n) and any(rows(b["layers"][layer_of[n.name]]["keep"]) for b in bands)]
        self.handing = set(self.bounded)
        # a band lets go of each value after its last reader, as the engine frees a buffer: holding
        # them to the band's end would keep the band's every map alive at its recomputation's end
        self.last_read = {}
        for node in inner.graph.nodes:
            for i in node.all_input_nodes:
                self.last_read[i] = node

    @staticmethod
    def rows_of(value, lo, hi):
        """Rows [lo, hi) of a band value (tensor, first row, full height): a view of the rows it
        holds, and how many of them lie past the map's top and bottom borders (padding)."""
        t, row0, h = value
        a, b = max(lo, 0), min(hi, h)
        assert t is not None and row0 <= a and b <= row0 + t.shape[2], "a band must hold what its layers read"
        return cut(t, a - row0, b - row0), max(-lo, 0), max(hi - h, 0)

    def band(self, r, x, received):
        """Band r: the rows it computes of the segment's last layer, then the boundaries it hands
        on (one per layer in self.bounded, zero rows where it hands none)."""
        geo, prev = self.geo["band"][r]["layers"], self.geo["band"][r - 1]["layers"] if r else None
        got = dict(zip(self.bounded, received.take()))  # each let go of once its layer has it
        env, handed = {}, {}
        for node in self.inner.graph.nodes:
            if node.op == "placeholder":
                env[node] = (x, 0, x.shape[2])
                continue
            if node.op == "output":
                last = node.args[0]
                t, row0, _ = env[last]
                a, b = geo[self.layer_of[last.name]]["out"]
                return (cut(t, a - row0, b - row0),) + tuple(handed[n] for n in self.bounded)
            layer = self.layer_of[node.name]
            g = got.pop(node, None)
            env[node] = self.value(node, env, geo[layer]["out"], prev[layer]["keep"] if g is not None else None, g)
            if node in self.handing:  # taken now: the layer's rows may be let go of before the band ends
                env[node], handed[node] = self.handoff(env[node], geo[layer]["keep"])
            for i in node.all_input_nodes:
                if self.last_read[i] is node:
                    del env[i]

    def value(self, node, env, out, keep, got):
        """The band's value of node: the rows [out) it computes, below the rows [keep) it received
        (got) from the band before, if any."""
        if is_same_map(node):
            return env[node.args[0][0]]
        m = self.modules_of.get(node.target) if node.op == "call_module" else None
        srcs = list(node.args[0]) if is_cat(node) else [i for i in node.args if isinstance(i, torch.fx.Node)]
        k, s, p, d = window(node, m)
        u = upsample_scale(m) if isinstance(m, nn.Upsample) else None
        # the layer's full height
        h = env[srcs[0]][2] * u if u else out_height(env[srcs[0]][2], k, s, p, d, getattr(m, "ceil_mode", False))
        (a, b), ka = out, keep[0] if keep and keep[1] > keep[0] else None
        got = Received.apply(got) if ka is not None else None
        assert got is None or b <= a or keep[1] == a, "a boundary must end where the band's own rows begin"
        if b <= a:
            return (got, ka, h) if got is not None else (None, a, h)
        if u:  # output row o repeats input row o // u: the rows under [a, b), repeated, cut to it
            lo = a // u
            y = F.interpolate(self.rows_of(env[srcs[0]], lo, (b - 1) // u + 1)[0], scale_factor=u, mode="nearest")
            y = cut(y, a - lo * u, b - lo * u)
        elif got is not None and rectifies(node, m):
            # a ReLU leaves the rows it received as they are, and its gradient's mask on them is
            # the one their band's ReLU applies again: rectifying them with its own rows gives the
            # same values and gradient as joining the two after, and its output, which its backward
            # keeps, is the joined map, not a second copy of its rows
            return self.compute(node, m, [torch.cat((got, self.rows_of(env[srcs[0]], a, b)[0]), 2)], fresh=True), ka, h
        else:
            lo, hi = a * s - p, (b - 1) * s - p + d * (k - 1) + 1
            ins = [self.rows_of(env[i], lo, hi) for i in srcs]
            y = self.compute(node, m, [i[0] for i in ins], ins[0][1:])
        return (torch.cat((got, y), 2), ka, h) if got is not None else (y, a, h)

    @staticmethod
    def handoff(value, keep):
        """(value, its rows [keep) for the next band): a Handoff, or zero rows where it hands none."""
        t, row0, h = value
        if keep[1] <= keep[0]:
            return value, t[:, :, :0].clone() if t is not None else torch.zeros(0)
        t, handed = Handoff.apply(t, keep[0] - row0, keep[1] - row0)
        return (t, row0, h), handed

    @staticmethod
    def compute(node, m, ins, border=(0, 0), fresh=False):
        """node over its inputs' rows; border: the padding rows (top, bottom) the first one needs
        past the map's borders (a convolution's or a pool's window; only those have any)."""
        x = ins[0]
        if isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)):
            return Bordered.apply(x, m, border[0], border[1], *((m.weight, m.bias) if isinstance(m, nn.Conv2d) else ()))
        assert border == (0, 0), "only a window pads"
        if isinstance(m, nn.BatchNorm2d):
            return F.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)
        if m is not None:  # elementwise: in place only on a fresh map (a band's input may be another band's view)
            return m(x.clone()) if getattr(m, "inplace", False) and not fresh else m(x)
        if is_cat(node):
            return cat(ins, 1)
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
            out = checkpoint(self.band, r, x, Boundaries(received), use_reentrant=False, preserve_rng_state=False)
            bands.append(out[0])
            received = out[1:]
        return torch.cat(bands, 2)
