/* alloc: the accounting allocator. Every byte the engine holds for a training iteration comes
 * from here, with a category (mem_cat) and a name, so measured peaks are comparable to the
 * simulator's replay category by category and the timeline explains itself.
 *
 * Device-side categories count towards the peak; MEM_HOST (offloaded tensors) is tracked apart,
 * as on a GPU. Memory is really allocated and really freed, by the backend's alloc_mem: the CPU's
 * (alloc_mem_host: malloc's heap, 64-byte aligned so BLAS gets aligned panels) or the CUDA
 * backend's (a stream-ordered device pool, pinned host memory) — or, in arena mode, placed in two
 * regions reserved once per plan (device and host) at the offsets the simulator's static memory
 * plan gives (sim/predict/arena.h), every placement checked. The accounting is the same for all:
 * bytes asked for, at the moment the schedule asks. */
#ifndef LRCNN_ALLOC_H
#define LRCNN_ALLOC_H

#include <stdbool.h>
#include <stdint.h>

#include "sim/lower/sched.h"

/* Where a backend's tensors live. get returns NULL when out of memory; host: a block in host
 * memory the device can copy to and from (offload); move copies a block to the other side and
 * returns where it went: new memory when dst is NULL (and the old block is released), else dst, a
 * block of an arena (the old one stays where it is: its arena owns it). The copy may be
 * asynchronous: the backend orders it before any later use of either block.
 * reserve takes one region of the device's (host: pinned host) memory for an arena, NULL when it
 * cannot; release gives it back. Arena mode places blocks in these regions at the offsets a plan
 * gives (sim/predict/arena.h) and needs no get/put on the hot path.
 * A backend with a copy engine follows sched_move_issue's protocol (sim/lower/sched.h) with two more
 * calls; one without (NULL) copies in line at the move, which is what its time model assumes:
 *   stage  begins copying device block p to the host now (into dst, or new memory when NULL),
 *          beside later work; the move(p, bytes, true, dst) that follows waits for that copy, then
 *          releases p where the schedule says;
 *   ready  makes later work wait until block p, which move(..., false) is bringing to the
 *          device, has arrived (the executor calls it before the first step that uses p). */
typedef struct {
    const char *name;
    void *(*get)(int64_t bytes, bool host, bool zero);
    void (*put)(void *p, bool host);
    void *(*move)(void *p, int64_t bytes, bool to_host, void *dst);
    void (*stage)(void *p, int64_t bytes, void *dst);
    void (*ready)(void *p);
    void *(*reserve)(int64_t bytes, bool host);
    void (*release)(void *base, int64_t bytes, bool host);
} alloc_mem;

extern const alloc_mem alloc_mem_host;

/* A placed block, [lo, hi) in its arena (hi rounded up as the plan rounds). */
typedef struct {
    int64_t lo, hi;
} alloc_span;

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
    /* arena mode (alloc_arena_open): side 0 the device, 1 the host */
    char *base[2];               /* the reserved regions (NULL: blocks come from get and put) */
    int64_t size[2];             /* their bytes */
    int64_t extent[2];           /* the highest byte a placed block has reached: measured */
    alloc_span *live[2];         /* the blocks placed now, by offset: every placement is checked to lie
                                    inside its arena and apart from all of them */
    int n_live[2], cap_live[2];
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

/* Arena mode: reserves device and host regions of these bytes through the backend (nothing for 0);
 * -1 with e set when the backend has no arenas or cannot reserve them. alloc_free_stats releases
 * them. */
int alloc_arena_open(alloc_stats *a, int64_t device, int64_t host, err *e);
/* The block of `bytes` at offset off of cat's arena (MEM_HOST: the host's): accounted as alloc_get
 * does. A block outside its arena or over one placed and not yet left is a fatal error naming
 * both: the plan and the engine disagree. */
void *alloc_place(alloc_stats *a, mem_cat cat, int64_t off, int64_t bytes);
/* Block p leaves its arena: accounted as alloc_put. */
void alloc_unplace(alloc_stats *a, void *p, mem_cat cat, int64_t bytes);
/* alloc_move into the arena block at offset off of `to`'s side: the copy (mem->move with dst),
 * one accounting event as alloc_move's, p leaving its arena. Flags: ALLOC_DST_PLACED, the
 * destination is already placed (a +migrate map's home on the host, or a staged copy's block);
 * ALLOC_SRC_STAYS, p stays placed (its home). */
enum { ALLOC_DST_PLACED = 1, ALLOC_SRC_STAYS = 2 };
void *alloc_move_to(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes, int64_t off, unsigned flags);
/* The staged copy of device block p into the host arena's block at off begins (mem->stage): that
 * block is placed now. */
void alloc_stage_to(alloc_stats *a, void *p, int64_t bytes, int64_t off);

#endif
