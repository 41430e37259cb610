/* conv_cpu: convolution and fully connected layers on the CPU, as sgemm calls (OpenBLAS).
 *
 * Convolution, per image, on output rows [a, b) (R = b - a rows, K = C_in*k*k):
 *   forward          col (K, R*W_out) = im2col(x rows), in ws
 *                    y[:, a:b] (C_out, R*W_out) = w (C_out, K) x col
 *   backward filter  col = im2col(x rows); dw += dy x col^T
 *   backward data    col = w^T x dy; dx += col2im(col)
 * A 1x1 stride-1 unpadded convolution is a plain product with the input rows (no workspace):
 * its input row i is its output row i. Products write straight into the row range of y (or dx)
 * with the leading dimension of a whole channel plane (h*w), so no copy follows.
 * Accumulation: dw and the bias gradient are +=; dx is zeroed first when !dx_acc (whole view),
 * then accumulated into, so bands add up; a direct product stores into dx when it may
 * (cpu_dx_store).
 * Deterministic: fixed loop orders, and sgemm with a fixed thread count. Not done here: any
 * allocation (the workspace comes from the caller, sized by sched_workspace_bytes()). */
#include <string.h>

#include <cblas.h>

#include "ops_cpu.h"

/* Does this convolution run as a direct product (no im2col, no workspace)? Must agree with
 * sched_workspace_bytes(). */
static bool conv_direct(net_window w) { return w.k == 1 && w.s == 1 && w.p == 0; }

/* Output columns [*lo, *hi) of kernel column kj whose input column lies inside the map; the
 * others read padding. Computed once per tap, so the copy loops carry no bounds test. */
static void valid_cols(net_window win, int kj, int w_in, int w_out, int *lo, int *hi)
{
    int off = win.d * kj - win.p; /* iw = ow * s + off */
    int l = off >= 0 ? 0 : (-off + win.s - 1) / win.s;
    int h = w_in - 1 - off < 0 ? 0 : (w_in - 1 - off) / win.s + 1;
    *lo = l < w_out ? l : w_out;
    *hi = h < *lo ? *lo : h > w_out ? w_out : h;
}

/* col (C_in*k*k, R*W_out) <- the input values each output position [a, b) x [0, W_out) reads;
 * zero where the window hangs over the padding. Channels are independent: one per thread. */
static void im2col(float *col, const ten *x, int n, net_window win, int in_h, int a, int b, int w_out)
{
    int k = win.k, R = b - a, w_in = x->w;
#pragma omp parallel for schedule(static)
    for (int ci = 0; ci < x->c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                float *dst = col + ((int64_t)(ci * k + ki) * k + kj) * R * w_out;
                int lo, hi, off = win.d * kj - win.p;
                valid_cols(win, kj, w_in, w_out, &lo, &hi);
                for (int o = a; o < b; o++) {
                    float *drow = dst + (int64_t)(o - a) * w_out;
                    int ih = o * win.s - win.p + win.d * ki;
                    if (ih < 0 || ih >= in_h) {
                        memset(drow, 0, (size_t)w_out * sizeof(float));
                        continue;
                    }
                    const float *xrow = cpu_row(x, n, ci, ih);
                    for (int ow = 0; ow < lo; ow++) drow[ow] = 0.0f;
                    if (win.s == 1)
                        memcpy(drow + lo, xrow + lo + off, (size_t)(hi - lo) * sizeof(float));
                    else
                        for (int ow = lo; ow < hi; ow++) drow[ow] = xrow[ow * win.s + off];
                    for (int ow = hi; ow < w_out; ow++) drow[ow] = 0.0f;
                }
            }
}

/* dx += col2im(col): the transpose of im2col; padding positions are dropped. Each thread owns
 * whole input channels, so no two threads add into the same element. */
static void col2im(const float *col, const ten *dx, int n, net_window win, int in_h, int a, int b, int w_out)
{
    int k = win.k, R = b - a, w_in = dx->w;
#pragma omp parallel for schedule(static)
    for (int ci = 0; ci < dx->c; ci++)
        for (int ki = 0; ki < k; ki++)
            for (int kj = 0; kj < k; kj++) {
                const float *src = col + ((int64_t)(ci * k + ki) * k + kj) * R * w_out;
                int lo, hi, off = win.d * kj - win.p;
                valid_cols(win, kj, w_in, w_out, &lo, &hi);
                for (int o = a; o < b; o++) {
                    int ih = o * win.s - win.p + win.d * ki;
                    if (ih < 0 || ih >= in_h) continue;
                    const float *srow = src + (int64_t)(o - a) * w_out;
                    float *dxrow = cpu_row(dx, n, ci, ih);
                    for (int ow = lo; ow < hi; ow++) dxrow[ow * win.s + off] += srow[ow];
                }
            }
}

void conv_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->u.conv.win;
    const ten *x = &c->x[0], *y = &c->y; /* (N, C_in, H_in, W_in) -> (N, C_out, H_out, W_out) */
    int a = c->a, b = c->b, R = b - a, in_h = c->in_h[0];
    int c_out = l->u.conv.c_out, w_out = l->w, K = x->c * win.k * win.k;
    int64_t y_plane = (int64_t)y->h * y->w, x_plane = (int64_t)x->h * x->w;
    int lo, hi;
    CHECK(y->c == c_out && y->w == w_out && y->n == x->n);
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(x, lo, hi, in_h);
    cpu_check_rows(y, a, b, l->h);
    if (!conv_direct(win)) CHECK(c->ws != NULL);
    const float *wt = c->w;                                          /* (C_out, C_in, k, k) */
    const float *bias = l->u.conv.bias ? c->w + (int64_t)c_out * K : NULL; /* (C_out) */

    for (int n = 0; n < x->n; n++) {
        float *yn = cpu_row(y, n, 0, a); /* (C_out, R*W_out) with leading dimension y_plane */
        if (conv_direct(win)) {
            /* output row i reads input row i: multiply the input rows in place */
            const float *xn = cpu_row(x, n, 0, a); /* (C_in, R*W_in), leading dimension x_plane */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, R * w_out, K, 1.0f, wt, K, xn,
                        (int)x_plane, 0.0f, yn, (int)y_plane);
        } else {
            im2col(c->ws, x, n, win, in_h, a, b, w_out);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, R * w_out, K, 1.0f, wt, K, c->ws,
                        R * w_out, 0.0f, yn, (int)y_plane);
        }
        if (bias)
            for (int co = 0; co < c_out; co++) {
                float *yr = yn + co * y_plane;
                for (int i = 0; i < R * w_out; i++) yr[i] += bias[co];
            }
    }
}

