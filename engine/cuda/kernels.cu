// kernels: see kernels.h. One thread per output element (per image for the loss); the
// arithmetic follows the CPU kernels in engine/cpu/ops_cpu.c line for line.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/cuda/kernels.h"
#include "engine/act.h"

static const int T = 256;

static unsigned blocks(int64_t n) { return (unsigned)((n + T - 1) / T); }

extern "C" void k_launched(const char *file, int line)
{
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess) return;
    fprintf(stderr, "lrcnn: kernel launch failed at %s:%d: %s\n", file, line, cudaGetErrorString(r));
    exit(1);
}

__device__ static float *at(kview v, int n, int c, int r) { return v.p + (((int64_t)n * v.c + c) * v.h + (r - v.row0)) * v.w; }

// Element i of the rows [a, b) of a view shaped like v: image, channel, row, column.
struct pos {
    int n, c, r, col;
};
__device__ static pos decompose(int64_t i, int c, int a, int b, int w)
{
    pos p;
    p.col = (int)(i % w), i /= w;
    p.r = a + (int)(i % (b - a)), i /= (b - a);
    p.c = (int)(i % c), p.n = (int)(i / c);
    return p;
}

__global__ static void copy2d(float *d, int64_t ds, const float *s, int64_t ss, int64_t planes, int64_t len, bool acc)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * len) return;
    int64_t pl = i / len, j = i % len;
    if (acc) d[pl * ds + j] += s[pl * ss + j];
    else d[pl * ds + j] = s[pl * ss + j];
}

extern "C" void k_copy2d(cudaStream_t st, float *d, int64_t ds, const float *s, int64_t ss, int64_t planes, int64_t len, bool acc)
{
    if (planes * len) {
        copy2d<<<blocks(planes * len), T, 0, st>>>(d, ds, s, ss, planes, len, acc);
        LAUNCHED();
    }
}

__global__ static void sgd(float *p, const float *g, float *m, int64_t n, float lr, float mom)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    m[i] = mom * m[i] + g[i];
    p[i] -= lr * m[i];
}

extern "C" void k_sgd(cudaStream_t st, float *p, const float *g, float *m, int64_t n, float lr, float mom)
{
    if (n) {
        sgd<<<blocks(n), T, 0, st>>>(p, g, m, n, lr, mom);
        LAUNCHED();
    }
}

__global__ static void adam(float *p, const float *g, float *m, float *v, int64_t n, float step, float bc2_sqrt, float eps,
                            float omb1, float b2, float omb2)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    m[i] += omb1 * (g[i] - m[i]);
    v[i] = b2 * v[i] + omb2 * g[i] * g[i];
    p[i] -= step * m[i] / (sqrtf(v[i]) / bc2_sqrt + eps);
}

extern "C" void k_adam(cudaStream_t st, float *p, const float *g, float *m, float *v, int64_t n, float step, float bc2_sqrt,
                       float eps, float omb1, float b2, float omb2)
{
    if (n) {
        adam<<<blocks(n), T, 0, st>>>(p, g, m, v, n, step, bc2_sqrt, eps, omb1, b2, omb2);
        LAUNCHED();
    }
}

__global__ static void bias(kview y, int a, int b, const float *bs)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] += bs[q.c];
}

extern "C" void k_bias(cudaStream_t st, kview y, int a, int b, const float *bs)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        bias<<<blocks(n), T, 0, st>>>(y, a, b, bs);
        LAUNCHED();
    }
}

__global__ static void add_fwd(kview x0, kview x1, kview y, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] = at(x0, q.n, q.c, q.r)[q.col] + at(x1, q.n, q.c, q.r)[q.col];
}

extern "C" void k_add_fwd(cudaStream_t st, kview x0, kview x1, kview y, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        add_fwd<<<blocks(n), T, 0, st>>>(x0, x1, y, a, b);
        LAUNCHED();
    }
}

__global__ static void acc_rows(kview dx, kview dy, int off, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * (b - a) * dx.w) return;
    pos q = decompose(i, dx.c, a, b, dx.w);
    at(dx, q.n, q.c, q.r)[q.col] += at(dy, q.n, off + q.c, q.r)[q.col];
}

extern "C" void k_acc_rows(cudaStream_t st, kview dx, kview dy, int off, int a, int b)
{
    int64_t n = (int64_t)dx.n * dx.c * (b - a) * dx.w;
    if (n) {
        acc_rows<<<blocks(n), T, 0, st>>>(dx, dy, off, a, b);
        LAUNCHED();
    }
}

/* value (n, c, i) of a whole map, or of a per-channel (C, 1, 1) one */
__device__ static float mul_at(kview t, int n, int c, int64_t i) { return at(t, n, c, 0)[t.h * t.w == 1 ? 0 : i]; }

__global__ static void mul_fwd(kview a, kview b, kview y)
{
    int64_t plane = (int64_t)y.h * y.w, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * plane) return;
    int64_t k = i % plane, nc = i / plane;
    int n = (int)(nc / y.c), c = (int)(nc % y.c);
    y.p[i] = mul_at(a, n, c, k) * mul_at(b, n, c, k);
}

extern "C" void k_mul_fwd(cudaStream_t st, kview a, kview b, kview y)
{
    int64_t n = (int64_t)y.n * y.c * y.h * y.w;
    if (n) {
        mul_fwd<<<blocks(n), T, 0, st>>>(a, b, y);
        LAUNCHED();
    }
}

/* dx += dy * o (and + dy * x2 when x2.p: a product of a tensor with itself), or, for a per-channel
 * dx under a whole-map dy, the plane's sum of dy * o, in double, one thread a channel */
__global__ static void mul_bwd(kview dx, kview dy, kview o, kview x2)
{
    int64_t plane = (int64_t)dy.h * dy.w, dplane = (int64_t)dx.h * dx.w, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * dplane) return;
    int64_t k = i % dplane, nc = i / dplane;
    int n = (int)(nc / dx.c), c = (int)(nc % dx.c);
    const float *g = at(dy, n, c, 0);
    if (dplane == 1 && plane > 1) {
        double s = 0.0;
        for (int64_t j = 0; j < plane; j++) s += (double)g[j] * mul_at(o, n, c, j);
        dx.p[i] += (float)s;
        return;
    }
    dx.p[i] += g[k] * mul_at(o, n, c, k);
    if (x2.p) dx.p[i] += g[k] * mul_at(x2, n, c, k);
}

