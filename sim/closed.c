/* closed: the closed-form memory model (the equations of paper/model.md).
 *
 * It never lowers or reads a schedule. From the net, the plan and the band geometry
 * it numbers the phases of one iteration (forward, recompute and backward of every layer; per
 * band and with the boundary copies in row segments) and gives every buffer the scheduler's
 * policy creates a size and a life [born, freed] in phases, by the rules of paper/model.md: an
 * activation lives from its producer to its last reader (forward consumers; the backward readers
 * autograd keeps it for, unless their segment recomputes it; every band of a row segment it
 * feeds), a gradient from its first consumer's backward to its producer's; auxiliaries,
 * workspaces, 2PS boundaries and boundary gradients as listed there; offload cuts a host interval
 * out of a life. The peak is M = P + max over phases of the bytes alive, one prefix sum over
 * O(layers x bands) phases. Not done here: any I/O. */
#include "sim/closed.h"

#include <limits.h>
#include <string.h>

#include "sim/kind.h"

/* Phases number the compute steps of one iteration in time order, from the plan alone: phase 0
 * loads the batch; a full-map segment has one forward phase per layer and, in backward, one
 * recompute phase per layer (ckpt) and one backward phase per layer; a row segment has three
 * forward phases per band and layer (boundary in, compute, boundary out) and five backward ones
 * (boundary in, recompute, gradient boundary in, gradient boundary out, backward). A phase whose
 * step does not run holds a subset of the next phase's buffers, so it never sets the peak. */
enum { PH_CIN, PH_F, PH_COUT };   /* row forward, per band and layer */
enum { PH_RCIN, PH_RF };          /* row recompute */
enum { PH_BGIN, PH_BGOUT, PH_B }; /* row backward */

#define CF_NCAT (MEM_NCAT - MEM_ACT) /* categories that vary by phase: activations .. host */
_Static_assert(MEM_AGRAD == MEM_ACT + 1 && MEM_BOUNDARY == MEM_ACT + 2 && MEM_WORKSPACE == MEM_ACT + 3 &&
                   MEM_HOST == MEM_ACT + 4 && MEM_NCAT == MEM_ACT + 5,
               "the closed form's sweep names the phase categories in mem_cat order");

typedef struct {
    int lo, hi; /* phases [lo, hi]; empty when lo > hi */
} span;

static span span_none(void) { return (span){INT_MAX, -1}; }

static void span_add(span *s, int ph)
{
    if (ph < 0) return;
    if (ph < s->lo) s->lo = ph;
    if (ph > s->hi) s->hi = ph;
}

/* One pass over a row segment's bands (sim/rows.h): the forward or the backward proper, or a
 * statistics pass before it, in phases laid out like the forward (3 per band and layer: CIN, F,
 * COUT; a statistics pass adds one for its STATS_END) or the backward (5: RCIN and RF per layer,
 * then BGIN, BGOUT and B per layer in reverse). A statistics pass's STATS step takes the slot of
 * the layer it gathers for (F forward, B backward), which that pass never computes. */
typedef struct {
    int base;                 /* first phase */
    bool final;               /* the forward or backward proper */
    bool *need;               /* [nl]: computed (forward) or recomputed (backward) */
    const bool *bwd;          /* [nl], backward: back-propagated (NULL: every layer) */
    const int *gather;        /* [nl]: gather[i] == pass: statistics gathered for layer i (NULL: none) */
    int pass;
    bool *emit, *stat, *has, *bgin; /* backward, [band * nl + i]: BWD runs / STATS runs / a gradient
                                       exists / a boundary gradient arrives */
} cf_pass;

typedef struct {
    const band_seg *bs;       /* the plan's segment and geometry (plan_seg) */
    const band_geom *gf, *gb; /* forward and backward geometry (gb is gf unless OverL with fp != bp) */
    int rf, rb, nl;           /* bands forward and backward; layers */
    bool map_stats;           /* whole-map statistics gathered in passes over the bands (plan_seg_map_stats) */
    plan_passes pp;
    int nfp, nbp;             /* forward and backward passes, the proper one last */
    cf_pass *fp, *bp;
} cf_rows;

#define FWD(w) (&(w)->fp[(w)->nfp - 1])
#define BWD(w) (&(w)->bp[(w)->nbp - 1])

typedef struct {
    const net *n;
    const plan *p;
    const sched_cfg *cfg;
    int64_t batch;
    int *seg;                 /* [layer] plan segment (-1: the input) */
    int *tid;                 /* [layer] tensor: the layer itself, or its input's tensor for an in-place relu */
    int *cs, *cl;             /* consumers of layer L: cl[cs[L] .. cs[L + 1]) */
    bool *need;               /* [layer] recomputed in its ckpt or row segment's backward */
    int *fph, *rph, *bph;     /* [layer] full-map phases: forward, recompute, backward (-1: none) */
    cf_rows *rows;            /* [segment] */
    span *grad;               /* [tensor] life of its whole-map activation gradient */
    int n_ph;
    int64_t *d;               /* [(n_ph + 1) * CF_NCAT] bytes allocated at a phase, minus bytes freed before it */
} cf;

