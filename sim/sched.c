/* sched: lowering of plans to steps (see sched.h for the buffer and accumulation conventions).
 *
 * One lowering context walks the plan's segments forward, then backward in reverse. Each mode is
 * a small function that emits FWD/BWD/COPY steps on the context's "current buffer" maps (which
 * buffer holds layer L's output and its gradient right now). Offload steps and ALLOC/FREE are
 * derived afterwards from the finished step list, so no mode decides lifetimes by hand. */
#include "sim/sched.h"

#include <string.h>

#include "sim/kind.h"

static const char *cat_names[MEM_NCAT] = {"weights", "weight_grads", "optimizer", "activations",
                                          "act_grads", "boundaries", "workspace", "host"};
const char *mem_cat_name(mem_cat c) { return cat_names[c]; }

static const char *op_names[] = {"alloc", "free", "fwd", "bwd", "copy", "offload", "prefetch", "update", "load"};
const char *sched_op_name(sched_op op) { return op_names[op]; }

static const char *kind_tags[BUF_NKIND] = {"x", "label", "y", "dy", "argmax", "stats", "prob", "boundary",
                                           "dboundary", "ws", "w", "dw", "opt", "running"};

int sched_cpu_conv_group(int64_t cols, int batch)
{
    int64_t g = (128 + cols - 1) / cols;
    return g > batch ? batch : g < 1 ? 1 : (int)g;
}

int64_t sched_workspace_bytes(const net *n, int L, int rows, int batch)
{
    const net_layer *l = &n->layers[L];
    if (l->kind != NET_CONV || rows <= 0) return 0;
    net_window w = l->win;
    int64_t cols = (int64_t)rows * l->w, K = (int64_t)n->layers[l->in[0]].c * w.k * w.k;
    int g = sched_cpu_conv_group(cols, batch);
    if (g == 1 && w.k == 1 && w.s == 1 && w.p == 0) return 0; /* conv_cpu.c: a direct product */
    return (K + (g > 1 ? l->u.conv.c_out : 0)) * g * cols * 4;
}

int64_t sched_cfg_workspace(const sched_cfg *cfg, const net *n, int L, int rows, bool backward)
{
    if (rows <= 0) return 0;
    if (cfg->ws) return cfg->ws->bytes(cfg->ws, n, L, rows, cfg->batch, backward);
    return sched_workspace_bytes(n, L, rows, cfg->batch);
}

typedef struct {
    sched *s;
    const net *n;
    const plan *p;
    const sched_cfg *cfg;
    int cap_buf, cap_step;
    int seg;            /* segment being lowered */
    int *act, *aux;     /* [layer] buffer holding the output / its auxiliary now, -1 none */
    int *grad;          /* [layer] buffer holding the output's gradient now */
    int *param, *pgrad, *opt, *run;
    int label;
    bool bwd_phase;
} lower;

static int64_t act_bytes(const lower *c, int L, band_rows r, int elem)
{
    const net_layer *l = &c->n->layers[L];
    return (int64_t)c->cfg->batch * l->c * band_rows_len(r) * l->w * elem;
}

static int buf_new(lower *c, buf_kind k, mem_cat cat, int L, int band, band_rows r, int64_t bytes)
{
    sched *s = c->s;
    if (s->n_buf == c->cap_buf) s->bufs = err_realloc(s->bufs, (size_t)(c->cap_buf = c->cap_buf * 2 + 64) * sizeof(sched_buf));
    s->bufs[s->n_buf] = (sched_buf){.kind = k, .cat = cat, .layer = L, .band = band, .rows = r, .bytes = bytes};
    return s->n_buf++;
}

