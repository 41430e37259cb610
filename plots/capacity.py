#!/usr/bin/python3
"""Figure `capacity`: the largest batch and the largest square input that fit a memory budget.

    plots/capacity.py [--out DIR] results/capacity_batch.h5 results/capacity_image.h5

Reads capacity searches (runs with the attributes `search`, `budget`, `max_value`; specs with
`search = batch|image`). A row per search kind, a panel per net (and per fixed configuration: the
input for batch searches, the batch for image searches). A line per plan: the largest batch, or
input side in pixels, whose replay peak fits the budget, against the budget. Budgets where nothing
fits (`max_value` 0) are left out of the line and listed under the panel. The title's second line
names the plan that fits the most at the largest budget, as a multiple of `layer`'s. The y axis is
logarithmic when a panel's values span a decade. Device memory only: vDNN's host memory is not
budgeted.
"""

from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

import common as C

WHAT = {"batch": "largest batch", "image": "largest input (pixels per side)"}

def panel_key(r):
    fixed = (r["image_h"], r["image_w"]) if r["search"] == "batch" else (r["batch"],)
    return (r["search"], r["net"], fixed, r["optimizer"])

def panel_title(r):
    if r["search"] == "batch":
        return C.config_title(r, ("net", "image", "optimizer", "bn"))
    return C.config_title(r, ("net", "batch", "optimizer", "bn"))

def main(name="capacity", title="What fits a memory budget (the footprint of its static memory plan, predicted)"):
    args, runs = C.parse_args(name, __doc__)
    runs = [r for r in runs if r.get("search") in WHAT and "max_value" in r and "budget" in r]
    if not runs:
        C.die("no capacity search in the files (runs with search, budget and max_value: "
              "experiments/capacity_batch.spec and capacity_image.spec)")
    panels = C.group_by(runs, panel_key)
    searches = list(dict.fromkeys(k[0] for k in panels))
    ncols = max(sum(1 for k in panels if k[0] == s) for s in searches)
    fig, axs = C.plt.subplots(len(searches), ncols, figsize=(3.4 * ncols, 2.7 * len(searches)),
                              squeeze=False, layout="constrained")
    styles = C.plan_styles(runs)
    handles = {}
    for i, s in enumerate(searches):
        keys = [k for k in panels if k[0] == s]
        for j in range(len(keys), ncols):
            axs[i][j].set_visible(False)
        for j, key in enumerate(keys):
            ax, rs = axs[i][j], panels[key]
            budgets = sorted({r["budget"] for r in rs})
            div, unit = C.byte_unit(max(budgets))
            values, none_fit = [], {}
            for plan, prs in C.group_by(rs, lambda r: r["plan"]).items():
                prs = sorted(prs, key=lambda r: r["budget"])
                pts = [(r["budget"] / div, r["max_value"]) for r in prs if r["max_value"] > 0]
                for r in prs:
                    if r["max_value"] <= 0:
                        none_fit.setdefault(r["budget"], []).append(plan)
                if not pts:
                    continue
                st = styles[plan]
                x, y = zip(*pts)
                values += y
                (h,) = ax.plot(x, y, color=st["color"], marker=st["marker"],
                               linestyle=st["linestyle"], label=plan, markersize=3.5)
                handles.setdefault(plan, h)
            ax.set_xscale("log")
            xs = [b / div for b in budgets]
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
            ax.set_xlim(min(xs) / 1.12, max(xs) * 1.12)
            if C.spans_decades(values):
                C.log_axis(ax, "y")
            elif values:
                ax.set_ylim(0, max(values) * 1.08)
            ax.set_xlabel(f"memory budget ({unit})")
            ax.set_ylabel(WHAT[s])
            ax.set_title(panel_title(rs[0]) + best_line(rs))
            if none_fit:
                ax.text(0.02, 0.98, "\n".join(f"nothing fits {C.fmt_bytes(b)}: " + ", ".join(p)
                                              for b, p in sorted(none_fit.items())),
                        fontsize=6, transform=ax.transAxes, va="top", color="0.3")
    C.figure_legend(fig, list(handles.values()), ncol=min(len(handles), 8))
    fig.suptitle(title)
    C.save(fig, args, name, runs)

def best_line(rs):
    """'\\nat 80 GiB: 2ps:8 fits 3.9× layer' (the plan fitting most at the largest budget)."""
    top = max(r["budget"] for r in rs)
    at = [r for r in rs if r["budget"] == top]
    layer = C.find_layer(at)
    best = max(at, key=lambda r: r["max_value"])
    if not layer or layer["max_value"] <= 0 or best is layer:
        return ""
    return (f"\nat {C.fmt_bytes(top)}: {best['plan']} fits "
            f"{best['max_value'] / layer['max_value']:.1f}× layer's {layer['max_value']}")

if __name__ == "__main__":
    main()
