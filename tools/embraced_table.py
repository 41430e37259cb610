#!/usr/bin/python3
"""The report's "embraced" table: each strategy alone and with encoded kept maps, replay peaks at
every batch of results/embraced.h5 and the CPU engine's measured time of results/embraced_time.h5,
as markdown, a row per plan and a column group per net.

    tools/embraced_table.py [results/embraced.h5 [results/embraced_time.h5]]

"vs alone": how many times smaller the peak is (or how many times the time) than the same strategy
without modifiers, in the same configuration.
"""
import sys

import h5py


def runs(path):
    out = {}
    with h5py.File(path, "r") as f:
        for g in f["runs"].values():
            a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
            key = (a["net"], int(a["batch"]), a["plan"])
            out[key] = {"peak": int(g["prediction/replay"].attrs["peak"]),
                        "us": float(g["measured/iter_us"][()].min()) if "measured" in g else None}
    return out


def gib(b):
    return f"{b / 2**30:.2f}"


def main():
    peaks = runs(sys.argv[1] if len(sys.argv) > 1 else "results/embraced.h5")
    times = runs(sys.argv[2] if len(sys.argv) > 2 else "results/embraced_time.h5")
    nets = list(dict.fromkeys(k[0] for k in peaks))
    batches = sorted({k[1] for k in peaks})
    plans = list(dict.fromkeys(k[2] for k in peaks))
    tb = sorted({k[1] for k in times})
    head = ["plan"]
    for n in nets:
        head += [f"{n} b{b} peak GiB" for b in batches] + [f"{n} b{b} time s" for b in tb]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for p in plans:
        alone = p.partition("+")[0]
        cells = [f"`{p}`"]
        for n in nets:
            for b in batches:
                r, a = peaks.get((n, b, p)), peaks.get((n, b, alone))
                cells.append("" if not r else gib(r["peak"]) + ("" if p == alone or not a else f" ({a['peak'] / r['peak']:.2f}×)"))
            for b in tb:
                r, a = times.get((n, b, p)), times.get((n, b, alone))
                if not r or r["us"] is None:
                    cells.append("")
                    continue
                cells.append(f"{r['us'] / 1e6:.2f}" + ("" if p == alone or not a else f" ({r['us'] / a['us']:.2f}×)"))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
