"""Shared helpers of the figure scripts (plots/<name>.py).

Every figure script is `plots/<name>.py [--out DIR] FILE.h5 [FILE.h5 ...]`: it reads only the
given lrcnn result files (results/SCHEMA.md) and writes DIR/<name>.png and DIR/<name>.pdf (DIR
defaults to paper/figures of this checkout). Nothing here runs lrcnn: a figure never needs a rerun.

This module holds what the scripts share, so that no two of them disagree:
  * reading    `read_runs` turns files into a list of plain dicts, one per run (attributes as Python
               values, predictions and measurements with per-category dicts keyed by the names in
               the file's /categories, timelines as numpy arrays);
  * plans      each run says what its plan is (family: layer / ckpt / vdnn / 2ps / overl /
               hybrid, the preset and its count, the segments: SCHEMA.md); `plan_styles` gives one
               colour per family (shades, markers and dashes tell the members of a family apart,
               the same way in every figure);
  * units      bytes in binary units (KiB/MiB/GiB) chosen from the data, FLOPs in GFLOP, costs
               as ratios to `layer` (×);
  * layout     titles naming net, batch, image and optimizer, panels per configuration, a shared
               legend below the panels, `save` writing PNG + PDF with the source files recorded
               in their metadata.
Errors in the input (no file, not an lrcnn file, no run a figure can use) are one line on stderr
and exit status 2, as for lrcnn itself; nothing is written then.
"""

import argparse
import itertools
import math
import os
import signal
import tempfile
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

SCHEMA_VERSION = 2
REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "paper" / "figures"
_prog = "plots"

# --------------------------------------------------------------------------------------------
# Command line, errors, saving


def die(msg):
    """A user error: one line naming the script, exit status 2."""
    print(f"{_prog}: {msg}", file=sys.stderr)
    sys.exit(2)


def _stopped(sig, frame):
    print(f"{_prog}: stopped by signal {sig}; no figure written", file=sys.stderr)
    raise SystemExit(128 + sig)


def parse_args(name, doc, extra=()):
    """The command line every figure script shares, plus the script's own options (`extra`: pairs
    of a flag and add_argument's keywords); returns (args, runs)."""
    global _prog
    _prog = f"plots/{name}.py"
    p = argparse.ArgumentParser(prog=_prog, description=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(DEFAULT_OUT), metavar="DIR",
                   help=f"output directory (default: {DEFAULT_OUT})")
    p.add_argument("files", nargs="+", metavar="FILE.h5", help="lrcnn result files")
    for flag, kw in extra:
        p.add_argument(flag, **kw)
    args = p.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM):  # one line, the figure's temporaries removed (save's finally)
        signal.signal(sig, _stopped)
    setup_style()
    return args, read_runs(args.files)


def setup_style():
    plt.rcParams.update({
        "font.size": 8, "axes.titlesize": 8.5, "axes.labelsize": 8, "legend.fontsize": 7.5,
        "xtick.labelsize": 7.5, "ytick.labelsize": 7.5, "figure.titlesize": 10,
        "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
        "axes.spines.top": False, "axes.spines.right": False,
        "lines.linewidth": 1.4, "lines.markersize": 4,
        "legend.frameon": False, "figure.dpi": 100, "savefig.dpi": 200,
        "pdf.fonttype": 42,  # TrueType in PDFs: text stays text for the paper's toolchain
    })


