#!/usr/bin/python3
"""Figure `pareto`: the planner's memory/time frontier, with every preset as a point beside it.

    plots/pareto.py [--out DIR] PARETO.h5 [PARETO.h5 ...]

Reads files written by `lrcnn plan --pareto` (results/SCHEMA.md: root kind = pareto), one panel
each. Grey dots: every plan the planner evaluated and timed; the step line: the frontier (no plan
has both a smaller peak and a smaller predicted time); coloured markers: the presets, labelled.
x: predicted peak (replay, the engine's allocated bytes); y: predicted iteration time, from the
file's time model (a calibrated profile, or the named roofline).
"""

import argparse
import math

import h5py
import matplotlib.pyplot as plt
import numpy as np

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


def panel(ax, d):
    div, unit = C.byte_unit(d["peak"].max())
    x, y = d["peak"] / div, d["time"]
    ax.scatter(x, y, s=6, color="0.75", zorder=1, label="plans evaluated")
    order = np.argsort(x[d["frontier"]])
    fx, fy = x[d["frontier"]][order], y[d["frontier"]][order]
    ax.step(fx, fy, where="post", color="k", lw=1.2, zorder=2, label="frontier")
    ax.scatter(fx, fy, s=10, color="k", zorder=3)
    presets = [i for i, s in enumerate(d["source"]) if s == "preset" and "+" not in d["plan"][i]]
    for k, i in enumerate(presets):
        name = d["plan"][i].split(" bn=")[0]
        fam = "layer" if name == "layer" else "hybrid" if "-h" in name else "ckpt" if name.startswith("ckpt") else \
            "vdnn" if name.startswith("vdnn") else "overl" if "overl" in name else "2ps"
        color = C.family_style(fam)["color"]
        ax.scatter([x[i]], [y[i]], s=22, marker="D", color=color, edgecolor="k", lw=0.4, zorder=4)
        ax.annotate(name, (x[i], y[i]), textcoords="offset points", xytext=(3, 2 + (k % 3) * 3), fontsize=6)
    ax.set_xlabel(f"predicted peak ({unit})")
    ax.set_ylabel("predicted time per iteration (ms)")
    img = f"{d['image_h']}x{d['image_w']}" if d["image_h"] != d["image_w"] else str(d["image_h"])
    dev = str(d["device"])  # a device profile's file, or a built-in device's name
    times = "calibrated on this CPU (lrcnn calibrate)" if dev.endswith(".h5") else f"{dev} roofline, uncalibrated"
    ax.set_title(f"{C.net_label(d['net'])}, {img}², batch {d['batch']}, {d['optimizer']}\npredicted times: {times}")


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
    for ax, d in zip(axes.flat, data):
        panel(ax, d)
    for ax in list(axes.flat)[len(data):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    handles.append(C.legend_handle("presets", color="0.5", marker="D", linestyle="none"))
    C.figure_legend(fig, handles, labels + ["presets"])
    fig.tight_layout()
    C.save(fig, args, "pareto", [{"file": d["file"], "file_attrs": d["file_attrs"]} for d in data])


if __name__ == "__main__":
    main()
