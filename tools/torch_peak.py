#!/usr/bin/python3
"""PyTorch's own memory for a net file, measured, beside lrcnn's `torch` plan prediction.

    /usr/bin/python3 tools/torch_peak.py NET.net [NET.net ...] [--batch 1,8,32] [--image S]
                     [--optimizer sgd|adam] [--lrcnn build/lrcnn] [--device cpu|cuda]

Builds the net in PyTorch from its file (the parser of tests/torch_net.py: nets/FORMAT.md; ReLUs
in place where nothing else reads their input, as torchvision writes them; gap is
AdaptiveAvgPool2d(1)), runs one training iteration to create gradients and optimizer state, then
measures a second one:

  stash      bytes of the tensors autograd saved for backward, each storage once, parameters
             excluded (torch.autograd.graph.saved_tensors_hooks) — what the forward keeps
  persistent parameters, their gradients, the optimizer's state and BatchNorm's running buffers
  allocated  the peak of allocated bytes over one steady-state iteration (zero_grad, forward,
             backward, optimizer step) after two earlier ones: persistent + batch + the highest
             running total of every allocation and free the profiler records (CPU: torch.profiler
             with profile_memory), or on CUDA torch.cuda.max_memory_allocated after
             reset_peak_memory_stats, max_memory_reserved beside it — the definition of
             bench/torch_gpu.py, with TF32 and cudnn.benchmark off as there

and prints lrcnn's prediction for the same net, batch and optimizer (`lrcnn sim --plan torch`:
persistent and kept bytes when the backward begins, and the replay's peak) with the error of
each. Run it on your own GPU with --device cuda: then PyTorch's reserved bytes
(max_memory_reserved) are printed too, beside the plan's model of the caching allocator
(sim/predict/torch_alloc.h).
Needs PyTorch (Debian's python3-torch 1.13 on the CPU), h5py and the lrcnn binary.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import h5py
import torch
import torch.nn.functional as F

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(SRC, "tests"))
import torch_net  # noqa: E402  (the independent net parser and PyTorch model)


INPLACE_KINDS = ("relu", "relu6", "leakyrelu")


class TorchNet(torch_net.RefNet):
    """RefNet written as torchvision writes its models: in-place ReLUs, adaptive pooling for gap."""

    def __init__(self, layers):
        super().__init__(layers)
        readers = {}
        for l in layers:
            for i in l.inputs:
                readers[i] = readers.get(i, 0) + 1
        # the kinds lrcnn runs in place (sim/net/kind.c), as torchvision's ReLU(inplace=True),
        # ReLU6(inplace=True) and LeakyReLU(inplace=True) do
        self.inplace = {l.name for l in layers if l.kind in INPLACE_KINDS and readers.get(l.inputs[0], 0) == 1
                        and self.by_name[l.inputs[0]].kind != "input"}
        # a module's forward drops each output after its last reader (x = layer(x), as torchvision
        # writes them): only what autograd saved outlives it
        self.last_reader = {}
        for k, l in enumerate(layers):
            for i in l.inputs:
                self.last_reader[i] = k

    def layer_out(self, l, src, x, labels):
        if l.kind == "relu":
            return F.relu(src[0], inplace=l.name in self.inplace)
        if l.kind == "relu6":
            return F.relu6(src[0], inplace=l.name in self.inplace)
        if l.kind == "leakyrelu":
            return F.leaky_relu(src[0], l.args["slope"], inplace=l.name in self.inplace)
        if l.kind == "gap":
            return F.adaptive_avg_pool2d(src[0], 1)
        if l.kind == "dropout":  # PyTorch's own (its generator's mask, which it keeps as bool)
            return F.dropout(src[0], l.args["p"], training=True)
        return super().layer_out(l, src, x, labels)

    def run(self, v, lo, hi, x, labels):
        """Layers [lo, hi) from the tensors in v (dropped after their last reader): the loss where it
        is among them, else what is left in v."""
        for k in range(lo, hi):
            l = self.layers[k]
            src = [v[i] for i in l.inputs]
            for i in set(l.inputs):
                if self.last_reader[i] == k:
                    del v[i]
            y = self.layer_out(l, src, x, labels)
            if l.kind == "loss":
                return y
            v[l.name] = y
        return v

    def forward(self, x, labels):
        return self.run({}, 0, len(self.layers), x, labels)


def nbytes(t):
    return t.numel() * t.element_size()


def storage_key(t):
    s = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()  # 2.x, 1.13
    return s.data_ptr(), s.nbytes() if hasattr(s, "nbytes") else s.size() * s.element_size()


def measure(netfile, batch, image, optimizer, device, none_grads):
    """none_grads: zero_grad(set_to_none=True), PyTorch 2.x's default (the torch2 plan)."""
    _, layers = torch_net.parse_net(netfile, image)
    if device == "cuda":  # the previous net's cached blocks would count in this one's reserved bytes
        torch.cuda.empty_cache()
    torch.manual_seed(1)
    model = TorchNet(layers).to(device)
    model.train()
    shape = layers[0].shape
    classes = model.by_name[layers[-1].inputs[0]].shape
    n_classes = classes[0] * classes[1] * classes[2]
    x = torch.randn(batch, *shape, device=device)
    y = torch.randint(0, n_classes, (batch,), device=device)
    params = list(model.parameters())
    opt = (torch.optim.SGD(params, lr=0.01, momentum=0.9) if optimizer == "sgd"
           else torch.optim.Adam(params, lr=1e-3))

    def step(zero=True):
        if zero:
            opt.zero_grad(set_to_none=none_grads)
        model(x, y).backward()
        opt.step()

    step()  # gradients and optimizer state exist from here on, as in every later iteration
    state = sum(nbytes(t) for s in opt.state.values() for t in s.values() if torch.is_tensor(t))
    grads = sum(nbytes(p.grad) for p in params)
    held = sum(nbytes(p) for p in params) + grads + state + sum(nbytes(b) for b in model.buffers())
    persistent = held - (grads if none_grads else 0)  # while the forward runs
    data = nbytes(x) + nbytes(y)

    # what the forward saves for backward
    param_keys = {storage_key(p)[0] for p in params} | {storage_key(b)[0] for b in model.buffers()}
    saved = {}

    def pack(t):
        ptr, size = storage_key(t)
        if ptr not in param_keys:
            saved[ptr] = size
        return t

    opt.zero_grad(set_to_none=none_grads)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x, y)
    stash = sum(saved.values())
    loss.backward()
    opt.step()

    # the allocated peak of one whole iteration
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step()
        torch.cuda.synchronize()
        allocated, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
        try:
            split = peak_split(step, param_keys)
        except Exception as ex:  # an allocator history this PyTorch does not keep: the table stands without it
            split = {"error": "%s: %s" % (type(ex).__name__, ex)}
    else:
        opt.zero_grad(set_to_none=none_grads)  # outside: the profiler cannot see frees of older blocks
        allocated, reserved = cpu_step_peak(lambda: step(zero=False), held_tensors(model, opt) + [x, y]), None
    return {"stash": stash, "persistent": persistent, "data": data, "allocated": allocated, "reserved": reserved,
            "split": split if device == "cuda" else None}


