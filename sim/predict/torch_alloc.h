/* torch_alloc: PyTorch's CUDA caching allocator, replayed over a schedule — the bytes it would
 * reserve (its cudaMalloc'd segments: torch.cuda.max_memory_reserved) for the allocations the
 * schedule makes, where the replay predicts the bytes allocated (max_memory_allocated).
 *
 * The rules, as PyTorch's c10/cuda/CUDACachingAllocator.cpp has them (1.13 and 2.x alike, with
 * its default settings: no max_split_size, no expandable segments, one stream):
 *   - a request is rounded up to a multiple of 512 bytes (512 at least);
 *   - requests up to 1 MiB come from the small pool, larger ones from the large pool;
 *   - a request takes the smallest free block of its pool that holds it (best fit; the lowest
 *     address among equals);
 *   - with none, a new segment is reserved: 2 MiB for a small request, 20 MiB for one under
 *     10 MiB, else the request rounded up to a multiple of 2 MiB;
 *   - a block larger than the request is split when what remains is at least 512 bytes (small
 *     pool) or more than 1 MiB (large pool); else the request keeps the whole block;
 *   - a freed block merges with free neighbours of its segment; segments are never returned.
 * The schedule's persistent buffers are reserved first, in their order, then its steps' ALLOCs
 * and FREEs run twice (the second iteration finds the first's segments, as a training loop
 * does); the answer is what is reserved at the end. Where PyTorch allocates in another order
 * (gradients at the first backward, optimizer state at the first step) its segments can differ
 * a little. */
#ifndef LRCNN_TORCH_ALLOC_H
#define LRCNN_TORCH_ALLOC_H

#include <stdint.h>

#include "sim/lower/sched.h"

int64_t torch_reserved(const sched *s);

/* The rounding of one request (for tests): bytes the block takes, and the segment a new one takes. */
int64_t torch_round(int64_t bytes);
int64_t torch_segment(int64_t rounded);

#endif
