#!/usr/bin/python3
"""Figure `unet`: LR-CNN on a U-Net at high resolution.

    plots/unet.py [--out DIR] results/unet_bands.h5 results/unet_capacity.h5

Three panels. (a) Peak memory (replay) against the band count R of 2PS and OverL, a line per
policy and input size at one batch (the larger in the file), `layer` dotted at each size. (b) The
FLOPs of the same runs over `layer`'s. (c) The largest square input whose replay peak fits each
budget, a line per plan, at the smaller batch (capacity searches, `search = image`). Needs
experiments/unet_bands.spec's and experiments/unet_capacity.spec's files.
"""

from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

import common as C


def plain_ticks(ax, axis, ticks):
    """Ticks at the given values, written plainly (a log axis writes powers otherwise)."""
    a = ax.yaxis if axis == "y" else ax.xaxis
    a.set_major_locator(FixedLocator(ticks))
    a.set_minor_locator(NullLocator())
    a.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v))


def main():
    args, runs = C.parse_args("unet", __doc__)
    sims = [r for r in runs if r.get("kind") == "sim" and not r.get("search") and r["replay"]]
    caps = [r for r in runs if r.get("search") == "image" and "max_value" in r]
    if not sims or not caps:
        C.die("needs a band sweep and an image capacity search of the U-Net (experiments/unet_bands.spec, "
              "experiments/unet_capacity.spec)")
    batch = max(r["batch"] for r in sims)
    sims = [r for r in sims if r["batch"] == batch]
    images = sorted({r["image_h"] for r in sims})
    fig, axs = C.plt.subplots(1, 3, figsize=(10.2, 3.0), layout="constrained")
    dashes = {im: d for im, d in zip(images, ("-", "--", ":", "-."))}
    handles = {}
    for im in images:
        rs = [r for r in sims if r["image_h"] == im]
        layer = C.find_layer(rs)
        for pol in ("2ps", "overl"):
            pts = sorted((r["fp_bands"] or C.plan_series(r)[1], r) for r in rs
                         if C.plan_series(r) and C.plan_series(r)[0] == pol)
            if len(pts) < 2:
                continue
            color = C.series_style(pol)["color"]
            x = [R for R, _ in pts]
            label = "%s, %d²" % (C.series_label(pol), im)
            h, = axs[0].plot(x, [r["replay"]["peak"] / 2 ** 30 for _, r in pts], dashes[im], color=color, marker="o",
                             ms=3, label=label)
            axs[1].plot(x, [r["flops"] / layer["flops"] for _, r in pts], dashes[im], color=color, marker="o", ms=3)
            handles[label] = h
        if layer:
            h = axs[0].axhline(layer["replay"]["peak"] / 2 ** 30, color="0.3", ls=dashes[im], lw=0.9)
            handles["layer, %d²" % im] = h
    for ax, what in ((axs[0], "peak memory (GiB)"), (axs[1], "FLOPs / layer's")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bands R")
        ax.set_ylabel(what)
    axs[0].set_yscale("log")
    top = max(r["replay"]["peak"] for r in sims) / 2 ** 30
    plain_ticks(axs[0], "y", [2 ** k for k in range(-3, 12) if 2 ** (k - 1) <= top])
    axs[0].set_title("(a) U-Net, batch %d: peak vs bands" % batch)
    axs[1].set_title("(b) recomputation")
    for ax in axs[:2]:  # the same lines in both: each panel says which is which
        ax.legend(list(handles.values()), list(handles.keys()), fontsize=6.5, loc="upper left")

    small = min(r["batch"] for r in caps)
    caps = [r for r in caps if r["batch"] == small]
    styles = C.plan_styles(caps)
    for plan, rs in C.group_by(caps, lambda r: r["plan"]).items():
        pts = sorted((r["budget"] / 2 ** 30, r["max_value"]) for r in rs if r["max_value"] > 0)
        st = styles[plan]
        axs[2].plot([b for b, _ in pts], [v for _, v in pts], label=plan, **st)
    axs[2].set_xscale("log", base=2)
    axs[2].set_yscale("log", base=2)
    plain_ticks(axs[2], "x", sorted({r["budget"] / 2 ** 30 for r in caps}))
    plain_ticks(axs[2], "y", [2 ** k for k in range(8, 16)])
    axs[2].set_xlabel("memory budget (GiB)")
    axs[2].set_ylabel("largest input (pixels per side)")
    axs[2].set_title("(c) batch %d: largest input that fits" % small)
    axs[2].legend(fontsize=6.5, ncol=2)
    C.save(fig, args, "unet", sims + caps)


if __name__ == "__main__":
    main()