static int64_t cf_y(const cf *c, int L)
{
    const net_layer *l = &c->n->layers[L];
    return c->batch * l->c * l->h * l->w * 4;
}

static int64_t cf_row(const cf *c, int L) /* bytes of one row of L's output */
{
    const net_layer *l = &c->n->layers[L];
    return c->batch * l->c * l->w * 4;
}

static void live(cf *c, mem_cat cat, int64_t bytes, span s)
{
    if (bytes <= 0 || s.lo < 0 || s.lo > s.hi) return;
    c->d[(size_t)s.lo * CF_NCAT + cat - MEM_ACT] += bytes;
    c->d[(size_t)(s.hi + 1) * CF_NCAT + cat - MEM_ACT] -= bytes;
}

static span sp(int lo, int hi) { return (span){lo, hi}; }

static int ph_rf(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (r * w->nl + L - w->bs->first) * 3 + k;
}
static int ph_rr(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (w->rb - 1 - r) * 5 * w->nl + (L - w->bs->first) * 2 + k;
}
static int ph_rb(const cf_rows *w, const cf_pass *P, int r, int L, int k)
{
    return P->base + (w->rb - 1 - r) * 5 * w->nl + 2 * w->nl + (w->bs->last - L) * 3 + k;
}
static int ph_end(const cf_rows *w, const cf_pass *P) { return P->base + 3 * w->rf * w->nl; } /* STATS_END */
static bool gathers(const cf_pass *P, int i) { return P->gather && P->gather[i] == P->pass; }

static int out_len(const band_geom *g, int r, int i) { return band_rows_len(g->out[r * g->n_layers + i]); }
static int keep_len(const band_geom *g, int r, int i) { return band_rows_len(g->keep[r * g->n_layers + i]); }

/* Rows of band r's buffer for L's output: its held rows, widened to those of the in-place relus
 * chained on it (band_buffer_rows). */
static band_rows hold_rows(const cf *c, const cf_rows *w, const band_geom *g, int r, int L)
{
    return band_buffer_rows(c->n, g, w->bs, r, L);
}

static int hold_len(const cf *c, const cf_rows *w, const band_geom *g, int r, int L)
{
    return band_rows_len(hold_rows(c, w, g, r, L));
}

/* Reads of a whole-map activation: every phase using it, the earliest backward one (and its
 * layer) and the latest non-backward one before `limit`. */
typedef struct {
    span all;
    int first_bwd, first_layer, limit, before;
} reads;

static void ev(reads *r, int ph, bool bwd, int layer)
{
    if (ph < 0) return;
    span_add(&r->all, ph);
    if (bwd && (r->first_bwd < 0 || ph < r->first_bwd)) r->first_bwd = ph, r->first_layer = layer;
    if (!bwd && ph < r->limit && ph > r->before) r->before = ph;
}

/* Layer x reads an activation made in segment hs: x is an in-place relu on it (member: keeps it as
 * its output) or a consumer (keeps it as input where autograd does). Backward reads the forward
 * copy unless x's segment recomputes it (ckpt and rows recompute their own layers only). */
static void reader(const cf *c, int hs, int x, bool member, reads *r)
{
    int k = c->seg[x];
    const plan_seg *s = &c->p->segs[k];
    const kind_traits *t = kind_of(&c->n->layers[x]);
    bool keeps = member ? t->keeps_y : t->keeps_x;
    if (s->mode == PLAN_ROWS) { /* the segment input: every band reads it, forward and backward */
        const cf_rows *w = &c->rows[k]; /* the proper passes: statistics passes read between them */
        int i = x - w->bs->first;
        for (int b = 0; b < w->rf; b++)
            if (out_len(w->gf, b, i)) ev(r, ph_rf(w, FWD(w), b, x, PH_F), false, x);
        for (int b = 0; b < w->rb; b++) {
            if (c->need[x] && out_len(w->gb, b, i)) ev(r, ph_rr(w, BWD(w), b, x, PH_RF), false, x);
            if (keeps && BWD(w)->emit[b * w->nl + i]) ev(r, ph_rb(w, BWD(w), b, x, PH_B), true, x);
        }
        return;
    }
    ev(r, c->fph[x], false, x);
    bool later = k > hs;
    if (s->mode == PLAN_CKPT && later && c->need[x]) ev(r, c->rph[x], false, x);
    if (keeps && (later || s->mode != PLAN_CKPT)) ev(r, c->bph[x], true, x);
}

