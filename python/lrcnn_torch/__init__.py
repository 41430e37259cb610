"""lrcnn_torch: an lrcnn plan applied to a PyTorch module.

    import sys; sys.path.insert(0, "python")          # or: pip install ./python
    from lrcnn_torch import apply_plan
    model = apply_plan(model, image=(3, 224, 224), batch=32, plan="ckpt-opt:60%")
    loss = criterion(model(x), y); loss.backward()     # the rest of your loop unchanged

The module is imported as lrcnn imports it (tools/torch2net.py: torch.fx, the same layer names),
the plan lowered for that net, batch and optimizer by `lrcnn lower` (its segments as JSON), and the
traced graph split at the plan's segment boundaries (torch.fx's split_module: one submodule per
segment, in order). A `ckpt` segment runs under torch.utils.checkpoint (non-reentrant): only its
input is kept, the rest recomputed in backward, with the RNG state of the forward (dropout draws the
same mask) and BatchNorm's running statistics updated once, not again by the recomputation (as
lrcnn's engine). A `rows` segment, 2PS or OverL, runs band by band with lrcnn's band geometry, each
band recomputed in backward (rows.py). An `offload` segment's saved maps go to host memory and
come back for backward (saved-tensor hooks; Offloaded says which). `+dpr:fp16|bf16` keeps the
saved maps in half precision (Encoded), those an offload segment moves too: moved encoded.
`layer` segments run as they are. Gradients equal the plain
module's (bit for bit under checkpointing; to fp32 rounding in bands).

What it keeps is what lrcnn predicts: the plan is lowered under this PyTorch's rules (`+torch`,
1.13; `+torch2`, 2.x: sim/plan/plan.h), and `.predicted` on the wrapped module says what its forward
leaves for backward, what it moves to host memory, its persistent bytes and its peak. To hold to
that, a map is moved or encoded once however many nodes save it, a 2PS boundary is a copy of its
rows (a view would keep the band's whole map), a checkpoint keeps the generator's state only where
a random layer needs it, and an encoding leaves plain what a checkpoint holds anyway (its inputs).

`+gist` keeps the maps lrcnn encodes as it stores them (Gist): a relu output read back only for its
sign as a bitmap, one a convolution reads as a bitmap and its nonzero values; an offload segment
moves them encoded, and beside `+dpr` the maps gist leaves are dpr's. A sparse map's bytes depend
on its values: `measured_prediction` predicts again at the densities the last forward had.

On a GPU an offload segment's copies to host memory run on a side stream, beside the next
segment's kernels; the copies back run on the compute stream when backward reads a map (PyTorch
fetches then, not a step ahead as lrcnn's engine does).

Not yet: BatchNorm in train mode inside bands (its whole-map statistics; bn=frozen runs), the max
pools' argmax in fewer bits (PyTorch's int64 indices stay), ZFP and migration; a plan with them is
refused with a PlanError naming what. lrcnn's own engine runs them
(`lrcnn train`).
"""
import contextlib
import copy
import io
import json
import operator
import os
import subprocess
import sys
import tempfile

import torch
from torch.fx.passes.split_module import split_module
from torch.utils.checkpoint import checkpoint

try:
    import torchvision.ops as torchvision_ops
except ImportError:
    torchvision_ops = None

