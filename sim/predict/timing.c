/* timing: see timing.h. */
#include "sim/predict/timing.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/net/kind.h"

/* Lookups already made for one net: the entry (key or class) each (layer, variant) found and how,
 * so that predicting a schedule builds each key once rather than once a step. */
struct timing_memo {
    const net *n;
    char name[NET_NAME_LEN];
    int layers, c, h, w;
    const timing_entry **entry;
    signed char *how;     /* -1: not looked up yet */
};

/* FWD, BWD and the statistics steps of a layer: keyed by what the layer is, sized by rows × batch. */
static void probe_layer(const net *n, const sched_step *t, timing_probe *p)
{
    const net_layer *l = &n->layers[t->layer], *in = l->n_in ? &n->layers[l->in[0]] : l;
    const char *what = t->op == SCHED_STATS ? (t->dy >= 0 ? "stats_dy" : "stats_x") : sched_op_name(t->op);
    char h[16] = "", flags[48] = "";
    if (!l->rowwise) snprintf(h, sizeof h, " h%d", in->h); /* whole maps: its cost depends on them */
    size_t f = 0;
    if (l->n_in > 1) f += (size_t)snprintf(flags + f, sizeof flags - f, " in%d", l->n_in);
    if (l->inplace) f += (size_t)snprintf(flags + f, sizeof flags - f, " ip");
    if (l->kind == NET_CONV && l->u.conv.groups > 1) f += (size_t)snprintf(flags + f, sizeof flags - f, " g%d", l->u.conv.groups);
    if (t->map_stats) f += (size_t)snprintf(flags + f, sizeof flags - f, " ms");
    if (t->op == SCHED_BWD && kind_of(l)->product && t->dx[0] < 0) snprintf(flags + f, sizeof flags - f, " nodx");
    const char *kind = kind_name(l->kind);
    snprintf(p->key, sizeof p->key, "%s %s %dx%d>%dx%d k%d s%d p%d%s%s", what, kind, in->c, in->w, l->c, l->w, l->win.k,
             l->win.s, l->win.p, h, flags);
    snprintf(p->cls, sizeof p->cls, "%s %s", what, kind);
}

/* A step's sizes: x along its key, work along its class. */
static void probe_size(const sched *s, const sched_step *t, double *x, double *work)
{
    const sched_buf *sb = t->buf >= 0 ? &s->bufs[t->buf] : NULL;
    switch (t->op) {
    case SCHED_FWD:
    case SCHED_BWD:
    case SCHED_STATS:
    case SCHED_STATS_END:
        *x = t->op == SCHED_STATS_END ? 1 : (double)(t->rows.b - t->rows.a) * s->batch;
        *work = t->flops > 0 ? t->flops : t->bytes_moved > 0 ? t->bytes_moved : *x;
        return;
    case SCHED_ALLOC:
    case SCHED_FREE:
    case SCHED_OFFLOAD:
    case SCHED_PREFETCH: *x = (double)sb->bytes; break;
    case SCHED_ENCODE: *x = (double)s->bufs[t->src].bytes; break;
    case SCHED_DECODE: *x = (double)s->bufs[t->dst].bytes; break;
    case SCHED_LOAD: *x = (double)s->bufs[t->y].bytes; break;
    case SCHED_COPY:
    case SCHED_UPDATE: *x = t->bytes_moved; break;
    }
    *work = *x;
}

void timing_probe_step(const net *n, const sched *s, const sched_step *t, timing_probe *p)
{
    const sched_buf *sb = t->buf >= 0 ? &s->bufs[t->buf] : NULL;
    memset(p, 0, sizeof *p);
    probe_size(s, t, &p->x, &p->work);
    switch (t->op) {
    case SCHED_FWD:
    case SCHED_BWD:
    case SCHED_STATS:
    case SCHED_STATS_END: probe_layer(n, t, p); return;
    case SCHED_ALLOC:
    case SCHED_FREE: {
        /* the engine takes persistent buffers once, and data-sized encodings' at their ENCODE */
        bool apart = sb->persistent || (sb->kind == BUF_ENC && enc_data_sized(sb->enc));
        snprintf(p->key, sizeof p->key, "%s%s", sched_op_name(t->op),
                 apart ? " kept" : t->op == SCHED_ALLOC && sb->zero ? " zero" : "");
        break;
    }
    case SCHED_OFFLOAD:
    case SCHED_PREFETCH:
        snprintf(p->key, sizeof p->key, "%s", sched_op_name(t->op));
        break;
    case SCHED_ENCODE:
    case SCHED_DECODE: {
        const sched_buf *enc = &s->bufs[t->op == SCHED_ENCODE ? t->dst : t->src];
        snprintf(p->key, sizeof p->key, "%s %s", sched_op_name(t->op), enc_name(enc->enc));
        break;
    }
    case SCHED_LOAD:
        snprintf(p->key, sizeof p->key, "%s", sched_op_name(t->op));
        break;
    case SCHED_COPY:
    case SCHED_UPDATE:
        snprintf(p->key, sizeof p->key, "%s%s", sched_op_name(t->op), t->op == SCHED_COPY && t->acc ? " acc" : "");
        break;
    }
    snprintf(p->cls, sizeof p->cls, "%.*s", TIMING_CLS_LEN - 1, p->key);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const timing_entry *)a)->name, ((const timing_entry *)b)->name);
}

