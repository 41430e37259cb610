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

`+gist:binarize` keeps the maps lrcnn binarizes as bitmaps (Binarized).

Not yet: BatchNorm in train mode inside bands (its whole-map statistics; bn=frozen runs), gist's
sparse encoding, gist beside another encoding, gist with an offload segment, the max pools' argmax in fewer bits (PyTorch's
int64 indices stay), ZFP, migration, and a side stream for the moves; a plan with them is refused
with a PlanError naming what. lrcnn's own engine runs them (`lrcnn train`).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import weakref

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
from lrcnn_torch.rows import RowSegment, Unsupported  # noqa: E402

__all__ = ["apply_plan", "lower", "load_model", "PlanError"]


class PlanError(Exception):
    """A plan lrcnn refuses for this module, or one this package cannot run yet."""


def load_model(spec):
    """A module as `lrcnn import` takes it: torchvision:NAME (untrained), or PATH.py:FACTORY."""
    try:
        return torch2net.load_model(spec)
    except torch2net.Refused as e:
        raise PlanError(str(e)) from None


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


def lower(model, image, batch, plan, optimizer="sgd", bn=None, lrcnn=None, device="cpu"):
    """(converter, lowering): the module as the importer sees it (converter.alias maps each traced
    node to its net layer) and `lrcnn lower`'s JSON for plan at this batch and image (C, H, W),
    under this PyTorch's rules (torch_rules), with the prediction for device ("cpu" or "cuda")."""
    asked, plan = plan, torch_rules(plan)
    try:
        conv = torch2net.Converter(model, tuple(image[1:]), image[0], False, pixel=None)
        lines = conv.run()
    except torch2net.Refused as e:
        raise PlanError("the module is not one lrcnn can import: %s" % e) from None
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
    """An offload segment: the maps autograd saves in its selected layers (every layer for
    offload(all); the convolutions for offload(conv), whose inputs are what vDNN moves), or the
    outputs of the layers an offload list names, are copied to host memory — pinned where there is
    a GPU — when the segment's forward ends, whichever nodes saved them, and brought back when
    backward reads them (saved_tensors_hooks); parameters and buffers stay. An offload list's
    release and fetch delays are not honoured: PyTorch fetches a map when backward reads it.
    `moved` counts the bytes sent to the host by the last forward."""

    def __init__(self, inner, seg, layer_of, params):
        super().__init__()
        self.inner, self.layer_of, self.params, self.moved = inner, layer_of, params, 0
        self.encoder = None  # the plan's +dpr (Encoded), whose choice of maps holds in here too: moved encoded
        self.kind = seg["offload"]
        self.picked = {m["layer"] for m in seg.get("maps", [])}
        self.modules_of = dict(inner.named_modules())

    def selected(self, node):
        if node.op not in ("call_module", "call_function", "call_method"):
            return False
        if self.kind == "all":
            return True
        if self.kind == "conv":
            return node.op == "call_module" and isinstance(self.modules_of.get(node.target), torch.nn.Conv2d)
        return False  # an offload list names outputs (run_node)

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
        def to_host(held):
            t = held.t
            host = torch.empty(t.size(), dtype=t.dtype, pin_memory=torch.cuda.is_available())
            host.copy_(t, non_blocking=t.is_cuda)
            return host, t.device, held.decode
        # keyed by the map saved, not by what holds it (an encoded copy)
        self.moved = _once([(key, held) for key, held, _ in self.held], self.chosen, to_host)
        self.held, self.chosen = [], set()

    def forward(self, *args):
        self.moved, self.held, self.chosen, self.packing_selected = 0, [], set(), False
        with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
            out = _Moving(self).run(*args)
        self.move()
        return out


def _once(helds, keys, convert):
    """Replaces every held tensor of (view key, _Held) pairs whose key is in keys by convert(held) ->
    (stored tensor, device, decode), converting each map once however many holders share it; the
    bytes stored."""
    done, stored = {}, 0
    for key, held in helds:
        if key not in keys:
            continue
        if key not in done:
            done[key] = convert(held)
            stored += done[key][0].numel() * done[key][0].element_size()
        held.t, held.device, held.decode = done[key]
    return stored


class _Held:
    """A saved tensor: on the device, or moved to host memory (`device`: where it is brought back
    to when read), or encoded (`dtype`: what it is widened to when read; `decode`: what rebuilds
    it)."""
    __slots__ = ("t", "device", "dtype", "decode")

    def __init__(self, t):
        self.t, self.device, self.dtype, self.decode = t, None, None, None

    def get(self):
        t = self.t if self.device is None else self.t.to(self.device, non_blocking=True)
        t = t if self.decode is None else self.decode(t)
        return t if self.dtype is None else t.to(self.dtype)


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
            self.seg.chosen.add(rows.view_key(out))
        return out