/* All reads of the whole-map activation made by layer h (and overwritten by the in-place relus
 * chained on it). */
static void activation_reads(const cf *c, int h, reads *r)
{
    const net *n = c->n;
    int hs = c->seg[h];
    plan_mode hm = hs >= 0 ? c->p->segs[hs].mode : PLAN_CKPT;
    if ((hm == PLAN_LAYER || hm == PLAN_OFFLOAD) && kind_of(&n->layers[h])->keeps_y) ev(r, c->bph[h], true, h);
    for (int m = h; m >= 0; m = n->layers[m].inplace_by) {
        if (m != h) reader(c, hs, m, true, r);
        for (int j = c->cs[m]; j < c->cs[m + 1]; j++)
            if (c->cl[j] != n->layers[m].inplace_by) reader(c, hs, c->cl[j], false, r);
    }
}

/* The backward phase before layer L's: vDNN prefetches one backward step ahead. */
static int prev_bwd(const cf *c, int L)
{
    int k = c->seg[L];
    if (L < c->p->segs[k].last) return c->bph[L + 1];
    if (k + 1 >= c->p->n_seg) return -1;
    const plan_seg *t = &c->p->segs[k + 1];
    if (t->mode != PLAN_ROWS) return c->bph[t->first];
    const cf_rows *w = &c->rows[k + 1];
    for (int x = t->first; x <= t->last; x++)
        if (BWD(w)->emit[x - t->first]) return ph_rb(w, BWD(w), 0, x, PH_B);
    return -1;
}

/* An offloaded buffer: on the device until its last forward use and again from the prefetch,
 * one backward step before its first backward use, to its last. */
static void offloaded(cf *c, int64_t bytes, int birth, int last_fwd, int first_bwd, int layer, int death)
{
    int pf = prev_bwd(c, layer);
    if (pf <= last_fwd) pf = first_bwd;
    live(c, MEM_ACT, bytes, sp(birth, last_fwd));
    live(c, MEM_HOST, bytes, sp(last_fwd + 1, pf - 1));
    live(c, MEM_ACT, bytes, sp(pf, death));
}

/* A whole-map activation: born at `birth`, freed after its last read; offloaded when its first
 * backward read is in an offload segment (offload(conv): a convolution's input). */
static void activation(cf *c, int h, int birth, int64_t bytes)
{
    reads r = {span_none(), -1, -1, -1, -1};
    span_add(&r.all, birth);
    activation_reads(c, h, &r);
    const plan_seg *s = r.first_bwd >= 0 ? &c->p->segs[c->seg[r.first_layer]] : NULL;
    if (!s || s->mode != PLAN_OFFLOAD ||
        (s->offload == PLAN_OFFLOAD_CONV && c->n->layers[r.first_layer].kind != NET_CONV)) {
        live(c, MEM_ACT, bytes, r.all);
        return;
    }
    reads f = {span_none(), -1, -1, r.first_bwd, birth};
    activation_reads(c, h, &f);
    offloaded(c, bytes, birth, f.before, r.first_bwd, r.first_layer, r.all.hi);
}

/* Full-map layer L: auxiliaries (argmax, bn statistics, loss probabilities), the recomputed
 * activation of a checkpointed segment, and workspaces. */
static void full_layer(cf *c, int L)
{
    const net *n = c->n;
    const net_layer *l = &n->layers[L];
    const plan_seg *s = &c->p->segs[c->seg[L]];
    bool ckpt = s->mode == PLAN_CKPT, rec = ckpt && c->need[L];
    int F = c->fph[L], R = rec ? c->rph[L] : -1, B = c->bph[L];
    const kind_traits *k = kind_of(l);
    int64_t ws = sched_cfg_workspace(c->cfg, n, L, l->h, false), aux = k->aux_rebuilt ? kind_aux_bytes(n, L, l->h, (int)c->batch) : 0;
    live(c, MEM_WORKSPACE, ws, sp(F, F));
    live(c, MEM_WORKSPACE, ws, sp(R, R));
    live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, l->h, true), sp(B, B));
    if (k->aux == KIND_AUX_PROBS) /* never recomputed: backward reads the forward's probabilities */
        live(c, MEM_ACT, kind_aux_bytes(n, L, l->h, (int)c->batch), sp(F, B));
    if (k->labels) live(c, MEM_ACT, c->batch * 8, sp(0, B));
    if (aux && !ckpt && s->mode == PLAN_OFFLOAD && s->offload == PLAN_OFFLOAD_ALL) offloaded(c, aux, F, F, B, L, B);
    else if (aux && !ckpt) live(c, MEM_ACT, aux, sp(F, B));
    else if (aux && !k->aux_optional) live(c, MEM_ACT, aux, sp(F, F)); /* written, then unused: backward rebuilds it */
    live(c, MEM_ACT, aux, sp(R, B));
    if (!rec || c->tid[L] != L) return;
    span a = sp(R, R); /* the recomputed activation and the in-place relus on it */
    for (int m = L; m >= 0 && m <= s->last; m = n->layers[m].inplace_by) {
        span_add(&a, c->rph[m]);
        if (kind_of(&n->layers[m])->keeps_y) span_add(&a, c->bph[m]);
        for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
            int x = c->cl[j];
            if (x == n->layers[m].inplace_by || x > s->last) continue;
            if (c->need[x]) span_add(&a, c->rph[x]);
            if (kind_of(&n->layers[x])->keeps_x) span_add(&a, c->bph[x]);
        }
    }
    live(c, MEM_ACT, cf_y(c, L), a);
}

