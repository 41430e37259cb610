/* lower: the state of lowering one plan to a schedule, and the steps every kind of segment emits
 * (a layer's forward, its backward, a row copy), the toolkit every pass uses: pipeline.c orders
 * the passes (segment.c, rows.c, stash.c, migrate.c, liveness.c), which call this and sched.c only.
 * Internal to sim/: commands and the engine read schedules (sched.h), never this. Conventions are sched.h's: lowering emits compute, copy and statistics steps over named
 * buffers and never decides a lifetime (liveness.h places ALLOC and FREE afterwards). */
#ifndef LRCNN_LOWER_H
#define LRCNN_LOWER_H

#include "sim/lower/sched.h"

typedef struct {
    sched *s;
    const net *n;
    const plan *p;
    const sched_cfg *cfg;
    int cap_buf, cap_step;
    int seg;              /* segment being lowered */
    int *act, *aux;       /* [layer] buffer holding the output / its auxiliary now, -1 none */
    int *grad;            /* [layer] buffer holding the output's gradient now */
    int *param, *pgrad, *opt, *run;
    int *wsum;            /* [layer] under PyTorch's rules, where a row segment's bands sum the
                             weight gradient (autograd's buffer for the parameter): -1 before its
                             first band's backward */
    int *stats, *sums;    /* [layer] whole-map statistics gathered over a row segment's bands (bn in
                             train mode): the mean and inverse std, and the backward gradient sums;
                             -1 where the layer computes its own */
    int *whole;           /* [layer] a row segment's whole map kept between its stages (bn=train), -1 none */
    int label;
    bool bwd_phase;       /* lowering the backward pass */
    bool stats_pass;      /* lowering a statistics pass: its FWDs are not the forward pass's */
} lower;

/* A torch plan predicting PyTorch's own memory: no engine's workspace model given (run on an
 * engine, a torch plan keeps what that engine keeps). */
static inline bool lower_predicts_torch(const lower *c) { return c->p->torch && !c->cfg->ws; }

int lower_buf(lower *c, buf_kind k, mem_cat cat, int L, int band, band_rows r, int64_t bytes);
/* A new step; the pointer is valid until the next lower_step. */
sched_step *lower_step(lower *c, sched_op op, int L, int band);
/* Bytes of rows r of layer L's output for the batch, elem bytes per value. */
int64_t lower_bytes(const lower *c, int L, band_rows r, int elem);
band_rows lower_full(const net *n, int L);

/* FWD of layer L, band `band` (-1: whole map), computing rows r into y (-1: a new buffer holding
 * rows `hold`). keep_aux: an optional auxiliary (argmax) is kept for a later BWD. Returns y. */
int lower_fwd(lower *c, int L, int band, band_rows r, band_rows hold, int y, bool keep_aux);

/* Rows a new gradient buffer of producer P must hold. */
typedef band_rows (*lower_hold_fn)(const void *ctx, int P);
/* The gradient buffer of layer P's output in the current context, created on first use. */
int lower_grad(lower *c, int P, int band, band_rows hold, bool zero);
/* BWD of layer L on output-gradient rows r. zero: new gradient buffers are zero-filled and
 * accumulated into (bands overlap). want (NULL: all): the producers whose input gradient is wanted.
 * weights: accumulate the parameter gradient (not in a statistics pass). Returns the step. */
sched_step *lower_bwd(lower *c, int L, int band, band_rows r, lower_hold_fn hold_of, const void *hctx, bool zero,
                      const bool *want, bool weights);
/* A COPY of rows r of layer L from src into dst (acc: added); the pointer is lower_step's. */
sched_step *lower_copy(lower *c, int L, int band, band_rows r, int src, int dst, bool acc);

/* A step about buffer b alone (ALLOC, FREE, OFFLOAD, PREFETCH): every other buffer slot unused;
 * a move carries the buffer's bytes over the host link. */
static inline sched_step lower_buffer_step(const sched *s, sched_op op, int b, int band, int seg)
{
    sched_step t = sched_buffer_step(s, op, b);
    t.band = band, t.seg = seg;
    t.bytes_moved = op == SCHED_OFFLOAD || op == SCHED_PREFETCH ? (double)s->bufs[b].bytes : 0;
    return t;
}

/* Items bucketed by step (a counting sort): the items i with key[i] >= 0, in item order within a
 * step; those of step k are list[start[k] .. start[k + 1]), start[ns] of them in all. */
typedef struct {
    int *start, *list;
} lower_buckets;
lower_buckets lower_bucket(const int *key, int n_items, int ns);
void lower_buckets_free(lower_buckets *k);

/* A step to insert just before or just after step `at` of the current list. */
typedef struct {
    int at;
    bool after;
    sched_step step;
} lower_ins;
/* Rebuilds the step list with the insertions in place (in their order where they share a place). */
void lower_insert(lower *c, const lower_ins *ins, int n);

#endif