extern "C" void k_mul_bwd(cudaStream_t st, kview dx, kview dy, kview o, kview x2)
{
    int64_t n = (int64_t)dx.n * dx.c * dx.h * dx.w;
    if (n) {
        mul_bwd<<<blocks(n), T, 0, st>>>(dx, dy, o, x2);
        LAUNCHED();
    }
}

__global__ static void concat_fwd(kview x, kview y, int off, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)x.n * x.c * (b - a) * x.w) return;
    pos q = decompose(i, x.c, a, b, x.w);
    at(y, q.n, off + q.c, q.r)[q.col] = at(x, q.n, q.c, q.r)[q.col];
}

extern "C" void k_concat_fwd(cudaStream_t st, kview x, kview y, int off, int a, int b)
{
    int64_t n = (int64_t)x.n * x.c * (b - a) * x.w;
    if (n) {
        concat_fwd<<<blocks(n), T, 0, st>>>(x, y, off, a, b);
        LAUNCHED();
    }
}

__global__ static void act_fwd_k(int kind, float slope, kview x, kview y, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] = act_fwd(kind, slope, at(x, q.n, q.c, q.r)[q.col]);
}

extern "C" void k_act_fwd(cudaStream_t st, int kind, float slope, kview x, kview y, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        act_fwd_k<<<blocks(n), T, 0, st>>>(kind, slope, x, y, a, b);
        LAUNCHED();
    }
}

__global__ static void act_bwd_k(int kind, float slope, kview m, kview dy, kview dx, int a, int b, bool store)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dy.n * dy.c * (b - a) * dy.w) return;
    pos q = decompose(i, dy.c, a, b, dy.w);
    float g = at(dy, q.n, q.c, q.r)[q.col] * act_grad(kind, slope, at(m, q.n, q.c, q.r)[q.col]);
    float *d = &at(dx, q.n, q.c, q.r)[q.col];
    *d = store ? g : *d + g;
}

extern "C" void k_act_bwd(cudaStream_t st, int kind, float slope, kview m, kview dy, kview dx, int a, int b, bool store)
{
    int64_t n = (int64_t)dy.n * dy.c * (b - a) * dy.w;
    if (n) {
        act_bwd_k<<<blocks(n), T, 0, st>>>(kind, slope, m, dy, dx, a, b, store);
        LAUNCHED();
    }
}

// sample: one draw an image (its mask a byte an image, written by the first value of each)
__global__ static void dropout_fwd_k(uint64_t key, float p, bool sample, kview x, kview y, uint8_t *mask, int a, int b, int full_h)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return; // i: place in rows [a, b), as the mask
    pos q = decompose(i, y.c, a, b, y.w);
    int keep = drop_keep(key, sample ? q.n : (((int64_t)q.n * y.c + q.c) * full_h + q.r) * y.w + q.col, p);
    at(y, q.n, q.c, q.r)[q.col] = at(x, q.n, q.c, q.r)[q.col] * (float)keep * drop_scale(p);
    if (mask && !sample) mask[i] = (uint8_t)keep;
    if (mask && sample && i % ((int64_t)y.c * (b - a) * y.w) == 0) mask[q.n] = (uint8_t)keep;
}

extern "C" void k_dropout_fwd(cudaStream_t st, uint64_t key, float p, bool sample, kview x, kview y, uint8_t *mask, int a, int b,
                              int full_h)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        dropout_fwd_k<<<blocks(n), T, 0, st>>>(key, p, sample, x, y, mask, a, b, full_h);
        LAUNCHED();
    }
}

__global__ static void dropout_bwd_k(float p, bool sample, const uint8_t *mask, kview dy, kview dx, int a, int b, bool store)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dy.n * dy.c * (b - a) * dy.w) return;
    pos q = decompose(i, dy.c, a, b, dy.w);
    float g = at(dy, q.n, q.c, q.r)[q.col] * (float)mask[sample ? q.n : i] * drop_scale(p);
    float *d = &at(dx, q.n, q.c, q.r)[q.col];
    *d = store ? g : *d + g;
}

extern "C" void k_dropout_bwd(cudaStream_t st, float p, bool sample, const uint8_t *mask, kview dy, kview dx, int a, int b, bool store)
{
    int64_t n = (int64_t)dy.n * dy.c * (b - a) * dy.w;
    if (n) {
        dropout_bwd_k<<<blocks(n), T, 0, st>>>(p, sample, mask, dy, dx, a, b, store);
        LAUNCHED();
    }
}

__global__ static void maxpool_fwd(kview x, kview y, int64_t *am, kwin w, int in_h, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    float best = -INFINITY;
    int64_t arg = -1;
    for (int ki = 0; ki < w.k; ki++) {
        int ih = q.r * w.s - w.p + w.d * ki;
        if (ih < 0 || ih >= in_h) continue;
        const float *xr = at(x, q.n, q.c, ih);
        for (int kj = 0; kj < w.k; kj++) {
            int iw = q.col * w.s - w.p + w.d * kj;
            if (iw < 0 || iw >= x.w) continue;
            float v = xr[iw];
            if (arg < 0 || v > best || isnan(v)) best = v, arg = (int64_t)ih * x.w + iw;
        }
    }
    at(y, q.n, q.c, q.r)[q.col] = best;
    if (am) am[i] = arg; // (N, C, b - a, W_out), the CPU's layout
}

extern "C" void k_maxpool_fwd(cudaStream_t st, kview x, kview y, int64_t *argmax, kwin w, int in_h, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        maxpool_fwd<<<blocks(n), T, 0, st>>>(x, y, argmax, w, in_h, a, b);
        LAUNCHED();
    }
}

// Output rows/columns whose window tap lands on input index i: o = (i + p - d * t) / s.
__device__ static bool tap(int i, int t, kwin w, int *o)
{
    int num = i + w.p - w.d * t;
    if (num < 0 || num % w.s) return false;
    *o = num / w.s;
    return true;
}

