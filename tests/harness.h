/* harness: what the engine tests share — one SGD iteration (or K of either optimizer) of a plan
 * from fixed weights (seed 3) on a fixed synthetic batch (seed 7), its parameter gradients kept,
 * beside the simulator's prediction for the schedule the backend lowers (its workspace model
 * included). */
#ifndef LRCNN_TESTS_HARNESS_H
#define LRCNN_TESTS_HARNESS_H

#include "engine/run.h"
#include "sim/predict/sim.h"

typedef struct {
    plan p;
    run r;
    sim_result pred;
} outcome;

/* Runs `text` on net n at `batch` on backend ops. -1 with e set (nothing to free) on failure. */
int harness_run(const net *n, const char *text, int batch, const ops_table *ops, outcome *o, err *e);
/* The same with optimizer opt (its default hyperparameters) for `iters` iterations. */
int harness_run_iters(const net *n, const char *text, int batch, const ops_table *ops, sched_optimizer opt, int iters,
                      outcome *o, err *e);
/* The same with the engine's memory chosen: pool (the backend's allocator as the schedule asks) or
 * the arena (engine/exec.h: exec_use_arena), the default of the two above. */
int harness_run_alloc(const net *n, const char *text, int batch, const ops_table *ops, sched_optimizer opt, int iters, bool pool,
                      outcome *o, err *e);
/* The measured peak and every category's (at the peak and maximum) equal the replay's. */
bool harness_mem_equal(const outcome *o);
/* The replay of the schedule the run executed, with each data-sized encoding (sparse, zfp:acc) at
 * the bytes the engine stored rather than those predicted: what the allocated peak must equal. */
void harness_replay_measured(const outcome *o, sim_mem *m);
void harness_drop(outcome *o);

#endif
