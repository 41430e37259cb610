#!/usr/bin/env bash
# Migration (+migrate: parameters, gradients and optimizer state off the device between their
# uses) on this machine's CPU engine, VGG-16 and ResNet-50 at 224x224, batch 8, Adam:
#  1. the persistent floor (parameters + gradients + Adam's moments: what every plan without
#     migration keeps for the whole iteration), then lrcnn validate on layer, 2ps:4 and 2ps:4 with
#     each migration, layer+migrate and vdnn-all+migrate: measured peak against the replay,
#     median time, gradient deviation from layer;
#  2. the planner at budgets of 90%, 70% and 50% of the floor, which only migration reaches, its
#     plan run on the engine (--measure).
# Output: results/migrate_cpu.txt, with the commands. About 25 minutes on 2 cores.
# Usage: experiments/migrate_cpu.sh [BUILD_DIR]
set -euo pipefail
build="${1:-build}"
export OMP_WAIT_POLICY=PASSIVE
lrcnn="$build/lrcnn"
run() { echo "\$ $*"; "$@"; echo; }

{
  echo "# made at commit $(git rev-parse --short HEAD) on $(date -u +%Y-%m-%d) by: bash experiments/migrate_cpu.sh $build"
  echo
  for net in vgg16 resnet50; do
    # the persistent floor: the layer plan's weights, weight_grads and optimizer bytes, from sim
    floor=$("$lrcnn" sim --net "$net" --image 224 --batch 8 --optimizer adam --plan layer |
      /usr/bin/python3 -c "
import re, sys
u = {'B': 1, 'KiB': 2**10, 'MiB': 2**20, 'GiB': 2**30}
tot = 0
for line in sys.stdin:
    m = re.match(r'\s+(weights|weight_grads|optimizer)\s+([0-9.]+) (\w+)', line)
    if m: tot += float(m.group(2)) * u[m.group(3)]
print(int(tot))")
    echo "## $net: persistent floor (parameters + gradients + Adam moments) = $floor bytes ($(/usr/bin/python3 -c "print('%.2f GiB' % ($floor / 2**30))"))"
    echo
    run "$lrcnn" validate --net "$net" --image 224 --batch 8 --optimizer adam --iters 3 \
      --plan "2ps:4,2ps:4+migrate:grads,2ps:4+migrate:grads:optim,2ps:4+migrate,layer+migrate,vdnn-all+migrate" \
      --profile results/profile_cpu.h5
    for f in 0.9 0.7 0.5; do
      b=$(/usr/bin/python3 -c "print(int($floor * $f))")
      echo "# budget: $f x the floor"
      run "$lrcnn" plan --net "$net" --image 224 --batch 8 --optimizer adam --budget "$b" \
        --profile results/profile_cpu.h5 --measure 3 || true
    done
  done
} 2>&1 | tee results/migrate_cpu.txt
