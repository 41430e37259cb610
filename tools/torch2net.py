#!/usr/bin/env python3
"""Converts a PyTorch module to a net file (nets/FORMAT.md).

    ./lrcnn import MODEL [-o FILE.net] [--image S|HxW] [--channels C] [--name NAME]
                         [--no-dropout] [--pixel-loss] [--force]
    (the same as /usr/bin/python3 tools/torch2net.py MODEL ...: Debian's Python, which has PyTorch)

MODEL is a torchvision model name (mobilenet_v2, resnet50, vgg16, ...; or torchvision:NAME: built
untrained, weights are not needed), or PATH.py:FACTORY, a Python file and a function in it that returns an nn.Module (or
the class itself). The module is traced symbolically (torch.fx, PyTorch 1.13's) and every node of
the graph becomes one line of the net file, in the graph's order, named after the module it calls
(`layer1.0.conv1`; a module called again gets `_1`, `_2`: torchvision's ResNet calls one `relu`
three times a block) or, for a function (`x + y`), after the module whose forward calls it
(`layer1.0.add`). The model's output becomes the logits of a `loss` layer: a classification over
its values, or with --pixel-loss a segmentation's, (N, classes, H, W) with a label a pixel. A model
that returns several (a tuple, a dict such as {'out', 'aux'}, a named tuple such as GoogLeNet's and
Inception-v3's with their auxiliary heads) gives its main output (the first, or 'out'), and the
layers only the others use are left out, with a note on stderr. Max pooling with ceil_mode=True
becomes `maxpool ... ceil=1` (SqueezeNet, GoogLeNet). Channels taken apart (x.chunk, torch.split,
x.narrow, x[:, a:b]) become `slice` lines, and a channel shuffle written as ShuffleNet's (view to
(N, g, C/g, H, W), transpose(1, 2), view back) a `shuffle` line (tools/torch2net_channels.py).

What it cannot represent it refuses, naming the node: a kind the format lacks (bicubic upsampling,
a permute, LayerNorm, ...), or a module configured beyond it (a non-square pool, reflect padding,
ceil_mode average pooling, BatchNorm without running statistics, GELU's tanh form). Exit status 2 then,
and no file is written. Without -o the net goes to stdout; with -o an existing file is kept unless
--force (which never replaces anything but a regular file), and the file is written whole or not at
all, with the user's umask. Every refusal, a model file that exits or raises, a full disk: exit 2
and one line on stderr; whatever the model's code prints goes nowhere near the net.

--no-dropout leaves out dropout layers (they hold no parameters; the shipped vgg16.net omits the
classifier's two, as the paper's memory figures do), and torchvision's stochastic depth, which is
otherwise a dropout with one draw an image (`dropout sample=1`, mode "row"; mode "batch" is refused). --image sets the input layer's size
(default 224); --channels the input's channels (default: the first convolution's).

Checked in the suite (tests/test_import.py): parameters and multiply-accumulates of every net it
makes equal the PyTorch module's, and torchvision's vgg16 and resnet50 come out as the shipped
nets, layer for layer.
"""
import argparse
import contextlib
import importlib.util
import io
import operator
import os
import re
import sys
import tempfile
import types

import torch
import torch.fx as fx
import torch.nn as nn
from torch.fx.passes.shape_prop import ShapeProp

from torch2net_channels import Channels, UnpackingProxy, is_size
from torch2net_modules import (ELEMENTWISE, FUNCTIONS, MODULES, NET_MAX_IN, NET_NAME_MAX, Refused,
                               adaptive, fmt_float, is_layernorm2d, keys, main_output, pool, upsample)


class ScopeTracer(fx.Tracer):
    """torch.fx's tracer, recording in each node the module whose forward made it."""

    def __init__(self):
        super().__init__()
        # the paths of the modules whose forwards are running, innermost last (not `scope`, which
        # PyTorch 2.x's tracer keeps for itself)
        self.paths = [""]
        self.failed_in = None  # the innermost module whose forward the trace failed in: (path, class)

    def is_leaf_module(self, m, qualname):
        """torchvision's LayerNorm2d too, whose forward permutes to (N, H, W, C) and back."""
        return is_layernorm2d(m) or super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        self.paths.append(self.path_of_module(m))
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_in is None:
                self.failed_in = (self.paths[-1], type(m).__name__)
            raise
        finally:
            self.paths.pop()

    def proxy(self, node):
        return UnpackingProxy(node, self)

    def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None, *rest, **kw):
        proxy = super().create_proxy(kind, target, args, kwargs, name, type_expr, *rest, **kw)
        proxy.node.meta["scope"] = self.paths[-2] if kind == "call_module" else self.paths[-1]
        return proxy


