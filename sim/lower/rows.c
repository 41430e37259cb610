/* rows: see rows.h. A band's buffers hold the rows it holds (band_held: computed rows, and 2PS
 * boundary rows received); gradient buffers inside a band are zero-filled and accumulated into. */
#include "sim/lower/rows.h"

#include <string.h>

#include "sim/net/kind.h"

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
    if (P == bs->src) return lower_full(n, P);
    return band_buffer_rows(n, g, bs, r, P);
}

static band_rows hold_band(const void *ctx, int P)
{
    const band_ctx *b = ctx;
    return band_hold(b->bs, b->g, b->c->n, b->band, P);
}

/* Forward of one band: the layers of `need` (NULL: all). bound[L * R + r]: boundary buffers
 * (2PS), created when `make_bounds`. out_full: the whole output buffer, or -1. */
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
        else if (band_rows_len(hold)) y = lower_buf(c, BUF_ACT, MEM_ACT, L, r, hold, lower_bytes(c, L, hold, 4));
        if (g->policy == BAND_2PS && r > 0 && bound[L * R + r - 1] >= 0)
            lower_copy(c, L, r, c->s->bufs[bound[L * R + r - 1]].rows, bound[L * R + r - 1], y, false);
        if (band_rows_len(out)) lower_fwd(c, L, r, out, hold, y, c->bwd_phase);
        else c->act[L] = y, c->aux[L] = -1;
        band_rows keep = g->keep[r * g->n_layers + L - L0];
        if (make_bounds && g->policy == BAND_2PS && r + 1 < R && band_rows_len(keep)) {
            int b = lower_buf(c, BUF_BOUND, MEM_BOUNDARY, L, r, keep, lower_bytes(c, L, keep, 4));
            lower_copy(c, L, r, keep, y, b, false);
            bound[L * R + r] = b;
        }
    }
}

/* --- whole-map statistics ---------------------------------------------------------------------- */

/* A STATS step: band r's rows of layer b added to `sums` (forward: its input; backward: dy too). */
static void emit_stats(lower *c, int b, int r, band_rows rows, bool backward)
{
    const net *n = c->n;
    sched_step *t = lower_step(c, SCHED_STATS, b, r);
    t->rows = t->own = rows;
    t->x[0] = c->act[n->layers[b].in[0]];
    t->aux = c->stats[b];
    t->sums = c->sums[b];
    t->map_stats = true;
    if (backward) t->dy = c->grad[b];
    t->flops = (double)lower_bytes(c, b, rows, 1) * (backward ? 4.0 : 3.0); /* per value: adds, products */
    t->bytes_moved = (double)lower_bytes(c, b, rows, 4) * (backward ? 2 : 1);
}

/* A zero-filled buffer for layer L's statistics sums (one pass's). */
static void new_sums(lower *c, int L)
{
    c->sums[L] = lower_buf(c, BUF_SUMS, MEM_ACT, L, -1, (band_rows){0, 0}, kind_sums_bytes(&c->n->layers[L]));
    c->s->bufs[c->sums[L]].zero = true;
}

/* The forward statistics passes (plan_passes): the statistics of every whole-map-statistics layer,
 * before the forward that normalizes with them. */
static void stats_forward(lower *c, const plan_seg *ps)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->fwd;
    const plan_passes *pp = &ps->passes;
    int N = n->n, R = g->n_bands, src = c->act[bs->src], a = bs->first;
    bool *need = err_calloc((size_t)N, sizeof(bool));
    int *bound = err_calloc((size_t)N * R, sizeof(int));
    for (int L = a; L <= bs->last; L++)
        if (pp->fwd[L - a])
            c->stats[L] = lower_buf(c, BUF_STAT, MEM_ACT, L, -1, (band_rows){0, 0}, kind_aux_bytes(n, L, 0, c->cfg->batch));
    c->stats_pass = true;
    for (int pass = 1; pass <= pp->n_fwd; pass++) {
        memset(bound, -1, (size_t)N * R * sizeof(int));
        for (int L = a; L <= bs->last; L++) {
            need[L] = pp->fwd_need[(pass - 1) * pp->nl + L - a];
            if (pp->fwd[L - a] == pass) new_sums(c, L);
        }
        for (int r = 0; r < R; r++) {
            band_forward(c, bs, g, r, bound, true, -1, need);
            for (int L = a; L <= bs->last; L++) {
                band_rows own = band_own(g, bs, r, L, n->layers[L].h);
                if (pp->fwd[L - a] == pass && band_rows_len(own)) emit_stats(c, L, r, own, false);
            }
            c->act[bs->src] = src;
        }
        for (int L = a; L <= bs->last; L++) {
            if (pp->fwd[L - a] != pass) continue;
            sched_step *t = lower_step(c, SCHED_STATS_END, L, -1);
            t->aux = c->stats[L], t->sums = c->sums[L], t->dw = c->run[L], t->map_stats = true;
            t->flops = 10.0 * n->layers[L].c;
            c->sums[L] = -1;
        }
    }
    c->stats_pass = false;
    free(need), free(bound);
}

