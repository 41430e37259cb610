/* pipe_split: where to cut a net into pipeline stages (sim/predict/pipe.h), and which plan each stage
 * runs, so that every device fits a budget and the slowest stage — what bounds the pipeline's
 * throughput in its steady state — is as fast as can be.
 *
 * The candidates are plans over the whole net (presets: layer, ckpt-sqrt, 2ps:4, ...); stage k may
 * run any candidate's segments over its own layers, provided its ends fall outside that
 * candidate's row and checkpoint segments (pipe_cut_ok). A table costs every range of clean cuts
 * under every candidate from one lowering each (pipe_range: stash, working and persistent bytes,
 * times), and a device's exact peak with it as its stage — the replay of the device's own schedule
 * (sim/predict/pipe_sched.h, what the engine measures), composed when the search first asks. A
 * device fits when its exact peak does. Two exact solvers of the same problem over that table:
 *   dp   a dynamic program over (stages placed, position reached): the least slowest stage,
 *        since the objective is a maximum and each stage's budget is its own (microseconds);
 *   ilp  an integer program through GLPK: a binary per (stage, range, candidate), a path of ranges
 *        through the positions, T at least every stage's time, minimise T — the formulation the
 *        literature states (Beaumont et al.), checked against the dp and brute force.
 * GPipe and 1F1B (a stage a device); the interleaved schedule's stages are not contiguous on a
 * device and are not searched. */
#ifndef LRCNN_PIPE_SPLIT_H
#define LRCNN_PIPE_SPLIT_H

#include "sim/predict/pipe.h"

typedef struct {
    const net *n;
    pipe_cfg c;
    sched_cfg cfg;
    pipe_net *pn;        /* [Q]: each candidate's lowering at the micro-batch size */
    int64_t *exact;      /* [index * P + k]: the replay of device k's schedule with that stage (pipe_sched_stage),
                            -1 until asked (INT64_MAX: it does not compose) */
    int P, Q;            /* stages (devices); candidates */
    int m;               /* positions 0..m: pos[0] = 1, pos[m] = n->n, the clean cuts between */
    int *pos;
    pipe_stage *st;      /* [(i * (m + 1) + j) * Q + q]: layers [pos[i], pos[j]) under candidate q */
    bool *ok;            /* same index: both ends outside q's row and checkpoint segments */
} pipe_table;

/* The table for net n cut for c (GPipe or 1F1B) under candidates cand[0..Q) at cfg->batch (the
 * micro-batch) on device d. -1 (e) when a candidate does not lower, c is interleaved, or the net has
 * too few clean cuts. */
int pipe_table_build(pipe_table *t, const net *n, const plan *cand, int Q, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c,
                     err *e);
void pipe_table_free(pipe_table *t);
static inline const pipe_stage *pipe_table_at(const pipe_table *t, int i, int j, int q)
{
    return &t->st[((size_t)i * (size_t)(t->m + 1) + (size_t)j) * (size_t)t->Q + (size_t)q];
}

/* An answer: stage k is layers [first[k], first[k+1]) under candidate which[k]. */
typedef struct {
    int *first, *which;  /* [P + 1], [P] */
    double slowest;      /* its slowest stage's forward and backward of a micro-batch, us */
    int64_t least;       /* refused: the least budget any choice needs (its largest device's exact peak) */
} pipe_answer;

/* Device k's exact peak with layers [pos[i], pos[j]) under candidate q as its stage (composed once). */
int64_t pipe_table_peak(pipe_table *t, int i, int j, int q, int k);
/* The exact answer within `budget` by the dynamic program: 0; 1 when nothing fits (a->least set). */
int pipe_split_dp(pipe_table *t, int64_t budget, pipe_answer *a);
/* The same by the integer program (GLPK, at most limit_s seconds): 0; 1 when nothing fits (a->least
 * unset); -1 (e) when GLPK stops before proving its answer. */
int pipe_split_ilp(pipe_table *t, int64_t budget, double limit_s, pipe_answer *a, err *e);
void pipe_answer_init(pipe_answer *a, int P);
void pipe_answer_free(pipe_answer *a);

/* Stage starts first[0..P] of the fastest split of net n under one plan p whose every device fits
 * `budget`: 0; 1 when none does (e says the least budget any split needs); -1 (e) on error. */
int pipe_split(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c, int64_t budget,
               int *first, err *e);

#endif