// dx element gathers dy over the outputs in rows [a, b) whose argmax is it (fixed order).
__global__ static void maxpool_bwd(kview dx, kview dy, const int64_t *am, kwin w, int in_h, int a, int b, int lo, int hi)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * (hi - lo) * dx.w) return;
    pos q = decompose(i, dx.c, lo, hi, dx.w);
    int64_t me = (int64_t)q.r * dx.w + q.col;
    float s = 0.0f;
    for (int ti = 0; ti < w.k; ti++) {
        int o;
        if (!tap(q.r, ti, w, &o) || o < a || o >= b) continue;
        for (int tj = 0; tj < w.k; tj++) {
            int oc;
            if (!tap(q.col, tj, w, &oc) || oc >= dy.w) continue;
            int64_t k = (((int64_t)q.n * dy.c + q.c) * (b - a) + (o - a)) * dy.w + oc;
            if (am[k] == me) s += at(dy, q.n, q.c, o)[oc];
        }
    }
    at(dx, q.n, q.c, q.r)[q.col] += s;
}

static void rows_in(kwin w, int in_h, int a, int b, int *lo, int *hi)
{
    *lo = a * w.s - w.p, *hi = (b - 1) * w.s - w.p + w.d * (w.k - 1) + 1;
    if (*lo < 0) *lo = 0;
    if (*hi > in_h) *hi = in_h;
}

extern "C" void k_maxpool_bwd(cudaStream_t st, kview dx, kview dy, const int64_t *argmax, kwin w, int in_h, int a, int b)
{
    int lo, hi;
    rows_in(w, in_h, a, b, &lo, &hi);
    int64_t n = (int64_t)dx.n * dx.c * (hi - lo) * dx.w;
    if (n > 0) {
        maxpool_bwd<<<blocks(n), T, 0, st>>>(dx, dy, argmax, w, in_h, a, b, lo, hi);
        LAUNCHED();
    }
}

__global__ static void avgpool_fwd(kview x, kview y, kwin w, int in_h, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    float s = 0.0f;
    for (int ki = 0; ki < w.k; ki++) {
        int ih = q.r * w.s - w.p + w.d * ki;
        if (ih < 0 || ih >= in_h) continue;
        const float *xr = at(x, q.n, q.c, ih);
        for (int kj = 0; kj < w.k; kj++) {
            int iw = q.col * w.s - w.p + w.d * kj;
            if (iw >= 0 && iw < x.w) s += xr[iw];
        }
    }
    at(y, q.n, q.c, q.r)[q.col] = s * (1.0f / (float)(w.k * w.k));
}

extern "C" void k_avgpool_fwd(cudaStream_t st, kview x, kview y, kwin w, int in_h, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        avgpool_fwd<<<blocks(n), T, 0, st>>>(x, y, w, in_h, a, b);
        LAUNCHED();
    }
}

__global__ static void avgpool_bwd(kview dx, kview dy, kwin w, int in_h, int a, int b, int lo, int hi)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * (hi - lo) * dx.w) return;
    pos q = decompose(i, dx.c, lo, hi, dx.w);
    float s = 0.0f, inv = 1.0f / (float)(w.k * w.k);
    for (int ti = 0; ti < w.k; ti++) {
        int o;
        if (!tap(q.r, ti, w, &o) || o < a || o >= b) continue;
        for (int tj = 0; tj < w.k; tj++) {
            int oc;
            if (tap(q.col, tj, w, &oc) && oc < dy.w) s += at(dy, q.n, q.c, o)[oc] * inv;
        }
    }
    at(dx, q.n, q.c, q.r)[q.col] += s;
}

extern "C" void k_avgpool_bwd(cudaStream_t st, kview dx, kview dy, kwin w, int in_h, int a, int b)
{
    int lo, hi;
    rows_in(w, in_h, a, b, &lo, &hi);
    int64_t n = (int64_t)dx.n * dx.c * (hi - lo) * dx.w;
    if (n > 0) {
        avgpool_bwd<<<blocks(n), T, 0, st>>>(dx, dy, w, in_h, a, b, lo, hi);
        LAUNCHED();
    }
}

__global__ static void upsample_fwd(kview x, kview y, int u, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] = at(x, q.n, q.c, q.r / u)[q.col / u];
}

extern "C" void k_upsample_fwd(cudaStream_t st, kview x, kview y, int u, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        upsample_fwd<<<blocks(n), T, 0, st>>>(x, y, u, a, b);
        LAUNCHED();
    }
}

/* a gather per input element: its copies in rows [a, b), in row-major order (as the CPU's) */
__global__ static void upsample_bwd(kview dx, kview dy, int u, int a, int b, int lo, int hi)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * (hi - lo) * dx.w) return;
    pos q = decompose(i, dx.c, lo, hi, dx.w);
    int o0 = max(q.r * u, a), o1 = min((q.r + 1) * u, b), w1 = min((q.col + 1) * u, dy.w);
    float s = 0.0f;
    for (int o = o0; o < o1; o++) {
        const float *r = at(dy, q.n, q.c, o);
        for (int ow = q.col * u; ow < w1; ow++) s += r[ow];
    }
    at(dx, q.n, q.c, q.r)[q.col] += s;
}

extern "C" void k_upsample_bwd(cudaStream_t st, kview dx, kview dy, int u, int a, int b)
{
    int lo = a / u, hi = (b - 1) / u + 1;
    int64_t n = (int64_t)dx.n * dx.c * (hi - lo) * dx.w;
    if (n > 0) {
        upsample_bwd<<<blocks(n), T, 0, st>>>(dx, dy, u, a, b, lo, hi);
        LAUNCHED();
    }
}

__device__ static void apool_window(int i, int in, int o, int *s, int *e)
{
    *s = (int)(((int64_t)i * in) / o);
    *e = (int)(((int64_t)(i + 1) * in + o - 1) / o);
}

__global__ static void apool_fwd(kview x, kview y, int o)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * o * o) return;
    pos q = decompose(i, y.c, 0, o, o);
    int h0, h1, w0, w1;
    apool_window(q.r, x.h, o, &h0, &h1);
    apool_window(q.col, x.w, o, &w0, &w1);
    double s = 0.0;
    for (int ih = h0; ih < h1; ih++)
        for (int iw = w0; iw < w1; iw++) s += at(x, q.n, q.c, ih)[iw];
    at(y, q.n, q.c, q.r)[q.col] = (float)(s / (double)((h1 - h0) * (w1 - w0)));
}

