/* run: one training run of a plan, the loop every command and test shares — lower the plan with
 * the backend's workspace model, start the executor (persistent buffers, initial weights), run K
 * iterations on the batches it is given, time each, capture iteration 0's parameter gradients
 * when asked and compare them with a reference, and read the process's RSS high-water mark.
 * run_isolated does the same in a child process, so that what it measures is that run's alone and
 * a crash cannot take the caller down; its summary comes back through a pipe. A process does one
 * or the other, never both: OpenMP's threads do not survive a fork (run_isolated aborts if it sees
 * a run_plan before it), so a command that mixes them runs each part in a process of its own.
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
    bool pool;                    /* --alloc pool: blocks from the backend's allocator as the schedule asks,
                                     instead of one arena at the plan's offsets (exec_use_arena) */
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

/* One encoded map of the last iteration (a BUF_ENC buffer of the schedule, sim/plan/enc.h): the bytes
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
    /* arena mode (run_cfg.pool false): the arenas reserved (the plan's sizes), the highest byte a
     * placed block reached in each (measured as the engine placed them), and, where the device is
     * host memory (the CPU), the device arena's resident bytes after the run: the pages its blocks
     * touched (mincore). -1 where not measured. */
    bool arena;
    int64_t arena_size, arena_host_size, arena_extent, arena_host_extent, arena_resident;
    bool profiled_last;           /* the backend profiled the last iteration (ops_table.device_mark) */
    double best_us;               /* best iteration time of those timed (run_timed) */
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

/* Runs in a process of their own, so that what they measure is theirs alone — the RSS figure on the
 * CPU; on CUDA the pool's reservation, the device's bytes in use, the context — and a crash cannot
 * take the caller down. The child opens the backend itself when one is named (a CUDA context does
 * not survive fork, so a parent that forks runs never opens CUDA), then calls `first` if given
 * (validate: the prediction of the schedule this backend lowers, whose workspace model needs the
 * device), then runs cfg[0 .. n) in turn, each compared with its cmp_ref (NULL: none; else
 * iteration 0's gradients against these, all parameter tensors back to back as run.grads, and its
 * loss with cmp_loss). out[k] gets run k's summary (ok false and err set on failure, a crash
 * included; a failed open or `first` fails every run with its message); `first`'s answer, plain
 * data, comes back in *out_first. The parent must not have run the engine itself (OpenMP). */
typedef struct {
    const char *backend;          /* NULL: cfg[k].ops as given, opened in this process already */
    bool profile;                 /* let the backend watch the device (ops_find) */
    const ops_table *(*find)(const char *name, bool profile, err *e); /* how the child opens it: ops_find */
    int (*first)(const ops_table *ops, void *ctx, void *out, err *e);
    void *ctx;
    void *out_first;
    size_t first_bytes;
    int n;                        /* runs, at most 2 */
    run_cfg cfg[2];               /* their ops: the backend the child opened, where one is named */
    const float *cmp_ref[2];
    float cmp_loss[2];
} run_job;
void run_isolated(const run_job *j, run_summary *out);

/* One run in a child process of its own, on c->ops (run_isolated of that one run). */
void run_forked(const run_cfg *c, const float *cmp_ref, float cmp_loss, run_summary *out);
void run_summary_free(run_summary *s);

/* The median of v[0..n), n >= 1. */
double run_median(const double *v, int n);
/* The iterations timed of `iters`, [*first, *end): after the first, which includes the warm-up
 * (the only one when iters == 1), and before a last one the backend profiled (its launch records
 * cost host time per call), where that leaves any. */
void run_timed(int iters, bool profiled_last, int *first, int *end);

/* Fills s's comparison fields: g against ref, both all parameter tensors of n back to back
 * (net_params(n) floats, layer by layer, as run.grads). */
void run_compare(run_summary *s, const net *n, const float *g, const float *ref, float loss, float ref_loss);

#endif
