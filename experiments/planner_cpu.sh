#!/usr/bin/env bash
# The planner on this machine's CPU engine (issue: the fastest plan under a budget), in two parts:
#  1. lrcnn calibrate: the device profile results/profile_cpu.h5 (VGG-16 and ResNet-50 at 224x224,
#     batch 8), with every other preset held out of the fit and checked against the engine;
#  2. for VGG-16 and ResNet-50 (224x224, batch 8, 32 and 64, SGD and Adam) at budgets from the
#     smallest peak the planner can reach to layer's peak: lrcnn plan --measure 3 runs the planner's
#     plan and the fastest preset that fits on the engine (3 iterations each: the median of the 2
#     after the first) and prints both measured peaks and times.
# Output: results/profile_cpu.h5, results/profile_cpu.txt, results/planner_cpu.txt (each with the
# commands that made it). Part 1 about 30 minutes, part 2 about 90 minutes on 2 cores.
# The engine runs with its default thread waiting (spinning, then sleeping: README). calibrate runs
# every plan in one process, and a plan's time there depends on what ran before it in that process
# (ResNet-50 after VGG-16 ran ~20% faster than in a process of its own): paper/README.md.
# Usage: experiments/planner_cpu.sh [BUILD_DIR] (PART=2 runs the second part alone, on the existing
# profile; BATCHES="8 32" a subset of the batches).
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
run() { echo "\$ $*"; "$@"; echo; }

[ "${PART:-1}" = 2 ] || {
  run "$lrcnn" calibrate --net vgg16,resnet50 --image 224 --batch 8 --iters 3 \
    --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 \
    --check ckpt-sqrt,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h,authors-2ps,authors-overl,authors-2ps-h,authors-overl-h \
    -o results/profile_cpu.h5 --force
} 2>&1 | tee results/profile_cpu.txt


{
  echo "# commit $(git rev-parse --short HEAD)"
  for batch in ${BATCHES:-8 32 64}; do
  for net in vgg16 resnet50; do
    for opt in sgd adam; do
      # the smallest peak the planner reaches (its exit-2 message) and layer's peak, in bytes
      lo=$({ "$lrcnn" plan --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --budget 1 2>&1 >/dev/null || true; } |
           sed -n 's/.*smallest peak found is \([0-9.]* [KMG]*i*B\).*/\1/p' | tr -d ' ')
      hi=$("$lrcnn" sim --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --plan layer |
           sed -n 's/^  peak (device) *\([0-9.]* [KMG]*i*B\).*/\1/p' | tr -d ' ')
      for f in 0.1 0.4 0.7; do
        b=$(/usr/bin/python3 -c "
import re,sys
u={'B':1,'KiB':2**10,'MiB':2**20,'GiB':2**30}
def p(s): m=re.match(r'([0-9.]+)(\w+)',s); return float(m.group(1))*u[m.group(2)]
print(int(p('$lo')+($f)*(p('$hi')-p('$lo'))))")
        run "$lrcnn" plan --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --budget "$b" \
          --profile results/profile_cpu.h5 --measure 3
      done
    done
  done
  done
} 2>&1 | tee results/planner_cpu.txt