/* Band r's activation gradients in one backward pass P of row segment w (backward geometry): each
 * layer's band buffer lives from the first write (a consumer's backward, or an arriving 2PS
 * boundary gradient) to its own backward (or STATS) or the boundary gradient it hands on; the
 * segment output's is the whole-map one. An in-place relu whose backward runs hands its gradient
 * buffer to its input when that buffer has exactly the rows the input's own would: the segment
 * output's whole-map gradient only in a band holding the whole map; inside the segment, unless a
 * relu further along the chain holds rows (2PS boundary) that this one does not. */
static void band_gradients(cf *c, const cf_rows *w, const cf_pass *P, int r, span *gsp, int *owner)
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
            band_rows have = o == b ? (band_rows){0, n->layers[b].h} : hold_rows(c, w, gb, r, o);
            band_rows want = hold_rows(c, w, gb, r, L);
            if (have.a == want.a && have.b == want.b) owner[i] = o;
        }
        gsp[i] = span_none();
        if (!P->has[r * nl + i]) continue;
        span *t = owner[i] == b ? &c->grad[c->tid[b]] : &gsp[owner[i] - a];
        for (int j = c->cs[L]; j < c->cs[L + 1]; j++)
            if (c->cl[j] <= b && emit[c->cl[j] - a]) span_add(t, ph_rb(w, P, r, c->cl[j], PH_B));
        if (P->bgin[r * nl + i]) span_add(t, ph_rb(w, P, r, L, PH_BGIN));
        if (tps && L < b && r > 0 && keep_len(gb, r - 1, i)) {
            span_add(t, ph_rb(w, P, r, L, PH_BGOUT));
            live(c, MEM_BOUNDARY, cf_row(c, L) * keep_len(gb, r - 1, i),
                 sp(ph_rb(w, P, r, L, PH_BGOUT), ph_rb(w, P, r - 1, L, PH_BGIN)));
        }
        if (emit[i] || stat[i]) span_add(t, ph_rb(w, P, r, L, PH_B));
    }
    for (int L = a; L < b; L++)
        if (owner[L - a] == L) live(c, MEM_AGRAD, cf_row(c, L) * hold_len(c, w, gb, r, L), gsp[L - a]);
}

/* The segment's whole-map statistics (sched: rows.c), per bn: its mean and inverse std from the
 * first STATS of its forward pass to its last use in the backward proper; the forward sums from
 * that STATS to the pass's STATS_END; the gradient sums from the first STATS of its backward pass
 * to its last backward in the backward proper. */
static void map_stats_buffers(cf *c, const cf_rows *w)
{
    const net *n = c->n;
    int a = w->bs->first;
    const cf_pass *F = FWD(w), *B = BWD(w);
    for (int L = a; L <= w->bs->last; L++) {
        int i = L - a, fq = w->pp.fwd[i], bq = w->pp.bwd[i];
        if (!fq) continue;
        const cf_pass *P = &w->fp[fq - 1], *Q = &w->bp[bq - 1];
        span st = span_none(), fs = span_none(), bs = span_none();
        for (int r = 0; r < w->rf; r++)
            if (band_rows_len(band_own(w->gf, w->bs, r, L, n->layers[L].h))) span_add(&fs, ph_rf(w, P, r, L, PH_F));
        span_add(&fs, ph_end(w, P));
        for (int r = 0; r < w->rb; r++) {
            if (Q->stat[r * w->nl + i]) span_add(&bs, ph_rb(w, Q, r, L, PH_B));
            if (B->emit[r * w->nl + i]) span_add(&bs, ph_rb(w, B, r, L, PH_B)), span_add(&st, ph_rb(w, B, r, L, PH_B));
            if (B->need[i] && out_len(w->gb, r, i)) span_add(&st, ph_rr(w, B, r, L, PH_RF));
        }
        for (int r = 0; r < w->rf; r++)
            if (out_len(w->gf, r, i)) span_add(&st, ph_rf(w, F, r, L, PH_F));
        span_add(&st, fs.lo);
        live(c, MEM_ACT, kind_aux_bytes(n, L, 0, (int)c->batch), st);
        live(c, MEM_ACT, 16 * (int64_t)n->layers[L].c, fs);
        live(c, MEM_ACT, 16 * (int64_t)n->layers[L].c, bs);
    }
}

