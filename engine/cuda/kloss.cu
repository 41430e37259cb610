// kloss: the loss (softmax cross-entropy, block sums in a fixed order), the fully connected bias
// gradient, and the transposed convolution's three kernels (gathers: slow and exact).
#include <math.h>
#include <stdio.h>

#include "engine/act.h"
#include "engine/cuda/kcommon.cuh"

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
