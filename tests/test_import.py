#!/usr/bin/env python3
"""The importer (tools/torch2net.py) against PyTorch and against the shipped nets.

    python3 tests/test_import.py LRCNN_BINARY

1. Every module it converts — torchvision's mobilenet_v2, mobilenet_v3_large, resnet50, vgg16, densenet121, efficientnet_b0,
   convnext_tiny, mnasnet1_0, shufflenet_v2_x0_5 and x1_0 (channel slices and shuffles), squeezenet1_0 and 1_1
   (ceil-mode pooling), googlenet and inception_v3 (their main
   output: the auxiliary heads, which only training runs, are left out and not counted), the segmentation
   models fcn_resnet50, deeplabv3_resnet50 and lraspp_mobilenet_v3_large (a dict's 'out', dilated backbones,
   bilinear interpolation to the input's size) and the test modules
   of tests/import_cases.py — has, read back by lrcnn's own parser (`lrcnn sim`), the parameters
   of the PyTorch module and its multiply-accumulates per image (counted on the module by forward
   hooks: a convolution's output values x its input channels per group x kernel area, a Linear's
   in x out).
1b. SqueezeNet 1.0 and 1.1, GoogLeNet, Inception-v3, FCN-ResNet50, DeepLabV3-ResNet50, LR-ASPP and ShuffleNetV2
   x0.5 and x1.0, imported small, run `layer` and
   `2ps:4` on the engine for one iteration: measured peak = replay, gradients as `layer`'s within the
   bound tests/torch_ref.py holds two fp32 sums in different orders to (relative 1e-4, plus a floor of
   1e-6 of the net's largest gradient norm for gradients that vanish towards the input).
1c. ShuffleNetV2 and tests/import_cases.py:Channels (every spelling of a channel split and shuffle)
   compute the module's logits: the imported net rebuilt in PyTorch by tests/torch_net.py with the
   module's weights.
2. torchvision's vgg16 (without its dropouts) and resnet50 come out as nets/vgg16.net and
   nets/resnet50.net layer for layer: the same kinds, keys (defaults filled in) and connections,
   names aside (the importer names after torchvision's modules, the shipped files after the paper).
3. nets/mobilenetv2.net, nets/mobilenetv3.net, nets/densenet121.net, nets/efficientnetb0.net, nets/convnext-tiny.net,
   nets/unet.net and
   nets/unet-paper.net (tools/unet.py) are what the importer makes now.
4. What it cannot represent is refused: exit 2, one line naming the node, no file written, and an
   existing file is never replaced without --force.
"""
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn as nn
import torchvision

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, HERE)
import import_cases  # noqa: E402
import netstat  # noqa: E402
import torch_net  # noqa: E402
from torch_ref import grad_norm_bound  # noqa: E402

TOOL = os.path.join(ROOT, "tools", "torch2net.py")
CASES = os.path.join(HERE, "import_cases.py")
failures = 0


def check(ok, what):
    global failures
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    failures += not ok


def convert(model, out, *extra):
    return subprocess.run([sys.executable, TOOL, model, "-o", out, *extra], capture_output=True, text=True)


def dump_grads(path):
    """Every parameter gradient of an `lrcnn train --dump` file, as float64, by its path."""
    with h5py.File(path, "r") as f:
        out = {}
        f["grads"].visititems(lambda p, d: out.__setitem__(p, d[()].astype("float64")) if isinstance(d, h5py.Dataset) else None)
        return out


def grad_excess(ours, ref):
    """How far ours is from ref against torch_ref.grad_norm_bound, for two fp32 sums in different orders:
    per tensor ||g - g_ref|| <= GRAD_NORM_RTOL ||g_ref|| + GRAD_FLOOR_FRAC * (the net's largest ||g_ref||),
    the floor for gradients that vanish towards the input (SqueezeNet 1.0 at 64x64: its first conv's is
    6e5x smaller than its last's, and fp32's rounding alone moved it by 4e-2 of itself in PyTorch, 9e-3
    in lrcnn's `layer`, against float64). The worst tensor's ratio to its bound (<= 1 passes; inf when
    the two differ in tensors or shapes)."""
    if ours.keys() != ref.keys() or any(ours[k].shape != ref[k].shape for k in ref):
        return float("inf")
    norm = {k: float(np.linalg.norm(g)) for k, g in ref.items()}
    largest = max(norm.values(), default=0)

    def ratio(k):
        d, bound = float(np.linalg.norm(ours[k] - ref[k])), grad_norm_bound(norm[k], largest)
        return d / bound if bound > 0 else (0.0 if d == 0 else float("inf"))
    return max((ratio(k) for k in ref), default=0.0)


