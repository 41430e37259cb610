/* sim: replay of schedules and the closed-form memory model (equations in paper/model.md).
 *
 * The closed form never looks at a schedule. It works on tensors: a layer's output, identified
 * with its producer's when a relu runs in place. Autograd's rules (FACTS.md) say which tensors a
 * layer keeps for backward; a kept tensor lives until its lowest-index reader's backward. With
 * y(t) the bytes of tensor t, P the persistent bytes and g(L) the gradient working set of layer L:
 *   layer    M = P + max( S_all + a,  max_L [ S_{<=L} + g(L) ] )
 *   ckpt     each checkpointed segment keeps only its input; its recompute-and-backward is a layer
 *            segment on top of what earlier segments keep
 *   offload  kept tensors live on the host; device holds those of the layer at hand and the one
 *            prefetched for the next
 *   rows     the segment keeps its input and (2PS) every band's boundary; each band's recompute is
 *            a layer segment scaled to the band's rows, on top of the full output gradient and
 *            the segment-input gradient
 * and M is the maximum over segments of (what earlier segments keep + the segment's own peak). */
#include "sim.h"

#include <string.h>

const sim_device sim_device_cpu = {"cpu", 60.0, 10.0, 10.0};
const sim_device sim_device_h100 = {"h100", 40000.0, 2500.0, 25.0};

const sim_device *sim_device_find(const char *name)
{
    if (!strcmp(name, "cpu")) return &sim_device_cpu;
    if (!strcmp(name, "h100")) return &sim_device_h100;
    return NULL;
}

void sim_replay(const sched *s, sim_mem *m, int64_t *timeline)
{
    memset(m, 0, sizeof *m);
    int64_t cur[MEM_NCAT] = {0}, total = 0;
    bool *on_host = err_calloc((size_t)s->n_buf, sizeof(bool));
    m->peak_step = -1;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op == SCHED_ALLOC || t->op == SCHED_FREE || t->op == SCHED_OFFLOAD || t->op == SCHED_PREFETCH) {
            const sched_buf *b = &s->bufs[t->buf];
            int64_t sign = t->op == SCHED_ALLOC || t->op == SCHED_PREFETCH ? 1 : -1;
            if (t->op == SCHED_FREE && on_host[t->buf]) {
                cur[MEM_HOST] -= b->bytes;
            } else {
                cur[b->cat] += sign * b->bytes;
                total += sign * b->bytes;
                if (t->op == SCHED_OFFLOAD || t->op == SCHED_PREFETCH) {
                    cur[MEM_HOST] -= sign * b->bytes;
                    on_host[t->buf] = t->op == SCHED_OFFLOAD;
                }
            }
            for (int c = 0; c < MEM_NCAT; c++)
                if (cur[c] > m->max[c]) m->max[c] = cur[c];
            if (total > m->peak) {
                m->peak = total;
                m->peak_step = i;
                memcpy(m->at_peak, cur, sizeof cur);
            }
        }
        if (timeline) timeline[i] = total;
    }
    free(on_host);
}

/* --- closed form ------------------------------------------------------------------------------ */

typedef struct {
    const net *n;
    const sched_cfg *cfg;
    int *tid;      /* tensor of each layer's output */
    int *minr;     /* lowest layer index whose backward reads tensor t (n: none) */
} cf;

static int64_t ybytes(const cf *c, int L, int rows)
{
    const net_layer *l = &c->n->layers[L];
    return (int64_t)c->cfg->batch * l->c * rows * l->w * 4;
}

/* Bytes layer L's backward needs from the forward pass, placed at the backward step where they
 * are freed (the lowest-index reader of a tensor; a layer's own argmax, statistics and
 * probabilities at that layer), scaled by scale[L] for bands (NULL: whole maps). */
static void kept_at(const cf *c, int first, int last, const double *scale, int64_t *at)
{
    const net *n = c->n;
    for (int L = first; L <= last; L++) at[L] = 0;
    for (int L = first; L <= last; L++) {
        const net_layer *l = &n->layers[L];
        double f = scale ? scale[L] : 1.0;
        if (c->tid[L] == L && c->minr[L] >= first && c->minr[L] <= last) at[c->minr[L]] += (int64_t)(f * (double)ybytes(c, L, l->h));
        if (l->kind == NET_MAXPOOL) at[L] += (int64_t)(f * 2.0 * (double)ybytes(c, L, l->h));
        if (l->kind == NET_BN) at[L] += 2 * (int64_t)l->c * 4;
        if (l->kind == NET_LOSS) at[L] += (int64_t)c->cfg->batch * (l->c * 4 + 8);
    }
}

