"""lrcnn_torch.encode: the maps autograd saves, held as lrcnn's plan says (saved-tensor hooks):
in half precision (+dpr, Encoded) or as Gist stores them (+gist: sign bitmaps and sparse storage,
lrcnn's formats), each map encoded once however many nodes save it; _Held is what a hook keeps."""
import weakref

import torch

from lrcnn_torch import rows


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
    to when read; `ready`: on a GPU, the event of the side stream's copy there, which the copy
    back waits for), or encoded (`dtype`: what it is widened to when read; `decode`: what rebuilds
    it)."""
    __slots__ = ("t", "device", "dtype", "decode", "ready")

    def __init__(self, t):
        self.t, self.device, self.dtype, self.decode, self.ready = t, None, None, None, None

    def get(self):
        if self.ready is not None:  # the side stream's copy to the host has landed before this one reads it
            torch.cuda.current_stream(self.device).wait_event(self.ready)
        t = self.t if self.device is None else self.t.to(self.device, non_blocking=True)
        t = t if self.decode is None else self.decode(t)
        return t if self.dtype is None else t.to(self.dtype)


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
        self.encoded, self.inputs, self.claimed = {}, set(), {}

    def pack(self, t):
        key = rows.view_key(t)
        claimed = self.claimed.get(key)
        if not t.requires_grad or t.dtype != torch.float32 or t.data_ptr() in self.params or key in self.inputs or (
                claimed is not None and claimed() is t) or rows.held_plain(key):
            # only the maps the graph computes: not constants it made (BatchNorm's statistics, a
            # dropout's mask), nor parameters, nor the batch, which the caller holds anyway; nor
            # those gist takes; nor a checkpoint's inputs, which PyTorch 2.x's checkpoint saves
            # through these hooks (1.13's holds them itself): finish() could not give them back,
            # since the tensor the hook sees then dies with the call
            return _Held(t)
        # a map saved by several nodes is encoded once; the entry names the tensor weakly, since a
        # later map may take a freed one's address
        ref, held = self.encoded.get(key, (None, None))
        if ref is None or ref() is not t:
            held = _Held(t.to(self.dtype))
            held.dtype = t.dtype
            self.encoded[key] = weakref.ref(t), held
        return held

    def claim(self, t):
        """Gist takes t (gist beside dpr): kept as it is here, and again where the node that made it
        saved it already."""
        key = rows.view_key(t)
        self.claimed[key] = weakref.ref(t)  # weakly: a later map may take a freed one's address, and key
        ref, held = self.encoded.get(key, (None, None))
        if held is not None and ref() is t:
            del self.encoded[key]
            held.t, held.dtype = t, None

    def begin(self, args):
        self.encoded, self.inputs, self.claimed = {}, {rows.view_key(a) for a in args if torch.is_tensor(a)}, {}

    def finish(self, plain):
        self.kept = 0
        for key, (ref, held) in self.encoded.items():
            if key in plain and ref() is not None:  # a checkpoint holds it as it is: the encoding would add to it
                held.t, held.dtype = ref(), None
            elif held.device is None:  # not moved to host memory by an offload segment (Offloaded counts those)
                self.kept += held.t.numel() * held.t.element_size()
        self.encoded = {}

    def forward(self, *args):
        self.begin(args)
        with rows.plain_maps() as plain:
            with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
                out = self.inner(*args)
        self.finish(plain)
        return out


class Gist(torch.nn.Module):
    """Gist's lossless encodings (+gist, +gist:binarize, +gist:sparse), the maps lrcnn lower lists
    (`encoded`) stored as lrcnn's engine stores them and rebuilt when backward reads them:
    - sign: a ReLU's output that backward reads only for its sign (the ReLU's) or its shape (a max
      pool's), a bit a value, each image's bits padded to a byte; rebuilt as ones and zeros, which
      leaves the ReLU's gradient exactly as it was;
    - sparse: a ReLU's output a convolution reads back, as a bitmap of its values whose bits are
      not all zero (so -0.0 survives) and those values in fp32, with each image's bytes in an int64
      header: lrcnn's format and bytes (engine/cpu/codec_cpu.c), laid out by part rather than by
      image; rebuilt exactly.
    A map is known by a marker placed after the graph node that makes it (mark), or, for the last
    layer of a row segment, by the segment's output (the bands' output, joined); it is encoded when
    the forward ends (the forward still reads it), once however many nodes save it, unless a
    checkpoint holds it as it is; an offload segment encodes the maps it moves when its own forward
    ends, and moves them encoded (as lrcnn does). `kept` counts the encoded bytes the last forward
    left on the device; `densities` the fraction of values each sparse map stored, by layer."""

    def __init__(self, inner, hooked, params, lossy=None):
        super().__init__()
        self.inner, self.hooked, self.params, self.kept, self.densities = inner, hooked, params, 0, {}
        self.lossy = lossy  # gist beside dpr: an Encoded (its inner unused) for the maps gist leaves
        self.held, self.marks, self.done, self.away = [], {}, set(), set()

    def mark(self, t, layer, kind):
        """The map of `layer` (to be kept as `kind`) is t; t itself goes on."""
        if torch.is_tensor(t):
            # the map weakly: one nothing saves dies, and a later map may take its address, and key
            self.marks[rows.view_key(t)] = weakref.ref(t), layer, kind
            if self.lossy is not None:
                self.lossy.claim(t)
        return t

    def pack(self, t):
        held = _Held(t) if self.lossy is None else self.lossy.pack(t)
        if t.data_ptr() not in self.params:
            self.held.append((rows.view_key(t), held))
        return held

    def encode(self, helds, leave=(), moving=False):
        """Encodes the marked maps among (key, _Held) pairs not yet encoded (nor in leave); moving:
        an offload segment's, which it then moves (their layers in `away`)."""
        # only the holders of the marked map itself: under dpr an earlier map's encoded copy may be
        # held under the same key (its original freed, its address taken again)
        helds = [(k, h) for k, h in helds if k in self.marks and h.t is self.marks[k][0]()]
        for kind, convert in (("sign", _to_bits), ("sparse", self._to_sparse)):
            keys = {k for k, (ref, _, c) in self.marks.items() if c == kind and ref() is not None} - self.done - set(leave)
            _once(helds, keys, convert)
            self.done |= {k for k, _ in helds if k in keys}
        if moving:
            self.away |= {self.marks[k][1] for k, _ in helds}

    def _to_sparse(self, held):
        packed, decode, nnz = _sparse(held.t)
        self.densities[self.marks[rows.view_key(held.t)][1]] = nnz / held.t.numel()
        return packed, None, decode

    def forward(self, *args):
        self.held, self.marks, self.done, self.densities, self.away = [], {}, set(), {}, set()
        hooks = [m.register_forward_hook(lambda m, i, out, name=name, kind=kind: self.mark(out, name, kind))
                 for m, name, kind in self.hooked]
        if self.lossy is not None:
            self.lossy.begin(args)
        try:
            with rows.plain_maps() as plain:
                with torch.autograd.graph.saved_tensors_hooks(self.pack, _Held.get):
                    out = self.inner(*args)
        finally:
            for h in hooks:
                h.remove()
        self.encode(self.held, plain)
        if self.lossy is not None:
            self.lossy.finish(plain)
        # kept counts each map once: the holders of one map share its encoded tensor
        self.kept = sum({held.t.data_ptr(): held.t.numel() * held.t.element_size()
                         for k, held in self.held if k in self.done and held.device is None}.values())
        self.kept += self.lossy.kept if self.lossy is not None else 0
        self.held = []
        return out


