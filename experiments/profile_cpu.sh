#!/usr/bin/env bash
# This CPU's device profile at batch 8 (results/profile_cpu.h5): lrcnn calibrate times every step of
# five fitting plans per net (VGG-16 and ResNet-50, 224x224, SGD; median of 2 iterations after the
# first), fits each kind of step as a + b x, and holds ten presets out of the fit, run on the engine
# beside their prediction. The planner's predicted tables (experiments/planner_sim.sh, the Pareto
# sets) and experiments/profile_batches.sh's comparison read it.
# Output: results/profile_cpu.h5, and results/profile_cpu.txt (calibrate's own lines, then
# tools/show_profile.py's table of predicted against measured). About 12 minutes on 2 cores.
# Usage: experiments/profile_cpu.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
checks=ckpt-sqrt,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h,authors-2ps,authors-overl,authors-2ps-h,authors-overl-h
{
  echo "# made at commit $(git rev-parse --short HEAD) on $(date -u +%Y-%m-%d) by: bash experiments/profile_cpu.sh $build"
  echo
  echo "\$ $lrcnn calibrate --net vgg16,resnet50 --image 224 --batch 8 --iters 3 --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check $checks -o results/profile_cpu.h5 --force"
  "$lrcnn" calibrate --net vgg16,resnet50 --image 224 --batch 8 --iters 3 \
    --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check "$checks" \
    -o results/profile_cpu.h5 --force
  echo
  echo "\$ tools/show_profile.py results/profile_cpu.h5"
  /usr/bin/python3 tools/show_profile.py results/profile_cpu.h5
} 2>&1 | tee results/profile_cpu.txt