static sched_step *step_new(lower *c, sched_op op, int L, int band)
{
    sched *s = c->s;
    if (s->n_step == c->cap_step) s->steps = err_realloc(s->steps, (size_t)(c->cap_step = c->cap_step * 2 + 256) * sizeof(sched_step));
    sched_step *t = &s->steps[s->n_step++];
    memset(t, 0, sizeof *t);
    t->op = op, t->layer = L, t->band = band, t->seg = c->seg;
    t->y = t->aux = t->w = t->dw = t->ws = t->dy = t->src = t->dst = t->buf = -1;
    for (int j = 0; j < NET_MAX_IN; j++) t->x[j] = t->dx[j] = -1;
    return t;
}

static band_rows full(const net *n, int L) { return (band_rows){0, n->layers[L].h}; }

static double fwd_flops(const lower *c, int L, band_rows r)
{
    return kind_table[c->n->layers[L].kind].flops(c->n, L, band_rows_len(r), c->cfg->batch);
}

/* FWD of layer L, band `band`, computing rows r into y (-1: a new buffer holding rows `hold`).
 * keep_aux: the auxiliary (argmax) is kept for a later BWD. */
static int emit_fwd(lower *c, int L, int band, band_rows r, band_rows hold, int y, bool keep_aux)
{
    const net *n = c->n;
    const net_layer *l = &n->layers[L];
    sched_step *t = step_new(c, SCHED_FWD, L, band);
    int sidx = (int)(t - c->s->steps);
    t->rows = r;
    t->recompute = c->bwd_phase;
    for (int j = 0; j < l->n_in; j++) t->x[j] = c->act[l->in[j]];
    int64_t ws = sched_cfg_workspace(c->cfg, n, L, band_rows_len(r), false);
    int w_buf = c->param[L];
    /* buffers are created after the step pointer is final (buf_new may not move steps) */
    if (y < 0) {
        if (l->inplace && c->s->bufs[t->x[0]].rows.a <= hold.a && c->s->bufs[t->x[0]].rows.b >= hold.b)
            y = t->x[0];
        else
            y = buf_new(c, BUF_ACT, MEM_ACT, L, band, hold, act_bytes(c, L, hold, 4));
    }
    t = &c->s->steps[sidx];
    t->y = y;
    t->w = w_buf;
    const kind_traits *k = kind_of(l);
    if (k->aux && (keep_aux || !k->aux_optional)) {
        static const buf_kind aux_kind[] = {[KIND_AUX_ARGMAX] = BUF_IDX, [KIND_AUX_STATS] = BUF_STAT, [KIND_AUX_PROBS] = BUF_PROB};
        band_rows ar = k->aux == KIND_AUX_STATS ? (band_rows){0, 0} : r;
        t->aux = buf_new(c, aux_kind[k->aux], MEM_ACT, L, band, ar, kind_aux_bytes(n, L, band_rows_len(r), c->cfg->batch));
    }
    if (k->labels) t->x[1] = c->label;
    if (ws) t->ws = buf_new(c, BUF_WS, MEM_WORKSPACE, L, band, r, ws);
    if (k->running) t->dw = c->run[L]; /* running statistics are updated (train) or read */
    t->flops = fwd_flops(c, L, r);
    t->bytes_moved = (double)act_bytes(c, L, r, 4) * 2;
    c->act[L] = y;
    c->aux[L] = t->aux;
    return y;
}

/* Gradient buffer for layer P's output in the current context, created on first use. */
static int grad_buf(lower *c, int P, int band, band_rows hold, bool zero)
{
    if (c->grad[P] >= 0) return c->grad[P];
    bool whole = hold.a == 0 && hold.b == c->n->layers[P].h;
    int b = buf_new(c, BUF_GRAD, MEM_AGRAD, P, whole ? -1 : band, hold, act_bytes(c, P, hold, 4));
    c->s->bufs[b].zero = zero;
    return c->grad[P] = b;
}

/* BWD of layer L on output-gradient rows r. hold_of(P) gives the rows a new gradient buffer of
 * producer P must hold (full maps outside row segments, the band's held rows inside). */
typedef band_rows (*hold_fn)(const void *ctx, int P);

