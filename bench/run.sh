#!/usr/bin/env bash
# ./lrcnn bench: the simulator benchmark, the codecs of kept maps against memcpy (and each plan
# modifier's cost on an iteration), the CPU engine benchmark (its arena against its pool too) and
# its PyTorch 1.13 peer, then each plan's cost in PyTorch (python/lrcnn_torch) beside lrcnn's, in one
# run on this machine, then the engine/PyTorch ratios of time (the median of alternating pairs) and
# of memory: VGG-16 and ResNet-50 at batch 2 and 8, MobileNetV2, EfficientNet-B0, ConvNeXt-tiny and
# DenseNet-121 at batch 2. Each net runs in its own process, ours and PyTorch's, so each RSS
# high-water mark belongs to that net alone.
# Usage: bench/run.sh BUILD_DIR
set -euo pipefail
build="$1"; here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$build/lrcnn_bench"
echo
"$build/lrcnn_bench_codec"
echo
"$build/lrcnn_bench_engine" 2 convs
"$build/lrcnn_bench_engine" 2 alloc
# The engine against PyTorch: ROUNDS rounds, each running ours then PyTorch's (each its best of 3
# iterations after a warm-up), so that a slow spell of a shared machine falls on both sides of
# some pair; the first round's outputs are shown whole (SHOW=1), then every pair's ratio, their
# median and range.
rounds=${BENCH_ROUNDS:-3}
summary=""
pairs() { # NET BATCH SHOW: appends the net's line to $summary
  local net=$1 batch=$2 show=$3 pairs="" engine peer
  for round in $(seq "$rounds"); do
    engine="$("$build/lrcnn_bench_engine" "$batch" "$net" | tail -n +3)"
    peer="$(BENCH_BATCH=$batch /usr/bin/python3 "$here/torch_peer.py" "$net")"
    [ "$round" -gt 1 ] || [ "$show" = 0 ] || { echo "$engine"; echo "$peer"; echo; }
    # BENCH NET SECONDS TRACKED_PEAK_MIB RSS_RISE_MIB / PEER NET SECONDS RSS_RISE_MIB
    pairs+="$(awk '$1 == "BENCH" {t = $3; p = $4; r = $5} $1 == "PEER" {pt = $3; pr = $4}
                   END { print t, pt, p, r, pr }' <<<"$engine"$'\n'"$peer")"$'\n'
  done
  summary+="$(awk -v n="$net" -v b="$batch" 'NF {t[NR] = $1; pt[NR] = $2; q[NR] = $1 / $2; p = $3; r = $4; pr = $5; k = NR}
    END { for (i = 1; i <= k; i++) s[i] = q[i]
          for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (s[j] < s[i]) { x = s[i]; s[i] = s[j]; s[j] = x }
          med = k % 2 ? s[(k + 1) / 2] : (s[k / 2] + s[k / 2 + 1]) / 2
          printf "%-14s batch %d, 224x224: time lrcnn/PyTorch %.2fx median of %d pairs (%.2f..%.2f; lrcnn", n, b, med, k, s[1], s[k]
          for (i = 1; i <= k; i++) printf " %.3f", t[i]
          printf " s, PyTorch"
          for (i = 1; i <= k; i++) printf " %.3f", pt[i]
          printf " s; goal <= 1.0x); memory rise lrcnn %.0f MiB (tracked peak %.0f), PyTorch %.0f MiB: %.2fx\n", r, p, pr, r / pr }' \
    <<<"$pairs")"$'\n'
}
for batch in 2 8; do
  for net in vgg16 resnet50; do pairs "$net" "$batch" 1; done
done
# nets of other kinds (depthwise convolutions, squeeze-excitation, dense concatenation) at batch 2,
# their summary lines only
summary+=$'\n'
for net in mobilenetv2 efficientnetb0 convnext-tiny densenet121; do pairs "$net" 2 0; done
printf '%s' "$summary"
echo
/usr/bin/python3 "$here/torch_plan.py" "$build/lrcnn"
