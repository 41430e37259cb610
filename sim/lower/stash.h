/* stash: what is kept between the passes, a pass over the schedule once its compute steps are
 * lowered: which kept maps offload segments move to the host; the encodings of kept maps (ENCODE
 * after a map's last forward use, DECODE before its first backward use; an error when a modifier
 * encodes nothing); then the moves (OFFLOAD after the last forward use, PREFETCH one backward step
 * ahead, or as an offload list times them). Each function takes the schedule and returns it. */
#ifndef LRCNN_STASH_H
#define LRCNN_STASH_H

#include "sim/lower/lower.h"

void stash_mark_offloads(lower *c);
int stash_encode(lower *c, err *e);
/* An error when an offload list's timing asks for more steps than there are, or names a layer
 * that keeps nothing. */
int stash_place_moves(lower *c, err *e);

#endif
