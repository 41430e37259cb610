/* pipeline: a plan lowered to its schedule (sched.h) — the driver that orders the passes and calls
 * none of them twice: the iteration's frame and persistent buffers (segment.h); the segments
 * forward, then backward in reverse, each a row segment (rows.h) or a whole-map one (segment.h); the
 * optimizer's step (segment.h, or migrate.h under +migrate); then, on the finished compute steps,
 * what is kept and how (stash.h: offload marks, encodings, moves), migration's moves (migrate.h),
 * and lifetimes (liveness.h). Every pass appends to or rewrites the schedule through the lowering
 * toolkit (lower.h); none calls another, and nothing below calls this file.
 * Buffers are created in a fixed order, so their numbering, and the order of ALLOC and FREE within
 * a step, depend only on the plan. */
#ifndef LRCNN_PIPELINE_H
#define LRCNN_PIPELINE_H

#include "sim/lower/sched.h"

/* Lowers plan p of net n with cfg into s; -1 with e set (nothing to free) when the plan cannot be
 * lowered (a modifier that encodes nothing, an offload list past the steps, batch < 1). */
int pipeline_lower(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e);
/* The same, lean (sched.h): for the predictions, which never need the ALLOC and FREE steps written. */
int pipeline_lower_lean(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e);

#endif
