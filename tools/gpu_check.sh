#!/usr/bin/env bash
# The CUDA checks on a GPU machine, from the bundle tools/gpu_bundle.sh made (.gpu/bundle.tar.xz),
# in the root of a copy of this tree: unpacks it, lets the loader find CUDA's libraries (the
# toolkit's, or those inside PyTorch's pip packages) and the bundled ones the machine lacks, links
# the source path compiled into lrcnn to this tree, then runs, each logged under $OUT (default
# /tmp/gpu_out) as it goes:
#   1. test_cuprof and test_cuda (every layer kind and the small nets, CUDA against the CPU engine);
#   2. lrcnn train --backend cuda on VGG-16 and ResNet-50 (224x224, batch 8): layer, 2ps:4, ckpt-sqrt,
#      vdnn-all, each to an HDF5 file checked against results/SCHEMA.md (the device's own view),
#      the files in $OUT/2_train_h5.tar;
#   3. compute-sanitizer memcheck on one iteration of the small VGG under layer and 2ps:4;
#   4. PyTorch on the same GPU (tools/torch_peak.py --device cuda): its allocated and reserved
#      peaks for VGG-16 and ResNet-50 at batch 8 beside lrcnn's torch plan.
# Usage: tools/gpu_check.sh [STEPS]   (default "1 2 3 4"); about 5 minutes on an H100.
set -uo pipefail
out="${OUT:-/tmp/gpu_out}"; mkdir -p "$out"
root="$PWD"; stage=/tmp/lrcnn-gpu
rm -rf "$stage" && mkdir -p "$stage" && tar -C "$stage" -xJf .gpu/bundle.tar.xz || exit 1
src=$(cat "$stage/source_dir")
[ "$src" = "$root" ] || [ -e "$src" ] || { mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"; }
# bundled libraries only where the machine has none of that name
for f in "$stage"/lib/*; do ldconfig -p | grep -q " $(basename "$f") " && rm "$f"; done
libs="$stage/lib"
for name in $(LD_LIBRARY_PATH="$libs" ldd "$stage"/bin/* | awk '$3 == "not" {print $1}' | sort -u); do
  hit=$(find /usr /opt -name "$name" 2>/dev/null | head -1)
  [ -n "$hit" ] && libs="$libs:$(dirname "$hit")"
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin="$stage/bin"
{ nvidia-smi; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$bin/lrcnn" | grep -E 'not found|cud|cublas|cupti'; } >"$out/0_setup.log" 2>&1
step() { case " ${1:-1 2 3 4} " in *" $2 "*) return 0;; esac; return 1; }
if step "${1:-}" 1; then
  { "$bin/test_cuprof"; echo "exit $?"; "$bin/test_cuda"; echo "exit $?"; } >"$out/1_test_cuda.log" 2>&1
fi
if step "${1:-}" 2; then
  for net in vgg16 resnet50; do for plan in layer 2ps:4 ckpt-sqrt vdnn-all; do
    mkdir -p /tmp/gpu_h5; f="/tmp/gpu_h5/${net}_${plan%%:*}.h5"
    "$bin/lrcnn" train --net "$net" --image 224 --batch 8 --plan "$plan" --iters 4 --backend cuda -o "$f" --force
    echo "exit $?"; python3 tests/check_schema.py "$f"
  done; done >"$out/2_train.log" 2>&1
  tar -C /tmp/gpu_h5 -cf "$out/2_train_h5.tar" . # the device tool brings back 8 files at most
fi
if step "${1:-}" 3; then
  for plan in layer 2ps:4; do
    compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/lrcnn" train --net vgg-small --batch 2 --plan "$plan" \
      --iters 1 --backend cuda --no-cupti; echo "exit $?"
  done >"$out/3_memcheck.log" 2>&1
fi
if step "${1:-}" 4; then
  python3 tools/torch_peak.py nets/vgg16.net nets/resnet50.net --batch 8 --image 224 --device cuda --lrcnn "$bin/lrcnn" \
    >"$out/4_torch.log" 2>&1
fi
tail -n 3 "$out"/*.log
