#!/usr/bin/env bash
# The CUDA checks on a GPU machine, from the bundle tools/gpu_bundle.sh made (.gpu/bundle.tar.xz), in
# the root of a copy of this tree. Written for a short lease: every step runs under its own time
# limit, logs under $OUT (default /tmp/gpu_out) as it goes and keeps what finished, and the whole
# took about 7 minutes (on an H200, 2026-11-30: steps 1, 2 and 3 took 291 s together, with every
# campaign spec at 12 iterations a plan; then steps 6, 4 and 5 111, 70 and 13 s; at ff062c3 steps
# 1, 4, 5 and 7 188 s, then 2 and 3 309 s, with the first start about 35 s). At most 8 files land
# in $OUT: 0_setup.log, 1_tests.log, 2_campaign.log and 2_campaign.tar (results/gpu/*.h5, added to
# after each spec), 3_torch.log (with the peer's table) and 3_torch_gpu.tsv, 4_sanitize.log,
# 5_bn.log. Steps 6, 7 and 8 are not among the default steps: run in a lease call of their own, they
# write 0_setup.log, 6_torch_plan.log, 6_torch_plan.tsv and 6_torch_plan_cap.tsv, 7_policy.log, and 8_sim.log and 8_sim.tar.
#   1. tests (100 s, and at most 230 s more for the find mode): test_dnn (cuDNN's contract, no GPU
#      needed), test_cuprof, test_cuda (every layer kind, plan and BatchNorm mode of the small nets,
#      CUDA against the CPU engine); then ResNet-50 b8 for six iterations with CUPTI and without (the
#      last profiled, apart from the timed); then VGG-16 b32 with cuDNN's heuristic and its find
#      mode (LRCNN_CUDNN_FIND=1), and test_cuda again in find mode;
#   2. the GPU campaign (360 s in all; the U-Net's row plans take 8-11 s an iteration):
#      experiments/gpu_*.spec one by one, most telling first (VGG-16 b8, ResNet-50 b8, VGG-16
#      920x920, MobileNetV2 and U-Net, VGG-16 b32, ResNet-50 b32),
#      each file checked against results/SCHEMA.md and added to the tar when it lands;
#   3. PyTorch on the same GPU (80 s): bench/torch_gpu.py (VGG-16 and ResNet-50 at b8 and b32,
#      plain and checkpointed: allocated, reserved, median time) and tools/torch_peak.py --plan
#      torch2 (the prediction of PyTorch's own bytes against them);
#   4. compute-sanitizer (80 s): memcheck, initcheck and synccheck on one iteration of every preset
#      of vgg-small and resnet-small (test_cuda, one process a net and tool);
#   5. BatchNorm in row segments against float64 (40 s): ResNet-50 b8 under layer and 2ps:4 on the
#      GPU, dumped, each against PyTorch in float64 on the same weights and batch, beside PyTorch's
#      own float32 (tools/fp64_floor.py): is 2ps:4's deviation the fp32 floor or a defect?
#   6. lrcnn's plans in PyTorch on the GPU (GPU_TORCH_PLAN_S, 300 s; 111 s on the H200 with every row in
#      one process, each now in its own: a few seconds more a row): bench/torch_plan_gpu.py, VGG-16,
#      ResNet-50, MobileNetV2 and the U-Net at b8 under seven plans (allocated and reserved peaks against
#      the prediction, time against the plain module), then the largest ResNet-50 batch within 8 GiB
#      with 2ps:4 and without (measured and predicted); the same rows again with cuDNN's workspace
#      capped at GPU_TORCH_PLAN_CAP MiB (0; GPU_TORCH_PLAN_CAP_S, 200 s), memory only; then
#      row plans in bands on the GPU against the plain module there (tests/test_torch_plan.py --device
#      cuda: ConvNeXt's stochastic depth, bilinear upsampling, ShuffleNet's views; gradients).
#   7. cuDNN's algorithm policy against layer's time (about 90 s): VGG-16 and ResNet-50 at b8 and b32,
#      12 iterations each under the heuristic within 256 MiB (the default) and 4096 MiB and the find
#      mode within 4096 MiB, the first and last also with PyTorch's cuDNN where it ships one; 2ps:4
#      and overl:4 on each under the default and with LRCNN_CUDNN_PACK_FWD=0 (the forward's band
#      calls on slices of larger maps, as before: engine/cuda/dnn.h), ResNet-50 b8's also in the find
#      mode (about 60 s more); then bench/torch_gpu.py with cudnn.benchmark on, and off under
#      CUDNN_CONV_WSCAP_DBG=256 (PyTorch's cap, set as lrcnn's).
#   8. simulation specs on this machine (GPU_SIM_SPECS, seconds each), brought back to be held against
#      the committed results/*.h5 with tools/check_results.py --same: the same results on another machine.
# Usage: tools/gpu_check.sh [--cpu] [STEPS]   (STEPS default "1 2 3 4 5")
#   GPU_SPECS="gpu_vgg16_b8 ..." runs those campaign specs only, GPU_CAMPAIGN_S its time in all (360),
#   GPU_SANITIZE_S the sanitizers' (80), GPU_BN_NET the net of step 5 (resnet50).
#   --cpu: the same steps on the CPU with this tree's build/ and small nets, to try the script here
#          (test_cuda --self, a CPU campaign spec, PyTorch on the CPU, no sanitizer).
set -uo pipefail
cpu=0
[ "${1:-}" = --cpu ] && { cpu=1; shift; }
steps=" ${1:-1 2 3 4 5} "
out="${OUT:-/tmp/gpu_out}"; mkdir -p "$out"
root="$PWD"; t_start=$(date +%s)
py=python3; command -v /usr/bin/python3 >/dev/null && [ $cpu = 1 ] && py=/usr/bin/python3

