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
saved maps in half precision (Encoded). `layer` segments run as they are. Gradients equal the plain
module's (bit for bit under checkpointing; to fp32 rounding in bands).

Not yet: BatchNorm in train mode inside bands (its whole-map statistics; bn=frozen runs), gist's
and ZFP's encodings, migration, and a side stream for the moves; a plan with them is refused with
a PlanError naming the segment. lrcnn's own engine runs them (`lrcnn train`).
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile

import torch
from torch.fx.passes.split_module import split_module
from torch.utils.checkpoint import checkpoint

# the repository: this file's, or $LRCNN_ROOT when the package is installed elsewhere (pip install ./python)
ROOT = os.environ.get("LRCNN_ROOT") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import torch2net  # noqa: E402  (the importer: the same trace and layer names as `lrcnn import`)

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


def lower(model, image, batch, plan, optimizer="sgd", bn=None, lrcnn=None):
    """(converter, lowering): the module as the importer sees it (converter.alias maps each traced
    node to its net layer) and `lrcnn lower`'s JSON for plan at this batch and image (C, H, W)."""
    try:
        conv = torch2net.Converter(model, tuple(image[1:]), image[0], False)
        lines = conv.run()
    except torch2net.Refused as e:
        raise PlanError("the module is not one lrcnn can import: %s" % e) from None
    with tempfile.TemporaryDirectory(prefix="lrcnn_torch.") as d:
        path = os.path.join(d, "module.net")
        with open(path, "w") as f:
            f.write(torch2net.render(lines, "module", ["made by lrcnn_torch"]))
        cmd = [lrcnn or binary(), "lower", "--net", path, "--plan", plan, "--batch", str(batch), "--optimizer", optimizer,
               "--image", "%dx%d" % tuple(image[1:])] + (["--bn", bn] if bn else [])
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise PlanError(r.stderr.strip().replace("lrcnn lower: ", ""))
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
    """An offload segment: the tensors autograd saves in its selected layers (every layer for
    offload(all); the convolutions for offload(conv), whose inputs are what vDNN moves; the layers
    an offload list names) are copied to host memory when saved — pinned where there is a GPU — and
    brought back when backward reads them (saved_tensors_hooks); parameters stay. An offload list's
    release and fetch delays are not honoured: PyTorch moves a map when it is saved and fetches it
    when it is used. `moved` counts the bytes sent to the host by the last forward."""

    def __init__(self, inner, seg, layer_of, params):
        super().__init__()
        self.inner, self.layer_of, self.params, self.moved = inner, layer_of, params, 0
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
        return self.layer_of.get(node.name) in self.picked

    def pack(self, t):
        if t.data_ptr() in self.params:
            return t, None
        host = torch.empty(t.size(), dtype=t.dtype, pin_memory=torch.cuda.is_available())
        host.copy_(t, non_blocking=t.is_cuda)
        self.moved += t.numel() * t.element_size()
        return host, t.device

    @staticmethod
    def unpack(p):
        t, device = p
        return t if device is None else t.to(device, non_blocking=True)

    def forward(self, *args):
        self.moved = 0
        return _Moving(self).run(*args)


class _Moving(torch.fx.Interpreter):
    """Runs an offload segment's graph node by node, the selected nodes under its hooks."""

    def __init__(self, seg):
        super().__init__(seg.inner)
        self.seg = seg

    def run_node(self, node):
        if not self.seg.selected(node):
            return super().run_node(node)
        with torch.autograd.graph.saved_tensors_hooks(self.seg.pack, self.seg.unpack):
            return super().run_node(node)


DPR = {"dpr:fp16": torch.float16, "dpr:bf16": torch.bfloat16}
if hasattr(torch, "float8_e4m3fn"):  # PyTorch 2.1 and later
    DPR["dpr:fp8"] = torch.float8_e4m3fn


class Encoded(torch.nn.Module):
    """Delayed precision reduction (+dpr): every fp32 tensor autograd saves (parameters aside) kept
    in half, bfloat16 or (PyTorch 2.1+) FP8 E4M3 and widened back when backward reads it (saved-
    tensor hooks); the forward computes in fp32. Unlike lrcnn's engine, a relu output's sign is not
    kept apart (a positive value that rounds to zero in fp16 turns its gradient off), the maps an
    offload segment moves or a checkpoint keeps are not encoded, and FP8 does not saturate.
    `kept` counts the encoded bytes of the last forward."""

    def __init__(self, inner, mod, params):
        super().__init__()
        self.inner, self.dtype, self.params, self.kept = inner, DPR[mod], params, 0

    def pack(self, t):
        if t.data_ptr() in self.params or t.dtype != torch.float32:
            return t, None
        e = t.to(self.dtype)
        self.kept += e.numel() * e.element_size()
        return e, t.dtype

    @staticmethod
    def unpack(p):
        e, dtype = p
        return e if dtype is None else e.to(dtype)

    def forward(self, *args):
        self.kept = 0
        with torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack):
            return self.inner(*args)


class Checkpointed(torch.nn.Module):
    """A segment kept only by its input: torch.utils.checkpoint, non-reentrant. The first call of
    each forward is the forward itself; later calls are backward's recomputation."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        calls = [0]

        def run(*a):
            calls[0] += 1
            if calls[0] == 1:
                return self.inner(*a)
            with _running_kept(self.inner):
                return self.inner(*a)
        return checkpoint(run, *args, use_reentrant=False, preserve_rng_state=True)


def apply_plan(model, image, batch, plan, optimizer="sgd", bn=None, lrcnn=None):
    """A module computing what model does, under plan (an lrcnn plan string: `ckpt-sqrt`,
    `ckpt-opt:60%`, `ckpt@a..b; layer@c..d`, ...) as lowered for batch and image (C, H, W).
    Its parameters are model's own (shared, not copied). The plan's segments are in .lowering."""
    conv, low = lower(model, image, batch, plan, optimizer, bn, lrcnn)
    unsupported = [s for s in low["segments"] if s["mode"] not in ("layer", "ckpt", "rows", "offload")]
    other = [m for m in low["encodings"] if m not in DPR]
    if unsupported or other or len(low["encodings"]) > 1 or any(low["migrate"].values()):
        what = ("%s segment %s..%s" % (unsupported[0]["mode"], unsupported[0]["first"], unsupported[0]["last"]) if unsupported
                else "the encoding %s" % (other or low["encodings"])[0] if low["encodings"] else "migration")
        raise PlanError("plan '%s': %s: not run in PyTorch yet (layer, ckpt, offload and row segments and "
                        "+dpr:fp16|bf16 are; lrcnn train runs the rest)"
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
    layer_of = {node.name: layer for node, layer in conv.alias.items()}
    for k, s in enumerate(low["segments"]):
        name = "submod_%d" % k
        if s["mode"] == "ckpt" and hasattr(split, name):
            setattr(split, name, Checkpointed(getattr(split, name)))
        elif s["mode"] == "offload":
            setattr(split, name, Offloaded(getattr(split, name), s, layer_of, {p.data_ptr() for p in model.parameters()}))
        elif s["mode"] == "rows":
            try:
                setattr(split, name, RowSegment(getattr(split, name), s, layer_of, low["bn"]))
            except Unsupported as e:
                raise PlanError("plan '%s': rows segment %s..%s: %s: not run in PyTorch yet (lrcnn train runs it)"
                                % (plan, s["first"], s["last"], e)) from None
    if low["encodings"]:
        split = Encoded(split, low["encodings"][0], {p.data_ptr() for p in model.parameters()})
    split.lowering = low
    return split
