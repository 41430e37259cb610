#!/usr/bin/python3
"""Figure `pareto`: the planner's memory/time frontier, with every preset as a point beside it.

    plots/pareto.py [--out DIR] PARETO.h5 [PARETO.h5 ...]

Reads files written by `lrcnn plan --pareto` (results/SCHEMA.md: root kind = pareto), one panel
each. Grey dots: every plan the planner evaluated and timed; the step line: the frontier (no plan
has both a smaller peak and a smaller predicted time); diamonds: the presets in their family's colour,
the common ones named where no other name or marker is. A time axis spanning 3x or more is logarithmic.
x: predicted peak (replay, the engine's allocated bytes); y: predicted iteration time, from the
file's time model (a calibrated profile, or the named roofline).
"""

import argparse
import math

import h5py
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.text import Text
from matplotlib.transforms import Bbox

import common as C


def read(path):
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        C.die(f"{path}: cannot read: {e}")
    with f:
        if f.attrs.get("kind") != "pareto" or "pareto" not in f:
            C.die(f"{path}: not a frontier file (lrcnn plan --pareto writes them)")
        g = f["pareto"]
        pts = g["points"][()]
        return {
            "file": path, "net": C._py(f.attrs["net"]), "optimizer": C._py(f.attrs["optimizer"]),
            "device": C._py(f.attrs["device"]), "batch": int(g.attrs["batch"]),
            "image_h": int(g.attrs["image_h"]), "image_w": int(g.attrs["image_w"]),
            "file_attrs": {k: C._py(v) for k, v in f.attrs.items()},
            "plan": [C._py(p) for p in pts["plan"]], "source": [C._py(s) for s in pts["source"]],
            "peak": pts["peak"].astype(float), "time": pts["time_us"].astype(float) / 1e3,
            "frontier": pts["frontier"].astype(bool),
        }


# The presets worth a name on the plot; every other preset (other band counts, hybrids' variants,
# BatchNorm modes, encodings) is an unlabelled diamond in its family's colour.
NAMED = ("layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "2ps:4", "2ps:8", "overl:4", "overl:8",
         "authors-2ps", "authors-overl")
# Where a label may go, in points from its marker: rings of growing radius, eight directions each
# (right and left first); past the first ring a thin line leads back to the marker.
OFFSETS = [(round(r * dx), round(r * dy) - 3) for r in (5, 14, 26, 40, 56)
           for dx, dy in ((1, 0.4), (-1, 0.4), (1, -0.6), (-1, -0.6), (0.3, 1), (-0.3, 1),
                          (0.3, -1), (-0.3, -1))]

FAMILY_NAME = {"layer": "layer", "ckpt": "checkpointing", "vdnn": "vDNN offload", "2ps": "2PS",
               "overl": "OverL", "hybrid": "rows + ckpt"}


def family(name):
    return "layer" if name == "layer" else "hybrid" if "-h" in name else "ckpt" if name.startswith("ckpt") else \
        "vdnn" if name.startswith("vdnn") else "overl" if "overl" in name else "2ps"


def panel(ax, d):
    """Draws one frontier; returns the labels still to place (after the layout is final)."""
    div, unit = C.byte_unit(d["peak"].max())
    x, y = d["peak"] / div, d["time"]
    ax.scatter(x, y, s=6, color="0.75", zorder=1, label="plans evaluated")
    order = np.argsort(x[d["frontier"]])
    fx, fy = x[d["frontier"]][order], y[d["frontier"]][order]
    ax.step(fx, fy, where="post", color="k", lw=1.2, zorder=2, label="frontier")
    ax.scatter(fx, fy, s=10, color="k", zorder=3)
    labels = []
    for i, (plan, source) in enumerate(zip(d["plan"], d["source"])):
        if source != "preset":
            continue
        named = plan in NAMED  # a default-BN plan: no ' bn=' suffix, no encoding
        color = C.family_style(family(plan.split(" bn=")[0].split("+")[0]))["color"]
        ax.scatter([x[i]], [y[i]], s=24 if named else 9, marker="D", color=color, edgecolor="k",
                   lw=0.4 if named else 0.2, zorder=4 if named else 3)
        if named:
            labels.append((x[i], y[i], plan))
    if C.spans_decades(y, 3):  # a few plans many times slower would squash the rest
        C.log_axis(ax)
    ax.set_xlabel(f"predicted peak ({unit})")
    ax.set_ylabel("predicted time per iteration (ms)")
    img = f"{d['image_h']}x{d['image_w']}" if d["image_h"] != d["image_w"] else str(d["image_h"])
    dev = str(d["device"])  # a device profile's file, or a built-in device's name
    times = "calibrated on this CPU (lrcnn calibrate)" if dev.endswith(".h5") else f"{dev} roofline, uncalibrated"
    ax.set_title(f"{C.net_label(d['net'])}, {img}², batch {d['batch']}, {d['optimizer']}\npredicted times: {times}")
    return labels


def place_labels(ax, labels):
    """Names each marker at the first offset whose text overlaps no marker or name placed before
    it and stays inside the axes (where none does, the offset with the fewest overlaps)."""
    renderer = ax.figure.canvas.get_renderer()
    inside = ax.get_window_extent(renderer)
    marks = [ax.transData.transform((x, y)) for x, y, _ in labels]
    placed = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in marks]
    for x, y, name in sorted(labels, key=lambda t: (t[1], t[0])):
        best = None
        for k, (dx, dy) in enumerate(OFFSETS):
            arrow = {"arrowstyle": "-", "lw": 0.4, "color": "0.4", "shrinkA": 1, "shrinkB": 3} if k >= 8 else None
            t = ax.annotate(name, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=6,
                            ha="left" if dx > 0 else "right", arrowprops=arrow, zorder=5,
                            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.85})
            box = Text.get_window_extent(t, renderer)  # the text alone, not its leader line
            out = not (inside.x0 <= box.x0 and box.x1 <= inside.x1 and inside.y0 <= box.y0 and box.y1 <= inside.y1)
            cost = 10 * out + sum(box.overlaps(b) for b in placed)
            if best is None or cost < best[0]:
                if best is not None:
                    best[1].remove()
                best = (cost, t, box)
            else:
                t.remove()
            if cost == 0:
                break
        placed.append(best[2])


def main():
    p = argparse.ArgumentParser(prog="plots/pareto.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(C.DEFAULT_OUT), metavar="DIR")
    p.add_argument("files", nargs="+", metavar="PARETO.h5")
    args = p.parse_args()
    C._prog = "plots/pareto.py"
    C.setup_style()
    data = [read(f) for f in args.files]
    cols = min(2, len(data))
    rows = math.ceil(len(data) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
    names = [panel(ax, d) for ax, d in zip(axes.flat, data)]
    for ax in list(axes.flat)[len(data):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fams = {family(p.split(" bn=")[0].split("+")[0]) for d in data for p, s in zip(d["plan"], d["source"])
            if s == "preset"}
    for fam in [f for f in ("layer", "ckpt", "vdnn", "2ps", "overl", "hybrid") if f in fams]:
        handles.append(C.legend_handle(f"presets: {FAMILY_NAME[fam]}", color=C.family_style(fam)["color"],
                                       marker="D", linestyle="none"))
    C.figure_legend(fig, handles, labels + [h.get_label() for h in handles[len(labels):]], ncol=5)
    fig.tight_layout()
    for ax, lab in zip(axes.flat, names):
        place_labels(ax, lab)
    C.save(fig, args, "pareto", [{"file": d["file"], "file_attrs": d["file_attrs"]} for d in data])


if __name__ == "__main__":
    main()
