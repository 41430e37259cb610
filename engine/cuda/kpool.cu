// kpool: pooling and resampling kernels (kernels.h): max pooling with the schedule's argmax, average,
// global and adaptive average pooling, nearest and bilinear upsampling; backward kernels gather
// (each thread the input element it owns), so no two threads write one element.
#include <math.h>
#include <stdio.h>

#include "engine/act.h"
#include "engine/cuda/kcommon.cuh"

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