static bool same_rows(band_rows x, band_rows y) { return x.a == y.a && x.b == y.b; }

static void emit_bwd(lower *c, int L, int band, band_rows r, hold_fn hold_of, const void *hctx, bool zero)
{
    const net *n = c->n;
    const net_layer *l = &n->layers[L];
    int dy = l->kind == NET_LOSS ? -1 : c->grad[L];
    CHECK(l->kind == NET_LOSS || dy >= 0);
    int dx[NET_MAX_IN] = {-1, -1};
    bool acc[NET_MAX_IN] = {false, false};
    for (int j = 0; j < l->n_in; j++) {
        int P = l->in[j];
        if (n->layers[P].kind == NET_INPUT || (j == 1 && P == l->in[0])) continue;
        if (c->grad[P] >= 0) {
            dx[j] = c->grad[P], acc[j] = true;
        } else if (l->inplace && same_rows(c->s->bufs[dy].rows, hold_of(hctx, P))) {
            dx[j] = c->grad[P] = dy; /* relu backward in place: its input has no other consumer */
        } else {
            dx[j] = grad_buf(c, P, band, hold_of(hctx, P), zero);
            acc[j] = zero;
        }
    }
    int64_t ws = sched_cfg_workspace(c->cfg, n, L, band_rows_len(r), true);
    int wsb = ws ? buf_new(c, BUF_WS, MEM_WORKSPACE, L, band, r, ws) : -1;
    sched_step *t = step_new(c, SCHED_BWD, L, band);
    t->rows = r;
    t->dy = dy;
    const kind_traits *k = kind_of(l);
    for (int j = 0; j < l->n_in; j++) {
        t->dx[j] = dx[j], t->dx_acc[j] = acc[j];
        if (k->keeps_x) t->x[j] = c->act[l->in[j]];
    }
    if (k->keeps_y) t->y = c->act[L];
    if (k->aux) t->aux = c->aux[L];
    if (k->labels) t->x[1] = c->label;
    t->w = c->param[L], t->dw = c->pgrad[L];
    t->ws = wsb;
    t->flops = fwd_flops(c, L, r) * (k->product && dx[0] >= 0 ? 2.0 : 1.0);
    t->bytes_moved = (double)act_bytes(c, L, r, 4) * 3;
}

static void emit_copy(lower *c, int L, int band, band_rows r, int src, int dst, bool acc)
{
    sched_step *t = step_new(c, SCHED_COPY, L, band);
    t->rows = r, t->src = src, t->dst = dst, t->acc = acc;
    t->bytes_moved = (double)act_bytes(c, L, r, 4) * 2;
}

static band_rows hold_full(const void *ctx, int P) { return full(((const lower *)ctx)->n, P); }

/* Which layers of [first, last] backward needs recomputed: those whose output (or argmax,
 * statistics) a backward step of the segment keeps, and those a needed layer reads. A layer whose
 * output only feeds the next segment (already back-propagated) is not recomputed. */
static void recompute_needed(const net *n, int first, int last, bool *need)
{
    for (int L = last; L >= first; L--) {
        const kind_traits *k = kind_of(&n->layers[L]);
        bool nd = k->keeps_y || k->aux_rebuilt;
        for (int c = L + 1; c <= last && !nd; c++)
            for (int j = 0; j < n->layers[c].n_in; j++)
                if (n->layers[c].in[j] == L && (need[c] || kind_of(&n->layers[c])->keeps_x)) nd = true;
        need[L] = nd;
    }
}

/* --- row segments ---------------------------------------------------------------------------- */

typedef struct {
    const lower *c;
    const band_seg *bs;
    const band_geom *g;
    int band;
} band_ctx;

/* Rows band r holds of layer P's output. A producer whose only consumer is an in-place relu
 * shares the relu's buffer, so it is sized for the whole chain of in-place relus on it (each may
 * hold 2PS boundary rows): band_buffer_rows. */
