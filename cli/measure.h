/* measure: one plan executed on the CPU engine in a forked child process, so that its RSS
 * high-water mark is its own and a crash cannot take the caller down. Optionally compares
 * iteration 0's gradients with a reference kept in shared memory (lrcnn validate). */
#ifndef LRCNN_MEASURE_H
#define LRCNN_MEASURE_H

#include "engine/exec.h"

typedef struct {
    int ok;
    char err[256];
    int64_t peak, host_peak, rss, at_peak[MEM_NCAT], max[MEM_NCAT];
    double best_us;   /* best iteration time after the first (the only one when iters == 1) */
    float loss0;      /* loss of iteration 0 */
    double grad_dev, loss_dev;
    char worst[NET_NAME_LEN];
} measure_result;

typedef struct {
    const net *n;
    float *ref;       /* shared: the reference's iteration-0 gradients, all tensors back to back */
    float *ref_loss;
    bool write_ref;   /* this run is the reference */
    measure_result *r;
} measure_compare;

/* Runs `iters` iterations of p (same seed: same weights and batches) in a child process. */
void measure_plan(const net *n, const plan *p, const sched_cfg *cfg, int iters, uint64_t seed, measure_compare *cmp,
                  measure_result *out);

#endif
