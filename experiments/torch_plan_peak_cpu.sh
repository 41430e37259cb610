#!/usr/bin/env bash
# Plans in PyTorch, their allocated peak against lrcnn's prediction, on the CPU (python/lrcnn_torch;
# about 30 minutes on 2 cores): VGG-16, ResNet-50, MobileNetV2 and the U-Net at 224x224, batch 8,
# BatchNorm frozen, under bench/torch_plan_gpu.py's plans — the profiler's allocated peak of one
# training step beside `.predicted["peak"]`, and the step's time against the plain module's (one
# timed iteration: a shape, not a benchmark; bench/torch_plan_gpu.py on a GPU times ten).
# PYTHON picks the PyTorch: Debian's 1.13 by default, or a venv's 2.x (what GPU machines run).
# Output: results/torch_plan_peak_cpu_VERSION.txt. Usage: [PYTHON=...] experiments/torch_plan_peak_cpu.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
py="${PYTHON:-/usr/bin/python3}"
version="$("$py" -c 'import torch; print(torch.__version__.split("+")[0].split("a")[0])')"
out="results/torch_plan_peak_cpu_$version.txt"
[ -e "$out" ] && { echo "experiments/torch_plan_peak_cpu.sh: $out exists; remove it to regenerate" >&2; exit 2; }
{
  # the tree's state apart from these tables (removed to regenerate them, one version's while another's runs)
  echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':(exclude)results/torch_plan_peak_cpu_*.txt' || echo ' (local changes)'), $(date -u +%F), $(nproc) cores:" \
       "$py bench/torch_plan_gpu.py --lrcnn $build/lrcnn --device cpu --iters 1"
  "$py" bench/torch_plan_gpu.py --lrcnn "$build/lrcnn" --device cpu --iters 1 2>&1 | grep -v "Warning\|storage()"
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
