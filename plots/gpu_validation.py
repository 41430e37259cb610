#!/usr/bin/python3
"""Figure `gpu_validation`: the simulator's peak against what a GPU measured, and GPU times.

    plots/gpu_validation.py [--out DIR] gpu_validate.h5 [more.h5 ...]

Reads every run with `measured/device` (CUDA runs: `lrcnn validate` or `lrcnn train` with
`--backend cuda`, `lrcnn reproduce --backend cuda`). Top row, one panel per configuration (net,
batch, input): for each plan, bars of the predicted peak (the replay of the schedule lowered with
cuDNN's workspace sizes), the engine's allocated peak (its accounting allocator), the memory
pool's reserved peak, and the device's bytes in use at step ends less the context's (measured
before the first allocation; absent without CUPTI); above each measurement, the prediction's error
against it in percent. Where a plan ran in its arena (`--alloc arena`, the default), the reserved bar is
the arena the engine reserved and its error is the predicted arena's; the in-use bar's error is that of
the predicted footprint: the arena (or the replay, under the pool) plus the bytes the engine holds
beside it (cuBLAS's workspace, its scratch). Bottom row: each plan's iteration time (median after the first) relative to
`layer`'s in the same configuration, with `layer`'s time in the title.
"""

import numpy as np

import common as C

BARS = (("predicted", "predicted (replay)", "0.35"), ("allocated", "allocated (engine)", "#4477aa"),
        ("reserved", "reserved (arena, or pool)", "#66ccee"), ("device", "in use − context (driver)", "#ee6677"))


def arena_run(r):
    return r["measured"].get("alloc") == "arena" and r["arena"] is not None


def values(r):
    """Each bar's measured bytes (predicted: the replay's peak)."""
    m, d = r["measured"], r["measured"]["device"]
    used = d["device_peak"] - d["context_bytes"] if d["device_peak"] >= 0 else np.nan
    return {"predicted": r["replay"]["peak"], "allocated": m["peak"],
            "reserved": m["arena_size"] if arena_run(r) else d["pool_reserved_peak"], "device": used}


def predicted_for(r, name):
    """The prediction each measured bar is held against."""
    held = r["arena"]["size"] if arena_run(r) else r["replay"]["peak"]
    return {"allocated": r["replay"]["peak"], "reserved": held,
            "device": held + r["measured"]["device"]["outside_pool"]}[name]


def median_us(r):
    return float(np.median(C.timed_us(r["measured"])))


def main():
    args, runs = C.parse_args("gpu_validation", __doc__)
    runs = [r for r in runs if r["measured"] and "device" in r["measured"] and r["replay"]]
    if not runs:
        C.die("no run has measured/device: give files of CUDA runs (lrcnn validate --backend cuda)")
    configs = C.group_by(runs, C.config_key)
    n = len(configs)
    cols = min(n, 4)  # panels of four configurations a row, each its peaks above its times
    rows = (n + cols - 1) // cols
    fig, axs = C.plt.subplots(2 * rows, cols, figsize=(max(3.9 * cols, 4.5), 5.0 * rows), squeeze=False,
                              layout="constrained", gridspec_kw={"height_ratios": [3, 2] * rows})
    for j in range(n, rows * cols):  # empty places of the last row
        axs[2 * (j // cols)][j % cols].set_visible(False)
        axs[2 * (j // cols) + 1][j % cols].set_visible(False)
    largest = max(v for r in runs for v in values(r).values() if np.isfinite(v))
    div, unit = C.byte_unit(largest)
    width = 0.8 / len(BARS)
    for j, (key, rs) in enumerate(configs.items()):
        ax_m, ax_t = axs[2 * (j // cols)][j % cols], axs[2 * (j // cols) + 1][j % cols]
        x = np.arange(len(rs))
        for b, (name, label, color) in enumerate(BARS):
            v = np.array([values(r)[name] for r in rs], float)
            ax_m.bar(x + (b - 1.5) * width, v / div, width, color=color, label=label)
            if name == "predicted":
                continue
            for i, r in enumerate(rs):
                if np.isfinite(v[i]) and v[i] > 0:
                    err = 100.0 * (predicted_for(r, name) - v[i]) / v[i]
                    ax_m.annotate(f"{err:+.1f}", (x[i] + (b - 1.5) * width, v[i] / div), ha="center", va="bottom",
                                  fontsize=5, rotation=90)
        ax_m.set_xticks(x, [r["plan"] for r in rs], rotation=60, ha="right", fontsize=6.5)
        ax_m.set_ylabel(f"peak ({unit})")
        ax_m.set_title(C.config_title(rs[0]), fontsize=8.5)
        ax_m.grid(axis="x", visible=False)
        layer = C.find_layer(rs)
        ref = median_us(layer) if layer else np.nan
        t = np.array([median_us(r) / ref for r in rs])
        ax_t.bar(x, t, 0.6, color=[C.plan_styles(rs)[r["plan"]]["color"] for r in rs])
        ax_t.axhline(1.0, color="0.5", lw=0.8, linestyle="--")
        ax_t.set_xticks(x, [r["plan"] for r in rs], rotation=60, ha="right", fontsize=6.5)
        ax_t.set_ylabel("time / layer's")
        ax_t.set_title(f"layer: {ref / 1e3:.1f} ms per iteration" if np.isfinite(ref) else "no layer run")
        ax_t.grid(axis="x", visible=False)
    hs = [C.legend_handle(label, color=color, marker="s", linestyle="none", markersize=6) for _, label, color in BARS]
    C.figure_legend(fig, hs, ncol=len(hs))
    gpus = sorted({"%s (cuDNN %s)" % (r["measured"]["device"]["name"], r["measured"]["device"]["cudnn"]) for r in runs})
    fig.suptitle("Predicted peak against the GPU's allocated, reserved and in-use bytes (error: % of each measurement)"
                 " · " + ", ".join(gpus))
    C.save(fig, args, "gpu_validation", runs)


if __name__ == "__main__":
    main()
