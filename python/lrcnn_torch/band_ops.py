"""What a band can run, node by node: the checks RowSegment makes of a row segment's graph before it
runs (check_node, check_per_pixel, passes_through), and the facts about a node it needs (its window
along H, its output's height, whether it draws random numbers, whether it reads a pixel's channels
only). Each refusal names the node and what it is."""
import operator

import torch
import torch.nn as nn
import torch.nn.functional as F


ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.Sigmoid, nn.SiLU, nn.GELU, nn.Hardswish, nn.Hardsigmoid, nn.Identity)
FUNCTIONS = {F.relu, torch.relu, F.relu6, torch.sigmoid, F.silu, F.gelu, F.hardswish, F.hardsigmoid}
METHODS = {"relu", "relu_", "sigmoid"}
# What moves a band's values without reading across rows, as the importer takes it in: a size read
# and its items, the channel shuffle (a view to (N, g, C/g, H, W), transpose(1, 2), a view back),
# channels taken apart (x.chunk(k, 1), its items): run on the rows the band holds (RowSegment.through)
THROUGH_METHODS = {"size", "view", "reshape", "transpose", "contiguous", "chunk"}
THROUGH_FUNCTIONS = {operator.getitem, operator.floordiv, torch.transpose, torch.chunk}
TO_CHANNELS_LAST, FROM_CHANNELS_LAST = [0, 2, 3, 1], [0, 3, 1, 2]


def permute_dims(node):
    """A permute's dimensions (mod 4), or None for any other node."""
    if not (node.op == "call_function" and node.target is torch.permute or node.op == "call_method" and node.target == "permute"):
        return None
    dims = list(node.args[1]) if len(node.args) == 2 and isinstance(node.args[1], (list, tuple)) else list(node.args[1:])
    return [d % 4 if isinstance(d, int) else d for d in dims]


def per_pixel_nodes(graph):
    """The nodes that run on a channels-last map (N, H, W, C), as ConvNeXt's blocks do between a
    permute there and one back, those permutes included: each reads a pixel's channels only (the
    importer takes nothing else there), so a band runs them on the rows it holds (RowSegment.pixels)."""
    last, nodes = set(), set()
    for n in graph.nodes:
        dims, reads = permute_dims(n), any(i in last for i in n.all_input_nodes)
        if dims == TO_CHANNELS_LAST and not reads or reads and dims != FROM_CHANNELS_LAST:
            last.add(n)
        if dims == TO_CHANNELS_LAST or reads:
            nodes.add(n)
    return nodes


def is_stochastic_depth(node):
    return node.op == "call_function" and getattr(node.target, "__name__", "") == "stochastic_depth"


def draws(node):
    """Whether node draws random numbers: torchvision's stochastic depth with p > 0 in training
    (one draw an image, so every band draws the same when it starts from the same generator state)."""
    if not is_stochastic_depth(node):
        return False
    kw = dict(zip(("input", "p", "mode", "training"), node.args), **node.kwargs)
    return kw.get("p", 0) > 0 and kw.get("training", True)


def is_map(a):
    """Whether argument a is a map: a node, not a parameter (get_attr, or what split_module passes a
    segment for one: RowSegment marks those `lrcnn_param`)."""
    return isinstance(a, torch.fx.Node) and a.op != "get_attr" and not a.meta.get("lrcnn_param")


def scales(node):
    """A product of a map and a parameter or a number (ConvNeXt's layer scale): elementwise."""
    if node.op != "call_function" or node.target not in (operator.mul, torch.mul) or len(node.args) != 2:
        return False
    return sum(map(is_map, node.args)) == 1


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


