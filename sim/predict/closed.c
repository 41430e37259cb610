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
 * O(layers x bands) phases. Row segments, pass by pass, are closed_rows.c's. Not done here: I/O. */
#include "sim/predict/closed.h"

#include <limits.h>
#include <string.h>

#include "sim/predict/closed_rows.h"
#include "sim/net/kind.h"

/* Reads of a whole-map activation: every phase using it, the earliest backward one (and its
 * layer), the earliest recompute in the backward pass (and its layer) and the latest forward one
 * before `limit`. */
typedef struct {
    cf_span all;
    int first_bwd, first_layer, limit, before, first_rec, rec_layer;
} reads;

typedef enum { READ_FWD, READ_BWD, READ_REC } read_kind; /* REC: a recompute, in the backward pass */

static void ev(reads *r, int ph, read_kind k, int layer)
{
    if (ph < 0) return;
    cf_span_add(&r->all, ph);
    if (k == READ_BWD && (r->first_bwd < 0 || ph < r->first_bwd)) r->first_bwd = ph, r->first_layer = layer;
    if (k == READ_REC && (r->first_rec < 0 || ph < r->first_rec)) r->first_rec = ph, r->rec_layer = layer;
    if (k == READ_FWD && ph < r->limit && ph > r->before) r->before = ph;
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
            if (cf_out_len(w->gf, b, i)) ev(r, cf_ph_rf(w, CF_FWD(w), b, x, PH_F), READ_FWD, x);
        for (int b = 0; b < w->rb; b++) {
            if (c->need[x] && cf_out_len(w->gb, b, i)) ev(r, cf_ph_rr(w, CF_BWD(w), b, x, PH_RF), READ_REC, x);
            if (keeps && CF_BWD(w)->emit[b * w->nl + i]) ev(r, cf_ph_rb(w, CF_BWD(w), b, x, PH_B), READ_BWD, x);
        }
        return;
    }
    ev(r, c->fph[x], READ_FWD, x);
    bool later = k > hs;
    if (s->mode == PLAN_CKPT && later && c->need[x]) ev(r, c->rph[x], READ_REC, x);
    if (keeps && (later || s->mode != PLAN_CKPT)) ev(r, c->bph[x], READ_BWD, x);
}

/* All reads of the whole-map activation made by layer h (and overwritten by the in-place relus
 * chained on it). */
static void activation_reads(const cf *c, int h, reads *r)
{
    const net *n = c->n;
    int hs = c->seg[h];
    plan_mode hm = hs >= 0 ? c->p->segs[hs].mode : PLAN_CKPT;
    if ((hm == PLAN_LAYER || hm == PLAN_OFFLOAD) && kind_of(&n->layers[h])->keeps_y) ev(r, c->bph[h], READ_BWD, h);
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
        if (CF_BWD(w)->emit[x - t->first]) return cf_ph_rb(w, CF_BWD(w), 0, x, PH_B);
    return -1;
}

/* An offloaded buffer: on the device until its last forward use and again from the prefetch, one
 * backward step before its first use in the backward pass (sim/lower/stash.c) — a backward read of
 * `layer` at first_bwd, or a recompute of `rec_layer`'s segment at first_rec when that comes
 * first (a checkpointed or row segment whose first layer keeps nothing of it) — to its last. */
static void offloaded(cf *c, int64_t bytes, int birth, int last_fwd, const reads *r, int death)
{
    bool rec = r->first_rec >= 0 && r->first_rec < r->first_bwd;
    int first = rec ? r->first_rec : r->first_bwd;
    int pf = rec ? prev_bwd(c, c->p->segs[c->seg[r->rec_layer]].last) : prev_bwd(c, r->first_layer);
    if (pf <= last_fwd) pf = first;
    cf_live(c, MEM_ACT, bytes, cf_sp(birth, last_fwd));
    cf_live(c, MEM_HOST, bytes, cf_sp(last_fwd + 1, pf - 1));
    cf_live(c, MEM_ACT, bytes, cf_sp(pf, death));
}

/* A whole-map activation: born at `birth`, freed after its last read; offloaded when its first
 * backward read is in an offload segment (offload(conv): a convolution's input). */
