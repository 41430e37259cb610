/* pool_cpu: the CPU backend's pooling and resampling kernels — max, average, global and adaptive
 * average pooling, nearest and bilinear upsampling — on bands of rows (ops.h's conventions, and
 * ops_cpu.h's helpers). Max-pooling keeps its argmax for the backward as the schedule asks; the
 * backward of every window kind gathers, so no two threads write one element. */
#include <math.h>
#include <string.h>

#include "engine/act.h"
#include "engine/cpu/ops_cpu.h"
#include "sim/net/kind.h"

/* --- pooling ---------------------------------------------------------------------------------- */

/* Max over the window's in-map elements (padding never wins); argmax, when wanted, is
 * (N, C, b - a, W_out): the rows of this call, each holding the input's row * in_w + col. As
 * PyTorch: the first maximum wins, and a NaN wins over every number (the last NaN, over NaNs).
 * One output row at a time, over the in-map rows of its windows (nr of them, at most
 * POOL_ROWS_MAX; more take the bounds-tested loop throughout). Output columns [lo, hi), whose
 * windows lie inside the map along W, take no bounds test and no branch on the data: a select by
 * masks (GCC branches on a ?: of floats, and on random maps that branch mispredicted about once an
 * output). Wider windows than POOL_SELECT_K branch: a new maximum grows rarer along the window,
 * and the dependent selects cost more than the branches mispredict (7x7 stride 2: 0.84x with
 * selects). Starting from -inf with the window's first element as argmax is the same as taking
 * that first element: a later one replaces it only where it is greater, or NaN. */
enum { POOL_ROWS_MAX = 16, POOL_SELECT_K = 4 };

static inline void max_take(float v, int64_t at, float *best, int64_t *arg)
{
    int64_t take = -(int64_t)((v > *best) | (v != v));
    uint32_t vb, bb;
    memcpy(&vb, &v, sizeof vb), memcpy(&bb, best, sizeof bb);
    bb = (vb & (uint32_t)take) | (bb & ~(uint32_t)take);
    memcpy(best, &bb, sizeof bb);
    *arg = (at & take) | (*arg & ~take);
}

static void maxpool_row(const ten *x, int n, int ch, int o, net_window win, int in_h, int w_out, int lo, int hi, float *yr,
                        int64_t *am)
{
    int in_w = x->w, nr = 0, k = win.k;
    const float *rp[POOL_ROWS_MAX];
    int64_t base[POOL_ROWS_MAX]; /* each in-map row's first element, as an argmax */
    for (int ki = 0; ki < k && k <= POOL_ROWS_MAX; ki++) {
        int ih = o * win.s - win.p + win.d * ki;
        if (ih >= 0 && ih < in_h) rp[nr] = cpu_row(x, n, ch, ih), base[nr++] = (int64_t)ih * in_w;
    }
    if (k > POOL_ROWS_MAX) lo = hi = 0;
    for (int ow = 0; ow < w_out; ow++) {
        int iw0 = ow * win.s - win.p;
        float best = -INFINITY;
        int64_t arg = -1;
        if (ow >= lo && ow < hi) {
            CHECK(nr > 0); /* padding <= k/2 leaves every window an in-map element */
            arg = base[0] + iw0;
            if (k <= POOL_SELECT_K)
                for (int r = 0; r < nr; r++)
                    for (int kj = 0, iw = iw0; kj < k; kj++, iw += win.d) max_take(rp[r][iw], base[r] + iw, &best, &arg);
            else
                for (int r = 0; r < nr; r++)
                    for (int kj = 0, iw = iw0; kj < k; kj++, iw += win.d)
                        if (rp[r][iw] > best || isnan(rp[r][iw])) best = rp[r][iw], arg = base[r] + iw;
        } else
            for (int ki = 0; ki < k; ki++) {
                int ih = o * win.s - win.p + win.d * ki;
                if (ih < 0 || ih >= in_h) continue;
                const float *xr = cpu_row(x, n, ch, ih);
                for (int kj = 0; kj < k; kj++) {
                    int iw = iw0 + win.d * kj;
                    if (iw < 0 || iw >= in_w) continue;
                    float v = xr[iw];
                    if (arg < 0 || v > best || isnan(v)) best = v, arg = (int64_t)ih * in_w + iw;
                }
            }
        CHECK(arg >= 0);
        yr[ow] = best;
        if (am) am[ow] = arg;
    }
}

