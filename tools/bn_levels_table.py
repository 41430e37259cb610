#!/usr/bin/python3
"""The report's table of BatchNorm's per-level choice under rows (bn=train-offload:K), from a sim
result file: one markdown table per (net, image, batch), a row per plan — how many forward levels'
kept maps go to the host, the device's peak (the replay) against bn=train's, the host's arena, and
the predicted time against bn=train's; `layer` and bn=train-recompute beside them.

    /usr/bin/python3 tools/bn_levels_table.py results/bn_levels.h5 [BATCH]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
from load import load  # noqa: E402


def mib(b):
    return "%.1f MiB" % (b / 1048576.0) if b else "0"


def pct(x):
    """+16.1%, −3.0% (the report's minus), — for none."""
    return "—" if abs(x) < 0.05 else ("%+.1f%%" % x).replace("-", "−")


def levels(bn):
    """What the bn= text offloads, in words."""
    if bn == "train":
        return "none"
    if bn == "train-offload":
        return "every level"
    if bn.startswith("train-offload:"):
        k = int(bn.split(":")[1])
        return "the first %d" % k if k > 1 else "the first"
    return "— (passes)" if bn == "train-recompute" else bn


def table(df, batch=None):
    lines = []
    for (net, h, w, b), g in df.groupby(["net", "image_h", "image_w", "batch"], sort=False):
        if batch is not None and b != batch:
            continue
        base = g[(g.bn == "train") & (g.plan != "layer")].iloc[0]
        lines.append("::: keep")
        lines.append("%s at %dx%d, batch %d, %s, %s:" % (net, h, w, b, base.optimizer, base.device))
        lines.append("")
        lines.append("| plan | levels offloaded | peak (device) | vs `bn=train` | host | time | vs `bn=train` |")
        lines.append("|---|---|---|---|---|---|---|")
        for _, r in g.iterrows():
            mode = "—" if r.plan == "layer" else levels(r.bn)
            lines.append("| `%s` | %s | %s | %s | %s | %.1f ms | %.2f× |" % (
                r.plan, mode, mib(r.replay_peak_bytes), pct(100.0 * (r.replay_peak_bytes / base.replay_peak_bytes - 1)),
                mib(r.arena_host_size_bytes), r.time_us / 1e3, r.time_us / base.time_us))
        lines.append(":::")
        lines.append("")
    return "\n".join(lines)


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    try:
        df = load(argv[1])
    except ValueError as e:
        print("bn_levels_table: %s" % e, file=sys.stderr)
        return 2
    print(table(df, int(argv[2]) if len(argv) == 3 else None))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