def lrcnn_counts(lrcnn, path, image):
    r = subprocess.run([lrcnn, "sim", "--net", path, "--image", str(image), "--batch", "2"], capture_output=True, text=True)
    m = re.search(r"net: (\d+) layers, (\d+) parameters, (\d+) multiply-accumulates", r.stdout)
    if r.returncode or not m:
        return None, None, r.stderr.strip() or r.stdout[:200]
    return int(m.group(2)), int(m.group(3)), ""


def torch_counts(model, image):
    """Parameters of the modules the forward runs (in eval mode: a training-only auxiliary head, which
    the importer leaves out, is not counted) and multiply-accumulates per image."""
    macs, ran = [], set()

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            macs.append(out[0].numel() * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1])
        elif isinstance(m, nn.ConvTranspose2d):  # every input value times each tap it feeds
            macs.append(inp[0][0].numel() * (m.out_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1])
        elif isinstance(m, nn.Linear):  # at each place of a channels-last map (ConvNeXt's), else once
            macs.append(out[0].numel() // m.out_features * m.in_features * m.out_features)
    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear))]
    hs += [m.register_forward_hook(lambda m, i, o: ran.add(id(m))) for m in model.modules()]
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, 3, image, image))
    for h in hs:
        h.remove()
    params = {id(p): p.numel() for m in model.modules() if id(m) in ran for p in m.parameters(recurse=False)}
    return sum(params.values()), sum(macs)


def same_function(path, model, image):
    """The worst difference between the module's logits and those of the net imported from it, the
    net rebuilt in PyTorch by tests/torch_net.py (independently of lrcnn) with the module's own
    weights (the importer names layers after modules), batch norm in eval mode on both sides."""
    _, layers = torch_net.parse_net(path)
    ref = torch_net.RefNet(layers)
    state = model.state_dict()
    for name, m in ref.module_of.items():
        for k, t in m.state_dict().items():
            t.copy_(state[name + "." + k])
    model.eval(), ref.set_bn("frozen")
    x = torch.randn(2, 3, image, image, generator=torch.Generator().manual_seed(5))
    v = {}
    with torch.no_grad():
        want = model(x)
        for l in layers:
            if l.kind == "loss":
                got = v[l.inputs[0]]
                break
            v[l.name] = ref.layer_out(l, [v[i] for i in l.inputs], x, None)
    return float((got.reshape(want.shape) - want).abs().max() / want.abs().max())


def structure(path):
    """(kind, keys with defaults, input positions) per layer, in the parser's order."""
    layers = netstat.parse(path)
    pos = {l["name"]: i for i, l in enumerate(layers)}
    return [(l["kind"], sorted(l["a"].items()), [pos[i] for i in l["ins"]]) for l in layers]