void conv_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->u.conv.win;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy; /* dx like x; dy (N, C_out, H_out, W_out) */
    int a = c->a, b = c->b, R = b - a, in_h = c->in_h[0];
    int c_out = l->u.conv.c_out, w_out = l->w, c_in = dx->p ? dx->c : x->c, K = c_in * win.k * win.k;
    int64_t dy_plane = (int64_t)dy->h * dy->w;
    int lo, hi;
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(dy, a, b, l->h);
    if (!conv_direct(win)) CHECK(c->ws != NULL);
    const float *wt = c->w; /* (C_out, C_in, k, k) */
    float *dwt = c->dw;     /* like wt, then the bias gradient (C_out) */

    if (dwt) {
        cpu_check_rows(x, lo, hi, in_h);
        int64_t x_plane = (int64_t)x->h * x->w;
        for (int n = 0; n < dy->n; n++) {
            const float *dyn = cpu_row(dy, n, 0, a); /* (C_out, R*W_out), leading dimension dy_plane */
            if (l->u.conv.bias) {
                float *db = dwt + (int64_t)c_out * K;
                for (int co = 0; co < c_out; co++) {
                    const float *dyr = dyn + co * dy_plane;
                    float s = 0.0f;
                    for (int i = 0; i < R * w_out; i++) s += dyr[i];
                    db[co] += s;
                }
            }
            /* dw (C_out, K) += dy (C_out, R*W_out) x col^T (R*W_out, K) */
            if (conv_direct(win)) {
                const float *xn = cpu_row(x, n, 0, a);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, K, R * w_out, 1.0f, dyn, (int)dy_plane,
                            xn, (int)x_plane, 1.0f, dwt, K);
            } else {
                im2col(c->ws, x, n, win, in_h, a, b, w_out);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c_out, K, R * w_out, 1.0f, dyn, (int)dy_plane,
                            c->ws, R * w_out, 1.0f, dwt, K);
            }
        }
    }

    if (dx->p) {
        /* a direct product writes each element of rows [a, b) once: it may store (beta 0) */
        bool store = conv_direct(win) ? cpu_dx_store(c, 0) : (cpu_dx_begin(c, 0), false);
        cpu_check_rows(dx, lo, hi, in_h);
        int64_t dx_plane = (int64_t)dx->h * dx->w;
        for (int n = 0; n < dy->n; n++) {
            const float *dyn = cpu_row(dy, n, 0, a);
            /* col (K, R*W_out) = w^T (K, C_out) x dy (C_out, R*W_out), then scattered back */
            if (conv_direct(win)) {
                float *dxn = cpu_row(dx, n, 0, a);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, R * w_out, c_out, 1.0f, wt, K, dyn,
                            (int)dy_plane, store ? 0.0f : 1.0f, dxn, (int)dx_plane);
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, R * w_out, c_out, 1.0f, wt, K, dyn,
                            (int)dy_plane, 0.0f, c->ws, R * w_out);
                col2im(c->ws, dx, n, win, in_h, a, b, w_out);
            }
        }
    }
}

/* Fully connected: y (N, out) = x (N, in) w^T + bias, in = C*H*W of whole maps. */
void fc_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int N = x->n, in = x->c * x->h * x->w, out = l->u.fc.c_out;
    CHECK(x->row0 == 0 && x->h == c->in_h[0] && c->a == 0 && c->b == 1);
    CHECK(y->n == N && y->c * y->h * y->w == out);
    const float *wt = c->w;                                              /* (out, in) */
    const float *bias = l->u.fc.bias ? c->w + (int64_t)out * in : NULL; /* (out) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x->p, in, wt, in, 0.0f, y->p, out);
    if (bias)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) y->p[(int64_t)n * out + o] += bias[o];
}

void fc_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy; /* dy (N, out); dx like x */
    int N = dy->n, out = l->u.fc.c_out;
    CHECK(c->a == 0 && c->b == 1 && dy->c * dy->h * dy->w == out);
    if (c->dw) {
        int in = x->c * x->h * x->w;
        CHECK(x->row0 == 0 && x->h == c->in_h[0]);
        /* dw (out, in) += dy^T (out, N) x x (N, in); dbias += column sums of dy */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy->p, out, x->p, in, 1.0f, c->dw, in);
        if (l->u.fc.bias) {
            float *db = c->dw + (int64_t)out * in;
            for (int o = 0; o < out; o++) {
                float s = 0.0f;
                for (int n = 0; n < N; n++) s += dy->p[(int64_t)n * out + o];
                db[o] += s;
            }
        }
    }
    if (dx->p) {
        int in = dx->c * dx->h * dx->w;
        CHECK(dx->row0 == 0 && dx->h == c->in_h[0]);
        /* dx (N, in) (+)= dy (N, out) x w (out, in) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy->p, out, c->w, in,
                    c->dx_acc[0] ? 1.0f : 0.0f, dx->p, in);
    }
}
