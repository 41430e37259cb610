/* pipe: see pipe.h. */
#include "sim/predict/pipe.h"
#include "sim/lower/pipeline.h"

#include <math.h>
#include <stdint.h>
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

static bool counts(const sched_buf *b) { return !b->persistent && b->cat != MEM_HOST; }

/* The lowest of the sorted layers v[0..n) at or above a. */
static int lower_bound(const int *v, int n, int a)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v[mid] < a) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Buffer b belongs to layers [a, z): a backward step of one of them uses it, or its own layer is one. */
static bool belongs(const pipe_net *pn, int b, int a, int z)
{
    int by = pn->decoded[b], m = by >= 0 ? by : b; /* a codec's buffer (an encoded copy, a decoded map): the stages that read map m */
    const int *r = pn->rd + pn->rd0[m];
    int n = pn->rd0[m + 1] - pn->rd0[m], L = pn->s.bufs[b].layer, k = lower_bound(r, n, a);
    return (by < 0 && L >= a && L < z) || (k < n && r[k] < z);
}

/* Each layer's times on device d (its forward steps, its backward's with recomputation and moves,
 * its updates); the batch's arrival goes to layer 1, the optimizer's step over every layer by
 * parameters. */
static void times_by_layer(pipe_net *pn, const sim_device *d)
{
    const net *n = pn->n;
    const sched *s = &pn->s;
    int64_t params = 0;
    for (int L = 0; L < n->n; L++) params += n->layers[L].params;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        timing_how how;
        double us = sim_step_us(n, s, i, d, &how);
        if (t->layer < 0 && t->op == SCHED_UPDATE && params) {
            for (int L = 1; L < n->n; L++) pn->upd[L] += us * (double)n->layers[L].params / (double)params;
            continue;
        }
        int L = t->layer > 0 ? t->layer : 1;
        if (t->layer < 0 || t->op == SCHED_UPDATE) pn->upd[L] += us;
        else if (t->bwd_phase) pn->bwd[L] += us;
        else pn->fwd[L] += us;
    }
}

static int by_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

/* The readers of each buffer: the layers whose backward steps use it, sorted, once each (rd0, rd). */
static void readers(pipe_net *pn)
{
    const sched *s = &pn->s;
    int uses[SCHED_MAX_USES], *count = calloc((size_t)s->n_buf + 1, sizeof *count), total = 0;
    if (!count) abort();
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        for (int i = 0; i < s->n_step; i++) {
            const sched_step *t = &s->steps[i];
            if (t->op != SCHED_BWD || t->layer < 0) continue;
            for (int u = 0, nu = sched_step_uses(t, uses); u < nu; u++)
                if (pass) pn->rd[pn->rd0[uses[u]] + count[uses[u]]++] = t->layer;
                else count[uses[u]]++, total++;
        }
        if (pass) break;
        pn->rd = calloc((size_t)total + 1, sizeof *pn->rd);
        if (!pn->rd) abort();
        for (int b = 0; b < s->n_buf; b++) pn->rd0[b + 1] = pn->rd0[b] + count[b], count[b] = 0;
    }
    int w = 0; /* sorted, repeats dropped, compacted */
    for (int b = 0; b < s->n_buf; b++) {
        int *r = pn->rd + pn->rd0[b], m = pn->rd0[b + 1] - pn->rd0[b], start = w;
        qsort(r, (size_t)m, sizeof *r, by_int);
        for (int i = 0; i < m; i++)
            if (w == start || pn->rd[w - 1] != r[i]) pn->rd[w++] = r[i];
        pn->rd0[b] = start;
    }
    pn->rd0[s->n_buf] = w;
    free(count);
}

/* Which counted buffers are on the device (allocated or fetched back, not yet freed or moved to the
 * host) before each layer's step (on0, on), and when the backward pass begins (at_turn). */
static void on_device(pipe_net *pn)
{
    const sched *s = &pn->s;
    bool *on = calloc((size_t)s->n_buf + 1, sizeof *on);
    if (!on) abort();
    int turn = s->n_step, total = 0;
    for (int i = s->n_step - 1; i >= 0; i--)
        if (s->steps[i].bwd_phase) turn = i;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        memset(on, 0, (size_t)s->n_buf * sizeof *on);
        total = 0;
        for (int i = 0; i < s->n_step; i++) {
            const sched_step *t = &s->steps[i];
            if (pass) pn->on0[i] = total;
            for (int b = 0; t->layer >= 0 && b < s->n_buf; b++)
                if (on[b]) {
                    if (pass) pn->on[total] = b;
                    total++;
                }
            if (pass && i == turn) memcpy(pn->at_turn, on, (size_t)s->n_buf * sizeof *on);
            if (t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH) on[t->buf] = counts(&s->bufs[t->buf]);
            if (t->op == SCHED_FREE || t->op == SCHED_OFFLOAD) on[t->buf] = false;
        }
        if (!pass && !(pn->on = calloc((size_t)total + 1, sizeof *pn->on))) abort();
    }
    pn->on0[s->n_step] = total;
    free(on);
}

