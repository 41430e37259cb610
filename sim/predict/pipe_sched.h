/* pipe_sched: one device's schedule in a pipeline, composed from the net's lowering at the
 * micro-batch size — so that the engine can run it and the replay can count it, step by step,
 * where pipe.h counts a device's peak from per-stage sums.
 *
 * The device runs its order (pipe_order): for each op, the steps of the whole-net lowering that
 * belong to that stage and pass (a step's layer picks the stage, its bwd_phase the pass), on that
 * micro-batch's own copies of the buffers; the stage's persistent buffers (parameters, gradients,
 * optimizer state, running statistics) once for all micro-batches, so weight gradients add up over
 * them; the optimizer's step once, after the last op, over the device's parameters. A buffer its
 * op needs that another device writes (the activation at the stage's input, the gradient at its
 * output) or that is data (the images, the labels) arrives through a LOAD step just before its
 * first use; a buffer it writes that a stage on another device reads leaves when it is freed here
 * (its last use on this device). The last pass (liveness.h) places every ALLOC and FREE, so a
 * device holds a micro-batch's maps exactly from its first use to its last, as one device does.
 *
 * A kept map's moves (offload, prefetch) and its codec steps (encode, decode) go to every device
 * whose backward reads the map — a map at a cut is read on both sides, and each device moves, or
 * encodes and decodes, its own copy. Refused with a reason: +migrate (parameters, gradients or state
 * on the host between their uses: not composed yet), a step or buffer that crosses a cut (a segment
 * of the plan spans two stages: the cuts must fall between its segments). */
#ifndef LRCNN_PIPE_SCHED_H
#define LRCNN_PIPE_SCHED_H

#include "sim/predict/pipe.h"

typedef struct {
    int n_op;          /* the device's ops, in order (pipe_order) */
    pipe_op *ops;
    int *op_start;     /* [n_op + 1]: op k runs steps [op_start[k], op_start[k + 1]); the optimizer's step
                          and the persistent FREEs follow op_start[n_op] */
    int *orig, *mb;    /* [the schedule's n_buf]: the whole-net lowering's buffer each one copies, and its
                          micro-batch (-1: persistent, shared by all); what a LOAD fills comes from outside
                          this device (data or another device) */
    bool *leaves;      /* [n_buf]: read by another device once complete: sent when freed here */
} pipe_dev;

/* Device d's schedule (out) of the pipeline c over the stages [first[s], first[s+1]) (first[0] = 1,
 * first[S] = n->n), from `whole`, the net's lowering at the micro-batch size under cfg's optimizer;
 * its ops and buffers described in *pd. 0, or -1 with e saying why not. */
int pipe_sched_device(sched *out, pipe_dev *pd, const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c,
                      const int *first, int d, err *e);
/* Device k's schedule when its stage (GPipe or 1F1B: one a device) is layers [a, z), whatever the
 * other stages are: it holds only its own (a = 1 exactly for k = 0, z = n->n for the last). */
int pipe_sched_stage(sched *out, pipe_dev *pd, const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, int a, int z,
                     int k, err *e);
void pipe_dev_free(pipe_dev *pd);
/* The replayed peak of pipe_sched_device's and pipe_sched_stage's schedules (composed, replayed,
 * freed): -1 with e saying why where the schedule is not composed. */
int64_t pipe_device_peak_exact(const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, const int *first, int d,
                               err *e);
int64_t pipe_stage_peak_exact(const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, int a, int z, int k,
                              err *e);

#endif
