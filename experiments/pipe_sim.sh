#!/usr/bin/env bash
# Pipelined model parallelism, predicted (lrcnn pipe; no engine runs, seconds): VGG-16 and ResNet-50 at
# 224x224, batch 32 in 8 micro-batches of 4, SGD, over 4 devices (8 stages, 2 a device, interleaved),
# under GPipe, 1F1B and interleaved 1F1B, each stage under layer and ckpt-sqrt, the link NVLink 4
# (450 GB/s) and PCIe 4 (25 GB/s); stage times from the H100 roofline (uncalibrated: no GPU here);
# then ResNet-50's split under a per-device budget against the balanced one; then measured: one
# iteration on P CPU engines (--run) of VGG-16 and ResNet-50 at 64x64, batch 8, each device's measured
# peak beside its schedule's replay and the stage sums (a minute).
# Output: results/pipe_sim.txt, with every command. Usage: experiments/pipe_sim.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
{
  echo "# commit $(git rev-parse --short HEAD)"
  for net in vgg16 resnet50; do
    for plan in layer ckpt-sqrt; do
      for link in nvlink pcie4; do
        for sched in "gpipe" "1f1b" "interleaved --chunks 2"; do
          echo "\$ $lrcnn pipe --net $net --devices 4 --micro-batches 8 --batch 32 --schedule $sched --plan $plan --device h100 --link $link"
          # shellcheck disable=SC2086
          "$lrcnn" pipe --net "$net" --devices 4 --micro-batches 8 --batch 32 --schedule $sched --plan "$plan" --device h100 --link "$link"
          echo
        done
      done
    done
  done
  # the split under a per-device budget (--budget: the dynamic program over the clean cuts) against the
  # balanced one, ResNet-50 on the CPU roofline; and a budget under what any split needs
  for budget in "" "--budget 400MiB" "--budget 300MiB"; do
    echo "\$ $lrcnn pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 $budget"
    # shellcheck disable=SC2086
    "$lrcnn" pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 $budget || true
    echo
  done
  for net in vgg16 resnet50; do
    for sched in gpipe 1f1b; do
      for pm in "2 4" "4 8"; do
        # shellcheck disable=SC2086
        set -- $pm
        echo "\$ $lrcnn pipe --net $net --image 64 --batch 8 --devices $1 --micro-batches $2 --schedule $sched --run"
        "$lrcnn" pipe --net "$net" --image 64 --batch 8 --devices "$1" --micro-batches "$2" --schedule "$sched" --run
        echo
      done
    done
  done
} 2>&1 | tee results/pipe_sim.txt