int pipe_net_init(pipe_net *pn, const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, err *e)
{
    memset(pn, 0, sizeof *pn);
    pn->n = n, pn->batch = cfg->batch;
    if (pipeline_lower(&pn->s, n, p, cfg, e)) return -1;
    const sched *s = &pn->s;
    size_t nl = (size_t)n->n + 1, nb = (size_t)s->n_buf + 1;
    pn->fwd = calloc(nl, sizeof(double)), pn->bwd = calloc(nl, sizeof(double)), pn->upd = calloc(nl, sizeof(double));
    pn->persistent = calloc(nl, sizeof(int64_t)), pn->rd0 = calloc(nb + 1, sizeof(int)), pn->at_turn = calloc(nb, sizeof(bool));
    pn->on0 = calloc((size_t)s->n_step + 2, sizeof(int));
    if (!pn->fwd || !pn->bwd || !pn->upd || !pn->persistent || !pn->rd0 || !pn->at_turn || !pn->on0) abort();
    times_by_layer(pn, d);
    for (int b = 0; b < s->n_buf; b++) { /* parameters, gradients, optimizer state and statistics kept on the device */
        const sched_buf *bf = &s->bufs[b];
        if (bf->persistent && bf->kind != BUF_INPUT && bf->kind != BUF_LABEL && !bf->host_home)
            pn->persistent[bf->layer > 0 ? bf->layer : 1] += bf->bytes;
    }
    pn->decoded = malloc(sizeof(int) * nb);
    if (!pn->decoded) abort();
    for (size_t b = 0; b < nb; b++) pn->decoded[b] = -1;
    for (int i = 0; i < s->n_step; i++) /* each device that reads a decoded map encodes and decodes its own copy */
        if (s->steps[i].op == SCHED_DECODE) pn->decoded[s->steps[i].src] = pn->decoded[s->steps[i].dst] = s->steps[i].dst;
    readers(pn);
    on_device(pn);
    return 0;
}

void pipe_net_free(pipe_net *pn)
{
    sched_free(&pn->s);
    free(pn->fwd), free(pn->bwd), free(pn->upd), free(pn->persistent), free(pn->rd0), free(pn->rd), free(pn->at_turn), free(pn->on0), free(pn->decoded),
        free(pn->on);
    memset(pn, 0, sizeof *pn);
}

void pipe_range(const pipe_net *pn, int a, int z, pipe_stage *out)
{
    const sched *s = &pn->s;
    *out = (pipe_stage){.first = a, .last = z - 1};
    for (int L = a; L < z; L++)
        out->fwd_us += pn->fwd[L], out->bwd_us += pn->bwd[L], out->update_us += pn->upd[L], out->persistent += pn->persistent[L];
    for (int b = 0; b < s->n_buf; b++)
        if (pn->at_turn[b] && belongs(pn, b, a, z)) out->stash += s->bufs[b].bytes;
    for (int i = 0; i < s->n_step; i++) {
        int L = s->steps[i].layer;
        if (L < a || L >= z) continue;
        int64_t held = 0;
        for (int k = pn->on0[i]; k < pn->on0[i + 1]; k++)
            if (belongs(pn, pn->on[k], a, z)) held += s->bufs[pn->on[k]].bytes;
        int uses[SCHED_MAX_USES], nu = sched_step_uses(&s->steps[i], uses);
        for (int u = 0; u < nu; u++) { /* another stage's tensor this step reads (a forward's received input): held while read */
            bool again = false;
            for (int v = 0; v < u; v++) again |= uses[v] == uses[u];
            if (!again && counts(&s->bufs[uses[u]]) && !belongs(pn, uses[u], a, z)) held += s->bufs[uses[u]].bytes;
        }
        if (held - out->stash > out->working) out->working = held - out->stash;
    }
    out->boundary = pn->batch * net_layer_values(&pn->n->layers[z - 1]) * 4;
}

int pipe_stage_costs(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const int *first, int S,
                     pipe_stage *out, err *e)
{
    pipe_net pn;
    if (pipe_net_init(&pn, n, p, cfg, d, e)) return -1;
    for (int k = 0; k < S; k++) pipe_range(&pn, first[k], first[k + 1], &out[k]);
    pipe_net_free(&pn);
    return 0;
}

int64_t pipe_device_peak(const pipe_cfg *c, int d, const pipe_stage *st)
{
    int S = pipe_stages(c);
    int64_t *stash = calloc((size_t)S + 1, sizeof *stash), *working = calloc((size_t)S + 1, sizeof *working), peak = 0, bytes;
    if (!stash || !working) abort();
    for (int s = 0; s < S; s++) stash[s] = st[s].stash, working[s] = st[s].working;
    pipe_in_flight(c, d, stash, working, &bytes);
    for (int s = d; s < S; s += c->devices) peak += st[s].persistent; /* its stages' state */
    free(stash), free(working);
    return peak + bytes;
}

bool pipe_cut_ok(const net *n, const plan *p, int L)
{
    if (L < 2 || L >= n->n || !n->layers[L].cut_before) return false;
    for (int i = 0; p && i < p->n_seg; i++)
        if ((p->segs[i].mode == PLAN_ROWS || p->segs[i].mode == PLAN_CKPT) && p->segs[i].first < L && L <= p->segs[i].last) return false;
    return true;
}

int pipe_balanced_cuts(const net *n, const plan *within, const sched_cfg *cfg, const sim_device *d, int S, int *first, err *e)
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
        if (pipe_cut_ok(n, within, L)) before[nc] = sum, cut[nc++] = L;
        sum += us[L];
    }
    free(us);
    if (nc < S - 1) {
        free(cut), free(before);
        return err_set(e, "pipeline: %s has %d clean cuts%s, too few for %d stages", n->name, nc, within ? " outside the plan's segments" : "", S);
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
