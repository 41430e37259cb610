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

/* The layers a band pass computes, in order (n: how many; at NULL: every layer of the segment). */
typedef struct {
    int *at, n;
} layer_list;

/* The layers of `need` as a list in `room` (the segment's layers: a pass's own allocation, made
 * once a segment), for the passes over the bands that compute only those; the others read their
 * whole kept maps (c->whole), set here once for every band (nothing a band does changes them).
 * NULL: every layer. */
static layer_list needed(lower *c, const band_seg *bs, const bool *need, int *room)
{
    layer_list k = {NULL, bs->last - bs->first + 1};
    if (!need) return k;
    k.at = room, k.n = 0;
    for (int L = bs->first; L <= bs->last; L++)
        if (need[L]) k.at[k.n++] = L;
        else c->act[L] = c->whole[L], c->aux[L] = -1;
    return k;
}

/* Forward of one band: the layers of `todo` (needed()). bound[L * R + r]: boundary buffers
 * (2PS), created when `make_bounds`. out_full: the whole output buffer, or -1. A layer with a
 * whole map kept between stages (c->whole) is written into it in the forward and read from it
 * where a band does not compute it. */
static void band_forward(lower *c, const band_seg *bs, const band_geom *g, int r, int *bound, bool make_bounds,
                         int out_full, const layer_list *todo)
{
    const net *n = c->n;
    int L0 = bs->first, R = g->n_bands;
    const bool *rebuilt = c->p->segs[c->seg].passes.rebuilt; /* bn=train-rebuild's maps; NULL: not staged */
    for (int i = 0; i < todo->n; i++) {
        int L = todo->at ? todo->at[i] : L0 + i;
        band_rows out = g->out[r * g->n_layers + L - L0];
        band_rows hold = band_hold(bs, g, n, r, L);
        const net_layer *l = &n->layers[L];
        int in0 = l->n_in ? l->in[0] : -1;
        bool kept = c->whole[L] >= 0 && !c->bwd_phase;
        /* in place over its input's rows, never a kept map's; not where PyTorch keeps a copy of its
         * input (kind_torch_copies_x): that copy is its input buffer, its output a new one */
        bool shared = l->inplace && in0 >= 0 && c->act[in0] >= 0 && in0 != bs->src && c->act[in0] != c->whole[in0] &&
                      !(c->p->torch && kind_torch_copies_x(l));
        int y = -1;
        if (L == bs->last && out_full >= 0) y = out_full;
        else if (kept) y = c->whole[L];
        else if (shared) y = c->act[in0];
        else if (band_rows_len(hold)) y = lower_buf(c, BUF_ACT, MEM_ACT, L, r, hold, lower_bytes(c, L, hold, 4));
        if (g->policy == BAND_2PS && r > 0 && bound[L * R + r - 1] >= 0 && !kept)
            lower_copy(c, L, r, c->s->bufs[bound[L * R + r - 1]].rows, bound[L * R + r - 1], y, false);
        if (band_rows_len(out)) lower_fwd(c, L, r, out, hold, y, c->bwd_phase);
        else c->act[L] = y, c->aux[L] = -1;
        band_rows keep = g->keep[r * g->n_layers + L - L0];
        /* a kept map needs no boundaries, unless the backward rebuilds it (bn=train-rebuild) or its
         * auxiliary in bands */
        bool bounds = !kept || kind_of(l)->aux_rebuilt || (rebuilt && rebuilt[L - L0]);
        if (make_bounds && bounds && g->policy == BAND_2PS && r + 1 < R && band_rows_len(keep)) {
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

/* The segment's layers (as segment positions, layer - first) by the statistics pass that gathers
 * for them: forward (plan_passes.fwd) or backward (.bwd); pass q's are list[start[q] ..
 * start[q + 1]). Built once a segment, so that a pass, or each band of it, visits its own layers,
 * not the whole segment's (ResNet-50's at 2ps:4: 23 stages of 4 bands over 78 layers). */
static lower_buckets by_pass(const plan_passes *pp, bool backward)
{
    return lower_bucket(backward ? pp->bwd : pp->fwd, pp->nl, (backward ? pp->n_bwd : pp->n_fwd) + 2);
}

/* The STATS_END steps of forward pass `pass`: the statistics of the layers it gathered for. */
static void stats_end(lower *c, const plan_seg *ps, const lower_buckets *fwd, int pass)
{
    for (int k = fwd->start[pass]; k < fwd->start[pass + 1]; k++) {
        int L = ps->band.first + fwd->list[k];
        sched_step *t = lower_step(c, SCHED_STATS_END, L, -1);
        t->aux = c->stats[L], t->sums = c->sums[L], t->dw = c->run[L], t->map_stats = true;
        t->flops = 10.0 * c->n->layers[L].c;
        c->sums[L] = -1;
    }
}

/* Forward pass `pass`'s STATS steps in band r: the rows r owns of each layer it gathers for. */
static void gather_stats(lower *c, const plan_seg *ps, const band_geom *g, const lower_buckets *fwd, int pass, int r)
{
    for (int k = fwd->start[pass]; k < fwd->start[pass + 1]; k++) {
        int L = ps->band.first + fwd->list[k];
        band_rows own = band_own(g, &ps->band, r, L);
        if (band_rows_len(own)) emit_stats(c, L, r, own, false);
    }
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
    int *bound = err_calloc((size_t)N * R, sizeof(int)), *room = err_calloc((size_t)pp->nl + 1, sizeof(int));
    for (int L = a; L <= bs->last; L++)
        if (pp->fwd[L - a])
            c->stats[L] = lower_buf(c, BUF_STAT, MEM_ACT, L, -1, (band_rows){0, 0}, kind_aux_bytes(n, L, 0, c->cfg->batch));
    c->stats_pass = true;
    lower_buckets fwd = by_pass(pp, false);
    for (int pass = 1; pass <= pp->n_fwd; pass++) {
        memset(bound, -1, (size_t)N * R * sizeof(int));
        for (int L = a; L <= bs->last; L++) need[L] = pp->fwd_need[(pass - 1) * pp->nl + L - a];
        for (int k = fwd.start[pass]; k < fwd.start[pass + 1]; k++) new_sums(c, a + fwd.list[k]);
        layer_list todo = needed(c, bs, need, room);
        for (int r = 0; r < R; r++) {
            band_forward(c, bs, g, r, bound, true, -1, &todo);
            gather_stats(c, ps, g, &fwd, pass, r);
            c->act[bs->src] = src;
        }
        stats_end(c, ps, &fwd, pass);
    }
    c->stats_pass = false;
    lower_buckets_free(&fwd);
    free(need), free(bound), free(room);
}

/* 2PS boundary gradients of layer L in backward band r: the one band r + 1 handed down is added
 * into the band's gradient, and the rows band r - 1 owns are handed on (bgrad[L * R + band]). */
static void boundary_grads(lower *c, const band_seg *bs, const band_geom *g, int r, int L, int *bgrad)
{
    int R = g->n_bands;
    if (L == bs->last) return;
    if (r + 1 < R && bgrad[L * R + r] >= 0) {
        int dst = lower_grad(c, L, r, band_hold(bs, g, c->n, r, L), true);
        lower_copy(c, L, r, c->s->bufs[bgrad[L * R + r]].rows, bgrad[L * R + r], dst, true);
    }
    if (g->policy == BAND_2PS && r > 0) {
        band_rows keep = g->keep[(r - 1) * g->n_layers + L - bs->first];
        if (band_rows_len(keep) && c->grad[L] >= 0) {
            int b = lower_buf(c, BUF_BGRAD, MEM_BOUNDARY, L, r, keep, lower_bytes(c, L, keep, 4));
            lower_copy(c, L, r, keep, c->grad[L], b, false);
            bgrad[L * R + r - 1] = b;
        }
    }
}

/* --- stages (bn=train) ------------------------------------------------------------------------- */

/* The forward in stages (plan_passes.staged): stage q computes the layers first needed by level
 * q's statistics, from the segment input and the maps earlier stages kept whole, and gathers
 * level q's statistics; the last stage computes the rest into the segment output. Every layer
 * is computed once. */
static void staged_forward(lower *c, const plan_seg *ps, int *bound, int out)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->fwd;
    const plan_passes *pp = &ps->passes;
    int a = bs->first, src = c->act[bs->src], *room = err_calloc((size_t)pp->nl + 1, sizeof(int));
    bool *need = err_calloc((size_t)n->n, sizeof(bool));
    for (int L = a; L <= bs->last; L++) {
        if (pp->fwd[L - a])
            c->stats[L] = lower_buf(c, BUF_STAT, MEM_ACT, L, -1, (band_rows){0, 0}, kind_aux_bytes(n, L, 0, c->cfg->batch));
        if (pp->keep_act[L - a])
            c->whole[L] = lower_buf(c, BUF_ACT, MEM_ACT, L, -1, lower_full(n, L), lower_bytes(c, L, lower_full(n, L), 4));
    }
    lower_buckets fwd = by_pass(pp, false);
    for (int q = 1; q <= pp->n_fwd + 1; q++) {
        for (int L = a; L <= bs->last; L++) need[L] = pp->fst[L - a] == q;
        for (int k = fwd.start[q]; k < fwd.start[q + 1]; k++) new_sums(c, a + fwd.list[k]);
        layer_list todo = needed(c, bs, need, room);
        for (int r = 0; r < g->n_bands; r++) {
            band_forward(c, bs, g, r, bound, true, q > pp->n_fwd ? out : -1, &todo);
            gather_stats(c, ps, g, &fwd, q, r);
            c->act[bs->src] = src;
        }
        stats_end(c, ps, &fwd, q);
    }
    lower_buckets_free(&fwd);
    free(need), free(room);
}

/* What the backward stages of a segment work in, made once a segment (a stage's own allocations
 * cost ResNet-50's 2ps:4 about 4% of an evaluation): by layer, the stage's boundary gradients
 * (bgrad[L * R + band]), what it recomputes, back-propagates and finds kept whole, the gradients
 * its bands set; the lists of its layers, and needed()'s room. */
typedef struct {
    int *bgrad;
    bool *need, *mine, *avail, *touched;
    int *own_l, *reset, *room;
} stage_scratch;

static void scratch_open(stage_scratch *k, int N, int R)
{
    k->bgrad = err_calloc((size_t)N * R, sizeof(int));
    k->need = err_calloc((size_t)N, sizeof(bool)), k->mine = err_calloc((size_t)N, sizeof(bool));
    k->avail = err_calloc((size_t)N, sizeof(bool)), k->touched = err_calloc((size_t)N, sizeof(bool));
    k->own_l = err_calloc((size_t)N, sizeof(int)), k->reset = err_calloc((size_t)N, sizeof(int));
    k->room = err_calloc((size_t)N, sizeof(int));
}

static void scratch_close(stage_scratch *k)
{
    free(k->bgrad), free(k->need), free(k->mine), free(k->avail), free(k->touched);
    free(k->own_l), free(k->reset), free(k->room);
}

/* Backward stage s, the bands in reverse: each recomputes what the stage's steps read (from the
 * kept maps), adds the rows it owns of the kept gradients of the layers the stage
 * back-propagates, and back-propagates them with their weight gradients; gradients of layers a
 * later stage back-propagates add into their kept maps. */
static void staged_backward_pass(lower *c, const plan_seg *ps, int *bound, const int *kgrad, stage_scratch *k, int s)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->bwd;
    const plan_passes *pp = &ps->passes;
    int R = g->n_bands, L0 = bs->first, N = n->n;
    int src_act = c->act[bs->src], dout = c->grad[bs->last];
    int *bgrad = k->bgrad, *own_l = k->own_l, n_own = 0, *reset = k->reset, n_reset = 0;
    bool *need = k->need, *mine = k->mine, *avail = k->avail, *touched = k->touched;
    memset(touched, 0, (size_t)N * sizeof(bool));
    for (int L = L0; L <= bs->last; L++) mine[L] = pp->bst[L - L0] == s, avail[L] = c->whole[L] >= 0;
    plan_need(n, L0, bs->last, mine, NULL, avail, true, need);
    /* the gradients a band may set: the stage's layers' and their inputs' (and the segment
     * output's); all of them are reset once, those before each band */
    for (int L = bs->last; L >= L0; L--)
        if (mine[L]) {
            own_l[n_own++] = L, touched[L] = true;
            memset(bgrad + L * R, -1, (size_t)R * sizeof(int)); /* the stage's boundary gradients are its own layers' */
            for (int j = 0; j < n->layers[L].n_in; j++) touched[n->layers[L].in[j]] = true;
        }
    for (int L = L0; L <= bs->last; L++) {
        c->grad[L] = pp->bst[L - L0] > s ? kgrad[L] : -1;
        if (touched[L]) reset[n_reset++] = L;
    }
    layer_list todo = needed(c, bs, need, k->room);
    for (int r = R - 1; r >= 0; r--) {
        band_forward(c, bs, g, r, bound, false, -1, &todo);
        for (int i = 0; i < n_reset; i++) c->grad[reset[i]] = pp->bst[reset[i] - L0] > s ? kgrad[reset[i]] : -1;
        c->grad[bs->last] = dout;
        band_ctx hc = {c, bs, g, r};
        for (int i = 0; i < n_own; i++) {
            int L = own_l[i];
            band_rows back = g->grad[r * g->n_layers + L - L0], own = band_own(g, bs, r, L); /* back-propagated, owned */
            if (kgrad[L] >= 0 && band_rows_len(own))
                lower_copy(c, L, r, own, kgrad[L], lower_grad(c, L, r, band_hold(bs, g, n, r, L), true), true);
            boundary_grads(c, bs, g, r, L, bgrad);
            if (!band_rows_len(back) || c->grad[L] < 0) continue;
            sched_step *t = lower_bwd(c, L, r, back, hold_band, &hc, true, NULL, true);
            if (t->map_stats) t->own = own;
        }
        c->act[bs->src] = src_act;
    }
}

/* Whether bn L's input is rebuilt for its gradient sums (bn=train-rebuild): neither the segment's
 * input nor a map kept whole. */
static bool input_rebuilt(const lower *c, const band_seg *bs, int L)
{
    int in = c->n->layers[L].in[0];
    return in != bs->src && (in < bs->first || in > bs->last || c->whole[in] < 0);
}

/* The gradient sums of stage s's bns from their rebuilt inputs (bn=train-rebuild): the bands
 * recompute those inputs from the maps kept below them, and each adds the rows it owns, with the
 * whole kept gradient maps. bwd: the segment's layers by backward pass (by_pass). */
static void rebuilt_sums(lower *c, const plan_seg *ps, int *bound, const int *kgrad, int dout, const lower_buckets *bwd,
                         int s)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->bwd;
    int L0 = bs->first, src_act = c->act[bs->src], n_bns = 0;
    for (int k = bwd->start[s]; k < bwd->start[s + 1]; k++) n_bns += input_rebuilt(c, bs, L0 + bwd->list[k]);
    if (!n_bns) return; /* most stages: nothing to set up */
    bool *extra = err_calloc((size_t)n->n, sizeof(bool)), *none = err_calloc((size_t)n->n, sizeof(bool));
    bool *avail = err_calloc((size_t)n->n, sizeof(bool)), *need = err_calloc((size_t)n->n, sizeof(bool));
    int *bns = err_calloc((size_t)n->n, sizeof(int));
    n_bns = 0;
    for (int L = L0; L <= bs->last; L++) avail[L] = c->whole[L] >= 0;
    for (int k = bwd->start[s]; k < bwd->start[s + 1]; k++) {
        int L = L0 + bwd->list[k];
        if (input_rebuilt(c, bs, L)) extra[n->layers[L].in[0]] = true, bns[n_bns++] = L, new_sums(c, L);
    }
    plan_need(n, L0, bs->last, none, extra, avail, true, need);
    int *room = err_calloc((size_t)n->n, sizeof(int));
    layer_list todo = needed(c, bs, need, room);
    for (int r = 0; r < g->n_bands; r++) {
        band_forward(c, bs, g, r, bound, false, -1, &todo);
        for (int i = 0; i < n_bns; i++) {
            int L = bns[i];
            band_rows own = band_own(g, bs, r, L);
            if (!band_rows_len(own)) continue;
            c->grad[L] = L == bs->last ? dout : kgrad[L];
            emit_stats(c, L, r, own, true);
        }
        c->act[bs->src] = src_act;
    }
    free(extra), free(none), free(avail), free(need), free(bns), free(room);
}

