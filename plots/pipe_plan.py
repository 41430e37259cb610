#!/usr/bin/python3
"""Figure `pipe_plan`: a pipeline's throughput against the memory a device has.

    plots/pipe_plan.py [--out DIR] results/pipe_plan.txt

From experiments/pipe_plan.py's table: a panel per net, the per-device budget across, the predicted
throughput (images a second over the iteration, bubble included) up, one line for stages that all
run `layer` and one for stages that each run a plan of their own (rows, checkpoints or layer,
chosen with the split), a marker where the choice first differs from all-`layer`. Budgets no split
meets leave no point.
"""

import argparse
import signal
import sys

import common as C


def read(path):
    commit, rows = "?", []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("# commit "):
                    commit = line.split()[2]
                if line.startswith("ROW\t"):
                    net, stages, budget, it, ips, peak, sums, plans = (line.rstrip("\n").split("\t") + [""] * 9)[1:9]
                    if it != "none":
                        rows.append((net, stages, float(budget), float(ips), float(peak), plans))
    except OSError as e:
        C.die(f"cannot read {path}: {e.strerror}")
    if not rows:
        C.die(f"{path}: no ROW lines (experiments/pipe_plan.py writes them)")
    return commit, rows


def main():
    C._prog = "plots/pipe_plan.py"
    p = argparse.ArgumentParser(prog=C._prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=str(C.DEFAULT_OUT), metavar="DIR")
    p.add_argument("file", metavar="pipe_plan.txt")
    args = p.parse_args()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, C._stopped)
    C.setup_style()
    commit, rows = read(args.file)
    nets = list(dict.fromkeys(r[0] for r in rows))
    fig, where = C.panel_grid(nets, panel_w=3.4, panel_h=2.5, wrap=len(nets))
    colors = {"layer": C.FAMILY_COLOR["layer"], "a plan a stage": C.FAMILY_COLOR["2ps"]}
    for net in nets:
        ax = where[net]
        for stages in ("a plan a stage", "layer"):  # layer's thinner line on top, where the two coincide
            pts = sorted((b, ips) for n, s, b, ips, _, _ in rows if n == net and s == stages)
            wide = stages != "layer"
            ax.plot([b / 1024 for b, _ in pts], [ips for _, ips in pts], "-o", color=colors[stages], ms=3.5 if wide else 2,
                    lw=2.6 if wide else 1.0)
        ax.set_xlabel("memory a device (GiB)")
        ax.set_ylabel("images / s (predicted)")
        ax.set_title(C.net_label(net), fontsize=8)
        ax.set_ylim(bottom=0)
    C.figure_legend(fig, [C.legend_handle("every stage layer", color=colors["layer"], marker="o"),
                          C.legend_handle("a plan a stage from the candidates", color=colors["a plan a stage"], marker="o")], ncol=2)
    fig.suptitle("Pipeline throughput against per-device memory: 4 devices, 1F1B, batch 32 in 8 micro-batches, 224x224, SGD\n"
                 "(predicted: H100 roofline, NVLink 4; batch norm in train mode, exact)")
    C.save(fig, args, "pipe_plan", [{"file": args.file, "file_attrs": {"git_commit": commit}}])


if __name__ == "__main__":
    sys.exit(main())
