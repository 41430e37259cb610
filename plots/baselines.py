#!/usr/bin/python3
"""Figure `baselines`: every plan side by side — peak memory and FLOPs against `layer`.

    plots/baselines.py [--out DIR] results/baselines.h5 [...]

A column per net. Top row: grouped bars, a group per configuration of that net (batch, and input
and optimizer where they vary), a bar per plan: the replay prediction of the peak, with the
change against `layer` written above the bar (layer's own bar carries its peak) and the closed-form
prediction as a black tick. Bottom row: FLOPs of one iteration divided by `layer`'s, with the same
bars (the ratio above each bar that is not 1; layer's bar carries its GFLOP). Plans keep the colours of their family in every
figure. Device memory only: offloading plans (vDNN) also hold host memory, which is not shown.
"""

from matplotlib.patches import Patch

import common as C

def group_label(r, varying):
    parts = [f"batch {r['batch']}"]
    if "image" in varying:
        parts.append(C.image_label(r))
    if "optimizer" in varying:
        parts.append(r["optimizer"])
    return "\n".join(parts)

def main():
    args, runs = C.parse_args("baselines", __doc__)
    nets = {}
    for key, rs in C.group_by(runs, C.config_key).items():
        layer = C.find_layer(rs)
        if layer and len(rs) > 1 and all(r["replay"] for r in rs):
            nets.setdefault(key[0], []).append((layer, rs))
    if not nets:
        C.die("no configuration has a `layer` run and another plan to compare with")

    plans = list(dict.fromkeys(r["plan"] for cfgs in nets.values() for _, rs in cfgs for r in rs))
    styles = C.plan_styles([r for cfgs in nets.values() for _, rs in cfgs for r in rs])
    bars = len(plans) * max(len(c) for c in nets.values())
    fig, axs = C.plt.subplots(2, len(nets), figsize=(max(3.4, 0.6 + 0.22 * bars) * len(nets), 5.0),
                              squeeze=False, layout="constrained",
                              gridspec_kw={"height_ratios": [1.5, 1]})
    for j, (net, cfgs) in enumerate(nets.items()):
        ax_m, ax_f = axs[0][j], axs[1][j]
        varying = [k for k, f in (("image", C.image_label), ("optimizer", lambda r: r["optimizer"]))
                   if len({f(layer) for layer, _ in cfgs}) > 1]
        shown = [p for p in plans if any(r["plan"] == p for _, rs in cfgs for r in rs)]
        width = 0.84 / len(shown)
        div, unit = C.byte_unit(max(r["replay"]["peak"] for _, rs in cfgs for r in rs))
        top_m = top_f = 0.0
        for g, (layer, rs) in enumerate(cfgs):
            ref = layer["replay"]["peak"]
            by_plan = {r["plan"]: r for r in rs}
            for i, plan in enumerate(shown):
                r = by_plan.get(plan)
                if not r:
                    continue
                x = g + (i - (len(shown) - 1) / 2) * width
                st = styles[plan]
                peak = r["replay"]["peak"] / div
                ax_m.bar(x, peak, width * 0.92, color=st["color"], edgecolor="white", lw=0.3)
                if r["closed"]:
                    ax_m.plot(x, r["closed"]["peak"] / div, marker="_", color="k",
                              markersize=width * 40, markeredgewidth=1.2, linestyle="none")
                    peak = max(peak, r["closed"]["peak"] / div)
                text = C.fmt_bytes(ref) if r is layer else C.fmt_change(r["replay"]["peak"], ref)
                ax_m.annotate(text, (x, peak), xytext=(0, 3), textcoords="offset points",
                              rotation=90, ha="center", va="bottom", fontsize=6.5)
                ratio = r["flops"] / layer["flops"]
                ax_f.bar(x, ratio, width * 0.92, color=st["color"], edgecolor="white", lw=0.3)
                if r is layer or abs(ratio - 1) > 5e-3:
                    text = C.fmt_flops(r["flops"]) if r is layer else f"{ratio:.2f}×"
                    ax_f.annotate(text, (x, ratio), xytext=(0, 2),
                                  textcoords="offset points", rotation=90, ha="center",
                                  va="bottom", fontsize=6.5)
                top_m, top_f = max(top_m, peak), max(top_f, ratio)
        labels = [group_label(layer, varying) for layer, _ in cfgs]
        for ax in (ax_m, ax_f):
            ax.set_xticks(range(len(cfgs)), labels)
            ax.set_xlim(-0.5, len(cfgs) - 0.5)
            ax.grid(axis="x", visible=False)
            ax.tick_params(axis="x", length=0)
        # Head room for the rotated labels (about 7 characters at 6.5 pt).
        ax_m.set_ylim(0, top_m * 1.32)
        ax_f.set_ylim(0, top_f * 1.55)
        ax_f.axhline(1.0, color=C.FAMILY_COLOR["layer"], linestyle="--", linewidth=0.8)
        ax_m.set_ylabel(f"peak memory, replay ({unit})")
        ax_f.set_ylabel("FLOPs per iteration (× layer)")
        ax_m.set_title(C.config_title(cfgs[0][0], ["net"] +
                                      [p for p in ("image", "optimizer", "bn") if p not in varying]))

    hs = [Patch(color=styles[p]["color"], label=p) for p in plans]
    hs.append(C.legend_handle("closed form", color="k", marker="_", linestyle="none",
                              markersize=9, markeredgewidth=1.2))
    C.figure_legend(fig, hs, ncol=min(len(hs), 9))
    fig.suptitle("Peak memory and compute of every plan, against layer")
    C.save(fig, args, "baselines", runs)

if __name__ == "__main__":
    main()
