/* closed: the closed-form memory model, the equations of paper/model.md. From the net's layer
 * table, the plan's segments and their band geometry — never from a schedule — it gives every
 * buffer the scheduler's policy creates its bytes and its life in phases, and the peak is the
 * largest sum of what is alive at one phase: what a paper would print, checked against the
 * replay by tests/test_closed.c. Not done here: lowering, time, I/O. */
#ifndef LRCNN_CLOSED_H
#define LRCNN_CLOSED_H

#include "sim/predict/sim.h"

/* The closed-form peak of plan p (resolved for n) and its breakdown by category, in m. */
void closed_predict(const net *n, const plan *p, const sched_cfg *cfg, sim_mem *m);

#endif
