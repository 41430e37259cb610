#!/usr/bin/python3
"""The report's table of BatchNorm's per-level choice under rows (bn=train-offload:K, bn=train-rebuild:K,
bn=train:LETTERS),
from a sim result file: one markdown table per (net, image, batch), a row per plan — which forward
levels' kept maps go to the host or are rebuilt in the backward, the device's peak (the replay)
against bn=train's, the host's arena, the FLOPs and the predicted time against bn=train's; `layer`
and bn=train-recompute beside them.

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


def letters(pick):
    """bn=train:LETTERS (a letter a level: k kept, o offloaded, r rebuilt) in words: a repeated unit
    by its period, else a run of one letter then another by their counts, else the letters."""
    words = {"o": "host", "r": "rebuilt", "k": "kept"}
    for m in range(2, 9):
        unit = pick[:m]
        if len(pick) >= 2 * m and (unit * len(pick))[:len(pick)] == pick and unit == "r" * (m - 1) + "o":
            return "one in %d: host, the rest rebuilt" % m
    head = len(pick) - len(pick.lstrip(pick[0]))
    if len(set(pick[head:])) == 1 and head < len(pick):
        return "the first %d: %s, the rest: %s" % (head, words[pick[0]], words[pick[head]])
    return "`%s`" % pick


def short(plan):
    """A plan's text with long bn=train letters cut to their first four (the levels column says the rest)."""
    head, sep, pick = plan.partition(" bn=train:")
    return plan if not sep or len(pick) <= 8 else "%s bn=train:%s…" % (head, pick[:4])


def levels(bn):
    """Which levels' kept maps the bn= text moves or rebuilds, and how, in words."""
    head, _, every = bn.partition("/")
    mode, _, k = head.partition(":")
    how = {"train-offload": "host", "train-rebuild": "rebuilt"}.get(mode)
    if bn == "train":
        return "none"
    if mode == "train" and k:
        return letters(k)
    if how is None:
        return "— (passes)" if bn == "train-recompute" else bn
    which = "every level" if not k else "the first%s" % (" %d" % int(k) if int(k) > 1 else "")
    return "%s: %s%s" % (which, how, ", one in %s kept" % every if every else "")


def table(df, batch=None):
    lines = []
    for (net, h, w, b), g in df.groupby(["net", "image_h", "image_w", "batch"], sort=False):
        if batch is not None and b != batch:
            continue
        base = g[(g.bn == "train") & (g.plan != "layer")].iloc[0]
        lines.append("::: keep")
        lines.append("%s at %dx%d, batch %d, %s, %s:" % (net, h, w, b, base.optimizer, base.device))
        lines.append("")
        lines.append("| plan | levels' kept maps | peak (device) | vs `bn=train` | host | FLOPs | time | vs `bn=train` |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for _, r in g.iterrows():
            mode = "—" if r.plan == "layer" else levels(r.bn)
            lines.append("| `%s` | %s | %s | %s | %s | %.2f× | %.1f ms | %.2f× |" % (
                short(r.plan), mode, mib(r.replay_peak_bytes), pct(100.0 * (r.replay_peak_bytes / base.replay_peak_bytes - 1)),
                mib(r.arena_host_size_bytes), r.flops / base.flops, r.time_us / 1e3, r.time_us / base.time_us))
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