extern "C" void k_apool_fwd(cudaStream_t st, kview x, kview y, int o)
{
    int64_t n = (int64_t)y.n * y.c * o * o;
    if (n) {
        apool_fwd<<<blocks(n), T, 0, st>>>(x, y, o);
        LAUNCHED();
    }
}

__global__ static void apool_bwd(kview dx, kview dy, int o)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * dx.h * dx.w) return;
    pos q = decompose(i, dx.c, 0, dx.h, dx.w);
    float s = 0.0f;
    for (int oi = 0; oi < o; oi++) {
        int h0, h1;
        apool_window(oi, dx.h, o, &h0, &h1);
        if (q.r < h0 || q.r >= h1) continue;
        for (int oj = 0; oj < o; oj++) {
            int w0, w1;
            apool_window(oj, dx.w, o, &w0, &w1);
            if (q.col >= w0 && q.col < w1) s += at(dy, q.n, q.c, oi)[oj] / (float)((h1 - h0) * (w1 - w0));
        }
    }
    at(dx, q.n, q.c, q.r)[q.col] += s;
}

extern "C" void k_apool_bwd(cudaStream_t st, kview dx, kview dy, int o)
{
    int64_t n = (int64_t)dx.n * dx.c * dx.h * dx.w;
    if (n) {
        apool_bwd<<<blocks(n), T, 0, st>>>(dx, dy, o);
        LAUNCHED();
    }
}

// One block per channel: sums in double over the block, then dx and the parameter gradients.
__global__ static void bn_frozen_bwd(kview x, kview dx, kview dy, int a, int b, const float *gamma, const float *stats, float *dw)
{
    __shared__ double s1[T], s2[T];
    int ch = blockIdx.x, C = dy.c;
    int64_t len = (int64_t)(b - a) * dy.w, M = (int64_t)dy.n * len;
    float mean = stats[ch], invstd = stats[C + ch], k = gamma[ch] * invstd;
    double l1 = 0.0, l2 = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int n = (int)(i / len), r = a + (int)((i % len) / dy.w), col = (int)(i % dy.w);
        float g = at(dy, n, ch, r)[col];
        if (dw) l1 += g, l2 += g * ((at(x, n, ch, r)[col] - mean) * invstd);
        if (dx.p) at(dx, n, ch, r)[col] += k * g;
    }
    if (!dw) return;
    s1[threadIdx.x] = l1, s2[threadIdx.x] = l2;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) s1[threadIdx.x] += s1[threadIdx.x + h], s2[threadIdx.x] += s2[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) dw[ch] += (float)s2[0], dw[C + ch] += (float)s1[0];
}

extern "C" void k_bn_frozen_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, const float *gamma, const float *stats,
                                float *dw)
{
    bn_frozen_bwd<<<dy.c, T, 0, st>>>(x, dx, dy, a, b, gamma, stats, dw);
    LAUNCHED();
}

// Whole-map statistics gathered over bands (ops.h: OPS_BN_MAP, ops_stats). One block per channel,
// fp64 sums reduced in shared memory in a fixed order, so results do not depend on thread timing.

// Block reduction of two doubles; thread 0 gets the totals.
__device__ static void reduce2(double *s1, double *s2, double l1, double l2)
{
    s1[threadIdx.x] = l1, s2[threadIdx.x] = l2;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) s1[threadIdx.x] += s1[threadIdx.x + h], s2[threadIdx.x] += s2[threadIdx.x + h];
        __syncthreads();
    }
}

// y rows [a, b) = (x - mean) * invstd * gamma + beta with the given statistics.
__global__ static void bn_map_fwd(kview x, kview y, int a, int b, const float *w, const float *stats)
{
    int64_t len = (int64_t)(b - a) * y.w, n_all = (int64_t)y.n * y.c * len;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n_all) return;
    int col = (int)(i % y.w), r = a + (int)((i / y.w) % (b - a)), ch = (int)((i / len) % y.c), n = (int)(i / (len * y.c));
    float xv = at(x, n, ch, r)[col];
    at(y, n, ch, r)[col] = (xv - stats[ch]) * stats[y.c + ch] * w[ch] + w[y.c + ch];
}

extern "C" void k_bn_map_fwd(cudaStream_t st, kview x, kview y, int a, int b, const float *w, const float *stats)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        bn_map_fwd<<<blocks(n), T, 0, st>>>(x, y, a, b, w, stats);
        LAUNCHED();
    }
}

// dx (+)= gamma * invstd * (dy - [row owned] (S1 + xhat * S2) / count) with the whole map's sums;
// dgamma, dbeta += this call's own sums (dw may be NULL; dx.p NULL: none wanted).
__global__ static void bn_map_bwd(kview x, kview dx, kview dy, int a, int b, int own_a, int own_b, const float *gamma,
                                  const float *stats, const double *sums, double count, float *dw)
{
    __shared__ double s1[T], s2[T];
    int ch = blockIdx.x, C = dy.c;
    int64_t len = (int64_t)(b - a) * dy.w, M = (int64_t)dy.n * len;
    float mean = stats[ch], invstd = stats[C + ch], k = gamma[ch] * invstd;
    float mdy = (float)(sums[ch] / count), mdyx = (float)(sums[C + ch] / count);
    double l1 = 0.0, l2 = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int n = (int)(i / len), r = a + (int)((i % len) / dy.w), col = (int)(i % dy.w);
        float g = at(dy, n, ch, r)[col], xhat = (at(x, n, ch, r)[col] - mean) * invstd;
        if (dw) l1 += g, l2 += g * xhat;
        if (dx.p) at(dx, n, ch, r)[col] += k * (r >= own_a && r < own_b ? g - mdy - xhat * mdyx : g);
    }
    if (!dw) return;
    reduce2(s1, s2, l1, l2);
    if (threadIdx.x == 0) dw[ch] += (float)s2[0], dw[C + ch] += (float)s1[0];
}

extern "C" void k_bn_map_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, int own_a, int own_b, const float *gamma,
                             const float *stats, const double *sums, int64_t count, float *dw)
{
    bn_map_bwd<<<dy.c, T, 0, st>>>(x, dx, dy, a, b, own_a, own_b, gamma, stats, sums, (double)count, dw);
    LAUNCHED();
}