def resampling(node, m):
    """An upsampling a band runs, as (scale, mode, align_corners): an nn.Upsample or F.interpolate,
    nearest or bilinear, by a whole scale the same along H and W (its map's size against its
    input's, as traced: F.interpolate to a size is one too); None for any other node, and a string
    saying why for an upsampling a band cannot run."""
    if isinstance(m, nn.Upsample):
        mode, align, anti = m.mode, m.align_corners, False
    elif node.op == "call_function" and node.target is F.interpolate:
        kw = dict(zip(("input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"), node.args),
                  **node.kwargs)
        mode, align, anti = kw.get("mode", "nearest"), kw.get("align_corners"), kw.get("antialias", False)
    else:
        return None
    shapes = [n.meta["tensor_meta"].shape if "tensor_meta" in n.meta else None for n in (node.all_input_nodes[0], node)]
    if mode not in ("nearest", "bilinear") or anti:
        return "%s upsampling%s (only nearest or bilinear)" % (mode, " with antialias" if anti else "")
    if None in shapes or len(shapes[0]) != 4:
        return "an upsampling of a map whose shape was not traced"
    (h, w), (oh, ow) = shapes[0][2:], shapes[1][2:]
    if oh % h or ow % w or oh // h != ow // w:
        return "upsampling %dx%d to %dx%d (only by a whole scale, the same along H and W)" % (h, w, oh, ow)
    return oh // h, mode, bool(align)


def bilinear_taps(a, b, n_in, scale, align):
    """PyTorch's bilinear weights along H for output rows [a, b) of an upsampling by a whole scale
    from n_in rows, in its float arithmetic (area_pixel_compute_source_index): each row's two input
    rows h0, h1 and h1's weight l1."""
    o = torch.arange(a, b, dtype=torch.float32)
    if align:
        n_out = n_in * scale
        ratio = torch.tensor(float(n_in - 1), dtype=torch.float32) / (n_out - 1) if n_out > 1 else torch.tensor(0.0)
        src = ratio * o
    else:
        src = (torch.tensor(1.0 / scale, dtype=torch.float32) * (o + 0.5) - 0.5).clamp(min=0)
    h0 = src.long()
    return h0, h0 + (h0 < n_in - 1).long(), src - h0.float()


def bilinear_rows(x, row0, taps, scale, align):
    """The rows of x's bilinear upsampling whose taps (bilinear_taps) are given (x: rows row0.. of the
    map, all those the taps read): along W as F.interpolate computes it (the band has every column),
    then along H with the taps of the whole map, which interpolating the band's rows alone would not
    give (its coordinates start at its first row, and clamp at its edges)."""
    t = F.interpolate(x, scale_factor=(1, scale), mode="bilinear", align_corners=align)  # along H: the identity
    h0, h1, l1 = taps
    l1 = l1.to(t.dtype).to(t.device).view(1, 1, -1, 1)
    return t.index_select(2, (h0 - row0).to(t.device)) * (1 - l1) + t.index_select(2, (h1 - row0).to(t.device)) * l1


def is_layernorm2d(m):
    """torchvision's LayerNorm2d: a LayerNorm over each pixel's channels of an (N, C, H, W) map."""
    return isinstance(m, nn.LayerNorm) and type(m).__name__ == "LayerNorm2d"


def check_per_pixel(node, m, where):
    """Refuses what a band cannot run on a channels-last map (what the importer takes there)."""
    ok = (permute_dims(node) is not None or node.op == "call_module" and isinstance(m, (nn.LayerNorm, nn.Linear) + ELEMENTWISE)
          or node.op == "call_function" and (node.target in FUNCTIONS or scales(node)) or node.op == "call_method" and node.target in METHODS)
    if not ok:
        raise Unsupported("%s: %s on a channels-last map" % (where, type(m).__name__ if m is not None else getattr(node.target, "__name__", node.target)))


def sizes_an_upsampling(node):
    """Whether node reads a map's size (x.shape) only for upsamplings to it (a segmentation model's
    last, to its input's), through items of it: a band's read gives the band's size, which a band's
    upsampling does not use (it upsamples by the scale traced, resampling)."""
    for u in node.users:
        if u.op == "call_function" and u.target is F.interpolate:
            if any(a is node for a in u.args[:1]) or u.args[:1] == () and u.kwargs.get("input") is node:
                return False  # upsampled, not a size
        elif not (u.op == "call_function" and u.target in (operator.getitem, operator.floordiv) and sizes_an_upsampling(u)):
            return False
    return bool(node.users)


