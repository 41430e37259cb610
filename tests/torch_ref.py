#!/usr/bin/env python3
"""torch_ref.py: the independent PyTorch reference check for lrcnn's training engine.

What it checks: for one training iteration, lrcnn's loss, every parameter gradient, the
parameters after one optimizer step (SGD with momentum or Adam, fresh state) and BatchNorm's
running statistics, against PyTorch running the same network on the same weights and batch.

Why it is independent: the network is rebuilt here from the net text file by a parser of its own
(nets/FORMAT.md), the layers are PyTorch's (F.conv2d, F.max_pool2d, F.batch_norm, ...), the
gradients come from autograd and the step from torch.optim. Nothing of lrcnn is imported; the two
sides meet only through HDF5 files in the layout of io/weights.h:
    init     torch's default initialization -> /params (lrcnn train --init-weights reads it)
    compare  lrcnn's --dump (/params, /input, /labels, /grads, /after, attributes) -> torch
The reference runs in float32, as the LR-CNN authors' PyTorch prototype did; the differences it
accepts are those of fp32 summation order (see TOLERANCES).

Commands:
    torch_ref.py init NETFILE OUT.h5 --seed S [--image H]
    torch_ref.py compare NETFILE DUMP.h5 [--bn train|frozen]
    torch_ref.py run LRCNN_BINARY [--keep DIR]   every case: init -> lrcnn train --dump -> compare
    torch_ref.py selftest                the checker checks itself on dumps made by torch in fp64

What it deliberately does not do: per-band BatchNorm (approximate by design, no exact reference),
more than one iteration (the optimizer state after step 1 is fully determined by the gradient).
Run with Debian's /usr/bin/python3 (python3-torch 1.13.1, python3-h5py).
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

# ---------------------------------------------------------------------------------------------
# TOLERANCES: every acceptance threshold of this file, and why.
#
# Both sides compute in float32 but sum in different orders (oneDNN/BLAS in torch; our loops,
# which accumulate batch reductions in double). Reassociating a sum of n fp32 terms changes it by
# about n^0.5 * 6e-8 times the terms' magnitude, which for these nets (sums of up to ~10^4 terms,
# a few layers deep) is ~1e-6 relative to a tensor's norm. The thresholds sit ~100x above that
# and far below what any indexing, layout, padding or formula error produces (>= 1e-2).
LOSS_RTOL = 1e-5           # |loss_ours - loss_ref| <= LOSS_RTOL * |loss_ref|: one fp32 softmax+mean
GRAD_NORM_RTOL = 1e-4      # ||g_ours - g_ref|| <= GRAD_NORM_RTOL * ||g_ref||  (the main criterion)
GRAD_ELEM_FRAC = 1e-3      # every |g_ours - g_ref| <= GRAD_ELEM_FRAC * max|g_ref|: catches a few
                           # wrong elements (a border pixel, one channel) that the norm would hide
GRAD_FLOOR_FRAC = 1e-6     # both gradient bounds get + GRAD_FLOOR_FRAC * (largest gradient norm /
                           # max in the net): analytically zero gradients are fp noise on both sides
AFTER_ATOL = 1e-6          # parameters after the step, element-wise: AFTER_ATOL + AFTER_RTOL*|w|
AFTER_RTOL = 1e-5          #   (fp32 ulp of |w| ~ 0.1 is 7e-9; the step's own rounding is smaller)
# The after-step check compares with torch's step on torch's gradient, so it inherits the gradient
# tolerance through the step function: per element we add lr * (how far the step can move when the
# gradient moves by the allowed GRAD_ELEM_FRAC * max|g_ref|). For SGD's first step (w -= lr*g) that
# is lr * delta. For Adam's first step (w -= lr * g / (|g| + eps), i.e. ~lr*sign(g)) it is ~0 where
# |g| >> delta and up to 2*lr where |g| <= delta: a near-zero gradient may legitimately come out
# with the other sign on the other side, and Adam turns that into a full step the other way.
# A second check ("step") applies torch's optimizer to OUR gradients and must match our
# parameters after the step with no slack at all: that isolates the optimizer from the gradients.
RUNSTAT_RTOL = 1e-5        # running mean/var: RUNSTAT_RTOL*|ref| + RUNSTAT_RTOL * value scale,
                           # where the value scale (max |mean|, sqrt(max var)) bounds the rounding
                           # of a batch mean whose terms may cancel
SHOW = 5                   # mismatching elements printed per failing tensor



def grad_norm_bound(ref_norm, net_norm):
    """The most ||g_ours - g_ref|| may be for a gradient of norm ref_norm in a net whose largest
    gradient norm is net_norm: GRAD_NORM_RTOL of it, plus the floor (tests/test_import.py too)."""
    return GRAD_NORM_RTOL * ref_norm + GRAD_FLOOR_FRAC * net_norm


from torch_cases import GENERATED, NETS, cases  # noqa: E402
from torch_net import NetError, RefNet, Scale, attr_str, load_params, parse_net, write_group, write_h5_atomic  # noqa: E402


# ---------------------------------------------------------------------------------------------
# init

def cmd_init(netfile, out, seed, image=None):
    _, layers = parse_net(netfile, image)
    torch.manual_seed(seed)
    model = RefNet(layers)
    # BN starts at gamma 1, beta 0, mean 0, var 1, where frozen BN is the identity and a swapped
    # gamma/beta or mean/var goes unseen: perturb them (deterministically, from the same seed).
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for m in model.module_of.values():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
            elif isinstance(m, (torch.nn.GroupNorm, torch.nn.LayerNorm)):  # likewise gamma and beta
                c = m.weight.numel()
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
            elif isinstance(m, Scale):  # ConvNeXt's layer scale starts at 1e-6: a spread of values instead
                m.weight.copy_(0.5 + torch.rand(m.weight.shape, generator=g))

    def fill(f):
        write_group(f, "params", model)
        f.attrs["source"] = "tests/torch_ref.py init (torch %s default initialization)" % torch.__version__
        f.attrs["seed"] = np.int64(seed)
    write_h5_atomic(out, fill)


# ---------------------------------------------------------------------------------------------
# compare

class Report:
    def __init__(self):
        self.failures, self.worst_grad = [], 0.0

    def line(self, what, name, ours, ref, ok, extra, bad_idx=None):
        diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
        mag = np.abs(ref.astype(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(diff == 0, 0.0, diff / mag)
        nref = float(np.linalg.norm(ref.astype(np.float64)))
        nrel = float(np.linalg.norm(diff)) / nref if nref > 0 else (0.0 if diff.max(initial=0) == 0 else math.inf)
        print("  %-6s %-36s max abs %9.3e  max rel %9.3e  norm rel %9.3e  %s%s"
              % (what, name, diff.max(initial=0), rel.max(initial=0), nrel, "OK" if ok else "FAIL", extra))
        if not ok:
            self.failures.append("%s %s" % (what, name))
            idx = bad_idx if bad_idx is not None and len(bad_idx) else np.argsort(-diff.ravel())[:SHOW]
            for i in idx[:SHOW]:
                at = np.unravel_index(i, ref.shape) if ref.ndim else ()
                print("      at %-18s ours %+.8e  ref %+.8e  diff %.3e"
                      % (tuple(int(j) for j in at), ours.ravel()[i], ref.ravel()[i], diff.ravel()[i]))
        return nrel

    def fail(self, msg):
        print("  FAIL " + msg)
        self.failures.append(msg)


def compare_elems(rep, what, name, ours, ref, tol, extra=""):
    """Element-wise |ours - ref| <= tol (array or scalar)."""
    if ours.shape != ref.shape:
        return rep.fail("%s %s: shape %s, reference %s" % (what, name, ours.shape, ref.shape))
    diff = np.abs(ours.astype(np.float64) - ref.astype(np.float64))
    bad = np.flatnonzero(~(diff <= tol))  # NaN counts as bad
    rep.line(what, name, ours, ref, len(bad) == 0, extra, bad)


def adam_dir(g, eps):
    """Adam's first bias-corrected step direction per unit lr: m/(sqrt(v)+eps) = g/(|g|+eps)."""
    return g / (np.abs(g) + eps)


