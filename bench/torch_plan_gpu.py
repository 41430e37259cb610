#!/usr/bin/python3
"""bench/torch_plan_gpu.py: lrcnn's plans applied to PyTorch modules (python/lrcnn_torch) on a GPU:
PyTorch's own peaks against lrcnn's prediction, the time against the plain module, and the largest
batch that fits a budget with the plan and without it.

    python3 bench/torch_plan_gpu.py --lrcnn BIN [--device cuda|cpu] [--nets vgg16,resnet50,mobilenet_v2,unet]
            [--batch 8] [--image 224] [--plans P,...] [--iters 10] [--budget-gib 8] [--fit NET:PLAN] [--tsv OUT]

Per net and plan, the module with BatchNorm on its running statistics (bn=frozen: row segments need
it in PyTorch) wrapped by apply_plan, and plainly (`plain`), trained by SGD with momentum; each
iteration zero_grad (set_to_none under PyTorch 2.x, as lrcnn's torch2 rules say), forward,
cross-entropy, backward, optimizer step, after two warm-up iterations:
  allocated  torch.cuda.max_memory_allocated over one iteration (reset_peak_memory_stats before),
             less what the process held before the row's module was built (said on stderr if any),
             against the wrapped module's .predicted peak (lrcnn lower under this PyTorch's rules on
             the h100 device: the batch, parameters, gradients and state, what the plan keeps) and
             the error; reserved (max_memory_reserved) beside the plan's model of the caching
             allocator. The plain module's prediction is `layer`'s.
  time       the median of --iters iterations (each synchronized), with the fastest and slowest,
             and its ratio to the plain module's.
On the CPU (--device cpu, to try the script) the allocated peak is what the profiler records
(torch.profiler's memory events over one iteration, above what is held before it), which includes
the maps an offload segment moved (host memory is the same allocator there), and no reserved
figure or budget search is made. Beside it on both (no scratch) the same peak without the blocks
each ATen op frees before it returns — oneDNN's reordered copies and buffers inside a convolution
and its backward on the CPU, cuDNN's workspaces on a GPU — which lrcnn's torch rules leave out (on
a GPU from one more iteration under torch.profiler, the caching allocator's blocks).

--fit NET:PLAN (default resnet50:2ps:4) with --budget-gib B: the largest batch whose training
iterations run within B GiB of device memory (torch.cuda.set_per_process_memory_fraction: the caching
allocator refuses past it), plainly and under the plan, found by doubling then halving the step,
each try two iterations on a fresh module; beside the largest batch lrcnn predicts to fit
(predicted reserved bytes within B, `lrcnn lower` at each batch tried).

TF32 is off and cuDNN's benchmark mode too (fp32 as lrcnn's engine computes). Needs torchvision for
VGG-16, ResNet-50 and MobileNetV2 (without it those nets are skipped, said so); the U-Net is
tools/unet.py's.
"""
import argparse
import gc
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from lrcnn_torch import PlanError, apply_plan, frozen_bn, lower, predicted  # noqa: E402
from torch_peak import cpu_step_peak, cuda_step_peak_no_scratch, held_tensors  # noqa: E402  (tools/: the profiler's allocated peak)

try:
    import torchvision
except ImportError:
    torchvision = None

PLANS = ["layer", "ckpt-sqrt", "2ps:4", "overl:4", "2ps-h", "vdnn-conv", "layer+dpr:fp16"]
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def maker(net):
    """A factory of the net's module, or None (torchvision missing)."""
    if net == "unet":
        import unet
        return unet.unet
    if torchvision is None:
        return None
    return getattr(torchvision.models, net)


