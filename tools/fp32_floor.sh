#!/usr/bin/env bash
# results/fp32_floor.txt: fp32's own error on VGG-16's and ResNet-50's gradients in the configuration
# of results/validate_*.h5 and results/bn_resnet50.h5, to read their gradient deviations against
# (tools/fp64_floor.py says how).
# Usage, from the repository root after a build: bash tools/fp32_floor.sh > results/fp32_floor.txt
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
d="$(mktemp -d)"; trap 'rm -rf "$d"' EXIT
floor() { # NET BN PLAN...: one iteration per plan, dumped, then every dump against float64
  local net=$1 bn=$2 dumps=() p; shift 2
  for p in "$@"; do
    local args=(--net "$net" --image 224 --batch 2 --bn "$bn" --plan "$p" --iters 1 --seed 1 --dump "$net-$bn-$p.h5" -o "run-$net-$bn-$p.h5")
    echo "\$ ./build/lrcnn train ${args[*]}"
    (cd "$d" && "$root/build/lrcnn" train "${args[@]}" > log 2>&1) || { cat "$d/log" >&2; exit 1; }
    dumps+=("$net-$bn-$p.h5")
  done
  echo "\$ /usr/bin/python3 tools/fp64_floor.py nets/$net.net ${dumps[*]} --bn $bn"
  (cd "$d" && /usr/bin/python3 "$root/tools/fp64_floor.py" "$root/nets/$net.net" "${dumps[@]}" --bn "$bn")
  echo
}
echo "# fp32's own error on VGG-16's and ResNet-50's gradients at 224x224, batch 2, seed 1 (the"
echo "# configuration of results/validate_*.h5 and, BatchNorm in train mode, results/bn_resnet50.h5):"
echo "# lrcnn's layer plan and a row plan, and PyTorch 1.13's"
echo "# float32, each against PyTorch in float64 on the same weights and batch. Made at commit"
echo "# $(git -C "$root" rev-parse --short HEAD) on $(date -u +%Y-%m-%d) by: bash tools/fp32_floor.sh > results/fp32_floor.txt"
echo
floor vgg16 train layer 2ps:2
floor resnet50 frozen layer overl:3
floor resnet50 train layer 2ps:4
