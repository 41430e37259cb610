/* pipe: see pipe.h. */
#include "sim/predict/pipe.h"
#include "sim/lower/pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = {"gpipe", "1f1b", "interleaved"};

const char *pipe_kind_name(pipe_kind k) { return kind_names[k]; }

int pipe_kind_of(const char *name)
{
    for (int k = 0; k < 3; k++)
        if (!strcmp(name, kind_names[k])) return k;
    return -1;
}

int pipe_check(const pipe_cfg *c, err *e)
{
    if (c->devices < 1 || c->micro < 1 || c->chunks < 1)
        return err_set(e, "pipeline: devices, micro-batches and chunks must be at least 1 (%d, %d, %d)", c->devices, c->micro,
                       c->chunks);
    if (c->chunks > 1 && c->kind != PIPE_INTERLEAVED) return err_set(e, "pipeline: %d chunks a device needs the interleaved schedule", c->chunks);
    if (c->kind == PIPE_INTERLEAVED && c->micro % c->devices)
        return err_set(e, "pipeline: the interleaved schedule needs the micro-batches (%d) a multiple of the devices (%d)", c->micro,
                       c->devices);
    return 0;
}

/* The k-th forward (or backward) of device d: for 1F1B micro-batch k through its stage; interleaved,
 * P micro-batches through one chunk, then the same P through the next, backwards taking the chunks
 * in reverse. */
static pipe_op nth(const pipe_cfg *c, int d, int k, bool bwd)
{
    if (c->kind != PIPE_INTERLEAVED) return (pipe_op){bwd, k, d};
    int P = c->devices, v = c->chunks, group = P * v;
    int chunk = (k % group) / P;
    if (bwd) chunk = v - 1 - chunk;
    return (pipe_op){bwd, (k / group) * P + k % P, chunk * P + d};
}

int pipe_order(const pipe_cfg *c, int d, pipe_op *ops)
{
    int P = c->devices, m = c->micro, n = 0;
    if (c->kind == PIPE_GPIPE) {
        for (int mb = 0; mb < m; mb++) ops[n++] = (pipe_op){false, mb, d};
        for (int mb = 0; mb < m; mb++) ops[n++] = (pipe_op){true, mb, d};
        return n;
    }
    int total = c->kind == PIPE_1F1B ? m : m * c->chunks; /* forwards (and backwards) of the device */
    int warm = c->kind == PIPE_1F1B ? P - d - 1 : (P - d - 1) * 2 + (c->chunks - 1) * P;
    if (warm > total) warm = total;
    for (int k = 0; k < warm; k++) ops[n++] = nth(c, d, k, false);     /* warm-up */
    for (int k = 0; k < total - warm; k++)                           /* one forward, one backward */
        ops[n++] = nth(c, d, warm + k, false), ops[n++] = nth(c, d, k, true);
    for (int k = total - warm; k < total; k++) ops[n++] = nth(c, d, k, true); /* cool-down */
    return n;
}

int pipe_in_flight(const pipe_cfg *c, int d, const int64_t *stash, const int64_t *working, int64_t *peak_bytes)
{
    int S = pipe_stages(c), n_ops = 2 * c->micro * (S / c->devices);
    pipe_op *ops = calloc((size_t)n_ops + 1, sizeof *ops);
    int *count = calloc((size_t)S + 1, sizeof *count);
    if (!ops || !count) abort();
    pipe_order(c, d, ops);
    int total = 0, peak = 0;
    int64_t most = 0;
    for (int i = 0; i < n_ops; i++) {
        const pipe_op *o = &ops[i];
        if (!o->bwd) count[o->stage]++, total++; /* its forward keeps what its backward reads */
        if (total > peak) peak = total;
        if (stash) {
            int64_t bytes = working ? working[o->stage] : 0;
            for (int s = 0; s < S; s++) bytes += count[s] * stash[s];
            if (bytes > most) most = bytes;
        }
        if (o->bwd) count[o->stage]--, total--; /* freed when its backward ends */
    }
    if (peak_bytes) *peak_bytes = most;
    free(ops), free(count);
    return peak;
}

