#!/usr/bin/env bash
# The planner's baselines, predicted (no engine runs; minutes): for VGG-16 and ResNet-50 at
# 224x224, batch 8, 32 and 64, SGD and Adam, with this CPU's profile (results/profile_cpu.h5,
# experiments/planner_cpu.sh):
#  1. the planner against the fastest preset that fits, at budgets from the smallest reachable
#     peak to layer's;
#  2. ckpt-opt:B (the plan lrcnn plan --space ckpt finds) against ckpt-sqrt at B = ckpt-sqrt's own peak;
#  3. the offload space (--space offload: the chain DP's offload(all) and offload(conv) segments and,
#     on these devices, the offload lists of sim/planner/offsel.h's heuristics at vDNN's two peaks)
#     against vdnn-all and vdnn-conv at their peaks, on the H100 roofline
#     over PCIe 4, PCIe 5 and NVLink-C2C links (uncalibrated: no GPU here; moves overlap compute;
#     experiments/offload_select.sh compares the selections themselves);
#  4. the memory/time frontiers at batch 8 with Adam (results/pareto_*.h5, paper/figures/pareto.png).
# Output: results/planner_sim.txt (with every command), results/pareto_vgg16.h5,
# results/pareto_resnet50.h5. Usage: experiments/planner_sim.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
prof=results/profile_cpu.h5
bytes() { /usr/bin/python3 -c "
import re,sys
u={'B':1,'KiB':2**10,'MiB':2**20,'GiB':2**30,'TiB':2**40}
m=re.match(r'([0-9.]+) *(\w+)','$1'); print(int(float(m.group(1))*u[m.group(2)]))"; }
field() { sed -n "s/^  $1 *//p" | head -1; }
tfield() { sed -n 's/^  time  *\([0-9.]*\) ms per iteration.*/\1/p' | head -1; }

{
  echo "# commit $(git rev-parse --short HEAD)"
  echo "# 1. planner vs the fastest preset that fits (predicted, $prof)"
  printf '%-9s %5s %-5s %12s  %-24s %10s  %-60s %10s %8s\n' net batch opt budget preset "time" planner "time" speedup
  for net in vgg16 resnet50; do for batch in 8 32 64; do for opt in sgd adam; do
    lo=$(bytes "$({ "$lrcnn" plan --net $net --image 224 --batch $batch --optimizer $opt --budget 1 2>&1 >/dev/null || true; } |
                  sed -n 's/.*smallest footprint found is \([0-9.]* [KMGT]*i*B\).*/\1/p')")
    hi=$(bytes "$("$lrcnn" sim --net $net --image 224 --batch $batch --optimizer $opt --plan layer |
                  sed -n 's/^  peak (device) *\([0-9.]* [KMGT]*i*B\).*/\1/p')")
    for f in 5 25 50 75 100; do
      b=$((lo + (hi - lo) * f / 100))
      out=$("$lrcnn" plan --net $net --image 224 --batch $batch --optimizer $opt --budget $b --profile $prof 2>&1 || true)
      plan=$(field plan <<<"$out"); t=$(tfield <<<"$out")
      if [ -z "$plan" ]; then printf '%-9s %5d %-5s %12d  %s\n' $net $batch $opt $b "$(tail -1 <<<"$out")"; continue; fi
      pre=$(field "vs preset" <<<"$out")
      if [ "$pre" = "none fits" ]; then pname="(no preset fits)"; pt=""
      elif [ -n "$pre" ]; then pname=${pre%%:*}; pt=$(sed -n 's/.*, \([0-9.]*\) ms (.*/\1/p' <<<"$pre")
      else pname="$plan"; pt="$t"; fi   # the planner's answer is a preset (the fastest, or kept within the model's error)
      printf '%-9s %5d %-5s %12d  %-24s %10s  %-60s %10s %8s\n' $net $batch $opt $b "${pname:0:24}" "$pt" "${plan:0:60}" "$t" \
        "$([ -n "$pt" ] && /usr/bin/python3 -c "print('%.3fx' % ($pt / $t))" || echo -)"
    done
  done; done; done
  echo
  echo "# 2. ckpt-opt:B (the plan --space ckpt finds) vs ckpt-sqrt at B = ckpt-sqrt's peak (predicted, $prof)"
  for net in vgg16 resnet50; do for batch in 8 32 64; do for opt in sgd adam; do
    s=$("$lrcnn" sim --net $net --image 224 --batch $batch --optimizer $opt --plan ckpt-sqrt --profile $prof)
    peak=$(sed -n 's/^  peak (device) *\([0-9.]* [KMGT]*i*B\).*/\1/p' <<<"$s"); st=$(sed -n 's/^  time \([0-9.]*\) ms.*/\1/p' <<<"$s")
    o=$("$lrcnn" sim --net $net --image 224 --batch $batch --optimizer $opt --plan "ckpt-opt:$(bytes "$peak")" --profile $prof)
    ot=$(sed -n 's/^  time \([0-9.]*\) ms.*/\1/p' <<<"$o")
    printf '%-9s %3d %-5s ckpt-sqrt %9s %9s ms | ckpt-opt %9s %9s ms  %.3fx  %s\n' $net $batch $opt "$peak" "$st" \
      "$(sed -n 's/^  peak (device) *\([0-9.]* [KMGT]*i*B\).*/\1/p' <<<"$o")" "$ot" \
      "$(/usr/bin/python3 -c "print($st / $ot)")" "$(sed -n '2s/^  //p' <<<"$o")"
  done; done; done
  echo
  echo "# 3. the offload space vs vDNN on three host links (H100 roofline, uncalibrated; moves overlap compute on a copy engine)"
  for net in vgg16 resnet50; do for dev in h100-pcie4 h100-pcie5 gh200; do for pre in vdnn-conv vdnn-all; do
    s=$("$lrcnn" sim --net $net --image 224 --batch 32 --optimizer adam --plan $pre --device $dev)
    peak=$(sed -n 's/^  peak (device) *\([0-9.]* [KMGT]*i*B\).*/\1/p' <<<"$s"); st=$(sed -n 's/^  time \([0-9.]*\) ms.*/\1/p' <<<"$s")
    o=$("$lrcnn" plan --net $net --image 224 --batch 32 --optimizer adam --budget "$(($(bytes "$peak") + 2**20))" --space offload --device $dev)
    printf '%-9s %-11s %-9s %9s %8s ms | offload-opt %9s %8s ms  %.150s\n' $net $dev $pre "$peak" "$st" \
      "$(field peak <<<"$o" | sed 's/ (replay)//')" "$(tfield <<<"$o")" "$(field plan <<<"$o")"
  done; done; done
  echo
  echo "# 4. frontiers"
  for net in vgg16 resnet50; do
    lo=$({ "$lrcnn" plan --net $net --image 224 --batch 8 --optimizer adam --budget 1 2>&1 >/dev/null || true; } |
         sed -n 's/.*smallest footprint found is \([0-9.]* [KMGT]*i*B\).*/\1/p')
    b=$(($(bytes "$lo") + 2**24))
    echo "\$ $lrcnn plan --net $net --image 224 --batch 8 --optimizer adam --budget $b --profile $prof --pareto results/pareto_$net.h5 --force"
    "$lrcnn" plan --net $net --image 224 --batch 8 --optimizer adam --budget "$b" --profile $prof \
      --pareto results/pareto_$net.h5 --force
  done
  /usr/bin/python3 plots/pareto.py results/pareto_vgg16.h5 results/pareto_resnet50.h5
} 2>&1 | tee results/planner_sim.txt