/* All bytes the segment [first, last] keeps from its forward pass. */
static int64_t kept(const cf *c, int first, int last, int64_t *at)
{
    kept_at(c, first, last, NULL, at);
    int64_t s = 0;
    for (int L = first; L <= last; L++) s += at[L];
    return s;
}

/* Gradient working set of layer L's backward: dY, the input gradients it creates, workspace. */
static int64_t gwork(const cf *c, int L, double f)
{
    const net_layer *l = &c->n->layers[L];
    int64_t g = l->kind == NET_LOSS ? 0 : (int64_t)(f * (double)ybytes(c, L, l->h));
    for (int j = 0; j < l->n_in; j++) {
        const net_layer *p = &c->n->layers[l->in[j]];
        if (p->kind != NET_INPUT && !l->inplace) g += (int64_t)(f * (double)ybytes(c, l->in[j], p->h));
    }
    return g + sched_workspace_bytes(c->n, L, (int)(f * l->h + 0.5));
}

/* Peak of the backward pass over [first, last]: max_L kept(<= L) + g(L), one prefix sum. */
static int64_t layer_peak(const cf *c, int first, int last, const double *scale, int64_t *at)
{
    kept_at(c, first, last, scale, at);
    int64_t peak = 0, below = 0;
    for (int L = first; L <= last; L++) {
        below += at[L];
        int64_t v = below + gwork(c, L, scale ? scale[L] : 1.0);
        if (v > peak) peak = v;
    }
    return peak;
}