def cmd_compare(netfile, dump, bn=None):
    """Returns a Report (failures empty on success)."""
    rep = Report()
    f = h5py.File(dump, "r")
    try:
        for req in ("input", "labels", "params", "grads", "after"):
            if req not in f:
                rep.fail("dump %s has no /%s" % (dump, req))
        for k in ("optimizer", "lr", "loss"):
            if k not in f.attrs:
                rep.fail("dump %s has no attribute %s" % (dump, k))
        if rep.failures:
            return rep
        x_np, labels_np = f["input"][()], f["labels"][()]
        if x_np.dtype != np.float32 or x_np.ndim != 4 or labels_np.dtype != np.int64 or labels_np.shape[:1] != x_np.shape[:1]:
            rep.fail("/input %s %s or /labels %s %s: expected float32 (N,C,H,W) and int64 (N,) or (N,H,W)"
                     % (x_np.dtype, x_np.shape, labels_np.dtype, labels_np.shape))
            return rep
        _, layers = parse_net(netfile)
        inp = layers[0]
        if inp.args["c"] != x_np.shape[1]:
            rep.fail("/input has %d channels, %s says %d" % (x_np.shape[1], netfile, inp.args["c"]))
            return rep
        if x_np.shape[2:] != (inp.args["h"], inp.args["w"]):  # lrcnn train --image S changed it
            if x_np.shape[2] != x_np.shape[3]:
                rep.fail("/input is %dx%d, %s says %dx%d" % (x_np.shape[2], x_np.shape[3], netfile, inp.args["h"], inp.args["w"]))
                return rep
            _, layers = parse_net(netfile, int(x_np.shape[2]))
        mode_attr = attr_str(f, "bn", "auto")
        plan = attr_str(f, "plan", "?")
        if bn is None:
            if mode_attr in ("train", "frozen"):
                bn = mode_attr
            elif mode_attr == "auto" and not re.search(r"rows|2ps|overl", plan):
                bn = "train"  # auto resolves to train outside row segments (docs/plans.md)
            else:
                rep.fail("dump bn=%s under plan '%s': no exact reference (give --bn train|frozen)" % (mode_attr, plan))
                return rep
        elif mode_attr not in (bn, "auto"):
            rep.fail("--bn %s but the dump says bn=%s" % (bn, mode_attr))
            return rep
        opt = attr_str(f, "optimizer")
        lr = float(f.attrs["lr"])
        print("  dump %s: net %s, plan %s, bn %s, optimizer %s, lr %g, batch %d, input %s"
              % (os.path.basename(dump), attr_str(f, "net", "?"), plan, bn, opt, lr, x_np.shape[0], x_np.shape[2:]))
        model = RefNet(layers)
        problems = load_params(model, f)
        # The dump must hold exactly our tensors: an extra layer means the two nets differ.
        want = {"%s/%s" % (l, d) for l, d, _ in model.tensors()}
        for g in ("params", "grads", "after"):
            have = set()
            f[g].visit(lambda p: have.add(p) if isinstance(f[g][p], h5py.Dataset) else None)
            need = want if g != "grads" else {"%s/%s" % (l, d) for l, d, _ in model.params()}
            problems += ["/%s/%s is not a tensor of the net" % (g, p) for p in sorted(have - need)]
            if g != "params":
                problems += ["missing dataset /%s/%s" % (g, p) for p in sorted(need - have)]
        if problems:
            for p in problems:
                rep.fail("layout: " + p)
            return rep
        before = {(l, d): t.detach().clone() for l, d, t in model.tensors()}
        model.set_bn(bn)
        x, labels = torch.from_numpy(x_np), torch.from_numpy(labels_np)
        logits = [layer.shape for layer in layers if layer.name == layers[-1].inputs[0]][0]
        pixel = bool(layers[-1].args["pixel"])
        classes = logits[0] if pixel else int(np.prod(logits))
        want = x_np.shape[:1] + (tuple(logits[1:]) if pixel else ())
        if labels_np.shape != want:
            rep.fail("/labels %s: the loss wants %s" % (labels_np.shape, want))
            return rep
        if labels_np.min() < 0 or labels_np.max() >= classes:
            rep.fail("/labels outside 0..%d" % (classes - 1))
            return rep

        loss = model(x, labels)
        loss.backward()
        ref_loss, our_loss = float(loss), float(f.attrs["loss"])
        ok = abs(our_loss - ref_loss) <= LOSS_RTOL * abs(ref_loss)
        print("  %-6s %-36s ours %.8f  ref %.8f  rel %9.3e  %s" % ("loss", "", our_loss, ref_loss,
              abs(our_loss - ref_loss) / abs(ref_loss), "OK" if ok else "FAIL"))
        if not ok:
            rep.failures.append("loss")

        params = model.params()
        g_ref = {(l, d): t.grad.detach().numpy().copy() for l, d, t in params}
        g_our = {(l, d): f["grads/%s/%s" % (l, d)][()] for l, d, _ in params}
        net_norm = max(float(np.linalg.norm(g)) for g in g_ref.values())
        net_max = max(float(np.abs(g).max()) for g in g_ref.values())
        delta = {}  # the per-element gradient tolerance, inherited by the after-step check
        for l, d, _ in params:
            ours, ref = g_our[(l, d)], g_ref[(l, d)]
            name = "%s.%s" % (l, d)
            if ours.shape != ref.shape or ours.dtype != np.float32:
                rep.fail("grad %s: %s %s, reference float32 %s" % (name, ours.dtype, ours.shape, ref.shape))
                continue
            diff = np.abs(ours.astype(np.float64) - ref)
            delta[(l, d)] = GRAD_ELEM_FRAC * float(np.abs(ref).max()) + GRAD_FLOOR_FRAC * net_max
            norm_ok = np.linalg.norm(diff) <= grad_norm_bound(np.linalg.norm(ref), net_norm)
            bad = np.flatnonzero(~(diff <= delta[(l, d)]))
            # a gradient no larger than the floor is zero in exact arithmetic (a bn's bias before
            # another train-mode bn through a linear layer): its relative error is the noise's, left
            # out of the case's worst
            noise = np.linalg.norm(ref) <= GRAD_FLOOR_FRAC * net_norm
            nrel = rep.line("grad", name, ours, ref, bool(norm_ok) and len(bad) == 0,
                            "  (norm rel > %g)" % GRAD_NORM_RTOL if not norm_ok else "  (zero but for fp noise)" if noise else "",
                            bad)
            if not noise:
                rep.worst_grad = max(rep.worst_grad, nrel)

        # One optimizer step, fresh state: on torch's gradients ("after") and on ours ("step").
        def make_opt(ts):
            if opt == "sgd":
                return torch.optim.SGD(ts, lr=lr, momentum=float(f.attrs["momentum"]))
            if opt == "adam":
                return torch.optim.Adam(ts, lr=lr, betas=(float(f.attrs["beta1"]), float(f.attrs["beta2"])),
                                        eps=float(f.attrs["eps"]))
            raise NetError("dump optimizer '%s' is not sgd or adam" % opt)
        ts = [t for _, _, t in params]
        make_opt(ts).step()
        after_ref = {(l, d): t.detach().numpy().copy() for l, d, t in model.tensors()}
        with torch.no_grad():
            for l, d, t in params:
                t.copy_(before[(l, d)])
                t.grad = torch.from_numpy(g_our[(l, d)]).clone()
        make_opt(ts).step()
        step_ref = {(l, d): t.detach().numpy().copy() for l, d, t in params}

        for l, d, _ in params:
            name, ours = "%s.%s" % (l, d), f["after/%s/%s" % (l, d)][()]
            ref, g = after_ref[(l, d)], g_ref[(l, d)]
            if (l, d) not in delta:
                continue
            dl = delta[(l, d)]
            if opt == "sgd":
                slack = lr * dl
            else:
                eps = float(f.attrs["eps"])
                slack = lr * np.maximum(np.abs(adam_dir(g + dl, eps) - adam_dir(g, eps)),
                                        np.abs(adam_dir(g - dl, eps) - adam_dir(g, eps)))
            compare_elems(rep, "after", name, ours, ref, AFTER_ATOL + AFTER_RTOL * np.abs(ref) + slack)
        for l, d, _ in params:
            name, ours, ref = "%s.%s" % (l, d), f["after/%s/%s" % (l, d)][()], step_ref[(l, d)]
            compare_elems(rep, "step", name, ours, ref, AFTER_ATOL + AFTER_RTOL * np.abs(ref))
        for l, m in model.module_of.items():
            if not isinstance(m, torch.nn.BatchNorm2d):
                continue
            rm, rv = after_ref[(l, "running_mean")], after_ref[(l, "running_var")]
            scale = max(float(np.abs(rm).max()), math.sqrt(float(rv.max())))
            for d, ref in (("running_mean", rm), ("running_var", rv)):
                ours = f["after/%s/%s" % (l, d)][()]
                compare_elems(rep, "after", "%s.%s" % (l, d), ours, ref,
                              RUNSTAT_RTOL * np.abs(ref) + RUNSTAT_RTOL * scale,
                              "" if bn == "train" else "  (frozen: unchanged)")
    finally:
        f.close()
    return rep


