#!/usr/bin/python3
"""Figure `embraced`: every strategy alone and with the encodings of its kept maps (plan modifiers:
gist, dpr, zfp) — "LR-CNN embraced by existing works".

    plots/embraced.py [--out DIR] results/embraced.h5 [...]

A panel per configuration (net, and batch where it varies): a group of bars per strategy (the
plan before its first '+': layer, vdnn-conv, ckpt-sqrt, 2ps:R, ...), a bar per encoding (the
strategy alone, then each modifier set in the order the file lists them), its height the replay
prediction of the peak; above each encoded bar, how many times smaller it is than the strategy
alone. A dashed line marks `layer`'s peak. Device memory only.
"""

import common as C


def split(plan):
    base, _, mods = plan.partition("+")
    return base.strip(), ("+" + mods.strip()) if mods else "alone"


def main():
    args, runs = C.parse_args("embraced", __doc__)
    runs = [r for r in runs if r["replay"]]
    cfgs = C.group_by(runs, C.config_key)
    cfgs = {k: rs for k, rs in cfgs.items() if any(split(r["plan"])[1] != "alone" for r in rs)}
    if not cfgs:
        C.die("no configuration has a plan with an encoding (a '+' modifier) to compare")
    encodings = list(dict.fromkeys(split(r["plan"])[1] for rs in cfgs.values() for r in rs))
    encodings.sort(key=lambda e: e != "alone")
    palette = ("#3b3b3b", "#009E73", "#0072B2", "#D55E00", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442")
    colours = {e: palette[i % len(palette)] for i, e in enumerate(encodings)}
    fig, axs = C.panel_grid(list(cfgs), panel_w=5.2, panel_h=2.8)
    for key, rs in cfgs.items():
        ax = axs[key]
        bases = list(dict.fromkeys(split(r["plan"])[0] for r in rs))
        by = {split(r["plan"]): r for r in rs}
        width = 0.84 / len(encodings)
        div, unit = C.byte_unit(max(r["replay"]["peak"] for r in rs))
        top = 0.0
        for g, base in enumerate(bases):
            alone = by.get((base, "alone"))
            for i, enc in enumerate(encodings):
                r = by.get((base, enc))
                if not r:
                    continue
                x = g + (i - (len(encodings) - 1) / 2) * width
                peak = r["replay"]["peak"] / div
                ax.bar(x, peak, width * 0.92, color=colours[enc], edgecolor="white", lw=0.3)
                if alone and r is not alone:
                    ax.annotate(f"{alone['replay']['peak'] / r['replay']['peak']:.2f}×", (x, peak), xytext=(0, 2),
                                textcoords="offset points", rotation=90, ha="center", va="bottom", fontsize=6)
                top = max(top, peak)
        layer = by.get(("layer", "alone"))
        if layer:
            ax.axhline(layer["replay"]["peak"] / div, color="k", linestyle="--", linewidth=0.7)
        ax.set_xticks(range(len(bases)), bases)
        ax.set_xlim(-0.5, len(bases) - 0.5)
        ax.set_ylim(0, top * 1.3)
        ax.grid(axis="x", visible=False)
        ax.tick_params(axis="x", length=0)
        ax.set_ylabel(f"peak memory, replay ({unit})")
        ax.set_title(C.config_title(rs[0]))
    hs = [C.legend_handle(e, color=colours[e], marker="s", linestyle="none", markersize=7) for e in encodings]
    C.figure_legend(fig, hs, ncol=min(len(hs), 6))
    fig.suptitle("Each strategy alone and with encoded kept maps (× smaller than the strategy alone)")
    C.save(fig, args, "embraced", runs)


if __name__ == "__main__":
    main()