# the repository: this file's, or $LRCNN_ROOT when the package is installed elsewhere (pip install ./python)
ROOT = os.environ.get("LRCNN_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import torch2net  # noqa: E402  (the importer: the same trace and layer names as `lrcnn import`)

from lrcnn_torch import rows  # noqa: E402
from lrcnn_torch.encode import DPR, Encoded, Gist, _Held, _once  # noqa: E402
from lrcnn_torch.rows import RowSegment, Unsupported  # noqa: E402

__all__ = ["apply_plan", "frozen_bn", "gradient_deviation", "imported", "lower", "load_model", "measured_prediction", "PlanError"]


class PlanError(Exception):
    """A plan lrcnn refuses for this module, or one this package cannot run yet."""


def load_model(spec):
    """A module as `lrcnn import` takes it: torchvision:NAME (untrained), or PATH.py:FACTORY."""
    try:
        return torch2net.load_model(spec)
    except torch2net.Refused as e:
        raise PlanError(str(e)) from None


def frozen_bn(model):
    """model in training mode with its BatchNorm layers on their running statistics: the plan's
    bn=frozen, the one mode a band can normalize with alone (dropout still draws). Returns model."""
    model.train()
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.eval()
    return model


def binary():
    """lrcnn's binary: $LRCNN_BINARY, else the repository's build, else its wrapper."""
    for path in (os.environ.get("LRCNN_BINARY"), os.path.join(ROOT, "build", "lrcnn"), os.path.join(ROOT, "lrcnn")):
        if path and os.access(path, os.X_OK):
            return path
    raise PlanError("no lrcnn binary: build the repository (./lrcnn test) or set LRCNN_BINARY")


def torch_rules(plan):
    """plan under the rules of this PyTorch (+torch: 1.13's, +torch2: 2.x's), unless it names them:
    what lrcnn predicts then is what this package keeps running the plan."""
    if any(m in ("torch", "torch2") for m in plan.split(" bn=")[0].split("+")):  # the torch presets too
        return plan
    rules = "+torch2" if int(torch.__version__.split(".")[0]) >= 2 else "+torch"
    head, bn = plan.split(" bn=", 1) if " bn=" in plan else (plan, None)
    return head + rules + ("" if bn is None else " bn=" + bn)


def _convert(model, image):
    """(converter, the net's lines): model through the importer at image (C, H, W)."""
    try:
        conv = torch2net.Converter(model, tuple(image[1:]), image[0], False, pixel=None)
        return conv, conv.run()
    except torch2net.Refused as e:
        raise PlanError("the module is not one lrcnn can import: %s" % e) from None


def lower(model, image, batch, plan, optimizer="sgd", bn=None, lrcnn=None, device="cpu"):
    """(converter, lowering): the module as the importer sees it (converter.alias maps each traced
    node to its net layer) and `lrcnn lower`'s JSON for plan at this batch and image (C, H, W),
    under this PyTorch's rules (torch_rules), with the prediction for device ("cpu" or "cuda")."""
    asked, plan = plan, torch_rules(plan)
    conv, lines = _convert(model, image)
    with tempfile.TemporaryDirectory(prefix="lrcnn_torch.") as d:
        path = os.path.join(d, "module.net")
        with open(path, "w") as f:
            f.write(torch2net.render(lines, "module", ["made by lrcnn_torch"]))
        cmd = [lrcnn or binary(), "lower", "--net", path, "--plan", plan, "--batch", str(batch), "--optimizer", optimizer,
               "--image", "%dx%d" % tuple(image[1:]), "--device", "h100" if device == "cuda" else "cpu"] + (["--bn", bn] if bn else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise PlanError(r.stderr.strip().replace("lrcnn lower: ", "").replace(plan, asked))  # the plan as the caller wrote it
    return conv, json.loads(r.stdout)


def imported(model, image):
    """model as lrcnn imports it for image (C, H, W): a module over model's own submodules running
    the traced graph apply_plan splits, with the main output alone where the model returns several
    (GoogLeNet's auxiliary heads, a segmentation model's 'aux'), and none of the layers only the
    others use. It computes what the plain model's main output is, and draws the same random
    numbers as a wrapped module does (the auxiliary heads' dropout would draw before the main one's):
    the reference a plan's gradients are compared with (gradient_deviation)."""
    with contextlib.redirect_stderr(io.StringIO()):  # its notes are apply_plan's to give
        conv, _ = _convert(model, image)
    return torch.fx.GraphModule(model, next(iter(conv.alias)).graph)


def gradient_deviation(model, reference):
    """The worst deviation of model's parameter gradients from reference's (its copy, or imported()
    of its copy), tensor by tensor by name, each in norm relative to the reference's own; a tensor
    whose gradient is below 1e-6 of the largest one's is taken against that floor (an untrained
    net's vanishing gradients are rounding noise on both sides). A gradient on one side alone:
    infinite. Returns (deviation, the parameter's name)."""
    ref = {n: q for n, q in reference.named_parameters() if q.grad is not None}
    if not ref:
        return float("inf"), "(no gradients in the reference)"
    floor = 1e-6 * max(float(q.grad.double().norm()) for q in ref.values())
    mine = {n: p for n, p in model.named_parameters() if p.grad is not None}
    worst = (0.0, "every parameter")
    for n in sorted(set(mine) | set(ref)):
        p, q = mine.get(n), ref.get(n)
        dev = float("inf") if p is None or q is None else \
            float((p.grad.double() - q.grad.double()).norm()) / max(float(q.grad.double().norm()), floor)
        if dev > worst[0]:
            worst = (dev, n)
    return worst


@contextlib.contextmanager
def _running_kept(module):
    """BatchNorm's running statistics left as they are (momentum 0, the batch count restored)."""
    bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    saved = [(m.momentum, None if m.num_batches_tracked is None else m.num_batches_tracked.clone()) for m in bns]
    for m in bns:
        m.momentum = 0.0
    try:
        yield
    finally:
        for m, (mom, count) in zip(bns, saved):
            m.momentum = mom
            if count is not None:
                m.num_batches_tracked.copy_(count)


class Offloaded(torch.nn.Module):
    """An offload segment: the maps autograd saves in its layers (offload(all)), or those lrcnn's
    lowering moves (`moved`: for offload(conv), the maps a convolution's backward is the first to
    read, its input, as vDNN moves them; the layers the importer made convolutions included, a
    Linear over a map's channels), or the outputs of the layers an offload list names, are copied to
    host memory — pinned where there is a GPU — when the segment's forward ends, whichever nodes
    saved them, and brought back when backward reads them (saved_tensors_hooks); parameters and
    buffers stay. An offload list's release and fetch delays are not honoured: PyTorch fetches a map
    when backward reads it. `moved` counts the bytes sent to the host by the last forward."""

    def __init__(self, inner, seg, layer_of, params, low):
        super().__init__()
        self.inner, self.layer_of, self.params, self.moved = inner, layer_of, params, 0
        self.encoder = None  # the plan's encoding (Encoded, Gist), whose choice of maps holds in here too: moved encoded
        self.kind = seg["offload"]
        self.picked = {m["layer"] for m in seg.get("maps", [])} if self.kind == "pick" else \
            self._relus_over({m["layer"] for m in low["moved"] if m["what"] == "output"}, low["layers"]) if self.kind == "conv" else set()

    def _relus_over(self, maps, layers):
        """maps (layer names) with the relus over them that the module runs out of place: lrcnn
        runs a relu whose input has no other reader in place, in its input's buffer, named by the
        input's layer; a ReLU module without inplace=True (MobileNetV3's squeeze-and-excitation)
        writes a map of its own, which is the one kept."""
        readers = {}
        for l in layers:
            for x in l["in"]:
                readers[x] = readers.get(x, 0) + 1
        kind = {l["name"]: (l["kind"], l["in"][0] if l["in"] else None) for l in layers}
        out = set(maps)
        for node in self.inner.graph.nodes:
            k, x = kind.get(self.layer_of.get(node.name), (None, None))
            if k not in ("relu", "relu6", "leakyrelu") or x not in out or readers[x] != 1:
                continue
            if not _in_place(node, self.inner):
                out.add(self.layer_of[node.name])
        return out

    def selected(self, node):
        return self.kind == "all" and node.op in ("call_module", "call_function", "call_method")

    def pack(self, t):
        """Every tensor the segment saves is held by a _Held (under +dpr, the encoder's: the map in
        half precision where it encodes it); those of the maps a selected node saves go to host
        memory when the segment's forward ends (move), each map once and as it is held (encoded:
        less to move, as lrcnn moves it), so that a map another node saves too (a relu's output, a
        convolution's input) leaves the device."""
        held = self.encoder.pack(t) if self.encoder is not None else _Held(t)
        if t.data_ptr() not in self.params:
            key = rows.view_key(t)
            # t itself is kept to the move, encoded or not: so no later map takes its address, and
            # with it its key, while the segment runs
            self.held.append((key, held, t))
            if self.packing_selected:
                self.chosen.add(key)
        return held

    def move(self):
        """The chosen maps to pinned host memory. On a GPU the copies run on a side stream (one per
        device, after the work that wrote the maps), so the next segment's kernels do not wait for
        them: a map's device memory is not reused before its copy has read it (record_stream), and
        the copy back in backward waits for the copy out (_Held.ready)."""
        pairs = [(key, held) for key, held, _ in self.held]
        self.chosen |= {key for key, _ in pairs if key[0] in self.picked_maps}
        if isinstance(self.encoder, Gist):  # the maps gist takes are encoded now, and go encoded
            self.encoder.encode([(key, held) for key, held in pairs if key in self.chosen], moving=True)
        cuda = [held.t.device for key, held in pairs if key in self.chosen and held.t.is_cuda]
        side = side_stream(cuda[0]) if cuda else None
        if side is not None:
            side.wait_stream(torch.cuda.current_stream(cuda[0]))  # the maps are written before they are read

        def to_host(held):
            t = held.t
            host = torch.empty(t.size(), dtype=t.dtype, pin_memory=t.is_cuda)
            if not t.is_cuda:
                host.copy_(t)
            else:
                with torch.cuda.stream(side):
                    host.copy_(t, non_blocking=True)
                t.record_stream(side)
            return host, t.device, held.decode
        # keyed by the map saved, not by what holds it (an encoded copy)
        self.moved = _once(pairs, self.chosen, to_host)
        if side is not None:
            landed = torch.cuda.Event()
            landed.record(side)
            for key, held in pairs:
                if key in self.chosen:
                    held.ready = landed
        self.held, self.chosen, self.picked_maps = [], set(), {}

    def forward(self, *args):
        self.moved, self.held, self.chosen, self.picked_maps, self.packing_selected = 0, [], set(), {}, False
        with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
            out = _Moving(self).run(*args)
        self.move()
        return out


_side_streams = {}


def side_stream(device):
    """The stream offload copies run on, one per GPU."""
    if device not in _side_streams:
        _side_streams[device] = torch.cuda.Stream(device)
    return _side_streams[device]


class _Moving(torch.fx.Interpreter):
    """Runs an offload segment's graph node by node, telling its hooks which nodes are selected and
    which outputs an offload list names."""

    def __init__(self, seg):
        super().__init__(seg.inner)
        self.seg = seg

    def run_node(self, node):
        self.seg.packing_selected = self.seg.selected(node)
        try:
            out = super().run_node(node)
        finally:
            self.seg.packing_selected = False
        if torch.is_tensor(out) and self.seg.layer_of.get(node.name) in self.seg.picked:
            # the map, as whatever views of it the nodes save (a Linear over its channels saves a
            # 2-d view): by its storage, held to the move so that no later map takes its address
            self.seg.picked_maps[rows.storage(out).data_ptr()] = out
        return out


RANDOM = (torch.nn.modules.dropout._DropoutNd,) + ((torchvision_ops.StochasticDepth,) if torchvision_ops else ())
DRAWS = ("dropout", "stochastic_depth", "bernoulli", "rand")  # in the name of a function that draws

# what an in-place op on a segment's input becomes: x += y, x.relu_(), ... (a module's or a
# function's inplace=True is set False)
_OUT_OF_PLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
                 operator.itruediv: operator.truediv}


def _in_place(node, root):
    """Whether node (of a graph over root's submodules) writes into its first input: a module with
    inplace=True, a function or method called with it, x.relu_(), torch.relu_(x), x += y."""
    if node.op == "call_module":
        return bool(getattr(root.get_submodule(node.target), "inplace", False))
    return bool(node.op in ("call_function", "call_method") and node.kwargs.get("inplace")
                or node.op == "call_method" and str(node.target).endswith("_")
                or node.op == "call_function" and (node.target in _OUT_OF_PLACE or getattr(node.target, "__name__", "").endswith("_")))


def _one_tensor_cats_kept(graph, root):
    """graph, each cat of one tensor (DenseNet's first layer of a block: torch.cat([x], 1)) made
    rows.cat, which returns that tensor, where nothing writes into the cat in place: lrcnn's
    importer takes it for the same map, and PyTorch's copy would be a map lrcnn does not predict (a
    checkpoint starting after it kept the copy and the tensor both: DenseNet-121 ckpt-sqrt held
    0.55 MB more than predicted at 96x96). The node stays, and its name with it (rows.cat)."""
    for node in graph.nodes:
        if (node.op == "call_function" and node.target is torch.cat and node.args and isinstance(node.args[0], (list, tuple))
                and len(node.args[0]) == 1 and not any(_in_place(u, root) for u in node.users)):
            node.target = rows.cat


def _inputs_kept(gm):
    """gm (a segment's graph module), its ops that would overwrite one of its inputs run out of
    place instead: a checkpoint keeps its inputs for the recomputation, which an in-place op at the
    segment's start would have overwritten first (the recomputation then runs from its output:
    wrong gradients under 1.13, an error under 2.x). lrcnn never starts a segment at a layer that
    it runs in place (a relu), but a module may run in place what lrcnn runs out of place:
    torchvision's MobileNetV3 and EfficientNet their Hardswish and SiLU. Out of place, the op
    writes a new map as lrcnn predicts it does."""
    inputs = {n for n in gm.graph.nodes if n.op == "placeholder"}
    changed = False
    for node in gm.graph.nodes:
        if not node.args or not isinstance(node.args[0], torch.fx.Node) or node.args[0] not in inputs or not _in_place(node, gm):
            continue
        if node.op == "call_module":
            m = copy.copy(gm.get_submodule(node.target))  # shallow: the same parameters, if any
            m.inplace = False
            name = node.target.replace(".", "_") + "_out_of_place"
            gm.add_submodule(name, m)
            node.target = name
        elif node.op in ("call_function", "call_method") and node.kwargs.get("inplace"):
            node.kwargs = dict(node.kwargs, inplace=False)
        elif node.op == "call_method" and hasattr(torch.Tensor, node.target[:-1]):
            node.target = node.target[:-1]
        elif node.target in _OUT_OF_PLACE:
            node.target = _OUT_OF_PLACE[node.target]
        else:  # an in-place function of its own (torch.relu_): left as it is
            continue
        changed = True
    if changed:
        gm.recompile()
    return gm


class Checkpointed(torch.nn.Module):
    """A segment kept only by its input: torch.utils.checkpoint, non-reentrant. The first call of
    each forward is the forward itself; later calls are backward's recomputation."""

    def __init__(self, inner):
        super().__init__()
        self.inner = _inputs_kept(inner)
        # the generator's state is kept (5 KB on the CPU) only where a random layer needs the
        # forward's draws again: a dropout or stochastic depth module, or a function the importer
        # traced instead (torchvision's EfficientNet and ConvNeXt call stochastic_depth)
        self.random = any(isinstance(m, RANDOM) for m in inner.modules()) or any(
            n.op in ("call_function", "call_method") and any(k in getattr(n.target, "__name__", str(n.target)).lower() for k in DRAWS)
            for n in inner.graph.nodes)

    def forward(self, *args):
        rows.hold_plain(*args)
        calls = [0]

        def run(*a):
            calls[0] += 1
            if calls[0] == 1:
                return self.inner(*a)
            with _running_kept(self.inner):
                return self.inner(*a)
        return checkpoint(run, *args, use_reentrant=False, preserve_rng_state=self.random)


def apply_plan(model, image, batch, plan, optimizer="sgd", bn=None, lrcnn=None):
    """A module computing what model does, under plan (an lrcnn plan string: `ckpt-sqrt`,
    `ckpt-opt:60%`, `ckpt@a..b; layer@c..d`, ...) as lowered for batch and image (C, H, W).
    Its parameters are model's own (shared, not copied). The plan's segments are in .lowering."""
    params = list(model.parameters())
    device = params[0].device.type if params else "cpu"
    conv, low = lower(model, image, batch, plan, optimizer, bn, lrcnn, device)
    unsupported = [s for s in low["segments"] if s["mode"] not in ("layer", "ckpt", "rows", "offload")]
    other = [m for m in low["encodings"] if m not in DPR and not m.startswith("gist")]
    gists = [m for m in low["encodings"] if m.startswith("gist")]
    lossy = [m for m in low["encodings"] if m in DPR]
    if unsupported or other or len(gists) > 1 or len(lossy) > 1 or any(low["migrate"].values()):
        what = ("%s segment %s..%s" % (unsupported[0]["mode"], unsupported[0]["first"], unsupported[0]["last"]) if unsupported
                else "the encoding %s" % other[0] if other
                else "the encodings %s together" % " and ".join(low["encodings"]) if len(gists) > 1 or len(lossy) > 1 else "migration")
        raise PlanError("plan '%s': %s: not run in PyTorch yet (layer, ckpt, offload and row segments, "
                        "+dpr:fp16|bf16 and +gist are; lrcnn train runs the rest)"
                        % (plan, what))
    names = [l["name"] for l in low["layers"]]
    segment = {}
    for k, s in enumerate(low["segments"]):
        for name in names[names.index(s["first"]):names.index(s["last"]) + 1]:
            segment[name] = k
    graph = next(iter(conv.alias)).graph
    _one_tensor_cats_kept(graph, model)
    held = {t.data_ptr() for t in list(model.parameters()) + list(model.buffers())}  # the module's own: never moved or encoded
    gist = None
    if gists:
        gist = Gist(None, [], held, Encoded(None, lossy[0], held) if lossy else None)
        _mark_maps(graph, conv.alias, low, segment, gist.mark)
    part = {}
    for node in graph.nodes:  # a node is in its layer's segment; one without a layer (a size, a view) follows its inputs
        if node.op in ("placeholder", "output"):
            continue
        layer = conv.alias.get(node)
        ins = [part[a] for a in node.all_input_nodes if a in part]
        part[node] = segment[layer] if layer in segment else max(ins) if ins else 0
    _shapes_where_read(graph, part)
    for node, layer in conv.alias.items():  # carried into the segments' graphs by split_module
        node.meta["lrcnn_layer"] = layer
    gm = torch.fx.GraphModule(model, graph)
    split = split_module(gm, model, lambda node: part[node])
    for k, s in enumerate(low["segments"]):
        name = "submod_%d" % k
        if s["mode"] == "ckpt" and hasattr(split, name):
            setattr(split, name, Checkpointed(getattr(split, name)))
        elif s["mode"] == "offload":
            setattr(split, name, Offloaded(getattr(split, name), s, _layers_in(getattr(split, name)), held, low))
        elif s["mode"] == "rows":
            try:
                setattr(split, name, RowSegment(getattr(split, name), s, _layers_in(getattr(split, name)), low["bn"]))
            except Unsupported as e:
                raise PlanError("plan '%s': rows segment %s..%s: %s: not run in PyTorch yet (lrcnn train runs it)"
                                % (plan, s["first"], s["last"], e)) from None
    if gist is not None:
        gist.inner = split
        for m in low["encoded"]:  # the last layer of a row segment: the segment's output
            k = segment[m["layer"]]
            if m["encoding"] in ("sign", "sparse") and low["segments"][k]["mode"] == "rows" and low["segments"][k]["last"] == m["layer"]:
                gist.hooked.append((getattr(split, "submod_%d" % k), m["layer"], m["encoding"]))
        split = gist
    elif low["encodings"]:
        split = Encoded(split, low["encodings"][0], held)
    for m in split.modules():  # an offload segment's hooks stand in for the encoder's: they ask it
        if isinstance(m, Offloaded) and low["encodings"]:
            m.encoder = split
    split.lowering, split.predicted = low, predicted(low)
    # the module's parameters and buffers outside its forward (GoogLeNet's and Inception-v3's
    # auxiliary heads, which the net leaves out): held all the same, without gradients
    mine = {id(t) for t in list(split.parameters()) + list(split.buffers())}
    outside = sum(t.numel() * t.element_size() for t in list(model.parameters()) + list(model.buffers()) if id(t) not in mine)
    split.predicted["persistent"] += outside
    split.predicted["peak"] += outside
    split.lowered_as = dict(image=image, batch=batch, plan=plan, optimizer=optimizer, bn=bn, lrcnn=lrcnn, device=device)
    return split


def _shapes_where_read(graph, part):
    """A read of the module input's size (FCN's and DeepLabV3's x.shape[-2:], for their last
    upsampling), and what is computed from it alone, go to the segment of their first reader rather
    than the first segment: the input is every segment's to read, and a size handed on out of a row
    segment would be its bands' (ShuffleNet's size reads, of maps inside a segment, stay there)."""
    movable = {}
    for node in graph.nodes:
        ins = node.all_input_nodes
        if node.op == "call_function" and node.target is getattr and node.args[1:] == ("shape",) or (
                node.op == "call_method" and node.target == "size"):
            movable[node] = ins[0].op == "placeholder"
        elif node.op == "call_function" and node.target in (operator.getitem, operator.floordiv) and ins and all(i in movable for i in ins):
            movable[node] = all(movable[i] for i in ins)
    for node in reversed(list(graph.nodes)):
        if movable.get(node) and node.users and all(u in part for u in node.users):
            part[node] = min(part[u] for u in node.users)


def _layers_in(sub):
    """A segment's graph module: its nodes' names -> their layers. By the layer each node carries,
    not by the whole graph's names: split_module numbers each segment's nodes of a kind afresh
    (a later segment's first relu is `relu` again), and a node the importer drops (Inception-v3's
    auxiliary head) shifts the numbers after it (its Mixed_7b pool went unmoved by vdnn-conv)."""
    return {n.name: n.meta["lrcnn_layer"] for n in sub.graph.nodes if "lrcnn_layer" in n.meta}


def _mark_maps(graph, alias, low, segment, mark):
    """A call of mark(map, layer, encoding) after the node that makes each map gist takes (lrcnn
    lower's `encoded`, sign or sparse) outside row segments, so that Gist knows the map when the
    forward makes it; alias: the importer's node -> layer. mark is one object for fx's generated code."""
    last = {}  # each layer's last node: the one that makes its map
    for node in graph.nodes:
        if node in alias:
            last[alias[node]] = node
    kind = {l["name"]: l["kind"] for l in low["layers"]}
    for m in low["encoded"]:
        if m["encoding"] not in ("sign", "sparse") or low["segments"][segment[m["layer"]]]["mode"] == "rows":
            # gist's alone (dpr's are the lossy encoder's); a row segment's last layer's map is
            # the segment's output (Gist.hooked), and the bands' own are not listed
            continue
        # the map is the layer's buffer, which the relus that alone read it then overwrite in
        # lrcnn (in place): each of them is marked, the last one's output being the map's values
        node = last[m["layer"]]
        while True:
            users = list(node.users)
            with graph.inserting_after(node):
                marker = graph.call_function(mark, (node, m["layer"], m["encoding"]))
            node.replace_all_uses_with(marker, delete_user_cb=lambda user, marker=marker: user is not marker)
            if len(users) != 1 or kind.get(alias.get(users[0])) != "relu":
                break
            node = users[0]


def _with_density(plan, density):
    """plan with its +gist modifier's density set (sim/plan/enc.c: gist[:binarize|:sparse][:density=D])."""
    head, bn = plan.split(" bn=", 1) if " bn=" in plan else (plan, None)
    mods = [m if not m.startswith("gist") else
            ":".join([a for a in m.split(":") if not a.startswith("density=")] + ["density=%r" % density]) for m in head.split("+")]
    return "+".join(mods) + ("" if bn is None else " bn=" + bn)


def measured_prediction(model, wrapped):
    """wrapped.predicted again with the densities gist's sparse maps had in its last forward
    (wrapped.densities): a sparse map's bytes depend on its values, and lrcnn predicts them from a
    density (0.5, or the plan's density=D). Each map's bytes are lrcnn's prediction at its own
    density (`lrcnn lower` once per density), added to `kept` or, for a map an offload segment
    moved, to `host` and `moved` (their total is exact; a moved map lrcnn fetches back before the
    backward begins is in `kept` there, in `host` here); the peak, which the maps may or may not all
    reach, is left out. Without sparse maps: wrapped.predicted as it is."""
    dens = getattr(wrapped, "densities", {})
    if not dens:
        return dict(wrapped.predicted)
    pred = dict(wrapped.predicted, peak=None, reserved=None)
    a = wrapped.lowered_as
    at = {}  # density -> {layer: bytes}
    for d in sorted(set(dens.values())):
        _, low = lower(model, a["image"], a["batch"], _with_density(a["plan"], d), a["optimizer"], a["bn"], a["lrcnn"], a["device"])
        at[d] = {m["layer"]: m["bytes"] for m in low["encoded"]}
    for m in wrapped.lowering["encoded"]:
        if m["layer"] not in dens:
            continue
        delta = at[dens[m["layer"]]][m["layer"]] - m["bytes"]
        if m["layer"] in wrapped.away:
            pred["host"] += delta
            pred["moved"] += delta
        else:
            pred["kept"] += delta
    return pred


def predicted(low):
    """What lrcnn predicts the wrapped module holds on `lrcnn lower`'s device (bytes): `kept`, what
    the forward leaves allocated for backward on the device (the maps autograd saves, those a
    checkpoint or a band holds for its recomputation, 2PS boundaries, encoded copies, the batch and
    its labels); `host`, the maps an offload segment moved to host memory that are still there when
    the backward begins (lrcnn fetches a map one backward step ahead of its use, so one the first
    backward step reads is back already: `kept` + `host` is what the forward leaves in all);
    `moved`, every map the forward sends to host memory; `persistent`, parameters, gradients,
    optimizer state and BatchNorm's buffers; `peak`, the iteration's allocated peak; `reserved`,
    what PyTorch's CUDA caching allocator would reserve for it."""
    at, most = low["prediction"]["at_backward"], low["prediction"]["max"]
    persistent = at["weights"] + at["weight_grads"] + at["optimizer"]
    return {"kept": sum(at.values()) - persistent - at["host"], "host": at["host"], "moved": most["host"],
            "persistent": persistent, "peak": low["prediction"]["peak"], "reserved": low["prediction"].get("reserved")}
