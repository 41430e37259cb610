/* arena: a static memory plan for a schedule — an offset for every block of device memory in one
 * device arena, and for every block of host memory (offloaded and migrated maps) in one host arena,
 * such that no two blocks live at the same step overlap. The schedule knows every buffer's size and
 * lifetime before the first step, so the memory can be planned rather than allocated, as inference
 * compilers do (TFLite's and XLA's buffer assignment, ggml-alloc's graph allocator); then the arena's
 * size is the footprint, the live peak its lower bound, and the gap between them fragmentation.
 *
 * A block is one residency of a buffer: on the device from its ALLOC or PREFETCH to its OFFLOAD or
 * FREE, on the host from the step its offload's copy may begin (sched_move_issue: the copy writes
 * the host block before the OFFLOAD releases the device one) to its PREFETCH or FREE. A buffer kept
 * on the host between its uses (+migrate) has one home there for the whole run. Persistent buffers
 * live for the whole schedule (and across iterations: their blocks never move). Sizes are rounded
 * up to ARENA_ALIGN (cuDNN's and the CPU's vector alignment both divide it).
 * Outside the arena: a data-sized encoding (sparse, zfp:acc; sim/plan/enc.h), whose bytes are known
 * only once the values are: it is allocated apart when it is made, and `apart` says how many bytes
 * the prediction gives such blocks at most at once.
 *
 * The heuristic: persistent blocks first, packed from offset 0 (they are live at every step, so
 * any valid plan keeps them apart). Then, first, from the live peak outwards: the blocks live at the
 * first step of the live peak are stacked (latest end lowest), and two allocator's passes place the
 * rest, one over the steps after the peak in time order, one over the steps before it in reverse,
 * each block taking the smallest hole that holds it below the top (best fit) and giving it back
 * when it ends; tried with the stack's order reversed too. It costs one walk over the steps and
 * meets the live peak on most schedules (three in four of the 10,000 configurations of
 * `lrcnn_bench sweep`). Where it does not, every block is placed one at a time at the lowest
 * offset of the smallest gap left between the blocks already placed that overlap it in time, or
 * above them all: the best-fit offset assignment of Pisarchyk and Lee (Efficient Memory Management
 * for Deep Neural Net Inference, 2020; TFLite's GPU delegate). They place in decreasing size; a
 * training schedule's stack of stashed maps packs tighter when the blocks live at its most crowded
 * steps come first: each block's crowding is the most bytes live at one step of its lifetime, and
 * three orders are tried — crowded first with later ends lower, crowded first with earlier starts
 * lower, and size times crowding — stopping at the live peak, which no plan can beat. Where the
 * best still ends above it, a repair: the blocks it left above the peak are placed first, then the
 * rest in the best of those orders, for up to ARENA_REPAIRS rounds, each adding the blocks the last round
 * left above. Those orders and the repair run as they would without the walk, and the smallest
 * arena of all is kept: the walk never makes an arena larger. */
#ifndef LRCNN_ARENA_H
#define LRCNN_ARENA_H

#include "sim/lower/sched.h"

#define ARENA_ALIGN 256
#define ARENA_ORDERS 5
#define ARENA_REPAIRS 4 /* rounds of the repair (arena.c) */

extern const char *const arena_orders[ARENA_ORDERS + 1]; /* the last: the repair of the best */

/* A block: one residency of a buffer, [t0, t1] in steps (inclusive), its bytes rounded up. */
typedef struct {
    int64_t size, off;
    int t0, t1;
    bool host, persistent;
} arena_block;

typedef struct {
    int64_t size, host_size;   /* the arenas' bytes (multiples of ARENA_ALIGN) */
    int64_t live, host_live;   /* the most bytes live at once, each block rounded: the sizes' lower bounds */
    int64_t apart;             /* device bytes of blocks outside the arena at their most at once (data-sized encodings) */
    const char *how, *host_how; /* the order that gave each arena (arena_orders) */
    int64_t *at;               /* [n_step]: for an ALLOC (host: a migrated buffer's home) or PREFETCH, the offset
                                  of the block it places; for an OFFLOAD the host block's; -1 for every other step
                                  and for blocks outside the arena */
    arena_block *blocks;       /* [n_blocks], in the order of the steps that open them */
    int n_step, n_blocks;
} arena;

/* A buffer the arena leaves out (a data-sized encoding). */
bool arena_outside(const sched_buf *b);

/* Plans schedule s into a (arena_free). */
void arena_plan(const sched *s, arena *a);
/* The same plan's figures and blocks without the per-step offsets (a->at NULL): for a prediction,
 * which reads only the sizes. */
void arena_measure(const sched *s, arena *a);
void arena_free(arena *a);

/* How far a's device arena is from the smallest possible: an integer program over its blocks
 * (arena_exact.c), solved by GLPK within `seconds`, starting from a's plan. */
typedef struct {
    int blocks, pairs;         /* the program's size: blocks placed, pairs live at once */
    int64_t lower, best;       /* the live peak; the smallest arena found (a's size if nothing better) */
    bool proved;               /* best is the optimum (the search finished, or a met the live peak) */
} arena_exact_result;

/* 0 with r filled, or -1 when a has more than max_blocks blocks to place (r: lower and best only). */
int arena_exact(const arena *a, int max_blocks, double seconds, arena_exact_result *r);

#endif