if [ $cpu = 1 ]; then
  bin="$root/build"; tests="$root/build/tests"; backend=cpu
  echo "CPU trial of tools/gpu_check.sh: $bin" >"$out/0_setup.log"
else
  stage=/tmp/lrcnn-gpu
  rm -rf "$stage" && mkdir -p "$stage" && tar -C "$stage" -xJf .gpu/bundle.tar.xz || exit 1
  src=$(cat "$stage/source_dir")
  export LRCNN_BUILT_FROM="$(cat "$stage/built_from")" # the commit and tree state the bundle was built from
  [ "$src" = "$root" ] || [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; }
  # bundled libraries only where the machine has none of that name
  for f in "$stage"/lib/*; do ldconfig -p | grep -q " $(basename "$f") " && rm "$f"; done
  libs="$stage/lib"
  for name in $(LD_LIBRARY_PATH="$libs" ldd "$stage"/bin/* | awk '$3 == "not" {print $1}' | sort -u); do
    hit=$(find /usr /opt -name "$name" 2>/dev/null | head -1)
    [ -n "$hit" ] && libs="$libs:$(dirname "$hit")"
  done
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  bin="$stage/bin"; tests="$stage/bin"; backend=cuda
  { nvidia-smi; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$bin/lrcnn" | grep -E 'not found|cud|cublas|cupti'; } >"$out/0_setup.log" 2>&1
fi

# limit SECONDS LOG CMD...: CMD under its limit (then killed), its output and exit status appended to LOG
limit() {
  local s=$1 log=$2; shift 2
  local t0; t0=$(date +%s)
  echo "\$ $* (limit ${s}s)" >>"$log"
  timeout --kill-after=5 "$s" "$@" >>"$log" 2>&1
  local rc=$?
  echo "-> exit $rc after $(( $(date +%s) - t0 ))s$([ $rc = 124 ] && echo ': past its limit, stopped')" >>"$log"
  return $rc
}
left() { echo $(( $1 - ($(date +%s) - $2) )); } # seconds left of a step's allowance

if [[ $steps == *" 1 "* ]]; then
  log="$out/1_tests.log"; : >"$log"
  limit 30 "$log" "$tests/test_dnn"
  [ $cpu = 0 ] && limit 10 "$log" "$tests/test_cuprof"
  if [ $cpu = 1 ]; then limit 60 "$log" "$tests/test_cuda" --self; else limit 60 "$log" "$tests/test_cuda"; fi
  # the profiled pass apart from the timed ones: six iterations with CUPTI (the last profiled) and
  # without; the timed ones should agree, the profiled one stand out (host-bound ResNet-50 b8)
  d=$(mktemp -d); net=resnet50; image="--image 224"; [ $cpu = 1 ] && { net=resnet-small; image=""; }
  for c in cupti no-cupti; do
    limit 30 "$log" "$bin/lrcnn" train --net $net $image --batch 8 --plan layer --iters 6 --backend $backend \
      $([ $c = no-cupti ] && echo --no-cupti) -o "$d/$c.h5"
    limit 10 "$log" "$py" -c "import h5py, sys; m = h5py.File(sys.argv[1])['runs/00000/measured']; d = m.get('device');
print(sys.argv[2], 'iteration ms:', ' '.join('%.1f' % (t / 1e3) for t in m['iter_us'][()]),
      '| profiled_iter', int(d.attrs['profiled_iter']) if d is not None else None)" "$d/$c.h5" $c
  done
  # cuDNN's measured algorithm choice (LRCNN_CUDNN_FIND=1, conv_cuda.h) against its heuristic, on
  # VGG-16 b32 (the heuristic's slowest case), then the CUDA-against-CPU suite under it
  net=vgg16; [ $cpu = 1 ] && net=vgg-small
  for find in 0 1; do
    LRCNN_CUDNN_FIND=$find limit 60 "$log" "$bin/lrcnn" train --net $net $image --batch 32 --plan layer --iters 6 \
      --backend $backend --no-cupti -o "$d/find$find.h5"
    limit 10 "$log" "$py" -c "import h5py, sys; m = h5py.File(sys.argv[1])['runs/00000/measured'];
print('LRCNN_CUDNN_FIND=' + sys.argv[2], 'iteration ms:', ' '.join('%.1f' % (t / 1e3) for t in m['iter_us'][()]))" "$d/find$find.h5" $find
  done
  # the measured choices kept in a device profile (io/profile.h): calibrate in find mode stores them
  # (profile/algos), and a run given that profile takes them rather than measuring again (its note
  # says how many); the wall time of the run that measures against the one that takes
  LRCNN_CUDNN_FIND=1 limit 90 "$log" "$bin/lrcnn" calibrate --backend $backend --net $net $image --batch 32 --plan layer \
    --check none --iters 2 -o "$d/prof.h5"
  limit 10 "$log" "$py" -c "import h5py, sys; a = h5py.File(sys.argv[1])['profile'].get('algos')
print('profile/algos:', 'none (this backend measures no choices)' if a is None else '%d choices, measured on %s' % (len(a), a.attrs['device']))" "$d/prof.h5"
  for run in measures takes; do
    t0=$(date +%s%N)
    LRCNN_CUDNN_FIND=1 limit 60 "$log" "$bin/lrcnn" train --net $net $image --batch 32 --plan layer --iters 2 --backend $backend \
      --no-cupti $([ $run = takes ] && echo --profile "$d/prof.h5") -o "$d/$run.h5"
    echo "the run that $run its choices: $(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.2f", (b - a) / 1e9}') s of wall time" >>"$log" # no bc there
  done
  if [ $cpu = 0 ]; then LRCNN_CUDNN_FIND=1 limit 90 "$log" "$tests/test_cuda"; fi
  rm -rf "$d"
fi

if [[ $steps == *" 2 "* ]]; then
  log="$out/2_campaign.log"; : >"$log"; t0=$(date +%s)
  rm -f "$out/2_campaign.tar"
  specs="${GPU_SPECS:-gpu_vgg16_b8 gpu_resnet50_b8 gpu_highres gpu_shipped gpu_vgg16_b32 gpu_resnet50_b32}"
  if [ $cpu = 1 ]; then # one small spec of the same shape, on the CPU
    mkdir -p /tmp/lrcnn-gpu-trial
    sed -e 's/^nets = .*/nets = vgg-small, resnet-small/' -e '/^image = /d' -e 's/^plans = .*/plans = layer, ckpt-sqrt, vdnn-all, 2ps:4, overl:4, 2ps-h, overl-h/' -e 's/^backend = cuda/backend = cpu/' \
        -e 's|^output = .*|output = /tmp/lrcnn-gpu-trial/trial.h5|' experiments/gpu_vgg16_b8.spec >/tmp/lrcnn-gpu-trial/gpu_trial.spec
    specs=/tmp/lrcnn-gpu-trial/gpu_trial
  fi
  for s in $specs; do
    rest=$(left "${GPU_CAMPAIGN_S:-360}" "$t0"); [ "$rest" -gt 10 ] || { echo "no time left for $s" >>"$log"; continue; }
    spec="$s.spec"; [ -e "$spec" ] || spec="experiments/$s.spec"
    outfile=$(sed -n 's/^output = //p' "$spec"); mkdir -p "$(dirname "$outfile")"
    limit "$rest" "$log" "$bin/lrcnn" sweep "$spec" --force
    if [ -e "$outfile" ]; then
      limit 30 "$log" "$py" tests/check_schema.py "$outfile"
      tar -rf "$out/2_campaign.tar" "$outfile" 2>>"$log"
    fi
  done
