/* exec: runs a lowered schedule (sim/lower/sched.h) on real tensors — one executor for every plan: the
 * schedule says what to allocate, compute, copy, offload and free, and exec does exactly that
 * through the accounting allocator and a backend's ops table: each block either placed at its
 * offset in the plan's arena (exec_use_arena, the default; sim/predict/arena.h) or taken from the
 * backend's allocator (a pool) as the schedule asks. Persistent buffers (parameters,
 * their gradients, optimizer state, bn running statistics) are allocated by the first
 * iteration's ALLOC steps and kept across iterations; everything else lives as the schedule says.
 * Not done here: data (data.h) or any output (the train command). */
#ifndef LRCNN_EXEC_H
#define LRCNN_EXEC_H

#include "engine/adapt.h"
#include "engine/alloc.h"
#include "engine/ops.h"
#include "sim/predict/arena.h"

typedef struct {
    double lr, momentum;         /* SGD */
    double beta1, beta2, eps;    /* Adam (lr shared) */
} exec_hparams;

typedef struct exec {
    const net *n;
    const plan *p;
    const sched *s;
    const ops_table *ops;
    sched_optimizer opt;
    exec_hparams hp;
    alloc_stats mem;
    void **ptr;                  /* [n_buf] memory of each buffer while allocated */
    int64_t *bytes;              /* [n_buf] its size: the schedule's, or for a data-sized encoding
                                    (sim/plan/enc.h) what the codec measured at ENCODE (kept after FREE) */
    bool *on_host;
    bool *arriving;              /* [n_buf] prefetched, and not yet waited for (alloc_mem.ready) */
    int *stage_start, *stage_list; /* OFFLOAD steps whose copy begins after step i (alloc_mem.stage):
                                    stage_list[stage_start[i] .. stage_start[i + 1]) */
    bool started;                /* persistent buffers exist */
    int steps_done;              /* optimizer steps taken (iterations) */
    int64_t iter;                /* iterations begun (dropout's masks are drawn per iteration) */
    bool updating;               /* this iteration's layer-by-layer step has begun (+migrate) */
    float loss;                  /* of the last iteration */
    double *layer_us;            /* [n * 2]: forward, backward microseconds, last iteration */
    double codec_us;             /* ENCODE and DECODE steps, last iteration */
    double *step_us;             /* [n_step]: each step's time, last iteration (sim/predict/timing.h fits them) */
    bool sync_steps;             /* wait for the backend after every step, so that step_us is its time
                                    and not its launch time on an asynchronous backend (calibration) */
    adapt adapt;                 /* COMET's adaptive ZFP bounds (plans with adapt=; else empty) */
    bool arena_on;               /* blocks are placed where `plan` says (exec_use_arena), not taken from a pool */
    arena plan;                  /* the schedule's static memory plan (sim/predict/arena.h) */
    bool *staged;                /* [n_buf] arena mode: an offload's copy has begun into its host block */
    const void *batch[2];        /* the next LOAD's images and labels on the backend (exec_stage), or NULL */
    uint64_t seed;
    /* Called just before the optimizer step (gradients complete), e.g. to copy them for a dump:
     * with layer -1 before the step of every layer, or (+migrate, which steps layer by layer) with
     * each layer before its own step, when that layer's gradient is complete. */
    void (*before_update)(struct exec *x, int layer, void *ctx);
    void *before_update_ctx;
    /* A schedule run with others (a pipeline's devices: engine/pipe_run.h): where set, arrive fills
     * the buffers of LOAD step i in place of the images and labels, and depart sees buffer b just
     * before its FREE. */
    void (*arrive)(struct exec *x, int step, void *ctx);
    void (*depart)(struct exec *x, int buf, void *ctx);
    void *hook_ctx;
} exec;

exec_hparams exec_default_hparams(sched_optimizer o);

void exec_init(exec *x, const net *n, const plan *p, const sched *s, const ops_table *ops, sched_optimizer o,
               exec_hparams hp, uint64_t seed);
/* Arena mode (before exec_start): plans the schedule's arena and reserves it through the backend,
 * one region for the device and one for the host; every buffer then lives at its planned offset
 * (data-sized encodings apart, from the pool). -1 with e set when it cannot be reserved. */
int exec_use_arena(exec *x, err *e);
/* Allocates and initializes the persistent buffers (parameters, gradients, optimizer state, bn
 * running statistics); the first exec_iteration does it if this was not called. */
void exec_start(exec *x);
/* One training iteration on images (N, C, H, W) and labels (N): exec_begin, exec_run over every
 * step, exec_end. */
void exec_iteration(exec *x, const float *images, const int64_t *labels);
/* The next iteration's batch onto the backend now (ops_table.stage), so that its LOAD copies there
 * rather than from the host: outside a timed iteration, as a framework's loop holds its batch on
 * the device. A backend without stage: nothing (LOAD reads the host's batch). */
void exec_stage(exec *x, const float *images, const int64_t *labels);
/* An iteration in pieces: begin (peaks cleared), steps [from, to) in order, end (all work done). */
void exec_begin(exec *x);
void exec_run(exec *x, int from, int to, const float *images, const int64_t *labels);
void exec_end(exec *x);
void exec_free(exec *x);

/* A host copy of the persistent buffer of `kind` (BUF_PARAM, BUF_PGRAD, BUF_RUNSTAT) for layer L
 * (malloc'd, the caller frees; count receives its floats), or NULL when there is none. */
float *exec_param_copy(const exec *x, buf_kind kind, int L, int64_t *count);
/* Overwrites that buffer (it must exist: exec_start) from host memory. */
void exec_param_write(exec *x, buf_kind kind, int L, const float *src);

#endif
