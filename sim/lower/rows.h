/* rows: lowering of a row segment (sched.h conventions; internal to sim/, driven by pipeline.c).
 *
 * Forward: the bands in order, each computing its rows of every layer from the segment input
 * (kept whole) into the segment output (whole); 2PS bands copy the previous band's boundary rows
 * in and theirs out, and the boundaries are kept for the backward's recompute. Backward: the bands
 * in reverse, each recomputing what its backward keeps, then back-propagating the output-gradient
 * rows it owns; weight gradients add up over the bands, input-gradient rows add into the segment
 * input's gradient, and 2PS boundary gradients go to the previous band.
 *
 * Whole-map statistics (a bn in train mode, plan_seg_map_stats; docs/plans.md). bn=train, in
 * stages (plan_passes.staged): forward stage q computes the layers level q's statistics first
 * need, from the segment input and the whole maps earlier stages kept (c->whole), and adds each
 * band's own rows (band_own: a partition of the map) to per-channel sums that a STATS_END step
 * turns into the statistics; the last stage computes the rest. Backward stage s back-propagates
 * the layers whose gradient no longer waits for a sum, weight gradients included, adding
 * gradients a later stage continues into whole gradient maps, then gathers level s's gradient
 * sums from them. Each layer is computed once each way; under OverL a band computes its share of
 * each kept map and the halo its own stage reads, and back-propagates band_geom.grad's rows
 * (band_geom_init). A rebuilt level (plan_passes.rebuilt:
 * bn=train-rebuild, or an r of bn=train:LETTERS): a kept map rebuilt is dropped after the forward;
 * the backward stages recompute it in their bands from the maps still kept below it (on the
 * device, or offloaded and back: stash.c moves those by their uses), and a sweep over the bands
 * recomputes the bns' inputs their gradient sums read. bn=train-recompute, in passes: before the
 * forward, one pass over the bands per level computes from the segment input up to that level
 * and gathers its sums; before the backward, one pass per level from the deepest recomputes the
 * bands and back-propagates down to it, gathering the gradient sums; weight gradients are left
 * to the final pass. Only per-channel sums are kept between passes.
 * Not done here: full-map segments (segment.h), lifetimes (liveness.h). */
#ifndef LRCNN_ROWS_H
#define LRCNN_ROWS_H

#include "sim/lower/lower.h"

/* c->seg is the segment's index in c->p; bound[layer * fp + band] receives 2PS boundaries. */
void rows_forward(lower *c, const plan_seg *ps, int *bound);
void rows_backward(lower *c, const plan_seg *ps, int *bound);

#endif
