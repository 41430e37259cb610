#!/usr/bin/env python3
"""Checks net files (nets/FORMAT.md) and prints per-layer output shapes and parameters.

    python3 tools/netstat.py nets/vgg16.net [more.net ...] [-q]

An independent stdlib-only reading of FORMAT.md, used to cross-check the C parser (sim/net/net.c)
and the shipped nets. Totals: params, MACs (conv + fc, per image) and forward values (input plus
every conv, pool and fc output, per image). -q prints totals only.
"""
import re
import sys

KEYS = {  # kind: {key: default or None if required}
    "net": None,
    "input": {"c": None, "h": None, "w": None},
    "conv": {"c": None, "k": None, "s": 1, "p": 0, "d": 1, "bias": 1, "groups": 1},
    "relu": {},
    "maxpool": {"k": None, "s": None, "p": 0},
    "avgpool": {"k": None, "s": None, "p": 0},
    "bn": {"eps": 1e-5, "momentum": 0.1},
    "fc": {"c": None, "bias": 1},
    "add": {},
    "gap": {},
    "apool": {"o": None},
    "loss": {"pixel": 0},
    "sigmoid": {},
    "relu6": {},
    "leakyrelu": {"slope": 0.01},
    "silu": {},
    "gelu": {},
    "hardswish": {},
    "hardsigmoid": {},
    "mul": {},
    "dropout": {"p": 0.5, "sample": 0},
    "upsample": {"scale": 2},
    "bilinear": {"scale": 2, "align": 0},
    "gnorm": {"groups": None, "eps": 1e-5},
    "lnorm": {"eps": 1e-5},
    "concat": {},
    "slice": {"start": 0, "c": None},
    "shuffle": {"groups": None},
    "convt": {"c": None, "k": None, "s": 1, "p": 0, "op": 0, "d": 1, "bias": 1, "groups": 1},
}
NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")


class NetError(Exception):
    pass


def parse(path):
    layers, names, prev = [], {}, None
    for ln, raw in enumerate(open(path, encoding="utf-8"), 1):
        toks = raw.split("#", 1)[0].split()
        if not toks:
            continue
        where = f"{path}:{ln}"
        kind = toks[0]
        if kind not in KEYS:
            raise NetError(f"{where}: unknown kind '{kind}'")
        if kind == "net":
            continue
        if len(toks) < 2 or "=" in toks[1] or not NAME.match(toks[1]):
            raise NetError(f"{where}: bad or missing name")
        name = toks[1]
        if name in names:
            raise NetError(f"{where}: duplicate name '{name}'")
        a, ins = {}, None
        for t in toks[2:]:
            k, eq, v = t.partition("=")
            if not eq or not v:
                raise NetError(f"{where}: bad token '{t}'")
            if k == "in":
                ins = v.split(",")
                if len(ins) > 64 or not all(ins):
                    raise NetError(f"{where}: more than 64 inputs, or an empty name")
            elif k not in KEYS[kind]:
                raise NetError(f"{where}: unknown key '{k}' for {kind}")
            else:
                try:
                    if kind == "conv" and k in ("k", "s", "p", "d") and "x" in v:  # HxW
                        a[k] = tuple(int(t) for t in v.split("x", 1))
                    else:
                        a[k] = float(v) if k in ("eps", "momentum", "slope") or (kind, k) == ("dropout", "p") else int(v)
                except ValueError:
                    raise NetError(f"{where}: bad value '{v}'")
        for k, dflt in KEYS[kind].items():
            if k not in a:
                if dflt is None and not (k == "s" and "pool" in kind):
                    raise NetError(f"{where}: missing required key '{k}'")
                a[k] = dflt
        if kind in ("maxpool", "avgpool") and a["s"] is None:
            a["s"] = a["k"]
        if kind == "input":
            if layers:
                raise NetError(f"{where}: input must be the first layer and unique")
            ins = []
        elif ins is None:
            if prev is None:
                raise NetError(f"{where}: no previous layer")
            ins = [prev]
        need = (2, 64) if kind in ("add", "concat") else (2, 2) if kind == "mul" else (0, 0) if kind == "input" else (1, 1)
        if not need[0] <= len(ins) <= need[1]:
            raise NetError(f"{where}: {kind} takes {need[0]} to {need[1]} input(s)")
        names[name] = len(layers)
        layers.append(dict(kind=kind, name=name, line=ln, a=a, ins=ins))
        prev = name
    if not layers or layers[0]["kind"] != "input":
        raise NetError(f"{path}: no input layer")
    return topo(layers, names, path)


def topo(layers, names, path):
    for l in layers:
        for i in l["ins"]:
            if i not in names:
                raise NetError(f"{path}:{l['line']}: unknown input '{i}'")
    order, state = [], {}

    def visit(n, stack):
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            raise NetError(f"{path}:{layers[names[n]]['line']}: cycle through '{n}'")
        state[n] = 1
        for i in layers[names[n]]["ins"]:
            visit(i, stack)
        state[n] = 2
        order.append(layers[names[n]])

    for l in layers:
        visit(l["name"], [])
    return order


