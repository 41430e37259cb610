/* liveness: the last pass — ALLOC before each buffer's first use and FREE after its last (a move
 * counts as a use), persistent buffers allocated before every step and freed after them all. So what
 * lives when follows from the steps alone, never from the order passes created buffers in.
 * Uses the toolkit's buckets (lower.h); knows no segment or plan. */
#ifndef LRCNN_LIVENESS_H
#define LRCNN_LIVENESS_H

#include "sim/lower/lower.h"

/* lean: the ALLOCs and FREEs only as events (sched.h: a lean schedule). */
void liveness_place(sched *s, bool lean);

#endif
