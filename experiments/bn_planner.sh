#!/usr/bin/env bash
# The planner's answers where BatchNorm's kept maps must leave the device (docs/plans.md, "Levels
# mixed", and the planner): ResNet-50 and DenseNet-121 at 224x224, batch 8, SGD, on the H100 over
# PCIe 4.0 (roofline times, uncalibrated), the row space (--space rows), at budgets from just over
# bn=train's row plans down to just over every level offloaded; each answer with its peak, its
# predicted time and the planner's own time on this machine. Output: results/bn_planner.txt.
# A few seconds. Usage: experiments/bn_planner.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
{
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':(exclude)results' && echo ' (clean tree)' || echo ' (local changes)'), $(nproc) cores"
  while read -r net budgets; do
    for b in $budgets; do
      echo "\$ $lrcnn plan --net $net --image 224 --batch 8 --device h100-pcie4 --space rows --budget ${b}MiB"
      "$lrcnn" plan --net "$net" --image 224 --batch 8 --device h100-pcie4 --space rows --budget "${b}MiB" | sed -n '1,9p' | grep -v '^$'
      echo
    done
  done <<'B'
resnet50 800 700 600 520 500 485
densenet121 700 600 500 450 400
B
} 2>&1 | tee results/bn_planner.txt
