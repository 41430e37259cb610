/* ops_case: see ops_case.h. */
#include "tests/ops_case.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/act.h"
#include "sim/lower/sched.h"
#include "sim/net/kind.h"
#include "sim/net/load.h"

int oc_failures;

worst oc_w_fd, oc_w_band_fwd, oc_w_band_bwd, oc_w_ref, oc_w_opt;

/* Fails where |got - want| > rtol * |want| + atol * max|want|. */
void oc_compare(worst *acc, const char *what, const float *got, const float *want, int64_t n, double atol,
                    double rtol)
{
    double scale = 0.0, max_abs = 0.0, max_rel = 0.0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    int64_t bad = 0, unequal = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]), rel = d / fmax(fabs(want[i]), 1e-30);
        if (isnan(d)) d = rel = INFINITY;
        unequal += got[i] != want[i];
        max_abs = fmax(max_abs, d), max_rel = fmax(max_rel, rel);
        if (!(d <= rtol * fabs(want[i]) + atol * scale)) {
            if (bad < 5)
                fprintf(stderr, "  %s[%lld]: got %.9g want %.9g (diff %.3g)\n", what, (long long)i, got[i], want[i], d);
            bad++;
        }
    }
    printf("%-6s %-46s max abs %.3e  max rel %.3e  %s%s\n", bad ? "FAIL" : "ok", what, max_abs, max_rel,
           unequal ? "" : "(bitwise) ", bad ? "<--" : "");
    if (bad) oc_failures++;
    acc->abs = fmax(acc->abs, max_abs), acc->rel = fmax(acc->rel, max_rel);
}

void oc_expect(bool ok, const char *what)
{
    if (!ok) {
        printf("FAIL   %s\n", what);
        oc_failures++;
    }
}

/* --- random numbers ---------------------------------------------------------------------------- */

static unsigned long long rng = 0x2545F4914F6CDD1Dull;
double oc_urand(void) /* [0, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}
float oc_frand(float lo, float hi) { return lo + (hi - lo) * (float)oc_urand(); }


int64_t oc_ten_len(const ten *t) { return (int64_t)t->n * t->c * t->h * t->w; }

ten oc_ten_new(int n, int c, int h, int w, int row0)
{
    ten t = {.p = calloc((size_t)n * c * h * w, sizeof(float)), .n = n, .c = c, .h = h, .w = w, .row0 = row0};
    if (!t.p) abort();
    return t;
}

/* Input values: relu inputs keep |x| >= 0.05 (5 steps from the kink); maxpool inputs are a
 * shuffled grid 0.03 apart (no two within a step of each other). */
static void fill_input(ten *t, net_kind k)
{
    int64_t n = oc_ten_len(t);
    for (int64_t i = 0; i < n; i++) {
        float v = oc_frand(-1.0f, 1.0f);
        if ((k == NET_RELU || k == NET_RELU6 || k == NET_LEAKY) && fabsf(v) < 0.05f) v += v < 0 ? -0.05f : 0.05f;
        if (k == NET_RELU6) v *= 8.0f; /* across both kinks, 0 and 6 (|x| >= 0.4 from 0; from 6 below) */
        if (k == NET_RELU6 && fabsf(v - 6.0f) < 0.4f) v += v < 6.0f ? -0.4f : 0.4f;
        if (k == NET_HSWISH) v *= 5.0f; /* across -3 and 3, where its slope jumps */
        if (k == NET_HSWISH && fabsf(fabsf(v) - 3.0f) < 0.25f) v += fabsf(v) < 3.0f ? -copysignf(0.25f, v) : copysignf(0.25f, v);
        /* lnorm over as few as 3 channels: spread them 1.5 apart, so that no place's variance is small
         * enough for a step of FD_EPS to leave the linear range */
        if (k == NET_LNORM) v += 1.5f * (float)((i / ((int64_t)t->h * t->w)) % t->c);
        t->p[i] = v;
    }
    if (k == NET_MAXPOOL) {
        for (int64_t i = 0; i < n; i++) t->p[i] = 0.03f * (float)(i - n / 2);
        for (int64_t i = n - 1; i > 0; i--) {
            int64_t j = (int64_t)(oc_urand() * (double)(i + 1));
            float s = t->p[i];
            t->p[i] = t->p[j], t->p[j] = s;
        }
    }
}

/* The net is `text`; the layer under test is called "t". An input may repeat an earlier one (add t
 * in=a,b,a): it is that tensor, and its gradient arrives in the first place's dx (net_input_first). */
