/* alloc: the accounting allocator. Every byte the engine holds for a training iteration comes
 * from here, with a category (mem_cat) and a name, so measured peaks are comparable to the
 * simulator's replay category by category and the timeline explains itself.
 *
 * Device-side categories count towards the peak; MEM_HOST (offloaded tensors) is tracked apart,
 * as on a GPU. Memory is really allocated and really freed, by the backend's alloc_mem: the CPU's
 * (alloc_mem_host: malloc's heap, 64-byte aligned so BLAS gets aligned panels) or the CUDA
 * backend's (a stream-ordered device pool, pinned host memory). The accounting is the same for
 * both: bytes asked for, at the moment the schedule asks. */
#ifndef LRCNN_ALLOC_H
#define LRCNN_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/lower/sched.h"

/* Where a backend's tensors live. get returns NULL when out of memory; host: a block in host
 * memory the device can copy to and from (offload); move copies a block to new memory on the
 * other side and releases the old one (it may do so asynchronously: the backend orders the copy
 * before any later use of either block).
 * A backend with a copy engine follows sched_move_issue's protocol (sim/lower/sched.h) with two more
 * calls; one without (NULL) copies in line at the move, which is what its time model assumes:
 *   stage  begins copying device block p to the host now, beside later work; the move(p, bytes,
 *          true) that follows waits for that copy, then releases p where the schedule says;
 *   ready  makes later work wait until block p, which move(..., false) is bringing to the
 *          device, has arrived (the executor calls it before the first step that uses p). */
typedef struct {
    const char *name;
    void *(*get)(int64_t bytes, bool host, bool zero);
    void (*put)(void *p, bool host);
    void *(*move)(void *p, int64_t bytes, bool to_host);
    void (*stage)(void *p, int64_t bytes);
    void (*ready)(void *p);
} alloc_mem;

extern const alloc_mem alloc_mem_host;

typedef struct {
    const alloc_mem *mem;
    int64_t cur[MEM_NCAT];
    int64_t max[MEM_NCAT];       /* each category's own maximum */
    int64_t at_peak[MEM_NCAT];   /* breakdown when the device total peaked */
    int64_t peak, total;         /* device bytes (MEM_HOST excluded) */
    int64_t host_peak;
    int64_t n_alloc;
    int64_t *timeline;           /* device bytes after each event (grows) */
    int n_timeline, cap_timeline;
    bool record;                 /* append to the timeline */
} alloc_stats;

void alloc_init(alloc_stats *a, const alloc_mem *mem);
void alloc_free_stats(alloc_stats *a);
/* Clears peaks and the timeline, keeping what is currently allocated (between iterations). */
void alloc_reset_peaks(alloc_stats *a);

/* bytes may be 0 (returns a valid unique pointer). zero: zero-filled. Out of memory: a message
 * naming the category and exit status 1. */
void *alloc_get(alloc_stats *a, mem_cat cat, int64_t bytes, bool zero);
void alloc_put(alloc_stats *a, void *p, mem_cat cat, int64_t bytes);
/* Moves a block to new memory accounted under `to` (offload: device -> MEM_HOST and back); the
 * accounting changes in one event, so peaks match the simulator's replay. Returns the new block. */
void *alloc_move(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes);

#endif