# ---------------------------------------------------------------------------------------------
# run: the ctest entry


def check_loaded(rep, init, dump):
    """--init-weights must have taken effect: the dump's /params (before the step) are the init
    file's, bit for bit. Otherwise compare() would happily check lrcnn against its own init."""
    with h5py.File(init, "r") as a, h5py.File(dump, "r") as b:
        names = []
        a["params"].visit(lambda p: names.append(p) if isinstance(a["params"][p], h5py.Dataset) else None)
        for p in names:
            if "params/" + p not in b:
                rep.fail("init: /params/%s of the init file is not in the dump" % p)
            elif not np.array_equal(a["params/" + p][()], b["params/" + p][()]):
                rep.fail("init: /params/%s in the dump differs from the --init-weights file" % p)


def cmd_run(binary, keep=None, only=None):
    passed, failed, rows = 0, 0, []
    with tempfile.TemporaryDirectory(prefix="torch_ref.") as tmp:
        if keep:
            os.makedirs(keep, exist_ok=True)
            tmp = os.path.abspath(keep)
        for i, (name, net, image, batch, opt, plan, bn) in enumerate(cases()):
            if only and only not in name:
                continue
            if net.startswith("gen:"):
                path = os.path.join(tmp, net[4:] + ".net")
                with open(path, "w") as fh:
                    fh.write("# generated by tests/torch_ref.py\n" + GENERATED[net[4:]])
                net = path
            stem = os.path.join(tmp, "case%02d" % i)
            init, dump = stem + ".init.h5", stem + ".dump.h5"
            for old in (init, dump):
                if os.path.exists(old):
                    os.remove(old)
            cmd = [binary, "train", "--net", net, "--batch", str(batch), "--plan", plan, "--iters", "1",
                   "--optimizer", opt, "--seed", "1", "--init-weights", init, "--dump", dump]
            if image:
                cmd[4:4] = ["--image", str(image)]
            if bn:
                cmd += ["--bn", bn]
            print("== %s\n  %s" % (name, " ".join(os.path.basename(a) if a.startswith(tmp) else a for a in cmd)))
            why, worst = None, None
            try:
                cmd_init(net, init, seed=100 + i, image=image)
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
                if p.returncode != 0:
                    why = "lrcnn train exited %d: %s" % (p.returncode, (p.stderr or p.stdout).strip()[-2000:])
                else:
                    rep = cmd_compare(net, dump, bn)
                    check_loaded(rep, init, dump)
                    worst = rep.worst_grad
                    if rep.failures:
                        why = "%d check(s) failed: %s" % (len(rep.failures), ", ".join(rep.failures[:8]))
            except (NetError, OSError, KeyError, ValueError) as e:
                why = "%s: %s" % (type(e).__name__, e)
            if why:
                failed += 1
                print("  CASE FAIL %s: %s" % (name, why))
            else:
                passed += 1
                print("  case ok (worst gradient norm rel %.2e)" % worst)
            rows.append((name, "FAIL" if why else "ok", worst))
    print("\n%-32s %-5s %s" % ("case", "", "worst grad norm rel"))
    for name, st, worst in rows:
        print("%-32s %-5s %s" % (name, st, "-" if worst is None else "%.2e" % worst))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# selftest: the checker on dumps that torch writes, no lrcnn needed. The fake "engine" side is
