#!/usr/bin/env bash
# Plans in PyTorch at full size, on the CPU (python/lrcnn_torch; minutes): VGG-16, ResNet-50,
# MobileNetV2 and the U-Net at 224x224, batch 2, BatchNorm frozen and dropout drawing, under layer,
# ckpt-sqrt, 2ps:4, overl:4, 2ps-h, vdnn-conv, layer+dpr:bf16, layer+gist:binarize and layer+gist — logits and gradients against
# the plain module's, and the bytes kept for backward and held for good against lrcnn's
# prediction (tests/test_torch_plan.py full).
# Output: results/torch_plan_check_cpu.txt. Usage: experiments/torch_plan_cpu.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
{
  echo "# commit $(git rev-parse --short HEAD): /usr/bin/python3 tests/test_torch_plan.py $build/lrcnn full"
  /usr/bin/python3 tests/test_torch_plan.py "$build/lrcnn" full
} 2>&1 | tee results/torch_plan_check_cpu.txt
