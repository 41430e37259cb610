#!/usr/bin/env bash
# The planner's margin (docs/plans.md, "The planner"), on the engine: the five budgets of
# results/planner_cpu.txt where the planner's own plan ran against the fastest preset that fits
# (one of them 0.958x, slower), planned again with the margin of sim/predict/timing.h (2.69x the median
# held-out error) and measured, with the batch-8 profile the table used (results/profile_cpu.h5)
# and with the profile calibrated at batch 8 and 32 (results/profile_cpu_b8_32.h5,
# experiments/profile_batches.sh). Output: results/planner_margin.txt. About 20 minutes on 2 cores.
# Usage: experiments/planner_margin.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
{
  echo "# commit $(git rev-parse --short HEAD)"
  while read -r net batch opt budget; do
    for prof in results/profile_cpu.h5 results/profile_cpu_b8_32.h5; do
      echo "\$ $lrcnn plan --net $net --image 224 --batch $batch --optimizer $opt --budget $budget --profile $prof --measure 3"
      "$lrcnn" plan --net "$net" --image 224 --batch "$batch" --optimizer "$opt" --budget "$budget" --profile "$prof" --measure 3
      echo
    done
  done <<'B'
vgg16 8 sgd 1835343544
resnet50 8 adam 804269326
vgg16 32 adam 3467902976
vgg16 64 sgd 3087288762
vgg16 64 adam 3330759720
B
} 2>&1 | tee results/planner_margin.txt
