#!/usr/bin/python3
"""Figure `ckpt_opt`: optimal checkpointing against sqrt(n) checkpointing, peak against time.

    plots/ckpt_opt.py [--out DIR] results/ckpt_opt.h5 [...]

A panel per configuration (net, input, batch). The line: `ckpt-opt:P%` (the planner's fastest
checkpointing plan within P% of `layer`'s footprint) and bare `ckpt-opt` (the smallest footprint
checkpointing reaches), each at its predicted peak (replay) and predicted time, both against
`layer`'s; a budget no checkpointing plan meets leaves no point. Markers: `layer`; `ckpt-sqrt`;
and `ckpt-opt:ckpt-sqrt` (filled), the fastest checkpointing plan within ckpt-sqrt's own footprint,
the two times at equal memory written in the panel.
"""

import common as C


def main():
    args, runs = C.parse_args("ckpt_opt", __doc__)
    cfgs = {}
    for key, rs in C.group_by(runs, C.config_key).items():
        layer = C.find_layer(rs)
        sqrt = next((r for r in rs if r["plan"].split(" bn=")[0] == "ckpt-sqrt"), None)
        opt = [r for r in rs if r["plan"].startswith("ckpt-opt") and r["replay"]]
        if layer and sqrt and opt:
            cfgs[key] = (layer, sqrt, opt)
    if not cfgs:
        C.die("no configuration has layer, ckpt-sqrt and ckpt-opt runs")
    fig, where = C.panel_grid(list(cfgs), panel_w=3.0, panel_h=2.5, wrap=len(cfgs))
    ckpt = C.family_style("ckpt")["color"]
    for key, (layer, sqrt, opt) in cfgs.items():
        ax = where[key]
        ref_peak, ref_t = layer["replay"]["peak"], layer["time_us"]
        pts = sorted({(r["replay"]["peak"], r["time_us"]) for r in opt})
        xs = [p / ref_peak for p, _ in pts]
        ys = [t / ref_t for _, t in pts]
        ax.plot(xs, ys, "-o", color=ckpt, ms=3.5, lw=1.2, label="ckpt-opt")
        sx, sy = sqrt["replay"]["peak"] / ref_peak, sqrt["time_us"] / ref_t
        ax.plot([sx], [sy], "s", color="white", mec=ckpt, mew=1.5, ms=6, label="ckpt-sqrt")
        ax.plot([1], [1], "D", color=C.FAMILY_COLOR["layer"], ms=5, label="layer")
        eq = next((r for r in opt if r["plan"].split(" bn=")[0] == "ckpt-opt:ckpt-sqrt"), None)
        note = ""
        if eq:
            ex, ey = eq["replay"]["peak"] / ref_peak, eq["time_us"] / ref_t
            ax.plot([ex], [ey], "s", color=ckpt, ms=6, zorder=5)
            note = f"\nat ckpt-sqrt's memory, time:\nckpt-sqrt {sy:.3f}×, ckpt-opt {ey:.3f}×"
        ax.set_xlabel("peak (replay) / layer's")
        ax.set_ylabel("predicted time / layer's")
        ax.set_title(C.config_title(layer, ["net", "image", "batch"]) + note, fontsize=7.5, pad=8)
        ax.margins(x=0.08, y=0.12)
    C.figure_legend(fig, [C.legend_handle("ckpt-opt:P% (P = 40..95) and ckpt-opt", color=ckpt, marker="o"),
                          C.legend_handle("ckpt-sqrt", color=ckpt, marker="s", linestyle="none", fill=False),
                          C.legend_handle("ckpt-opt:ckpt-sqrt", color=ckpt, marker="s", linestyle="none"),
                          C.legend_handle("layer", color=C.FAMILY_COLOR["layer"], marker="D", linestyle="none")], ncol=4)
    fig.suptitle("Optimal checkpointing against sqrt(n) checkpointing (peak and time against layer)")
    C.save(fig, args, "ckpt_opt", runs)


if __name__ == "__main__":
    main()