def main(lrcnn):
    tmp = tempfile.mkdtemp(prefix="lrcnn-import-")
    models = [("mobilenet_v2", torchvision.models.mobilenet_v2, 224),
              ("mobilenet_v3_large", torchvision.models.mobilenet_v3_large, 224), ("resnet50", torchvision.models.resnet50, 224),
              ("vgg16", torchvision.models.vgg16, 224), ("densenet121", torchvision.models.densenet121, 224),
              ("efficientnet_b0", torchvision.models.efficientnet_b0, 224), ("convnext_tiny", torchvision.models.convnext_tiny, 224),
              (CASES + ":Functional", import_cases.Functional, 20), (CASES + ":Activations", import_cases.Activations, 24),
              (CASES + ":Decoder", import_cases.Decoder, 12), (CASES + ":UNet", import_cases.UNet, 16),
              (CASES + ":Cat3", import_cases.Cat3, 10), (CASES + ":UpConv", import_cases.UpConv, 16),
              (CASES + ":Bilinear", import_cases.Bilinear, 12), (CASES + ":Norms", import_cases.Norms, 12),
              (CASES + ":Factorized", import_cases.Factorized, 14), (CASES + ":LongNames", import_cases.LongNames, 10),
              (CASES + ":FunctionalPools", import_cases.FunctionalPools, 15), ("mnasnet1_0", torchvision.models.mnasnet1_0, 224),
              # ceil-mode max pooling; GoogLeNet's and Inception-v3's auxiliary heads left out (their main output)
              ("squeezenet1_0", torchvision.models.squeezenet1_0, 224), ("squeezenet1_1", torchvision.models.squeezenet1_1, 96),
              ("googlenet", torchvision.models.googlenet, 224), ("inception_v3", torchvision.models.inception_v3, 299),
              # channel slices (x.chunk) and shuffles
              ("shufflenet_v2_x0_5", torchvision.models.shufflenet_v2_x0_5, 224),
              ("shufflenet_v2_x1_0", torchvision.models.shufflenet_v2_x1_0, 224), (CASES + ":Channels", import_cases.Channels, 10)]
    seg = torchvision.models.segmentation  # dict outputs, dilated backbones, bilinear interpolation to the input's size
    models += [(name, lambda f=getattr(seg, name): f(weights=None, weights_backbone=None), 64)
               for name in ("fcn_resnet50", "deeplabv3_resnet50", "lraspp_mobilenet_v3_large")]
    pixel = (":Seg", ":UpConv", ":Bilinear", ":unet", ":unet_paper", "fcn_resnet50", "deeplabv3_resnet50", "lraspp_mobilenet_v3_large")
    models.append((CASES + ":Seg", import_cases.Seg, 16))
    unet_py = os.path.join(ROOT, "tools", "unet.py")
    sys.path.insert(0, os.path.dirname(unet_py))
    import unet  # noqa: E402
    models += [(unet_py + ":unet", unet.unet, 64), (unet_py + ":unet_paper", unet.unet_paper, 64)]
    for spec, make, image in models:
        out = os.path.join(tmp, spec.rsplit(":", 1)[-1] + ".net")
        r = convert(spec, out, "--image", str(image), *(["--pixel-loss"] if spec.endswith(pixel) else []))
        if r.returncode:
            check(False, "%s: converted (%s)" % (spec, r.stderr.strip()))
            continue
        ours_p, ours_m, why = lrcnn_counts(lrcnn, out, image)
        ref_p, ref_m = torch_counts(make(), image)
        check(ours_p == ref_p and ours_m == ref_m, "%s @ %d: lrcnn reads %s parameters, %s MACs; PyTorch %d, %d %s"
              % (os.path.basename(spec), image, ours_p, ours_m, ref_p, ref_m, why))

    # the models whose import needed ceil-mode pooling or the main output run, small, on the engine:
    # `layer` and `2ps:4`, one iteration, measured peak = replay, gradients equal (BN frozen: train
    # mode's fp32 floor on an untrained net is far above any tolerance, tools/fp64_floor.py)
    # channel selections as the module computes them: the imported lines, in PyTorch, give its logits
    for spec, make, image in ((CASES + ":Channels", import_cases.Channels, 10), ("shufflenet_v2_x0_5", torchvision.models.shufflenet_v2_x0_5, 64)):
        out = os.path.join(tmp, spec.rsplit(":", 1)[-1] + "-same.net")
        torch.manual_seed(3)
        r = convert(spec, out, "--image", str(image))
        d = same_function(out, make(), image) if not r.returncode else float("inf")
        check(d <= 1e-5, "%s: the imported net computes the module's logits (worst difference %.1e of their largest)" % (spec, d))

    for name, image in (("squeezenet1_0", 64), ("squeezenet1_1", 64), ("googlenet", 64), ("inception_v3", 80),
                        ("fcn_resnet50", 64), ("deeplabv3_resnet50", 64), ("lraspp_mobilenet_v3_large", 64),
                        ("shufflenet_v2_x0_5", 64), ("shufflenet_v2_x1_0", 64)):
        net = os.path.join(tmp, name + "-small.net")
        v = convert(name, net, "--image", str(image), *(["--pixel-loss"] if name.endswith(pixel) else []))
        runs, grads = [], []
        for plan in ("layer", "2ps:4"):
            res, dump = os.path.join(tmp, "%s-%s.h5" % (name, plan)), os.path.join(tmp, "%s-%s-dump.h5" % (name, plan))
            if not v.returncode:
                v = subprocess.run([lrcnn, "train", "--net", net, "--batch", "2", "--plan", plan, "--iters", "1", "--bn", "frozen",
                                    "-o", res, "--dump", dump], capture_output=True, text=True)
            if v.returncode:
                break
            with h5py.File(res, "r") as f:
                g = next(iter(f["runs"].values()))
                runs.append((plan, int(g["measured"].attrs["peak"]), int(g["prediction/replay"].attrs["peak"])))
            grads.append(dump_grads(dump))
        dev = grad_excess(grads[1], grads[0]) if len(grads) == 2 else float("inf")
        ok = len(runs) == 2 and all(m == p for _, m, p in runs) and dev <= 1
        check(ok, "%s at %d: layer and 2ps:4 run, measured = replay, gradients as layer's within fp32's summation order "
                  "(worst %.2g of the bound): %s" % (name, image, dev, "; ".join("%s %d/%d" % x for x in runs)
                                                     or (v.stderr.strip() or "no runs")[-200:]))

    for name, extra in (("vgg16", ["--no-dropout"]), ("resnet50", [])):
        out = os.path.join(tmp, name + "-shipped.net")
        r = convert(name, out, *extra)
        same = not r.returncode and structure(out) == structure(os.path.join(ROOT, "nets", name + ".net"))
        check(same, "torchvision %s %s= nets/%s.net, layer for layer %s" % (name, " ".join(extra) + " " if extra else "", name,
                                                                          r.stderr.strip()))

    body = lambda p: [l for l in open(p) if not l.startswith("#")]  # noqa: E731
    for model, name in (("mobilenet_v2", "mobilenetv2"), ("mobilenet_v3_large", "mobilenetv3"), ("densenet121", "densenet121"),
                        ("efficientnet_b0", "efficientnetb0"), ("convnext_tiny", "convnext-tiny")):
        out = os.path.join(tmp, name + ".net")
        convert(model, out, "--name", name)
        check(body(out) == body(os.path.join(ROOT, "nets", name + ".net")), "nets/%s.net is the importer's output" % name)
    for factory, name in (("unet", "unet"), ("unet_paper", "unet-paper")):
        out = os.path.join(tmp, name + "-512.net")
        convert(unet_py + ":" + factory, out, "--pixel-loss", "--image", "512", "--name", name)
        check(body(out) == body(os.path.join(ROOT, "nets", name + ".net")), "nets/%s.net is the importer's output" % name)

    refusals = [("Cat65", "at most 64"), ("CatRows", "dimension 2"), ("Mul", "only of two tensors"), ("nonsquare", "not square"), ("reflect", "padding_mode"),
                ("ceil_pool", "ceil_mode"), ("bicubic", "bicubic"), ("linear_on_map", "Linear on a 4-d"),
                ("gelu_tanh", "approximate"), ("layernorm_last", "LayerNorm over the last"),
                ("mean_channels", "only over H and W"), ("permute_hw", "only to channels-last"),
                ("chunk_rows", "chunk along dimension 2"), ("view_5d", "only a channel shuffle")]
    for case, says in refusals:
        out = os.path.join(tmp, case + ".net")
        r = convert(CASES + ":" + case, out)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 2 and len(lines) == 1 and says in lines[0] and "node '" in lines[0] and not os.path.exists(out)
        check(ok, "refused %s: exit %d, %s" % (case, r.returncode, lines[-1] if lines else "(no message)"))
    seg = open(os.path.join(tmp, "Seg.net")).read().splitlines()[-1].split()
    check(seg[0] == "loss" and "pixel=1" in seg, "--pixel-loss ends the net in: %s" % " ".join(seg))
    r = convert("resnet50", os.path.join(tmp, "r.net"), "--pixel-loss")
    check(r.returncode == 2 and "2-d tensor" in r.stderr, "--pixel-loss on a classifier: %s" % r.stderr.strip())
    keep = os.path.join(tmp, "keep.net")
    open(keep, "w").write("mine\n")
    r = convert("resnet50", keep)
    check(r.returncode == 2 and open(keep).read() == "mine\n", "an existing file is kept without --force: %s" % r.stderr.strip())
    r = convert("no_such_model", os.path.join(tmp, "x.net"))
    check(r.returncode == 2 and "not a torchvision model" in r.stderr, "unknown model: %s" % r.stderr.strip())
    print("FAILED" if failures else "all imports check")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: test_import.py LRCNN_BINARY")
    sys.exit(main(sys.argv[1]))
