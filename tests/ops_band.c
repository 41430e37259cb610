/* ops_band: test 2 of tests/test_ops.c, bands against whole maps (ops_case.h, oc_band_case). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/ops_cpu.h"
#include "sim/lower/sched.h"
#include "sim/net/kind.h"
#include "tests/ops_case.h"

/* Input rows [lo, hi) that output rows [a, b) read from input j, clipped to the map. */
static void in_rows(const lcase *k, int j, int a, int b, int *lo, int *hi)
{
    int h = k->net.layers[k->l->in[j]].h;
    net_window_rows(net_layer_window(k->l), a, b, lo, hi);
    if (*lo < 0) *lo = 0;
    if (*hi > h) *hi = h;
}

/* ops_case.h */
ten oc_band_view(const ten *like, const float *src_full, int lo, int hi, float fill)
{
    ten v = oc_ten_new(like->n, like->c, hi - lo, like->w, lo);
    int64_t plane = (int64_t)(hi - lo) * like->w;
    for (int n = 0; n < like->n; n++)
        for (int ch = 0; ch < like->c; ch++) {
            float *dst = v.p + ((int64_t)n * like->c + ch) * plane;
            if (src_full)
                memcpy(dst, src_full + (((int64_t)n * like->c + ch) * like->h + lo) * like->w, (size_t)plane * sizeof(float));
            else
                for (int64_t i = 0; i < plane; i++) dst[i] = fill;
        }
    return v;
}

/* Copies rows [a, b) of a band view into the same rows of a whole-map buffer (add: += ). */
static void band_put(float *full, const ten *like_full, const ten *v, int a, int b, bool add)
{
    for (int n = 0; n < v->n; n++)
        for (int ch = 0; ch < v->c; ch++)
            for (int o = a; o < b; o++) {
                const float *s = v->p + (((int64_t)n * v->c + ch) * v->h + (o - v->row0)) * v->w;
                float *d = full + (((int64_t)n * like_full->c + ch) * like_full->h + o) * like_full->w;
                for (int i = 0; i < v->w; i++) d[i] = add ? d[i] + s[i] : s[i];
            }
}

/* Every value of view v outside rows [a, b) equals `val`. */
static bool rows_outside_are(const ten *v, int a, int b, float val)
{
    for (int n = 0; n < v->n; n++)
        for (int ch = 0; ch < v->c; ch++)
            for (int o = v->row0; o < v->row0 + v->h; o++) {
                if (o >= a && o < b) continue;
                const float *s = v->p + (((int64_t)n * v->c + ch) * v->h + (o - v->row0)) * v->w;
                for (int i = 0; i < v->w; i++)
                    if (memcmp(&s[i], &val, sizeof val)) return false;
            }
    return true;
}

/* Runs the layer on the bands of `cuts` (n_cuts + 1 boundaries) against its whole-map results. */
/* What the bands of one partition gather: y's rows assembled, dx accumulated in place (a) and
 * summed from band views (b), dw, and the flags of what must hold. */
typedef struct {
    float *yb, *dxa[NET_MAX_IN], *dxb[NET_MAX_IN], *dwa;
    int64_t *am_full;
    bool argmax_ok, y_untouched, dx_zeroed;
} band_acc;

/* Output rows [a, b): forward from a view of the input rows they need, then backward twice — into
 * the whole-map dx (accumulating after the first band) and into band views of dx. */
static void one_band(lcase *k, int a, int b, bool first, band_acc *s)
{
    const net_layer *l = k->l;
    int Ho = l->h;
    ops_call c = {.l = l, .a = a, .b = b, .w = k->w, .bn = k->bn, .running = k->running};
    ten xv[NET_MAX_IN] = {0}, dxv[NET_MAX_IN] = {0};
    int lo[NET_MAX_IN], hi[NET_MAX_IN];
    for (int j = 0; j < k->n_in; j++) {
        c.in_h[j] = k->net.layers[l->in[j]].h, c.in_c[j] = k->net.layers[l->in[j]].c;
        in_rows(k, j, a, b, &lo[j], &hi[j]);
        xv[j] = oc_band_view(&k->x[j], k->x[j].p, lo[j], hi[j], 0.0f);
        c.x[j] = xv[j];
    }
    /* y holds one row more than computed on each side: row0 != a, and those rows must stay */
    int ya = a > 0 ? a - 1 : 0, yb_ = b < Ho ? b + 1 : Ho;
    ten yv = oc_band_view(&k->y, NULL, ya, yb_, 12345.0f);
    int64_t *am = calloc((size_t)k->y.n * k->y.c * (b - a) * k->y.w, sizeof(int64_t));
    uint8_t *mask = calloc((size_t)k->y.n * k->y.c * (b - a) * k->y.w, 1); /* this band's rows */
    float *stats = calloc(2 * 64 + (size_t)kind_aux_bytes(&k->net, k->L, b - a, k->y.n) / 4, sizeof(float)); /* lnorm's: per place */
    int64_t wsb = sched_workspace_bytes(&k->net, k->L, b - a, k->y.n);
    float *ws = wsb ? malloc((size_t)wsb) : NULL; /* exactly what the scheduler budgets */
    c.y = yv, c.argmax = am, c.mask = mask, c.key = KEY, c.stats = stats, c.ws = ws, c.ws_bytes = wsb;
    ops_cpu.forward(&c);
    band_put(s->yb, &k->y, &yv, a, b, false);
    s->y_untouched &= rows_outside_are(&yv, a, b, 12345.0f);
    if (s->am_full)
        for (int n = 0; n < k->y.n; n++)
            for (int ch = 0; ch < k->y.c; ch++)
                for (int64_t i = 0; i < (int64_t)(b - a) * k->y.w; i++)
                    s->argmax_ok &= am[((int64_t)n * k->y.c + ch) * (b - a) * k->y.w + i] ==
                                 s->am_full[(((int64_t)n * k->y.c + ch) * Ho + a) * k->y.w + i];

    /* backward A: into whole-map dx, accumulating after the first band; dw += */
    c.dy = oc_band_view(&k->y, k->r, a, b, 0.0f);
    c.dw = s->dwa;
    for (int j = 0; j < k->n_in; j++) {
        c.dx[j] = k->dx[j];
        c.dx[j].p = s->dxa[j];
        c.dx_acc[j] = !first;
    }
    ops_cpu.backward(&c);
    /* backward B: band views of dx, one row wider on each side, full of garbage, !dx_acc */
    c.dw = NULL;
    for (int j = 0; j < k->n_in; j++) {
        if (!s->dxa[j]) continue;
        int h = c.in_h[j], va = lo[j] > 0 ? lo[j] - 1 : 0, vb = hi[j] < h ? hi[j] + 1 : h;
        dxv[j] = oc_band_view(&k->dx[j], NULL, va, vb, -7.0f);
        c.dx[j] = dxv[j];
        c.dx_acc[j] = false;
    }
    ops_cpu.backward(&c);
    for (int j = 0; j < k->n_in; j++) {
        if (!s->dxa[j]) continue;
        s->dx_zeroed &= rows_outside_are(&dxv[j], lo[j], hi[j], 0.0f);
        band_put(s->dxb[j], &k->dx[j], &dxv[j], dxv[j].row0, dxv[j].row0 + dxv[j].h, true);
        free(dxv[j].p);
    }
    for (int j = 0; j < k->n_in; j++) free(xv[j].p);
    free(yv.p), free(c.dy.p), free(am), free(mask), free(ws), free(stats);
}

