#!/usr/bin/env bash
# Memory-poor devices, predicted (lrcnn sim; seconds): ResNet-50 and MobileNetV2 at 224x224, batch 32,
# SGD, BN train (the default), under layer, checkpointing (sqrt and optimal), offload (vdnn-conv) and
# 2PS, on the rooflines of a 4 GB laptop GPU (gtx1650), an edge board whose GPU shares its 4 GB and
# offloads to a microSD card (jetson-nano), and a CPU-only board offloading to the same card (rpi4):
# peaks and times per iteration, each against layer's. Output: results/edge_devices.txt, with every
# command. Usage: experiments/edge_devices.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
{
  echo "# commit $(git rev-parse --short HEAD)"
  for net in resnet50 mobilenetv2; do
    for dev in gtx1650 jetson-nano rpi4; do
      echo "\$ $lrcnn sim --device $dev --net $net --batch 32 --optimizer sgd --plan layer,ckpt-sqrt,ckpt-opt,vdnn-conv,2ps:8"
      "$lrcnn" sim --device "$dev" --net "$net" --batch 32 --optimizer sgd --plan layer,ckpt-sqrt,ckpt-opt,vdnn-conv,2ps:8
      echo
    done
  done
} 2>&1 | tee results/edge_devices.txt
