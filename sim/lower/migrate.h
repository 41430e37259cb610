/* migrate: Layrub-style migration (plans with +migrate), two passes over the schedule: the
 * optimizer step layer by layer, each right after the last step that reads its parameters or their
 * gradient (instead of one update at the end); then, for every persistent buffer kept on the host,
 * a PREFETCH one compute step ahead of each run of uses in one pass and segment and an OFFLOAD
 * after it. */
#ifndef LRCNN_MIGRATE_H
#define LRCNN_MIGRATE_H

#include "sim/lower/lower.h"

void migrate_updates(lower *c);
void migrate_place_moves(lower *c);

#endif
