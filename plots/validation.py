#!/usr/bin/python3
"""Figure `validation`: predicted against measured peak memory, and the prediction errors.

    plots/validation.py [--out DIR] validate.h5 [train.h5 ...]

Reads every run with a `measured/` group (`lrcnn validate` files, `lrcnn train` files). Left: the
predicted peak of each run against the peak the engine's accounting allocator measured, for both
models: the replay of the schedule (filled circles) and the closed form (open squares), coloured by
plan; the diagonal is a perfect prediction. Log axes when the peaks span a decade. Right: the
error of each prediction in percent of the measured peak, (predicted - measured) / measured, one
point per run and model, with the largest absolute error written above each model.
"""

import numpy as np

import common as C

MODELS = (("replay", "replay", "o", True), ("closed", "closed form", "s", False))


def main():
    args, runs = C.parse_args("validation", __doc__)
    runs = [r for r in runs if r["measured"] and "peak" in r["measured"] and r["replay"]]
    if not runs:
        C.die("no run has measurements (measured/ with a peak): give `lrcnn validate` or "
              "`lrcnn train` files")
    fig, (ax_s, ax_e) = C.plt.subplots(1, 2, figsize=(7.0, 3.3), layout="constrained",
                                       gridspec_kw={"width_ratios": [1, 1]})

    meas = np.array([r["measured"]["peak"] for r in runs], float)
    preds = {m: np.array([r[m]["peak"] if r[m] else np.nan for r in runs], float)
             for m, *_ in MODELS}
    everything = np.concatenate([meas] + list(preds.values()))
    everything = everything[np.isfinite(everything)]
    div, unit = C.byte_unit(everything.max())
    lo, hi = everything.min() / div, everything.max() / div

    rng = np.random.default_rng(0)  # fixed jitter: the same files give the same figure
    err_top = 0.0
    for k, (m, label, marker, filled) in enumerate(MODELS):
        err = 100.0 * (preds[m] - meas) / meas
        jitter = rng.uniform(-0.18, 0.18, len(runs))
        for i, r in enumerate(runs):
            if not np.isfinite(preds[m][i]):
                continue
            c = C.family_style(r["plan_family"])["color"]
            face = c if filled else "none"
            ax_s.plot(meas[i] / div, preds[m][i] / div, marker=marker, markersize=5,
                      markerfacecolor=face, markeredgecolor=c, linestyle="none", alpha=0.9)
            ax_e.plot(k + jitter[i], err[i], marker=marker, markersize=5, markerfacecolor=face,
                      markeredgecolor=c, linestyle="none", alpha=0.9)
        ok = err[np.isfinite(err)]
        if ok.size:
            worst = ok[np.argmax(np.abs(ok))]
            err_top = max(err_top, np.abs(ok).max())
            ax_e.hlines(np.median(ok), k - 0.3, k + 0.3, color="k", lw=1.0)
            ax_e.annotate(f"max |error| {abs(worst):.3g}%\nmedian {np.median(ok):+.3g}%",
                          (k, 1.0), xycoords=("data", "axes fraction"), ha="center",
                          va="bottom", fontsize=6.5)

    # Log axes already at a factor of 4: points near the diagonal stay apart at the small end.
    pad = (hi / lo) ** 0.06 if C.spans_decades([lo, hi], factor=4) else None
    if pad:
        C.log_axis(ax_s, "x")
        C.log_axis(ax_s, "y")
        lims = (lo / pad, hi * pad)
    else:
        span = hi - lo or hi
        lims = (max(0.0, lo - 0.08 * span), hi + 0.08 * span)
    ax_s.plot(lims, lims, color="0.5", lw=0.8, linestyle="--", zorder=0)
    ax_s.set_xlim(lims)
    ax_s.set_ylim(lims)
    ax_s.set_aspect("equal", adjustable="box")
    ax_s.set_xlabel(f"measured peak ({unit})")
    ax_s.set_ylabel(f"predicted peak ({unit})")
    ax_s.set_title("Predicted against measured peak")

    ax_e.axhline(0, color="0.5", lw=0.8, linestyle="--", zorder=0)
    ax_e.set_xticks(range(len(MODELS)), [label for _, label, *_ in MODELS])
    ax_e.set_xlim(-0.6, len(MODELS) - 0.4)
    e = max(err_top, 1.0) * 1.15
    ax_e.set_ylim(-e if any(np.nanmin(100 * (p - meas) / meas) < 0 for p in preds.values())
                  else -0.08 * e, e)
    ax_e.set_ylabel("prediction error (% of measured)")
    ax_e.grid(axis="x", visible=False)
    ax_e.set_title("Prediction error", pad=22)

    configs = list(C.group_by(runs, C.config_key).values())
    where = (C.config_title(configs[0][0]) if len(configs) == 1 else
             f"{len(configs)} configurations of " +
             ", ".join(dict.fromkeys(C.net_label(r["net"]) for r in runs)))
    fig.suptitle(f"Memory model against the engine ({where}; {len(runs)} runs)")
    hs = [C.legend_handle(label, color="0.3", marker=mk, linestyle="none", fill=filled,
                          markersize=5) for _, label, mk, filled in MODELS]
    fams = dict.fromkeys(r["plan_family"] for r in runs)  # colour by family: a legend of five, not of every plan
    names = {"layer": "layer", "ckpt": "checkpointing", "vdnn": "vDNN offload", "2ps": "2PS (any R)",
             "overl": "OverL (any R)", "hybrid": "2PS-H / OverL-H"}
    hs += [C.legend_handle(names.get(f, f), color=C.family_style(f)["color"], marker="o", linestyle="none", markersize=5)
           for f in fams]
    C.figure_legend(fig, hs, ncol=min(len(hs), 8))
    C.save(fig, args, "validation", runs)


if __name__ == "__main__":
    main()
