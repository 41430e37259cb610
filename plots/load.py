#!/usr/bin/python3
"""Any lrcnn result file as a pandas DataFrame: one row per run, every number in base units.

    import sys; sys.path.insert(0, "plots")
    from load import load
    df = load("results/baselines.h5")               # or a list of files
    df[df.plan_family == "2ps"][["net", "batch", "plan", "replay_peak", "time_us"]]
    df.attrs["units"]["replay_peak"]                # 'bytes'
    df.attrs["infeasible"]                          # the files' /infeasible rows (a DataFrame)

From the shell: /usr/bin/python3 plots/load.py FILE.h5 [FILE.h5 ...] [--csv OUT.csv] prints the
table (or writes it as CSV).

Columns (results/SCHEMA.md says what each attribute means):
  file, run                  where the row comes from (the group name under /runs)
  every run attribute        kind, net, image_h, image_w, batch, plan, plan_family, optimizer,
                             flops, time_us, ... and search, budget, max_value for capacity runs
  replay_peak, closed_peak   predicted peak device bytes (closed: NaN where it did not model the plan)
  replay_<cat>, closed_<cat> bytes of each memory category at the predicted peak
  measured_peak, measured_host_peak, measured_rss_peak
                             what the engine measured, bytes (NaN for simulator runs)
  measured_<cat>             measured bytes of each category at the measured peak
  measured_iters, measured_time_us, measured_best_us
                             iterations, their median time after the first (the only one where the
                             file kept one) and the best, microseconds
  measured_loss0, measured_loss_last, grad_deviation, loss_deviation, worst_tensor
Errors (a missing file, not an lrcnn result) raise ValueError; on the command line they are one
line on stderr and exit status 2.
"""

import sys

import h5py
import numpy as np
import pandas as pd

SCHEMA_VERSION = 2
NOT_BYTES = ("measured_iters", "measured_loss0", "measured_loss_last")


def _value(v):
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, np.generic):
        return v.item()
    return v


def _run_row(path, key, g, cats):
    row = {"file": path, "run": key}
    row.update({k: _value(v) for k, v in g.attrs.items()})
    for model in ("replay", "closed"):
        m = g.get("prediction/" + model)
        row[model + "_peak"] = int(m.attrs["peak"]) if m is not None else np.nan
        at = m["at_peak"][()] if m is not None else [np.nan] * len(cats)
        row.update({"%s_%s" % (model, c): v for c, v in zip(cats, at)})
    m = g.get("measured")
    if m is not None:
        for a in ("peak", "host_peak", "rss_peak"):
            row["measured_" + a] = int(m.attrs[a])
        row.update({"measured_" + c: int(v) for c, v in zip(cats, m["at_peak"][()])})
        t = np.asarray(m["iter_us"][()], float)
        loss = np.asarray(m["loss"][()], float)
        row["measured_iters"] = len(t)
        row["measured_time_us"] = float(t[0] if len(t) == 1 else np.median(t[1:]))
        row["measured_best_us"] = float(t[0] if len(t) == 1 else t[1:].min())
        row["measured_loss0"], row["measured_loss_last"] = float(loss[0]), float(loss[-1])
        for a in ("grad_deviation", "loss_deviation", "worst_tensor"):
            if a in m.attrs:
                row[a] = _value(m.attrs[a])
    return row


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
    units = {"flops": "FLOPs", "time_us": "us", "budget": "bytes"}
    for c in df.columns:
        if c.startswith(("replay_", "closed_")):
            units[c] = "bytes"
        elif c.startswith("measured_") and c not in NOT_BYTES:
            units[c] = "us" if c.endswith("_us") else "bytes"
    df.attrs["units"] = {c: u for c, u in units.items() if c in df.columns}
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
