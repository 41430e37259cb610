#!/usr/bin/env python3
"""fp32's own error on a network's gradients, to read `lrcnn validate`'s gradient deviations against.

Two fp32 computations of the same gradient differ by their summation orders; how much depends on the
network, not only on the arithmetic. In a deep net whose gradients shrink layer by layer (VGG-16 at
its default initialization: |dW| falls from 0.7 at fc8 to 3e-6 at conv1_1), every backward layer
sums terms far larger than its result, and the relative error grows geometrically towards the input.

This script takes lrcnn dumps of one iteration on the same weights and batch (`lrcnn train --dump`,
e.g. under `layer` and `2ps:2`) and measures each against PyTorch 1.13 in float64 on those weights
and that batch, next to PyTorch's own float32 result: the columns are ||g - g64|| / ||g64|| per
parameter gradient. The network is rebuilt by tests/torch_net.py's independent interpreter.

    /usr/bin/python3 tools/fp64_floor.py NETFILE DUMP.h5 [DUMP.h5 ...] [--bn train|frozen]
"""
import argparse
import os
import sys

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import torch_net  # noqa: E402


def reference_grads(layers, f, dtype, bn):
    model = torch_net.RefNet(layers, dtype)
    problems = torch_net.load_params(model, f)
    if problems:
        sys.exit("fp64_floor: %s: %s" % (f.filename, problems[0]))
    if bn:
        model.set_bn(bn)
    x = torch.from_numpy(f["input"][()]).to(dtype)
    y = torch.from_numpy(f["labels"][()].astype(np.int64))
    model(x, y).backward()
    return {"grads/%s/%s" % (layer, ds): t.grad.double().numpy() for layer, ds, t in model.params()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("netfile")
    ap.add_argument("dumps", nargs="+")
    ap.add_argument("--bn", choices=("train", "frozen"))
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 2)
    _, layers = torch_net.parse_net(a.netfile)
    files = [h5py.File(p, "r") for p in a.dumps]
    for f in files[1:]:
        for key in ("input", "labels"):
            if not np.array_equal(f[key][()], files[0][key][()]):
                sys.exit("fp64_floor: %s and %s differ in /%s: not the same batch" % (a.dumps[0], f.filename, key))
    g64 = reference_grads(layers, files[0], torch.float64, a.bn)
    g32 = reference_grads(layers, files[0], torch.float32, a.bn)

    def rel(g, key):
        return np.linalg.norm(g - g64[key]) / max(np.linalg.norm(g64[key]), 1e-300)

    names = [os.path.basename(p) for p in a.dumps] + ["torch fp32"]
    width = max(12, *(len(n) for n in names))
    print("||g - g64|| / ||g64|| per parameter gradient (g64: PyTorch %s in float64, same weights and batch)"
          % torch.__version__)
    print("%-28s %12s  " % ("tensor", "||g64||") + " ".join("%*s" % (width, n) for n in names))
    worst = [0.0] * len(names)
    for key in g64:
        devs = [rel(f[key][()].astype(np.float64), key) for f in files] + [rel(g32[key], key)]
        worst = [max(w, d) for w, d in zip(worst, devs)]
        print("%-28s %12.3e  " % (key, np.linalg.norm(g64[key])) + " ".join("%*.2e" % (width, d) for d in devs))
    print("%-28s %12s  " % ("worst", "") + " ".join("%*.2e" % (width, d) for d in worst))


if __name__ == "__main__":
    main()
