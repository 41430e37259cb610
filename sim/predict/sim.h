/* sim: predictions of one configuration (net at an input size, batch, plan, optimizer).
 *
 * Two models, each with the breakdown by mem_cat:
 *   replay      walks the lowered schedule and sums ALLOC/FREE/OFFLOAD/PREFETCH: exact for an
 *               engine that executes the same schedule (it predicts the engine's *allocated* peak);
 *   closed      the per-strategy equations of paper/model.md, evaluated from per-layer sizes and
 *               band geometry without a schedule: what a paper would print.
 * Compute: FLOPs of every FWD/BWD step (recomputation and halo rows included) and a roofline time
 * in microseconds for a device profile. Not done here: any I/O. */
#ifndef LRCNN_SIM_H
#define LRCNN_SIM_H

#include "sim/predict/timing.h"

typedef struct {
    int64_t peak;                /* device bytes at the peak (host excluded) */
    int64_t at_peak[MEM_NCAT];   /* breakdown at the moment of the peak (MEM_HOST: host bytes then) */
    int64_t max[MEM_NCAT];       /* each category's own maximum over the iteration */
    int peak_step;               /* replay: index of the step at the peak (-1 for closed) */
    int64_t at_backward[MEM_NCAT]; /* replay: by category when the backward begins (before its first
                                    gradient buffer): what the forward kept, the persistent bytes
                                    beside it; all zero for closed */
    int64_t fwd_peak;            /* replay: device bytes at the forward's own peak (before the backward
                                    begins); 0 for closed */
} sim_mem;

/* A device's time model: a roofline (a rate for products, a bandwidth for the rest and the host
 * link), and optionally a calibrated model (sim/predict/timing.h, read from a profile file by
 * io/profile.h) that predicts each step from the engine's measurements and falls back to the
 * roofline only for steps of a kind it never measured. */
typedef struct {
    const char *name;            /* "cpu", "h100", or the profile file */
    double gflops;               /* sustained fp32 rate for convolutions and products */
    double gbps;                 /* memory bandwidth for elementwise work and copies */
    double link_gbps;            /* host link for offload/prefetch */
    const struct timing_model *model; /* calibrated, or NULL: the roofline alone */
    bool overlap;                /* moves run on a copy engine beside compute (a GPU: sched_move_issue's
                                    protocol, so the iteration takes the longer of the two streams);
                                    else each move takes its time in line (the CPU engine's memcpy) */
} sim_device;

extern const sim_device sim_device_cpu, sim_device_h100;
/* A built-in roofline by name (NULL if none); sim_device_names lists them. */
const sim_device *sim_device_find(const char *name);
const char *sim_device_names(void);

/* The arena's figures (sim/predict/arena.h): what an engine reserves for the plan. */
typedef struct {
    int64_t size, live;          /* device arena, and its lower bound (the live peak, blocks rounded) */
    int64_t host_size, host_live; /* the same for the pinned host arena of offloaded and migrated maps */
    int64_t apart;               /* device bytes of data-sized encodings, outside the arena, at their most */
    const char *how;             /* the order that placed the device arena */
} sim_arena;

typedef struct {
    sim_mem replay, closed;
    bool closed_ok;              /* the closed form models the plan (not yet one with encodings: closed is zero) */
    double flops;                /* FWD + BWD, recomputation included */
    double time_us;              /* the device's estimate: calibrated, or the roofline */
    double time_fitted;          /* share of time_us from steps whose kind the calibration measured
                                    (the rest: its class's rate, or the roofline); 0 without one */
    int n_steps;
    int enc_sized, enc_calibrated; /* maps with a data-sized encoding; those predicted from a calibration */
    int64_t reserved;            /* torch plans: what PyTorch's CUDA caching allocator would reserve for the
                                    replay's allocations (sim/predict/torch_alloc.h); 0 for other plans */
    sim_arena arena;             /* the static memory plan of the schedule (sim/predict/arena.h) */
} sim_result;

/* Replay of a schedule; timeline (optional, n_step + 1 values) receives device bytes after each step. */
void sim_replay(const sched *s, sim_mem *m, int64_t *timeline);
/* The iteration time of schedule s (of net n) on d; fitted (optional) receives the share of it that
 * came from measured keys of d's calibration. */
double sim_time_us(const net *n, const sched *s, const sim_device *d, double *fitted);
/* Step t's time on d (a step of schedule s), and how it was predicted (the roofline when d has no
 * model); sim_step_us: step i of a whole schedule's. */
double sim_step_time_us(const net *n, const sched *s, const sched_step *t, const sim_device *d, timing_how *how);
double sim_step_us(const net *n, const sched *s, int i, const sim_device *d, timing_how *how);

/* Everything for one configuration: lower, replay, closed form, time. timeline (optional)
 * receives a malloc'd array of r->n_steps device-byte values, one after each step. */
int sim_run(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, sim_result *r, int64_t **timeline,
            err *e);
/* The same for schedule s, already lowered from (n, p, cfg): for a caller that also keeps the
 * schedule (the sweep writes its steps), so it is lowered once. */
void sim_predict(const net *n, const plan *p, const sched_cfg *cfg, const sched *s, const sim_device *d, sim_result *r,
                 int64_t **timeline);

#endif