RANDOM = (torch.nn.modules.dropout._DropoutNd,) + ((torchvision_ops.StochasticDepth,) if torchvision_ops else ())

DPR = {"dpr:fp16": torch.float16, "dpr:bf16": torch.bfloat16}
if hasattr(torch, "float8_e4m3fn"):  # PyTorch 2.1 and later
    DPR["dpr:fp8"] = torch.float8_e4m3fn


class Encoded(torch.nn.Module):
    """Delayed precision reduction (+dpr): every fp32 tensor autograd saves (parameters aside) kept
    in half, bfloat16 or (PyTorch 2.1+) FP8 E4M3 and widened back when backward reads it (saved-
    tensor hooks); the forward computes in fp32. Unlike lrcnn's engine, a relu output's sign is not
    kept apart (a positive value that rounds to zero in fp16 turns its gradient off), the maps a
    checkpoint keeps are not encoded (an offload segment's are, then moved), and FP8 does not saturate.
    `kept` counts the encoded bytes of the last forward."""

    def __init__(self, inner, mod, params):
        super().__init__()
        self.inner, self.dtype, self.params, self.kept = inner, DPR[mod], params, 0

    def pack(self, t):
        key = rows.view_key(t)
        if not t.requires_grad or t.dtype != torch.float32 or t.data_ptr() in self.params or key in self.inputs:
            # only the maps the graph computes: not constants it made (BatchNorm's statistics, a
            # dropout's mask), nor parameters, nor the batch, which the caller holds anyway
            return _Held(t)
        # a map saved by several nodes is encoded once; the entry names the tensor weakly, since a
        # later map may take a freed one's address
        ref, held = self.encoded.get(key, (None, None))
        if ref is None or ref() is not t:
            held = _Held(t.to(self.dtype))
            held.dtype = t.dtype
            self.encoded[key] = weakref.ref(t), held
        return held

    def forward(self, *args):
        self.encoded, self.inputs = {}, {rows.view_key(a) for a in args if torch.is_tensor(a)}
        with rows.plain_maps() as plain:
            with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
                out = self.inner(*args)
        self.kept = 0
        for key, (ref, held) in self.encoded.items():
            if key in plain and ref() is not None:  # a checkpoint holds it as it is: the encoding would add to it
                held.t, held.dtype = ref(), None
            elif held.device is None:  # not moved to host memory by an offload segment (Offloaded counts those)
                self.kept += held.t.numel() * held.t.element_size()
        self.encoded = {}
        return out


class Binarized(torch.nn.Module):
    """Gist's binarize (+gist:binarize): the maps lrcnn keeps as their sign alone — a ReLU's output
    that the backward reads only for its sign (the ReLU's) or its shape (a max pool's) — kept as a
    bitmap, a bit a value, each image's bits padded to a byte (lrcnn's format), and rebuilt as
    ones and zeros when backward reads them: the ReLU's gradient is unchanged, exactly. The maps
    are the outputs of `modules` (lrcnn lower's `encoded` list), seen by forward hooks; a map is
    turned to bits when the forward ends (a module may save its own output before its hook runs),
    once however many nodes save it, unless a checkpoint holds it as it is. `kept` counts the bits'
    bytes of the last forward."""

    def __init__(self, inner, modules, params):
        super().__init__()
        self.inner, self.hooked, self.params, self.kept = inner, modules, params, 0

    def pack(self, t):
        held = _Held(t)
        if t.data_ptr() not in self.params:
            self.held.append(held)
        return held

    def forward(self, *args):
        self.held, signs = [], set()
        hooks = [m.register_forward_hook(lambda m, i, out: signs.add(rows.view_key(out))) for m in self.hooked]
        try:
            with rows.plain_maps() as plain:
                with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
                    out = self.inner(*args)
        finally:
            for h in hooks:
                h.remove()
        self.kept = _once([(rows.view_key(h.t), h) for h in self.held], signs - plain, _to_bits)
        self.held = []
        return out


def _to_bits(held):
    packed, decode = _sign_bits(held.t)
    return packed, None, decode


_BIT = torch.tensor([1 << j for j in range(8)], dtype=torch.uint8)