static band_rows band_hold(const band_seg *bs, const band_geom *g, const net *n, int r, int P)
{
    if (P == bs->src) return full(n, P);
    return band_buffer_rows(n, g, bs, r, P);
}

static band_rows hold_band(const void *ctx, int P)
{
    const band_ctx *b = ctx;
    return band_hold(b->bs, b->g, b->c->n, b->band, P);
}

/* Forward of one band. bound[L * R + r]: boundary buffers (2PS), created when `make_bounds`. */
static void band_forward(lower *c, const band_seg *bs, const band_geom *g, int r, int *bound, bool make_bounds,
                         int out_full, const bool *need)
{
    const net *n = c->n;
    int L0 = bs->first, R = g->n_bands;
    for (int L = bs->first; L <= bs->last; L++) {
        if (need && !need[L]) {
            c->act[L] = c->aux[L] = -1;
            continue;
        }
        band_rows out = g->out[r * g->n_layers + L - L0];
        band_rows hold = band_hold(bs, g, n, r, L);
        const net_layer *l = &n->layers[L];
        bool shared = l->inplace && c->act[l->in[0]] >= 0 && l->in[0] != bs->src; /* never the previous segment's output */
        int y = -1;
        if (L == bs->last && out_full >= 0) y = out_full;
        else if (shared) y = c->act[l->in[0]];
        else if (band_rows_len(hold)) y = buf_new(c, BUF_ACT, MEM_ACT, L, r, hold, act_bytes(c, L, hold, 4));
        if (g->policy == BAND_2PS && r > 0 && bound[L * R + r - 1] >= 0)
            emit_copy(c, L, r, c->s->bufs[bound[L * R + r - 1]].rows, bound[L * R + r - 1], y, false);
        if (band_rows_len(out)) emit_fwd(c, L, r, out, hold, y, c->bwd_phase);
        else c->act[L] = y, c->aux[L] = -1;
        band_rows keep = g->keep[r * g->n_layers + L - L0];
        if (make_bounds && g->policy == BAND_2PS && r + 1 < R && band_rows_len(keep)) {
            int b = buf_new(c, BUF_BOUND, MEM_BOUNDARY, L, r, keep, act_bytes(c, L, keep, 4));
            emit_copy(c, L, r, keep, y, b, false);
            bound[L * R + r] = b;
        }
    }
}

static void rows_forward(lower *c, const band_seg *bs, const band_geom *g, int *bound)
{
    int out = buf_new(c, BUF_ACT, MEM_ACT, bs->last, -1, full(c->n, bs->last), act_bytes(c, bs->last, full(c->n, bs->last), 4));
    int src = c->act[bs->src];
    for (int r = 0; r < g->n_bands; r++) {
        band_forward(c, bs, g, r, bound, true, out, NULL);
        c->act[bs->src] = src;
    }
    c->act[bs->last] = out;
}

static void rows_backward(lower *c, const band_seg *bs, const band_geom *g, int *bound)
{
    const net *n = c->n;
    int R = g->n_bands, L0 = bs->first;
    int src_act = c->act[bs->src], dout = c->grad[bs->last];
    int *bgrad = err_calloc((size_t)n->n * R, sizeof(int));
    memset(bgrad, -1, (size_t)n->n * R * sizeof(int));
    bool *need = err_calloc((size_t)n->n, sizeof(bool));
    recompute_needed(n, bs->first, bs->last, need);
    for (int r = R - 1; r >= 0; r--) {
        band_forward(c, bs, g, r, bound, false, -1, need);
        for (int L = L0; L <= bs->last; L++) c->grad[L] = -1;
        c->grad[bs->last] = dout;
        band_ctx hc = {c, bs, g, r};
        for (int L = bs->last; L >= L0; L--) {
            band_rows out = g->out[r * g->n_layers + L - L0];
            if (L < bs->last && r + 1 < R && bgrad[L * R + r] >= 0) {
                int dst = grad_buf(c, L, r, band_hold(bs, g, n, r, L), true);
                emit_copy(c, L, r, c->s->bufs[bgrad[L * R + r]].rows, bgrad[L * R + r], dst, true);
            }
            if (L < bs->last && g->policy == BAND_2PS && r > 0) {
                band_rows keep = g->keep[(r - 1) * g->n_layers + L - L0];
                if (band_rows_len(keep) && c->grad[L] >= 0) {
                    int b = buf_new(c, BUF_BGRAD, MEM_BOUNDARY, L, r, keep, act_bytes(c, L, keep, 4));
                    emit_copy(c, L, r, keep, c->grad[L], b, false);
                    bgrad[L * R + r - 1] = b;
                }
            }
            if (band_rows_len(out) && c->grad[L] >= 0) emit_bwd(c, L, r, out, hold_band, &hc, true);
        }
        c->act[bs->src] = src_act;
    }
    free(bgrad);
    free(need);
}