def function_name(node):
    t = node.target
    return t if isinstance(t, str) else getattr(t, "__name__", str(t))


def describe(node):
    what = {"call_module": "module", "call_function": "function", "call_method": "method"}.get(node.op, node.op)
    return "node '%s' (%s %s)" % (node.name, what, node.target if node.op != "call_function" else function_name(node))


class Converter:
    def __init__(self, model, image, channels, drop_dropout, pixel=False):
        self.model, self.image, self.channels, self.drop_dropout, self.pixel = model, image, channels, drop_dropout, pixel
        self.lines, self.names, self.alias = [], set(), {}
        self.cl = set()     # nodes holding a map permuted to channels-last, (N, H, W, C)
        self.attrs = {}     # get_attr nodes of a (C, 1, 1) parameter: their targets
        self.channels_of = Channels(self)  # slices and shuffles of channels

    def unique(self, base):
        """base, or base_1, base_2, ... when taken; a name longer than the format's 47 characters keeps
        its first 16 and its last, '..' between (RegNet's module paths run past it)."""
        base = re.sub(r"[^A-Za-z0-9_.\-]", "_", base)
        name, k = base, 1
        while True:
            if len(name) > NET_NAME_MAX:
                name = name[:16] + ".." + name[-(NET_NAME_MAX - 18):]
            if name not in self.names:
                break
            name, k = "%s_%d" % (base, k), k + 1
        self.names.add(name)
        return name

    def source(self, arg, node):
        if not isinstance(arg, fx.Node):
            raise Refused("%s: reads %r, not a tensor of the net" % (describe(node), arg))
        if arg not in self.alias:
            raise Refused("%s: reads '%s', which the net cannot represent" % (describe(node), arg.name))
        return self.alias[arg]

    def emit(self, node, kind, keystr, inputs, base=None):
        """One line for node, named base or after its module or function; a module called again
        (unique) gets _1, _2, ..."""
        scope = node.meta.get("scope", "")
        if base is None and node.op == "call_module":
            base = node.target
        elif base is None:
            base = (scope + "." if scope else "") + function_name(node).strip("_")
        name = self.unique(base)
        prev = self.lines[-1][1] if self.lines else None
        inp = "" if len(inputs) == 1 and inputs[0] == prev else " in=" + ",".join(inputs)
        self.lines.append((kind, name, keystr + inp))
        self.alias[node] = name
        return name

    def tensor_inputs(self, node):
        return [a for a in node.args if isinstance(a, fx.Node) and not (a.op == "call_method" and a.target == "size")
                and not self.is_shape(a)]

    @staticmethod
    def is_shape(node):
        """x.shape, x.size(), or an item, slice or quotient of them: sizes, not data."""
        if is_size(node):
            return True
        if node.op != "call_function":
            return False
        if node.target is getattr and len(node.args) == 2 and node.args[1] == "shape":
            return True
        return node.target is operator.getitem and isinstance(node.args[0], fx.Node) and Converter.is_shape(node.args[0])

    def convert_node(self, node, modules):
        where = describe(node)
        if node.op == "placeholder":
            if self.lines:
                raise Refused("%s: a second input (the format has one image input)" % where)
            c, (h, w) = self.channels, self.image
            self.lines.append(("input", "data", keys(c=c, h=h, w=w)))
            self.names.add("data")
            self.alias[node] = "data"
            return
        if node.op == "output":
            out = node.args[0]
            if not isinstance(out, fx.Node):
                raise Refused("the model returns %s, not one tensor of logits" % type(out).__name__)
            src = self.source(out, node)
            inp = "" if src == self.lines[-1][1] else " in=" + src
            if self.pixel is None:  # as the module's output says: (N, classes, H, W) logits are a pixel's
                self.pixel = len(out.meta["tensor_meta"].shape) == 4
            if self.pixel and len(out.meta["tensor_meta"].shape) != 4:
                raise Refused("--pixel-loss: the model returns a %d-d tensor, not (N, classes, H, W) logits"
                              % len(out.meta["tensor_meta"].shape))
            self.lines.append(("loss", self.unique("loss"), (" pixel=1" if self.pixel else "") + inp))
            return
        if node.op == "get_attr":  # a (C, 1, 1) parameter may scale a map (ConvNeXt's layer scale): see mul
            shape = tuple(node.meta["tensor_meta"].shape) if "tensor_meta" in node.meta else ()
            is_param = any(n == node.target for n, _ in self.model.named_parameters())
            if not is_param or len(shape) != 3 or shape[1:] != (1, 1):
                raise Refused("%s: reads a parameter or buffer directly (only modules' own, or a (C, 1, 1) scale)" % where)
            self.attrs[node] = node.target
            return
        if node.op == "call_module" and any(a in self.cl for a in self.tensor_inputs(node)[:1]):
            self.channels_last_module(node, modules[node.target], where)
            return
        if node.op == "call_module":
            m = modules[node.target]
            for cls, fn in MODULES:
                if isinstance(m, cls):
                    r = fn(m, where)
                    break
            else:
                raise Refused("%s: %s is not a kind of the net format (nets/FORMAT.md)" % (where, type(m).__name__))
            args = self.tensor_inputs(node)
            if len(args) != 1 or len(node.args) != 1 or node.kwargs:
                raise Refused("%s: called with %d arguments, expected one tensor" % (where, len(node.args)))
            src = self.source(args[0], node)
            if r is None or (isinstance(r, tuple) and r[0] == "dropout" and self.drop_dropout):
                self.alias[node] = src
                return
            if r == "flatten":
                self.alias[node] = src
                return
            kind, keystr = r
            self.check_rank(node, args[0], kind, where)
            self.emit(node, kind, keystr, [src])
            return
        # functions and methods
        if node.op == "call_method" and node.target == "size":  # x.size(0) for a view: shape, not data
            return
        if self.is_shape(node):  # x.shape, x.shape[-2:]: a size for interpolate, not data
            return
        if self.channels_of.handles(node, where):
            return
        if node.op == "call_function" and function_name(node) == "stochastic_depth":
            self.stochastic_depth(node, where)
            return
        kind = FUNCTIONS.get(node.target, "?")
        if kind == "?":
            raise Refused("%s: not a kind of the net format (nets/FORMAT.md)" % where)
        if kind == "cat":
            self.concat(node, where)
            return
        if kind == "permute":
            self.permute(node, where)
            return
        args = self.tensor_inputs(node)
        if any(a in self.cl for a in args):  # on a channels-last tensor: elementwise kinds only, all of it channels-last
            if kind not in ELEMENTWISE + ("add",) or not all(a in self.cl for a in args):
                raise Refused("%s: %s on a channels-last tensor (only elementwise kinds, a LayerNorm over its channels "
                              "and a Linear)" % (where, kind))
            self.cl.add(node)
        if not args:
            raise Refused("%s: reads no tensor of the net" % where)
        if kind is None:
            self.alias[node] = self.source(args[0], node)
            return
        if kind == "flatten":
            self.check_flatten(node, where)
            self.alias[node] = self.source(args[0], node)
            return
        self.check_rank(node, args[0], kind, where)
        if kind == "adaptive":
            size = node.args[1] if len(node.args) > 1 else node.kwargs.get("output_size")
            kind, keystr = adaptive(size, where)
            self.emit(node, kind, keystr, [self.source(args[0], node)])
            return
        if kind in ("maxpool", "avgpool"):  # F.max_pool2d, F.avg_pool2d: as the modules, from their arguments
            names = {"maxpool": ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"),
                     "avgpool": ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override")}[kind]
            kw = dict(zip(names, node.args[1:]), **node.kwargs)
            m = types.SimpleNamespace(kernel_size=kw.get("kernel_size"), stride=kw.get("stride"), padding=kw.get("padding", 0),
                                      dilation=kw.get("dilation", 1), ceil_mode=kw.get("ceil_mode", False),
                                      return_indices=kw.get("return_indices", False), count_include_pad=kw.get("count_include_pad", True),
                                      divisor_override=kw.get("divisor_override"))
            kind, keystr = pool(kind)(m, where)
            self.emit(node, kind, keystr, [self.source(args[0], node)])
            return
        if kind == "mean":  # x.mean((2, 3)) or torch.mean(x, [2, 3]): a global average pool
            dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
            dims = sorted(d % 4 for d in (dims if isinstance(dims, (list, tuple)) else [dims])) if dims is not None else None
            if dims != [2, 3]:
                raise Refused("%s: a mean over dimensions %s (only over H and W: a global average pool)" % (where, dims))
            self.emit(node, "gap", "", [self.source(args[0], node)])
            return
        if kind == "interpolate":
            kw = dict(zip(("size", "scale_factor", "mode", "align_corners"), node.args[1:]), **node.kwargs)
            odd = [k for k, v in kw.items() if k not in ("size", "scale_factor", "mode", "align_corners") and v not in (None, False)]
            if odd:
                raise Refused("%s: interpolate with %s" % (where, ", ".join("%s=%s" % (k, kw[k]) for k in odd)))
            if kw.get("size") is not None:  # to a size (a segmentation head's, to its input's): a whole scale, as traced
                i, o = (tuple(n.meta["tensor_meta"].shape[-2:]) for n in (args[0], node))
                if o[0] % i[0] or o[1] % i[1] or o[0] // i[0] != o[1] // i[1]:
                    raise Refused("%s: interpolate from %dx%d to %dx%d (only by one whole scale along H and W)" % (where, *i, *o))
                kw["size"], kw["scale_factor"] = None, o[0] // i[0]
            kind, keystr = upsample(kw.get("scale_factor"), kw.get("size"), kw.get("mode", "nearest"), where, kw.get("align_corners"))
            self.emit(node, kind, keystr, [self.source(args[0], node)])
            return
        if kind == "mul" and len(node.args) == 2 and sum(a in self.attrs for a in node.args) == 1:
            scale = next(a for a in node.args if a in self.attrs)
            other = next(a for a in node.args if a is not scale)
            if scale.meta["tensor_meta"].shape[0] != other.meta["tensor_meta"].shape[1]:
                raise Refused("%s: a (C, 1, 1) parameter times a map of another channel count" % where)
            self.emit(node, "scale", "", [self.source(other, node)], base=self.attrs[scale])
            return
        if kind in ("add", "mul"):
            if len(args) != 2 or len(node.args) != 2 or node.kwargs:
                raise Refused("%s: %s of %s (only of two tensors of the net)" % (where, kind, node.args))
            self.emit(node, kind, "", [self.source(a, node) for a in args])
            return
        if len(node.args) != 1 or (node.kwargs and set(node.kwargs) != {"inplace"}):
            raise Refused("%s: called with arguments the format does not take" % where)
        self.emit(node, kind, "", [self.source(args[0], node)])

    def permute(self, node, where):
        """(N, C, H, W) to channels-last (N, H, W, C) and back, as ConvNeXt's blocks do around their
        LayerNorm and Linears: no line, the tensor is the same map."""
        src = node.args[0]
        dims = list(node.args[1]) if len(node.args) == 2 and isinstance(node.args[1], (list, tuple)) else list(node.args[1:])
        dims = [d % 4 for d in dims] if all(isinstance(d, int) for d in dims) else dims
        if dims == [0, 2, 3, 1] and src not in self.cl and len(src.meta["tensor_meta"].shape) == 4:
            self.cl.add(node)
        elif not (dims == [0, 3, 1, 2] and src in self.cl):
            raise Refused("%s: permute%s (only to channels-last (0, 2, 3, 1) and back (0, 3, 1, 2))" % (where, tuple(dims)))
        self.alias[node] = self.source(src, node)

    def channels_last_module(self, node, m, where):
        """A module on a channels-last tensor: a LayerNorm over its channels (lnorm), a Linear over
        them (a 1x1 conv), or an elementwise one; the result is channels-last too."""
        src = self.source(self.tensor_inputs(node)[0], node)
        c = node.args[0].meta["tensor_meta"].shape[-1]
        if isinstance(m, nn.LayerNorm):
            if tuple(m.normalized_shape) != (c,) or not m.elementwise_affine:
                raise Refused("%s: LayerNorm%s on a channels-last map of %d channels (only over them, affine)"
                              % (where, tuple(m.normalized_shape), c))
            kind, keystr = "lnorm", keys(eps=None if m.eps == 1e-5 else fmt_float(m.eps))
        elif isinstance(m, nn.Linear):
            kind, keystr = "conv", keys(c=m.out_features, k=1, bias=None if m.bias is not None else 0)
        else:
            kind = None
            for cls, fn in MODULES:
                if isinstance(m, cls):
                    r = fn(m, where)
                    kind, keystr = r if isinstance(r, tuple) else (None, None)
                    break
            if kind not in ELEMENTWISE:
                raise Refused("%s: %s on a channels-last tensor (only elementwise kinds, a LayerNorm over its channels "
                              "and a Linear)" % (where, type(m).__name__))
        self.cl.add(node)
        self.emit(node, kind, keystr, [src])

    def stochastic_depth(self, node, where):
        """torchvision's StochasticDepth: in mode "row" it drops each sample whole, a dropout with one
        draw an image (sample=1); p = 0, or not training, is the identity."""
        kw = dict(zip(("input", "p", "mode", "training"), node.args), **node.kwargs)
        src = self.source(kw["input"], node)
        p, mode, training = kw.get("p"), kw.get("mode"), kw.get("training", True)
        if not isinstance(p, (int, float)) or mode not in ("row", "batch"):
            raise Refused("%s: stochastic depth with p=%r, mode=%r" % (where, p, mode))
        if not training or p == 0 or self.drop_dropout:
            self.alias[node] = src
            return
        if mode != "row":
            raise Refused("%s: stochastic depth in mode 'batch' (one draw for the whole batch; only 'row', a draw an image)" % where)
        self.emit(node, "dropout", keys(p=fmt_float(p), sample=1), [src])

    def concat(self, node, where):
        parts = node.args[0] if node.args else node.kwargs.get("tensors")
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if not isinstance(parts, (list, tuple)) or not all(isinstance(p, fx.Node) for p in parts):
            raise Refused("%s: concatenates something other than a list of the net's tensors" % where)
        rank = len(parts[0].meta["tensor_meta"].shape)
        if rank != 4 or dim not in (1, -3):
            raise Refused("%s: concatenation along dimension %s (only channels of (N, C, H, W) maps)" % (where, dim))
        if len(parts) > NET_MAX_IN:
            raise Refused("%s: a concat of %d tensors (the format's concat takes at most %d)" % (where, len(parts), NET_MAX_IN))
        if len(parts) == 1:
            self.alias[node] = self.source(parts[0], node)
            return
        self.emit(node, "concat", "", [self.source(p, node) for p in parts])

    def check_rank(self, node, arg, kind, where):
        """A map is (N, C, H, W); a flattened one (N, C*H*W), what an fc reads and writes. Kinds
        that slide a window or keep per-channel statistics need maps, an fc a flattened one, and
        the elementwise kinds take either."""
        rank = len(arg.meta["tensor_meta"].shape)
        if kind == "fc" and rank != 2:
            raise Refused("%s: Linear on a %d-d tensor (the format's fc reads the map flattened: flatten first)" % (where, rank))
        if kind in ("conv", "convt", "bn", "gnorm", "lnorm", "maxpool", "avgpool", "gap", "apool", "adaptive", "upsample", "bilinear", "interpolate") and rank != 4:
            raise Refused("%s: %s on a %d-d tensor (it takes (N, C, H, W) maps)" % (where, kind, rank))

    def check_flatten(self, node, where):
        rest = list(node.args[1:]) + list(node.kwargs.values())
        name = function_name(node)
        if name == "flatten" and rest not in ([1], [1, -1]):
            raise Refused("%s: flatten%s (only flatten from dimension 1)" % (where, tuple(rest)))
        if name in ("view", "reshape") and not (len(rest) == 2 and rest[-1] == -1):
            raise Refused("%s: %s%s (only to (N, -1), a flatten)" % (where, name, tuple(rest)))

    def run(self):
        tracer = ScopeTracer()
        try:
            graph = tracer.trace(self.model)
        except Exception as e:  # data-dependent control flow, unsupported Python, a bug in the module
            msg = str(e).strip().split(". ")[0].splitlines()[0] if str(e).strip() else ""
            where = "module '%s' (%s)" % tracer.failed_in if tracer.failed_in else "it"
            raise Refused("torch.fx cannot trace %s: %s: %s" % (where, type(e).__name__, msg))
        if self.channels is None:
            convs = [m for m in self.model.modules() if isinstance(m, nn.Conv2d)]
            if not convs:
                raise Refused("no Conv2d to take the input's channels from: give --channels")
            self.channels = convs[0].in_channels
        gm = fx.GraphModule(self.model, graph)
        if main_output(graph):
            gm.recompile()
        was = {m: m.training for m in self.model.modules()}  # each module's own (BatchNorm frozen in a training net)
        try:  # every node's output shape, for the checks of rank (batch 2: BatchNorm in eval mode either way)
            self.model.eval()
            held = next(iter(list(self.model.parameters()) + list(self.model.buffers())), None)  # on the module's device
            ShapeProp(gm).propagate(torch.zeros(2, self.channels, *self.image, device=held.device if held is not None else "cpu"))
        except Exception as e:
            root = e  # ShapeProp wraps the module's own error: say that one
            while root.__cause__ is not None:
                root = root.__cause__
            lines = [ln for ln in str(root).strip().splitlines() if ln.strip()] or [type(root).__name__]
            raise Refused("running it on a %dx%dx%d input failed: %s" % (self.channels, *self.image, lines[0]))
        finally:
            for m, training in was.items():
                m.training = training
        modules = dict(self.model.named_modules())
        for node in graph.nodes:
            self.convert_node(node, modules)
        used = {id(p) for n in graph.nodes if n.op == "call_module" for p in modules[n.target].parameters()}
        used |= {id(self.model.get_parameter(t)) for t in self.attrs.values()}
        unused = [name for name, p in self.model.named_parameters() if id(p) not in used]
        if unused:
            print("torch2net: warning: %d parameter tensors of the module are not in its forward (%s%s); the net leaves them out"
                  % (len(unused), ", ".join(unused[:3]), ", ..." if len(unused) > 3 else ""), file=sys.stderr)
        return self.lines


def load_model(spec):
    if spec.startswith("torchvision:"):  # `./lrcnn import torchvision:resnet50`: the name alone
        spec = spec[len("torchvision:"):]
    if ":" in spec:
        path, attr = spec.rsplit(":", 1)
        if not os.path.isfile(path):
            raise Refused("%s: no such file" % path)
        mod_spec = importlib.util.spec_from_file_location(os.path.splitext(os.path.basename(path))[0], path)
        if mod_spec is None:
            raise Refused("%s: not a Python file" % path)
        mod = importlib.util.module_from_spec(mod_spec)
        try:
            mod_spec.loader.exec_module(mod)
        except SystemExit as e:  # a model file that exits: refused, whatever status it chose
            raise Refused("%s exits while loading (sys.exit(%s))" % (path, e.code))
        except Exception as e:
            raise Refused("%s does not load: %s: %s" % (path, type(e).__name__, one_line(e)))
        if not hasattr(mod, attr):
            raise Refused("%s has no '%s'" % (path, attr))
        try:
            model = getattr(mod, attr)()
        except SystemExit as e:
            raise Refused("%s() exits (sys.exit(%s))" % (attr, e.code))
        except Exception as e:
            raise Refused("%s() failed: %s: %s" % (attr, type(e).__name__, one_line(e)))
    else:
        import inspect
        import torchvision
        import torchvision.models.segmentation
        where = [torchvision.models, torchvision.models.segmentation]  # the classifiers, then fcn_*, deeplabv3_*, lraspp_*
        make = next((getattr(m, spec) for m in where if callable(getattr(m, spec, None))), None)
        if make is None:
            raise Refused("'%s' is not a torchvision model (or give PATH.py:FACTORY)" % spec)
        kw = {"weights": None}  # untrained: nothing to download, and a backbone's weights neither
        if "weights_backbone" in inspect.signature(make).parameters:
            kw["weights_backbone"] = None
        model = make(**kw)
    if not isinstance(model, nn.Module):
        raise Refused("%s did not make an nn.Module (got %s)" % (spec, type(model).__name__))
    return model


def one_line(e):
    """An exception's message as one line of printable text."""
    text = " ".join(str(e).split()) or type(e).__name__
    return "".join(c if c.isprintable() else "\\x%02x" % ord(c) for c in text)[:300]


def parse_image(text):
    try:
        h, w = (text.split("x") + [text])[:2] if "x" in text else (text, text)
        h, w = int(h), int(w)
    except ValueError:
        h = w = 0
    if h < 1 or w < 1:
        raise Refused("--image %s: expected a size S or HxW in pixels" % text)
    return h, w


def render(lines, name, header):
    width = max(len(k) for k, _, _ in lines)
    out = ["# " + h for h in header] + ["net %s" % name]
    for kind, lname, rest in lines:
        out.append(("%-*s %s%s" % (width, kind, lname, rest)).rstrip())
    return "\n".join(out) + "\n"


class Args(argparse.ArgumentParser):
    """argparse, its errors in one line and exit status 2 (the project's rule for bad input),
    named after the tool (`who`)."""
    who, help_hint = "torch2net", "torch2net.py --help"

    def error(self, message):
        print("%s: %s (%s)" % (self.who, message, self.help_hint), file=sys.stderr)
        sys.exit(2)


def check_output(path, force):
    """Refuses an output this tool must not write: a directory, a missing or unwritable directory,
    anything but a regular file in the way, or an existing file without --force."""
    d = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise Refused("%s is a directory" % path)
    if not os.path.isdir(d):
        raise Refused("cannot write %s: no directory %s" % (path, d))
    if not os.access(d, os.W_OK | os.X_OK):
        raise Refused("cannot write %s: directory %s is not writable" % (path, d))
    if os.path.lexists(path):
        if not force:
            raise Refused("%s exists (--force replaces it)" % path)
        if not os.path.isfile(path) or os.path.islink(path):
            raise Refused("%s is not a regular file: not replaced, --force or not" % path)


def write_whole(path, text):
    """text into path: a temporary beside it (the user's umask), synced, then renamed over."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".torch2net-", suffix=".tmp")
    try:
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def convert(a, argv):
    image = parse_image(a.image)
    if a.channels is not None and not 1 <= a.channels <= 65536:
        raise Refused("--channels %d: expected 1..65536" % a.channels)
    if a.name is not None and not re.fullmatch(r"[A-Za-z0-9_.-]{1,%d}" % NET_NAME_MAX, a.name):
        raise Refused("--name '%s': letters, digits, _ . - only, at most %d characters" % (one_line(a.name), NET_NAME_MAX))
    if a.output:
        check_output(a.output, a.force)
    model_out = io.StringIO()  # what the model's own code prints must not end up in the net on stdout
    with contextlib.redirect_stdout(model_out):
        model = load_model(a.model)
        lines = Converter(model, image, a.channels, a.no_dropout, a.pixel_loss).run()
    params = sum(p.numel() for p in model.parameters())
    name = a.name or (os.path.splitext(os.path.basename(a.output))[0] if a.output else a.model.rsplit(":", 1)[-1])
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,%d}" % NET_NAME_MAX, name):
        raise Refused("'%s' is no net name (letters, digits, _ . -): give --name" % one_line(name))
    cmd = " ".join(["tools/torch2net.py"] + [one_line(x) for x in argv])
    origin = a.model if ":" in a.model else "torchvision %s %s" % (__import__("torchvision").__version__, a.model)
    text = render(lines, name, ["%s (PyTorch %s), converted by: %s" % (one_line(origin), torch.__version__, cmd),
                                "%s parameters in the PyTorch module." % format(params, ",")])
    if a.output:
        write_whole(a.output, text)
    else:
        sys.stdout.write(text)


def main(argv):
    ap = Args(prog="torch2net", description="PyTorch module -> lrcnn net file (nets/FORMAT.md)")
    ap.add_argument("model")
    ap.add_argument("-o", "--output")
    ap.add_argument("--image", default="224")
    ap.add_argument("--channels", type=int)
    ap.add_argument("--name")
    ap.add_argument("--no-dropout", action="store_true")
    ap.add_argument("--pixel-loss", action="store_true")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    try:
        convert(a, argv)
    except Refused as e:
        print("torch2net: %s: %s" % (one_line(a.model), e), file=sys.stderr)
        return 2
    except OSError as e:  # a full disk, a vanished directory
        print("torch2net: %s: %s" % (a.output or "stdout", one_line(e.strerror or e)), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # anything else in the model's code or in tracing it: one line, not a traceback
        print("torch2net: %s: %s: %s" % (one_line(a.model), type(e).__name__, one_line(e)), file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