/* The backward in stages: stage s back-propagates the layers level s's gradient sums wait for,
 * then gathers those sums from the kept gradient and input maps of level s's bns, band by band
 * over the rows each owns (an input rebuilt, bn=train-rebuild: rebuilt_sums); the last stage
 * back-propagates the rest. */
static void staged_backward(lower *c, const plan_seg *ps, int *bound)
{
    const net *n = c->n;
    const band_seg *bs = &ps->band;
    const plan_passes *pp = &ps->passes;
    int a = bs->first;
    int *kgrad = err_calloc((size_t)n->n, sizeof(int));
    memset(kgrad, -1, (size_t)n->n * sizeof(int));
    for (int L = a; L <= bs->last; L++) {
        if (pp->keep_grad[L - a]) {
            kgrad[L] = lower_buf(c, BUF_GRAD, MEM_AGRAD, L, -1, lower_full(n, L), lower_bytes(c, L, lower_full(n, L), 4));
            c->s->bufs[kgrad[L]].zero = true;
        }
        if (pp->rebuilt[L - a]) c->whole[L] = -1; /* the forward's last use of it is past */
    }
    int dout = c->grad[bs->last];
    lower_buckets bwd = by_pass(pp, true);
    stage_scratch k;
    scratch_open(&k, n->n, ps->bwd->n_bands);
    for (int s = 1; s <= pp->n_bwd + 1; s++) {
        staged_backward_pass(c, ps, bound, kgrad, &k, s);
        rebuilt_sums(c, ps, bound, kgrad, dout, &bwd, s);
        for (int k = bwd.start[s]; k < bwd.start[s + 1]; k++) {
            int L = a + bwd.list[k], in = n->layers[L].in[0], held = c->act[in];
            if (in != bs->src && c->whole[in] < 0) continue;
            new_sums(c, L);
            /* whole maps: its input (kept, or the segment input) and its gradient (kept, or the segment output's) */
            if (in != bs->src) c->act[in] = c->whole[in];
            c->grad[L] = L == bs->last ? dout : kgrad[L];
            for (int r = 0; r < ps->bwd->n_bands; r++) {
                band_rows own = band_own(ps->bwd, bs, r, L);
                if (band_rows_len(own)) emit_stats(c, L, r, own, true);
            }
            c->act[in] = held;
        }
    }
    c->grad[bs->last] = dout;
    lower_buckets_free(&bwd), scratch_close(&k);
    free(kgrad);
}