fi

if [[ $steps == *" 3 "* ]]; then
  log="$out/3_torch.log"; : >"$log"
  if [ $cpu = 1 ]; then
    limit 60 "$log" "$py" bench/torch_gpu.py nets/vgg-small.net nets/resnet-small.net --batch 8 --device cpu --iters 3
  else
    limit 40 "$log" "$py" bench/torch_gpu.py nets/vgg16.net nets/resnet50.net --batch 8,32 --iters 10 --tsv "$out/3_torch_gpu.tsv"
    limit 40 "$log" "$py" tools/torch_peak.py nets/vgg16.net nets/resnet50.net --batch 8,32 --image 224 --device cuda --plan torch2 \
      --lrcnn "$bin/lrcnn"
  fi
fi

if [[ $steps == *" 4 "* ]]; then
  log="$out/4_sanitize.log"; : >"$log"
  presets="layer ckpt-sqrt vdnn-all vdnn-conv 2ps:4 overl:4 2ps-h overl-h"
  if [ $cpu = 1 ] || ! command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer: skipped (not on a GPU, or not found)" >>"$log"
  else
    t0=$(date +%s)
    for tool in memcheck initcheck synccheck; do
      for net in vgg-small resnet-small; do
        rest=$(left "${GPU_SANITIZE_S:-80}" "$t0"); [ "$rest" -gt 5 ] || { echo "no time left for $tool on $net" >>"$log"; continue; }
        extra=""; [ $tool = memcheck ] && extra="--leak-check full"
        limit "$rest" "$log" compute-sanitizer --tool $tool $extra --error-exitcode 9 "$tests/test_cuda" --no-cupti $net $presets
      done
    done
  fi
