#!/usr/bin/env bash
# Packs what a GPU machine without a package manager needs to run lrcnn's CUDA checks there (the
# machines `device` lends have nvcc, the CUDA, cuDNN, cuBLAS and CUPTI libraries, PyTorch and h5py,
# but neither HDF5's C library nor OpenBLAS): a Release build for Hopper in build-gpu/, its
# binaries, and every library they load that is not CUDA's or the C library's, as .gpu/bundle.tar.xz
# (about 15 MB; .gpu/ is ignored by git). tools/gpu_check.sh unpacks and runs it on the GPU machine.
# Usage: tools/gpu_bundle.sh [ARCHITECTURES]   (default 90: H100, H200)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLRCNN_CUDA_ARCHITECTURES="${1:-90}" >/dev/null
cmake --build build-gpu -j"$(nproc)" --target lrcnn test_cuda test_cuprof test_dnn
stage=.gpu/stage
rm -rf .gpu && mkdir -p "$stage/bin" "$stage/lib"
cp build-gpu/lrcnn build-gpu/tests/test_cuda build-gpu/tests/test_cuprof build-gpu/tests/test_dnn "$stage/bin/"
# the libraries the binaries load, less the C library's and CUDA's own (those come from the GPU machine)
ldd "$stage"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libcuda|libcudart|libcudnn[^/]*|libcublas[^/]*|libcupti|libnv[^/]*)\.so' |
  xargs -r cp -L -t "$stage/lib/"
pwd > "$stage/source_dir" # compiled into lrcnn as LRCNN_SOURCE_DIR: nets/ and plots/ are found there
# the tree's state, as io/machine.c records it (results/ and paper/ are outputs): tools/gpu_check.sh
# hands it to the runs (LRCNN_BUILT_FROM), since the copy of the tree on the GPU machine is no repository
dirty=0; [ -n "$(git status --porcelain --untracked-files=no -- . ':(exclude)results' ':(exclude)paper')" ] && dirty=1
echo "$(git rev-parse --short HEAD) $dirty" > "$stage/built_from"
tar -C "$stage" -cJf .gpu/bundle.tar.xz .
rm -rf "$stage"
echo "$(du -h .gpu/bundle.tar.xz | cut -f1) .gpu/bundle.tar.xz: carry .gpu, then run tools/gpu_check.sh there"
