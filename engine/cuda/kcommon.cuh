// kcommon: what the kernels' files share (kernels.cu, kpool.cu, knorm.cu, kloss.cu): the block size,
// the grid of a launch, a view's rows, an element's place, and the block reduction of the bn sums.
// Device code every file compiles in itself (static inline, the CUDA way to share it without
// separate compilation), so this header holds code where the others hold none.
// Conventions: one thread per output element unless a kernel says otherwise; the arithmetic
// follows the CPU kernels (engine/cpu/) line for line.
#ifndef LRCNN_KCOMMON_CUH
#define LRCNN_KCOMMON_CUH

#include "engine/cuda/kernels.h"

static const int T = 256;

static inline unsigned blocks(int64_t n) { return (unsigned)((n + T - 1) / T); }

__device__ static inline float *at(kview v, int n, int c, int r) { return v.p + (((int64_t)n * v.c + c) * v.h + (r - v.row0)) * v.w; }

// Element i of the rows [a, b) of a view shaped like v: image, channel, row, column.
struct pos {
    int n, c, r, col;
};
__device__ static inline pos decompose(int64_t i, int c, int a, int b, int w)
{
    pos p;
    p.col = (int)(i % w), i /= w;
    p.r = a + (int)(i % (b - a)), i /= (b - a);
    p.c = (int)(i % c), p.n = (int)(i / c);
    return p;
}

// Block reduction of two doubles; thread 0 gets the totals.
__device__ static inline void reduce2(double *s1, double *s2, double l1, double l2)
{
    s1[threadIdx.x] = l1, s2[threadIdx.x] = l2;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) s1[threadIdx.x] += s1[threadIdx.x + h], s2[threadIdx.x] += s2[threadIdx.x + h];
        __syncthreads();
    }
}

#endif
