#!/usr/bin/python3
"""The report's tables of BatchNorm modes under rows, from validate result files: one markdown table
per (net, image, batch) configuration, a row per plan — its BatchNorm mode, the measured peak (equal
to the replay: checked), its reduction against `layer`, FLOPs and measured time against `layer`'s in
the same run, and the worst gradient deviation from `layer` (train-mode BatchNorm).

    /usr/bin/python3 tools/bn_table.py results/bn_stages.h5 results/bn_stages_unet.h5
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "plots"))
from load import load  # noqa: E402


def mib(b):
    return "%.1f MiB" % (b / 1048576.0)


def sci(x):
    """1.2e-6, 1.7 (the report's style)."""
    s = "%.1e" % x
    return s[:-4] if s.endswith("e+00") else s.replace("e-0", "e-").replace("e+0", "e")


def table(df):
    lines = []
    for (net, h, w, batch), g in df.groupby(["net", "image_h", "image_w", "batch"], sort=False):
        lay = g[g.plan == "layer"].iloc[0]
        lines.append("::: keep")  # the label and its table on one page (paper/report.css)
        lines.append("%s at %dx%d, batch %d, %s:\n" % (net, h, w, batch, lay.optimizer))
        lines.append("| plan | BN | peak (measured = replay) | vs `layer` | FLOPs | time | vs `layer` | gradient deviation |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for _, r in g.iterrows():
            if r.measured_peak_bytes != r.replay_peak_bytes:
                raise SystemExit("%s %s: measured %d != replay %d" % (net, r.plan, r.measured_peak_bytes, r.replay_peak_bytes))
            plan = r.plan.split(" bn=")[0]
            red = "—" if r.plan == "layer" else ("%+.1f%%" % (100.0 * (r.measured_peak_bytes / lay.measured_peak_bytes - 1))).replace("-", "−")
            dev = "—" if r.plan == "layer" else sci(r.grad_deviation)
            lines.append("| `%s` | %s | %s | %s | %.2f× | %.0f ms | %.2f× | %s |" % (
                plan, r.bn, mib(r.measured_peak_bytes), red, r.flops / lay.flops, r.measured_time_median_us / 1e3,
                r.measured_time_median_us / lay.measured_time_median_us, dev))
        lines.append(":::")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: tools/bn_table.py RESULT.h5...")
    print(table(load(sys.argv[1:])))