/* A forward pass P (the forward proper or a statistics pass): band activations, workspaces,
 * auxiliaries the backward rebuilds, and 2PS boundaries — the proper forward's kept until the
 * backward proper's recompute of the next band, a statistics pass's only for its own next band. */
static void forward_pass(cf *c, const cf_rows *w, const cf_pass *P)
{
    const net *n = c->n;
    int a = w->bs->first, b = w->bs->last;
    bool tps = w->gf->policy == BAND_2PS, ms = w->map_stats;
    const band_geom *gf = w->gf;
    for (int r = 0; r < w->rf; r++)
        for (int L = a; L <= b; L++) {
            const net_layer *l = &n->layers[L];
            int i = L - a, o = out_len(gf, r, i), F = ph_rf(w, P, r, L, PH_F);
            if (!P->need[i]) continue;
            if (o) {
                live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, false), sp(F, F));
                bool own_stats = !(ms && kind_of(l)->map_stats); /* else the segment's (map_stats_buffers) */
                if (kind_of(l)->aux && !kind_of(l)->aux_optional && own_stats) /* written, then rebuilt for backward */
                    live(c, MEM_ACT, kind_aux_bytes(n, L, o, (int)c->batch), sp(F, F));
            }
            if (tps && r + 1 < w->rf && keep_len(gf, r, i)) { /* boundary rows for band r + 1 */
                int until = P->final && c->need[L] ? ph_rr(w, BWD(w), r + 1, L, PH_RCIN) : ph_rf(w, P, r + 1, L, PH_CIN);
                live(c, MEM_BOUNDARY, cf_row(c, L) * keep_len(gf, r, i), sp(ph_rf(w, P, r, L, PH_COUT), until));
            }
            if (L == b || (l->inplace && l->in[0] >= a)) continue;
            span t = span_none(); /* band activation of L and the in-place relus on it (not b: `out`) */
            for (int m = L; m >= 0 && m < b && P->need[m - a]; m = n->layers[m].inplace_by) {
                int mi = m - a;
                if (tps && r > 0 && keep_len(gf, r - 1, mi)) span_add(&t, ph_rf(w, P, r, m, PH_CIN));
                if (out_len(gf, r, mi)) span_add(&t, ph_rf(w, P, r, m, PH_F));
                if (tps && r + 1 < w->rf && keep_len(gf, r, mi)) span_add(&t, ph_rf(w, P, r, m, PH_COUT));
                for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
                    int x = c->cl[j], xi = x - a;
                    if ((x == n->layers[m].inplace_by && x < b) || x > b) continue;
                    if (P->need[xi] && out_len(gf, r, xi)) span_add(&t, ph_rf(w, P, r, x, PH_F));
                    if (gathers(P, xi) && band_rows_len(band_own(gf, w->bs, r, x, n->layers[x].h)))
                        span_add(&t, ph_rf(w, P, r, x, PH_F)); /* its STATS reads it */
                }
            }
            live(c, MEM_ACT, cf_row(c, L) * hold_len(c, w, gf, r, L), t);
        }
}

/* A backward pass P (the backward proper or a statistics pass), band by band in reverse: the
 * recomputed band activations, their workspaces and rebuilt auxiliaries, the band gradients, and
 * (the proper pass) the segment input's gradient. */