double pipe_makespan(const pipe_cfg *c, const double *fwd_us, const double *bwd_us, const double *link_us, const double *tail_us,
                     double *busy)
{
    int P = c->devices, m = c->micro, S = pipe_stages(c), n_ops = 2 * m * (S / P);
    pipe_op *ops = calloc((size_t)P * (size_t)n_ops + 1, sizeof *ops);
    int *next = calloc((size_t)P + 1, sizeof *next);
    double *t = calloc((size_t)P + 1, sizeof *t), *f_end = malloc(sizeof(double) * (size_t)m * (size_t)S + 1),
           *b_end = malloc(sizeof(double) * (size_t)m * (size_t)S + 1);
    if (!ops || !next || !t || !f_end || !b_end) abort();
    for (int i = 0; i < m * S; i++) f_end[i] = b_end[i] = NAN;
    for (int d = 0; d < P; d++) pipe_order(c, d, ops + (size_t)d * (size_t)n_ops);
    double work = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (int d = 0; d < P; d++)
            for (; next[d] < n_ops; next[d]++) {
                const pipe_op *o = &ops[(size_t)d * (size_t)n_ops + (size_t)next[d]];
                int s = o->stage, at = o->mb * S + s;
                /* when its input is on this device (NAN: not computed yet); a backward's own forward ran
                 * earlier on this device, so the device's clock covers it */
                double ready = !o->bwd ? (s == 0 ? 0 : f_end[at - 1] + link_us[s - 1])
                               : s == S - 1 ? f_end[at] : b_end[at + 1] + link_us[s];
                if (isnan(ready)) break;
                double us = o->bwd ? bwd_us[s] : fwd_us[s], start = fmax(t[d], ready);
                t[d] = start + us, work += us, moved = true;
                (o->bwd ? b_end : f_end)[at] = t[d];
            }
    }
    double end = 0;
    bool done = true;
    for (int d = 0; d < P; d++) {
        double tail = tail_us ? tail_us[d] : 0; /* after its last backward: the optimizer's step */
        end = fmax(end, t[d] + tail), work += tail, done &= next[d] == n_ops;
    }
    if (busy) *busy = end > 0 ? work / (P * end) : 1;
    free(ops), free(next), free(t), free(f_end), free(b_end);
    return done ? end : -1;
}

/* Which buffers are on the device after each step: allocated or fetched back, not yet freed or moved
 * to the host. Calls visit(ctx, i, on) before step i takes effect. */
static void walk_on(const sched *s, bool *on, void (*visit)(void *, int, const bool *), void *ctx)
{
    memset(on, 0, (size_t)s->n_buf * sizeof *on);
    for (int i = 0; i < s->n_step; i++) {
        visit(ctx, i, on);
        const sched_step *t = &s->steps[i];
        if (t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH) on[t->buf] = true;
        if (t->op == SCHED_FREE || t->op == SCHED_OFFLOAD) on[t->buf] = false;
    }
}

typedef struct {
    const sched *s;
    const int *stage;      /* [n]: the stage of each layer */
    const bool *read_by;   /* [n_buf * S]: a backward step of stage k uses buffer b */
    int S, turn;
    pipe_stage *out;
} costs_ctx;

static bool counts(const sched_buf *b) { return !b->persistent && b->cat != MEM_HOST; }

/* At the turn: every buffer on the device goes to the stages whose backward reads it, or its layer's. */
static void at_turn(void *ctx, int i, const bool *on)
{
    costs_ctx *c = ctx;
    if (i != c->turn) return;
    for (int b = 0; b < c->s->n_buf; b++) {
        const sched_buf *bf = &c->s->bufs[b];
        if (!on[b] || !counts(bf)) continue;
        bool any = false;
        for (int k = 0; k < c->S; k++)
            if (c->read_by[(size_t)b * (size_t)c->S + (size_t)k]) c->out[k].stash += bf->bytes, any = true;
        if (!any) c->out[bf->layer >= 0 ? c->stage[bf->layer] : 0].stash += bf->bytes;
    }
}

/* At each step of a stage: the bytes on the device it owns or its backward uses, less its stash. */
static void at_step(void *ctx, int i, const bool *on)
{
    costs_ctx *c = ctx;
    const sched_step *t = &c->s->steps[i];
    if (t->layer < 0) return;
    int k = c->stage[t->layer];
    int64_t held = 0;
    for (int b = 0; b < c->s->n_buf; b++) {
        const sched_buf *bf = &c->s->bufs[b];
        if (on[b] && counts(bf) && ((bf->layer >= 0 && c->stage[bf->layer] == k) || c->read_by[(size_t)b * (size_t)c->S + (size_t)k]))
            held += bf->bytes;
    }
    if (held - c->out[k].stash > c->out[k].working) c->out[k].working = held - c->out[k].stash;
}

