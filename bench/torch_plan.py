#!/usr/bin/python3
"""bench/torch_plan.py: what a plan costs in PyTorch (python/lrcnn_torch) beside what it costs on
lrcnn's own engine, measured in one run on this machine.

    /usr/bin/python3 bench/torch_plan.py LRCNN_BINARY [NET ...]      (default: vgg16 resnet50)

Per net (torchvision's, 224x224, batch 2, SGD, BatchNorm on running statistics and dropout off —
row segments need bn=frozen in PyTorch) and plan: the median time of an iteration (forward and
backward, 3 after one warm-up) of the module wrapped by apply_plan over the plain module's, and
lrcnn's engine's time for the same plan over its `layer` (lrcnn validate: each plan in its own
process, the same iterations, on the shipped net of the same name).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

import h5py
import torch
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
from lrcnn_torch import apply_plan  # noqa: E402

PLANS = ["layer", "ckpt-sqrt", "vdnn-conv", "2ps:4", "overl:4", "2ps-h", "layer+dpr:fp16", "layer+gist"]
ITERS = 3


def seconds(model, x):
    times = []
    for i in range(ITERS + 1):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        model(x).float().square().mean().backward()
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def engine_ratios(lrcnn, net):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "v.h5")
        subprocess.run([lrcnn, "validate", "--net", net, "--batch", "2", "--plan", ",".join(PLANS), "--iters", str(ITERS + 1),
                        "--bn", "frozen", "-o", out], check=True, capture_output=True, text=True)
        with h5py.File(out) as f:
            t = {g.attrs["plan"].split(" bn=")[0]: statistics.median(g["measured/iter_us"][1:]) for g in f["runs"].values()}
    return {p: t[p] / t["layer"] for p in t}


def main(lrcnn, nets):
    torch.manual_seed(0)
    print("# commit %s: /usr/bin/python3 bench/torch_plan.py %s %s" % (
        subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
        os.path.relpath(lrcnn), " ".join(nets)))
    print("PyTorch %s, %d threads; a plan's iteration time over the plain module's (PyTorch) and over layer's (lrcnn's engine)"
          % (torch.__version__, torch.get_num_threads()))
    print("%-9s %-16s %10s %10s %9s %14s" % ("net", "plan", "plain s", "wrapped s", "PyTorch", "lrcnn engine"))
    for net in nets:
        engine = engine_ratios(lrcnn, net)
        x = torch.randn(2, 3, 224, 224)
        plain = getattr(torchvision.models, net)().eval()
        base = seconds(plain, x)
        for plan in PLANS:
            wrapped = apply_plan(getattr(torchvision.models, net)().eval(), (3, 224, 224), 2, plan, bn="frozen", lrcnn=lrcnn)
            t = seconds(wrapped, x)
            print("%-9s %-16s %10.3f %10.3f %8.2fx %13.2fx" % (net, plan, base, t, t / base, engine.get(plan, float("nan"))),
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] or ["vgg16", "resnet50"])