static void backward_pass(cf *c, const cf_rows *w, const cf_pass *P, span *gsp, int *owner)
{
    const net *n = c->n;
    int a = w->bs->first, b = w->bs->last, nl = w->nl, src = w->bs->src;
    bool tps = w->gb->policy == BAND_2PS, ms = w->map_stats;
    const band_geom *gb = w->gb;
    for (int r = w->rb - 1; r >= 0; r--) {
        const bool *emit = &P->emit[r * nl], *stat = &P->stat[r * nl];
        for (int L = a; L <= b; L++) {
            const net_layer *l = &n->layers[L];
            int i = L - a, o = out_len(gb, r, i), RF = ph_rr(w, P, r, L, PH_RF), B = ph_rb(w, P, r, L, PH_B);
            if (emit[i]) live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, true), sp(B, B));
            if (!P->need[i]) continue;
            if (o) {
                live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, o, false), sp(RF, RF));
                bool rebuilt = kind_of(l)->aux_rebuilt && !(ms && kind_of(l)->map_stats);
                int64_t aux = rebuilt ? kind_aux_bytes(n, L, o, (int)c->batch) : 0;
                live(c, MEM_ACT, aux, sp(RF, emit[i] ? B : RF));
            }
            if (l->inplace && l->in[0] >= a) continue;
            span t = span_none(); /* recomputed band activation */
            for (int m = L; m >= 0 && m <= b && P->need[m - a]; m = n->layers[m].inplace_by) {
                int mi = m - a;
                if (tps && r > 0 && keep_len(gb, r - 1, mi)) span_add(&t, ph_rr(w, P, r, m, PH_RCIN));
                if (out_len(gb, r, mi)) span_add(&t, ph_rr(w, P, r, m, PH_RF));
                if (kind_of(&n->layers[m])->keeps_y && emit[mi]) span_add(&t, ph_rb(w, P, r, m, PH_B));
                for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
                    int x = c->cl[j], xi = x - a;
                    if (x == n->layers[m].inplace_by || x > b) continue;
                    if (P->need[xi] && out_len(gb, r, xi)) span_add(&t, ph_rr(w, P, r, x, PH_RF));
                    if ((kind_of(&n->layers[x])->keeps_x && emit[xi]) || stat[xi]) span_add(&t, ph_rb(w, P, r, x, PH_B));
                }
            }
            live(c, MEM_ACT, cf_row(c, L) * hold_len(c, w, gb, r, L), t);
        }
        band_gradients(c, w, P, r, gsp, owner);
        if (P->final && src > 0)
            for (int j = c->cs[src]; j < c->cs[src + 1]; j++)
                if (c->cl[j] >= a && c->cl[j] <= b && emit[c->cl[j] - a])
                    span_add(&c->grad[c->tid[src]], ph_rb(w, P, r, c->cl[j], PH_B));
    }
}

/* Band-level buffers of row segment k, pass by pass: band activations and gradients, boundaries,
 * boundary gradients, auxiliaries, workspaces and whole-map statistics; whole-map gradients of
 * the segment output and input get their band reads and writes in c->grad. */
static void rows_layers(cf *c, int k, span *gsp, int *owner)
{
    cf_rows *w = &c->rows[k];
    if (w->map_stats) map_stats_buffers(c, w);
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
            bool runs = !P->bwd || P->bwd[i], target = gathers(P, i);
            if (!runs && !target) continue;
            bool hg = L == b || P->bgin[r * nl + i];
            for (int j = c->cs[L]; j < c->cs[L + 1]; j++)
                if (c->cl[j] <= b && P->emit[r * nl + c->cl[j] - a]) hg = true;
            P->has[r * nl + i] = hg;
            P->emit[r * nl + i] = hg && runs && out_len(w->gb, r, i);
            P->stat[r * nl + i] = hg && target && out_len(w->gb, r, i);
            if (tps && L < b && r > 0 && hg && keep_len(w->gb, r - 1, i)) P->bgin[(r - 1) * nl + i] = true;
        }
}

/* Row segment k: the plan's geometry, its passes (plan_passes) and their steps. */
static void rows_init(cf *c, int k)
{
    const net *n = c->n;
    const plan_seg *s = &c->p->segs[k];
    cf_rows *w = &c->rows[k];
    w->bs = &s->band, w->gf = s->fwd, w->gb = s->bwd;
    w->rf = s->fp, w->rb = s->bwd->n_bands, w->nl = s->last - s->first + 1;
    w->map_stats = plan_seg_map_stats(c->p, n, k);
    plan_passes_init(&w->pp, c->p, n, k);
    plan_need(n, s->first, s->last, NULL, NULL, w->map_stats, c->need);
    int nl = w->nl, a = s->first;
    w->nfp = w->pp.n_fwd + 1, w->nbp = w->pp.n_bwd + 1;
    w->fp = err_calloc((size_t)w->nfp, sizeof(cf_pass)), w->bp = err_calloc((size_t)w->nbp, sizeof(cf_pass));
    bool *bwd = err_calloc((size_t)n->n, sizeof(bool)), *extra = err_calloc((size_t)n->n, sizeof(bool));
    bool *need = err_calloc((size_t)n->n, sizeof(bool));
    for (int q = 0; q < w->nfp; q++) {
        cf_pass *P = &w->fp[q];
        P->final = q == w->nfp - 1, P->gather = w->pp.fwd, P->pass = q + 1;
        P->need = err_calloc((size_t)nl, sizeof(bool));
        for (int i = 0; i < nl; i++) P->need[i] = P->final || w->pp.fwd_need[q * nl + i];
    }
    for (int q = 0; q < w->nbp; q++) {
        cf_pass *P = &w->bp[q];
        P->final = q == w->nbp - 1, P->gather = P->final ? NULL : w->pp.bwd, P->pass = q + 1;
        P->bwd = P->final ? NULL : w->pp.bwd_set + q * nl;
        P->need = err_calloc((size_t)nl, sizeof(bool));
        if (P->final) {
            memcpy(P->need, c->need + a, (size_t)nl * sizeof(bool));
        } else { /* it recomputes what its backward keeps and the inputs of the layers it gathers for */
            for (int i = 0; i < nl; i++) {
                bwd[a + i] = P->bwd[i];
                if (w->pp.bwd[i] == q + 1) extra[n->layers[a + i].in[0]] = true;
            }
            plan_need(n, s->first, s->last, bwd, extra, w->map_stats, need);
            memcpy(P->need, need + a, (size_t)nl * sizeof(bool));
            memset(extra, 0, (size_t)n->n * sizeof(bool));
        }
        pass_steps(c, w, P);
    }
    free(bwd), free(extra), free(need);
}

