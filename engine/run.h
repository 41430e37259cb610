/* run: one training run of a plan, the loop every command and test shares — lower the plan with
 * the backend's workspace model, start the executor (persistent buffers, initial weights), run K
 * iterations on the batches it is given, time each, capture iteration 0's parameter gradients
 * when asked and compare them with a reference, and read the process's RSS high-water mark.
 * run_forked does the same in a child process, so that the RSS figure is that run's alone and a
 * crash cannot take the caller down; its summary comes back through a pipe. A process does one or
 * the other, never both: OpenMP's threads do not survive a fork (run_forked aborts if it sees a
 * run_plan before it), so a command that mixes them runs each part in a process of its own.
 * Not done here: predictions (sim.h), data (io/data.h), output (io/h5.h). */
#ifndef LRCNN_RUN_H
#define LRCNN_RUN_H

#include "engine/exec.h"

/* Where batches come from: fill images (n, C, H, W) and labels (n, or n x the loss's places under a
 * per-pixel loss: net_labels_per_image) for iteration iter. */
typedef struct {
    void (*fill)(const void *ctx, int iter, int n, float *images, int64_t *labels);
    const void *ctx;
} run_batches;

typedef struct run run;

typedef struct {
    const net *n;
    const plan *p;
    sched_cfg sched;              /* batch and optimizer; the workspace model is the backend's */
    const ops_table *ops;
    exec_hparams hp;
    uint64_t seed;                /* weights (and, by the caller's batches, data) */
    int iters;
    run_batches batches;
    bool grads;                   /* capture iteration 0's parameter gradients (run.grads) */
    bool sync_steps;              /* time every step to its end (exec.sync_steps): calibration */
    float *grads_to;              /* into this buffer (e.g. shared memory) instead of a new one */
    /* Optional hooks, all given ctx: on_start after the persistent buffers exist and before
     * iteration 0 (load weights; -1 with e set stops the run); on_iter after each iteration;
     * before_update once an iteration's gradients are complete, before the optimizer step (layer
     * -1), or once per layer before that layer's step (+migrate: exec.h). */
    int (*on_start)(exec *x, void *ctx, err *e);
    void (*on_iter)(const run *r, int iter, void *ctx);
    void (*before_update)(exec *x, int iter, int layer, void *ctx);
    void *ctx;
} run_cfg;

/* One encoded map of the last iteration (a BUF_ENC buffer of the schedule, sim/enc.h): the bytes
 * the simulator predicted and those the engine stored, which differ only for data-sized encodings. */
typedef struct {
    int layer, band;
    enc_kind kind;
    int mod;                      /* the plan modifier that chose it (an index into plan.mods) */
    enc_shape shape;
    double factor;                /* data-sized kinds: the density or ratio predicted with */
    bool calibrated;              /* ... taken from a calibration rather than the modifier */
    int64_t predicted, measured;
    /* adaptive ZFP bounds (engine/adapt.h): the map's adapted absolute bound (-1: still acc x
     * range, or not adaptive), and the model's relative weight-gradient error of its readers at
     * the last iteration's bound (-1: none) */
    double bound, model_err;
} run_encoded;

/* What a run measured, as plain data (it crosses a pipe from run_forked's child; the encoded maps
 * follow it there). */
typedef struct {
    bool ok;
    char err[256];                /* why not ok */
    int iters;
    int64_t peak, host_peak;      /* the accounting allocator, last iteration: device and host bytes */
    int64_t at_peak[MEM_NCAT], max[MEM_NCAT];
    int64_t rss_peak;             /* the process's resident-set high-water mark, bytes */
    double best_us;               /* best iteration time after the first (the only one when iters == 1) */
    double median_us;             /* their median: what time predictions are compared with */
    float loss0;
    /* against a reference run (run_compare): */
    bool compared;
    double grad_dev;              /* max over tensors of ||g - g_ref|| / ||g_ref|| */
    double loss_dev;              /* |loss0 - ref| / |ref| */
    int64_t non_finite;           /* gradient values that are NaN or infinite */
    char worst[NET_NAME_LEN];     /* the layer of grad_dev */
    int n_encoded;
    run_encoded *encoded;         /* [n_encoded], malloc'd: run_free, or run_summary_free for a
                                     summary from run_forked */
    bool has_device;              /* the backend watched the device (ops_table.device_report): */
    ops_device device;            /* what it saw in the last iteration, */
    ops_device_layer *device_layers; /* per layer [n_device_layers] (malloc'd, freed as encoded) */
    int n_device_layers;
    float *loss;                  /* a summary from run_forked: every iteration's loss and time, */
    double *iter_us;              /* [iters] (run_summary_free); NULL in a run's own (run.loss) */
} run_summary;

struct run {
    run_summary sum;
    sched s;                      /* the lowered schedule */
    exec x;                       /* alive until run_free (dumps read the parameters) */
    float *loss;                  /* [iters] */
    double *iter_us;              /* [iters] */
    float *grads;                 /* iteration 0's parameter gradients, layer by layer (cfg.grads) */
    int64_t n_grads;
    bool own_grads;
};

/* Runs c->iters iterations. On failure (the plan does not lower, on_start fails) -1 with e set and
 * nothing to free. */
int run_plan(run *r, const run_cfg *c, err *e);
void run_free(run *r);

/* The same in a child process: only the summary comes back (with ok false and err set on failure,
 * a crash included). With cmp_ref, iteration 0's gradients are compared with cmp_ref (all
 * parameter tensors back to back, as run.grads) and its loss with cmp_loss. */
void run_forked(const run_cfg *c, const float *cmp_ref, float cmp_loss, run_summary *out);
/* The same in this process, for a backend whose state cannot cross a fork (CUDA: a child cannot
 * use the parent's context). The summary's RSS figure is then the process's, not the run's. */
void run_inline(const run_cfg *c, const float *cmp_ref, float cmp_loss, run_summary *out);
void run_summary_free(run_summary *s);

/* The median of v[0..n), n >= 1. */
double run_median(const double *v, int n);

/* Fills s's comparison fields: g against ref, both all parameter tensors of n back to back
 * (net_params(n) floats, layer by layer, as run.grads). */
void run_compare(run_summary *s, const net *n, const float *g, const float *ref, float loss, float ref_loss);

#endif
