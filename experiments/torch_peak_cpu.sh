#!/usr/bin/env bash
# PyTorch's own memory against lrcnn's torch plan, on this CPU (PyTorch 1.13, Debian's): every
# shipped net at batch 1, 8 and 32: the torch plan (1.13's zero_grad) with SGD and Adam, torch2 (2.x's
# zero_grad, emulated in 1.13 with set_to_none=True) with SGD. Writes results/torch_peak_cpu.txt.
# The emulation is not 2.x whole: 2.x's mean over H and W (a pooling to 1x1) keeps no input, which
# the torch2 plan predicts and 1.13 does not do (vgg16-gap's stash: one map under 1.13's).
#   experiments/torch_peak_cpu.sh [BUILD_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$here/build}"
tmp="$(mktemp)"  # the result is written whole at the end, so the tree is clean while the run records it
trap 'rm -f "$tmp"' EXIT
nets=(vgg-small.net resnet-small.net bn-cover.net kernels.net kinds.net vgg16-gap.net vgg16.net resnet50.net)
{
  echo "# tools/torch_peak.py over every shipped net (experiments/torch_peak_cpu.sh), $(date -u +%Y-%m-%dT%H:%M:%SZ),"
  echo "# lrcnn $("$build/lrcnn" --version | cut -d' ' -f2-); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  for run in "torch sgd" "torch adam" "torch2 sgd"; do
    set -- $run
    echo
    /usr/bin/python3 "$here/tools/torch_peak.py" "${nets[@]/#/$here/nets/}" --batch 1,8,32 --plan $1 --optimizer $2 \
      --lrcnn "$build/lrcnn" 2>/dev/null | grep -v '^wrote '
  done
} | tee "$tmp"
install -m 0644 "$tmp" "$here/results/torch_peak_cpu.txt"