class Trainer:
    """A module, its optimizer and a fixed batch on one device: iteration() is one training step."""

    def __init__(self, model, batch, image, device):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        self.x = torch.randn(batch, *image, device=device)
        with torch.no_grad():
            out = model(self.x[:1])
        shape = (batch,) if out.dim() == 2 else (batch,) + tuple(out.shape[2:])
        self.labels = torch.randint(0, out.shape[1], shape, device=device)
        self.device = device

    def iteration(self):
        self.opt.zero_grad(set_to_none=TORCH2)
        self.step()

    def sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    def peaks(self):
        """(allocated, reserved, allocated without the ops' own scratch) over one iteration: on the GPU
        the allocator's two peaks and, over one more iteration under the profiler, the peak without
        the blocks each ATen op frees before it returns (None if that fails: said on stderr); on the
        CPU the profiler's allocated peak, None, and that peak without them (tools/torch_peak.py)."""
        self.sync()
        if self.device == "cuda":
            torch.cuda.reset_peak_memory_stats()
            self.iteration()
            self.sync()
            allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
            self.opt.zero_grad(set_to_none=TORCH2)
            try:
                no_scratch = cuda_step_peak_no_scratch(self.step)
            except Exception as e:  # a profiler that records no device block, or fails: the column reads "-"
                print("bench/torch_plan_gpu.py: no scratch-free peak on the GPU: %s" % e, file=sys.stderr)
                no_scratch = None
            return allocated, reserved, no_scratch
        self.opt.zero_grad(set_to_none=TORCH2)
        gc.collect()
        allocated, no_scratch = cpu_step_peak(self.step, held_tensors(self.model, self.opt) + [self.x, self.labels], scratch=True)
        return allocated, None, no_scratch

    def step(self):
        F.cross_entropy(self.model(self.x), self.labels).backward()
        self.opt.step()

    def times(self, iters):
        out = []
        for _ in range(iters):
            self.sync()
            t0 = time.perf_counter()
            self.iteration()
            self.sync()
            out.append(time.perf_counter() - t0)
        return out


def free_device(device):
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def measure(make, plan, batch, image, device, iters, lrcnn):
    """One row: (allocated, predicted peak, reserved, predicted reserved, times, allocated without the
    ops' own scratch) for plan, or for the plain module (plan None; predicted as `layer`)."""
    free_device(device)
    # what the process holds before this row's module exists: on the H200 a wrapped `layer` row found
    # the plain module of the row before still allocated (its parameters and gradients, cause not
    # found; nothing stays alive on the CPU), so each row's peaks are taken above it
    base, base_res = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved()) if device == "cuda" else (0, 0)
    if base:
        print("bench/torch_plan_gpu.py: %s %s: %.1f MiB allocated before the module was built (left by an earlier row): "
              "taken off its peaks" % (make.__name__, plan or "plain", base / 2**20), file=sys.stderr)
    torch.manual_seed(1)
    model = frozen_bn(make()).to(device)
    if plan is None:
        _, low = lower(model, image, batch, "layer", bn="frozen", lrcnn=lrcnn, device=device)
        pred = predicted(low)
    else:
        model = apply_plan(model, image, batch, plan, bn="frozen", lrcnn=lrcnn)
        pred = model.predicted
    t = Trainer(model, batch, image, device)
    t.iteration(), t.iteration()
    allocated, reserved, no_scratch = t.peaks()
    times = t.times(iters)
    del t, model
    free_device(device)
    less = (lambda b, by=base: None if b is None else b - by)
    return less(allocated), pred["peak"], less(reserved, base_res), pred["reserved"], times, less(no_scratch)


def fits(make, plan, batch, image, lrcnn):
    """Whether two training iterations at batch run within the memory fraction set."""
    t = None
    try:
        torch.manual_seed(1)
        model = frozen_bn(make()).to("cuda")
        if plan is not None:
            model = apply_plan(model, image, batch, plan, bn="frozen", lrcnn=lrcnn)
        t = Trainer(model, batch, image, "cuda")
        t.iteration(), t.iteration()
        torch.cuda.synchronize()
        return True
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one
        if "out of memory" not in str(e):
            raise
        return False
    finally:
        del t
        free_device("cuda")


def largest(ok, most=4096):
    """The largest batch b in 1..most with ok(b), ok being monotone: doubling, then halving steps."""
    if not ok(1):
        return 0
    lo = 1
    while lo * 2 <= most and ok(lo * 2):
        lo *= 2
    step = lo // 2
    while step >= 1:
        if lo + step <= most and ok(lo + step):
            lo += step
        step //= 2
    return lo