static void rows_free(cf_rows *w)
{
    for (int q = 0; q < w->nfp; q++) free(w->fp[q].need);
    for (int q = 0; q < w->nbp; q++) free(w->bp[q].need), free(w->bp[q].emit);
    free(w->fp), free(w->bp);
    plan_passes_free(&w->pp);
}

/* Consumer lists, tensor ids and the segment of every layer. */
static void cf_init(cf *c, const net *n, const plan *p, const sched_cfg *cfg)
{
    int nn = n->n, n_in = 0;
    *c = (cf){.n = n, .p = p, .cfg = cfg, .batch = cfg->batch};
    for (int L = 0; L < nn; L++) n_in += n->layers[L].n_in;
    int *ints = err_calloc((size_t)nn * 6 + 1 + (size_t)n_in, sizeof(int));
    c->seg = ints, c->tid = ints + nn, c->fph = ints + 2 * nn, c->rph = ints + 3 * nn, c->bph = ints + 4 * nn;
    c->cs = ints + 5 * nn, c->cl = ints + 6 * nn + 1;
    c->need = err_calloc((size_t)nn, sizeof(bool));
    c->rows = err_calloc((size_t)p->n_seg, sizeof(cf_rows));
    c->grad = err_calloc((size_t)nn, sizeof(span));
    for (int L = 0; L < nn; L++) {
        const net_layer *l = &n->layers[L];
        c->tid[L] = l->inplace ? c->tid[l->in[0]] : L;
        c->fph[L] = c->rph[L] = c->bph[L] = c->seg[L] = -1;
        c->grad[L] = span_none();
        for (int j = 0; j < l->n_in; j++) c->cs[l->in[j] + 1]++;
    }
    for (int L = 0; L < nn; L++) c->cs[L + 1] += c->cs[L];
    int *fill = err_calloc((size_t)nn, sizeof(int));
    for (int L = 0; L < nn; L++)
        for (int j = 0; j < n->layers[L].n_in; j++) c->cl[c->cs[n->layers[L].in[j]] + fill[n->layers[L].in[j]]++] = L;
    free(fill);
    for (int i = 0; i < p->n_seg; i++)
        for (int L = p->segs[i].first; L <= p->segs[i].last; L++) c->seg[L] = i;
}

/* Numbers the phases: forward through the segments, then backward in reverse (paper/model.md). */
static void cf_phases(cf *c)
{
    const plan *p = c->p;
    int ph = 1;
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *s = &p->segs[i];
        if (s->mode == PLAN_ROWS) {
            cf_rows *w = &c->rows[i];
            rows_init(c, i);
            for (int q = 0; q < w->nfp; q++) w->fp[q].base = ph, ph += 3 * w->rf * w->nl + !w->fp[q].final;
            continue;
        }
        if (s->mode == PLAN_CKPT) plan_need(c->n, s->first, s->last, NULL, NULL, false, c->need);
        for (int L = s->first; L <= s->last; L++) c->fph[L] = ph++;
    }
    for (int i = p->n_seg - 1; i >= 0; i--) {
        const plan_seg *s = &p->segs[i];
        if (s->mode == PLAN_ROWS) {
            cf_rows *w = &c->rows[i];
            for (int q = 0; q < w->nbp; q++) w->bp[q].base = ph, ph += 5 * w->rb * w->nl;
            continue;
        }
        if (s->mode == PLAN_CKPT)
            for (int L = s->first; L <= s->last; L++) c->rph[L] = c->need[L] ? ph++ : -1;
        for (int L = s->last; L >= s->first; L--) c->bph[L] = ph++;
    }
    c->n_ph = ph;
}

