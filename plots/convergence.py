#!/usr/bin/python3
"""Figure `convergence`: training loss against iteration for each run.

    plots/convergence.py [--out DIR] results/convergence_resnet.h5 results/convergence_vgg.h5

Reads runs with a measured loss per iteration (files of specs with `run = train`, such as
experiments/convergence_*.spec, or of `lrcnn train -o`; a `validate` run's single loss is
skipped). A column per configuration (net, batch, input, optimizer), every run of it in one
panel, labelled with its plan and BatchNorm mode; the y axis is logarithmic when the losses span a
decade. Where the configuration has a `layer` run and others, a second row shows each run's
absolute difference from `layer`'s loss at the same iteration (log axis; iterations where the two
are bit-identical have no point), which is what tells curves apart that lie on top of each other.
Runs whose losses are bit-identical to each other are drawn once, their labels joined by '='.
"""

import re

import numpy as np
from matplotlib.ticker import MaxNLocator

import common as C


def label(r):
    """The plan as written, its BatchNorm mode once ('2ps:4 bn=per-band' -> '2ps:4 (bn=per-band)')."""
    plan = re.sub(r"\s*\bbn=\S+", "", r["plan"])
    return f"{plan} (bn={r['bn']})"


def main():
    args, runs = C.parse_args("convergence", __doc__)
    runs = [r for r in runs if r["measured"] is not None and "loss" in r["measured"]
            and len(r["measured"]["loss"]) > 1]
    if not runs:
        C.die("no run has a loss per iteration (give `lrcnn train -o` files)")
    configs = C.group_by(runs, C.config_key)
    refs = {k: C.find_layer(rs) for k, rs in configs.items()}
    with_diff = any(ref and len(configs[k]) > 1 for k, ref in refs.items())
    ncols = len(configs)
    fig, axs = C.plt.subplots(2 if with_diff else 1, ncols,
                              figsize=(3.4 * ncols, 4.6 if with_diff else 2.7), squeeze=False,
                              layout="constrained", sharex="col",
                              gridspec_kw={"height_ratios": [1.4, 1] if with_diff else [1]})
    styles = C.plan_styles(runs)
    handles = {}
    for j, (key, rs) in enumerate(configs.items()):
        ax, ref = axs[0][j], refs[key]
        # Runs with bit-identical losses are one line, labelled with all their names.
        same = {}
        for r in rs:
            same.setdefault(np.asarray(r["measured"]["loss"]).tobytes(), []).append(r)
        losses = []
        for group in same.values():
            r = ref if ref in group else group[0]
            loss = np.asarray(r["measured"]["loss"], float)
            losses.append(loss)
            st = styles[r["plan"]]
            is_ref = r is ref
            name = " = ".join(dict.fromkeys(label(g) for g in group))  # a label once
            (h,) = ax.plot(np.arange(len(loss)), loss, color=st["color"],
                           linestyle="-" if is_ref else st["linestyle"],
                           lw=2.8 if is_ref else 1.1, alpha=0.45 if is_ref else 0.95,
                           zorder=1 if is_ref else 2, label=name)
            handles.setdefault(name, h)
        if C.spans_decades(np.concatenate(losses)):
            C.log_axis(ax, "y")
        ax.set_ylabel("training loss")
        ax.set_title(C.config_title(rs[0]))
        if not with_diff:
            ax.set_xlabel("iteration")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            continue
        ax_d = axs[1][j]
        if not ref or len(rs) == 1:
            ax_d.set_visible(False)
            ax.tick_params(labelbottom=True)
            ax.set_xlabel("iteration")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            continue
        base = np.asarray(ref["measured"]["loss"], float)
        drawn = False
        for group in same.values():
            r = group[0]
            if ref in group:
                continue
            loss = np.asarray(r["measured"]["loss"], float)
            n = min(len(loss), len(base))
            d = np.abs(loss[:n] - base[:n])
            d[d == 0] = np.nan
            st = styles[r["plan"]]
            if np.isfinite(d).any():
                drawn = True
                ax_d.plot(np.arange(n), d, color=st["color"], linestyle="none",
                          marker=st["marker"], markersize=2.2, alpha=0.8)
        if drawn:
            C.log_axis(ax_d, "y")
        else:
            ax_d.set_yticks([])
            ax_d.text(0.5, 0.5, f"every run's loss is bit-identical to {ref['plan']}'s",
                      transform=ax_d.transAxes, ha="center", va="center", color="0.3")
        ax_d.set_ylabel(f"|loss − {ref['plan']}'s loss|")
        ax_d.set_xlabel("iteration")
        ax_d.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax_d.set_title("difference from layer (identical iterations: no point)", fontsize=7)
    hs = sorted(handles.values(), key=lambda h: not h.get_label().startswith("layer"))
    C.figure_legend(fig, hs, ncol=min(len(hs), 4))
    fig.suptitle("Training loss per iteration")
    C.save(fig, args, "convergence", runs)


if __name__ == "__main__":
    main()
