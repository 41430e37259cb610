/* closed_rows: see closed_rows.h. Per row segment, each pass's band buffers: activations,
 * gradients, boundaries and boundary gradients, rebuilt auxiliaries, workspaces, and the
 * segment's whole-map statistics; paper/model.md states each rule this code follows. */
#include "sim/predict/closed_rows.h"

#include <limits.h>
#include <string.h>

#include "sim/net/kind.h"

cf_span cf_span_none(void) { return (cf_span){INT_MAX, -1}; }

void cf_span_add(cf_span *s, int ph)
{
    if (ph < 0) return;
    if (ph < s->lo) s->lo = ph;
    if (ph > s->hi) s->hi = ph;
}

int64_t cf_y(const cf *c, int L)
{
    const net_layer *l = &c->n->layers[L];
    return c->batch * l->c * l->h * l->w * 4;
}

int64_t cf_row(const cf *c, int L) /* bytes of one row of L's output */
{
    const net_layer *l = &c->n->layers[L];
    return c->batch * l->c * l->w * 4;
}

void cf_live(cf *c, mem_cat cat, int64_t bytes, cf_span s)
{
    if (bytes <= 0 || s.lo < 0 || s.lo > s.hi) return;
    c->d[(size_t)s.lo * CF_NCAT + cat - MEM_ACT] += bytes;
    c->d[(size_t)(s.hi + 1) * CF_NCAT + cat - MEM_ACT] -= bytes;
}

cf_span cf_sp(int lo, int hi) { return (cf_span){lo, hi}; }

int cf_ph_rf(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (r * w->nl + L - w->bs->first) * 3 + k;
}
int cf_ph_rr(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (w->rb - 1 - r) * 5 * w->nl + (L - w->bs->first) * 2 + k;
}
int cf_ph_rb(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (w->rb - 1 - r) * 5 * w->nl + 2 * w->nl + (w->bs->last - L) * 3 + k;
}
static int cf_ph_end(const cf_rows *w, const cf_pass *P) { return P->base + 3 * w->rf * w->nl; } /* STATS_END */
static bool cf_gathers(const cf_pass *P, int i) { return P->gather && P->gather[i] == P->pass; }

int cf_out_len(const band_geom *g, int r, int i) { return band_rows_len(g->out[r * g->n_layers + i]); }
static int cf_keep_len(const band_geom *g, int r, int i) { return band_rows_len(g->keep[r * g->n_layers + i]); }

/* Rows of band r's buffer for L's output: its held rows, widened to those of the in-place relus
 * chained on it (band_buffer_rows). */
static band_rows cf_hold_rows(const cf *c, const cf_rows *w, const band_geom *g, int r, int L)
{
    return band_buffer_rows(c->n, g, w->bs, r, L);
}

static int cf_hold_len(const cf *c, const cf_rows *w, const band_geom *g, int r, int L)
{
    return band_rows_len(cf_hold_rows(c, w, g, r, L));
}

/* Band r's activation gradients in one backward pass P of row segment w (backward geometry): each
 * layer's band buffer lives from the first write (a consumer's backward, or an arriving 2PS
 * boundary gradient) to its own backward (or STATS) or the boundary gradient it hands on; the
 * segment output's is the whole-map one. An in-place relu whose backward runs hands its gradient
 * buffer to its input when that buffer has exactly the rows the input's own would: the segment
 * output's whole-map gradient only in a band holding the whole map; inside the segment, unless a
 * relu further along the chain holds rows (2PS boundary) that this one does not. */
static void band_gradients(cf *c, const cf_rows *w, const cf_pass *P, int r, cf_span *gsp, int *owner)
{
    const net *n = c->n;
    int a = w->bs->first, b = w->bs->last, nl = w->nl;
    bool tps = w->gb->policy == BAND_2PS;
    const band_geom *gb = w->gb;
    const bool *emit = &P->emit[r * nl], *stat = &P->stat[r * nl];
    for (int L = b; L >= a; L--) {
        int i = L - a, q = n->layers[L].inplace_by;
        owner[i] = L;
        if (q >= 0 && q <= b && emit[q - a]) {
            int o = owner[q - a];
            band_rows have = o == b ? (band_rows){0, n->layers[b].h} : cf_hold_rows(c, w, gb, r, o);
            band_rows want = cf_hold_rows(c, w, gb, r, L);
            if (have.a == want.a && have.b == want.b) owner[i] = o;
        }
        gsp[i] = cf_span_none();
        if (!P->has[r * nl + i]) continue;
        cf_span *t = owner[i] == b ? &c->grad[c->tid[b]] : &gsp[owner[i] - a];
        for (int j = c->cs[L]; j < c->cs[L + 1]; j++)
            if (c->cl[j] <= b && emit[c->cl[j] - a]) cf_span_add(t, cf_ph_rb(w, P, r, c->cl[j], PH_B));
        if (P->bgin[r * nl + i]) cf_span_add(t, cf_ph_rb(w, P, r, L, PH_BGIN));
        if (tps && L < b && r > 0 && cf_keep_len(gb, r - 1, i)) {
            cf_span_add(t, cf_ph_rb(w, P, r, L, PH_BGOUT));
            cf_live(c, MEM_BOUNDARY, cf_row(c, L) * cf_keep_len(gb, r - 1, i),
                 cf_sp(cf_ph_rb(w, P, r, L, PH_BGOUT), cf_ph_rb(w, P, r - 1, L, PH_BGIN)));
        }
        if (emit[i] || stat[i]) cf_span_add(t, cf_ph_rb(w, P, r, L, PH_B));
    }
    for (int L = a; L < b; L++)
        if (owner[L - a] == L) cf_live(c, MEM_AGRAD, cf_row(c, L) * cf_hold_len(c, w, gb, r, L), gsp[L - a]);
}