// sums += (sum x, sum x^2) over rows [a, b), or with dy (sum dy, sum dy * xhat).
__global__ static void bn_sums(kview x, kview dy, int a, int b, const float *stats, double *sums)
{
    __shared__ double s1[T], s2[T];
    int ch = blockIdx.x, C = x.c;
    int64_t len = (int64_t)(b - a) * x.w, M = (int64_t)x.n * len;
    double l1 = 0.0, l2 = 0.0;
    for (int64_t i = threadIdx.x; i < M; i += blockDim.x) {
        int n = (int)(i / len), r = a + (int)((i % len) / x.w), col = (int)(i % x.w);
        float xv = at(x, n, ch, r)[col];
        if (dy.p) {
            float g = at(dy, n, ch, r)[col];
            l1 += g, l2 += g * ((xv - stats[ch]) * stats[C + ch]);
        } else {
            l1 += xv, l2 += (double)xv * xv;
        }
    }
    reduce2(s1, s2, l1, l2);
    if (threadIdx.x == 0) sums[ch] += s1[0], sums[C + ch] += s2[0];
}

extern "C" void k_bn_sums(cudaStream_t st, kview x, kview dy, int a, int b, const float *stats, double *sums)
{
    bn_sums<<<x.c, T, 0, st>>>(x, dy, a, b, stats, sums);
    LAUNCHED();
}

// stats = (mean, 1 / sqrt(var + eps)) from the sums; running statistics toward them (unbiased var).
__global__ static void bn_sums_end(const double *sums, float *stats, float *running, int c, double count, float eps, float mom,
                                   bool update)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c) return;
    double mu = sums[ch] / count, var = sums[c + ch] / count - mu * mu;
    if (var < 0) var = 0;
    float mean = (float)mu;
    stats[ch] = mean;
    stats[c + ch] = (float)(1.0 / sqrt(var + (double)eps));
    if (update) {
        double unbiased = count > 1 ? var * count / (count - 1) : var;
        running[ch] = (1.0f - mom) * running[ch] + mom * mean;
        running[c + ch] = (1.0f - mom) * running[c + ch] + mom * (float)unbiased;
    }
}

extern "C" void k_bn_sums_end(cudaStream_t st, const double *sums, float *stats, float *running, int c, int64_t count, float eps,
                              float momentum, bool update)
{
    bn_sums_end<<<blocks(c), T, 0, st>>>(sums, stats, running, c, (double)count, eps, momentum, update);
    LAUNCHED();
}

// One thread per image (K is at most a few thousand classes); then thread 0 of a second kernel
// averages, in image order.
/* K classes at each of P places an image (ops_cpu.c: loss_shape): one thread a place, each block's
 * losses summed in thread order into per_block (a fixed order: the loss does not depend on timing) */
__global__ static void loss_fwd(kview x, int64_t K, int64_t P, const int64_t *labels, float *probs, double *per_block)
{
    __shared__ double part[T];
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    double v = 0.0;
    if (i < x.n * P) {
        int64_t n = i / P, q = i % P;
        const float *z = x.p + n * K * P + q;
        float *p = probs + n * K * P + q, zmax = z[0];
        for (int64_t k = 1; k < K; k++) zmax = z[k * P] > zmax ? z[k * P] : zmax;
        double s = 0.0;
        for (int64_t k = 0; k < K; k++) s += exp((double)z[k * P] - zmax);
        for (int64_t k = 0; k < K; k++) p[k * P] = (float)(exp((double)z[k * P] - zmax) / s);
        v = log(s) + zmax - z[labels[i] * P];
    }
    part[threadIdx.x] = v;
    __syncthreads();
    if (threadIdx.x) return;
    double t = 0.0;
    for (int j = 0; j < (int)blockDim.x; j++) t += part[j];
    per_block[blockIdx.x] = t;
}

__global__ static void loss_mean(const double *per_block, int nb, int64_t places, float *loss)
{
    double t = 0.0;
    for (int i = 0; i < nb; i++) t += per_block[i];
    *loss = (float)(t / (double)places);
}

extern "C" int64_t k_loss_scratch(int64_t places) { return blocks(places); }

extern "C" void k_loss_fwd(cudaStream_t st, kview x, int64_t K, int64_t P, const int64_t *labels, float *probs, float *loss_dev,
                           double *scratch)
{
    unsigned nb = blocks(x.n * P);
    loss_fwd<<<nb, T, 0, st>>>(x, K, P, labels, probs, scratch);
    LAUNCHED();
    loss_mean<<<1, 1, 0, st>>>(scratch, (int)nb, x.n * P, loss_dev);
    LAUNCHED();
}

__global__ static void loss_bwd(kview dx, int64_t K, int64_t P, const float *probs, const int64_t *labels, const float *dy)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= dx.n * K * P) return;
    int64_t n = i / (K * P), k = i / P % K, q = i % P;
    float g = (dy ? dy[0] : 1.0f) / (float)(dx.n * P);
    dx.p[i] += (probs[i] - (k == labels[n * P + q] ? 1.0f : 0.0f)) * g;
}

extern "C" void k_loss_bwd(cudaStream_t st, kview dx, int64_t K, int64_t P, const float *probs, const int64_t *labels, const float *dy)
{
    int64_t n = (int64_t)dx.n * dx.c * dx.h * dx.w;
    if (n) {
        loss_bwd<<<blocks(n), T, 0, st>>>(dx, K, P, probs, labels, dy);
        LAUNCHED();
    }
}

__global__ static void bn_frozen_stats(const float *running, float *stats, int c, float eps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= c) return;
    stats[i] = running[i];
    stats[c + i] = 1.0f / sqrtf(running[c + i] + eps);
}

extern "C" void k_bn_frozen_stats(cudaStream_t st, const float *running, float *stats, int c, float eps)
{
    bn_frozen_stats<<<blocks(c), T, 0, st>>>(running, stats, c, eps);
    LAUNCHED();
}

__global__ static void fc_bias_grad(const float *dy, int n, int out, float *db)
{
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= out) return;
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += dy[(int64_t)i * out + o];
    db[o] += s;
}

extern "C" void k_fc_bias_grad(cudaStream_t st, const float *dy, int n, int out, float *db)
{
    fc_bias_grad<<<blocks(out), T, 0, st>>>(dy, n, out, db);
    LAUNCHED();
}

// Transposed convolution (ConvTranspose2d) of window w = (k, s, p, d), its own (net_convt_window),
// with q channel groups; weight (C_in, C_out / q, k, k). Gathers, one thread per element written:
// output row o, column ow reads input (i, iw) through tap (ki, kj) where o = i*s - p + d*ki.