static int sample_by(const void *a, const void *b, bool cls)
{
    const timing_sample *x = a, *y = b;
    return strcmp(cls ? x->cls : x->key, cls ? y->cls : y->key);
}
static int sample_by_key(const void *a, const void *b) { return sample_by(a, b, false); }
static int sample_by_cls(const void *a, const void *b) { return sample_by(a, b, true); }

/* Least squares of us = a + b x over v[0..n); through the origin when the x are all equal (or a
 * line would start below zero), so that a key measured at one size scales with its size. */
static void fit_line(const timing_sample *v, int n, timing_entry *out)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0, x0 = v[0].x;
    bool one_x = true;
    for (int i = 0; i < n; i++) {
        sx += v[i].x, sy += v[i].us, sxx += v[i].x * v[i].x, sxy += v[i].x * v[i].us;
        one_x = one_x && v[i].x == x0;
    }
    double det = n * sxx - sx * sx;
    out->a = 0, out->b = 0, out->n = n;
    if (!one_x && det > 0) {
        out->b = (n * sxy - sx * sy) / det;
        out->a = (sy - out->b * sx) / n;
    }
    if (one_x || det <= 0 || out->a < 0 || out->b < 0) {
        out->a = 0;
        out->b = sxx > 0 ? sxy / sxx : 0;
        if (sxx <= 0) out->a = sy / n; /* size zero: a constant */
    }
}

/* One entry per distinct key (or class) of v, which is sorted by it. */
static int group(timing_sample *v, int n, bool cls, timing_entry **out)
{
    *out = err_calloc((size_t)n + 1, sizeof **out);
    int k = 0;
    for (int i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && sample_by(&v[i], &v[j], cls) == 0; j++) {}
        timing_entry *t = &(*out)[k++];
        t->name = err_strdup(cls ? v[i].cls : v[i].key);
        if (!cls) {
            fit_line(v + i, j - i, t);
            continue;
        }
        double us = 0, work = 0;
        for (int m = i; m < j; m++) us += v[m].us, work += v[m].work;
        t->b = work > 0 ? us / work : 0, t->n = j - i;
    }
    return k;
}

void timing_fit(timing_model *m, const timing_sample *v, int n)
{
    timing_sample *w = err_calloc((size_t)n + 1, sizeof *w);
    memcpy(w, v, (size_t)n * sizeof *w);
    qsort(w, (size_t)n, sizeof *w, sample_by_key);
    m->n_key = group(w, n, false, &m->keys);
    qsort(w, (size_t)n, sizeof *w, sample_by_cls);
    m->n_cls = group(w, n, true, &m->cls);
    free(w);
    m->memo = err_calloc(1, sizeof *m->memo);
}

/* Which of its kinds a step is, beyond its layer: a layer step's op and flags (the rest of its key
 * is the layer's), or for the others a number of their own (*layer = -1). Two steps of the same
 * (layer, variant) have the same key. */
enum { LAYER_VARIANTS = 5 * 4, GLOBAL_VARIANTS = 11 + 2 * ENC_NKIND };
static int step_variant(const net *n, const sched *s, const sched_step *t, int *layer)
{
    *layer = -1;
    const sched_buf *sb = t->buf >= 0 ? &s->bufs[t->buf] : NULL;
    switch (t->op) {
    case SCHED_FWD:
    case SCHED_BWD:
    case SCHED_STATS:
    case SCHED_STATS_END: {
        int op = t->op == SCHED_FWD ? 0 : t->op == SCHED_BWD ? 1 : t->op == SCHED_STATS_END ? 4 : t->dy >= 0 ? 3 : 2;
        bool nodx = t->op == SCHED_BWD && kind_of(&n->layers[t->layer])->product && t->dx[0] < 0;
        *layer = t->layer;
        return op * 4 + (t->map_stats ? 2 : 0) + nodx;
    }
    case SCHED_ALLOC:
    case SCHED_FREE: {
        bool apart = sb->persistent || (sb->kind == BUF_ENC && enc_data_sized(sb->enc));
        return t->op == SCHED_FREE ? 3 + apart : apart ? 2 : sb->zero;
    }
    case SCHED_OFFLOAD: return 5;
    case SCHED_PREFETCH: return 6;
    case SCHED_LOAD: return 7;
    case SCHED_COPY: return 8 + t->acc;
    case SCHED_UPDATE: return 10;
    case SCHED_ENCODE: return 11 + (int)s->bufs[t->dst].enc;
    case SCHED_DECODE: return 11 + ENC_NKIND + (int)s->bufs[t->src].enc;
    }
    return 0;
}