void maxpool_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->win;
    const ten *x = &c->x[0], *y = &c->y; /* (N, C, H_in, W_in) -> (N, C, H_out, W_out) */
    int in_h = c->in_h[0], w_out = l->w, a = c->a, b = c->b, lo, hi;
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(x, lo, hi, in_h);
    cpu_check_rows(y, a, b, l->h);
    /* output columns whose whole window is in the map along W */
    int c_lo = (win.p + win.s - 1) / win.s, span = x->w - 1 + win.p - win.d * (win.k - 1);
    int c_hi = span < 0 ? 0 : span / win.s + 1;
    c_hi = c_hi > w_out ? w_out : c_hi < c_lo ? c_lo : c_hi;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * (b - a) * y->w))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++)
            for (int o = a; o < b; o++)
                maxpool_row(x, n, ch, o, win, in_h, w_out, c_lo, c_hi, cpu_row(y, n, ch, o),
                            c->argmax ? c->argmax + (((int64_t)n * x->c + ch) * (b - a) + (o - a)) * w_out : NULL);
}

/* dx[argmax] += dy. */
void maxpool_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *dx = &c->dx[0], *dy = &c->dy;
    int in_h = c->in_h[0], w_out = l->w, a = c->a, b = c->b, lo, hi;
    if (!dx->p) return;
    CHECK(c->argmax != NULL);
    net_window_rows(l->win, a, b, &lo, &hi);
    cpu_dx_begin(c, 0);
    cpu_check_rows(dx, lo, hi, in_h);
    cpu_check_rows(dy, a, b, l->h);
    int64_t lo_i = (int64_t)(lo < 0 ? 0 : lo) * dx->w, hi_i = (int64_t)(hi > in_h ? in_h : hi) * dx->w;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * (b - a) * dy->w))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++) {
            float *dxp = cpu_row(dx, n, ch, dx->row0); /* holds map element i at i - off */
            int64_t off = (int64_t)dx->row0 * dx->w;
            for (int o = a; o < b; o++) {
                const float *dyr = cpu_row(dy, n, ch, o);
                const int64_t *am = c->argmax + (((int64_t)n * dy->c + ch) * (b - a) + (o - a)) * w_out;
                for (int ow = 0; ow < w_out; ow++) {
                    CHECK(am[ow] >= lo_i && am[ow] < hi_i);
                    dxp[am[ow] - off] += dyr[ow];
                }
            }
        }
}

/* --- upsampling ------------------------------------------------------------------------------- */

/* Nearest, by an integer scale u: y[o][ow] = x[o / u][ow / u] (PyTorch's mode='nearest'). */
void upsample_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    int u = c->l->u.up.scale, a = c->a, b = c->b, lo, hi;
    net_window_rows(c->l->win, a, b, &lo, &hi);
    cpu_check_rows(x, lo, hi, c->in_h[0]);
    cpu_check_rows(y, a, b, c->l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * (b - a) * y->w))
    for (int n = 0; n < y->n; n++)
        for (int ch = 0; ch < y->c; ch++)
            for (int o = a; o < b; o++) {
                const float *xr = cpu_row(x, n, ch, o / u);
                float *yr = cpu_row(y, n, ch, o);
                for (int ow = 0; ow < y->w; ow++) yr[ow] = xr[ow / u];
            }
}

/* dx[i][j] += the sum of dy over the copies of x[i][j] in rows [a, b): a gather per input row, the
 * copies added in row-major order whatever the band. */
void upsample_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    int u = c->l->u.up.scale, a = c->a, b = c->b, lo, hi;
    if (!dx->p) return;
    net_window_rows(c->l->win, a, b, &lo, &hi);
    cpu_dx_begin(c, 0);
    cpu_check_rows(dx, lo, hi, c->in_h[0]);
    cpu_check_rows(dy, a, b, c->l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * (b - a) * dy->w))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++)
            for (int i = lo; i < hi; i++) {
                float *dxr = cpu_row(dx, n, ch, i);
                int o0 = i * u > a ? i * u : a, o1 = (i + 1) * u < b ? (i + 1) * u : b;
                for (int o = o0; o < o1; o++) {
                    const float *dyr = cpu_row(dy, n, ch, o);
                    for (int ow = 0; ow < dy->w; ow++) dxr[ow / u] += dyr[ow];
                }
            }
}

/* --- bilinear upsampling (engine/act.h: lerp_taps) ------------------------------------------------ */

/* Every output column's taps, computed once a call. */
typedef struct {
    int *w0, *w1;
    float *l0, *l1;
} lerp_cols;

