#!/usr/bin/python3
"""Figure `bands`: peak memory (replay prediction) against the band count R of 2PS and OverL.

    plots/bands.py [--out DIR] results/bands.h5 [...]

One panel per configuration (net x batch x input x optimizer; a row per net). A line per banded
series in the file (`2ps:R`, `overl:R`; hybrids `2ps-h:R` and bn variants get their own lines when
swept), x = the forward band count of the run. `layer` is the dashed horizontal reference; the grey
floor is the static state at layer's peak (weights, weight gradients, optimizer state), which no
row plan can shrink. The panel title's second line gives each series' best reduction against
`layer` and the R where it is reached. Needs a file with at least two band counts of one series
(experiments/bands.spec).
"""

import numpy as np
from matplotlib.patches import Patch

import common as C


def sweeps(runs):
    """{series: [(R, replay peak bytes)]} over the banded runs of one configuration."""
    out = {}
    for r in runs:
        s = C.plan_series(r)
        if s and r["replay"]:
            out.setdefault(s[0], []).append((r["fp_bands"] or s[1], r["replay"]["peak"]))
    return {k: sorted(v) for k, v in out.items() if len({x for x, _ in v}) >= 2}


def main():
    args, runs = C.parse_args("bands", __doc__)
    panels = {}
    for key, rs in C.group_by(runs, C.config_key).items():
        s = sweeps(rs)
        if s:
            panels[key] = (rs, s)
    if not panels:
        C.die("no configuration sweeps a band count (2ps:R or overl:R for two or more R); "
              "experiments/bands.spec writes such a file")

    fig, axes = C.panel_grid(list(panels), panel_w=3.4, panel_h=2.5)
    handles = {}
    for key, (rs, series) in panels.items():
        ax = axes[key]
        layer = C.find_layer(rs)
        peaks = [p for v in series.values() for _, p in v]
        if layer:
            peaks.append(layer["replay"]["peak"])
        div, unit = C.byte_unit(max(peaks))

        best = []
        if layer:
            static = sum(layer["replay"]["at_peak"].get(c, 0) for c in C.STATIC_CATEGORIES)
            ax.axhspan(0, static / div, color="0.9", lw=0, zorder=0)
            handles["static"] = Patch(color="0.9",
                                      label="weights + gradients + optimizer state (layer)")
        for name, pts in series.items():
            st = C.series_style(name)
            x = np.array([p[0] for p in pts])
            y = np.array([p[1] for p in pts], float) / div
            (h,) = ax.plot(x, y, color=st["color"], linestyle=st["linestyle"],
                           marker=st["marker"], markersize=2.8, label=C.series_label(name))
            handles.setdefault(name, h)
            i = int(np.argmin(y))
            ax.plot(x[i], y[i], marker="o", markersize=7, markerfacecolor="none",
                    markeredgecolor=st["color"], linestyle="none")
            if layer:
                best.append(f"{C.series_label(name)} "
                            f"{C.fmt_change(pts[i][1], layer['replay']['peak'])} (R={x[i]})")
        if layer:
            h = ax.axhline(layer["replay"]["peak"] / div, color=C.FAMILY_COLOR["layer"],
                           linestyle="--", linewidth=1.0, label="layer")
            handles.setdefault("layer", h)

        ax.set_ylim(0, max(peaks) / div * 1.1)
        C.band_axis(ax, max(x for v in series.values() for x, _ in v))
        ax.set_ylabel(f"peak memory, replay ({unit})")
        title = C.config_title(rs[0])
        if best:
            title += "\nbest: " + ", ".join(best)
        ax.set_title(title)

    order = ["layer"] + [k for k in handles if k not in ("layer", "static")] + ["static"]
    hs = [handles[k] for k in order if k in handles]
    hs.append(C.legend_handle("lowest peak", color="0.3", marker="o", linestyle="none",
                              fill=False, markersize=7))
    C.figure_legend(fig, hs)
    fig.suptitle("Peak memory against band count (replay prediction)")
    C.save(fig, args, "bands", runs)


if __name__ == "__main__":
    main()
