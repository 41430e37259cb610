#!/usr/bin/env bash
# ./lrcnn bench: the simulator benchmark, the codecs of kept maps against memcpy (and each plan
# modifier's cost on an iteration), the CPU engine benchmark (its arena against its pool too) and
# its PyTorch 1.13 peer, then each plan's cost in PyTorch (python/lrcnn_torch) beside lrcnn's, in one
# run on this machine, then the engine/PyTorch ratios of time and of memory. Each net runs in its
# own process, ours and PyTorch's, so each RSS high-water mark belongs to that net alone.
# Usage: bench/run.sh BUILD_DIR
set -euo pipefail
build="$1"; here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
"$build/lrcnn_bench"
echo
"$build/lrcnn_bench_codec"
echo
"$build/lrcnn_bench_engine" 2 convs
"$build/lrcnn_bench_engine" 2 alloc
summary=""
for batch in 2 8; do
  for net in vgg16 resnet50; do
    engine="$("$build/lrcnn_bench_engine" "$batch" "$net" | tail -n +3)"; echo "$engine"
    peer="$(BENCH_BATCH=$batch /usr/bin/python3 "$here/torch_peer.py" "$net")"; echo "$peer"; echo
    # BENCH NET SECONDS TRACKED_PEAK_MIB RSS_RISE_MIB / PEER NET SECONDS RSS_RISE_MIB
    summary+="$(awk -v n="$net" -v b="$batch" '$1 == "BENCH" && $2 == n {t = $3; p = $4; r = $5}
                                               $1 == "PEER" && $2 == n {pt = $3; pr = $4}
      END { printf "%-9s batch %d, 224x224: time lrcnn %.3f s, PyTorch %.3f s: %.2fx (goal <= 1.0x);", n, b, t, pt, t / pt
            printf " memory rise lrcnn %.0f MiB (tracked peak %.0f), PyTorch %.0f MiB: %.2fx\n", r, p, pr, r / pr }' \
      <<<"$engine"$'\n'"$peer")"$'\n'
  done
done
printf '%s' "$summary"
echo
/usr/bin/python3 "$here/torch_plan.py" "$build/lrcnn"
