#!/usr/bin/python3
"""bench/torch_plan_gpu.py: lrcnn's plans applied to PyTorch modules (python/lrcnn_torch) on a GPU:
PyTorch's own peaks against lrcnn's prediction, the time against the plain module, and the largest
batch that fits a budget with the plan and without it.

    python3 bench/torch_plan_gpu.py --lrcnn BIN [--device cuda|cpu] [--nets vgg16,resnet50,mobilenet_v2,unet]
            [--batch 8] [--image 224] [--plans P,...] [--iters 10] [--budget-gib 8] [--fit NET:PLAN] [--tsv OUT]
            [--cudnn-ws-mib N] [--same-process]

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

Each row runs in a process of its own (this script again, with --row), as lrcnn's own campaign
runs each plan: on the H200 (2026-11-30) a wrapped `layer` row measured in the process that had
just measured the plain module read that module's parameters and gradients on top of its own
(+1,059 MiB on VGG-16), which nothing on the CPU reproduced; --same-process measures every row in
this one, as before. --cudnn-ws-mib N caps cuDNN's workspace at N MiB for every row, plain and
wrapped alike (PyTorch's CUDNN_CONV_WSCAP_DBG, set in each row's environment before it imports
torch): lrcnn's torch rules leave cuDNN's workspaces out, so under a cap the allocated peak is the
prediction plus at most N MiB of workspace, where uncapped it is plus whatever cuDNN chose from the
free memory (the policy is printed in the header).

TF32 is off and cuDNN's benchmark mode too (fp32 as lrcnn's engine computes). Needs torchvision for
VGG-16, ResNet-50 and MobileNetV2 (without it those nets are skipped, said so); the U-Net is
tools/unet.py's.
"""
import argparse
import gc
import json
import os
import statistics
import subprocess
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


def row(net, plan, a):
    """measure()'s figures for one row (plan None: the plain module), in this process."""
    alloc, pred, res, pres, times, clean = measure(maker(net), plan, a.batch, (3, a.image, a.image), a.device, a.iters, a.lrcnn)
    return dict(allocated=alloc, predicted=pred, reserved=res, pred_reserved=pres, times=times, no_scratch=clean)


def row_apart(net, plan, a):
    """row() in a process of its own (this script with --row; its stderr passes through); PlanError
    where the plan was refused there, RuntimeError where the process failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--lrcnn", a.lrcnn, "--device", a.device, "--batch", str(a.batch),
           "--image", str(a.image), "--iters", str(a.iters), "--row", net, plan or "plain"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    lines = r.stdout.strip().splitlines()
    if r.returncode or not lines:
        raise RuntimeError("its process exited with status %d" % r.returncode)
    got = json.loads(lines[-1])
    if "refused" in got:
        raise PlanError(got["refused"])
    return got


def policy(a):
    """The header's words on cuDNN's workspace for these rows."""
    if a.device != "cuda":
        return "no cuDNN"
    if a.cudnn_ws_mib is None:
        return "cuDNN's workspace uncapped (PyTorch's default: up to what the caching allocator has free)"
    return "cuDNN's workspace capped at %d MiB (CUDNN_CONV_WSCAP_DBG)" % a.cudnn_ws_mib


def print_row(net, plan, got, plain, tsv):
    """One table line (and TSV row) from row()'s figures; plain: the plain module's median time."""
    alloc, pred, clean, times = got["allocated"], got["predicted"], got["no_scratch"], got["times"]
    med = statistics.median(times)
    row = (net, plan or "plain", mib(alloc), mib(pred), "%+6.2f%%" % (100.0 * (alloc - pred) / pred), mib(got["reserved"]),
           mib(got["pred_reserved"]), "%9.2f" % (med * 1e3), "%8.2f" % (min(times) * 1e3), "%8.2f" % (max(times) * 1e3),
           "%7.2fx" % (med / plain), mib(clean), "-" if clean is None else "%+6.2f%%" % (100.0 * (clean - pred) / pred))
    print("%-12s %-16s %s %s %7s %s %s %s %s %s %8s %s %7s" % row, flush=True)
    if tsv:
        tsv.write("\t".join(str(v).strip() for v in row) + "\n")
        tsv.flush()


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
    ap.add_argument("--cudnn-ws-mib", type=int, help="cap cuDNN's workspace at N MiB in every row (PyTorch's CUDNN_CONV_WSCAP_DBG)")
    ap.add_argument("--same-process", action="store_true", help="measure every row in this process, not each in its own")
    ap.add_argument("--row", nargs=2, metavar=("NET", "PLAN"), help=argparse.SUPPRESS)  # one row, its figures as JSON
    a = ap.parse_args()
    if a.cudnn_ws_mib is not None:
        if a.cudnn_ws_mib < 0:
            sys.exit("bench/torch_plan_gpu.py: --cudnn-ws-mib %d: a workspace cap is 0 MiB or more" % a.cudnn_ws_mib)
        os.environ["CUDNN_CONV_WSCAP_DBG"] = str(a.cudnn_ws_mib)  # before any convolution here, and inherited by each row
    if a.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench/torch_plan_gpu.py: no CUDA device (--device cpu tries the script on the CPU)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    if a.row:
        net, plan = a.row
        try:
            got = row(net, None if plan == "plain" else plan, a)
        except PlanError as e:
            got = {"refused": str(e)}
        print(json.dumps(got))
        return
    where = torch.cuda.get_device_name(0) if a.device == "cuda" else "CPU, %d threads" % torch.get_num_threads()
    print("PyTorch %s on %s; batch %d, %dx%d, bn=frozen, SGD; %d timed iterations after 2; %s; each row %s; MiB; "
          "error = (allocated - predicted) / predicted" % (torch.__version__, where, a.batch, a.image, a.image, a.iters, policy(a),
                                                           "in this process" if a.same_process else "in a process of its own"))
    head = ("net", "plan", "allocated", "predicted", "error", "reserved", "pred.res", "median ms", "min ms", "max ms", "x plain",
            "no scratch", "error")
    print("%-12s %-16s %10s %10s %7s %10s %10s %9s %8s %8s %8s %10s %7s" % head)
    tsv = open(a.tsv, "w") if a.tsv else None
    if tsv:
        tsv.write("\t".join(head) + "\n")
    for net in a.nets.split(","):
        if maker(net) is None:
            print("%-12s skipped: torchvision is not installed" % net)
            continue
        plain = None
        for plan in [None] + a.plans.split(","):
            try:
                got = row(net, plan, a) if a.same_process else row_apart(net, plan, a)
            except (PlanError, RuntimeError) as e:
                print("%-12s %-16s %s: %s" % (net, plan or "plain", "refused" if isinstance(e, PlanError) else "failed", e), flush=True)
                continue
            plain = statistics.median(got["times"]) if plan is None else plain
            print_row(net, plan, got, plain or float("nan"), tsv)
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
            fit_table(maker(net), net, plan, (3, a.image, a.image), int(a.budget_gib * 2**30), a.lrcnn)


if __name__ == "__main__":
    main()
