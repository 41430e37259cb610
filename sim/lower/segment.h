/* segment: the lowering of what is not a row segment — the iteration's frame and the segments that
 * compute whole maps (layer, ckpt, offload: an offload segment lowers as layer, and stash.h moves
 * what it keeps). A pass over the lowering context (lower.h): each function appends steps.
 *   persistent  parameters, their gradients, the optimizer's state (in chunks under +migrate:optim)
 *               and bn running statistics, with which are persistent and which live on the host;
 *   load        the batch's image and labels, and the LOAD step that fills them;
 *   forward     a segment's FWDs, keeping what backward needs (ckpt: only its input);
 *   backward    a ckpt segment's forward again from its input, then every segment's BWDs;
 *   update      the optimizer's step (every layer at the end; torch2: layer by layer, as PyTorch
 *               2.x's foreach step holds the gradients until then; +migrate has its own, migrate.h).
 * Not here: row segments (rows.h), moves and encodings (stash.h), lifetimes (liveness.h). */
#ifndef LRCNN_SEGMENT_H
#define LRCNN_SEGMENT_H

#include "sim/lower/lower.h"

void segment_persistent(lower *c);
void segment_load(lower *c);
void segment_forward(lower *c, const plan_seg *ps);
void segment_backward(lower *c, const plan_seg *ps);
void segment_update(lower *c);

#endif
