#!/usr/bin/python3
"""Figure `arena`: what a plan's memory plan reserves, against what is live and what was measured.

    plots/arena.py [--out DIR] [--torch TORCH_GPU.tsv] results/arena.h5 [more results ...]

A panel per configuration (net, input, batch), a bar per plan: how far the arena its static memory
plan reserves (`prediction/arena`: every buffer at a planned offset) lies above its live peak (the
most bytes live at once, blocks rounded: the lower bound of any memory plan; written above the
bar), in percent. Markers, on the same scale, where a run measured them: the arena the engine
reserved (`measured/arena_size`, a diamond; CPU or GPU); on a GPU the device's bytes in use at the
iteration's peak less the context (`measured/device`, a cross: the arena and what lives outside
it, cuBLAS's workspace, the scratch, data-sized encodings); and with --torch (bench/torch_gpu.py's
table on the same GPU) PyTorch's max_memory_reserved for the same net and batch (a star: its plain
run at `layer`, its torch.utils.checkpoint run at `ckpt-sqrt`). Device memory only.
"""

import csv

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

import common as C


def own_input(net):
    """(h, w) of the net file's own input: what bench/torch_gpu.py measured without --image, in
    tables written before it had an image column."""
    try:
        with open(C.REPO / "nets" / (net + ".net")) as f:
            for line in f:
                words = line.split()
                if words and words[0] == "input":
                    kv = dict(w.split("=", 1) for w in words[2:] if "=" in w)
                    return int(kv["h"]), int(kv["w"])
    except (OSError, KeyError, ValueError):
        pass
    return None


def torch_reserved(path):
    """{(net, h, w, batch, variant): reserved bytes} from bench/torch_gpu.py --tsv."""
    if not path:
        return {}
    try:
        with open(path) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
    except OSError as e:
        C.die(f"--torch {path}: {e.strerror}")
    out = {}
    for r in rows:
        if r.get("reserved_MiB", "-") not in ("-", None):
            hw = tuple(int(v) for v in r["image"].split("x")) if r.get("image") else own_input(r["net"])
            if hw:
                out[(r["net"], hw[0], hw[1], int(r["batch"]), r["variant"])] = float(r["reserved_MiB"]) * 2**20
    return out


def main():
    args, runs = C.parse_args("arena", __doc__, extra=[("--torch", {"metavar": "TSV", "default": None,
                                                                     "help": "bench/torch_gpu.py --tsv on the same GPU"})])
    peer = torch_reserved(args.torch)
    with_arena = [r for r in runs if r.get("arena") and r["replay"]]
    if not with_arena:
        C.die("no run has an arena (prediction/arena: files written since 2026-11-27)")
    groups = C.group_by(with_arena, lambda r: (r["net"], r["image_h"], r["image_w"], r["batch"]))
    keys = list(groups)
    fig, where = C.panel_grid(keys, panel_w=3.6, panel_h=2.6, wrap=3)
    for key in keys:
        ax, rs = where[key], groups[key]
        plans = list(dict.fromkeys(r["plan"] for r in rs))
        by_plan = {}
        for r in rs:  # a measured run wins over a simulated one of the same plan
            if r["plan"] not in by_plan or r.get("measured"):
                by_plan[r["plan"]] = r
        top = 0.5
        for i, plan in enumerate(plans):
            r = by_plan[plan]
            live = r["arena"]["live"]
            def above(b):
                return 100.0 * (b - live) / live
            gap = above(r["arena"]["size"])
            ax.bar(i, gap, 0.6, color="#08519c", edgecolor="white", lw=0.3)
            ax.annotate(C.fmt_bytes(live), (i, max(gap, 0)), xytext=(0, 2), textcoords="offset points",
                        rotation=90, ha="center", va="bottom", fontsize=5.5, color="#555555")
            high = gap
            m = r.get("measured")
            if m and m.get("alloc") == "arena":
                ax.plot(i, above(m["arena_size"]), marker="D", color="#e6550d", markersize=4, linestyle="none")
                high = max(high, above(m["arena_size"]))
            dev = m.get("device") if m else None
            if dev and dev.get("device_peak", -1) >= 0:
                in_use = above(dev["device_peak"] - dev["context_bytes"])
                ax.plot(i, in_use, marker="x", color="k", markersize=5, linestyle="none")
                high = max(high, in_use)
            variant = {"layer": "plain", "ckpt-sqrt": "checkpoint"}.get(plan)
            if variant and (*key, variant) in peer:
                pt = above(peer[(*key, variant)])
                ax.plot(i, pt, marker="*", color="#31a354", markersize=7, linestyle="none")
                high = max(high, pt)
            top = max(top, high)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(range(len(plans)), plans, rotation=60, ha="right")
        ax.set_xlim(-0.6, len(plans) - 0.4)
        ax.set_ylim(min(0, ax.get_ylim()[0]), top * 1.45)
        ax.set_ylabel("above the live peak (%)")
        ax.grid(axis="x", visible=False)
        ax.set_title(f"{C.net_label(key[0])}, {key[1]}×{key[2]}, batch {key[3]}")
    handles = [Patch(color="#08519c", label="arena (predicted; live peak written above)"),
               Line2D([], [], marker="D", color="#e6550d", linestyle="none", label="arena the engine reserved"),
               Line2D([], [], marker="x", color="k", linestyle="none", label="GPU: in use less context"),
               Line2D([], [], marker="*", color="#31a354", linestyle="none", markersize=7,
                      label="PyTorch max_memory_reserved")]
    C.figure_legend(fig, handles, ncol=2)
    C.save(fig, args, "arena", runs)


if __name__ == "__main__":
    main()
