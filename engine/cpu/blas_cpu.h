/* blas_cpu: which of OpenBLAS's kernels the CPU engine's products run on.
 *
 * OpenBLAS as Debian ships it (0.3.21, DYNAMIC_ARCH) picks its kernel by the CPU's model when it
 * loads, and takes a model newer than it knows for the oldest it has: Prescott, SSE3 alone. On an
 * Intel Xeon of family 6 model 207 (AVX-512; 2026-11-30) its sgemm then ran VGG-16's convolutions'
 * products at 30-58 GFLOP/s on 2 cores, against 150-260 with its AVX-512 kernel (SkylakeX), and the
 * engine took 2.5x (VGG-16) and 2.8x (ResNet-50) PyTorch 1.13's time at batch 2.
 * So where OpenBLAS fell back to a kernel without AVX on a CPU with AVX2 and FMA, lrcnn names the
 * kernel the CPU's instructions call for in OPENBLAS_CORETYPE, which OpenBLAS reads only when it
 * loads: the process sets it and runs itself again (cli/main.c; engine_env_reexec). A user's
 * own OPENBLAS_CORETYPE stands, and a kernel OpenBLAS chose knowing the CPU is never replaced.
 * Not done here: the running again (engine/threads.h's engine_env_reexec, cli/main.c). */
#ifndef LRCNN_BLAS_CPU_H
#define LRCNN_BLAS_CPU_H

#include <stdbool.h>

/* Sets OPENBLAS_CORETYPE as above (and LRCNN_BLAS_DETECTED to OpenBLAS's own choice, for
 * blas_cpu_describe); true when it did, and the caller should run itself again. */
bool blas_cpu_env(void);

/* One line on the kernel in use, e.g. "OpenBLAS 0.3.21, SkylakeX kernel (set by lrcnn: OpenBLAS
 * took this CPU for Prescott)", "OpenBLAS 0.3.21, Zen kernel" or "..., Haswell kernel
 * (OPENBLAS_CORETYPE)". */
const char *blas_cpu_describe(void);

#endif