fi

if [[ $steps == *" 5 "* ]]; then
  log="$out/5_bn.log"; : >"$log"
  d=$(mktemp -d); net=${GPU_BN_NET:-resnet50}; image="--image 224"; batch=8
  [ $cpu = 1 ] && { net=resnet-small; image=""; }
  for p in layer 2ps:4; do
    limit 15 "$log" "$bin/lrcnn" train --net "$net" $image --batch $batch --bn train --plan "$p" --iters 1 --seed 1 \
      --backend $backend --no-cupti --dump "$d/$p.h5" -o "$d/run-$p.h5"
  done
  limit 25 "$log" "$py" tools/fp64_floor.py "nets/$net.net" "$d/layer.h5" "$d/2ps:4.h5" --bn train
  rm -rf "$d"
fi

if [[ $steps == *" 6 "* ]]; then
  log="$out/6_torch_plan.log"; : >"$log"
  if [ $cpu = 1 ]; then
    limit 240 "$log" "$py" bench/torch_plan_gpu.py --lrcnn "$bin/lrcnn" --device cpu --nets resnet18,unet --image 64 --batch 2 \
      --iters 2 --tsv "$out/6_torch_plan.tsv"
  else
    limit "${GPU_TORCH_PLAN_S:-300}" "$log" "$py" bench/torch_plan_gpu.py --lrcnn "$bin/lrcnn" --device cuda --batch 8 --iters 10 \
      --tsv "$out/6_torch_plan.tsv"
    # the same rows with cuDNN's workspace capped (GPU_TORCH_PLAN_CAP MiB, 0 by default; `none`: not run), the
    # allocated peak then the prediction plus at most the cap: memory only, 2 timed iterations, no budget search
    cap=${GPU_TORCH_PLAN_CAP:-0}
    [ "$cap" = none ] || limit "${GPU_TORCH_PLAN_CAP_S:-200}" "$log" "$py" bench/torch_plan_gpu.py --lrcnn "$bin/lrcnn" --device cuda \
      --batch 8 --iters 2 --fit '' --cudnn-ws-mib "$cap" --tsv "$out/6_torch_plan_cap.tsv"
  fi
  # row plans in bands on the device against the plain module there (ConvNeXt's stochastic depth
  # from the GPU generator's state, bilinear upsampling, ShuffleNet's views): gradients
  limit 120 "$log" "$py" tests/test_torch_plan.py "$bin/lrcnn" --device $([ $cpu = 1 ] && echo cpu || echo cuda)
fi

