#!/usr/bin/env bash
# The planner on this machine's CPU engine (issue: the fastest plan under a budget): for VGG-16 and
# ResNet-50 (224x224, batch 8, 32 and 64, SGD and Adam) at budgets from the smallest peak the planner
# can reach to layer's peak, lrcnn plan --measure 3 runs the planner's plan and the fastest preset
# that fits on the engine (3 iterations each: the median of the 2 after the first) and prints both
# measured peaks and times.
# The time model is the device profile calibrated at batch 8 and 32 (results/profile_cpu_b8_32.h5,
# made by experiments/profile_batches.sh; PROFILE=FILE another): its held-out errors stay within
# about 10% at batch 8 to 64, where the profile calibrated at batch 8 alone (results/profile_cpu.h5,
# made by experiments/profile_cpu.sh) under-predicted ResNet-50 by 12-30%.
# The engine runs with its default thread waiting (spinning, then sleeping: README).
# Output: results/planner_cpu.txt (with the commands that made it), about 90 minutes on 2 cores.
# Usage: experiments/planner_cpu.sh [BUILD_DIR] (BATCHES="8 32" a subset of the batches)
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
profile="${PROFILE:-results/profile_cpu_b8_32.h5}"
run() { echo "\$ $*"; "$@"; echo; }

{
  echo "# commit $(git rev-parse --short HEAD)"
  for batch in ${BATCHES:-8 32 64}; do
  for net in vgg16 resnet50; do
    for opt in sgd adam; do
      # the smallest peak the planner reaches (its exit-2 message) and layer's peak, in bytes
      lo=$({ "$lrcnn" plan --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --budget 1 2>&1 >/dev/null || true; } |
           sed -n 's/.*smallest footprint found is \([0-9.]* [KMG]*i*B\).*/\1/p' | tr -d ' ')
      hi=$("$lrcnn" sim --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --plan layer |
           sed -n 's/^  peak (device) *\([0-9.]* [KMG]*i*B\).*/\1/p' | tr -d ' ')
      for f in 0.1 0.4 0.7; do
        b=$(/usr/bin/python3 -c "
import re,sys
u={'B':1,'KiB':2**10,'MiB':2**20,'GiB':2**30}
def p(s): m=re.match(r'([0-9.]+)(\w+)',s); return float(m.group(1))*u[m.group(2)]
print(int(p('$lo')+($f)*(p('$hi')-p('$lo'))))")
        run "$lrcnn" plan --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --budget "$b" \
          --profile "$profile" --measure 3
      done
    done
  done
  done
} 2>&1 | tee results/planner_cpu.txt