__global__ static void convt_fwd(kview x, kview y, const float *wt, const float *bs, kwin w, int q, int in_h, int a, int b)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos e = decompose(idx, y.c, a, b, y.w);
    int cqi = x.c / q, cqo = y.c / q, g = e.c / cqo, co = e.c % cqo;
    float s = bs ? bs[e.c] : 0.0f;
    for (int ci = g * cqi; ci < (g + 1) * cqi; ci++)
        for (int ki = 0; ki < w.k; ki++) {
            int t = e.r + w.p - w.d * ki;
            if (t < 0 || t % w.s || t / w.s >= in_h) continue;
            const float *xr = at(x, e.n, ci, t / w.s);
            for (int kj = 0; kj < w.k; kj++) {
                int u = e.col + w.p - w.d * kj;
                if (u < 0 || u % w.s || u / w.s >= x.w) continue;
                s += xr[u / w.s] * wt[(((int64_t)ci * cqo + co) * w.k + ki) * w.k + kj];
            }
        }
    at(y, e.n, e.c, e.r)[e.col] = s;
}

extern "C" void k_convt_fwd(cudaStream_t st, kview x, kview y, const float *wt, const float *bs, kwin w, int q, int in_h, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n > 0) {
        convt_fwd<<<blocks(n), T, 0, st>>>(x, y, wt, bs, w, q, in_h, a, b);
        LAUNCHED();
    }
}

// dx rows [lo, hi) += the share of dy's rows [a, b)
__global__ static void convt_bwd_data(kview dx, kview dy, const float *wt, kwin w, int q, int lo, int hi, int a, int b)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)dx.n * dx.c * (hi - lo) * dx.w) return;
    pos e = decompose(idx, dx.c, lo, hi, dx.w);
    int cqi = dx.c / q, cqo = dy.c / q, g = e.c / cqi;
    float s = 0.0f;
    for (int co = 0; co < cqo; co++)
        for (int ki = 0; ki < w.k; ki++) {
            int o = e.r * w.s - w.p + w.d * ki;
            if (o < a || o >= b) continue;
            const float *dyr = at(dy, e.n, g * cqo + co, o);
            for (int kj = 0; kj < w.k; kj++) {
                int ow = e.col * w.s - w.p + w.d * kj;
                if (ow < 0 || ow >= dy.w) continue;
                s += dyr[ow] * wt[(((int64_t)e.c * cqo + co) * w.k + ki) * w.k + kj];
            }
        }
    at(dx, e.n, e.c, e.r)[e.col] += s;
}

extern "C" void k_convt_bwd_data(cudaStream_t st, kview dx, kview dy, const float *wt, kwin w, int q, int lo, int hi, int a, int b)
{
    int64_t n = (int64_t)dx.n * dx.c * (hi - lo) * dx.w;
    if (n > 0) {
        convt_bwd_data<<<blocks(n), T, 0, st>>>(dx, dy, wt, w, q, lo, hi, a, b);
        LAUNCHED();
    }
}

// dw (C_in, C_out / q, k, k) += x rows [lo, hi) against dy rows [a, b); one thread a weight, then
// one an output channel for the bias (db: NULL when there is none)
__global__ static void convt_bwd_filter(kview x, kview dy, float *dw, float *db, kwin w, int q, int lo, int hi, int a, int b)
{
    int cqi = x.c / q, cqo = dy.c / q;
    int64_t nw = (int64_t)x.c * cqo * w.k * w.k, idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= nw + (db ? dy.c : 0)) return;
    float s = 0.0f;
    if (idx >= nw) {
        int co = (int)(idx - nw);
        for (int n = 0; n < dy.n; n++)
            for (int o = a; o < b; o++) {
                const float *r = at(dy, n, co, o);
                for (int ow = 0; ow < dy.w; ow++) s += r[ow];
            }
        db[co] += s;
        return;
    }
    int kj = (int)(idx % w.k), ki = (int)(idx / w.k % w.k), co = (int)(idx / ((int64_t)w.k * w.k) % cqo);
    int ci = (int)(idx / ((int64_t)w.k * w.k * cqo)), g = ci / cqi;
    for (int n = 0; n < x.n; n++)
        for (int i = lo; i < hi; i++) {
            int o = i * w.s - w.p + w.d * ki;
            if (o < a || o >= b) continue;
            const float *xr = at(x, n, ci, i), *dyr = at(dy, n, g * cqo + co, o);
            for (int iw = 0; iw < x.w; iw++) {
                int ow = iw * w.s - w.p + w.d * kj;
                if (ow >= 0 && ow < dy.w) s += xr[iw] * dyr[ow];
            }
        }
    dw[idx] += s;
}

extern "C" void k_convt_bwd_filter(cudaStream_t st, kview x, kview dy, float *dw, float *db, kwin w, int q, int lo, int hi, int a, int b)
{
    int64_t n = (int64_t)x.c * (dy.c / q) * w.k * w.k + (db ? dy.c : 0);
    if (n > 0) {
        convt_bwd_filter<<<blocks(n), T, 0, st>>>(x, dy, dw, db, w, q, lo, hi, a, b);
        LAUNCHED();
    }
}

// Bilinear upsampling by s (engine/act.h: lerp_taps). Forward: one thread an output value; backward:
// one an input value, gathering from the outputs whose taps reach it (rows and columns within two
// input rows of it: o / s - 1 <= i0 <= o / s), so the sums do not depend on thread timing.
__global__ static void bilinear_fwd(kview x, kview y, int s, bool align, int in_h, int out_h, int a, int b)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos e = decompose(idx, y.c, a, b, y.w);
    int h0, h1, w0, w1;
    float lh1, lw1;
    lerp_taps(e.r, in_h, out_h, s, align, &h0, &h1, &lh1);
    lerp_taps(e.col, x.w, y.w, s, align, &w0, &w1, &lw1);
    const float *r0 = at(x, e.n, e.c, h0), *r1 = lh1 != 0.0f ? at(x, e.n, e.c, h1) : r0;
    float t0 = r0[w0] * (1.0f - lw1) + r0[w1] * lw1, t1 = r1[w0] * (1.0f - lw1) + r1[w1] * lw1;
    at(y, e.n, e.c, e.r)[e.col] = t0 * (1.0f - lh1) + t1 * lh1;
}