/* The segment's whole-map statistics (sched: rows.c), per bn: its mean and inverse std from the
 * first STATS of its forward pass to its last use in the backward proper; the forward sums from
 * that STATS to the pass's STATS_END; the gradient sums from the first STATS of its backward pass
 * to its last backward in the backward proper. */
static void map_stats_buffers(cf *c, const cf_rows *w)
{
    const net *n = c->n;
    int a = w->bs->first;
    const cf_pass *F = CF_FWD(w), *B = CF_BWD(w);
    for (int L = a; L <= w->bs->last; L++) {
        int i = L - a, fq = w->pp->fwd[i], bq = w->pp->bwd[i];
        if (!fq) continue;
        const cf_pass *P = &w->fp[fq - 1], *Q = &w->bp[bq - 1];
        cf_span st = cf_span_none(), fs = cf_span_none(), bs = cf_span_none();
        for (int r = 0; r < w->rf; r++)
            if (band_rows_len(band_own(w->gf, w->bs, r, L))) cf_span_add(&fs, cf_ph_rf(w, P, r, L, PH_F));
        cf_span_add(&fs, cf_ph_end(w, P));
        for (int r = 0; r < w->rb; r++) {
            if (Q->stat[r * w->nl + i]) cf_span_add(&bs, cf_ph_rb(w, Q, r, L, PH_B));
            if (B->emit[r * w->nl + i]) cf_span_add(&bs, cf_ph_rb(w, B, r, L, PH_B)), cf_span_add(&st, cf_ph_rb(w, B, r, L, PH_B));
            if (B->need[i] && cf_out_len(w->gb, r, i)) cf_span_add(&st, cf_ph_rr(w, B, r, L, PH_RF));
        }
        for (int r = 0; r < w->rf; r++)
            if (cf_out_len(w->gf, r, i)) cf_span_add(&st, cf_ph_rf(w, F, r, L, PH_F));
        cf_span_add(&st, fs.lo);
        cf_live(c, MEM_ACT, kind_aux_bytes(n, L, 0, (int)c->batch), st);
        cf_live(c, MEM_ACT, kind_sums_bytes(&n->layers[L]), fs);
        cf_live(c, MEM_ACT, kind_sums_bytes(&n->layers[L]), bs);
    }
}

/* A forward pass P (the forward proper or a statistics pass): band activations, workspaces,
 * auxiliaries the backward rebuilds, and 2PS boundaries — the proper forward's kept until the
 * backward proper's recompute of the next band, a statistics pass's only for its own next band. */
