#!/usr/bin/env python3
"""`lrcnn lower` against geometry computed here, independently of lrcnn's band arithmetic.

    python3 tests/test_lower.py LRCNN_BINARY

For row plans on test nets (2PS and OverL, equal and different band counts, a custom segment,
BatchNorm in train mode), the JSON must describe an executable plan:
  * the segments cover layers 1..n-1 in order, each once;
  * every band of every row segment holds, of each input of each layer it computes, the rows that
    layer's window reads (computed here from the net file: rows [a*s - p, (b-1)*s - p + d(k-1) + 1)
    clipped to the map), as the producer's held rows in that band or the band's segment input;
  * OverL: band r computes exactly its cut [cuts[r], cuts[r+1]) of the segment's last layer;
    2PS: no row of any layer is computed by two bands, and the last layer's rows are all computed;
  * the rows owned for statistics partition every layer's map over the bands, in order;
  * a 2PS boundary handed on lies inside what the band holds;
  * in stages (bn=train), a map kept whole is read whole by later stages, so only the reads of
    one stage from the band are held to the above; under OverL the rows a band back-propagates lie
    inside what it holds, include its own rows of each kept gradient and BatchNorm, and take the
    gradient rows a consumer of the same backward stage spreads to its producer.
Also: ckpt, offload lists and modifiers come through; the prediction is `lrcnn sim`'s replay (its
peak, the bytes by category when the backward begins and at their most, a torch plan's reserved
bytes); bad input is
exit 2 with one line.
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_net  # noqa: E402

NETS = os.path.join(os.path.dirname(HERE), "nets")
failures = 0


def check(ok, what):
    global failures
    print("%s %s" % ("ok  " if ok else "FAIL", what))
    failures += not ok


def window(layer):
    """(k, s, p, d) along H of a layer of the kinds these nets use; identity for pointwise ones."""
    a = layer.args
    if layer.kind in ("conv", "maxpool", "avgpool"):
        first = lambda v: v[0] if isinstance(v, (tuple, list)) else v  # noqa: E731
        return first(a["k"]), first(a["s"]), first(a["p"]), first(a.get("d", 1))
    return 1, 1, 0, 1


def reads(layer, rows, h_in):
    k, s, p, d = window(layer)
    lo, hi = rows[0] * s - p, (rows[1] - 1) * s - p + d * (k - 1) + 1
    return max(lo, 0), min(hi, h_in)


def inside(inner, outer):
    return inner[0] >= inner[1] or (outer[0] <= inner[0] and inner[1] <= outer[1])


def through_band(seg, cons, prod):
    """Whether layer cons reads prod's rows from the band's own buffer rather than from a whole map:
    always, but in stages (bn=train), where a map kept whole is read whole by the stages after its
    own (a map rebuilt in the backward is read through the band there)."""
    st = seg.get("stages")
    return not st or st[prod]["map"] in ("band", "rebuilt") or st[prod]["forward"] == st[cons]["forward"]


def check_grads(seg, geo, by_name, problems):
    """OverL in stages: a band back-propagates rows inside what it holds, each kept gradient's and
    statistics layer's own rows among them, and where a consumer's backward stage is its producer's,
    the producer's gradient rows take what the consumer's backward spreads to (2PS hands the rows
    past its own on to the next band instead)."""
    st = seg.get("stages")
    if not st or seg["policy"] != "overl":
        return
    for r, band in enumerate(geo["band"]):
        for name, rows in band["layers"].items():
            g = rows["grad"]
            if not inside(g, rows["held"]):
                problems.append("band %d: %s back-propagates %s outside %s" % (r, name, g, rows["held"]))
            if (st[name]["grad_whole"] or by_name[name].kind == "bn") and not inside(rows["own"], g):
                problems.append("band %d: %s back-propagates %s, not its own rows %s" % (r, name, g, rows["own"]))
            for src in by_name[name].inputs:
                if g[0] >= g[1] or src not in st or st[src]["backward"] != st[name]["backward"]:
                    continue
                spread = reads(by_name[name], g, by_name[src].shape[1])
                if not inside(spread, band["layers"][src]["grad"]):
                    problems.append("band %d: %s's gradient reaches %s rows %s, it back-propagates %s" % (
                        r, name, src, spread, band["layers"][src]["grad"]))


def check_geometry(label, seg, geo, by_name):
    names = [n for n in geo["band"][0]["layers"]]
    bands, last = geo["band"], seg["last"]
    problems = []
    for r, band in enumerate(bands):
        for name in names:
            lay = by_name[name]
            out = band["layers"][name]["out"]
            if out[0] >= out[1]:
                continue
            for src in lay.inputs:
                if src in band["layers"] and not through_band(seg, name, src):
                    continue
                need = reads(lay, out, by_name[src].shape[1])
                have = band["input"] if src == seg["input"] else band["layers"][src]["held"] if src in band["layers"] else None
                if have is None or not inside(need, have):
                    problems.append("band %d: %s reads %s rows %s, holds %s" % (r, name, src, need, have))
            if seg["policy"] == "2ps" and not inside(band["layers"][name]["keep"], band["layers"][name]["held"]):
                problems.append("band %d: %s hands on %s outside %s" % (r, name, band["layers"][name]["keep"],
                                                                        band["layers"][name]["held"]))
    check_grads(seg, geo, by_name, problems)
    for name in names:
        h = by_name[name].shape[1]
        own = [b["layers"][name]["own"] for b in bands]
        if own[0][0] != 0 or own[-1][1] != h or any(own[i][1] != own[i + 1][0] for i in range(len(own) - 1)):
            problems.append("%s: owned rows %s do not partition 0..%d" % (name, own, h))
        outs = sorted(tuple(b["layers"][name]["out"]) for b in bands if b["layers"][name]["out"][0] < b["layers"][name]["out"][1])
        if seg["policy"] == "2ps" and any(outs[i][1] > outs[i + 1][0] for i in range(len(outs) - 1)):
            problems.append("%s: 2PS bands compute rows twice: %s" % (name, outs))
    cuts = geo["cuts"]
    for r, band in enumerate(bands):
        out = band["layers"][last]["out"]
        if seg["policy"] == "overl" and out != [cuts[r], cuts[r + 1]]:
            problems.append("OverL band %d computes %s of %s, its cut is %s" % (r, out, last, cuts[r:r + 2]))
    if seg["policy"] == "2ps":
        got = sum(b["layers"][last]["out"][1] - b["layers"][last]["out"][0] for b in bands)
        if got != by_name[last].shape[1]:
            problems.append("2PS bands compute %d of %s's %d rows" % (got, last, by_name[last].shape[1]))
    check(not problems, "%s: %d bands, every layer's window read from what the band holds%s" % (
        label, len(bands), "" if not problems else ": " + "; ".join(problems[:3])))


def lower(lrcnn, *args):
    r = subprocess.run([lrcnn, "lower", *args], capture_output=True, text=True)
    return r, (json.loads(r.stdout) if r.returncode == 0 and r.stdout else None)


def main(lrcnn):
    cases = [("vgg-small", "2ps:3", None, 32), ("vgg-small", "overl:4", None, 32), ("vgg-small", "rows(overl,fp=2,bp=4)@conv1_1..pool3", None, 32),
             ("vgg-small", "2ps-h:4", None, 32), ("resnet-small", "2ps:2", "train", 32), ("resnet-small", "overl:3", "train", 35),
             ("kernels", "2ps:3", None, None), ("kernels", "overl:4", None, None), ("vgg-small", "2ps:7", None, 61),
             ("vgg-small", "overl:9", None, 77)]
    for net, plan, bn, image in cases:
        path = os.path.join(NETS, net + ".net")
        _, layers = torch_net.parse_net(path, image)
        by_name = {l.name: l for l in layers}
        r, d = lower(lrcnn, "--net", path, "--plan", plan, "--batch", "2", *(["--bn", bn] if bn else []),
                     *(["--image", str(image)] if image else []))
        if d is None:
            check(False, "%s %s: %s" % (net, plan, r.stderr.strip()))
            continue
        names = [l["name"] for l in d["layers"]]
        covered = []
        for s in d["segments"]:
            covered += names[names.index(s["first"]):names.index(s["last"]) + 1]
        check(covered == names[1:], "%s %s: segments cover layers 1..n-1 in order, each once" % (net, plan))
        for s in (s for s in d["segments"] if s["mode"] == "rows"):
            label = "%s %s (%s%s)" % (net, plan, s["policy"], ", %dx%d" % (image, image) if image else "")
            check_geometry(label + " forward", s, s["forward"], by_name)
            if s["backward"] != "forward":
                check_geometry(label + " backward", s, s["backward"], by_name)
    r, d = lower(lrcnn, "--net", "vgg-small", "--plan", "ckpt-sqrt+gist", "--bn", "frozen")
    check(d is not None and any(s["mode"] == "ckpt" for s in d["segments"]) and d["encodings"] == ["gist"] and d["bn"] == "frozen",
          "ckpt-sqrt+gist bn=frozen: ckpt segments, the encoding, the bn mode")
    r, d = lower(lrcnn, "--net", "vgg-small", "--plan", "offload(conv1_1:1:2, pool1)@conv1_1..loss")
    maps = d["segments"][0].get("maps") if d else None
    check(maps == [{"layer": "conv1_1", "free": 1, "fetch": 2}, {"layer": "pool1", "free": 0, "fetch": 1}],
          "an offload list: which maps, released and fetched when: %s" % maps)
    tmp = tempfile.mkdtemp(prefix="lrcnn-lower-")
    import h5py
    for plan, device in (("2ps:3", "cpu"), ("ckpt-sqrt+dpr:fp16+torch", "cpu"), ("overl:2+torch2", "h100")):
        args = ["--net", "resnet-small", "--plan", plan, "--batch", "4", "--bn", "frozen", "--device", device]
        r, d = lower(lrcnn, *args)
        h5 = os.path.join(tmp, "sim_%s.h5" % device)
        subprocess.run([lrcnn, "sim", *args, "-o", h5, "--force"], check=True, capture_output=True)
        with h5py.File(h5, "r") as f:
            rep = f["runs/00000/prediction/replay"]
            cats = [c.decode() if isinstance(c, bytes) else c for c in f["categories"][()]]
            want = {"peak": int(rep.attrs["peak"]), "at_backward": dict(zip(cats, (int(v) for v in rep["at_backward"][()]))),
                    "max": dict(zip(cats, (int(v) for v in rep["max"][()])))}
            if "reserved" in rep.attrs:
                want["reserved"] = int(rep.attrs["reserved"])
        check(d is not None and d["prediction"] == want, "%s on %s: the prediction is lrcnn sim's replay (%s)" % (
            plan, device, d["prediction"] if d else r.stderr.strip()))
    out = os.path.join(tmp, "p.json")
    r, _ = lower(lrcnn, "--net", "vgg-small", "--plan", "2ps:3", "-o", out)
    check(r.returncode == 0 and json.load(open(out))["plan"] == "2ps:3", "-o writes the file")
    r, _ = lower(lrcnn, "--net", "vgg-small", "--plan", "2ps:3", "-o", out)
    check(r.returncode == 2 and "exists" in r.stderr and len(r.stderr.strip().splitlines()) == 1, "an existing file is kept: %s" % r.stderr.strip())
    r, _ = lower(lrcnn, "--net", "vgg-small", "--plan", "2ps:99")
    check(r.returncode == 2 and not r.stdout and len(r.stderr.strip().splitlines()) == 1, "a bad plan: exit 2, one line, nothing on stdout")
    print("FAILED" if failures else "all lowerings check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