extern "C" void k_bilinear_fwd(cudaStream_t st, kview x, kview y, int s, bool align, int in_h, int out_h, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n > 0) {
        bilinear_fwd<<<blocks(n), T, 0, st>>>(x, y, s, align, in_h, out_h, a, b);
        LAUNCHED();
    }
}

// The weight of input index i in output index o's taps (both taps when they coincide).
__device__ static float lerp_weight(int o, int i, int in, int out, int s, bool align)
{
    int i0, i1;
    float l1;
    lerp_taps(o, in, out, s, align, &i0, &i1, &l1);
    return (i0 == i ? 1.0f - l1 : 0.0f) + (i1 == i && l1 != 0.0f ? l1 : 0.0f);
}

__global__ static void bilinear_bwd(kview dx, kview dy, int s, bool align, int in_h, int out_h, int lo, int hi, int a, int b)
{
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (int64_t)dx.n * dx.c * (hi - lo) * dx.w) return;
    pos e = decompose(idx, dx.c, lo, hi, dx.w);
    int o0 = max(a, s * (e.r - 2)), o1 = min(b, s * (e.r + 3)), c0 = max(0, s * (e.col - 2)), c1 = min(dy.w, s * (e.col + 3));
    float sum = 0.0f;
    for (int o = o0; o < o1; o++) {
        float wr = lerp_weight(o, e.r, in_h, out_h, s, align);
        if (wr == 0.0f) continue;
        const float *g = at(dy, e.n, e.c, o);
        for (int ow = c0; ow < c1; ow++) {
            float wc = lerp_weight(ow, e.col, dx.w, dy.w, s, align);
            if (wc != 0.0f) sum += wr * wc * g[ow];
        }
    }
    at(dx, e.n, e.c, e.r)[e.col] += sum;
}

extern "C" void k_bilinear_bwd(cudaStream_t st, kview dx, kview dy, int s, bool align, int in_h, int out_h, int lo, int hi, int a,
                               int b)
{
    int64_t n = (int64_t)dx.n * dx.c * (hi - lo) * dx.w;
    if (n > 0) {
        bilinear_bwd<<<blocks(n), T, 0, st>>>(dx, dy, s, align, in_h, out_h, lo, hi, a, b);
        LAUNCHED();
    }
}

// Group normalization (whole maps) and layer normalization over the channels (rows [a, b)), the
// CPU's formulas (engine/cpu/bn_cpu.c): a thread per normalized set computes its statistics (and,
// backward, its two gradient sums), a thread per value the result; dgamma and dbeta a thread per
// channel. Simple, not fast.
__global__ static void gnorm_stats(kview x, float *stats, int G, float eps)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= x.n * G) return;
    int n = i / G, q = i % G, cg = x.c / G;
    int64_t plane = (int64_t)x.h * x.w, M = cg * plane;
    double s1 = 0.0, s2 = 0.0;
    for (int ch = q * cg; ch < (q + 1) * cg; ch++)
        for (int64_t k = 0; k < plane; k++) s1 += at(x, n, ch, 0)[k];
    double mu = s1 / (double)M;
    for (int ch = q * cg; ch < (q + 1) * cg; ch++)
        for (int64_t k = 0; k < plane; k++) {
            double d = at(x, n, ch, 0)[k] - mu;
            s2 += d * d;
        }
    stats[i] = (float)mu, stats[x.n * G + i] = (float)(1.0 / sqrt(s2 / (double)M + (double)eps));
}

__global__ static void gnorm_apply(kview x, kview y, const float *stats, const float *w, int G)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, plane = (int64_t)x.h * x.w;
    if (i >= (int64_t)x.n * x.c * plane) return;
    int ch = (int)(i / plane % x.c), n = (int)(i / plane / x.c), s = n * G + ch / (x.c / G);
    y.p[i] = (x.p[i] - stats[s]) * stats[x.n * G + s] * w[ch] + w[x.c + ch];
}

extern "C" void k_gnorm_fwd(cudaStream_t st, kview x, kview y, float *stats, const float *w, int G, float eps)
{
    int64_t n = (int64_t)x.n * x.c * x.h * x.w;
    if (!n) return;
    gnorm_stats<<<blocks(x.n * G), T, 0, st>>>(x, stats, G, eps);
    LAUNCHED();
    gnorm_apply<<<blocks(n), T, 0, st>>>(x, y, stats, w, G);
    LAUNCHED();
}

// sums[2 i], sums[2 i + 1]: the group's sums of g = dy * gamma and of g * xhat
__global__ static void gnorm_sums(kview x, kview dy, const float *stats, const float *w, int G, double *sums)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= x.n * G) return;
    int n = i / G, q = i % G, cg = x.c / G;
    int64_t plane = (int64_t)x.h * x.w;
    float mu = stats[i], is = stats[x.n * G + i];
    double s1 = 0.0, s2 = 0.0;
    for (int ch = q * cg; ch < (q + 1) * cg; ch++)
        for (int64_t k = 0; k < plane; k++) {
            double g = (double)at(dy, n, ch, 0)[k] * w[ch];
            s1 += g, s2 += g * ((at(x, n, ch, 0)[k] - mu) * is);
        }
    sums[2 * i] = s1, sums[2 * i + 1] = s2;
}

__global__ static void gnorm_dx(kview x, kview dy, kview dx, const float *stats, const float *w, int G, const double *sums)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, plane = (int64_t)x.h * x.w;
    if (i >= (int64_t)x.n * x.c * plane) return;
    int ch = (int)(i / plane % x.c), n = (int)(i / plane / x.c), s = n * G + ch / (x.c / G);
    double M = (double)(x.c / G) * plane;
    float mu = stats[s], is = stats[x.n * G + s], m1 = (float)(sums[2 * s] / M), m2 = (float)(sums[2 * s + 1] / M);
    dx.p[i] += is * (dy.p[i] * w[ch] - m1 - (x.p[i] - mu) * is * m2);
}

