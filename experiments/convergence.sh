#!/usr/bin/env bash
# The committed convergence evidence for row-centric training (tests/convergence.py checks the same
# runs against its criterion; this script only records them).
#
#     experiments/convergence.sh [LRCNN]        (default: build/lrcnn of this checkout)
#
# 200 Adam iterations, batch 16, seed 1: vgg-small with `layer`, `2ps:4`, `overl:4`, `2ps-h`, and
# ResNet-small with `layer --bn train` and `2ps:4 --bn per-band`. Writes results/convergence/
# <net>_<plan>[_<bn>].h5 (one run each, overwritten) and results/convergence/summary.tsv: one row per
# run with its loss at the first and last iteration and the max and mean over iterations of
# |loss - reference loss|, the reference being the net's `layer` run. The header records the command
# and the git commit; each .h5 records its own lrcnn command. Needs /usr/bin/python3 with h5py.
set -euo pipefail

src="$(cd "$(dirname "$0")/.." && pwd)"
lrcnn="${1:-$src/build/lrcnn}"
out="$src/results/convergence"
common=(--batch 16 --iters 200 --optimizer adam --seed 1)
# net plan bn-argument ("" for the net's default); the first run of each net is its reference.
runs=(
  "vgg-small layer"
  "vgg-small 2ps:4"
  "vgg-small overl:4"
  "vgg-small 2ps-h"
  "resnet-small layer train"
  "resnet-small 2ps:4 per-band"
)

mkdir -p "$out"
commit="$(git -C "$src" rev-parse --short HEAD 2>/dev/null || echo unknown)"
[ -n "$(git -C "$src" status --porcelain 2>/dev/null)" ] && commit="$commit (working tree modified)"
files=()
for r in "${runs[@]}"; do
  read -r net plan bn <<<"$r"
  name="${net}_${plan//:/_}${bn:+_$bn}"
  args=(train --net "$net" "${common[@]}" --plan "$plan" ${bn:+--bn "$bn"} -o "$out/$name.h5" --force)
  echo "lrcnn ${args[*]}"
  "$lrcnn" "${args[@]}" >/dev/null
  files+=("$out/$name.h5")
done

/usr/bin/python3 - "$out/summary.tsv" "experiments/convergence.sh $*" "$commit" "${files[@]}" <<'EOF'
import os, sys
import h5py
import numpy as np

path, command, commit, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
refs, rows = {}, []
for f in files:
    with h5py.File(f, "r") as h:
        run = h["runs/00000"]
        net, plan, bn = run.attrs["net"], run.attrs["plan"], run.attrs["bn"]
        loss = run["measured/loss"][()].astype(np.float64)
        cmd = h.attrs["lrcnn_command"]
    ref_name, ref = refs.setdefault(net, (f"{plan} bn={bn}", loss))
    d = np.abs(loss - ref)
    rows.append((os.path.basename(f), net, plan, bn, ref_name, loss[0], loss[-1], d.max(), d.mean(), cmd))

tmp = path + ".tmp"
with open(tmp, "w") as t:
    t.write(f"# command: {command.strip()}\n# git_commit: {commit}\n")
    t.write("# 200 Adam iterations, batch 16, seed 1; diff = |loss - reference loss| per iteration\n")
    for r in rows:
        t.write(f"# run {r[0]}: {r[9]}\n")
    t.write("file\tnet\tplan\tbn\treference\tfirst_loss\tfinal_loss\tmax_abs_diff\tmean_abs_diff\n")
    for r in rows:
        t.write("\t".join(r[:5]) + "\t" + "\t".join(f"{v:.9g}" for v in r[5:9]) + "\n")
os.replace(tmp, path)
print(open(path).read(), end="")
EOF
