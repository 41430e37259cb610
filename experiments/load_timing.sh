#!/usr/bin/env bash
# Timings under a competing load (issue: timings that mean something on a shared machine): the demo
# spec (VGG-16's trunk, 128x128, batch 8, every preset, 4 iterations each) and a validate run
# (vgg-small, 64x64, batch 8, 8 iterations each), twice on an idle machine and twice while another
# process keeps one core busy, then once more under load with the old default, active waiting. Each plan's time is the median of its iterations after the first;
# the table shows each plan's time relative to layer's in the same run, and how far the ratios
# spread over the four runs. Writes results/load_timing.txt.
#   experiments/load_timing.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lrcnn="${1:-$here/build}/lrcnn"
tmp="$(mktemp -d)"; trap 'kill $busy 2>/dev/null || true; rm -rf "$tmp"' EXIT
busy=""
runs=()
# the last run is the old default, active waiting (OMP_WAIT_POLICY=ACTIVE), under the same load
for cond in idle load idle load active+load; do
  [ $cond = active+load ] && export OMP_WAIT_POLICY=ACTIVE
  if [ $cond != idle ]; then (while :; do :; done) & busy=$!; sleep 2; fi
  k=${#runs[@]}
  "$lrcnn" sweep "$here/experiments/demo.spec" -o "$tmp/demo$k.h5" --quiet 2>"$tmp/demo$k.err"
  "$lrcnn" validate --net vgg-small --image 64 --batch 8 --iters 8 --plan layer,ckpt-sqrt,vdnn-all,2ps:4,overl:4 \
    -o "$tmp/val$k.h5" >/dev/null 2>"$tmp/val$k.err"
  grep -h "warning: load" "$tmp/demo$k.err" "$tmp/val$k.err" | sed "s/^/run $k ($cond): /" >>"$tmp/warnings" || true
  runs+=("$cond")
  if [ -n "$busy" ]; then kill $busy; wait $busy 2>/dev/null || true; busy=""; fi
done
{
  echo "# $(basename "$0"): plan time / layer's time (medians after the first iteration), 5 runs:"
  echo "# idle, loaded (one busy process beside the run), idle, loaded, loaded with active waiting. Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'),"
  echo "# $(nproc) cores; lrcnn $("$lrcnn" --version | cut -d' ' -f2-); $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo "# command: experiments/load_timing.sh"
  /usr/bin/python3 - "$tmp" "${runs[@]}" <<'P'
import sys, h5py, numpy as np
tmp, conds = sys.argv[1], sys.argv[2:]
for kind, label in (("demo", "demo.spec: vgg16-gap 128x128 batch 8, 3 timed iterations"),
                    ("val", "validate: vgg-small 64x64 batch 8, 7 timed iterations")):
    rows, layer_ms = {}, []
    for k in range(len(conds)):
        f = h5py.File("%s/%s%d.h5" % (tmp, kind, k), "r")
        t = {}
        for r in f["runs"].values():
            t[r.attrs["plan"]] = float(np.median(r["measured/iter_us"][1:]))
        layer_ms.append(t["layer"] / 1e3)
        for p, v in t.items():
            rows.setdefault(p, []).append(v / t["layer"])
    print("\n%s" % label)
    print("  %-10s %s %s" % ("plan", " ".join("%8s" % c[:8] for c in conds), "  spread (max/min - 1, passive runs)"))
    print("  %-10s %s" % ("layer ms", " ".join("%8.0f" % v for v in layer_ms)))
    worst = 0
    passive = [k for k, c in enumerate(conds) if c in ("idle", "load")]
    for p, v in rows.items():
        if p == "layer":
            continue
        spread = max(v[k] for k in passive) / min(v[k] for k in passive) - 1
        worst = max(worst, spread)
        print("  %-10s %s   %5.1f%%" % (p, " ".join("%7.3fx" % x for x in v), 100 * spread))
    idle = np.mean([layer_ms[k] for k, c in enumerate(conds) if c == "idle"])
    load = np.mean([layer_ms[k] for k, c in enumerate(conds) if c == "load"])
    print("  worst spread of a ratio over the idle and loaded runs (passive waiting): %.1f%%; layer's time loaded/idle: "
          "%.2fx, with active waiting: %.2fx" % (100 * worst, load / idle, layer_ms[-1] / idle))
P
  echo; echo "# load warnings printed by lrcnn:"; cat "$tmp/warnings" 2>/dev/null || echo "# none"
} | tee "$here/results/load_timing.txt"