def save(fig, args, name, runs):
    """Writes DIR/<name>.png and DIR/<name>.pdf; the source files and their git commits go into
    the metadata, so a figure says where its numbers came from."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sources = []
    for f in dict.fromkeys(r["file"] for r in runs):
        commit = next(r["file_attrs"].get("git_commit", "?") for r in runs if r["file"] == f)
        sources.append(f"{os.path.basename(f)} (git {commit})")
    source = "lrcnn results: " + ", ".join(sources)
    png, pdf = out / f"{name}.png", out / f"{name}.pdf"
    for path in (png, pdf):  # results are replaced, nothing else (a FIFO, a device, a link)
        if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
            die(f"{path} is not a regular file: not replaced")
    saving = []
    try:  # each figure whole or not at all: drawn into a temporary beside it, then renamed over
        for path, meta in ((png, {"Title": name, "Source": source, "Software": None}),
                           (pdf, {"Title": name, "Subject": source, "Creator": _prog, "Producer": None,
                                  "CreationDate": None})):  # no date: the same data gives the same PDF
            fd, tmp = tempfile.mkstemp(dir=out, prefix=f".{name}-", suffix=path.suffix)
            os.close(fd)
            saving.append(tmp)
            mask = os.umask(0)
            os.umask(mask)
            os.chmod(tmp, 0o666 & ~mask)
            fig.savefig(tmp, format=path.suffix[1:], bbox_inches="tight", pad_inches=0.05, metadata=meta)
        os.replace(saving[0], png)
        os.replace(saving[1], pdf)
    except OSError as e:
        die(f"cannot write {out}: {e.strerror or e}")
    finally:
        for tmp in saving:
            if os.path.exists(tmp):
                os.unlink(tmp)
    plt.close(fig)
    print(f"wrote {png} and {pdf.name}")


# --------------------------------------------------------------------------------------------
# Reading result files


def _py(v):
    """HDF5 attribute value -> plain Python (str, int, float)."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _pred(g, cats):
    p = {"peak": int(g.attrs["peak"]), "peak_step": int(g.attrs.get("peak_step", -1))}
    for ds in ("at_peak", "max"):
        p[ds] = dict(zip(cats, (int(x) for x in g[ds][()]))) if ds in g else {}
    return p


def _measured(g, cats):
    m = {k: _py(v) for k, v in g.attrs.items()}
    for k, ds in g.items():
        if isinstance(ds, h5py.Group):  # device/: what a GPU saw (CUDA runs), attributes and datasets
            m[k] = {**{a: _py(v) for a, v in ds.attrs.items()}, **{d: np.asarray(x[()]) for d, x in ds.items()}}
            continue
        v = ds[()]
        m[k] = dict(zip(cats, (int(x) for x in v))) if k in ("at_peak", "max") else np.asarray(v)
    return m


def timed_us(m):
    """A run's iteration times that were timed (us): after the first, which includes the warm-up (the
    only one when there is one), and not a last one the backend profiled (measured/device's
    profiled_iter: CUPTI's launch records cost host time), where that leaves any."""
    t = np.asarray(m["iter_us"], float)
    profiled = isinstance(m.get("device"), dict) and m["device"].get("profiled_iter", -1) >= 0
    return t if len(t) == 1 else t[1:len(t) - 1] if profiled and len(t) > 2 else t[1:]


