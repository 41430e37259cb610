#!/usr/bin/env python3
"""PyTorch on the GPU, the peer of lrcnn's CUDA engine: for each net file and batch, plain and with
torch.utils.checkpoint, the allocated and reserved peaks of one steady-state training iteration and
the median time of an iteration.

    python3 bench/torch_gpu.py nets/vgg16.net nets/resnet50.net [--batch 8,32] [--image 224]
                               [--iters 10] [--device cuda] [--benchmark] [--tsv OUT.tsv]

The net is built from its file by tests/torch_net.py's independent interpreter, as torchvision
writes its models (tools/torch_peak.py's TorchNet: in-place ReLUs where nothing else reads their
input). fp32 throughout: TF32 off for cuBLAS and cuDNN, cudnn.benchmark off (PyTorch's default
heuristic algorithm choice, as lrcnn's engine uses cuDNN's heuristics by default; --benchmark
turns it on: algorithms measured once a shape in the warm-up, the peer of LRCNN_CUDNN_FIND=1), SGD
with momentum 0.9, zero_grad(set_to_none=True) (PyTorch 2.x's default, lrcnn's torch2 plan).
cuDNN's workspace: PyTorch sets no cap of its own (an algorithm whose workspace cannot be allocated
is passed over); CUDNN_CONV_WSCAP_DBG=MiB in the environment caps it, the peer of
LRCNN_CUDNN_WS_MB (the header says which held).

What is measured, exactly:
  allocated  torch.cuda.max_memory_allocated() over one iteration — zero_grad, forward, loss,
             backward, optimizer step, synchronize — after torch.cuda.reset_peak_memory_stats(),
             once two warm-up iterations have created the optimizer's state: parameters, the
             optimizer's state, the batch, gradients as they are made, autograd's saved tensors,
             every temporary and cuDNN's workspaces (which PyTorch takes from its own allocator).
             Not the CUDA context, cuBLAS's and cuDNN's handles, or anything outside the allocator.
  reserved   torch.cuda.max_memory_reserved() over the same iteration: the caching allocator's
             segments (what lrcnn's pool reservation is compared with).
  time       the median of --iters iterations after the warm-up, each synchronized.
checkpoint: the layers cut into about sqrt(n) segments at the net's clean cuts (one tensor crossing,
not overwritten in place by the next layer), each but the last (which holds the loss) run under
torch.utils.checkpoint.checkpoint(use_reentrant=False), as torch.utils.checkpoint_sequential does.
On the CPU (--device cpu: to try the script) the memory columns are '-'.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
from torch.utils.checkpoint import checkpoint

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests"))
sys.path.insert(0, os.path.join(SRC, "tools"))
import torch_net  # noqa: E402
from torch_peak import TorchNet  # noqa: E402


class CheckpointNet(TorchNet):
    """TorchNet run in segments between clean cuts, each but the last under checkpoint."""

    def __init__(self, layers):
        super().__init__(layers)
        n = len(layers)
        index = {l.name: k for k, l in enumerate(layers)}
        cuts = []
        for k in range(2, n - 1):  # after the input; before the loss's segment
            crossing = {l.name for l in layers[:k] if any(index[r] >= k for r in self.readers_of(l.name))}
            if len(crossing) == 1 and not (layers[k].name in self.inplace and layers[k].inputs[0] in crossing):
                cuts.append((k, crossing.pop()))
        want = max(1, int(math.sqrt(len(cuts))))
        step = len(cuts) / (want + 1)
        self.cuts = [cuts[int(round((i + 1) * step)) - 1] for i in range(want)] if cuts else []

    def readers_of(self, name):
        if not hasattr(self, "_readers"):
            self._readers = {}
            for l in self.layers:
                for i in l.inputs:
                    self._readers.setdefault(i, []).append(l.name)
        return self._readers.get(name, [])

    def forward(self, x, labels):
        t, into, lo = x, None, 0  # the tensor crossing the last cut, its name (None: the image)
        for k, name in self.cuts:
            def segment(t, lo=lo, hi=k, into=into, out=name):
                return self.run({} if into is None else {into: t}, lo, hi, t if into is None else x, labels)[out]
            t, into, lo = checkpoint(segment, t, use_reentrant=False), name, k
        return self.run({into: t} if into else {}, lo, len(self.layers), x, labels)


def iteration(model, opt, x, y, device):
    opt.zero_grad(set_to_none=True)
    model(x, y).backward()
    opt.step()
    if device == "cuda":
        torch.cuda.synchronize()


def measure(netfile, batch, image, iters, device, ckpt):
    _, layers = torch_net.parse_net(netfile, image)
    torch.manual_seed(1)
    model = (CheckpointNet if ckpt else TorchNet)(layers).to(device)
    model.train()
    shape = layers[0].shape
    classes = model.by_name[layers[-1].inputs[0]].shape
    x = torch.randn(batch, *shape, device=device)
    y = torch.randint(0, classes[0] * classes[1] * classes[2], (batch,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(2):
        iteration(model, opt, x, y, device)
    allocated = reserved = None
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
        iteration(model, opt, x, y, device)
        allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        iteration(model, opt, x, y, device)
        times.append(time.perf_counter() - t0)
    segments = len(model.cuts) + 1 if ckpt else 1
    del model, opt, x, y
    if device == "cuda":
        torch.cuda.empty_cache()
    return allocated, reserved, statistics.median(times), segments, shape[1:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nets", nargs="+")
    ap.add_argument("--batch", default="8,32")
    ap.add_argument("--image", type=int, default=None)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--benchmark", action="store_true", help="cudnn.benchmark on: measured algorithm choice")
    ap.add_argument("--tsv", default=None, help="also write the table here")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("torch_gpu: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = a.benchmark
    where = torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu"
    cap = os.environ.get("CUDNN_CONV_WSCAP_DBG")
    print("PyTorch %s on %s (cuDNN %s), fp32, TF32 off, cudnn.benchmark %s, workspace %s, SGD momentum 0.9, "
          "zero_grad(set_to_none=True); MiB; time: median of %d iterations"
          % (torch.__version__, where, torch.backends.cudnn.version(), "on" if a.benchmark else "off",
             "capped at %s MiB" % cap if cap else "uncapped", a.iters))
    head = ("net", "image", "batch", "variant", "segments", "allocated_MiB", "reserved_MiB", "time_ms")
    print("%-10s %9s %5s %-10s %8s %13s %13s %9s" % head)
    rows = []
    for net in a.nets:
        for b in (int(v) for v in a.batch.split(",")):
            for ckpt in (False, True):
                al, rs, t, seg, hw = measure(net, b, a.image, a.iters, a.device, ckpt)
                name = os.path.splitext(os.path.basename(net))[0]
                row = (name, "%dx%d" % tuple(hw), b, "checkpoint" if ckpt else "plain", seg, "-" if al is None else "%.1f" % (al / 2**20),
                       "-" if rs is None else "%.1f" % (rs / 2**20), "%.2f" % (t * 1e3))
                rows.append(row)
                print("%-10s %9s %5d %-10s %8d %13s %13s %9s" % row, flush=True)
    if a.tsv:
        with open(a.tsv, "w") as f:
            f.write("\t".join(head) + "\n")
            for r in rows:
                f.write("\t".join(str(v) for v in r) + "\n")


if __name__ == "__main__":
    main()