/* --- whole iteration -------------------------------------------------------------------------- */

static void persistent_buffers(lower *c)
{
    const net *n = c->n;
    int opt_mult = c->cfg->optimizer == SCHED_ADAM ? 2 : 1;
    for (int L = 0; L < n->n; L++) {
        const net_layer *l = &n->layers[L];
        if (l->params) {
            c->param[L] = buf_new(c, BUF_PARAM, MEM_WEIGHTS, L, -1, (band_rows){0, 0}, l->params * 4);
            c->pgrad[L] = buf_new(c, BUF_PGRAD, MEM_WGRAD, L, -1, (band_rows){0, 0}, l->params * 4);
            c->opt[L] = buf_new(c, BUF_OPT, MEM_OPTIM, L, -1, (band_rows){0, 0}, l->params * 4 * opt_mult);
        }
        if (kind_of(l)->running) c->run[L] = buf_new(c, BUF_RUNSTAT, MEM_WEIGHTS, L, -1, (band_rows){0, 0}, 2 * (int64_t)l->c * 4);
    }
    for (int b = 0; b < c->s->n_buf; b++) {
        c->s->bufs[b].persistent = true;
        c->s->bufs[b].zero = c->s->bufs[b].kind == BUF_PGRAD || c->s->bufs[b].kind == BUF_OPT;
    }
}

/* An OFFLOAD or PREFETCH of buffer b: every other buffer slot unused. */
static sched_step move_step(const sched *s, sched_op op, int b, int seg)
{
    return (sched_step){.op = op, .layer = s->bufs[b].layer, .band = -1, .seg = seg, .buf = b, .x = {-1, -1}, .y = -1, .aux = -1,
                        .w = -1, .dw = -1, .ws = -1, .dy = -1, .dx = {-1, -1}, .src = -1, .dst = -1,
                        .bytes_moved = (double)s->bufs[b].bytes};
}

/* Buckets buffers by step (counting sort): the buffers b with key[b] >= 0, in creation order within
 * a step; those of step i are list[start[i] .. start[i + 1]), start[ns] of them in all. */
typedef struct {
    int *start, *list;
} step_buckets;

static step_buckets bucket_by_step(const int *key, int nb, int ns)
{
    step_buckets k = {err_calloc((size_t)ns + 1, sizeof(int)), NULL};
    for (int b = 0; b < nb; b++)
        if (key[b] >= 0) k.start[key[b] + 1]++;
    for (int i = 0; i < ns; i++) k.start[i + 1] += k.start[i];
    int *next = err_calloc((size_t)ns + 1, sizeof(int));
    memcpy(next, k.start, ((size_t)ns + 1) * sizeof(int));
    k.list = err_calloc((size_t)k.start[ns] + 1, sizeof(int));
    for (int b = 0; b < nb; b++)
        if (key[b] >= 0) k.list[next[key[b]]++] = b;
    free(next);
    return k;
}

