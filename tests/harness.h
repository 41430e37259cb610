/* harness: what the engine tests share — one SGD iteration of a plan from fixed weights (seed 3)
 * on a fixed synthetic batch (seed 7), its parameter gradients kept, beside the simulator's
 * prediction for the schedule the backend lowers (its workspace model included). */
#ifndef LRCNN_TESTS_HARNESS_H
#define LRCNN_TESTS_HARNESS_H

#include "engine/run.h"
#include "sim/sim.h"

typedef struct {
    plan p;
    run r;
    sim_result pred;
} outcome;

/* Runs `text` on net n at `batch` on backend ops. -1 with e set (nothing to free) on failure. */
int harness_run(const net *n, const char *text, int batch, const ops_table *ops, outcome *o, err *e);
void harness_drop(outcome *o);

#endif