def out_size(n, k, s, p, d=1):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def infer(layers, path):
    shp = {}
    tot = dict(params=0, macs=0, values=0)
    rows = []
    for l in layers:
        k, a, where = l["kind"], l["a"], f"{path}:{l['line']}"
        ins = [shp[i] for i in l["ins"]]
        x = ins[0] if ins else None
        params = macs = 0
        if k == "input":
            o = (a["c"], a["h"], a["w"])
        elif k == "conv":  # k, s, p, d: a number, or (along H, along W)
            c, h, w = x
            hw = [[v[i] if isinstance(v, tuple) else v for v in (a["k"], a["s"], a["p"], a["d"])] for i in (0, 1)]
            o = (a["c"], out_size(h, *hw[0]), out_size(w, *hw[1]))
            if c % a["groups"] or a["c"] % a["groups"]:
                raise NetError(f"{where}: groups={a['groups']} must divide {c} and {a['c']} channels")
            params = c // a["groups"] * a["c"] * hw[0][0] * hw[1][0] + (a["c"] if a["bias"] else 0)
            macs = c // a["groups"] * hw[0][0] * hw[1][0] * o[0] * o[1] * o[2]
        elif k == "convt":  # PyTorch's ConvTranspose2d
            c, h, w = x
            o = tuple([a["c"]] + [(v - 1) * a["s"] - 2 * a["p"] + a["d"] * (a["k"] - 1) + a["op"] + 1 for v in (h, w)])
            if c % a["groups"] or a["c"] % a["groups"]:
                raise NetError(f"{where}: groups={a['groups']} must divide {c} and {a['c']} channels")
            params = c * (a["c"] // a["groups"]) * a["k"] ** 2 + (a["c"] if a["bias"] else 0)
            macs = c * (a["c"] // a["groups"]) * a["k"] ** 2 * h * w
        elif k in ("maxpool", "avgpool"):
            c, h, w = x
            o = (c, out_size(h, a["k"], a["s"], a["p"]), out_size(w, a["k"], a["s"], a["p"]))
        elif k == "fc":
            n_in = x[0] * x[1] * x[2]
            o = (a["c"], 1, 1)
            params = n_in * a["c"] + (a["c"] if a["bias"] else 0)
            macs = n_in * a["c"]
        elif k in ("bn", "lnorm"):
            o, params = x, 2 * x[0]
        elif k == "gnorm":
            if x[0] % a["groups"]:
                raise NetError(f"{where}: groups={a['groups']} must divide {x[0]} channels")
            o, params = x, 2 * x[0]
        elif k == "add":
            if any(i != ins[0] for i in ins):
                raise NetError(f"{where}: add inputs differ: {ins}")
            o = x
        elif k == "gap":
            o = (x[0], 1, 1)
        elif k == "apool":
            o = (x[0], a["o"], a["o"])
        elif k == "mul":
            o = ins[1] if ins[0][1:] == (1, 1) else ins[0]
        elif k == "concat":
            if any(i[1:] != ins[0][1:] for i in ins):
                raise NetError(f"{where}: concat of {ins}")
            o = (sum(i[0] for i in ins),) + x[1:]
        elif k in ("upsample", "bilinear"):
            o = (x[0], x[1] * a["scale"], x[2] * a["scale"])
        elif k == "slice":
            if a["start"] + a["c"] > x[0]:
                raise NetError(f"{where}: slice past the input's {x[0]} channels")
            o = (a["c"],) + x[1:]
        elif k == "shuffle" and x[0] % a["groups"]:
            raise NetError(f"{where}: {a['groups']} groups do not divide {x[0]} channels")
        else:  # relu and the other activations, loss
            o = x
        if min(o) < 1:
            raise NetError(f"{where}: output of '{l['name']}' is empty: {o}")
        shp[l["name"]] = o
        tot["params"] += params
        tot["macs"] += macs
        if k in ("input", "conv", "convt", "maxpool", "avgpool", "fc"):
            tot["values"] += o[0] * o[1] * o[2]
        rows.append((l["name"], k, o, params, macs))
    return rows, tot


def main(argv):
    quiet = "-q" in argv
    paths = [p for p in argv if p != "-q"]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    rc = 0
    for path in paths:
        try:
            rows, tot = infer(parse(path), path)
        except (NetError, OSError) as e:
            print(e, file=sys.stderr)
            rc = 1
            continue
        if not quiet:
            print(f"{'layer':28s} {'kind':8s} {'C x H x W':>16s} {'params':>12s} {'macs':>16s}")
            for name, k, (c, h, w), params, macs in rows:
                shape = f"{c}x{h}x{w}"
                print(f"{name:28s} {k:8s} {shape:>16s} {params:12,d} {macs:16,d}")
        print(f"{path}: {len(rows)} layers, params {tot['params']:,}, "
              f"macs {tot['macs']:,}, forward values {tot['values']:,}")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
