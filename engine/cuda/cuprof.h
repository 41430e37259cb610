/* cuprof: CUPTI activity records for the CUDA backend — the device memory the CUDA allocators
 * hold ("reserved"), the bytes the program sub-allocated from stream-ordered pools, and kernel
 * time per tag (a layer or step id).
 *
 * Two halves: cuprof.c calls CUPTI (enables MEMORY2, MEMORY_POOL, CONCURRENT_KERNEL,
 * EXTERNAL_CORRELATION and the RUNTIME/DRIVER API records that correlation needs; 8 MiB buffers;
 * completed buffers go to the parse layer under a lock). cuprof_parse.c turns records into numbers
 * and never calls CUPTI, so tests drive it with hand-built records. Prints nothing; CUPTI failures
 * come back as err with CUPTI's message.
 *
 * Reserved = direct device allocations (memoryPoolType INVALID: cudaMalloc, library workspaces)
 * with the bytes asked for, plus per pool max(pool size, live sub-allocations in it): blocks lie
 * inside their pool's reservation, so they are not added twice. A pool's size is
 * memoryPoolConfig.pool.size of the latest MEMORY2 record on it, or the size of a MEMORY_POOL
 * record (CREATED, TRIMMED; DESTROYED sets 0). Pools are keyed by base address, assumed equal in
 * both record kinds (memoryPoolConfig.address, MemoryPool3.address). Approximations: a size is seen
 * only when a record is emitted; CUPTI does not say whether it is before or after the record's own
 * operation, hence the max with the live blocks (which the reservation always covers). Not seen:
 * the CUDA context, module code, local memory, rounding to the allocators' granularity.
 * Suballoc = live bytes asked for through pools (cudaMallocAsync); its peak should equal the
 * engine's own allocated peak.
 *
 * Memory records are replayed in timestamp order at settle points (mark, report), each settle
 * continuing the running totals, so records of one interval may arrive in any order; call mark
 * and report after cudaDeviceSynchronize so every record of the interval has been flushed. */
#ifndef LRCNN_CUPROF_H
#define LRCNN_CUPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cupti_activity.h>

#include "sim/base/err.h"

typedef struct {
    bool valid;               /* false when CUPTI dropped records: every number is then suspect */
    uint64_t dropped;         /* records dropped since cuprof_start (not reset by mark) */
    int64_t reserved_peak;    /* device bytes, see above, peak since the last mark */
    int64_t suballoc_peak;    /* pool sub-allocation bytes, peak since the last mark */
    int64_t n_mem_records;    /* device memory and pool records since the last mark */
    int64_t n_kernels;
    double kernel_us;         /* summed kernel durations (overlapping kernels count twice) */
    double untagged_us;       /* part of kernel_us with no tag, or a tag >= n_tags */
    const double *tag_us;     /* [n_tags] microseconds per tag; owned by cuprof, valid until the
                                 next report, mark or stop */
    int n_tags;
} cuprof_report;

/* Starts profiling; call before the CUDA context exists (cudaGetDeviceCount may come first: it
 * creates none). Tags are ids 0 .. n_tags-1. */
int cuprof_start(int n_tags, err *e);
/* The records made on every launch (kernels, the API calls and external correlations that tag
 * them) on or off; memory records stay on, so the running totals hold across a pass not watched.
 * A pass timed runs without them (their cost is on the host, per call), the pass profiled with. */
int cuprof_watch(bool launches, err *e);
/* Kernels launched by this thread between tag and untag are attributed to id (CUPTI external
 * correlation, kind CUSTOM0). A failure here is returned by the next cuprof_report_get. */
void cuprof_tag(uint64_t id);
void cuprof_untag(void);
/* Forgets kernels and peaks so far: the next report covers only what follows. What is held stays
 * held (running totals); peaks restart from the current values. */
int cuprof_mark(err *e);
/* Flushes CUPTI's buffers and fills r (see tag_us for ownership). */
int cuprof_report_get(cuprof_report *r, err *e);
void cuprof_stop(void);

/* The parse layer. */
typedef struct {
    uint64_t ts, seq, addr, bytes, pool, pool_size;
    int op;                   /* CUPROF_EV_* */
    bool pooled, has_size;    /* on a pool; pool_size is that pool's size */
} cuprof_ev;
typedef struct { uint64_t addr; int64_t bytes; int pool; } cuprof_block;  /* pool -1: direct */
typedef struct { uint64_t addr; int64_t size, live; } cuprof_pool;
typedef struct { uint64_t start, end; uint32_t corr; } cuprof_kern;
typedef struct { uint64_t ext; uint32_t corr; } cuprof_ext;

enum { CUPROF_EV_ALLOC, CUPROF_EV_RELEASE, CUPROF_EV_POOL };

typedef struct {
    cuprof_ev *ev;       size_t n_ev, cap_ev;        /* memory records not yet replayed */
    cuprof_block *live;  size_t n_live, cap_live;    /* allocations held now */
    cuprof_pool *pools;  size_t n_pools, cap_pools;
    cuprof_kern *kern;   size_t n_kern, cap_kern;
    cuprof_ext *ext;     size_t n_ext, cap_ext;
    uint64_t seq;                                    /* arrival order, ties in timestamps */
    int64_t direct_cur, sub_cur, reserved_cur;
    int64_t reserved_peak, suballoc_peak, n_mem;
    uint64_t dropped;                                /* added to by cuprof.c */
    double *tag_us;
    int n_tags;
} cuprof_state;

void cuprof_state_init(cuprof_state *s, int n_tags);
void cuprof_state_free(cuprof_state *s);
/* Copies what the record says into s; kinds other than those above are ignored. */
void cuprof_take(cuprof_state *s, const CUpti_Activity *rec);
/* Replays the memory records taken so far in timestamp order into the running totals and peaks. */
void cuprof_settle(cuprof_state *s);
/* Settles, restarts peaks from the current totals, forgets kernels and record counts. */
void cuprof_state_mark(cuprof_state *s);
/* Settles and fills r; r->tag_us points into s. */
void cuprof_fill(cuprof_state *s, cuprof_report *r);

#endif
