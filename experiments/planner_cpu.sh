#!/usr/bin/env bash
# The planner on this machine's CPU engine (issue: the fastest plan under a budget), in two parts:
#  1. lrcnn calibrate: the device profile results/profile_cpu.h5 (ResNet-50 and VGG-16 at 224x224,
#     batch 8), with every other preset held out of the fit and checked against the engine. ResNet-50
#     first: calibrate runs every plan in one process, and a net measured after VGG-16 runs in the
#     heap VGG-16 grew, which made ResNet-50 ~17% faster there than in a process of its own (as
#     train, validate and plan --measure run it);
#  2. for VGG-16 and ResNet-50 (224x224, batch 8, 32 and 64, SGD and Adam) at budgets from the
#     smallest peak the planner can reach to layer's peak: lrcnn plan --measure 3 runs the planner's
#     plan and the fastest preset that fits on the engine (3 iterations each: the median of the 2
#     after the first) and prints both measured peaks and times.
# Output: results/profile_cpu.h5, results/profile_cpu.txt, results/planner_cpu.txt (each with the
# commands that made it). Part 1 about 30 minutes, part 2 about two hours on 2 cores.
# Usage: experiments/planner_cpu.sh [BUILD_DIR] (PART=2 runs the second part alone, on the existing
# profile; BATCHES="8 32" a subset of the batches).
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
run() { echo "\$ $*"; "$@"; echo; }

[ "${PART:-1}" = 2 ] || {
  run "$lrcnn" calibrate --net resnet50,vgg16 --image 224 --batch 8 --iters 3 \
    --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 \
    --check ckpt-sqrt,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h,authors-2ps,authors-overl,authors-2ps-h,authors-overl-h \
    -o results/profile_cpu.h5 --force
} 2>&1 | tee results/profile_cpu.txt

# The held-out check again, each preset in a process of its own (as a user runs it) with 6
# iterations (the median of 5): calibrate's checks take the median of 2, and single iterations on
# this shared 2-core machine vary by 10-20%, so one check can be an outlier of the measurement
# (an overl-h measured faster than the overl:4 it contains) rather than of the model.
if [ "${PART:-1}" != 2 ]; then
  {
    echo "# commit $(git rev-parse --short HEAD): lrcnn train --net NET --image 224 --batch 8 --plan P --iters 6 --profile results/profile_cpu.h5"
    for net in resnet50 vgg16; do
      for p in ckpt-sqrt vdnn-conv 2ps:4 overl:4 2ps-h overl-h authors-2ps authors-overl authors-2ps-h authors-overl-h; do
        [ $net = resnet50 ] && case $p in authors-overl*|authors-2ps-h) continue;; esac
        printf '%-9s %-16s ' $net $p
        "$lrcnn" train --net $net --image 224 --batch 8 --plan $p --iters 6 --profile results/profile_cpu.h5 2>&1 |
          sed -n 's/^  time per iteration: \(predicted [0-9.]* ms, measured [0-9.]* ms\).*, \([-+][0-9.]*%\)).*/\1  \2/p'
      done
    done
  } 2>&1 | tee results/profile_cpu_recheck.txt
fi

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