def held_tensors(model, opt):
    """What a training step finds allocated: parameters, their gradients, buffers, optimizer state."""
    params = list(model.parameters())
    return params + [p.grad for p in params] + list(model.buffers()) + \
        [t for st in opt.state.values() for t in st.values() if torch.is_tensor(t)]


def cpu_step_peak(step, held, scratch=False):
    """The allocated peak of one training step on the CPU: the bytes of the tensors `held` before it
    (parameters, gradients, optimizer state, buffers, the batch; each storage once) plus the highest
    running total of the allocations and frees torch.profiler records while step() runs. With
    scratch, the pair (that peak, the same without the ops' own scratch: profiled_top_no_scratch)."""
    from torch.profiler import ProfilerActivity, profile
    before = sum({storage_key(t)[0]: nbytes(t) for t in held if t is not None}.values())
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    top = before + profiled_top(prof)
    return (top, before + profiled_top_no_scratch(prof)) if scratch else top


def profiled_top(prof):
    """The highest running total of the allocations and frees a torch.profiler run (profile_memory)
    recorded, in time order (1.13 stamps them in microseconds, 2.x in nanoseconds)."""
    events = sorted((e.start_ns() if hasattr(e, "start_ns") else e.start_us(), e.nbytes())
                    for e in prof.profiler.kineto_results.events() if e.name() == "[memory]")
    total = top = 0
    for _, b in events:
        total += b
        top = max(top, total)
    return top