static lerp_cols lerp_cols_of(const ops_call *c, int in_w, float *scratch)
{
    int out_w = c->l->w;
    lerp_cols t = {(int *)scratch, (int *)scratch + out_w, scratch + 2 * out_w, scratch + 3 * out_w};
    for (int ow = 0; ow < out_w; ow++) {
        lerp_taps(ow, in_w, out_w, c->l->u.up.scale, c->l->u.up.align, &t.w0[ow], &t.w1[ow], &t.l1[ow]);
        t.l0[ow] = 1.0f - t.l1[ow];
    }
    return t;
}

/* y[o][ow] = (x[h0][w0] l0 + x[h0][w1] l1) lh0 + (x[h1][w0] l0 + x[h1][w1] l1) lh1, PyTorch's order;
 * row h1 is read only with a weight. */
void bilinear_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    int a = c->a, b = c->b, in_h = c->in_h[0], lo, hi;
    ops_in_rows(c, &lo, &hi);
    cpu_check_rows(x, lo, hi, in_h);
    cpu_check_rows(y, a, b, c->l->h);
    CHECK(c->ws != NULL);
    lerp_cols t = lerp_cols_of(c, x->w, c->ws);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * (b - a) * y->w))
    for (int n = 0; n < y->n; n++)
        for (int ch = 0; ch < y->c; ch++)
            for (int o = a; o < b; o++) {
                int h0, h1;
                float lh1;
                lerp_taps(o, in_h, c->l->h, c->l->u.up.scale, c->l->u.up.align, &h0, &h1, &lh1);
                const float *r0 = cpu_row(x, n, ch, h0), *r1 = lh1 != 0.0f ? cpu_row(x, n, ch, h1) : r0;
                float lh0 = 1.0f - lh1, *yr = cpu_row(y, n, ch, o);
                for (int ow = 0; ow < y->w; ow++) {
                    float t0 = r0[t.w0[ow]] * t.l0[ow] + r0[t.w1[ow]] * t.l1[ow];
                    float t1 = r1[t.w0[ow]] * t.l0[ow] + r1[t.w1[ow]] * t.l1[ow];
                    yr[ow] = t0 * lh0 + t1 * lh1;
                }
            }
}

/* dx[h][w] += dy[o][ow] times the weight of (h, w) in y[o][ow], output rows in order, as PyTorch's
 * backward adds them; each (image, channel) plane by one thread. */
void bilinear_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    if (!dx->p) return;
    int a = c->a, b = c->b, in_h = c->in_h[0], lo, hi;
    ops_in_rows(c, &lo, &hi);
    cpu_dx_begin(c, 0);
    cpu_check_rows(dx, lo, hi, in_h);
    cpu_check_rows(dy, a, b, c->l->h);
    CHECK(c->ws != NULL);
    lerp_cols t = lerp_cols_of(c, dx->w, c->ws);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * (b - a) * dy->w))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++)
            for (int o = a; o < b; o++) {
                int h0, h1;
                float lh1;
                lerp_taps(o, in_h, c->l->h, c->l->u.up.scale, c->l->u.up.align, &h0, &h1, &lh1);
                float lh0 = 1.0f - lh1, *d0 = cpu_row(dx, n, ch, h0), *d1 = lh1 != 0.0f ? cpu_row(dx, n, ch, h1) : NULL;
                const float *g = cpu_row(dy, n, ch, o);
                for (int ow = 0; ow < dy->w; ow++) {
                    d0[t.w0[ow]] += lh0 * t.l0[ow] * g[ow];
                    d0[t.w1[ow]] += lh0 * t.l1[ow] * g[ow];
                    if (d1) {
                        d1[t.w0[ow]] += lh1 * t.l0[ow] * g[ow];
                        d1[t.w1[ow]] += lh1 * t.l1[ow] * g[ow];
                    }
                }
            }
}

/* Mean over the k*k window, padding counted as zeros (PyTorch's count_include_pad). */
void avgpool_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->win;
    const ten *x = &c->x[0], *y = &c->y;
    int in_h = c->in_h[0], in_w = x->w, w_out = l->w, a = c->a, b = c->b, lo, hi;
    float inv = 1.0f / (float)(win.k * win.k);
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(x, lo, hi, in_h);
    cpu_check_rows(y, a, b, l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * (b - a) * y->w))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++)
            for (int o = a; o < b; o++) {
                float *yr = cpu_row(y, n, ch, o);
                for (int ow = 0; ow < w_out; ow++) {
                    float s = 0.0f;
                    for (int ki = 0; ki < win.k; ki++) {
                        int ih = o * win.s - win.p + win.d * ki;
                        if (ih < 0 || ih >= in_h) continue;
                        const float *xr = cpu_row(x, n, ch, ih);
                        for (int kj = 0; kj < win.k; kj++) {
                            int iw = ow * win.s - win.p + win.d * kj;
                            if (iw >= 0 && iw < in_w) s += xr[iw];
                        }
                    }
                    yr[ow] = s * inv;
                }
            }
}