static void forward_pass(cf *c, const cf_rows *w, const cf_pass *P)
{
    const net *n = c->n;
    int a = w->bs->first, b = w->bs->last;
    bool tps = w->gf->policy == BAND_2PS, ms = plan_seg_map_stats(w->seg);
    const band_geom *gf = w->gf;
    for (int r = 0; r < w->rf; r++)
        for (int L = a; L <= b; L++) {
            const net_layer *l = &n->layers[L];
            int i = L - a, o = cf_out_len(gf, r, i), F = cf_ph_rf(w, P, r, L, PH_F);
            if (!P->need[i]) continue;
            if (o) {
                cf_live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, false), cf_sp(F, F));
                bool own_stats = !(ms && kind_of(l)->map_stats); /* else the segment's (map_stats_buffers) */
                if (kind_of(l)->aux && !kind_of(l)->aux_optional && own_stats) /* written, then rebuilt for backward */
                    cf_live(c, MEM_ACT, kind_aux_bytes(n, L, o, (int)c->batch), cf_sp(F, F));
            }
            if (tps && r + 1 < w->rf && cf_keep_len(gf, r, i)) { /* boundary rows for band r + 1 */
                int until = P->final && c->need[L] ? cf_ph_rr(w, CF_BWD(w), r + 1, L, PH_RCIN) : cf_ph_rf(w, P, r + 1, L, PH_CIN);
                cf_live(c, MEM_BOUNDARY, cf_row(c, L) * cf_keep_len(gf, r, i), cf_sp(cf_ph_rf(w, P, r, L, PH_COUT), until));
            }
            if (L == b || (l->inplace && l->in[0] >= a)) continue;
            cf_span t = cf_span_none(); /* band activation of L and the in-place relus on it (not b: `out`) */
            for (int m = L; m >= 0 && m < b && P->need[m - a]; m = n->layers[m].inplace_by) {
                int mi = m - a;
                if (tps && r > 0 && cf_keep_len(gf, r - 1, mi)) cf_span_add(&t, cf_ph_rf(w, P, r, m, PH_CIN));
                if (cf_out_len(gf, r, mi)) cf_span_add(&t, cf_ph_rf(w, P, r, m, PH_F));
                if (tps && r + 1 < w->rf && cf_keep_len(gf, r, mi)) cf_span_add(&t, cf_ph_rf(w, P, r, m, PH_COUT));
                for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
                    int x = c->cl[j], xi = x - a;
                    if ((x == n->layers[m].inplace_by && x < b) || x > b) continue;
                    if (P->need[xi] && cf_out_len(gf, r, xi)) cf_span_add(&t, cf_ph_rf(w, P, r, x, PH_F));
                    if (cf_gathers(P, xi) && band_rows_len(band_own(gf, w->bs, r, x)))
                        cf_span_add(&t, cf_ph_rf(w, P, r, x, PH_F)); /* its STATS reads it */
                }
            }
            cf_live(c, MEM_ACT, cf_row(c, L) * cf_hold_len(c, w, gf, r, L), t);
        }
}

/* A backward pass P (the backward proper or a statistics pass), band by band in reverse: the
 * recomputed band activations, their workspaces and rebuilt auxiliaries, the band gradients, and
 * (the proper pass) the segment input's gradient. */
static void backward_pass(cf *c, const cf_rows *w, const cf_pass *P, cf_span *gsp, int *owner)
{
    const net *n = c->n;
    int a = w->bs->first, b = w->bs->last, nl = w->nl, src = w->bs->src;
    bool tps = w->gb->policy == BAND_2PS, ms = plan_seg_map_stats(w->seg);
    const band_geom *gb = w->gb;
    for (int r = w->rb - 1; r >= 0; r--) {
        const bool *emit = &P->emit[r * nl], *stat = &P->stat[r * nl];
        for (int L = a; L <= b; L++) {
            const net_layer *l = &n->layers[L];
            int i = L - a, o = cf_out_len(gb, r, i), RF = cf_ph_rr(w, P, r, L, PH_RF), B = cf_ph_rb(w, P, r, L, PH_B);
            if (emit[i]) cf_live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, true), cf_sp(B, B));
            if (!P->need[i]) continue;
            if (o) {
                cf_live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, false), cf_sp(RF, RF));
                bool rebuilt = kind_of(l)->aux_rebuilt && !(ms && kind_of(l)->map_stats);
                int64_t aux = rebuilt ? kind_aux_bytes(n, L, o, (int)c->batch) : 0;
                cf_live(c, MEM_ACT, aux, cf_sp(RF, emit[i] ? B : RF));
            }
            if (l->inplace && l->in[0] >= a) continue;
            cf_span t = cf_span_none(); /* recomputed band activation */
            for (int m = L; m >= 0 && m <= b && P->need[m - a]; m = n->layers[m].inplace_by) {
                int mi = m - a;
                if (tps && r > 0 && cf_keep_len(gb, r - 1, mi)) cf_span_add(&t, cf_ph_rr(w, P, r, m, PH_RCIN));
                if (cf_out_len(gb, r, mi)) cf_span_add(&t, cf_ph_rr(w, P, r, m, PH_RF));
                if (kind_of(&n->layers[m])->keeps_y && emit[mi]) cf_span_add(&t, cf_ph_rb(w, P, r, m, PH_B));
                for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
                    int x = c->cl[j], xi = x - a;
                    if (x == n->layers[m].inplace_by || x > b) continue;
                    if (P->need[xi] && cf_out_len(gb, r, xi)) cf_span_add(&t, cf_ph_rr(w, P, r, x, PH_RF));
                    if ((kind_of(&n->layers[x])->keeps_x && emit[xi]) || stat[xi]) cf_span_add(&t, cf_ph_rb(w, P, r, x, PH_B));
                }
            }
            cf_live(c, MEM_ACT, cf_row(c, L) * cf_hold_len(c, w, gb, r, L), t);
        }
        band_gradients(c, w, P, r, gsp, owner);
        if (P->final && src > 0)
            for (int j = c->cs[src]; j < c->cs[src + 1]; j++)
                if (c->cl[j] >= a && c->cl[j] <= b && emit[c->cl[j] - a])
                    cf_span_add(&c->grad[c->tid[src]], cf_ph_rb(w, P, r, c->cl[j], PH_B));
    }
}