static void memo_reset(timing_memo *mm, const net *n)
{
    free(mm->entry), free(mm->how);
    size_t slots = (size_t)n->n * LAYER_VARIANTS + GLOBAL_VARIANTS;
    mm->n = n, mm->layers = n->n, mm->c = n->layers[0].c, mm->h = n->layers[0].h, mm->w = n->layers[0].w;
    snprintf(mm->name, sizeof mm->name, "%s", n->name);
    mm->entry = err_calloc(slots, sizeof *mm->entry);
    mm->how = err_calloc(slots, 1);
    memset(mm->how, -1, slots);
}

static const timing_entry *find(const timing_entry *t, int n, const char *name);

void timing_memo_use(const timing_model *m, const net *n)
{
    timing_memo *mm = m->memo;
    const net_layer *in = &n->layers[0];
    if (mm->n != n || mm->layers != n->n || mm->c != in->c || mm->h != in->h || mm->w != in->w || strcmp(mm->name, n->name))
        memo_reset(mm, n); /* another net, or this one at another input size */
}

double timing_sched_step_us(const timing_model *m, const net *n, const sched *s, const sched_step *t, double roofline_us,
                            timing_how *how)
{
    timing_memo *mm = m->memo;
    CHECK(mm->n == n); /* timing_memo_use */
    int layer, v = step_variant(n, s, t, &layer);
    size_t slot = layer >= 0 ? (size_t)layer * LAYER_VARIANTS + (size_t)v : (size_t)n->n * LAYER_VARIANTS + (size_t)v;
    if (mm->how[slot] < 0) {
        timing_probe p;
        timing_probe_step(n, s, t, &p);
        const timing_entry *k = find(m->keys, m->n_key, p.key), *c = k ? NULL : find(m->cls, m->n_cls, p.cls);
        mm->entry[slot] = k ? k : c;
        mm->how[slot] = (signed char)(k ? TIMING_FITTED : c ? TIMING_CLASS : TIMING_ROOFLINE);
    }
    double x = 0, work = 0;
    probe_size(s, t, &x, &work);
    *how = (timing_how)mm->how[slot];
    const timing_entry *e = mm->entry[slot];
    if (*how == TIMING_FITTED) return e->a + e->b * x > 0 ? e->a + e->b * x : 0;
    if (*how == TIMING_CLASS) return e->b * work;
    return roofline_us;
}

timing_model timing_share(const timing_model *m)
{
    timing_model v = *m;
    v.memo = err_calloc(1, sizeof *v.memo);
    return v;
}

static void memo_free(timing_model *m)
{
    if (m->memo) free(m->memo->entry), free(m->memo->how), free(m->memo);
    m->memo = NULL;
}

void timing_unshare(timing_model *view) { memo_free(view); }

double timing_margin(const timing_model *m) { return 1.2816 * sqrt(2.0) / 0.6745 * m->error; }

void timing_free(timing_model *m)
{
    memo_free(m);
    for (int i = 0; i < m->n_key; i++) free(m->keys[i].name);
    for (int i = 0; i < m->n_cls; i++) free(m->cls[i].name);
    free(m->keys), free(m->cls);
    m->keys = m->cls = NULL, m->n_key = m->n_cls = 0;
}

static const timing_entry *find(const timing_entry *t, int n, const char *name)
{
    timing_entry k = {.name = (char *)name};
    return n ? bsearch(&k, t, (size_t)n, sizeof *t, by_name) : NULL;
}

double timing_step_us(const timing_model *m, const timing_probe *p, double roofline_us, timing_how *how)
{
    const timing_entry *k = find(m->keys, m->n_key, p->key);
    if (k) {
        *how = TIMING_FITTED;
        double us = k->a + k->b * p->x;
        return us > 0 ? us : 0;
    }
    const timing_entry *c = find(m->cls, m->n_cls, p->cls);
    if (c) {
        *how = TIMING_CLASS;
        return c->b * p->work;
    }
    *how = TIMING_ROOFLINE;
    return roofline_us;
}