/* --- forward and backward ---------------------------------------------------------------------- */

void rows_forward(lower *c, const plan_seg *ps, int *bound)
{
    const band_seg *bs = &ps->band;
    const band_geom *g = ps->fwd;
    int out = lower_buf(c, BUF_ACT, MEM_ACT, bs->last, -1, lower_full(c->n, bs->last), lower_bytes(c, bs->last, lower_full(c->n, bs->last), 4));
    if (ps->passes.staged) {
        staged_forward(c, ps, bound, out);
        c->act[bs->last] = out;
        return;
    }
    if (plan_seg_map_stats(ps)) stats_forward(c, ps);
    int src = c->act[bs->src];
    layer_list all = needed(c, bs, NULL, NULL);
    for (int r = 0; r < g->n_bands; r++) {
        band_forward(c, bs, g, r, bound, true, out, &all);
        c->act[bs->src] = src;
    }
    c->act[bs->last] = out;
}

/* Under PyTorch's rules (the prediction of python/lrcnn_torch) a band's recomputation is its
 * function run again under torch.utils.checkpoint, which holds every boundary the band received
 * until then, those of layers the backward does not recompute too (a last bilinear upsampling,
 * whose backward reads no map: 768 B over the prediction on a 16x16 test net at 2ps:2): each
 * such boundary is held to band r's recomputation by a copy of no rows. */
