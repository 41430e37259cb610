/* mem_cuda: where the CUDA backend's tensors live (engine/alloc.h's alloc_mem) — in arena mode
 * (the default) one cudaMalloc'd device arena and one pinned host arena, where the executor places
 * every block at its planned offset; else (and for data-sized encodings) device blocks from the
 * device's stream-ordered pool (cudaMallocAsync, release threshold at its maximum: freed blocks
 * stay reserved for reuse), pinned host blocks from one arena reserved before the run (fit.h places
 * them; the arena is sized from the schedule's moves); and the moves between them on a copy stream
 * beside the compute stream, as sched_move_issue times them (sim/lower/sched.h).
 * Not here: kernels, the device's own figures (ops_cuda.c). */
#ifndef LRCNN_MEM_CUDA_H
#define LRCNN_MEM_CUDA_H

#include <cuda_runtime.h>

#include "engine/alloc.h"

extern const alloc_mem mem_cuda;

void mem_cuda_init(cudaStream_t compute, cudaStream_t copy);
/* Frees the pinned host arena and what was spilled beside it (ops_cuda_close). */
void mem_cuda_close(void);
/* Before a run of schedule s: the pinned arena for its moves (grown only while it holds nothing);
 * -1 with e set when the host cannot pin it. */
int mem_cuda_prepare(const sched *s, err *e);
/* After a device-wide synchronize: moves that have arrived are forgotten. */
void mem_cuda_synced(void);
/* The pinned arenas' bytes (the first-fit one for moves the plan does not place, and the plan's own
 * in arena mode), and the most pinned apart (past them) since the last prepare. */
void mem_cuda_host(int64_t *arena, int64_t *outside);
/* The stream-ordered pool's high-water marks since the last restart: reserved bytes, and bytes in
 * use (what the engine allocated from it). A restart sets both to what is held now. */
void mem_cuda_pool_high(int64_t *reserved, int64_t *used);
void mem_cuda_pool_restart(void);
/* Host to device and back, in compute order, waiting until done (the host buffer may be reused). */
void mem_cuda_upload(void *dst, const void *host, int64_t bytes);
void mem_cuda_download(void *host, const void *src, int64_t bytes);

#endif