static void activation(cf *c, int h, int birth, int64_t bytes)
{
    reads r = {cf_span_none(), -1, -1, -1, -1, -1, -1};
    cf_span_add(&r.all, birth);
    activation_reads(c, h, &r);
    const plan_seg *s = r.first_bwd >= 0 ? &c->p->segs[c->seg[r.first_layer]] : NULL;
    if (!s || s->mode != PLAN_OFFLOAD ||
        (s->offload == PLAN_OFFLOAD_CONV && c->n->layers[r.first_layer].kind != NET_CONV)) {
        cf_live(c, MEM_ACT, bytes, r.all);
        return;
    }
    int limit = r.first_rec >= 0 && r.first_rec < r.first_bwd ? r.first_rec : r.first_bwd; /* the backward pass's first use */
    reads f = {cf_span_none(), -1, -1, limit, birth, -1, -1};
    activation_reads(c, h, &f);
    offloaded(c, bytes, birth, f.before, &r, r.all.hi);
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
    cf_live(c, MEM_WORKSPACE, ws, cf_sp(F, F));
    cf_live(c, MEM_WORKSPACE, ws, cf_sp(R, R));
    cf_live(c, MEM_WORKSPACE, sched_cfg_workspace(c->cfg, n, L, l->h, true), cf_sp(B, B));
    if (k->aux == KIND_AUX_PROBS) /* never recomputed: backward reads the forward's probabilities */
        cf_live(c, MEM_ACT, kind_aux_bytes(n, L, l->h, (int)c->batch), cf_sp(F, B));
    if (k->labels) cf_live(c, MEM_ACT, c->batch * net_labels_per_image(n) * 8, cf_sp(0, B));
    if (aux && !ckpt && s->mode == PLAN_OFFLOAD && s->offload == PLAN_OFFLOAD_ALL) offloaded(c, aux, F, F, &(reads){.first_bwd = B, .first_layer = L, .first_rec = -1}, B);
    else if (aux && !ckpt) cf_live(c, MEM_ACT, aux, cf_sp(F, B));
    else if (aux && !k->aux_optional) cf_live(c, MEM_ACT, aux, cf_sp(F, F)); /* written, then unused: backward rebuilds it */
    cf_live(c, MEM_ACT, aux, cf_sp(R, B));
    if (!rec || c->tid[L] != L) return;
    cf_span a = cf_sp(R, R); /* the recomputed activation and the in-place relus on it */
    for (int m = L; m >= 0 && m <= s->last; m = n->layers[m].inplace_by) {
        cf_span_add(&a, c->rph[m]);
        if (kind_of(&n->layers[m])->keeps_y) cf_span_add(&a, c->bph[m]);
        for (int j = c->cs[m]; j < c->cs[m + 1]; j++) {
            int x = c->cl[j];
            if (x == n->layers[m].inplace_by || x > s->last) continue;
            if (c->need[x]) cf_span_add(&a, c->rph[x]);
            if (kind_of(&n->layers[x])->keeps_x) cf_span_add(&a, c->bph[x]);
        }
    }
    cf_live(c, MEM_ACT, cf_y(c, L), a);
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
    c->grad = err_calloc((size_t)nn, sizeof(cf_span));
    for (int L = 0; L < nn; L++) {
        const net_layer *l = &n->layers[L];
        c->tid[L] = l->inplace ? c->tid[l->in[0]] : L;
        c->fph[L] = c->rph[L] = c->bph[L] = c->seg[L] = -1;
        c->grad[L] = cf_span_none();
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

/* Phases number the compute steps of one iteration in time order, from the plan alone: phase 0
 * loads the batch; a full-map segment has one forward phase per layer and, in backward, one
 * recompute phase per layer (ckpt) and one backward phase per layer; a row segment has three
 * forward phases per band and layer (boundary in, compute, boundary out) and five backward ones
 * (boundary in, recompute, gradient boundary in, gradient boundary out, backward). A phase whose
 * step does not run holds a subset of the next phase's buffers, so it never sets the peak.
 * Row segments number theirs pass by pass (closed_rows.h). */
static void cf_phases(cf *c)
{
    const plan *p = c->p;
    int ph = 1;
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *s = &p->segs[i];
        if (s->mode == PLAN_ROWS) {
            cf_rows *w = &c->rows[i];
            cf_rows_init(c, i);
            for (int q = 0; q < w->nfp; q++) w->fp[q].base = ph, ph += 3 * w->rf * w->nl + !w->fp[q].final;
            continue;
        }
        if (s->mode == PLAN_CKPT) plan_need(c->n, s->first, s->last, NULL, NULL, NULL, false, c->need);
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
    cf_span *gsp = err_calloc((size_t)maxnl + 1, sizeof(cf_span));
    int *owner = err_calloc((size_t)maxnl + 1, sizeof(int));
    /* whole-map activations: the image, each full-map tensor, each row segment's output */
    activation(c, 0, 0, cf_y(c, 0));
    for (int L = 1; L < nn; L++) {
        const plan_seg *s = &p->segs[c->seg[L]];
        if (s->mode == PLAN_ROWS) {
            if (L == s->last) activation(c, L, cf_ph_rf(&c->rows[c->seg[L]], CF_FWD(&c->rows[c->seg[L]]), 0, L, PH_F), cf_y(c, L));
            continue;
        }
        if (c->tid[L] == L) activation(c, L, c->fph[L], cf_y(c, L));
        full_layer(c, L);
    }
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) cf_rows_lives(c, i, gsp, owner);
    /* whole-map gradients: from the first consumer's backward to the producer's */
    for (int T = 1; T < nn; T++) {
        if (c->tid[T] != T) continue;
        bool consumed = false;
        for (int q = T; q >= 0; q = n->layers[q].inplace_by) {
            if (p->segs[c->seg[q]].mode != PLAN_ROWS) cf_span_add(&c->grad[T], c->bph[q]);
            for (int j = c->cs[q]; j < c->cs[q + 1]; j++) {
                int x = c->cl[j];
                if (x == n->layers[q].inplace_by) continue;
                consumed = true;
                if (p->segs[c->seg[x]].mode != PLAN_ROWS) cf_span_add(&c->grad[T], c->bph[x]);
            }
        }
        if (consumed) cf_live(c, MEM_AGRAD, cf_y(c, T), c->grad[T]);
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
        base[MEM_WEIGHTS] += n->layers[L].params * 4 + (kind_of(&n->layers[L])->running ? kind_running_bytes(&n->layers[L]) : 0);
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
        if (p->segs[i].mode == PLAN_ROWS) cf_rows_free(&c.rows[i]);
    free(c.seg), free(c.need), free(c.rows), free(c.grad), free(c.d);
}
