#!/usr/bin/env bash
# Offload selection (issue: Beaumont, Eyraud-Dubois and Shilova's problem): which kept maps to move
# to the host, and when. For VGG-16 and ResNet-50 at 224x224, batch 32, Adam, at three budgets
# between vdnn-all's peak and layer's, `lrcnn plan --offload-select` puts vDNN's two policies beside
# GLPK's exact answer (its default 10 s limit, against round's plan, with the gap it proved) and the two relaxation heuristics (round, dive), on four devices:
# the H100 roofline over PCIe 4, PCIe 5 and NVLink-C2C (uncalibrated: no GPU here; moves overlap
# compute on a copy engine) and this CPU's profile (results/profile_cpu.h5; moves in line). Then,
# on the CPU engine at batch 8, the exact plan is trained for 3 iterations and its measured peak and
# time printed beside the prediction (the dive's plan where exact finds none in its time limit). Output: results/offload_select.txt, with every command.
# About 15 minutes on 2 cores. Usage: experiments/offload_select.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
prof=results/profile_cpu.h5
bytes() { /usr/bin/python3 -c "
import re
u={'B':1,'KiB':2**10,'MiB':2**20,'GiB':2**30,'TiB':2**40}
m=re.match(r'([0-9.]+) *(\w+)','$1'); print(int(float(m.group(1))*u[m.group(2)]))"; }
peak() { "$lrcnn" sim --net "$1" --image 224 --batch "$2" --optimizer adam --plan "$3" | sed -n 's/^  peak (device) *\([0-9.]* [KMGT]*i*B\).*/\1/p'; }
run() { echo "\$ $*"; "$@"; echo; }

{
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- sim cli engine io || echo ' (with local changes)')"
  for net in vgg16 resnet50; do
    lo=$(bytes "$(peak $net 32 vdnn-all)"); hi=$(bytes "$(peak $net 32 layer)")
    for dev in "--device h100-pcie4" "--device h100-pcie5" "--device gh200" "--profile $prof"; do
      for f in 25 50 75; do
        run "$lrcnn" plan --offload-select --net $net --image 224 --batch 32 --optimizer adam \
          --budget $((lo + (hi - lo) * f / 100)) $dev 2>/dev/null
      done
    done
  done
  echo "# the exact (or dive's) plan on this CPU's engine, batch 8 (measured peak = replay; time against the profile's prediction)"
  for net in vgg16 resnet50; do
    lo=$(bytes "$(peak $net 8 vdnn-all)"); hi=$(bytes "$(peak $net 8 layer)")
    b=$((lo + (hi - lo) / 2))
    echo "\$ $lrcnn plan --offload-select --net $net --image 224 --batch 8 --optimizer adam --budget $b --profile $prof"
    out=$("$lrcnn" plan --offload-select --net $net --image 224 --batch 8 --optimizer adam --budget $b --profile $prof \
          2>&1 >/dev/null)
    sel=$(sed -n 's/^exact: //p' <<<"$out"); how=exact
    [ -n "$sel" ] || { sel=$(sed -n 's/^dive: //p' <<<"$out"); how="dive (exact found none in the time limit)"; }
    echo "$how: $sel"
    run "$lrcnn" train --net $net --image 224 --batch 8 --optimizer adam --plan "$sel" --iters 3 --profile $prof
  done
} 2>&1 | tee results/offload_select.txt
