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
    const int *r = pn->rd + pn->rd0[b];
    int n = pn->rd0[b + 1] - pn->rd0[b], L = pn->s.bufs[b].layer;
    if ((L >= a && L < z) || (n && lower_bound(r, n, a) < n && r[lower_bound(r, n, a)] < z)) return true;
    return false;
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
    bool *on = calloc(nb, sizeof(bool));
    if (!pn->fwd || !pn->bwd || !pn->upd || !pn->persistent || !pn->rd0 || !pn->at_turn || !pn->on0 || !on) abort();
    int64_t params = 0;
    for (int L = 0; L < n->n; L++) params += n->layers[L].params;
    int turn = s->n_step, uses[SCHED_MAX_USES];
    for (int i = s->n_step - 1; i >= 0; i--)
        if (s->steps[i].bwd_phase) turn = i; /* the first step of the backward pass */
    /* times by layer; the batch's arrival on the first stage, the optimizer's step over every layer by parameters */
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        timing_how how;
        double us = sim_step_us(n, s, i, d, &how);
        if (t->layer < 0) {
            for (int L = 1; L < n->n; L++)
                pn->upd[L] += t->op == SCHED_UPDATE ? (params ? us * (double)n->layers[L].params / (double)params : L == 1 ? us : 0) : L == 1 ? us : 0;
            continue;
        }
        int L = t->layer > 0 ? t->layer : 1;
        if (t->op == SCHED_UPDATE) pn->upd[L] += us;
        else if (t->bwd_phase) pn->bwd[L] += us;
        else pn->fwd[L] += us;
        if (t->op == SCHED_BWD) pn->rd0[0] += sched_step_uses(t, uses); /* an upper bound of the readers, to size rd */
    }
    for (int b = 0; b < s->n_buf; b++) {
        const sched_buf *bf = &s->bufs[b];
        if (bf->persistent && bf->kind != BUF_INPUT && bf->kind != BUF_LABEL && !bf->host_home)
            pn->persistent[bf->layer > 0 ? bf->layer : 1] += bf->bytes;
    }
    /* the readers of each buffer: the layers whose backward steps use it, sorted, once each */
    int cap = pn->rd0[0] + 1, *pairs = calloc((size_t)cap * 2 + 2, sizeof(int)), np = 0;
    pn->rd = calloc((size_t)cap + 1, sizeof(int));
    if (!pairs || !pn->rd) abort();
    for (int i = 0; i < s->n_step; i++)
        if (s->steps[i].op == SCHED_BWD && s->steps[i].layer >= 0)
            for (int u = 0, nu = sched_step_uses(&s->steps[i], uses); u < nu; u++) pairs[2 * np] = uses[u], pairs[2 * np + 1] = s->steps[i].layer, np++;
    memset(pn->rd0, 0, (nb + 1) * sizeof(int));
    for (int k = 0; k < np; k++) pn->rd0[pairs[2 * k] + 1]++;
    for (int b = 0; b < s->n_buf; b++) pn->rd0[b + 1] += pn->rd0[b];
    int *fill = calloc(nb, sizeof(int));
    if (!fill) abort();
    for (int k = 0; k < np; k++) {
        int b = pairs[2 * k];
        pn->rd[pn->rd0[b] + fill[b]++] = pairs[2 * k + 1];
    }
    for (int b = 0; b < s->n_buf; b++) { /* sort and drop repeats, in place */
        int *r = pn->rd + pn->rd0[b], m = fill[b], w = 0;
        for (int i = 1; i < m; i++)
            for (int j = i; j > 0 && r[j - 1] > r[j]; j--) { int x = r[j]; r[j] = r[j - 1], r[j - 1] = x; }
        for (int i = 0; i < m; i++)
            if (!w || r[w - 1] != r[i]) r[w++] = r[i];
        for (int i = w; i < m; i++) r[i] = INT32_MAX; /* repeats: past every layer */
    }
    free(pairs), free(fill);
    /* which counted buffers are on the device before each step (allocated or fetched back, not yet
     * freed or moved to the host), and at the turn */
    int total = 0;
    for (int pass = 0; pass < 2; pass++) {
        memset(on, 0, nb * sizeof(bool));
        for (int i = 0; i < s->n_step; i++) {
            if (pass) pn->on0[i] = total;
            for (int b = 0; b < s->n_buf; b++) /* the live list: scanned only where the step is a layer's */
                if (on[b] && s->steps[i].layer >= 0) {
                    if (pass) pn->on[total] = b;
                    total++;
                }
            if (pass && i == turn)
                for (int b = 0; b < s->n_buf; b++) pn->at_turn[b] = on[b];
            const sched_step *t = &s->steps[i];
            if (t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH) on[t->buf] = counts(&s->bufs[t->buf]);
            if (t->op == SCHED_FREE || t->op == SCHED_OFFLOAD) on[t->buf] = false;
        }
        if (!pass) {
            pn->on = calloc((size_t)total + 1, sizeof(int));
            if (!pn->on) abort();
            total = 0;
        } else {
            pn->on0[s->n_step] = total;
        }
    }
    free(on);
    return 0;
}

void pipe_net_free(pipe_net *pn)
{
    sched_free(&pn->s);
    free(pn->fwd), free(pn->bwd), free(pn->upd), free(pn->persistent), free(pn->rd0), free(pn->rd), free(pn->at_turn), free(pn->on0),
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
