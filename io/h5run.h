/* h5run: one run in a result file (results/SCHEMA.md, runs/NNNNN): its configuration, the
 * simulator's predictions (replay and closed form, by category), what the engine measured (peaks,
 * loss and times per iteration, the timeline, encoded maps, the device's own view), the schedule's
 * step timeline, the net's layers and the plan's segments. Above the file itself (h5.h). */
#ifndef LRCNN_H5RUN_H
#define LRCNN_H5RUN_H

#include "io/h5.h"

/* Writes run r as the file's next run; -1 with e set, and nothing of it in the file. */
int h5_write_run(h5_file *f, const h5_run *run, err *e);

#endif
