/* fit: first-fit placement of blocks in one region of known size — the CUDA backend's pinned host
 * arena for offloaded maps, reserved once before the first iteration instead of a cudaMallocHost
 * per offload. Offsets only: the caller owns the memory. Blocks are rounded up to `align` bytes;
 * freed gaps merge with their neighbours. Pure arithmetic, tested on the CPU (tests/test_dnn.c).
 * Not here: which schedule needs how much (ops_cuda.c sizes the region from the schedule). */
#ifndef LRCNN_FIT_H
#define LRCNN_FIT_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t size, align;
    int64_t *gap_at, *gap_len;   /* free gaps, by offset */
    int n_gap, cap_gap;
    int64_t *blk_at, *blk_len;   /* placed blocks, by offset */
    int n_blk, cap_blk;
    int64_t used, high;          /* bytes placed now, and the most ever (rounded sizes) */
} fit;

void fit_init(fit *f, int64_t size, int64_t align);
void fit_free(fit *f);
/* The offset of a new block of `bytes`, or -1 when no gap holds it. */
int64_t fit_get(fit *f, int64_t bytes);
/* Releases the block at offset `at` (from fit_get); false if there is none there. */
bool fit_put(fit *f, int64_t at);

#endif
