#!/usr/bin/env bash
# ./lrcnn bench: the simulator benchmark, the CPU engine benchmark and its PyTorch 1.13 peer, in one
# run on this machine, then the engine/PyTorch time ratios. Usage: bench/run.sh BUILD_DIR
set -euo pipefail
build="$1"; here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$build/lrcnn_bench"
echo
engine="$("$build/lrcnn_bench_engine")"; echo "$engine"
echo
peer="$(/usr/bin/python3 "$here/torch_peer.py" vgg16 resnet50)"; echo "$peer"
echo
for net in vgg16 resnet50; do
  ours=$(awk -v n="$net" '$1 == "BENCH" && $2 == n {print $3}' <<<"$engine")
  theirs=$(awk -v n="$net" '$1 == "PEER" && $2 == n {print $3}' <<<"$peer")
  awk -v n="$net" -v a="$ours" -v b="$theirs" \
    'BEGIN { printf "%-9s one iteration, batch 2, 224x224: lrcnn %.3f s, PyTorch %.3f s: %.2fx PyTorch'"'"'s time (target <= 1.1x)\n", n, a, b, a / b }'
done
