#!/usr/bin/python3
"""Writes a PyTorch training script that trains a model under an lrcnn plan (python/lrcnn_torch).

    ./lrcnn torch-plan --model MODEL --batch N [--image S|HxW] (--plan PLAN | --budget B)
                       [--bn MODE] -o FILE.py [--force]

MODEL as `lrcnn import` takes it (torchvision:NAME, or PATH.py:FACTORY). --plan: any plan the
package runs (layer, ckpt-sqrt, ckpt-opt[:B], vdnn-conv, 2ps:4 with --bn frozen, ...); --budget B:
the plan is ckpt-opt:B, the fastest checkpointing plan lrcnn finds within B for this batch. The
plan is applied once here (so a module the importer cannot represent, a plan that does not fit it
or a BatchNorm mode bands cannot run is one line on stderr and exit 2, and no file), its segments
and lrcnn's prediction of what it holds printed, and the script written whole (an existing file
only with --force). The script:

    /usr/bin/python3 FILE.py [--steps N] [--data DIR] [--check-grads] [--lr LR]

prints the prediction for where it runs, then trains with SGD on synthetic data (random images and
labels, a label per pixel where the model's output is a map; --data DIR: an ImageFolder, resized and
cropped to the image size, for a model with a label per image), printing loss and time
per step; --check-grads compares the first
step's gradients with the plain module's (same weights, same batch, the same random draws; its main
output where it returns several) parameter by parameter, and prints the worst relative deviation
(in norm; lrcnn_torch.gradient_deviation) on its last line.
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

SCRIPT = '''#!/usr/bin/python3
"""Trains {model} under the lrcnn plan {plan!r} (batch {batch}, {c}x{h}x{w}, BatchNorm {bn}).
Written by: {command}
Segments: {resolved}
Usage: /usr/bin/python3 {name} [--steps N] [--data DIR] [--check-grads] [--lr LR]"""
import argparse
import copy
import sys
import time

import torch

sys.path.insert(0, {python!r})  # lrcnn's python/ (lrcnn_torch)
from lrcnn_torch import apply_plan, frozen_bn, gradient_deviation, imported, load_model  # noqa: E402

MODEL, PLAN, BATCH, IMAGE, BN = {model!r}, {plan!r}, {batch}, ({c}, {h}, {w}), {bn_arg!r}


def batches(args, classes, pixels):
    if args.data:  # an ImageFolder: a class a subdirectory
        import torchvision
        import torchvision.transforms as T
        tf = T.Compose([T.Resize(IMAGE[1:]), T.CenterCrop(IMAGE[1:]), T.ToTensor()])
        data = torchvision.datasets.ImageFolder(args.data, tf)
        while True:
            yield from torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True)
    g = torch.Generator().manual_seed(0)
    while True:
        yield torch.randn(BATCH, *IMAGE, generator=g), torch.randint(0, classes, (BATCH, *pixels), generator=g)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--data")
    ap.add_argument("--check-grads", action="store_true")
    ap.add_argument("--lr", type=float, default=0.01)
    args = ap.parse_args()
    torch.manual_seed(0)
    base = load_model(MODEL)
    if BN == "frozen":
        frozen_bn(base)  # on its running statistics (the plan's bn=frozen); dropout still draws
    # the plain module as lrcnn imports it: its main output, the same random draws
    plain = imported(copy.deepcopy(base), IMAGE) if args.check_grads else None
    model = apply_plan(base, IMAGE, BATCH, PLAN, bn=BN)  # base's own parameters, shared
    p = model.predicted
    print("lrcnn predicts: %.1f MiB kept for backward on the device and %.1f MiB in host memory, %.1f MiB persistent, "
          "a %.1f MiB peak" % (p["kept"] / 2**20, p["host"] / 2**20, p["persistent"] / 2**20, p["peak"] / 2**20))
    layers = {{l["name"]: l for l in model.lowering["layers"]}}
    classes, h, w = layers[model.lowering["layers"][-1]["in"][0]]["shape"]  # the logits the loss reads
    pixels = (h, w) if h * w > 1 else ()  # a segmentation model's: a class per pixel
    if args.data and pixels:
        ap.error("--data: an ImageFolder has a class per image, and this model's loss takes one per pixel (%dx%d)" % (h, w))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    data = batches(args, classes, pixels)
    worst = None
    for step in range(args.steps):
        x, y = next(data)
        t0 = time.perf_counter()
        opt.zero_grad()
        if step == 0 and plain is not None:  # the plain module on the same batch, from the same state
            torch.manual_seed(1)
            torch.nn.functional.cross_entropy(plain(x), y).backward()
        torch.manual_seed(1)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        if step == 0 and plain is not None:  # parameter by parameter, by name
            worst, where = gradient_deviation(base, plain)
        opt.step()
        print("step %d  loss %.5f  %.1f ms" % (step, loss.item(), (time.perf_counter() - t0) * 1e3), flush=True)
    if worst is not None:
        print("worst relative gradient deviation from the plain module (%s, in norm): %.3e" % (where, worst))


if __name__ == "__main__":
    main()
'''


def main(argv):
    import torch2net
    from lrcnn_torch import PlanError, apply_plan, frozen_bn, load_model
    ap = torch2net.Args(prog="lrcnn torch-plan", description=__doc__.split("\n\n")[0])
    ap.who, ap.help_hint = "lrcnn torch-plan", "lrcnn torch-plan --help"
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--image", default="224")
    ap.add_argument("--plan")
    ap.add_argument("--budget")
    ap.add_argument("--bn")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    try:
        if (a.plan is None) == (a.budget is None):
            raise PlanError("give --plan PLAN or --budget B (one of them)")
        if not 1 <= a.batch <= 1 << 20:
            raise PlanError("--batch %d: expected 1..1048576" % a.batch)
        h, w = torch2net.parse_image(a.image)
        plan = a.plan or "ckpt-opt:%s" % a.budget
        torch2net.check_output(a.output, a.force)
        model = load_model(a.model)
        if a.bn == "frozen":
            frozen_bn(model)
        c = next(m for m in model.modules() if isinstance(m, torch2net.nn.Conv2d)).in_channels
        wrapped = apply_plan(model, (c, h, w), a.batch, plan, bn=a.bn)
    except (PlanError, torch2net.Refused) as e:
        print("lrcnn torch-plan: %s" % torch2net.one_line(e), file=sys.stderr)
        return 2
    low = wrapped.lowering
    print("plan %s (bn %s): %s" % (plan, low["bn"], low["resolved"]))
    p = wrapped.predicted
    print("lrcnn predicts on the CPU: %.1f MiB kept for backward on the device and %.1f MiB in host memory, %.1f MiB "
          "persistent, a %.1f MiB peak" % (p["kept"] / 2**20, p["host"] / 2**20, p["persistent"] / 2**20, p["peak"] / 2**20))
    text = SCRIPT.format(model=a.model, plan=plan, batch=a.batch, c=c, h=h, w=w, bn=low["bn"], bn_arg=a.bn,
                         resolved=low["resolved"], python=os.path.join(ROOT, "python"), name=os.path.basename(a.output),
                         command="./lrcnn torch-plan " + " ".join(torch2net.one_line(x) for x in argv))
    try:
        torch2net.write_whole(a.output, text)
    except OSError as e:
        print("lrcnn torch-plan: %s: %s" % (a.output, e.strerror or e), file=sys.stderr)
        return 2
    print("wrote %s: /usr/bin/python3 %s --steps 10 [--check-grads] [--data DIR]" % (a.output, a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