int sim_closed(const net *n, const plan *p, const sched_cfg *cfg, sim_mem *m, err *e)
{
    memset(m, 0, sizeof *m);
    m->peak_step = -1;
    cf c = {n, cfg, err_calloc((size_t)n->n, sizeof(int)), err_calloc((size_t)n->n, sizeof(int))};
    for (int L = 0; L < n->n; L++) {
        c.tid[L] = n->layers[L].inplace ? c.tid[n->layers[L].in[0]] : L;
        c.minr[L] = n->n;
    }
    for (int L = n->n - 1; L >= 1; L--) {
        const net_layer *l = &n->layers[L];
        if (sched_bwd_keeps_x(l->kind))
            for (int j = 0; j < l->n_in; j++) c.minr[c.tid[l->in[j]]] = L < c.minr[c.tid[l->in[j]]] ? L : c.minr[c.tid[l->in[j]]];
        if (sched_bwd_keeps_y(l->kind)) c.minr[c.tid[L]] = L < c.minr[c.tid[L]] ? L : c.minr[c.tid[L]];
    }
    c.minr[0] = 1; /* the image lives until the first layer's backward */
    int opt = cfg->optimizer == SCHED_ADAM ? 2 : 1;
    for (int L = 0; L < n->n; L++) {
        m->at_peak[MEM_WEIGHTS] += n->layers[L].params * 4 + (n->layers[L].kind == NET_BN ? 8 * (int64_t)n->layers[L].c : 0);
        m->at_peak[MEM_WGRAD] += n->layers[L].params * 4;
        m->at_peak[MEM_OPTIM] += n->layers[L].params * 4 * opt;
    }
    int64_t persistent = m->at_peak[MEM_WEIGHTS] + m->at_peak[MEM_WGRAD] + m->at_peak[MEM_OPTIM];
    int64_t held = ybytes(&c, 0, n->layers[0].h); /* kept by the segments before the current one */
    int64_t best = 0, best_act = 0, best_bound = 0, host = 0, bounds_total = 0;
    int64_t *keep = err_calloc((size_t)p->n_seg, sizeof(int64_t));
    double *scale = err_calloc((size_t)n->n, sizeof(double));
    int64_t *at = err_calloc((size_t)n->n, sizeof(int64_t));
    int rc = 0;
    for (int i = 0; i < p->n_seg && !rc; i++) {
        const plan_seg *s = &p->segs[i];
        int64_t own = 0, bnd = 0;
        if (s->mode == PLAN_LAYER) {
            keep[i] = kept(&c, s->first, s->last, at);
            own = layer_peak(&c, s->first, s->last, NULL, at);
        } else if (s->mode == PLAN_CKPT) {
            keep[i] = ybytes(&c, s->last, n->layers[s->last].h);
            own = layer_peak(&c, s->first, s->last, NULL, at) + keep[i];
        } else if (s->mode == PLAN_OFFLOAD) {
            host += kept(&c, s->first, s->last, at);
            for (int L = s->last; L >= s->first; L--) {
                const net_layer *l = &n->layers[L];
                int64_t here = ybytes(&c, L, l->h) + (L > s->first ? ybytes(&c, L - 1, n->layers[L - 1].h) : 0);
                for (int j = 0; j < l->n_in; j++) here += ybytes(&c, l->in[j], n->layers[l->in[j]].h);
                int64_t v = here + gwork(&c, L, 1.0);
                if (v > own) own = v;
            }
            keep[i] = ybytes(&c, s->last, n->layers[s->last].h);
        } else {
            band_seg bs;
            band_geom g;
            int *cuts = err_calloc((size_t)s->bp + (size_t)s->fp + 2, sizeof(int));
            rc = band_seg_init(&bs, n, s->first, s->last, e);
            int R = s->policy == BAND_2PS ? s->fp : s->bp;
            if (!rc && s->cuts && R == s->fp) memcpy(cuts, s->cuts, ((size_t)s->fp + 1) * sizeof(int));
            else if (!rc) rc = band_cuts_default(n, &bs, s->policy, R, cuts, e);
            if (!rc) rc = band_geom_init(&g, n, &bs, s->policy, cuts, R, e);
            free(cuts);
            if (rc) break;
            for (int r = 0; r < R; r++)
                for (int L = s->first; L <= s->last; L++) {
                    band_rows k = g.keep[r * g.n_layers + L - s->first];
                    if (s->policy == BAND_2PS && r + 1 < R) bnd += ybytes(&c, L, band_rows_len(k));
                }
            int64_t full_io = ybytes(&c, s->last, n->layers[s->last].h) * 2 + ybytes(&c, bs.src, n->layers[bs.src].h);
            for (int r = 0; r < R; r++) {
                for (int L = s->first; L <= s->last; L++) {
                    band_rows h = band_held(&g, &bs, r, L);
                    scale[L] = (double)band_rows_len(h) / n->layers[L].h;
                }
                int64_t v = layer_peak(&c, s->first, s->last, scale, at) + full_io;
                if (v > own) own = v;
            }
            band_geom_free(&g);
            keep[i] = ybytes(&c, s->last, n->layers[s->last].h) + bnd;
            bounds_total += bnd;
            own += bnd;
        }
        int64_t v = held + own;
        if (v > best) best = v, best_act = v - bnd, best_bound = bnd;
        held += keep[i];
    }
    if (!rc) {
        m->peak = persistent + best;
        m->at_peak[MEM_ACT] = best_act;
        m->at_peak[MEM_BOUNDARY] = best_bound;
        m->at_peak[MEM_HOST] = host;
        m->max[MEM_BOUNDARY] = bounds_total;
        m->max[MEM_HOST] = host;
        for (int k = MEM_WEIGHTS; k <= MEM_OPTIM; k++) m->max[k] = m->at_peak[k];
        m->max[MEM_ACT] = best_act;
    }
    free(keep), free(scale), free(at), free(c.tid), free(c.minr);
    return rc;
}

double sim_time_us(const sched *s, const sim_device *d)
{
    double us = 0;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        double bw = t->op == SCHED_OFFLOAD || t->op == SCHED_PREFETCH ? d->link_gbps : d->gbps;
        double compute = t->flops / (d->gflops * 1e3), memory = t->bytes_moved / (bw * 1e3);
        us += compute > memory ? compute : memory;
    }
    return us;
}

int sim_run(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, sim_result *r, int64_t **timeline,
            err *e)
{
    memset(r, 0, sizeof *r);
    sched s;
    if (sched_lower(&s, n, p, cfg, e)) return -1;
    if (timeline) *timeline = err_calloc((size_t)s.n_step + 1, sizeof(int64_t));
    sim_replay(&s, &r->replay, timeline ? *timeline : NULL);
    r->flops = s.flops;
    r->time_us = sim_time_us(&s, d);
    r->n_steps = s.n_step;
    sched_free(&s);
    return sim_closed(n, p, cfg, &r->closed, e);
}
