/* arena_side: the arena's blocks and one side's placement in progress — internal to arena.c (the
 * walk from the live peak, which meets it on most schedules) and arena_fit.c (the best-fit orders
 * and the repair, where the walk does not). */
#ifndef LRCNN_ARENA_SIDE_H
#define LRCNN_ARENA_SIDE_H

#include <string.h>

#include "sim/predict/arena.h"

typedef arena_block block;

/* The live peak of one side's blocks: the most bytes live at once (each block rounded), the step
 * where they first are, and the last start at or before it of a block not persistent (0: none),
 * where the walk from the peak begins. */
typedef struct {
    int64_t lower;
    int peak, cp;
} live_peak;

/* The blocks, in the order of the steps that open them, and their indices in the order they end
 * (ties, the blocks never freed, in the order opened); how many are on the host; the device side's
 * live peak, measured as they open (device blocks open in step order, a host block where its copy
 * may begin, which can be earlier). */
typedef struct {
    block *v;
    int n, cap, n_host;
    int *ends, n_ends;
    live_peak dev;
} blocks;

typedef struct placed placed;

/* One side's blocks being placed, by position: their indices in bl, sizes, and the offsets of the
 * placement being made (written back to bl once the best is chosen); their lifetimes [c0, c1] in
 * steps, and their positions in order of start and of end with those steps beside them in that
 * order (a walk over them reads the times in sequence); the live peak. The best-fit orders renumber
 * the lifetimes onto the steps where some block starts or ends (crowding: the overlaps stay, n_time
 * counts them) and keep the blocks placed in order (placed). */
typedef struct {
    blocks *bl;
    int n, n_time;
    int *idx, *c0, *c1;
    int64_t *size, *off;
    int *by_start, *by_end, *start_at, *end_at;
    int64_t base; /* bytes of the persistent blocks packed at the bottom */
    live_peak live; /* its lower is the arena's lower bound */
    placed *pl;
} side;

/* The smallest arena found so far: its size (-1: none yet), the order that gave it, and its offsets
 * by position. */
typedef struct {
    int64_t size;
    const char *how;
    int64_t *off;
} found;

/* Keeps the side's current placement, of `size`, in f when it is smaller (or f has none); whether it did. */
static inline bool keep_smaller(const side *sd, found *f, int64_t size, const char *how)
{
    if (f->size >= 0 && size >= f->size) return false;
    f->size = size, f->how = how;
    memcpy(f->off, sd->off, (size_t)sd->n * sizeof(int64_t));
    return true;
}

/* Where the walk from the live peak misses it: the best-fit orders and the repair (arena_fit.c);
 * their best into fit. */
void arena_place_best_fit(side *sd, bool host, int n_step, int64_t lower, found *fit);

#endif
