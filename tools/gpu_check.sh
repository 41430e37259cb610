#!/usr/bin/env bash
# The CUDA checks on a GPU machine, from the bundle tools/gpu_bundle.sh made (.gpu/bundle.tar.xz),
# in the root of a copy of this tree: unpacks it, lets the loader find CUDA's libraries (the
# toolkit's, or those inside PyTorch's pip packages) and the bundled ones the machine lacks, links
# the source path compiled into lrcnn to this tree, then runs, each logged under $OUT (default
# /tmp/gpu_out) as it goes:
#   1. test_cuprof and test_cuda (every layer kind and the small nets, CUDA against the CPU engine);
#   2. the GPU campaign, lrcnn reproduce --backend cuda (experiments/gpu_*.spec): its files checked
#      against results/SCHEMA.md, and with the figure in $OUT/2_campaign.tar;
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
  { "$bin/lrcnn" reproduce --backend cuda; echo "exit $?"
    for f in results/gpu/*.h5; do python3 tests/check_schema.py "$f"; done; } >"$out/2_campaign.log" 2>&1
  tar -cf "$out/2_campaign.tar" results/gpu paper/figures/gpu_validation.* 2>>"$out/2_campaign.log"
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