def _sign_bits(t):
    """t's signs, a bit a value (set: positive), each image's bits in bytes of their own (N, ceil(n / 8)),
    and the function that rebuilds t's shape from them: 1 where positive, 0 elsewhere."""
    shape, dtype, n = tuple(t.shape), t.dtype, t[0].numel()
    m = torch.nn.functional.pad((t.detach().reshape(shape[0], -1) > 0).to(torch.uint8), (0, (-n) % 8))
    packed = (m.view(shape[0], -1, 8) * _BIT.to(t.device)).sum(-1, dtype=torch.uint8)

    def decode(b):
        ones = (b.unsqueeze(-1) >> torch.arange(8, dtype=torch.uint8, device=b.device)) & 1
        return ones.view(shape[0], -1)[:, :n].to(dtype).view(shape)
    return packed, decode


class Checkpointed(torch.nn.Module):
    """A segment kept only by its input: torch.utils.checkpoint, non-reentrant. The first call of
    each forward is the forward itself; later calls are backward's recomputation."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        # the generator's state is kept (5 KB on the CPU) only where a random layer needs the
        # forward's draws again
        self.random = any(isinstance(m, RANDOM) for m in inner.modules()) or any(
            n.op == "call_function" and "dropout" in getattr(n.target, "__name__", "") for n in inner.graph.nodes)

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
    other = [m for m in low["encodings"] if m not in DPR and m != "gist:binarize"]
    moving = "gist:binarize" in low["encodings"] and any(s["mode"] == "offload" for s in low["segments"])
    if unsupported or other or len(low["encodings"]) > 1 or any(low["migrate"].values()) or moving:
        what = ("%s segment %s..%s" % (unsupported[0]["mode"], unsupported[0]["first"], unsupported[0]["last"]) if unsupported
                else "the encoding %s" % other[0] if other
                else "the encodings %s together" % " and ".join(low["encodings"]) if len(low["encodings"]) > 1
                else "gist:binarize with an offload segment" if moving else "migration")
        raise PlanError("plan '%s': %s: not run in PyTorch yet (layer, ckpt, offload and row segments, "
                        "+dpr:fp16|bf16 and +gist:binarize alone are; lrcnn train runs the rest)"
                        % (plan, what))
    names = [l["name"] for l in low["layers"]]
    segment = {}
    for k, s in enumerate(low["segments"]):
        for name in names[names.index(s["first"]):names.index(s["last"]) + 1]:
            segment[name] = k
    graph = next(iter(conv.alias)).graph
    part = {}
    for node in graph.nodes:  # a node is in its layer's segment; one without a layer (a size, a view) follows its inputs
        if node.op in ("placeholder", "output"):
            continue
        layer = conv.alias.get(node)
        ins = [part[a] for a in node.all_input_nodes if a in part]
        part[node] = segment[layer] if layer in segment else max(ins) if ins else 0
    gm = torch.fx.GraphModule(model, graph)
    split = split_module(gm, model, lambda node: part[node])
    held = {t.data_ptr() for t in list(model.parameters()) + list(model.buffers())}  # the module's own: never moved or encoded
    layer_of = {node.name: layer for node, layer in conv.alias.items()}
    for k, s in enumerate(low["segments"]):
        name = "submod_%d" % k
        if s["mode"] == "ckpt" and hasattr(split, name):
            setattr(split, name, Checkpointed(getattr(split, name)))
        elif s["mode"] == "offload":
            setattr(split, name, Offloaded(getattr(split, name), s, layer_of, held))
        elif s["mode"] == "rows":
            try:
                setattr(split, name, RowSegment(getattr(split, name), s, layer_of, low["bn"]))
            except Unsupported as e:
                raise PlanError("plan '%s': rows segment %s..%s: %s: not run in PyTorch yet (lrcnn train runs it)"
                                % (plan, s["first"], s["last"], e)) from None
    if low["encodings"] == ["gist:binarize"]:
        modules = dict(model.named_modules())
        hooked = []
        for m in low["encoded"]:
            k = segment[m["layer"]]
            if low["segments"][k]["mode"] == "rows" and low["segments"][k]["last"] == m["layer"]:
                hooked.append(getattr(split, "submod_%d" % k))  # the whole map is the bands' output, joined
                continue
            nodes = [node for node, layer in conv.alias.items() if layer == m["layer"]]
            if m["encoding"] != "sign" or not nodes or nodes[0].op != "call_module":
                raise PlanError("plan '%s': +gist:binarize: layer %s (%s) is not a module's output: not run in PyTorch yet"
                                % (plan, m["layer"], m["encoding"]))
            hooked.append(modules[nodes[0].target])
        split = Binarized(split, hooked, held)
    elif low["encodings"]:
        split = Encoded(split, low["encodings"][0], held)
        for m in split.modules():  # an offload segment's hooks stand in for the encoder's: they ask it
            if isinstance(m, Offloaded):
                m.encoder = split
    split.lowering, split.predicted = low, predicted(low)
    return split


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
