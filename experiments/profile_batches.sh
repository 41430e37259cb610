#!/usr/bin/env bash
# Does the time model carry from the batch it was calibrated at to larger ones? The planner answers
# at batch 32 and 64 with a profile measured at batch 8 (results/profile_cpu.h5), and its predicted
# times there were 12-25% under the engine's on ResNet-50 (results/planner_cpu.txt): each kind of
# step is fitted as a + b x over the sizes it was measured at, and memory-bound steps slow down per
# byte once their maps no longer fit in the cache. Here:
#  1. lrcnn calibrate at batch 8 and 32 together (results/profile_cpu_b8_32.h5 and .txt): the same
#     fitting plans as planner_cpu.sh, six presets held out at both batches;
#  2. for every held-out check of that run, the batch-8 profile's prediction of the same schedule
#     (lrcnn sim --profile results/profile_cpu.h5) beside the two-batch profile's, against the one
#     measurement (results/profile_batches.txt).
# About 45 minutes on 2 cores. Usage: experiments/profile_batches.sh [BUILD_DIR] (PART=2: the second
# part alone, on the existing profile)
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
checks=ckpt-sqrt,vdnn-conv,vdnn-all,2ps:4,overl-h,authors-overl

[ "${PART:-1}" = 2 ] || {
  echo "\$ $lrcnn calibrate --net resnet50,vgg16 --image 224 --batch 8,32 --iters 3 --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check $checks -o results/profile_cpu_b8_32.h5 --force"
  "$lrcnn" calibrate --net resnet50,vgg16 --image 224 --batch 8,32 --iters 3 \
    --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check "$checks" \
    -o results/profile_cpu_b8_32.h5 --force
} 2>&1 | tee results/profile_cpu_b8_32.txt

# the predictions below are the current code's (lrcnn sim), so a change to the model shows here
predict() { # NET BATCH PLAN PROFILE -> predicted ms
  "$lrcnn" sim --net "$1" --image 224 --batch "$2" --plan "$3" --profile "$4" |
    sed -n 's/^  time \([0-9.]*\) ms per iteration.*/\1/p'
}
row() { # NET BATCH PLAN MEASURED_MS
  local old new
  old=$(predict "$1" "$2" "$3" results/profile_cpu.h5); new=$(predict "$1" "$2" "$3" results/profile_cpu_b8_32.h5)
  awk -v n="$1" -v b="$2" -v p="$3" -v m="$4" -v o="$old" -v w="$new" 'BEGIN {
    printf "  %-9s %5d  %-14s %9.1f ms  %10.1f ms %+6.1f%%  %8.1f ms %+6.1f%%\n", n, b, p, m, o, 100 * (o - m) / m, w, 100 * (w - m) / m }'
}
header() {
  printf '\n  %-9s %5s  %-14s %12s  %13s %7s  %11s %7s\n' net batch plan measured "batch 8 alone" error "8 and 32" error
}
{
  echo "# commit $(git rev-parse --short HEAD): predicted iteration times from the profile calibrated at batch 8 alone"
  echo "# (results/profile_cpu.h5) and from the one calibrated at batch 8 and 32 (results/profile_cpu_b8_32.h5),"
  echo "# both by lrcnn sim --net NET --image 224 --batch B --plan P --profile FILE, against the engine."
  echo
  echo "# 1. the held-out checks of the two-batch calibration (measured there: median of 2 iterations after the first)"
  header
  /usr/bin/python3 -c "
import h5py
c = h5py.File('results/profile_cpu_b8_32.h5', 'r')['profile/checks'][()]
for r in c[c['held_out'] == 1]: print(r['net'].decode(), r['batch'], r['plan'].decode(), r['measured_us'] / 1e3)" |
  while read -r net batch plan ms; do row "$net" "$batch" "$plan" "$ms"; done
  echo
  echo "# 2. batch 64, beyond both calibrations: each plan in a process of its own,"
  echo "#    lrcnn train --net NET --image 224 --batch 64 --plan P --iters 3 (median of the 2 after the first)"
  header
  for net in resnet50 vgg16; do
    for p in layer vdnn-conv ckpt-sqrt; do
      ms=$("$lrcnn" train --net $net --image 224 --batch 64 --plan $p --iters 3 |
           sed -n 's/^  time per iteration: .*measured \([0-9.]*\) ms.*/\1/p')
      row $net 64 $p "$ms"
    done
  done
} 2>&1 | tee results/profile_batches.txt