void avgpool_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->win;
    const ten *dx = &c->dx[0], *dy = &c->dy;
    int in_h = c->in_h[0], w_out = l->w, a = c->a, b = c->b, lo, hi;
    float inv = 1.0f / (float)(win.k * win.k);
    if (!dx->p) return;
    net_window_rows(win, a, b, &lo, &hi);
    cpu_dx_begin(c, 0);
    cpu_check_rows(dx, lo, hi, in_h);
    cpu_check_rows(dy, a, b, l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * (b - a) * dy->w))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++)
            for (int o = a; o < b; o++) {
                const float *dyr = cpu_row(dy, n, ch, o);
                for (int ki = 0; ki < win.k; ki++) {
                    int ih = o * win.s - win.p + win.d * ki;
                    if (ih < 0 || ih >= in_h) continue;
                    float *dxr = cpu_row(dx, n, ch, ih);
                    for (int ow = 0; ow < w_out; ow++) {
                        float g = dyr[ow] * inv;
                        for (int kj = 0; kj < win.k; kj++) {
                            int iw = ow * win.s - win.p + win.d * kj;
                            if (iw >= 0 && iw < dx->w) dxr[iw] += g;
                        }
                    }
                }
            }
}

/* Global average pool: (N, C, H, W) -> (N, C, 1, 1), whole maps. */
void gap_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    cpu_check_full(x, c->in_h[0]);
    int64_t hw = (int64_t)x->h * x->w;
    for (int64_t i = 0; i < (int64_t)x->n * x->c; i++) {
        double s = 0.0;
        for (int64_t k = 0; k < hw; k++) s += x->p[i * hw + k];
        y->p[i] = (float)(s / (double)hw);
    }
}

void gap_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    if (!dx->p) return;
    cpu_check_full(dx, c->in_h[0]);
    cpu_dx_begin(c, 0);
    int64_t hw = (int64_t)dx->h * dx->w;
    for (int64_t i = 0; i < (int64_t)dx->n * dx->c; i++) {
        float g = dy->p[i] / (float)hw;
        for (int64_t k = 0; k < hw; k++) dx->p[i * hw + k] += g;
    }
}

/* Adaptive average pool to (o, o): output cell i covers input [floor(i*H/o), ceil((i+1)*H/o))
 * along each axis (torchvision's AdaptiveAvgPool2d; windows may overlap when o does not divide). */
static void apool_window(int i, int in, int o, int *s, int *e)
{
    *s = (int)(((int64_t)i * in) / o);
    *e = (int)(((int64_t)(i + 1) * in + o - 1) / o);
}

void apool_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y; /* (N, C, H, W) -> (N, C, o, o) */
    int o = c->l->u.apool.o, H = c->in_h[0], W = x->w;
    cpu_check_full(x, H);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * H * W))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++)
            for (int i = 0; i < o; i++) {
                int h0, h1;
                apool_window(i, H, o, &h0, &h1);
                float *yr = cpu_row(y, n, ch, i);
                for (int j = 0; j < o; j++) {
                    int w0, w1;
                    apool_window(j, W, o, &w0, &w1);
                    double s = 0.0;
                    for (int ih = h0; ih < h1; ih++) {
                        const float *xr = cpu_row(x, n, ch, ih);
                        for (int iw = w0; iw < w1; iw++) s += xr[iw];
                    }
                    yr[j] = (float)(s / (double)((h1 - h0) * (w1 - w0)));
                }
            }
}

void apool_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    int o = c->l->u.apool.o, H = c->in_h[0], W = dx->w;
    if (!dx->p) return;
    cpu_check_full(dx, H);
    cpu_dx_begin(c, 0);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dx->n * dx->c * H * W))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++)
            for (int i = 0; i < o; i++) {
                int h0, h1;
                apool_window(i, H, o, &h0, &h1);
                const float *dyr = cpu_row(dy, n, ch, i);
                for (int j = 0; j < o; j++) {
                    int w0, w1;
                    apool_window(j, W, o, &w0, &w1);
                    float g = dyr[j] / (float)((h1 - h0) * (w1 - w0));
                    for (int ih = h0; ih < h1; ih++) {
                        float *dxr = cpu_row(dx, n, ch, ih);
                        for (int iw = w0; iw < w1; iw++) dxr[iw] += g;
                    }
                }
            }
}