# computed in float64 and rounded to float32, so the passing cases also show that the tolerances
# accept an honest difference in arithmetic; then single perturbations must be caught by name.

def fake_dump(netfile, init, out, opt, bn, batch=3, seed=7, edit=None):
    _, layers = parse_net(netfile)
    model = RefNet(layers, torch.float64)
    with h5py.File(init, "r") as f:
        assert not load_params(model, f)
    before = {(l, d): t.detach().numpy().astype(np.float32) for l, d, t in model.tensors()}
    gen = torch.Generator().manual_seed(seed)
    c, h, w = layers[0].shape
    x = torch.randn(batch, c, h, w, generator=gen).float()
    classes = int(np.prod(next(l for l in layers if l.name == layers[-1].inputs[0]).shape))
    labels = torch.randint(0, classes, (batch,), generator=gen)
    model.set_bn(bn)
    loss = model(x.double(), labels)
    loss.backward()
    hp = {"lr": 0.01, "momentum": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}
    if opt == "adam":
        hp["lr"] = 1e-3
    grads = {(l, d): t.grad.numpy().astype(np.float32) for l, d, t in model.params()}
    if opt == "sgd":
        o = torch.optim.SGD([t for _, _, t in model.params()], lr=hp["lr"], momentum=hp["momentum"])
    else:
        o = torch.optim.Adam([t for _, _, t in model.params()], lr=hp["lr"], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"])
    o.step()
    after = {(l, d): t.detach().numpy().astype(np.float32) for l, d, t in model.tensors()}
    attrs = dict(hp, net="selftest", plan="layer", bn=bn, optimizer=opt, batch=batch, iteration=0, loss=float(loss))
    if edit:
        edit(attrs, grads, after)

    def fill(f):
        for k, v in attrs.items():
            f.attrs[k] = v
        f.create_dataset("input", data=x.numpy())
        f.create_dataset("labels", data=labels.numpy().astype(np.int64))
        write_group(f, "params", model, before)
        write_group(f, "grads", model, {k: grads.get(k) for k in before})
        write_group(f, "after", model, after)
    write_h5_atomic(out, fill)


def cmd_selftest():
    ok = True
    with tempfile.TemporaryDirectory(prefix="torch_ref_self.") as tmp:
        nets = {}
        for g in ("bn", "add-later", "maxpool", "fc-map", "loss-map"):
            nets[g] = os.path.join(tmp, g + ".net")
            with open(nets[g], "w") as fh:
                fh.write(GENERATED[g])
        for n in ("vgg-small", "resnet-small", "kernels", "squeeze-small"):
            nets[n] = os.path.join(NETS, n + ".net")

        def case(label, net, opt, bn, expect_fail, edit=None):
            nonlocal ok
            init, dump = os.path.join(tmp, "i.h5"), os.path.join(tmp, "d.h5")
            for p in (init, dump):
                if os.path.exists(p):
                    os.remove(p)
            cmd_init(nets[net], init, seed=3)
            fake_dump(nets[net], init, dump, opt, bn, edit=edit)
            print("== selftest %s (%s, %s, bn %s): expect %s" % (label, net, opt, bn, "FAIL" if expect_fail else "pass"))
            rep = cmd_compare(nets[net], dump)
            got = bool(rep.failures)
            if got != bool(expect_fail) or (expect_fail and not any(expect_fail in m for m in rep.failures)):
                ok = False
                print("SELFTEST WRONG: %s: failures %s, expected %s" % (label, rep.failures, expect_fail or "none"))

        def bump(group, key, idx, by):
            def edit(attrs, grads, after):
                t = (grads if group == "grads" else after)[key]
                t.ravel()[idx] += by
            return edit

        for net in ("vgg-small", "resnet-small", "kernels", "squeeze-small", "bn", "add-later", "maxpool", "fc-map", "loss-map"):
            for opt in ("sgd", "adam"):
                for bn in (("train", "frozen") if net in ("bn", "resnet-small") else ("train",)):
                    case("fp64 fake", net, opt, bn, None)

        def lossbump(attrs, grads, after):
            attrs["loss"] *= 1 + 1e-4

        def swapped(attrs, grads, after):
            grads[("conv1", "weight")] = np.ascontiguousarray(np.swapaxes(grads[("conv1", "weight")], 2, 3))

        case("loss +1e-4 rel", "kernels", "sgd", "train", "loss", lossbump)
        case("one grad element +1% of max", "kernels", "sgd", "train", "grad conv2.weight",
             lambda a, g, af: bump("grads", ("conv2", "weight"), 17, 0.01 * np.abs(g[("conv2", "weight")]).max())(a, g, af))
        case("conv kernel transposed", "kernels", "sgd", "train", "grad conv1.weight", swapped)
        case("after element +1e-4", "vgg-small", "adam", "train", "step fc4.weight", bump("after", ("fc4", "weight"), 5, 1e-4))
        case("bn running var", "bn", "sgd", "train", "after bn2.running_var", bump("after", ("bn2", "running_var"), 1, 1e-3))
        case("frozen bn updated its stats", "bn", "sgd", "frozen", "after bn1.running_mean",
             bump("after", ("bn1", "running_mean"), 0, 1e-3))
        case("bn bias grad", "resnet-small", "sgd", "frozen", "grad layer2.0.bn3.bias",
             bump("grads", ("layer2.0.bn3", "bias"), 3, 1e-2))

        def missing(attrs, grads, after):
            del grads[("fc", "bias")]
        case("missing grad dataset", "bn", "sgd", "train", "missing dataset /grads/fc/bias", missing)
    print("selftest %s" % ("passed" if ok else "FAILED"))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd")
    p = sub.add_parser("init", help="write torch-initialized /params for lrcnn --init-weights")
    p.add_argument("netfile")
    p.add_argument("out")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--image", type=int)
    p = sub.add_parser("compare", help="check an lrcnn --dump against torch")
    p.add_argument("netfile")
    p.add_argument("dump")
    p.add_argument("--bn", choices=("train", "frozen"))
    p = sub.add_parser("run", help="every case against LRCNN_BINARY (the ctest entry)")
    p.add_argument("binary")
    p.add_argument("--keep", metavar="DIR", help="write the nets, init files and dumps here and keep them")
    p.add_argument("--only", metavar="TEXT", help="only the cases whose name contains TEXT")
    sub.add_parser("selftest", help="check the checker on fake dumps written by torch")
    a = ap.parse_args()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    try:
        if a.cmd == "init":
            cmd_init(a.netfile, a.out, a.seed, a.image)
            return 0
        if a.cmd == "compare":
            rep = cmd_compare(a.netfile, a.dump, a.bn)
            print("%s: %s" % (a.dump, "%d check(s) failed" % len(rep.failures) if rep.failures else "all match"))
            return 1 if rep.failures else 0
        if a.cmd == "run":
            return cmd_run(a.binary, a.keep, a.only)
        if a.cmd == "selftest":
            return cmd_selftest()
    except (NetError, OSError) as e:
        print("torch_ref.py: %s" % e, file=sys.stderr)
        return 2
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