static void buckets_free(step_buckets *k)
{
    free(k->start), free(k->list);
}

/* Marks what offload segments move to the host, then inserts OFFLOAD after each such buffer's
 * last forward use and PREFETCH one backward step ahead of its first backward use (vDNN). */
static void place_offloads(lower *c)
{
    sched *s = c->s;
    int nb = s->n_buf, ns = s->n_step;
    int *first_bwd = err_calloc((size_t)nb, sizeof(int)), *last_fwd = err_calloc((size_t)nb, sizeof(int));
    for (int b = 0; b < nb; b++) first_bwd[b] = -1, last_fwd[b] = -1;
    for (int i = 0; i < ns; i++) {
        sched_step *t = &s->steps[i];
        int uses[8] = {t->x[0], t->x[1], t->y, t->aux, t->src, t->dst, -1, -1};
        for (int u = 0; u < 6; u++) {
            int b = uses[u];
            if (b < 0) continue;
            if (t->op == SCHED_BWD) {
                if (first_bwd[b] < 0) {
                    first_bwd[b] = i;
                    const plan_seg *ps = &c->p->segs[t->seg];
                    bool conv_in = c->n->layers[t->layer].kind == NET_CONV && (b == t->x[0]);
                    if (ps->mode == PLAN_OFFLOAD && s->bufs[b].cat == MEM_ACT && s->bufs[b].kind != BUF_LABEL &&
                        s->bufs[b].kind != BUF_PROB && (ps->offload == PLAN_OFFLOAD_ALL || conv_in))
                        s->bufs[b].offload = true;
                }
            } else if (first_bwd[b] < 0) {
                last_fwd[b] = i;
            }
        }
    }
    /* the step before which each moved buffer is prefetched; both moves bucketed by step */
    int *pf = err_calloc((size_t)nb, sizeof(int));
    for (int b = 0; b < nb; b++) {
        if (!s->bufs[b].offload || last_fwd[b] < 0) {
            s->bufs[b].offload = false, pf[b] = last_fwd[b] = -1;
            continue;
        }
        pf[b] = first_bwd[b];
        for (int i = first_bwd[b] - 1; i > last_fwd[b]; i--)
            if (s->steps[i].op == SCHED_BWD) { pf[b] = i; break; }
    }
    step_buckets pre = bucket_by_step(pf, nb, ns), off = bucket_by_step(last_fwd, nb, ns);
    int moved = pre.start[ns];
    if (moved) { /* rebuild the step list with the moves in place */
        int cap = ns + 2 * moved, out = 0;
        sched_step *steps = err_calloc((size_t)cap, sizeof(sched_step));
        for (int i = 0; i < ns; i++) {
            for (int k = pre.start[i]; k < pre.start[i + 1]; k++) steps[out++] = move_step(s, SCHED_PREFETCH, pre.list[k], s->steps[i].seg);
            steps[out++] = s->steps[i];
            for (int k = off.start[i]; k < off.start[i + 1]; k++) steps[out++] = move_step(s, SCHED_OFFLOAD, off.list[k], s->steps[i].seg);
        }
        CHECK(out == cap);
        free(s->steps);
        s->steps = steps, s->n_step = out, c->cap_step = cap;
    }
    buckets_free(&pre), buckets_free(&off);
    free(first_bwd), free(last_fwd), free(pf);
}

