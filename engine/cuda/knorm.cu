// knorm: the normalizations' kernels (kernels.h): batch norm frozen, with statistics gathered over
// bands, and a band's own; group norm over whole maps; layer norm over the channels of each place.
#include <math.h>
#include <stdio.h>

#include "engine/act.h"
#include "engine/cuda/kcommon.cuh"

// Whole-map statistics gathered over bands (ops.h: OPS_BN_MAP, ops_stats). One block per channel,
// fp64 sums reduced in shared memory in a fixed order, so results do not depend on thread timing.

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
