// knorm: the normalizations' kernels (kernels.h): batch norm frozen, with statistics gathered over
// bands, and a band's own; group norm over whole maps; layer norm over the channels of each place.
#include <math.h>
#include <stdio.h>

#include "engine/act.h"
#include "engine/cuda/bn_chunks.h"
#include "engine/cuda/kcommon.cuh"

// Batch norm over rows [a, b) of a map, by channel (bn_chunks.h): a grid of channels x chunks, each
// block summing in fp64 over its chunk and reducing in shared memory in a fixed order, its two
// sums to the chunk's place in part; bn_gather then adds a channel's chunks in order, so results
// do not depend on thread timing. The element arithmetic is the CPU's (engine/cpu/bn_cpu.c).

enum { BN_SUMS_X, BN_SUMS_DY, BN_FROZEN_BWD, BN_MAP_BWD };

struct bn_pass_args {
    int mode;                  // BN_*
    kview x, dx, dy;           // dx.p NULL: no dx wanted
    int a, b, own_a, own_b;    // rows; BN_MAP_BWD: the mean terms on rows [own_a, own_b) only
    const float *gamma, *stats;
    const double *sums;        // BN_MAP_BWD: the whole map's gradient sums, over count values
    double count;
    double *part;              // the chunks' sums (2 a chunk); NULL: none wanted (dw not asked for)
    int chunks;
};

// BN_SUMS_X: (sum x, sum x^2); BN_SUMS_DY: (sum dy, sum dy * xhat); BN_FROZEN_BWD: dx += gamma *
// invstd * dy and (sum dy, sum dy * xhat); BN_MAP_BWD: dx += gamma * invstd * (dy - [row owned]
// (S1 + xhat * S2) / count) and (sum dy, sum dy * xhat).
__global__ static void bn_pass(bn_pass_args p)
{
    __shared__ double s1[T], s2[T];
    const kview &v = p.mode == BN_SUMS_X ? p.x : p.dy;
    int ch = blockIdx.x, C = v.c;
    int64_t len = (int64_t)(p.b - p.a) * v.w, M = (int64_t)v.n * len;
    int64_t lo = bn_chunk_lo(M, p.chunks, blockIdx.y), hi = bn_chunk_lo(M, p.chunks, blockIdx.y + 1);
    bool normed = p.stats && p.mode != BN_SUMS_X; // the x pass's stats are the ones it gathers: not read
    float mean = normed ? p.stats[ch] : 0.0f, invstd = normed ? p.stats[C + ch] : 0.0f;
    float k = p.gamma ? p.gamma[ch] * invstd : 0.0f;
    float mdy = p.sums ? (float)(p.sums[ch] / p.count) : 0.0f, mdyx = p.sums ? (float)(p.sums[C + ch] / p.count) : 0.0f;
    bool want = p.part != NULL;
    double l1 = 0.0, l2 = 0.0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        int n, r, col;
        bn_place(i, len, v.w, p.a, &n, &r, &col);
        if (p.mode == BN_SUMS_X) {
            float xv = at(p.x, n, ch, r)[col];
            l1 += xv, l2 += (double)xv * xv;
            continue;
        }
        float g = at(p.dy, n, ch, r)[col];
        if (p.mode == BN_FROZEN_BWD) {
            if (want) l1 += g, l2 += g * ((at(p.x, n, ch, r)[col] - mean) * invstd);
            if (p.dx.p) at(p.dx, n, ch, r)[col] += k * g;
            continue;
        }
        float xhat = (at(p.x, n, ch, r)[col] - mean) * invstd;
        if (want) l1 += g, l2 += g * xhat;
        if (p.mode == BN_MAP_BWD && p.dx.p) at(p.dx, n, ch, r)[col] += k * (r >= p.own_a && r < p.own_b ? g - mdy - xhat * mdyx : g);
    }
    if (!want) return;
    reduce2(s1, s2, l1, l2);
    if (threadIdx.x == 0) p.part[2 * ((int64_t)ch * p.chunks + blockIdx.y)] = s1[0], p.part[2 * ((int64_t)ch * p.chunks + blockIdx.y) + 1] = s2[0];
}

