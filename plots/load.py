#!/usr/bin/python3
"""Any lrcnn result file as a pandas DataFrame: one row per run, every number in base units.

    import sys; sys.path.insert(0, "plots")
    from load import load, read_csv
    df = load("results/baselines.h5")               # or a list of files
    df[df.plan_family == "2ps"][["net", "batch", "plan", "replay_peak_bytes", "time_us"]]
    df.attrs["units"]["replay_peak_bytes"]          # 'bytes'
    df.attrs["infeasible"]                          # the files' /infeasible rows (a DataFrame)
    runs = read_csv("tables/runs.csv")              # `lrcnn export --csv`'s table, or load.py --csv's

From the shell: /usr/bin/python3 plots/load.py FILE.h5 [FILE.h5 ...] [--csv OUT.csv] prints the
table (or writes it as CSV).

Columns: those of `lrcnn export`'s runs table under the same names (results/SCHEMA.md; tested
equal, value for value, in tests/test_plots.py), and more. A number's unit is its name's suffix:
_bytes, _us (microseconds); without one, a count, a ratio, FLOPs (flops) or nats (losses).
  file, run                  where the row comes from (run: the group name under /runs, a string)
  every run attribute        kind, net, image_h, image_w, batch, plan, plan_family, optimizer,
                             flops, time_us, ... and search, budget_bytes, max_value for capacity runs
  replay_peak_bytes, closed_peak_bytes
                             predicted peak device bytes (closed: NaN where it did not model the plan)
  replay_<cat>_bytes, closed_<cat>_bytes
                             bytes of each memory category at the predicted peak
  arena_size_bytes, arena_live_bytes, arena_host_size_bytes
                             the static memory plan: its device arena, the live peak it holds, its
                             host arena (NaN in files written before it)
  measured_peak_bytes, measured_host_peak_bytes, measured_rss_peak_bytes
                             what the engine measured (NaN for simulator runs)
  measured_<cat>_bytes       measured bytes of each category at the measured peak
  measured_iters, measured_time_median_us, measured_time_best_us
                             iterations, their median time after the first (the only one where the
                             file kept one) and the best
  measured_loss_first, measured_loss_last, grad_deviation, loss_deviation, worst_tensor
read_csv(path) reads a table written by either route back with run as a string ("00000", not 0)
and the same units. Errors (a missing file, not an lrcnn result) raise ValueError; on the command
line they are one line on stderr and exit status 2.
"""

import sys

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSION = 2
RENAMED = {"budget": "budget_bytes"}  # run attributes whose column names carry their unit


def _value(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _run_row(path, key, g, cats):
    row = {"file": path, "run": key}
    row.update({RENAMED.get(k, k): _value(v) for k, v in g.attrs.items()})
    for model in ("replay", "closed"):
        m = g.get("prediction/" + model)
        row[model + "_peak_bytes"] = int(m.attrs["peak"]) if m is not None else np.nan
        at = m["at_peak"][()] if m is not None else [np.nan] * len(cats)
        row.update({"%s_%s_bytes" % (model, c): v for c, v in zip(cats, at)})
    a = g.get("prediction/arena")
    for k in ("size", "live", "host_size"):
        row["arena_%s_bytes" % k] = int(a.attrs[k]) if a is not None and k in a.attrs else np.nan
    m = g.get("measured")
    if m is not None:
        for a in ("peak", "host_peak", "rss_peak"):
            row["measured_%s_bytes" % a] = int(m.attrs[a])
        row.update({"measured_%s_bytes" % c: int(v) for c, v in zip(cats, m["at_peak"][()])})
        t = np.asarray(m["iter_us"][()], float)
        loss = np.asarray(m["loss"][()], float)
        row["measured_iters"] = len(t)
        # timed: after the first iteration (warm-up), and not a last one CUPTI profiled (device/profiled_iter)
        profiled = "device" in m and int(m["device"].attrs.get("profiled_iter", -1)) >= 0 and len(t) > 2
        timed = t if len(t) == 1 else t[1:len(t) - 1] if profiled else t[1:]
        row["measured_time_median_us"] = float(np.median(timed))
        row["measured_time_best_us"] = float(timed.min())
        row["measured_loss_first"], row["measured_loss_last"] = float(loss[0]), float(loss[-1])
        for a in ("grad_deviation", "loss_deviation", "worst_tensor"):
            if a in m.attrs:
                row[a] = _value(m.attrs[a])
    return row


def units(columns):
    """Each numeric column's unit, from its name's suffix."""
    u = {c: "bytes" for c in columns if c.endswith("_bytes")}
    u.update({c: "us" for c in columns if c.endswith("_us")})
    u.update({c: "FLOPs" for c in columns if c == "flops"})
    return u


def read_csv(path):
    """A runs table written as CSV (`lrcnn export --csv`, or load.py --csv) with run kept a string."""
    df = pd.read_csv(path, dtype={"run": str}, float_precision="round_trip")  # every float as written
    df.attrs["units"] = units(df.columns)
    return df


def _open(path):
    try:
        f = h5py.File(path, "r")
    except (OSError, ValueError) as e:
        raise ValueError("%s: cannot open (%s)" % (path, e)) from None
    if "schema_version" not in f.attrs or "runs" not in f:
        f.close()
        raise ValueError("%s: not an lrcnn result file (no schema_version or /runs)" % path)
    version = int(f.attrs["schema_version"])
    if version > SCHEMA_VERSION:
        f.close()
        raise ValueError("%s: schema_version %d is newer than this reader's %d" % (path, version, SCHEMA_VERSION))
    return f


def load(paths):
    """The runs of one file (a path) or several (a list), in file and run order."""
    if isinstance(paths, (str, bytes)) or hasattr(paths, "__fspath__"):
        paths = [paths]
    rows, infeasible = [], []
    for p in map(str, paths):
        with _open(p) as f:
            cats = [_value(c) for c in f["categories"][()]]
            for key in sorted(f["runs"]):
                rows.append(_run_row(p, key, f["runs"][key], cats))
            if "infeasible" in f:
                t = pd.DataFrame(f["infeasible"][()])
                for c in t.columns:
                    if t[c].dtype == object:
                        t[c] = t[c].map(_value)
                t.insert(0, "file", p)
                infeasible.append(t)
    df = pd.DataFrame(rows)
    df.attrs["units"] = units(df.columns)
    df.attrs["infeasible"] = pd.concat(infeasible, ignore_index=True) if infeasible else pd.DataFrame()
    return df


def main(argv):
    args, csv = [], None
    it = iter(argv[1:])
    for a in it:
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--csv":
            csv = next(it, None)
            if not csv:
                print("plots/load.py: --csv needs a file name", file=sys.stderr)
                return 2
        else:
            args.append(a)
    if not args:
        print("plots/load.py: which result file? (plots/load.py FILE.h5 [--csv OUT.csv])", file=sys.stderr)
        return 2
    try:
        df = load(args)
    except ValueError as e:
        print("plots/load.py: %s" % e, file=sys.stderr)
        return 2
    if csv:
        df.to_csv(csv, index=False)
        print("wrote %s (%d runs, %d columns)" % (csv, len(df), len(df.columns)), file=sys.stderr)
    else:
        with pd.option_context("display.max_columns", 12, "display.width", 160):
            print(df)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