void oc_init(lcase *k, const char *text, int N, ops_bn bn)
{
    err e;
    memset(k, 0, sizeof *k);
    if (net_parse(&k->net, text, "test", &e)) {
        fprintf(stderr, "test net: %s\n", e.msg);
        exit(1);
    }
    k->L = net_find(&k->net, "t");
    k->l = &k->net.layers[k->L];
    k->n_in = k->l->n_in;
    k->bn = bn;
    for (int j = 0; j < k->n_in; j++) {
        const net_layer *p = &k->net.layers[k->l->in[j]];
        if (net_input_repeats(k->l, j)) {
            k->x[j] = k->x[net_input_first(k->l, j)];
            continue;
        }
        k->x[j] = oc_ten_new(N, p->c, p->h, p->w, 0);
        k->dx[j] = oc_ten_new(N, p->c, p->h, p->w, 0);
        fill_input(&k->x[j], k->l->kind);
    }
    k->y = oc_ten_new(N, k->l->c, k->l->h, k->l->w, 0);
    k->r = calloc((size_t)oc_ten_len(&k->y), sizeof(float));
    for (int64_t i = 0; i < oc_ten_len(&k->y); i++) k->r[i] = oc_frand(-1.0f, 1.0f);
    k->dy = k->y;
    k->dy.p = k->l->kind == NET_LOSS ? NULL : k->r;
    k->nw = k->l->params;
    k->w = calloc((size_t)k->nw + 1, sizeof(float));
    k->dw = calloc((size_t)k->nw + 1, sizeof(float));
    for (int64_t i = 0; i < k->nw; i++) k->w[i] = oc_frand(-1.0f, 1.0f);
    int C = k->l->c;
    if (k->l->kind == NET_BN) /* gamma around 1, beta small */
        for (int ch = 0; ch < C; ch++) k->w[ch] = oc_frand(0.5f, 1.5f), k->w[C + ch] = oc_frand(-0.5f, 0.5f);
    k->argmax = calloc((size_t)oc_ten_len(&k->y), sizeof(int64_t));
    k->mask = calloc((size_t)oc_ten_len(&k->y), 1);
    k->stats = calloc(2 * (size_t)C + (size_t)kind_aux_bytes(&k->net, k->L, k->l->h, N) / 4, sizeof(float)); /* bn's, or gnorm's, lnorm's */
    k->running = calloc(2 * (size_t)C, sizeof(float));
    for (int ch = 0; ch < C; ch++) k->running[ch] = oc_frand(-0.3f, 0.3f), k->running[C + ch] = oc_frand(0.5f, 1.5f);
    k->probs = calloc((size_t)oc_ten_len(&k->x[0]), sizeof(float));
    /* when t is the loss: a class for each of its places (one, or H*W per pixel) */
    int64_t places = (int64_t)k->l->h * k->l->w, classes = k->l->kind == NET_LOSS ? k->l->c : 1;
    k->labels = calloc((size_t)(N * places), sizeof(int64_t));
    for (int64_t i = 0; i < N * places; i++) k->labels[i] = (int64_t)(oc_urand() * (double)classes);
    int64_t ws = sched_workspace_bytes(&k->net, k->L, k->l->h, N);
    k->ws = ws ? malloc((size_t)ws) : NULL, k->ws_bytes = ws;
}

void oc_free(lcase *k)
{
    for (int j = 0; j < k->n_in; j++)
        if (!net_input_repeats(k->l, j)) free(k->x[j].p), free(k->dx[j].p);
    free(k->y.p), free(k->r), free(k->w), free(k->dw), free(k->argmax), free(k->stats), free(k->running);
    free(k->mask), free(k->probs), free(k->labels), free(k->ws);
    net_free(&k->net);
}

/* The call on whole maps, output rows [0, h). */
ops_call oc_call(lcase *k)
{
    ops_call c = {.l = k->l, .a = 0, .b = k->l->h, .y = k->y, .dy = k->dy, .w = k->w, .dw = k->dw,
                  .argmax = k->argmax, .mask = k->mask, .key = KEY, .stats = k->stats, .running = k->running, .bn = k->bn,
                  .labels = k->labels, .probs = k->probs, .loss = &k->loss, .ws = k->ws, .ws_bytes = k->ws_bytes};
    for (int j = 0; j < k->n_in; j++) {
        c.in_h[j] = k->net.layers[k->l->in[j]].h, c.in_c[j] = k->net.layers[k->l->in[j]].c;
        c.x[j] = k->x[j];
        c.dx[j] = k->dx[j];
    }
    return c;
}

double oc_objective(lcase *k)
{
    ops_call c = oc_call(k);
    ops_cpu.forward(&c);
    if (k->l->kind == NET_LOSS) return k->loss;
    double J = 0.0;
    for (int64_t i = 0; i < oc_ten_len(&k->y); i++) J += (double)k->y.p[i] * k->r[i];
    return J;
}

/* Central differences of J over every element of p (n values). */
void oc_fd_grad(lcase *k, float *p, int64_t n, float *fd)
{
    for (int64_t i = 0; i < n; i++) {
        float v = p[i], hi = v + FD_EPS, lo = v - FD_EPS;
        p[i] = hi;
        double jp = oc_objective(k);
        p[i] = lo;
        double jm = oc_objective(k);
        p[i] = v;
        fd[i] = (float)((jp - jm) / ((double)hi - (double)lo));
    }
}

/* Backward on whole maps into dx views full of garbage (!dx_acc must overwrite) and a zeroed dw. */
void oc_analytic(lcase *k)
{
    ops_call c = oc_call(k);
    ops_cpu.forward(&c);
    for (int j = 0; j < k->n_in; j++)
        if (k->dx[j].p)
            for (int64_t i = 0; i < oc_ten_len(&k->dx[j]); i++) k->dx[j].p[i] = 1e3f;
    memset(k->dw, 0, (size_t)k->nw * sizeof(float));
    ops_cpu.backward(&c);
}

bool oc_same_bits(const float *a, const float *b, int64_t n) { return !memcmp(a, b, (size_t)n * sizeof(float)); }
