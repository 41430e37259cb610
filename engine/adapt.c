/* adapt: see adapt.h. */
#include "engine/adapt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void adapt_init(adapt *a, const net *n, const plan *p, const sched *s)
{
    memset(a, 0, sizeof *a);
    const enc_mod *m = plan_lossy(p);
    if (!m || m->format != ENC_ZFP_ACC || !(m->adapt > 0)) return;
    a->target = m->adapt, a->every = m->every;
    a->src = err_calloc((size_t)s->n_buf, sizeof(int));
    a->reads = err_calloc((size_t)n->n, sizeof(int));
    for (int b = 0; b < s->n_buf; b++) a->src[b] = -1;
    for (int L = 0; L < n->n; L++) a->reads[L] = -1;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op == SCHED_DECODE && s->bufs[t->src].enc == ENC_ZFP_ACC) a->src[t->dst] = s->bufs[t->src].layer;
    }
    double **arrays[] = {&a->dy2, &a->used, &a->bound, &a->window, &a->model_err, &a->goal};
    for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) *arrays[k] = err_calloc((size_t)n->n, sizeof(double));
    a->pgrad = err_calloc((size_t)n->n, sizeof(int));
    for (int L = 0; L < n->n; L++) a->model_err[L] = -1, a->pgrad[L] = -1;
    for (int b = 0; b < s->n_buf; b++)
        if (s->bufs[b].kind == BUF_PGRAD) a->pgrad[s->bufs[b].layer] = b;
}

void adapt_free(adapt *a)
{
    free(a->src), free(a->reads), free(a->dy2), free(a->used), free(a->bound), free(a->window), free(a->model_err);
    free(a->goal), free(a->pgrad);
    memset(a, 0, sizeof *a);
}

/* Inputs per output of a layer with weights (conv: C_in k^2; fc: its input features), 0 for others. */
static int64_t fan_in(const net_layer *l)
{
    if (l->kind == NET_CONV) return l->params / l->c - (l->u.conv.bias ? 1 : 0);
    if (l->kind == NET_FC) return l->params / l->c - (l->u.fc.bias ? 1 : 0);
    return 0;
}

void adapt_backward(adapt *a, const ops_table *ops, const net *n, const sched *s, const sched_step *t, const float *dy)
{
    if (!a->target || !t->n_x || t->x[0] < 0 || a->src[t->x[0]] < 0 || !fan_in(&n->layers[t->layer])) return;
    const net_layer *l = &n->layers[t->layer];
    const sched_buf *db = &s->bufs[t->dy];
    int64_t held = db->rows.b - db->rows.a, rows = t->rows.b - t->rows.a;
    a->reads[t->layer] = a->src[t->x[0]];
    a->dy2[t->layer] += ops->sumsq(dy + (int64_t)(t->rows.a - db->rows.a) * l->w, held * l->w, (int64_t)s->batch * l->c, rows * l->w);
}

void adapt_update(adapt *a, const ops_table *ops, const net *n, void *const *ptr)
{
    if (!a->target) return;
    double *target = a->goal;
    for (int P = 0; P < n->n; P++) a->model_err[P] = -1, target[P] = 0;
    for (int L = 0; L < n->n; L++) {
        int P = a->reads[L];
        if (P < 0 || !(a->dy2[L] > 0) || a->pgrad[L] < 0) continue;
        const float *dW = ptr[a->pgrad[L]]; /* weights first, then the bias */
        double K = (double)fan_in(&n->layers[L]), dw = sqrt(ops->sumsq(dW, 0, 1, (int64_t)K * n->layers[L].c));
        double gain = sqrt(K * a->dy2[L]); /* |error of dW| per unit RMS error of the map */
        if (!(dw > 0)) continue;
        double t = sqrt(3.0) * a->target * dw / gain, err = a->used[P] / sqrt(3.0) * gain / dw;
        if (!target[P] || t < target[P]) target[P] = t;
        if (err > a->model_err[P]) a->model_err[P] = err;
    }
    a->iters++;
    for (int P = 0; P < n->n; P++) {
        a->window[P] += target[P];
        if (a->iters == a->every && a->window[P] > 0) a->bound[P] = a->window[P] / a->iters, a->window[P] = 0;
    }
    if (a->iters == a->every) a->iters = 0;
    memset(a->dy2, 0, (size_t)n->n * sizeof(double));
    memset(a->used, 0, (size_t)n->n * sizeof(double));
}
