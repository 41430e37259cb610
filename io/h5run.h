/* h5run: what one run holds in a result file (results/SCHEMA.md, runs/NNNNN): its configuration,
 * the simulator's predictions (replay and closed form, by category), what the engine measured
 * (peaks, loss and times per iteration, the timeline, encoded maps, the device's own view), the
 * schedule's step timeline, the net's layers and the plan's segments. Above h5.h's writers, below
 * h5_write_run, which names the group and keeps the file whole if this fails. */
#ifndef LRCNN_H5RUN_H
#define LRCNN_H5RUN_H

#include "io/h5.h"

/* Writes run r into the open group g; -1 with e set. */
int h5run_write(hid_t g, const h5_run *r, err *e);

#endif