int pipe_stage_costs(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const int *first, int S,
                     pipe_stage *out, err *e)
{
    sched s;
    if (pipeline_lower(&s, n, p, cfg, e)) return -1;
    int *stage = calloc((size_t)n->n + 1, sizeof *stage);
    bool *read_by = calloc((size_t)s.n_buf * (size_t)S + 1, sizeof *read_by), *on = calloc((size_t)s.n_buf + 1, sizeof *on);
    if (!stage || !read_by || !on) abort();
    int64_t params = 0, *own = calloc((size_t)S + 1, sizeof *own);
    if (!own) abort();
    for (int k = 0; k < S; k++) {
        out[k] = (pipe_stage){.first = first[k], .last = first[k + 1] - 1};
        for (int L = first[k]; L < first[k + 1]; L++) stage[L] = k, own[k] += n->layers[L].params, params += n->layers[L].params;
    }
    costs_ctx c = {&s, stage, read_by, S, s.n_step, out};
    for (int i = s.n_step - 1; i >= 0; i--)
        if (s.steps[i].bwd_phase) c.turn = i; /* the first step of the backward pass */
    int uses[SCHED_MAX_USES];
    for (int i = 0; i < s.n_step; i++) {
        const sched_step *t = &s.steps[i];
        timing_how how;
        double us = sim_step_us(n, &s, i, d, &how);
        if (t->layer < 0) { /* the batch's arrival (stage 0), the optimizer's step over every layer (by parameters) */
            for (int k = 0; k < S; k++)
                out[k].update_us += t->op == SCHED_UPDATE ? (params ? us * (double)own[k] / (double)params : us / S) : k == 0 ? us : 0;
            continue;
        }
        int k = stage[t->layer];
        if (t->op == SCHED_UPDATE) out[k].update_us += us;
        else if (t->bwd_phase) out[k].bwd_us += us;
        else out[k].fwd_us += us;
        if (t->op == SCHED_BWD)
            for (int u = 0, nu = sched_step_uses(t, uses); u < nu; u++) read_by[(size_t)uses[u] * (size_t)S + (size_t)k] = true;
    }
    for (int b = 0; b < s.n_buf; b++) {
        const sched_buf *bf = &s.bufs[b];
        if (bf->persistent && bf->kind != BUF_INPUT && bf->kind != BUF_LABEL && !bf->host_home)
            out[bf->layer >= 0 ? stage[bf->layer] : 0].persistent += bf->bytes;
    }
    walk_on(&s, on, at_turn, &c);
    walk_on(&s, on, at_step, &c);
    for (int k = 0; k < S; k++) out[k].boundary = cfg->batch * net_layer_values(&n->layers[out[k].last]) * 4;
    free(stage), free(read_by), free(on), free(own);
    sched_free(&s);
    return 0;
}

int pipe_balanced_cuts(const net *n, const sched_cfg *cfg, const sim_device *d, int S, int *first, err *e)
{
    plan p;
    sched s;
    if (plan_parse(&p, n, "layer", e)) return -1;
    int rc = pipeline_lower(&s, n, &p, cfg, e);
    plan_free(&p);
    if (rc) return -1;
    double *us = calloc((size_t)n->n + 1, sizeof *us), total = 0;
    if (!us) abort();
    for (int i = 0; i < s.n_step; i++) {
        timing_how how;
        if (s.steps[i].layer >= 0) {
            double t = sim_step_us(n, &s, i, d, &how);
            us[s.steps[i].layer] += t, total += t;
        }
    }
    sched_free(&s);
    /* the clean cuts and the forward time before each; boundary k goes to the cut whose time is
     * nearest k/S of the total, after boundary k-1's and leaving a cut for each boundary after it */
    int *cut = calloc((size_t)n->n + 1, sizeof *cut), nc = 0;
    double *before = calloc((size_t)n->n + 1, sizeof *before), sum = 0;
    if (!cut || !before) abort();
    for (int L = 1; L < n->n; L++) {
        if (L >= 2 && n->layers[L].cut_before) before[nc] = sum, cut[nc++] = L;
        sum += us[L];
    }
    free(us);
    if (nc < S - 1) {
        free(cut), free(before);
        return err_set(e, "pipeline: %s has %d clean cuts, too few for %d stages", n->name, nc, S);
    }
    first[0] = 1, first[S] = n->n;
    for (int k = 1, lo = 0; k < S; k++) {
        int best = lo, hi = nc - (S - 1 - k) - 1;
        for (int j = lo; j <= hi; j++)
            if (fabs(before[j] - total * k / S) < fabs(before[best] - total * k / S)) best = j;
        first[k] = cut[best], lo = best + 1;
    }
    free(cut), free(before);
    return 0;
}