static void hold_bounds(lower *c, const band_seg *bs, const band_geom *g, int r, const bool *need, const int *bound)
{
    int R = g->n_bands;
    if (!lower_predicts_torch(c) || g->policy != BAND_2PS || r == 0) return;
    for (int L = bs->first; L <= bs->last; L++) {
        int b = bound[L * R + r - 1];
        if (!need[L] && b >= 0) lower_copy(c, L, r, (band_rows){c->s->bufs[b].rows.a, c->s->bufs[b].rows.a}, b, b, false);
    }
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
        plan_need(n, bs->first, bs->last, NULL, NULL, NULL, plan_seg_map_stats(ps), need);
    }
    int *room = err_calloc((size_t)N, sizeof(int));
    layer_list todo = needed(c, bs, need, room);
    for (int r = R - 1; r >= 0; r--) {
        if (!pass) hold_bounds(c, bs, g, r, need, bound);
        band_forward(c, bs, g, r, bound, false, -1, &todo);
        for (int L = L0; L <= bs->last; L++) c->grad[L] = -1;
        c->grad[bs->last] = dout;
        band_ctx hc = {c, bs, g, r};
        for (int L = bs->last; L >= L0; L--) {
            bool is_target = target && target[L];
            if (bwd && !bwd[L] && !is_target) continue;
            band_rows out = g->out[r * g->n_layers + L - L0];
            boundary_grads(c, bs, g, r, L, bgrad);
            if (!band_rows_len(out) || c->grad[L] < 0) continue;
            if (is_target) {
                emit_stats(c, L, r, out, true);
            } else {
                sched_step *t = lower_bwd(c, L, r, out, hold_band, &hc, true, want, !pass);
                if (t->map_stats) t->own = band_own(g, bs, r, L);
            }
        }
        c->act[bs->src] = src_act;
    }
    free(room), free(bgrad), free(need), free(bwd), free(target), free(want);
}

void rows_backward(lower *c, const plan_seg *ps, int *bound)
{
    const band_seg *bs = &ps->band;
    const plan_passes *pp = &ps->passes;
    if (pp->staged) {
        staged_backward(c, ps, bound);
        for (int L = bs->first; L <= bs->last; L++) c->stats[L] = c->sums[L] = c->whole[L] = -1;
        return;
    }
    for (int pass = 1; pass <= pp->n_bwd; pass++) {
        for (int L = bs->first; L <= bs->last; L++)
            if (pp->bwd[L - bs->first] == pass) new_sums(c, L);
        backward_pass(c, ps, bound, pass);
    }
    backward_pass(c, ps, bound, 0);
    for (int L = bs->first; L <= bs->last; L++) c->stats[L] = c->sums[L] = -1;
}