def fit_table(make, net, plan, image, budget, lrcnn):
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, budget / total))
    print("\nthe largest batch within %.1f GiB (set_per_process_memory_fraction %.4f of %.1f GiB), %s %dx%d, SGD:"
          % (budget / 2**30, min(1.0, budget / total), total / 2**30, net, image[1], image[2]))
    cpu_model = frozen_bn(make())
    for p in (None, plan):
        name = p or "plain"
        t0 = time.perf_counter()
        measured = largest(lambda b: fits(make, p, b, image, lrcnn))

        def predicted_fits(b):
            _, low = lower(cpu_model, image, b, p or "layer", bn="frozen", lrcnn=lrcnn, device="cuda")
            r = predicted(low)["reserved"]
            return r is not None and r <= budget
        print("  %-14s measured %5d   predicted %5d   (%.0f s)" % (name, measured, largest(predicted_fits), time.perf_counter() - t0),
              flush=True)
    torch.cuda.set_per_process_memory_fraction(1.0)


def mib(b):
    return "%10.1f" % (b / 2**20) if b is not None else "%10s" % "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lrcnn", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--nets", default="vgg16,resnet50,mobilenet_v2,unet")
    ap.add_argument("--plans", default=",".join(PLANS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--budget-gib", type=float, default=8.0)
    ap.add_argument("--fit", default="resnet50:2ps:4", help="NET:PLAN for the budget search (cuda only); '' for none")
    ap.add_argument("--tsv")
    a = ap.parse_args()
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench/torch_plan_gpu.py: no CUDA device (--device cpu tries the script on the CPU)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    image = (3, a.image, a.image)
    where = torch.cuda.get_device_name(0) if a.device == "cuda" else "CPU, %d threads" % torch.get_num_threads()
    print("PyTorch %s on %s; batch %d, %dx%d, bn=frozen, SGD; %d timed iterations after 2; MiB; error = (allocated - predicted) "
          "/ predicted" % (torch.__version__, where, a.batch, a.image, a.image, a.iters))
    head = ("net", "plan", "allocated", "predicted", "error", "reserved", "pred.res", "median ms", "min ms", "max ms", "x plain",
            "no scratch", "error")
    print("%-12s %-16s %10s %10s %7s %10s %10s %9s %8s %8s %8s %10s %7s" % head)
    tsv = open(a.tsv, "w") if a.tsv else None
    if tsv:
        tsv.write("\t".join(head) + "\n")
    for net in a.nets.split(","):
        make = maker(net)
        if make is None:
            print("%-12s skipped: torchvision is not installed" % net)
            continue
        plain = None
        for plan in [None] + a.plans.split(","):
            try:
                alloc, pred, res, pres, times, clean = measure(make, plan, a.batch, image, a.device, a.iters, a.lrcnn)
            except PlanError as e:
                print("%-12s %-16s refused: %s" % (net, plan, e), flush=True)
                continue
            med = statistics.median(times)
            plain = med if plan is None else plain
            row = (net, plan or "plain", mib(alloc), mib(pred), "%+6.2f%%" % (100.0 * (alloc - pred) / pred), mib(res), mib(pres),
                   "%9.2f" % (med * 1e3), "%8.2f" % (min(times) * 1e3), "%8.2f" % (max(times) * 1e3), "%7.2fx" % (med / plain),
                   mib(clean), "-" if clean is None else "%+6.2f%%" % (100.0 * (clean - pred) / pred))
            print("%-12s %-16s %s %s %7s %s %s %s %s %s %8s %s %7s" % row, flush=True)
            if tsv:
                tsv.write("\t".join(str(v).strip() for v in row) + "\n")
                tsv.flush()
    if a.device == "cpu":
        print("(on the CPU the maps an offload segment moves stay in the same allocator, so an offload plan's peak there "
              "includes them; the prediction is the device's. no scratch: the allocated peak without the blocks an ATen op "
              "frees before it returns, oneDNN's buffers inside a convolution among them, which lrcnn's torch rules leave out "
              "as they leave out cuDNN's workspaces)")
    if a.fit and a.device == "cuda":
        net, plan = a.fit.split(":", 1)
        if maker(net) is None:
            print("\nthe budget search on %s: skipped, torchvision is not installed" % net)
        else:
            fit_table(maker(net), net, plan, image, int(a.budget_gib * 2**30), a.lrcnn)


if __name__ == "__main__":
    main()