if [[ $steps == *" 7 "* ]]; then
  # cuDNN's algorithm policy against layer's time: the heuristic within 256 MiB (the default) and 4096 MiB,
  # the find mode within 4096 MiB, each also with PyTorch's own cuDNN where it has one; the row plans of
  # ResNet-50 b8 under the first and the find mode; then PyTorch under its two policies
  log="$out/7_policy.log"; : >"$log"
  tcudnn=$("$py" -c "import os, nvidia.cudnn as c; print(os.path.join(list(c.__path__)[0], 'lib'))" 2>/dev/null)
  d=$(mktemp -d)
  one() { # NAME NET BATCH PLAN VAR...: layer's (or PLAN's) 12 iterations, then its line
    local name=$1 net=$2 b=$3 plan=$4; shift 4
    [ $cpu = 1 ] && { net=${net/vgg16/vgg-small}; net=${net/resnet50/resnet-small}; }
    env "$@" timeout 40 "$bin/lrcnn" train --net "$net" $([ $cpu = 0 ] && echo --image 224) --batch "$b" --plan "$plan" --iters 12 \
      --backend $backend -o "$d/$name.h5" >"$d/$name.txt" 2>&1
    "$py" - "$d/$name.h5" "$name" >>"$log" 2>&1 <<'PY'
import sys, h5py, numpy as np
fn, name = sys.argv[1:]
try:
    m = h5py.File(fn)["runs/00000/measured"]; t = m["iter_us"][()][1:-1] / 1e3; dv = m.get("device")
    print("%-31s median %7.2f ms  min %7.2f max %7.2f  kernels %7s ms  max ws %6s MiB  peak %7.0f MiB" % (name, np.median(t), t.min(), t.max(),
          "-" if dv is None else "%.2f" % (dv.attrs["kernel_us"] / 1e3), "-" if dv is None else "%.0f" % (dv["conv_workspace"][()].max() / 2**20),
          m["at_peak"][()].sum() / 2**20))
except Exception as e:
    print("%-31s failed: %s" % (name, e))
PY
  }
  for nb in "vgg16 8" "vgg16 32" "resnet50 8" "resnet50 32"; do
    set -- $nb
    one "$1_b$2_h256" "$1" "$2" layer
    one "$1_b$2_h4096" "$1" "$2" layer LRCNN_CUDNN_WS_MB=4096
    one "$1_b$2_f4096" "$1" "$2" layer LRCNN_CUDNN_WS_MB=4096 LRCNN_CUDNN_FIND=1
    if [ -n "$tcudnn" ]; then
      one "$1_b$2_n256" "$1" "$2" layer "LD_LIBRARY_PATH=$tcudnn:$LD_LIBRARY_PATH"
      one "$1_b$2_nf4096" "$1" "$2" layer "LD_LIBRARY_PATH=$tcudnn:$LD_LIBRARY_PATH" LRCNN_CUDNN_WS_MB=4096 LRCNN_CUDNN_FIND=1
    fi
  done
  # the row plans with the forward's slices staged (the default) and as cuDNN takes them (dnn.h)
  for nb in "vgg16 8" "vgg16 32" "resnet50 8" "resnet50 32"; do
    set -- $nb
    for p in 2ps:4 overl:4; do
      one "$1_b$2_${p}_h256" "$1" "$2" $p
      one "$1_b$2_${p}_h256_slices" "$1" "$2" $p LRCNN_CUDNN_PACK_FWD=0
    done
  done
  for p in 2ps:4 overl:4; do one "resnet50_b8_${p}_f4096" resnet50 8 $p LRCNN_CUDNN_WS_MB=4096 LRCNN_CUDNN_FIND=1; done
  rm -rf "$d"
  if [ $cpu = 0 ]; then
    limit 40 "$log" "$py" bench/torch_gpu.py nets/vgg16.net nets/resnet50.net --batch 8,32 --iters 10 --benchmark
    CUDNN_CONV_WSCAP_DBG=256 limit 40 "$log" "$py" bench/torch_gpu.py nets/vgg16.net nets/resnet50.net --batch 8,32 --iters 10
  fi
fi

if [[ $steps == *" 8 "* ]]; then
  # simulation specs on this other machine, to hold against the committed files there:
  # tar -xf 8_sim.tar; for f in 8_sim/*.h5; do tools/check_results.py --same results/$(basename $f) $f; done
  log="$out/8_sim.log"; : >"$log"; d="$out/8_sim"; mkdir -p "$d"
  for s in ${GPU_SIM_SPECS:-arena authors bands capacity_batch embraced unet_bands}; do
    limit 60 "$log" "$bin/lrcnn" sweep "experiments/$s.spec" -o "$d/$s.h5" --quiet
  done
  tar -C "$out" -cf "$out/8_sim.tar" 8_sim && rm -rf "$d"
fi

echo "gpu_check: $(( $(date +%s) - t_start ))s in all" >>"$out/0_setup.log"
tail -n 3 "$out"/*.log