def profiled_top_no_scratch(prof, device="cpu"):
    """profiled_top without the ops' own scratch, over the blocks of one device type ("cpu",
    "cuda"): the blocks an ATen op allocates and frees before it returns (on the CPU, oneDNN's
    reordered copies and buffers inside a convolution and its backward; on a GPU, cuDNN's
    workspaces), which lrcnn's torch rules leave out. A block is scratch when its free comes before
    the end of the outermost aten:: call around its allocation. None if no block of that device
    was recorded."""
    from torch._C._profiler import _EventType
    events = []  # (time, address, bytes, end of the outermost aten:: call around it, or None)

    def walk(node, outer_end):
        if node.tag == _EventType.Allocation:
            if node.extra_fields.device.type == device:
                events.append((node.start_time_ns, node.extra_fields.ptr, node.extra_fields.alloc_size, outer_end))
            return
        if outer_end is None and node.name.startswith("aten::"):
            outer_end = node.end_time_ns
        for child in node.children:
            walk(child, outer_end)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root, None)
    events.sort(key=lambda e: e[0])
    allocated, scratch = {}, set()  # address -> (its allocation's index, its outer call's end); indices dropped
    for i, (t, ptr, size, outer_end) in enumerate(events):
        if size > 0:
            allocated[ptr] = (i, outer_end)
        elif ptr in allocated:
            j, end = allocated.pop(ptr)
            if end is not None and t <= end:
                scratch.update((i, j))
    total = top = 0
    for i, (_, _, size, _) in enumerate(events):
        if i not in scratch:
            total += size
            top = max(top, total)
    return top if events else None


