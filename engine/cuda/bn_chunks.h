/* bn_chunks: how the CUDA backend's batch-norm passes (knorm.cu) split a channel's values among
 * blocks. A channel's values (an image's rows [a, b) of W columns each, image after image) are cut
 * into `chunks` contiguous ranges, one block each, so that a grid of channels x chunks fills the
 * GPU (one block a channel gave ResNet-50's 64-channel maps 64 blocks for an H200's 132 SMs, each
 * thread looping over 392 values at batch 8). Each block's two fp64 sums go to its chunk's place in a
 * partials buffer, and a second pass adds a channel's chunks in order: the same sums whatever the
 * threads' timing. Plain C as well as CUDA, so that the partition is tested without a GPU
 * (tests/test_bn_chunks.c). */
#ifndef LRCNN_BN_CHUNKS_H
#define LRCNN_BN_CHUNKS_H

#include <stdint.h>

#ifdef __CUDACC__
#define BN_HD __host__ __device__
#else
#define BN_HD
#endif

/* About this many values a block (16 a thread of 256), and at most this many blocks a channel. */
enum { BN_CHUNK_VALUES = 4096, BN_MAX_CHUNKS = 64 };

/* The chunks of a channel of `values` values: 1 to BN_MAX_CHUNKS. */
BN_HD static inline int bn_chunks(int64_t values)
{
    int64_t k = values / BN_CHUNK_VALUES;
    return k < 1 ? 1 : k > BN_MAX_CHUNKS ? BN_MAX_CHUNKS : (int)k;
}

/* Chunk k of `chunks` is the values [bn_chunk_lo(k), bn_chunk_lo(k + 1)). */
BN_HD static inline int64_t bn_chunk_lo(int64_t values, int chunks, int k) { return values * k / chunks; }

/* Value i of a channel whose images hold rows [a, a + len / w) of w columns: image, row, column. */
BN_HD static inline void bn_place(int64_t i, int64_t len, int w, int a, int *n, int *r, int *col)
{
    /* in 32 bits where the values fit (a 64-bit division is slow on the GPU: kcommon.cuh's decompose) */
    int64_t img = (uint64_t)i <= 0xffffffffu && len <= 0xffffffff ? (int64_t)((uint32_t)i / (uint32_t)len) : i / len;
    int rem = (int)(i - img * len);
    *n = (int)img, *r = a + rem / w, *col = rem % w;
}

/* The doubles of partial sums for c channels of `values` values each: two a chunk. */
static inline int64_t bn_part_doubles(int c, int64_t values) { return 2 * (int64_t)c * bn_chunks(values); }

#endif