static void band_partition(lcase *k, const char *name, const int *cuts, int n_bands)
{
    const net_layer *l = k->l;
    char what[160];
    int64_t ny = oc_ten_len(&k->y);
    band_acc acc = {.yb = calloc((size_t)ny, sizeof(float)), .dwa = calloc((size_t)k->nw + 1, sizeof(float)),
                    .am_full = l->kind == NET_MAXPOOL ? k->argmax : NULL, .argmax_ok = true, .y_untouched = true, .dx_zeroed = true};
    band_acc *s = &acc;
    for (int j = 0; j < k->n_in; j++)
        if (k->dx[j].p) {
            s->dxa[j] = malloc((size_t)oc_ten_len(&k->dx[j]) * sizeof(float));
            for (int64_t i = 0; i < oc_ten_len(&k->dx[j]); i++) s->dxa[j][i] = -7.0f; /* garbage the first band clears */
            s->dxb[j] = calloc((size_t)oc_ten_len(&k->dx[j]), sizeof(float));
        }
    for (int bi = 0; bi < n_bands; bi++) one_band(k, cuts[bi], cuts[bi + 1], bi == 0, s);

    snprintf(what, sizeof what, "band %s %d bands: y", name, n_bands);
    oc_compare(&oc_w_band_fwd, what, s->yb, k->y.p, ny, BAND_FWD_TOL, BAND_FWD_TOL);
    snprintf(what, sizeof what, "band %s %d bands: y rows outside [a, b) untouched", name, n_bands);
    oc_expect(s->y_untouched, what);
    if (s->am_full) {
        snprintf(what, sizeof what, "band %s %d bands: argmax", name, n_bands);
        oc_expect(s->argmax_ok, what);
    }
    for (int j = 0; j < k->n_in; j++) {
        if (!s->dxa[j]) continue;
        int64_t n = oc_ten_len(&k->dx[j]);
        snprintf(what, sizeof what, "band %s %d bands: dx[%d] accumulated", name, n_bands, j);
        oc_compare(&oc_w_band_bwd, what, s->dxa[j], k->dx[j].p, n, BAND_BWD_TOL, BAND_BWD_TOL);
        snprintf(what, sizeof what, "band %s %d bands: dx[%d] views summed", name, n_bands, j);
        oc_compare(&oc_w_band_bwd, what, s->dxb[j], k->dx[j].p, n, BAND_BWD_TOL, BAND_BWD_TOL);
        free(s->dxa[j]), free(s->dxb[j]);
    }
    snprintf(what, sizeof what, "band %s %d bands: dx view rows not reached are zero", name, n_bands);
    oc_expect(s->dx_zeroed, what);
    if (k->nw) {
        snprintf(what, sizeof what, "band %s %d bands: dw", name, n_bands);
        oc_compare(&oc_w_band_bwd, what, s->dwa, k->dw, k->nw, BAND_BWD_TOL, BAND_BWD_TOL);
    }
    free(s->yb), free(s->dwa);
}

void oc_band_case(const char *name, const char *text, ops_bn bn, int N)
{
    lcase k;
    oc_init(&k, text, N, bn);
    oc_analytic(&k); /* whole-map y, argmax, dx, dw */
    int Ho = k.l->h, n = 0, *cuts = malloc(((size_t)Ho + 2) * sizeof(int));
    /* an uneven partition: the first row alone, then two halves */
    cuts[n++] = 0;
    if (Ho > 1) cuts[n++] = 1;
    if (Ho / 2 > 1) cuts[n++] = Ho / 2;
    cuts[n++] = Ho;
    band_partition(&k, name, cuts, n - 1);
    /* one row per band */
    for (int i = 0; i <= Ho; i++) cuts[i] = i;
    band_partition(&k, name, cuts, Ho);
    free(cuts);
    oc_free(&k);
}