def cuda_step_peak_no_scratch(step):
    """On a GPU: the allocated peak of one step() without the ops' own scratch — what the caching
    allocator holds before it plus profiled_top_no_scratch over the device's blocks; None where the
    profiler recorded none."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True) as prof:
        step()
        torch.cuda.synchronize()
    top = profiled_top_no_scratch(prof, "cuda")
    return None if top is None else before + top


def peak_split(step, param_keys):
    """One more iteration with the CUDA allocator's event history on: the blocks live at its peak, split
    into those alive before it (parameters, optimizer state, the batch), those the forward saved for
    backward (their storages, seen through a saved-tensors hook) and the others (gradients of activations,
    cuDNN's workspaces, temporaries), with the largest other block and how many allocator events it
    lived. Sizes are the allocator's blocks, as max_memory_allocated counts them."""
    saved = set()

    def pack(t):
        k = storage_key(t)[0]
        if k not in param_keys:
            saved.add(k)
        return t

    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(max_entries=4000000)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            step()
        torch.cuda.synchronize()
        trace = torch.cuda.memory._snapshot()["device_traces"][0]
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    return split_trace(trace, base, saved)


def split_trace(trace, base, saved):
    """peak_split's arithmetic over an allocator history (a list of {action, addr, size}) that starts
    with `base` bytes allocated: where the peak falls, the blocks live there by kind, the largest
    block that is neither saved nor older than the history, and how many events later it was freed
    (None: not within the history)."""
    frees = {"free_completed"} if any(e["action"] == "free_completed" for e in trace) else {"free_requested"}

    def replay(upto):
        """{addr: (size, event)} live after event `upto`; and the events of the running total."""
        live, total, totals = {}, base, []
        for i, e in enumerate(trace[:upto + 1]):
            if e["action"] == "alloc":
                live[e["addr"]] = (e["size"], i)
                total += e["size"]
            elif e["action"] in frees:
                live.pop(e["addr"], None)
                total -= e["size"]
            else:
                continue
            totals.append((total, i))
        return live, totals

    _, totals = replay(len(trace) - 1)
    top, at = max([(base, -1)] + totals, key=lambda t: (t[0], -t[1]))  # the first event at the highest total
    at_top, _ = replay(at)
    others = sorted(((sz, a, i) for a, (sz, i) in at_top.items() if a not in saved), reverse=True)
    largest, lived = 0, None
    if others:
        largest, addr, born = others[0]
        lived = next((j - born for j in range(at + 1, len(trace)) if trace[j]["action"] in frees and trace[j]["addr"] == addr), None)
    return {"peak": top, "before": top - sum(sz for sz, _ in at_top.values()), "saved": sum(sz for a, (sz, _) in at_top.items() if a in saved),
            "other": sum(o[0] for o in others), "largest": largest, "lived": lived, "event": at, "events": len(trace)}


def predict(lrcnn, netfile, batch, image, optimizer, plan):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.h5")
        cmd = [lrcnn, "sim", "--net", netfile, "--batch", str(batch), "--optimizer", optimizer, "--plan", plan,
               "-o", out]
        if image:
            cmd += ["--image", str(image)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with h5py.File(out, "r") as f:
            r = f["runs/00000/prediction/replay"]
            cats = [c.decode() if isinstance(c, bytes) else c for c in f["categories"][()]]
            at = dict(zip(cats, r["at_backward"][()]))
            persistent = at["weights"] + at["weight_grads"] + at["optimizer"]
            top = dict(zip(cats, r["at_peak"][()]))
            return {"at_peak": top,
                    "stash": int(sum(v for k, v in at.items() if k not in ("weights", "weight_grads", "optimizer", "host"))),
                    "persistent": int(persistent), "allocated": int(r.attrs["peak"]),
                    "reserved": int(r.attrs["reserved"]) if "reserved" in r.attrs else None}


def mib(b):
    return "%10.2f" % (b / 2**20)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("nets", nargs="+")
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--image", type=int, default=None)
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"))
    ap.add_argument("--lrcnn", default=os.path.join(SRC, "build", "lrcnn"))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--plan", default="torch", choices=("torch", "torch2"),
                    help="torch: PyTorch 1.13's zero_grad (gradients kept as zeros); torch2: 2.x's (set to None)")
    a = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32, as lrcnn's engine
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    print("PyTorch %s on %s, %s, zero_grad(set_to_none=%s); MiB; error = (lrcnn %s plan - PyTorch) / PyTorch" % (
        torch.__version__, a.device, a.optimizer, a.plan == "torch2", a.plan))
    print("%-14s %5s | %10s %10s %7s | %10s %10s %7s | %10s %10s %7s" % (
        "net", "batch", "stash", "predicted", "error", "persist.", "predicted", "error", "allocated", "predicted", "error"))
    worst = 0.0
    for net in a.nets:
        for b in (int(v) for v in a.batch.split(",")):
            m = measure(net, b, a.image, a.optimizer, a.device, a.plan == "torch2")
            p = predict(a.lrcnn, net, b, a.image, a.optimizer, a.plan)
            errs = [(p[k] - m[k]) / m[k] for k in ("stash", "persistent", "allocated")]
            worst = max([worst] + [abs(e) for e in errs])
            name = os.path.splitext(os.path.basename(net))[0]
            print("%-14s %5d | %s %s %+6.2f%% | %s %s %+6.2f%% | %s %s %+6.2f%%%s" % (
                name, b, mib(m["stash"]), mib(p["stash"]), 100 * errs[0], mib(m["persistent"]), mib(p["persistent"]),
                100 * errs[1], mib(m["allocated"]), mib(p["allocated"]), 100 * errs[2],
                "" if m["reserved"] is None else "  | reserved %s, predicted %s %+.2f%%" % (
                    mib(m["reserved"]).strip(), mib(p["reserved"]).strip(), 100 * (p["reserved"] - m["reserved"]) / m["reserved"])),
                flush=True)
            q = m["split"]
            if q and "error" in q:
                print("%-20s at PyTorch's peak: not split (%s)" % ("", q["error"]), flush=True)
            elif q:  # what PyTorch held at its peak, beside what the plan holds at its own
                t = p["at_peak"]
                print("%-20s at PyTorch's peak (allocator event %d of %d; %s MiB): alive before the iteration %s, saved %s, "
                      "other %s (largest block %s, freed %s events later); the plan at its peak: persistent %s, "
                      "activations %s, activation gradients %s, workspace %s" % (
                          "", q["event"], q["events"], mib(q["peak"]).strip(), mib(q["before"]).strip(), mib(q["saved"]).strip(),
                          mib(q["other"]).strip(), mib(q["largest"]).strip(), q["lived"],
                          mib(t["weights"] + t["weight_grads"] + t["optimizer"]).strip(), mib(t["activations"]).strip(),
                          mib(t["act_grads"]).strip(), mib(t["workspace"]).strip()), flush=True)
    print("worst error: %.2f%%" % (100 * worst))


if __name__ == "__main__":
    main()