/* Liveness: ALLOC before first use, FREE after last use; persistent buffers around everything. */
static void place_allocs(sched *s)
{
    int nb = s->n_buf, ns = s->n_step;
    int *first = err_calloc((size_t)nb, sizeof(int)), *last = err_calloc((size_t)nb, sizeof(int));
    for (int b = 0; b < nb; b++) first[b] = -1, last[b] = -1;
    for (int i = 0; i < ns; i++) {
        sched_step *t = &s->steps[i];
        int uses[12] = {t->x[0], t->x[1], t->y, t->aux, t->w, t->dw, t->ws, t->dy, t->dx[0], t->dx[1], t->src, t->dst};
        for (int u = 0; u < 12; u++) {
            int b = uses[u];
            if (b < 0) continue;
            if (first[b] < 0) first[b] = i;
            last[b] = i;
        }
        if (t->buf >= 0) last[t->buf] = i > last[t->buf] ? i : last[t->buf];
    }
    /* ALLOCs bucketed by first use and FREEs by last use; persistent buffers are placed apart */
    int n_persist = 0;
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) first[b] = last[b] = -1, n_persist++;
    step_buckets al = bucket_by_step(first, nb, ns), fr = bucket_by_step(last, nb, ns);
    int n_temp = al.start[ns];
    int total = ns + 2 * n_temp + 2 * n_persist;
    sched_step *steps = err_calloc((size_t)total, sizeof(sched_step)), *o = steps;
#define MARK(opv, b) (*o++ = (sched_step){.op = (opv), .layer = s->bufs[b].layer, .band = s->bufs[b].band, .buf = (b), \
                                          .x = {-1, -1}, .y = -1, .aux = -1, .w = -1, .dw = -1, .ws = -1, .dy = -1,   \
                                          .dx = {-1, -1}, .src = -1, .dst = -1})
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_ALLOC, b);
    for (int i = 0; i < ns; i++) {
        for (int k = al.start[i]; k < al.start[i + 1]; k++) MARK(SCHED_ALLOC, al.list[k]);
        *o++ = s->steps[i];
        for (int k = fr.start[i]; k < fr.start[i + 1]; k++) MARK(SCHED_FREE, fr.list[k]);
    }
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_FREE, b);
#undef MARK
    CHECK(o - steps == total);
    free(s->steps);
    s->steps = steps, s->n_step = total;
    buckets_free(&al), buckets_free(&fr);
    free(first), free(last);
}

int sched_lower(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e)
{
    memset(s, 0, sizeof *s);
    if (cfg->batch < 1) return err_set(e, "batch must be at least 1 (got %d)", cfg->batch);
    s->batch = cfg->batch;
    lower c = {.s = s, .n = n, .p = p, .cfg = cfg};
    int **maps[] = {&c.act, &c.aux, &c.grad, &c.param, &c.pgrad, &c.opt, &c.run};
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
        *maps[m] = err_calloc((size_t)n->n, sizeof(int));
        memset(*maps[m], -1, (size_t)n->n * sizeof(int));
    }
    persistent_buffers(&c);
    int **bound = err_calloc((size_t)p->n_seg, sizeof(int *)); /* 2PS boundaries, [segment][layer * R + band] */
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) {
            bound[i] = err_calloc((size_t)n->n * p->segs[i].fp, sizeof(int));
            memset(bound[i], -1, (size_t)n->n * p->segs[i].fp * sizeof(int));
        }

    /* forward */
    c.act[0] = buf_new(&c, BUF_INPUT, MEM_ACT, 0, -1, full(n, 0), act_bytes(&c, 0, full(n, 0), 4));
    c.label = buf_new(&c, BUF_LABEL, MEM_ACT, n->n - 1, -1, (band_rows){0, 0}, (int64_t)cfg->batch * 8);
    {
        sched_step *t = step_new(&c, SCHED_LOAD, 0, -1); /* the batch arrives: image and labels */
        t->y = c.act[0], t->aux = c.label, t->rows = full(n, 0);
    }
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *ps = &p->segs[i];
        c.seg = i;
        if (ps->mode == PLAN_ROWS) {
            rows_forward(&c, &ps->band, ps->fwd, bound[i]);
            continue;
        }
        for (int L = ps->first; L <= ps->last; L++) emit_fwd(&c, L, -1, full(n, L), full(n, L), -1, ps->mode != PLAN_CKPT);
    }
    /* backward */
    c.bwd_phase = true;
    for (int i = p->n_seg - 1; i >= 0; i--) {
        const plan_seg *ps = &p->segs[i];
        c.seg = i;
        if (ps->mode == PLAN_ROWS) {
            rows_backward(&c, &ps->band, ps->bwd, bound[i]); /* 2PS: bwd is fwd, whose boundaries it reads */
            continue;
        }
        if (ps->mode == PLAN_CKPT) {
            bool *need = err_calloc((size_t)n->n, sizeof(bool));
            recompute_needed(n, ps->first, ps->last, need);
            for (int L = ps->first; L <= ps->last; L++)
                if (need[L]) emit_fwd(&c, L, -1, full(n, L), full(n, L), -1, true);
            free(need);
        }
        for (int L = ps->last; L >= ps->first; L--) emit_bwd(&c, L, -1, full(n, L), hold_full, &c, false);
    }
    {
        sched_step *t = step_new(&c, SCHED_UPDATE, -1, -1);
        t->flops = (double)net_params(n) * (cfg->optimizer == SCHED_ADAM ? 12 : 4);
        t->bytes_moved = (double)net_params(n) * 4 * (cfg->optimizer == SCHED_ADAM ? 4 : 3);
    }
    for (int i = 0; i < s->n_step; i++) s->flops += s->steps[i].op == SCHED_FWD || s->steps[i].op == SCHED_BWD ? s->steps[i].flops : 0;
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_OFFLOAD) {
            place_offloads(&c);
            break;
        }
    place_allocs(s);
    for (int i = 0; i < p->n_seg; i++) free(bound[i]);
    free(bound);
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) free(*maps[m]);
    return 0;
}