// A channel's chunks added in order: sums += (S1, S2), or dw += (dgamma = S2, dbeta = S1).
__global__ static void bn_gather(const double *part, int chunks, int c, double *sums, float *dw)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c) return;
    double t1 = 0.0, t2 = 0.0;
    for (int k = 0; k < chunks; k++) t1 += part[2 * ((int64_t)ch * chunks + k)], t2 += part[2 * ((int64_t)ch * chunks + k) + 1];
    if (sums) sums[ch] += t1, sums[c + ch] += t2;
    if (dw) dw[ch] += (float)t2, dw[c + ch] += (float)t1;
}

// One pass over every channel's rows [a, b), then the gather into sums or dw where either is asked for.
static void bn_run(cudaStream_t st, bn_pass_args p, double *sums, float *dw)
{
    const kview &v = p.mode == BN_SUMS_X ? p.x : p.dy;
    p.chunks = bn_chunks((int64_t)v.n * (p.b - p.a) * v.w);
    if (!sums && !dw) p.part = NULL;
    bn_pass<<<dim3((unsigned)v.c, (unsigned)p.chunks), T, 0, st>>>(p);
    LAUNCHED();
    if (!p.part) return;
    bn_gather<<<blocks(v.c), T, 0, st>>>(p.part, p.chunks, v.c, sums, dw);
    LAUNCHED();
}

extern "C" void k_bn_frozen_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, const float *gamma, const float *stats,
                                float *dw, double *part)
{
    bn_pass_args p = {BN_FROZEN_BWD, x, dx, dy, a, b, a, b, gamma, stats, NULL, 0.0, part, 0};
    bn_run(st, p, NULL, dw);
}

// y rows [a, b) = (x - mean) * invstd * gamma + beta with the given statistics.
__global__ static void bn_map_fwd(kview x, kview y, int a, int b, const float *w, const float *stats)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    float xv = at(x, q.n, q.c, q.r)[q.col];
    at(y, q.n, q.c, q.r)[q.col] = (xv - stats[q.c]) * stats[y.c + q.c] * w[q.c] + w[y.c + q.c];
}

// The same on flat views whose channel planes are a multiple of four values (kcommon.cuh's
// flat_plane4): four values of one channel a thread.
__global__ static void bn_map_fwd_flat(const float *x, float *y, int64_t n, int c, int plane, const float *w, const float *stats)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    int ch = planar_channel(i, plane, c);
    float m = stats[ch], s = stats[c + ch], g = w[ch], be = w[c + ch];
    float4 v = *(const float4 *)(x + i);
    *(float4 *)(y + i) = make_float4((v.x - m) * s * g + be, (v.y - m) * s * g + be, (v.z - m) * s * g + be, (v.w - m) * s * g + be);
}

extern "C" void k_bn_map_fwd(cudaStream_t st, kview x, kview y, int a, int b, const float *w, const float *stats)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    int plane = flat_plane4(y, a, b);
    pview px, py;
    if (n && plane && flat(y, y, a, b) && flat(x, y, a, b)) {
        bn_map_fwd_flat<<<quads(n), T, 0, st>>>(x.p, y.p, n, y.c, plane, w, stats);
        LAUNCHED();
    } else if (n && planar(y, y, a, b, &py) && planar(x, y, a, b, &px)) {
        planar_args p = {.op = PLANAR_BN_MAP, .x = px, .y = py, .n = n, .len = (int64_t)(b - a) * y.w, .c = y.c, .k1 = w, .k2 = stats};
        k_planar(st, &p);
    } else if (n) {
        bn_map_fwd<<<blocks(n), T, 0, st>>>(x, y, a, b, w, stats);
        LAUNCHED();
    }
}

extern "C" void k_bn_map_bwd(cudaStream_t st, kview x, kview dx, kview dy, int a, int b, int own_a, int own_b, const float *gamma,
                             const float *stats, const double *sums, int64_t count, float *dw, double *part)
{
    bn_pass_args p = {BN_MAP_BWD, x, dx, dy, a, b, own_a, own_b, gamma, stats, sums, (double)count, part, 0};
    bn_run(st, p, NULL, dw);
}

extern "C" void k_bn_sums(cudaStream_t st, kview x, kview dy, int a, int b, const float *stats, double *sums, double *part)
{
    bn_pass_args p = {dy.p ? BN_SUMS_DY : BN_SUMS_X, x, {0}, dy, a, b, a, b, NULL, stats, NULL, 0.0, part, 0};
    bn_run(st, p, sums, NULL);
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