def _to_bits(held):
    packed, decode = _sign_bits(held.t)
    return packed, None, decode


_BIT = torch.tensor([1 << j for j in range(8)], dtype=torch.uint8)


def _bitmap(m):
    """A boolean (N, n) as each image's bits, least significant first, padded to a byte: (N, ceil(n / 8))."""
    m = torch.nn.functional.pad(m.to(torch.uint8), (0, (-m.shape[1]) % 8))
    return (m.view(m.shape[0], -1, 8) * _BIT.to(m.device)).sum(-1, dtype=torch.uint8)


def _unbitmap(b, n):
    ones = (b.unsqueeze(-1) >> torch.arange(8, dtype=torch.uint8, device=b.device)) & 1
    return ones.view(b.shape[0], -1)[:, :n]


def _sign_bits(t):
    """t's signs, a bit a value (set: positive), each image's bits in bytes of their own (N, ceil(n / 8)),
    and the function that rebuilds t's shape from them: 1 where positive, 0 elsewhere."""
    shape, dtype, n = tuple(t.shape), t.dtype, t[0].numel()
    packed = _bitmap(t.detach().reshape(shape[0], -1) > 0)

    def decode(b):
        return _unbitmap(b, n).to(dtype).view(shape)
    return packed, decode


def _sparse(t):
    """t (fp32) in lrcnn's sparse format, as one byte tensor: each image's bytes (int64), each image's
    bitmap of the values whose bits are not all zero, then those values; the function that rebuilds
    t from it; and how many values it stored."""
    shape, dtype, N, n = tuple(t.shape), t.dtype, t.shape[0], t[0].numel()  # decode must not hold t
    flat = t.detach().reshape(N, n).contiguous()
    nonzero = flat.view(torch.int32) != 0  # by bits: -0.0 is kept as it is
    counts = nonzero.sum(1)
    bitmap, values = _bitmap(nonzero), flat[nonzero]
    header = (bitmap.shape[1] + 4 * counts).to(torch.int64)
    packed = torch.cat([header.view(torch.uint8), bitmap.reshape(-1), values.view(torch.uint8)])
    head, bits = 8 * N, N * bitmap.shape[1]

    def decode(b):
        mask = _unbitmap(b[head:head + bits].view(N, -1), n).bool()
        out = torch.zeros(N, n, dtype=dtype, device=b.device)
        out[mask] = b[head + bits:].clone().view(dtype)
        return out.view(shape)
    return packed, decode, int(counts.sum())
