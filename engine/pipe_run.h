/* pipe_run: a pipeline's devices as P engines in one process. Each device runs its own schedule
 * (sim/predict/pipe_sched.h) on its own accounting allocator; an op runs once what it receives has
 * been sent: an activation when the device before has written it, a gradient when the device after
 * has, each carried as a host copy (the link, outside every device's bytes). The devices take turns
 * op by op in a fixed order, so a run is deterministic; what it measures is memory and values, not
 * time (the ops do not overlap here).
 *
 * Measured: each device's tracked peak, beside the replay of its schedule and pipe_device_peak's
 * per-stage sum; the weight gradients summed over the micro-batches, by layer, taken just before
 * each device's optimizer step. */
#ifndef LRCNN_PIPE_RUN_H
#define LRCNN_PIPE_RUN_H

#include "engine/exec.h"
#include "sim/predict/pipe_sched.h"

typedef struct {
    int64_t measured;  /* the engine's device peak */
    int64_t replay;    /* the replay of the device's schedule: the prediction */
    int64_t stored;    /* the same with each data-sized encoding (sparse, zfp:acc) at the bytes the engine
                          stored rather than those predicted: what `measured` must equal */
    int64_t model;     /* pipe_device_peak from the stages' sums */
    int n_step;
} pipe_run_dev;

typedef struct {
    int devices;
    pipe_run_dev *dev;  /* [devices] */
    float **grad;       /* [n]: layer L's parameter gradient summed over the micro-batches (NULL: none) */
    int64_t *count;     /* [n]: its floats */
    int n;
} pipe_run_result;

/* One iteration of the pipeline c over the stages first[] (pipe_sched.h) of net n under plan p, the
 * batch (images (batch, C, H, W), labels) cut into c->micro micro-batches, parameters drawn from
 * seed (as exec does, so every device holds the single-device net's values). 0, or -1 with e. */
int pipe_run(const net *n, const plan *p, sched_optimizer opt, int batch, const pipe_cfg *c, const int *first, const ops_table *ops,
             const float *images, const int64_t *labels, uint64_t seed, pipe_run_result *r, err *e);
void pipe_run_free(pipe_run_result *r);

#endif