def read_file(path):
    """All runs of one result file, in run order (see read_runs)."""
    if not os.path.exists(path):
        die(f"{path}: no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        die(f"{path}: not an HDF5 file ({e})")
    with f:
        if "schema_version" not in f.attrs or "runs" not in f or "categories" not in f:
            die(f"{path}: no schema_version, /runs or /categories: not an lrcnn result file")
        if int(f.attrs["schema_version"]) != SCHEMA_VERSION:
            die(f"{path}: schema_version {int(f.attrs['schema_version'])}, "
                f"these scripts read {SCHEMA_VERSION}")
        cats = [str(c) for c in f["categories"].asstr()[()]]
        file_attrs = {k: _py(v) for k, v in f.attrs.items()}
        runs = []
        for rid, g in f["runs"].items():
            r = {k: _py(v) for k, v in g.attrs.items()}
            r.update(file=path, id=rid, categories=cats, file_attrs=file_attrs)
            r["has_bn"] = "layers" in g and bool((g["layers"]["kind"] == b"bn").any())
            pred = g.get("prediction")
            r["replay"] = _pred(pred["replay"], cats) if pred and "replay" in pred else None
            r["closed"] = _pred(pred["closed"], cats) if pred and "closed" in pred else None
            r["arena"] = ({k: _py(v) for k, v in pred["arena"].attrs.items()}
                          if pred and "arena" in pred else None)  # files written since 2026-11-27
            r["measured"] = _measured(g["measured"], cats) if "measured" in g else None
            r["timeline"] = g["timeline"][()] if "timeline" in g else None
            r["timeline_by_category"] = (g["timeline_by_category"][()]
                                         if "timeline_by_category" in g else None)
            runs.append(r)
    return runs


def read_runs(paths):
    """Runs of every file, in file and run order. Each run is a dict: the run's attributes (net,
    batch, plan, flops, ...; SCHEMA.md), plus `file`, `id` (the group name), `categories`,
    `file_attrs`, `replay` / `closed` (dicts: peak, peak_step, at_peak and max as {category:
    bytes}), `arena` (prediction/arena's attributes, or None), `measured` (its attributes and
    datasets, or None), `timeline` and
    `timeline_by_category` (arrays, or None)."""
    runs = []
    for p in paths:
        runs += read_file(p)
    if not runs:
        die("the files hold no runs")
    return runs


# --------------------------------------------------------------------------------------------
# Configurations, names, titles

NET_NAMES = {"vgg16": "VGG-16", "resnet50": "ResNet-50", "vgg-small": "VGG-small",
             "resnet-small": "ResNet-small", "vgg16-gap": "VGG-16 (GAP head)",
             "kernels": "kernels", "mobilenetv2": "MobileNetV2"}


def net_label(net):
    return NET_NAMES.get(net, net)


def config_key(run):
    """What a run is compared within: the same net, input, batch and optimizer."""
    return (run["net"], run["image_h"], run["image_w"], run["batch"], run["optimizer"])


def image_label(run):
    return f"{run['image_h']}×{run['image_w']}"


def bn_label(run):
    """'BN train' (or frozen, per-band) where the run's net has BatchNorm, else ''."""
    return f"BN {run['bn']}" if run.get("has_bn") and run.get("bn") else ""


def config_title(run, parts=("net", "batch", "image", "optimizer", "bn")):
    """'ResNet-50 · batch 8 · 224×224 · Adam · BN train' (the parts asked for, in that order; the
    BatchNorm mode only where the net has BatchNorm)."""
    words = {"net": net_label(run["net"]), "batch": f"batch {run['batch']}",
             "image": image_label(run),
             "optimizer": {"adam": "Adam", "sgd": "SGD"}.get(run["optimizer"], run["optimizer"]),
             "bn": bn_label(run)}
    return " · ".join(words[p] for p in parts if words[p])


def group_by(runs, key):
    """{key(run): [runs]} in order of first appearance."""
    out = {}
    for r in runs:
        out.setdefault(key(r), []).append(r)
    return out


def find_layer(runs):
    """The `layer` run among runs of one configuration (the reference of every ratio), or None."""
    return next((r for r in runs if r["plan_family"] == "layer" and "+" not in r["plan"]), None)


def panel_grid(keys, panel_w=3.3, panel_h=2.4, sharex=False, sharey=False, wrap=None):
    """One panel per configuration key, extra cells hidden. Returns (fig, {key: ax}). By default
    a row per net (keys are config_key-like tuples, net first); with `wrap`, the panels simply
    fill rows of `wrap` panels in key order."""
    if wrap:
        rows = list(range((len(keys) + wrap - 1) // wrap))
        per_row = {i: list(keys)[i * wrap:(i + 1) * wrap] for i in rows}
    else:
        rows = list(dict.fromkeys(k[0] for k in keys))
        per_row = {n: [k for k in keys if k[0] == n] for n in rows}
    ncols = max(len(v) for v in per_row.values())
    fig, axs = plt.subplots(len(rows), ncols, figsize=(panel_w * ncols, panel_h * len(rows)),
                            squeeze=False, sharex=sharex, sharey=sharey, layout="constrained")
    where = {}
    for i, n in enumerate(rows):
        for j in range(ncols):
            if j < len(per_row[n]):
                where[per_row[n][j]] = axs[i][j]
            else:
                axs[i][j].set_visible(False)
    return fig, where


def figure_legend(fig, handles, labels=None, ncol=None):
    """One legend for the whole figure, below the panels (outside every axes, so it never covers
    data); savefig's tight bounding box takes it in."""
    if labels is None:
        labels = [h.get_label() for h in handles]
    ncol = ncol or min(len(handles), 6)
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol,
               handlelength=2.4, columnspacing=1.4)


# --------------------------------------------------------------------------------------------
# Plans: families and styles

# Okabe-Ito: distinguishable with the common colour-vision deficiencies and in greyscale by
# lightness (layer dark, 2PS/OverL mid, hybrids light).
FAMILY_COLOR = {"layer": "#3b3b3b", "ckpt": "#0072B2", "vdnn": "#CC79A7", "2ps": "#D55E00",
                "overl": "#009E73", "hybrid": "#E69F00"}
# Markers per family, for its members in order (then the shared extras).
FAMILY_MARKERS = {"layer": "o", "ckpt": "sh", "vdnn": "Dd", "2ps": "^<", "overl": "v>",
                  "hybrid": "PX"}
FAMILY_MARKER = {f: m[0] for f, m in FAMILY_MARKERS.items()}
# Presets with a fixed place in their family (so they look the same in every figure): preset ->
# (family, place); other plans take the next free place in the order they are shown.
VARIANT = {"ckpt-sqrt": ("ckpt", 0), "vdnn-all": ("vdnn", 0), "vdnn-conv": ("vdnn", 1),
           "2ps-h": ("hybrid", 0), "overl-h": ("hybrid", 1)}
_SHADE = (0.0, 0.4, 0.22, 0.55, 0.12)
_DASH = ("-", "--", "-.", ":", (0, (5, 1, 1, 1)))
_ALT_MARKER = ("o", "s", "D", "^", "v", "P", "X", "*")


def plan_series(run):
    """(series, R) for a run of a banded preset (2ps:R, overl:R, 2ps-h[:R], overl-h[:R]); the
    approximate per-band BatchNorm is a series of its own. None for other plans."""
    preset = run["plan_preset"]
    if preset not in ("2ps", "overl", "2ps-h", "overl-h"):
        return None
    return preset + (" bn=per-band" if run["bn"] == "per-band" else ""), run["plan_count"]


SERIES_LABEL = {"2ps": "2PS", "overl": "OverL", "2ps-h": "2PS + ckpt", "overl-h": "OverL + ckpt"}


def series_label(series):
    head, _, rest = series.partition(" ")
    return SERIES_LABEL.get(head, head) + (f" ({rest})" if rest else "")


def lighten(color, f):
    """color mixed with white, f = 0 (as is) .. 1 (white)."""
    r, g, b = to_rgb(color)
    return (r + (1 - r) * f, g + (1 - g) * f, b + (1 - b) * f)


def plan_styles(runs):
    """{plan: dict(color, marker, linestyle)} for the plans of the runs a figure shows: colour by
    family, members of one family told apart by shade, marker and dashes."""
    taken, styles = {}, {}
    for r in runs:
        plan = r["plan"]
        if plan in styles:
            continue
        fam = r["plan_family"]
        used = taken.setdefault(fam, set())
        v = VARIANT.get(r["plan_preset"], (None, None))[1]
        if v is None or v in used:
            fixed = {i for f, i in VARIANT.values() if f == fam}
            v = next(i for i in itertools.count() if i not in used and i not in fixed)
        used.add(v)
        base = FAMILY_COLOR[fam]
        markers = list(FAMILY_MARKERS[fam]) + [m for m in _ALT_MARKER
                                               if m not in FAMILY_MARKERS[fam]]
        styles[plan] = {
            "color": lighten(base, _SHADE[v % len(_SHADE)]),
            "marker": markers[v % len(markers)],
            "linestyle": _DASH[v % len(_DASH)],
        }
    return styles


def family_style(fam):
    return {"color": FAMILY_COLOR[fam], "marker": FAMILY_MARKER[fam], "linestyle": "-"}


def series_style(series):
    """Lines of a band sweep: 2PS and OverL in their family colour, hybrids dashed."""
    head = series.split(" ")[0]
    fam = "hybrid" if head.endswith("-h") else head
    st = family_style(fam)
    if head == "overl-h":
        st.update(color=lighten(FAMILY_COLOR["hybrid"], 0.45), linestyle="--", marker="v")
    if " " in series:  # a bn variant of the same policy
        st["linestyle"] = ":"
    return st


# --------------------------------------------------------------------------------------------
# Memory categories

CATEGORY_LABEL = {"weights": "weights", "weight_grads": "weight gradients",
                  "optimizer": "optimizer state", "activations": "activations",
                  "act_grads": "activation gradients", "boundaries": "2PS boundary rows",
                  "workspace": "workspace", "host": "host (offloaded)"}
# Static state in cool greys-blues, per-iteration buffers in warm colours.
CATEGORY_COLOR = {"weights": "#5b6f95", "weight_grads": "#8fa3c7", "optimizer": "#c5d0e6",
                  "activations": "#e4572e", "act_grads": "#f3a712", "boundaries": "#29a36a",
                  "workspace": "#8e6c8a", "host": "#333333"}
_EXTRA_COLORS = ("#17becf", "#bcbd22", "#7f7f7f", "#8c564b")


def category_color(name, i=0):
    return CATEGORY_COLOR.get(name, _EXTRA_COLORS[i % len(_EXTRA_COLORS)])


def category_label(name):
    return CATEGORY_LABEL.get(name, name.replace("_", " "))


STATIC_CATEGORIES = ("weights", "weight_grads", "optimizer")


# --------------------------------------------------------------------------------------------
# Units

_UNITS = ((2 ** 30, "GiB"), (2 ** 20, "MiB"), (2 ** 10, "KiB"), (1, "B"))


def byte_unit(largest):
    """(divisor, name) that shows byte values up to `largest` as numbers >= 1."""
    for div, name in _UNITS:
        if largest >= div:
            return div, name
    return 1, "B"


def fmt_bytes(n, digits=3):
    """2804593280 -> '2.61 GiB' (`digits` significant digits)."""
    if n == 0:
        return "0 B"
    div, name = byte_unit(abs(n))
    v = n / div
    text = f"{v:.{max(digits - 1 - int(math.floor(math.log10(abs(v)))), 0)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{text} {name}"


def fmt_flops(flops):
    """7.415e11 -> '742 GFLOP', 2.966e12 -> '2966 GFLOP', 1.89e8 -> '0.189 GFLOP'."""
    g = flops / 1e9
    return f"{g:.0f} GFLOP" if g >= 100 else f"{g:.3g} GFLOP"


def fmt_change(new, ref):
    """Relative change as a signed percentage: '−15%', '+3%' (typographic minus)."""
    pct = 100.0 * (new - ref) / ref
    s = f"{pct:+.0f}%" if abs(pct) >= 9.5 or pct == 0 else f"{pct:+.1f}%"
    return s.replace("-", "\u2212")


def log_axis(ax, axis="y"):
    """Makes an axis logarithmic (call after plotting). Up to ~2.5 decades: plain numbers at
    1-2-5 steps; wider: powers of ten, as matplotlib does."""
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log")
    a = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    if lo > 0 and hi / lo <= 300:
        a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        a.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        a.set_minor_formatter(NullFormatter())


def spans_decades(values, factor=10.0):
    """True when the positive values span at least `factor` (a log axis then reads better)."""
    v = np.asarray([x for x in values if x is not None and x > 0 and math.isfinite(x)], float)
    return v.size > 1 and v.max() / v.min() >= factor


def band_axis(ax, largest):
    """x axis of band counts 1..largest: integer ticks starting at 1 (1, 4, 8, ... for long
    sweeps) and no empty tick at 0."""
    step = next(s for s in (1, 2, 4, 5, 10, 20, 50, 100, 10 ** 9) if largest / s <= 8)
    ticks = sorted({1, *range(step, largest + 1, step)})
    ax.set_xticks(ticks)
    ax.set_xlim(0.4, largest + 0.6)
    ax.set_xlabel("bands R")


def legend_handle(label, color="k", marker=None, linestyle="-", fill=True, **kw):
    return Line2D([], [], color=color, marker=marker, linestyle=linestyle, label=label,
                  markerfacecolor=color if fill else "none", **kw)