def passes_through(node):
    """Whether node is one RowSegment.through runs (THROUGH_METHODS, THROUGH_FUNCTIONS, a size read
    for upsamplings alone), chunks along the channels only."""
    if node.op == "call_function" and node.target is getattr and node.args[1:] == ("shape",):
        return sizes_an_upsampling(node)
    if node.op == "call_method" and node.target in THROUGH_METHODS or node.op == "call_function" and node.target in THROUGH_FUNCTIONS:
        chunk = node.target in ("chunk", torch.chunk)
        return not chunk or (node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)) in (1, -3)
    return False


def run_node(node, args, kwargs, modules):
    """node's operation on args and kwargs (its arguments' values): its module (in modules), its
    method, or its function."""
    if node.op == "call_module":
        return modules[node.target](*args, **kwargs)
    if node.op == "call_method":
        return getattr(args[0], node.target)(*args[1:], **kwargs)
    return node.target(*args, **kwargs)


def check_node(node, m, where):
    """Refuses what a band cannot compute here."""
    if passes_through(node):
        return
    why = resampling(node, m)
    if isinstance(why, str):  # an Upsample or F.interpolate a band cannot run
        raise Unsupported("%s: %s" % (where, why))
    if node.op == "call_module":
        if isinstance(m, nn.Conv2d) and m.padding_mode != "zeros":
            raise Unsupported("%s: padding_mode %s" % (where, m.padding_mode))
        if isinstance(m, nn.AvgPool2d) and m.ceil_mode:
            raise Unsupported("%s: a ceil-mode average pool" % where)
        if isinstance(m, nn.AvgPool2d) and not m.count_include_pad:
            raise Unsupported("%s: average pooling without the padding counted" % where)
        if isinstance(m, nn.Dropout) and m.p > 0 and m.training:
            raise Unsupported("%s: dropout (a mask a value: a band cannot draw the plain module's)" % where)
        if not isinstance(m, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.BatchNorm2d, nn.Upsample) + ELEMENTWISE) and not is_layernorm2d(m):
            raise Unsupported("%s: %s" % (where, type(m).__name__))
    elif node.op == "call_function":
        if node.target is F.interpolate:
            return
        if node.target is getattr:  # x.shape, read for more than an upsampling's size
            raise Unsupported("%s: a map's size read in a band, for use in it (the band's own size is not the map's)" % where)
        if is_stochastic_depth(node):
            if draws(node) and dict(zip(("input", "p", "mode"), node.args), **node.kwargs).get("mode") != "row":
                raise Unsupported("%s: stochastic depth drawing once for the whole batch" % where)
            return
        if node.target not in FUNCTIONS and node.target not in (operator.add, torch.add) and not is_cat(node) and not scales(node):
            raise Unsupported("%s: %s" % (where, getattr(node.target, "__name__", node.target)))
        if is_cat(node) and (node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)) not in (1, -3):
            raise Unsupported("%s: a concatenation along another dimension than the channels" % where)
    elif node.op == "call_method" and node.target not in METHODS:
        raise Unsupported("%s: method %s" % (where, node.target))


def _tensors(v):
    """The tensors a node's value is or holds (a chunk's tuple)."""
    if torch.is_tensor(v):
        return [v]
    return [t for t in v if torch.is_tensor(t)] if isinstance(v, (tuple, list)) else []


def rectifies(node, m):
    """Whether node is a ReLU: relu(relu(x)) = relu(x), and its gradient is a mask of its output."""
    if m is not None:
        return isinstance(m, nn.ReLU)
    return node.target in (F.relu, torch.relu) or (node.op == "call_method" and node.target in ("relu", "relu_"))
