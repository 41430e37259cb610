#!/usr/bin/python3
"""Figure `timeline`: device memory over one iteration's schedule, by category, one panel per plan.

    plots/timeline.py [--out DIR] results/timeline.h5 [...]

Reads runs with `timeline_by_category` (sweeps with `timeline = on`; runs with only the total
`timeline` are drawn as a line). Each panel stacks the device categories (weights, gradients,
optimizer state, activations, ... in the order of /categories) after every schedule step; bytes
offloaded to the host are the dashed line (not part of the stack). The x axis is the position in
the iteration's schedule, 0 to 1, so plans with very different step counts line up. The replay peak
is marked, and the panel title gives it with its change against `layer`. Panels of one
configuration share the y axis.
"""

import numpy as np
from matplotlib.patches import Patch

import common as C


def main():
    args, runs = C.parse_args("timeline", __doc__)
    runs = [r for r in runs if r["timeline_by_category"] is not None or r["timeline"] is not None]
    if not runs:
        C.die("no run has a timeline (a sweep spec with `timeline = on` records them)")
    configs = C.group_by(runs, C.config_key)
    most = max(len(rs) for rs in configs.values())
    ncols = 2 if most == 4 else min(3, most)
    nrows = sum((len(rs) + ncols - 1) // ncols for rs in configs.values())
    fig, axs = C.plt.subplots(nrows, ncols, figsize=(2.6 * ncols, 1.9 * nrows + 0.3),
                              squeeze=False, layout="constrained")
    cats = runs[0]["categories"]
    used_cats, host_shown = set(), False
    row = 0
    for key, rs in configs.items():
        layer = C.find_layer(rs)
        top = max(int(np.max(r["timeline"] if r["timeline"] is not None else
                             r["timeline_by_category"].sum(axis=1))) for r in rs)
        host_top = max(int(np.max(r["timeline_by_category"][:, r["categories"].index("host")]))
                       if r["timeline_by_category"] is not None and "host" in r["categories"]
                       else 0 for r in rs)
        div, unit = C.byte_unit(max(top, host_top))
        nr = (len(rs) + ncols - 1) // ncols
        cells = [axs[row + i // ncols][i % ncols] for i in range(nr * ncols)]
        for ax in cells[len(rs):]:
            ax.set_visible(False)
        for i, (ax, r) in enumerate(zip(cells, rs)):
            n = r["n_steps"] if r["timeline"] is None else len(r["timeline"])
            x = np.arange(n + 1) / n  # step i covers [i/n, (i+1)/n)
            tbc = r["timeline_by_category"]
            if tbc is not None:
                base = np.zeros(n + 1)
                for c, name in enumerate(r["categories"]):
                    if name == "host":
                        continue
                    y = np.append(tbc[:, c], tbc[-1, c]) / div
                    if y.max() > 0:
                        used_cats.add(name)
                        ax.fill_between(x, base, base + y, step="post", lw=0,
                                        color=C.category_color(name, c))
                    base = base + y
                if "host" in r["categories"]:
                    h = tbc[:, r["categories"].index("host")]
                    if h.max() > 0:
                        host_shown = True
                        ax.step(x, np.append(h, h[-1]) / div, where="post",
                                color=C.category_color("host"), linestyle="--", lw=0.9)
            else:
                t = r["timeline"]
                ax.step(x, np.append(t, t[-1]) / div, where="post", color="k", lw=0.9)
            rp = r["replay"]
            if rp and 0 <= rp["peak_step"] < n:
                ax.plot((rp["peak_step"] + 0.5) / n, rp["peak"] / div, marker="v",
                        color="k", markersize=4.5, linestyle="none")
            title = r["plan"]
            if rp:
                title += f": peak {C.fmt_bytes(rp['peak'])}"
                if layer and r is not layer:
                    title += f" ({C.fmt_change(rp['peak'], layer['replay']['peak'])})"
            ax.set_title(title, fontsize=7.5)
            ax.set_xlim(0, 1)
            ax.set_ylim(0, max(top, host_top) / div * 1.1)
            ax.grid(axis="x", visible=False)
            if i % ncols == 0:
                ax.set_ylabel(f"device memory ({unit})")
            else:
                ax.tick_params(labelleft=False)
            if i + ncols >= len(rs):
                ax.set_xlabel("position in the iteration's schedule")
            else:
                ax.tick_params(labelbottom=False)
        if len(configs) > 1:
            cells[0].annotate(C.config_title(rs[0]), (0, 1), xycoords="axes fraction",
                              xytext=(0, 14), textcoords="offset points", fontsize=8.5,
                              fontweight="bold", va="bottom")
        row += nr

    hs = [Patch(color=C.category_color(c, i), label=C.category_label(c))
          for i, c in enumerate(cats) if c in used_cats]
    if host_shown:
        hs.append(C.legend_handle(C.category_label("host"), color=C.category_color("host"),
                                  linestyle="--", linewidth=0.9))
    hs.append(C.legend_handle("replay peak", color="k", marker="v", linestyle="none",
                              markersize=4.5))
    C.figure_legend(fig, hs, ncol=min(len(hs), 5))
    title = "Device memory over one iteration, by category"
    if len(configs) == 1:
        title += f" ({C.config_title(runs[0])})"
    fig.suptitle(title)
    C.save(fig, args, "timeline", runs)


if __name__ == "__main__":
    main()
