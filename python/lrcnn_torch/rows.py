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
max pooling (floor or ceil mode) and average pooling (floor mode, counting the padding), nearest
and bilinear upsampling by a whole scale (an Upsample or F.interpolate, to a scale or to a size:
the scale traced; bilinear with the taps of the whole map, corners aligned or not), BatchNorm with
its running statistics (the plan's bn=frozen: the only mode whose statistics a band can use
alone), the elementwise modules and functions, a map scaled by a parameter, sums and channel
concatenations; what moves values without reading across rows (a size read, ShuffleNet's channel
shuffle, channel chunks: through); what reads each pixel's channels alone (torchvision's
LayerNorm2d, and ConvNeXt's block between its permutes to channels-last and back: LayerNorm,
Linear, GELU: pixels); and stochastic depth, one draw an image, each band drawing from the
generator's state at the segment's start (so every band draws what the plain module does).
Anything else in a row segment is refused by name (a dropout, whose mask is a draw a value; a pool
over the whole map, as squeeze-and-excitation has).
"""
import contextlib
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from lrcnn_torch.band_ops import (Unsupported, bilinear_rows, bilinear_taps, cat, check_node, check_per_pixel, draws, is_cat, is_map, is_same_map,  # noqa: F401
                                  is_stochastic_depth, out_height, passes_through, run_node, per_pixel_nodes, rectifies, resampling, scales,
                                  pair, window, _tensors)


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


def _generator_state(x):
    """The state of the generators x's device draws from (the CPU's, and x's GPU's)."""
    return torch.get_rng_state(), torch.cuda.get_rng_state(x.device) if x.is_cuda else None


def _set_generator_state(x, state):
    torch.set_rng_state(state[0])
    if state[1] is not None:
        torch.cuda.set_rng_state(state[1], x.device)


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
        # its inputs: the map, then any parameter a node reads (split_module passes them in: ConvNeXt's layer scale)
        self.inputs = [n for n in inner.graph.nodes if n.op == "placeholder"]
        for n in self.inputs[1:]:
            n.meta["lrcnn_param"] = True
        self.pixels_of = per_pixel_nodes(inner.graph)
        for node in inner.graph.nodes:
            if node.op in ("placeholder", "output", "get_attr"):
                continue
            m = self.modules_of.get(node.target) if node.op == "call_module" else None
            if node in self.pixels_of:
                check_per_pixel(node, m, "node '%s'" % node.name)
                continue
            check_node(node, m, "node '%s'" % node.name)
            if isinstance(m, nn.BatchNorm2d) and bn != "frozen":
                raise Unsupported("node '%s': BatchNorm with bn=%s (a band normalizes with running statistics only: bn=frozen)"
                                  % (node.name, bn))
            if node.name not in self.layer_of and passes_through(node):
                continue  # a size, a shuffle's view or transpose, a chunk: no layer of its own
            if self.layer_of.get(node.name) not in self.geo["band"][0]["layers"]:
                raise Unsupported("node '%s' has no layer of the segment" % node.name)
        bands = self.geo["band"]
        rows = lambda v: v[1] > v[0]  # noqa: E731
        # a cat of one map is that map (cat): it hands no boundary of its own, which would be the
        # same rows again (DenseNet's, over a transition's pool: 0.37 MB kept twice at 96x96)
        self.bounded = [n for n in inner.graph.nodes if n.op != "placeholder" and n.name in layer_of and layer_of[n.name] in bands[0]["layers"]
                        and not is_same_map(n) and any(rows(b["layers"][layer_of[n.name]]["keep"]) for b in bands)]
        self.handing = set(self.bounded)
        if self.handing & self.pixels_of:
            raise Unsupported("node '%s': a channels-last map whose rows a band hands on" % next(iter(self.handing & self.pixels_of)).name)
        # stochastic depth draws one number an image: every band starts from the generator's state
        # at the segment's start and draws what the plain module draws, those of a layer it computes
        # no rows of too (band), so that the later ones are the same
        self.random = {n for n in inner.graph.nodes if draws(n)}
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

    def band(self, r, x, received, *params):
        """Band r: the rows it computes of the segment's last layer, then the boundaries it hands
        on (one per layer in self.bounded, zero rows where it hands none)."""
        geo, prev = self.geo["band"][r]["layers"], self.geo["band"][r - 1]["layers"] if r else None
        got = dict(zip(self.bounded, received.take()))  # each let go of once its layer has it
        env, handed = {}, {}
        for node in self.inner.graph.nodes:
            if node.op == "placeholder":
                env[node] = (x, 0, x.shape[2]) if node is self.inputs[0] else (params[self.inputs.index(node) - 1], None, None)
                continue
            if node.op == "get_attr":  # a parameter (ConvNeXt's layer scale)
                env[node] = (self.inner.get_parameter(node.target), None, None)
                continue
            if node.op == "output":
                last = node.args[0]
                t, row0, _ = env[last]
                a, b = geo[self.layer_of[last.name]]["out"]
                return (cut(t, a - row0, b - row0),) + tuple(handed[n] for n in self.bounded)
            layer = self.layer_of.get(node.name)
            g = got.pop(node, None)
            if node in self.random and geo[layer]["out"][1] <= geo[layer]["out"][0]:  # the draws alone: on no rows
                node.target(x.new_empty((x.shape[0], 1, 0, 1)), *node.args[1:], **node.kwargs)
            if node in self.pixels_of:  # a pixel's channels: on what the band holds
                env[node] = self.pixels(node, env)
            elif layer is None:  # passes through (a size, a view): what the band holds of its input
                env[node] = self.through(node, env)
            else:
                env[node] = self.value(node, env, geo[layer]["out"], prev[layer]["keep"] if g is not None else None, g)
            if node in self.handing:  # taken now: the layer's rows may be let go of before the band ends
                env[node], handed[node] = self.handoff(env[node], geo[layer]["keep"])
            for i in node.all_input_nodes:
                if self.last_read[i] is node:
                    del env[i]

    @staticmethod
    def through(node, env):
        """node run on what the band holds of its inputs (a value, its first row, the map's full
        height: those of its first input), nothing where the band holds none; a 4-d map it makes
        must have its input's rows and width, a 5-d one (a shuffle's view) have them last."""
        src = env[node.all_input_nodes[0]]
        if src[0] is None:
            return src
        y = run_node(node, *torch.fx.node.map_arg((node.args, node.kwargs), lambda n: env[n][0]), None)
        rows = next((t.shape[-2:] for t in _tensors(src[0]) if t.dim() in (4, 5)), None)
        for t in _tensors(y):
            if rows is not None and t.dim() in (4, 5) and t.shape[-2:] != rows:
                raise RuntimeError("node '%s' makes a map of %s from one of %s rows and columns: it reads across rows, "
                                   "which a band cannot" % (node.name, tuple(t.shape), tuple(rows)))
        return y, src[1], src[2]

    def pixels(self, node, env):
        """node, which reads each pixel's channels alone (per_pixel_nodes), on the rows the band holds
        of its input (a value, its first row, the map's full height: its input's)."""
        src = env[next(i for i in node.all_input_nodes if is_map(i))]
        if src[0] is None:
            return src
        return run_node(node, *torch.fx.node.map_arg((node.args, node.kwargs), lambda n: env[n][0]), self.modules_of), src[1], src[2]

    def value(self, node, env, out, keep, got):
        """The band's value of node: the rows [out) it computes, below the rows [keep) it received
        (got) from the band before, if any."""
        if is_same_map(node):
            return env[node.args[0][0]]
        if passes_through(node):  # a layer that moves values (the shuffle's view back, a chunk's item)
            y, row0, h = self.through(node, env)
            (a, b), ka = out, keep[0] if keep and keep[1] > keep[0] else None
            got = Received.apply(got) if ka is not None else None
            if b <= a or y is None:
                return (got, ka, h) if got is not None else (None, a, h)
            assert row0 <= a and b <= row0 + y.shape[2], "a band must hold what its layers read"
            y = cut(y, a - row0, b - row0)
            return (torch.cat((got, y), 2), ka, h) if got is not None else (y, a, h)
        m = self.modules_of.get(node.target) if node.op == "call_module" else None
        srcs = list(node.args[0]) if is_cat(node) else [i for i in node.args if is_map(i)]
        k, s, p, d = window(node, m)
        u, mode, align = resampling(node, m) or (None, None, None)
        # the layer's full height
        h = env[srcs[0]][2] * u if u else out_height(env[srcs[0]][2], k, s, p, d, getattr(m, "ceil_mode", False))
        (a, b), ka = out, keep[0] if keep and keep[1] > keep[0] else None
        got = Received.apply(got) if ka is not None else None
        assert got is None or b <= a or keep[1] == a, "a boundary must end where the band's own rows begin"
        if b <= a:
            return (got, ka, h) if got is not None else (None, a, h)
        if u and mode == "bilinear":  # the rows its taps read, all within the window lrcnn gives the band
            taps = bilinear_taps(a, b, env[srcs[0]][2], u, align)
            lo, hi = int(taps[0].min()), int(taps[1].max()) + 1
            y = bilinear_rows(self.rows_of(env[srcs[0]], lo, hi)[0], lo, taps, u, align)
        elif u:  # output row o repeats input row o // u: the rows under [a, b), repeated, cut to it
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
            if scales(node) or is_stochastic_depth(node):  # the map's rows, with the rest of its arguments
                y = node.target(*torch.fx.node.map_arg(node.args, lambda n: ins[0][0] if n in srcs else env[n][0]), **node.kwargs)
            else:
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

    def forward(self, x, *params):
        if any(not isinstance(p, nn.Parameter) for p in params):
            raise RuntimeError("a row segment takes one map and the parameters its nodes read; it was given %d maps"
                               % (1 + sum(not isinstance(p, nn.Parameter) for p in params)))
        bands, received = [], ()
        start = _generator_state(x) if self.random else None
        for r in range(self.geo["bands"]):  # each band recomputed in backward from what it received
            # the generator's state kept (5 KB a band on the CPU) only where a layer draws: each band
            # starts from the segment's, and its recomputation from the same
            hold_plain(x, *received)
            if start is not None:
                _set_generator_state(x, start)
            out = checkpoint(self.band, r, x, Boundaries(received), *params, use_reentrant=False, preserve_rng_state=start is not None)
            bands.append(out[0])
            received = out[1:]
        return torch.cat(bands, 2)