/* --- forward and backward ---------------------------------------------------------------------- */

void rows_forward(lower *c, const plan_seg *ps, int *bound)
{
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->fwd;
    if (plan_seg_map_stats(ps)) stats_forward(c, ps);
    int out = lower_buf(c, BUF_ACT, MEM_ACT, bs->last, -1, lower_full(c->n, bs->last), lower_bytes(c, bs->last, lower_full(c->n, bs->last), 4));
    int src = c->act[bs->src];
    for (int r = 0; r < g->n_bands; r++) {
        band_forward(c, bs, g, r, bound, true, out, NULL);
        c->act[bs->src] = src;
    }
    c->act[bs->last] = out;
}

/* One backward pass over the bands, in reverse: statistics pass `pass` (plan_passes: it
 * back-propagates bwd_set and adds the gradient sums of the layers it gathers for), or, pass 0,
 * the backward proper, which accumulates weight gradients and the segment input's gradient. */
static void backward_pass(lower *c, const plan_seg *ps, int *bound, int pass)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->bwd; /* 2PS: the forward's own, whose boundaries it reads */
    const plan_passes *pp = &ps->passes;
    int R = g->n_bands, L0 = bs->first, N = n->n;
    int src_act = c->act[bs->src], dout = c->grad[bs->last];
    int *bgrad = err_calloc((size_t)N * R, sizeof(int));
    memset(bgrad, -1, (size_t)N * R * sizeof(int));
    bool *need = err_calloc((size_t)N, sizeof(bool)), *bwd = NULL, *target = NULL, *want = NULL;
    if (pass) { /* gradients wanted: what the pass back-propagates and the targets */
        bwd = err_calloc((size_t)N, sizeof(bool)), target = err_calloc((size_t)N, sizeof(bool));
        want = err_calloc((size_t)N, sizeof(bool));
        for (int L = L0; L <= bs->last; L++) {
            bwd[L] = pp->bwd_set[(pass - 1) * pp->nl + L - L0];
            target[L] = pp->bwd[L - L0] == pass;
            want[L] = bwd[L] || target[L];
            need[L] = pp->bwd_need[(pass - 1) * pp->nl + L - L0];
        }
    } else {
        plan_need(n, bs->first, bs->last, NULL, NULL, plan_seg_map_stats(ps), need);
    }
    for (int r = R - 1; r >= 0; r--) {
        band_forward(c, bs, g, r, bound, false, -1, need);
        for (int L = L0; L <= bs->last; L++) c->grad[L] = -1;
        c->grad[bs->last] = dout;
        band_ctx hc = {c, bs, g, r};
        for (int L = bs->last; L >= L0; L--) {
            bool is_target = target && target[L];
            if (bwd && !bwd[L] && !is_target) continue;
            band_rows out = g->out[r * g->n_layers + L - L0];
            if (L < bs->last && r + 1 < R && bgrad[L * R + r] >= 0) {
                int dst = lower_grad(c, L, r, band_hold(bs, g, n, r, L), true);
                lower_copy(c, L, r, c->s->bufs[bgrad[L * R + r]].rows, bgrad[L * R + r], dst, true);
            }
            if (L < bs->last && g->policy == BAND_2PS && r > 0) {
                band_rows keep = g->keep[(r - 1) * g->n_layers + L - L0];
                if (band_rows_len(keep) && c->grad[L] >= 0) {
                    int b = lower_buf(c, BUF_BGRAD, MEM_BOUNDARY, L, r, keep, lower_bytes(c, L, keep, 4));
                    lower_copy(c, L, r, keep, c->grad[L], b, false);
                    bgrad[L * R + r - 1] = b;
                }
            }
            if (!band_rows_len(out) || c->grad[L] < 0) continue;
            if (is_target) {
                emit_stats(c, L, r, out, true);
            } else {
                sched_step *t = lower_bwd(c, L, r, out, hold_band, &hc, true, want, !pass);
                if (t->map_stats) t->own = band_own(g, bs, r, L, n->layers[L].h);
            }
        }
        c->act[bs->src] = src_act;
    }
    free(bgrad), free(need), free(bwd), free(target), free(want);
}

void rows_backward(lower *c, const plan_seg *ps, int *bound)
{
    const band_seg *bs = &ps->band;
    const plan_passes *pp = &ps->passes;
    for (int pass = 1; pass <= pp->n_bwd; pass++) {
        for (int L = bs->first; L <= bs->last; L++)
            if (pp->bwd[L - bs->first] == pass) new_sums(c, L);
        backward_pass(c, ps, bound, pass);
    }
    backward_pass(c, ps, bound, 0);
    for (int L = bs->first; L <= bs->last; L++) c->stats[L] = c->sums[L] = -1;
}
