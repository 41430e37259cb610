#!/usr/bin/env bash
# Timings under a competing load (issue: timings that mean something on a shared machine): the demo
# spec (VGG-16's trunk, 128x128, batch 8, every preset, 4 iterations each) and a validate run
# (vgg-small, 64x64, batch 8, 16 iterations each), each plan's time the median of its iterations
# after the first, shown relative to layer's in the same run. Five runs:
#   idle, idle       lrcnn's defaults on an idle machine, twice (the engine takes both cores)
#   load             the defaults beside one busy process (the engine takes the free core)
#   idle -t1         --threads 1 on the idle machine: the same thread count as `load`
#   load -t2         --threads 2 beside the busy process: a thread shares its core (what not to do)
# and how far each ratio spreads (max/min - 1) between runs at the same thread count: the two idle
# runs (2 threads), and `load` against `idle -t1` (1 thread). Writes results/load_timing.txt.
#   experiments/load_timing.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lrcnn="${1:-$here/build}/lrcnn"
tmp="$(mktemp -d)"; trap 'kill $busy 2>/dev/null || true; rm -rf "$tmp"' EXIT
busy=""
conds=(idle idle load "idle -t1" "load -t2")
for k in "${!conds[@]}"; do
  cond=${conds[$k]} threads=()
  case $cond in *-t1) threads=(--threads 1) ;; *-t2) threads=(--threads 2) ;; esac
  if [[ $cond == load* ]]; then (while :; do :; done) & busy=$!; sleep 2; fi
  "$lrcnn" sweep "$here/experiments/demo.spec" -o "$tmp/demo$k.h5" --quiet "${threads[@]}" 2>"$tmp/demo$k.err"
  "$lrcnn" validate --net vgg-small --image 64 --batch 8 --iters 16 --plan layer,ckpt-sqrt,vdnn-all,2ps:4,overl:4 \
    "${threads[@]}" -o "$tmp/val$k.h5" >/dev/null 2>"$tmp/val$k.err"
  grep -h "warning: load" "$tmp/demo$k.err" "$tmp/val$k.err" | sed "s/^/run $k ($cond): /" >>"$tmp/warnings" || true
  if [ -n "$busy" ]; then kill $busy; wait $busy 2>/dev/null || true; busy=""; fi
done
{
  echo "# $(basename "$0"): plan time / layer's time (medians after the first iteration), 5 runs: idle twice with"
  echo "# lrcnn's defaults, beside one busy process with the defaults, idle with --threads 1, beside the busy process"
  echo "# with --threads 2. Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;"
  echo "# lrcnn $("$lrcnn" --version | cut -d' ' -f2-); $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo "# command: experiments/load_timing.sh"
  /usr/bin/python3 - "$tmp" "${conds[@]}" <<'P'
import sys, h5py, numpy as np
tmp, conds = sys.argv[1], sys.argv[2:]
same = (("the two idle runs, 2 threads", (0, 1)), ("load vs idle -t1, 1 thread", (2, 3)))
worst = {}
for kind, label in (("demo", "demo.spec: vgg16-gap 128x128 batch 8, 3 timed iterations"),
                    ("val", "validate: vgg-small 64x64 batch 8, 15 timed iterations")):
    rows, layer_ms, threads = {}, [], []
    for k in range(len(conds)):
        f = h5py.File("%s/%s%d.h5" % (tmp, kind, k), "r")
        threads.append(int(f.attrs["threads"]))
        t = {r.attrs["plan"]: float(np.median(r["measured/iter_us"][1:])) for r in f["runs"].values()}
        layer_ms.append(t["layer"] / 1e3)
        for p, v in t.items():
            rows.setdefault(p, []).append(v / t["layer"])
    print("\n%s" % label)
    print("  %-10s %s   %s" % ("run", " ".join("%9s" % c for c in conds), "   spread: " + ", ".join(s for s, _ in same)))
    print("  %-10s %s" % ("threads", " ".join("%9d" % v for v in threads)))
    print("  %-10s %s" % ("layer ms", " ".join("%9.0f" % v for v in layer_ms)))
    for p, v in rows.items():
        if p == "layer":
            continue
        spreads = [max(v[a], v[b]) / min(v[a], v[b]) - 1 for _, (a, b) in same]
        for (s, _), x in zip(same, spreads):
            worst[(kind, s)] = max(worst.get((kind, s), 0), x)
        print("  %-10s %s      %s" % (p, " ".join("%8.3fx" % x for x in v), "  ".join("%5.1f%%" % (100 * x) for x in spreads)))
    for s, _ in same:
        print("  worst spread, %s: %.1f%%" % (s, 100 * worst[(kind, s)]))
    print("  layer's time beside the busy process / idle at the same thread count: %.2fx (1 thread); "
          "with --threads 2 beside it / idle: %.2fx" % (layer_ms[2] / layer_ms[3], layer_ms[4] / np.mean(layer_ms[:2])))
P
  echo; echo "# load warnings printed by lrcnn:"; cat "$tmp/warnings" 2>/dev/null || echo "# none"
} | tee "$here/results/load_timing.txt"
