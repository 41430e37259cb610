#!/usr/bin/env bash
# Does the time model carry from the batch it was calibrated at to larger ones? The planner answers
# at batch 32 and 64 with a profile measured at batch 8 (results/profile_cpu.h5), and its predicted
# times there were 12-25% under the engine's on ResNet-50 (results/planner_cpu.txt): each kind of
# step is fitted as a + b x over the sizes it was measured at, and memory-bound steps slow down per
# byte once their maps no longer fit in the cache. Here:
#  1. lrcnn calibrate at batch 8 and 32 together (results/profile_cpu_b8_32.h5 and .txt): the same
#     fitting plans as planner_cpu.sh, six presets held out at both batches;
#  2. for every held-out check of that run, the batch-8 profile's prediction of the same schedule
#     (lrcnn sim --profile results/profile_cpu.h5) beside the two-batch profile's, against the one
#     measurement (results/profile_batches.txt).
# About 45 minutes on 2 cores. Usage: experiments/profile_batches.sh [BUILD_DIR] (PART=2: the second
# part alone, on the existing profile)
set -euo pipefail
build="${1:-build}"
lrcnn="$build/lrcnn"
checks=ckpt-sqrt,vdnn-conv,vdnn-all,2ps:4,overl-h,authors-overl

[ "${PART:-1}" = 2 ] || {
  echo "\$ $lrcnn calibrate --net resnet50,vgg16 --image 224 --batch 8,32 --iters 3 --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check $checks -o results/profile_cpu_b8_32.h5 --force"
  "$lrcnn" calibrate --net resnet50,vgg16 --image 224 --batch 8,32 --iters 3 \
    --plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3 --check "$checks" \
    -o results/profile_cpu_b8_32.h5 --force
} 2>&1 | tee results/profile_cpu_b8_32.txt

{
  echo "# commit $(git rev-parse --short HEAD): the held-out checks of results/profile_cpu_b8_32.h5 (measured once, in"
  echo "# calibrate's process), predicted by the profile calibrated at batch 8 alone (results/profile_cpu.h5:"
  echo "# lrcnn sim --net NET --image 224 --batch B --plan P --profile results/profile_cpu.h5) and by the one"
  echo "# calibrated at batch 8 and 32 (the prediction calibrate stored beside the measurement)"
  /usr/bin/python3 - "$lrcnn" <<'P'
import subprocess, sys, h5py
lrcnn = sys.argv[1]
c = h5py.File("results/profile_cpu_b8_32.h5", "r")["profile/checks"][()]
print(f"\n  {'net':9s} {'batch':>5s}  {'plan':14s} {'measured':>11s}  {'batch 8 alone':>13s} {'error':>7s}  {'8 and 32':>11s} {'error':>7s}")
for r in c[c["held_out"] == 1]:
    net, plan, batch, m = r["net"].decode(), r["plan"].decode(), int(r["batch"]), r["measured_us"] / 1e3
    out = subprocess.run([lrcnn, "sim", "--net", net, "--image", "224", "--batch", str(batch), "--plan", plan,
                          "--profile", "results/profile_cpu.h5"], check=True, capture_output=True, text=True).stdout
    row = next(l.split() for l in out.splitlines() if l.split()[:1] == [plan])
    old = float(next(w for w in row if w.endswith("ms"))[:-2])
    new = r["predicted_us"] / 1e3
    print(f"  {net:9s} {batch:5d}  {plan:14s} {m:8.1f} ms  {old:10.1f} ms {100*(old-m)/m:+6.1f}%  {new:8.1f} ms {100*(new-m)/m:+6.1f}%")
P
} 2>&1 | tee results/profile_batches.txt