/* Every buffer's bytes and life, into the difference array c->d. */
static void cf_lifetimes(cf *c)
{
    const net *n = c->n;
    const plan *p = c->p;
    int nn = n->n, maxnl = 0;
    c->d = err_calloc(((size_t)c->n_ph + 1) * CF_NCAT, sizeof(int64_t));
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS && c->rows[i].nl > maxnl) maxnl = c->rows[i].nl;
    span *gsp = err_calloc((size_t)maxnl + 1, sizeof(span));
    int *owner = err_calloc((size_t)maxnl + 1, sizeof(int));
    /* whole-map activations: the image, each full-map tensor, each row segment's output */
    activation(c, 0, 0, cf_y(c, 0));
    for (int L = 1; L < nn; L++) {
        const plan_seg *s = &p->segs[c->seg[L]];
        if (s->mode == PLAN_ROWS) {
            if (L == s->last) activation(c, L, ph_rf(&c->rows[c->seg[L]], FWD(&c->rows[c->seg[L]]), 0, L, PH_F), cf_y(c, L));
            continue;
        }
        if (c->tid[L] == L) activation(c, L, c->fph[L], cf_y(c, L));
        full_layer(c, L);
    }
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) rows_layers(c, i, gsp, owner);
    /* whole-map gradients: from the first consumer's backward to the producer's */
    for (int T = 1; T < nn; T++) {
        if (c->tid[T] != T) continue;
        bool consumed = false;
        for (int q = T; q >= 0; q = n->layers[q].inplace_by) {
            if (p->segs[c->seg[q]].mode != PLAN_ROWS) span_add(&c->grad[T], c->bph[q]);
            for (int j = c->cs[q]; j < c->cs[q + 1]; j++) {
                int x = c->cl[j];
                if (x == n->layers[q].inplace_by) continue;
                consumed = true;
                if (p->segs[c->seg[x]].mode != PLAN_ROWS) span_add(&c->grad[T], c->bph[x]);
            }
        }
        if (consumed) live(c, MEM_AGRAD, cf_y(c, T), c->grad[T]);
    }
    free(gsp), free(owner);
}

/* (1): the persistent bytes plus the largest sum over phases, with its breakdown. */
static void cf_sweep(const cf *c, sim_mem *m)
{
    const net *n = c->n;
    int opt = c->cfg->optimizer == SCHED_ADAM ? 2 : 1;
    int64_t base[MEM_NCAT] = {0}, best = -1;
    for (int L = 0; L < n->n; L++) {
        base[MEM_WEIGHTS] += n->layers[L].params * 4 + (kind_of(&n->layers[L])->running ? 8 * (int64_t)n->layers[L].c : 0);
        base[MEM_WGRAD] += n->layers[L].params * 4;
        base[MEM_OPTIM] += n->layers[L].params * 4 * opt;
    }
    for (int k = MEM_WEIGHTS; k <= MEM_OPTIM; k++) m->max[k] = base[k];
    /* the phase categories (activations .. host) in locals, so the sweep stays in registers */
    int64_t act = 0, agr = 0, bnd = 0, wsp = 0, hst = 0;
    int64_t mact = 0, magr = 0, mbnd = 0, mwsp = 0, mhst = 0;
    for (int f = 0; f < c->n_ph; f++) {
        const int64_t *row = &c->d[(size_t)f * CF_NCAT];
        act += row[0], agr += row[1], bnd += row[2], wsp += row[3], hst += row[4];
        mact = act > mact ? act : mact, magr = agr > magr ? agr : magr, mbnd = bnd > mbnd ? bnd : mbnd;
        mwsp = wsp > mwsp ? wsp : mwsp, mhst = hst > mhst ? hst : mhst;
        if (act + agr + bnd + wsp > best) {
            best = act + agr + bnd + wsp;
            m->at_peak[MEM_ACT] = act, m->at_peak[MEM_AGRAD] = agr, m->at_peak[MEM_BOUNDARY] = bnd;
            m->at_peak[MEM_WORKSPACE] = wsp, m->at_peak[MEM_HOST] = hst;
        }
    }
    m->max[MEM_ACT] = mact, m->max[MEM_AGRAD] = magr, m->max[MEM_BOUNDARY] = mbnd, m->max[MEM_WORKSPACE] = mwsp;
    m->max[MEM_HOST] = mhst;
    for (int k = MEM_WEIGHTS; k <= MEM_OPTIM; k++) m->at_peak[k] = base[k];
    m->peak = best + base[MEM_WEIGHTS] + base[MEM_WGRAD] + base[MEM_OPTIM];
}

void closed_predict(const net *n, const plan *p, const sched_cfg *cfg, sim_mem *m)
{
    memset(m, 0, sizeof *m);
    m->peak_step = -1;
    cf c;
    cf_init(&c, n, p, cfg);
    cf_phases(&c);
    cf_lifetimes(&c);
    cf_sweep(&c, m);
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) rows_free(&c.rows[i]);
    free(c.seg), free(c.need), free(c.rows), free(c.grad), free(c.d);
}
