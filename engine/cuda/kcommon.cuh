// kcommon: what the kernels' files share (kernels.cu, kpool.cu, knorm.cu, kloss.cu): the block size,
// the grid of a launch, a view's rows, an element's place, the flat launches' test, and the block
// reduction of the bn sums.
// Device code every file compiles in itself (static inline, the CUDA way to share it without
// separate compilation), so this header holds code where the others hold none.
// Conventions: one thread per output element unless a kernel says otherwise; the arithmetic
// follows the CPU kernels (engine/cpu/) line for line.
#ifndef LRCNN_KCOMMON_CUH
#define LRCNN_KCOMMON_CUH

#include "engine/cuda/kernels.h"
#include "engine/cuda/planar.h"

static const int T = 256;

static inline unsigned blocks(int64_t n) { return (unsigned)((n + T - 1) / T); }

__device__ static inline float *at(kview v, int n, int c, int r) { return v.p + (((int64_t)n * v.c + c) * v.h + (r - v.row0)) * v.w; }

// Element i of the rows [a, b) of a view shaped like v: image, channel, row, column. In 32 bits
// wherever i fits (every map short of 4 G values), as a 64-bit division is a long software sequence
// on the GPU: on an H200 this took VGG-16's ReLUs at batch 32 from 2.90 + 3.29 ms (forward +
// backward) to 2.61 + 3.10, ResNet-50's adds from 1.30 + 2.35 to 1.22 + 2.19.
struct pos {
    int n, c, r, col;
};
__device__ static inline pos decompose(int64_t i, int c, int a, int b, int w)
{
    pos p;
    if ((uint64_t)i <= 0xffffffffu) {
        uint32_t u = (uint32_t)i, h = (uint32_t)(b - a), q = u / (uint32_t)w, q2 = q / h, q3 = q2 / (uint32_t)c;
        p.col = (int)(u - q * (uint32_t)w), p.r = a + (int)(q - q2 * h), p.c = (int)(q2 - q3 * (uint32_t)c), p.n = (int)q3;
        return p;
    }
    p.col = (int)(i % w), i /= w;
    p.r = a + (int)(i % (b - a)), i /= (b - a);
    p.c = (int)(i % c), p.n = (int)(i / c);
    return p;
}

// Flat launches. Where every view of an elementwise launch holds exactly the rows [a, b) of maps
// shaped like the launch's own (a whole map, or a band in a buffer of its own: the usual case),
// element i of those rows is p[i] in each view, so the kernel runs over one array, four values a
// thread in 16-byte loads and stores, with none of decompose()'s divisions. The arithmetic is the
// general kernels' value for value; a view that is a band of a larger map, or not 16-byte aligned,
// takes the general kernel.
static inline bool flat(kview v, kview like, int a, int b)
{
    return v.n == like.n && v.c == like.c && v.w == like.w && v.row0 == a && v.h == b - a && ((uintptr_t)v.p & 15) == 0;
}

static inline unsigned quads(int64_t n) { return blocks((n + 3) / 4); }

// Flat views whose channel planes (rows [a, b) of an image's channel) are a multiple of four values,
// so that four values a thread are one channel's: the plane, else 0.
static inline int flat_plane4(kview v, int a, int b)
{
    int64_t plane = (int64_t)(b - a) * v.w;
    return plane % 4 == 0 && plane <= 0x7fffffff ? (int)plane : 0;
}

// Planar launches (planar.h): where a view of an elementwise launch is rows [a, b) of a band buffer
// that holds more rows, its planes at a stride, four values a thread; the flat launches' arithmetic.
static inline bool planar(kview v, kview like, int a, int b, pview *out)
{
    return planar_view(v.p, v.n, v.c, v.h, v.w, v.row0, like.n, like.c, like.w, a, b, out);
}

// The planar operation p (kernels.cu), its n values in planes of len.
void k_planar(cudaStream_t st, const planar_args *p);

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