void sched_free(sched *s)
{
    free(s->bufs);
    free(s->steps);
    memset(s, 0, sizeof *s);
}

void sched_buf_name(const sched *s, const net *n, int b, char *out, size_t len)
{
    const sched_buf *x = &s->bufs[b];
    const char *layer = x->layer >= 0 ? n->layers[x->layer].name : "-";
    if (x->band >= 0)
        snprintf(out, len, "%s.%s[b%d %d:%d]", layer, kind_tags[x->kind], x->band, x->rows.a, x->rows.b);
    else
        snprintf(out, len, "%s.%s", layer, kind_tags[x->kind]);
}

void sched_walk(const sched *s, sched_visit visit, void *ctx)
{
    int64_t cur[MEM_NCAT] = {0};
    bool *host = err_calloc((size_t)s->n_buf, sizeof(bool));
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op != SCHED_ALLOC && t->op != SCHED_FREE && t->op != SCHED_OFFLOAD && t->op != SCHED_PREFETCH) continue;
        const sched_buf *b = &s->bufs[t->buf];
        if (t->op == SCHED_ALLOC) cur[b->cat] += b->bytes;
        else if (t->op == SCHED_FREE) cur[host[t->buf] ? MEM_HOST : b->cat] -= b->bytes;
        else if (t->op == SCHED_OFFLOAD) cur[b->cat] -= b->bytes, cur[MEM_HOST] += b->bytes, host[t->buf] = true;
        else cur[MEM_HOST] -= b->bytes, cur[b->cat] += b->bytes, host[t->buf] = false;
        visit(ctx, i, cur);
    }
    free(host);
}

typedef struct {
    int64_t *out, last[MEM_NCAT];
    int next;
} by_category;

static void fill_rows(void *ctx, int step, const int64_t cur[MEM_NCAT])
{
    by_category *c = ctx;
    for (; c->next < step; c->next++) memcpy(c->out + (int64_t)c->next * MEM_NCAT, c->last, sizeof c->last);
    memcpy(c->last, cur, sizeof c->last);
}

void sched_bytes_by_category(const sched *s, int64_t *out)
{
    by_category c = {.out = out};
    sched_walk(s, fill_rows, &c);
    fill_rows(&c, s->n_step, c.last); /* steps after the last event keep its values */
}
