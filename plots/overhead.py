#!/usr/bin/python3
"""Figure `overhead`: compute overhead of 2PS and OverL against `layer`, by band count R.

    plots/overhead.py [--out DIR] results/bands.h5 [validate.h5 ...]

One panel per net x input x optimizer (a row per net). Lines: FLOPs of one iteration (forward +
backward, recomputation and halo rows included) divided by `layer`'s, per banded series (`2ps:R`,
`overl:R`, ...), against the forward band count. The ratio does not depend on the batch (FLOPs
scale with it), so batches that give the same curve share one line; batches that do not are drawn
apart. Runs with measurements (`lrcnn validate` or `train` files) add markers: the measured time
of an iteration divided by `layer`'s measured time in the same file and configuration (validate:
the best iteration; train: the median iteration after the first).
"""

import numpy as np

import common as C


def panel_key(r):
    return (r["net"], r["image_h"], r["image_w"], r["optimizer"])


def measured_time(r):
    """Seconds-free measured time of one iteration (us), or None."""
    m = r["measured"]
    if not m or "iter_us" not in m or not len(m["iter_us"]):
        return None
    return float(np.median(C.timed_us(m)))  # one value: an older file's best time


def main():
    args, runs = C.parse_args("overhead", __doc__)
    panels = {}
    for key, rs in C.group_by(runs, panel_key).items():
        flops = {}   # series -> batch -> {R: ratio}
        meas = {}    # series -> [(R, time ratio)]
        for (_, batch), crs in C.group_by(rs, lambda r: (r["file"], r["batch"])).items():
            layer = C.find_layer(crs)
            if not layer:
                continue
            t_layer = measured_time(layer)
            for r in crs:
                s = C.plan_series(r)
                if not s:
                    continue
                R = r["fp_bands"] or s[1]
                flops.setdefault(s[0], {}).setdefault(batch, {}).setdefault(
                    R, r["flops"] / layer["flops"])
                t = measured_time(r)
                if t and t_layer:
                    meas.setdefault(s[0], []).append((R, t / t_layer, batch))
        # 2PS and OverL always; other series (hybrids, bn variants) when they sweep R.
        flops = {s: b for s, b in flops.items()
                 if s in ("2ps", "overl") or any(len(v) >= 2 for v in b.values())}
        if flops:
            panels[key] = (rs, flops, meas)
    if not panels:
        C.die("no configuration has banded plans (2ps:R, overl:R) next to a `layer` run")

    fig, axes = C.panel_grid(list(panels), panel_w=3.3, panel_h=2.5, wrap=3)
    handles, any_meas = {}, False
    for key, (rs, flops, meas) in panels.items():
        ax = axes[key]
        ax.axhline(1.0, color=C.FAMILY_COLOR["layer"], linestyle="--", linewidth=1.0)
        handles.setdefault("layer", C.legend_handle("layer (= 1)", color=C.FAMILY_COLOR["layer"],
                                                    linestyle="--", linewidth=1.0))
        batches_shown = set()
        ymax = 1.0
        for name, by_batch in flops.items():
            st = C.series_style(name)
            # Curves of different batches that agree (they should) are drawn once.
            curves = []
            for b, pts in sorted(by_batch.items()):
                same = next((c for c in curves if c[1].keys() == pts.keys() and
                             np.allclose([c[1][k] for k in pts], list(pts.values()), rtol=1e-6)),
                            None)
                if same:
                    same[0].append(b)
                else:
                    curves.append(([b], pts))
            dashes = ["-", "--", ":", "-."]
            for i, (bs, pts) in enumerate(curves):
                batches_shown.update(bs)
                x = sorted(pts)
                y = [pts[k] for k in x]
                ymax = max(ymax, max(y))
                label = C.series_label(name) + " FLOPs" + (
                    "" if len(curves) == 1 else f", batch {'/'.join(map(str, bs))}")
                (h,) = ax.plot(x, y, color=st["color"], linestyle=dashes[i % 4],
                               marker=st["marker"], markersize=2.8, label=label)
                handles.setdefault(label, h)
            for R, ratio, b in meas.get(name, []):
                ymax = max(ymax, ratio)
                ax.plot(R, ratio, marker="o", markersize=6.5, linestyle="none",
                        markerfacecolor="none", markeredgecolor=st["color"], markeredgewidth=1.3)
                any_meas = True

        ax.set_ylim(0, ymax * 1.12)
        C.band_axis(ax, max(R for b in flops.values() for v in b.values() for R in v))
        ax.set_ylabel("cost relative to layer (×)")
        r0 = rs[0]
        title = C.config_title(r0, ("net", "image", "optimizer", "bn"))
        title += " · batch " + ", ".join(map(str, sorted(batches_shown)))
        ax.set_title(title)

    hs = list(handles.values())
    if any_meas:
        hs.append(C.legend_handle("measured time per iteration", color="0.3", marker="o",
                                  linestyle="none", fill=False, markersize=6.5))
    C.figure_legend(fig, hs)
    fig.suptitle("Compute overhead against band count")
    C.save(fig, args, "overhead", runs)


if __name__ == "__main__":
    main()