/* Band-level buffers of row segment k, pass by pass: band activations and gradients, boundaries,
 * boundary gradients, auxiliaries, workspaces and whole-map statistics; whole-map gradients of
 * the segment output and input get their band reads and writes in c->grad. */
void cf_rows_lives(cf *c, int k, cf_span *gsp, int *owner)
{
    cf_rows *w = &c->rows[k];
    if (plan_seg_map_stats(w->seg)) map_stats_buffers(c, w);
    for (int q = 0; q < w->nfp; q++) forward_pass(c, w, &w->fp[q]);
    for (int q = 0; q < w->nbp; q++) backward_pass(c, w, &w->bp[q], gsp, owner);
}

/* Which band backward steps of pass P run: band r back-propagates layer L (or gathers its
 * statistics) when it owns output rows of L and L has a gradient — L is the segment output, or
 * a consumer's backward ran in the band, or a boundary gradient arrived. */
static void pass_steps(const cf *c, const cf_rows *w, cf_pass *P)
{
    int nl = w->nl, a = w->bs->first, b = w->bs->last;
    bool tps = w->gb->policy == BAND_2PS;
    P->emit = err_calloc((size_t)w->rb * nl * 4, sizeof(bool));
    P->stat = P->emit + (size_t)w->rb * nl, P->has = P->stat + (size_t)w->rb * nl, P->bgin = P->has + (size_t)w->rb * nl;
    for (int r = w->rb - 1; r >= 0; r--)
        for (int L = b; L >= a; L--) {
            int i = L - a;
            bool runs = !P->bwd || P->bwd[i], target = cf_gathers(P, i);
            if (!runs && !target) continue;
            bool hg = L == b || P->bgin[r * nl + i];
            for (int j = c->cs[L]; j < c->cs[L + 1]; j++)
                if (c->cl[j] <= b && P->emit[r * nl + c->cl[j] - a]) hg = true;
            P->has[r * nl + i] = hg;
            P->emit[r * nl + i] = hg && runs && cf_out_len(w->gb, r, i);
            P->stat[r * nl + i] = hg && target && cf_out_len(w->gb, r, i);
            if (tps && L < b && r > 0 && hg && cf_keep_len(w->gb, r - 1, i)) P->bgin[(r - 1) * nl + i] = true;
        }
}

/* Row segment k: the plan's geometry, its passes (plan_passes) and their steps. */
void cf_rows_init(cf *c, int k)
{
    const net *n = c->n;
    const plan_seg *s = &c->p->segs[k];
    cf_rows *w = &c->rows[k];
    w->seg = s, w->bs = &s->band, w->gf = s->fwd, w->gb = s->bwd, w->pp = &s->passes;
    w->rf = s->fwd->n_bands, w->rb = s->bwd->n_bands, w->nl = s->last - s->first + 1;
    plan_need(n, s->first, s->last, NULL, NULL, NULL, plan_seg_map_stats(s), c->need);
    int nl = w->nl, a = s->first;
    w->nfp = w->pp->n_fwd + 1, w->nbp = w->pp->n_bwd + 1;
    w->fp = err_calloc((size_t)w->nfp, sizeof(cf_pass)), w->bp = err_calloc((size_t)w->nbp, sizeof(cf_pass));
    for (int q = 0; q < w->nfp; q++) {
        cf_pass *P = &w->fp[q];
        P->final = q == w->nfp - 1, P->gather = w->pp->fwd, P->pass = q + 1;
        P->need = err_calloc((size_t)nl, sizeof(bool));
        for (int i = 0; i < nl; i++) P->need[i] = P->final || w->pp->fwd_need[q * nl + i];
    }
    for (int q = 0; q < w->nbp; q++) {
        cf_pass *P = &w->bp[q];
        P->final = q == w->nbp - 1, P->gather = P->final ? NULL : w->pp->bwd, P->pass = q + 1;
        P->bwd = P->final ? NULL : w->pp->bwd_set + q * nl;
        P->need = err_calloc((size_t)nl, sizeof(bool));
        memcpy(P->need, P->final ? c->need + a : w->pp->bwd_need + q * nl, (size_t)nl * sizeof(bool));
        pass_steps(c, w, P);
    }
}

void cf_rows_free(cf_rows *w)
{
    for (int q = 0; q < w->nfp; q++) free(w->fp[q].need);
    for (int q = 0; q < w->nbp; q++) free(w->bp[q].need), free(w->bp[q].emit);
    free(w->fp), free(w->bp);
}