// dgamma, dbeta of channel ch over images and the places of rows [a, b); per place statistics
// (lnorm, place_stats) or per image group (gnorm)
__global__ static void norm_dw(kview x, kview dy, const float *stats, float *dw, int G, bool place_stats, int a, int b)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= dy.c) return;
    int64_t places = (int64_t)dy.n * (b - a) * dy.w;
    double sg = 0.0, sb = 0.0;
    for (int n = 0; n < dy.n; n++)
        for (int r = a; r < b; r++)
            for (int col = 0; col < dy.w; col++) {
                int64_t k = place_stats ? ((int64_t)n * (b - a) + (r - a)) * dy.w + col : n * G + ch / (dy.c / G);
                float mu = stats[k], is = stats[(place_stats ? places : (int64_t)dy.n * G) + k], g = at(dy, n, ch, r)[col];
                sg += (double)g * ((at(x, n, ch, r)[col] - mu) * is), sb += g;
            }
    dw[ch] += (float)sg, dw[dy.c + ch] += (float)sb;
}

extern "C" void k_gnorm_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *stats, const float *w, float *dw, int G,
                            double *scratch)
{
    int64_t n = (int64_t)x.n * x.c * x.h * x.w;
    if (!n) return;
    if (dw) {
        norm_dw<<<blocks(dy.c), T, 0, st>>>(x, dy, stats, dw, G, false, 0, dy.h);
        LAUNCHED();
    }
    if (!dx.p) return;
    gnorm_sums<<<blocks(x.n * G), T, 0, st>>>(x, dy, stats, w, G, scratch);
    LAUNCHED();
    gnorm_dx<<<blocks(n), T, 0, st>>>(x, dy, dx, stats, w, G, scratch);
    LAUNCHED();
}

__global__ static void lnorm_fwd(kview x, kview y, float *stats, const float *w, float eps, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, places = (int64_t)x.n * (b - a) * x.w;
    if (i >= places) return;
    int col = (int)(i % x.w), r = a + (int)(i / x.w % (b - a)), n = (int)(i / x.w / (b - a));
    double s1 = 0.0, s2 = 0.0;
    for (int ch = 0; ch < x.c; ch++) s1 += at(x, n, ch, r)[col];
    double mu = s1 / x.c;
    for (int ch = 0; ch < x.c; ch++) {
        double d = at(x, n, ch, r)[col] - mu;
        s2 += d * d;
    }
    float mean = (float)mu, is = (float)(1.0 / sqrt(s2 / x.c + (double)eps));
    stats[i] = mean, stats[places + i] = is;
    for (int ch = 0; ch < x.c; ch++) at(y, n, ch, r)[col] = (at(x, n, ch, r)[col] - mean) * is * w[ch] + w[x.c + ch];
}

extern "C" void k_lnorm_fwd(cudaStream_t st, kview x, kview y, float *stats, const float *w, float eps, int a, int b)
{
    int64_t n = (int64_t)x.n * (b - a) * x.w;
    if (n > 0) {
        lnorm_fwd<<<blocks(n), T, 0, st>>>(x, y, stats, w, eps, a, b);
        LAUNCHED();
    }
}

__global__ static void lnorm_dx(kview x, kview dy, kview dx, const float *stats, const float *w, int a, int b, bool store)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, places = (int64_t)x.n * (b - a) * x.w;
    if (i >= places) return;
    int col = (int)(i % x.w), r = a + (int)(i / x.w % (b - a)), n = (int)(i / x.w / (b - a));
    float mu = stats[i], is = stats[places + i];
    double s1 = 0.0, s2 = 0.0;
    for (int ch = 0; ch < x.c; ch++) {
        double g = (double)at(dy, n, ch, r)[col] * w[ch];
        s1 += g, s2 += g * ((at(x, n, ch, r)[col] - mu) * is);
    }
    float m1 = (float)(s1 / x.c), m2 = (float)(s2 / x.c);
    for (int ch = 0; ch < x.c; ch++) {
        float v = is * (at(dy, n, ch, r)[col] * w[ch] - m1 - (at(x, n, ch, r)[col] - mu) * is * m2);
        float *d = &at(dx, n, ch, r)[col];
        *d = store ? v : *d + v;
    }
}

extern "C" void k_lnorm_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *stats, const float *w, float *dw, int a, int b,
                            bool store)
{
    int64_t n = (int64_t)x.n * (b - a) * x.w;
    if (n <= 0) return;
    if (dw) {
        norm_dw<<<blocks(dy.c), T, 0, st>>>(x, dy, stats, dw, 1, true, a, b);
        LAUNCHED();
    }
    if (dx.p) {
        lnorm_dx<<<blocks(n), T, 0, st>>>(x, dy, dx, stats, w, a, b, store);
        LAUNCHED();
    }
}

// scale: y = x * w[c] on rows [a, b); backward dx (+)= dy * w[c], and dw[c] += the sum of dy * x
// (a thread a channel)
__global__ static void scale_fwd(kview x, kview y, const float *w, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] = at(x, q.n, q.c, q.r)[q.col] * w[q.c];
}

extern "C" void k_scale_fwd(cudaStream_t st, kview x, kview y, const float *w, int a, int b)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        scale_fwd<<<blocks(n), T, 0, st>>>(x, y, w, a, b);
        LAUNCHED();
    }
}

__global__ static void scale_dx(kview dy, kview dx, const float *w, int a, int b)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dy.n * dy.c * (b - a) * dy.w) return;
    pos q = decompose(i, dy.c, a, b, dy.w);
    at(dx, q.n, q.c, q.r)[q.col] += at(dy, q.n, q.c, q.r)[q.col] * w[q.c];
}

__global__ static void scale_dw(kview x, kview dy, float *dw, int a, int b)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= dy.c) return;
    double s = 0.0;
    for (int n = 0; n < dy.n; n++)
        for (int r = a; r < b; r++)
            for (int col = 0; col < dy.w; col++) s += (double)at(dy, n, ch, r)[col] * at(x, n, ch, r)[col];
    dw[ch] += (float)s;
}

extern "C" void k_scale_bwd(cudaStream_t st, kview x, kview dy, kview dx, const float *w, float *dw, int a, int b)
{
    int64_t n = (int64_t)dy.n * dy.c * (b - a) * dy.w;
    if (!n) return;
    if (dw) {
        scale_dw<<<blocks(dy.c), T, 0, st>>>(x, dy, dw, a, b);
        LAUNCHED();
    }
    if (dx.p) {
        scale_dx<<<blocks(n), T, 0, st>>>(dy, dx, w, a, b);
        LAUNCHED();
    }
}
