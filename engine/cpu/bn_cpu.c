/* bn_cpu: batch normalization on the CPU, and group and layer normalization (the end). Batch norm's
 * (ops.h's three modes: the statistics of the rows given,
 * the running ones, or the whole map's gathered over the bands) and the per-channel sums of the
 * statistics passes. Per channel, reductions over a whole batch add each term in fp64, in vector
 * lanes (bn_sums_x, bn_sums_dy); each channel on one thread, in a fixed order (deterministic).
 * Weight gradients are += across bands.
 * Not done here: choosing the mode (the executor, from the schedule). */
#include <math.h>
#include <string.h>

#include "engine/cpu/ops_cpu.h"

/* Per-channel sums at vector speed, each term added in fp64, so that their error does not grow
 * with the map, nor depend on how bands split it: a row plan's statistics gathered band by band
 * must be the layer's (tried: fp32 blocks of 128 terms, each then added in fp64, moved ResNet-50
 * 2ps:3's gradients 1.5e-2 from layer's; fp32 squares in the gathered sums, 2.7e-2). GNU C vector
 * types (GCC and Clang): 8 values a pass, into eight fp64 lanes per sum (bn_lanes), added in a
 * fixed order at the end (the same on every run and thread count). Plain loops over
 * fp64 lanes, which the compiler left scalar (x86-64's baseline, SSE2), made the backward's sums
 * most of its time (ResNet-50's 256 x 56 x 56 maps at batch 8 on 2 threads: backward 8.0-9.7
 * ms, 2.6-3.2 ms with these; forward 3.8-6.2 ms, now 2.0-2.4). */
typedef float bn_f4 __attribute__((vector_size(16)));
typedef double bn_d2 __attribute__((vector_size(16)));
typedef double bn_d4 __attribute__((vector_size(32)));

/* Eight fp64 lanes, value i + j of a pass of 8 into lane j, as two-lane vectors: the width of
 * x86-64's baseline registers (SSE2). In four-lane GNU vectors, which are not registers there, GCC
 * kept the accumulators in memory, each pass a store and a load behind the last (57% of
 * bn_sums_dy's samples on one store, perf). The same sums, bit for bit, in registers: on a 2-core
 * Xeon at batch 8, a 2048 x 7 x 7 map's forward 0.77 -> 0.22 ms and backward 0.9 -> 0.3 ms, 1024
 * x 14 x 14 1.15 -> 1.0 and 1.5 -> 1.3; maps that do not fit the cache move as memory lets them
 * (256 x 56 x 56: 5.4 ms backward either way). ResNet-50's batch norm forward at batch 2 took
 * 12.1-14.3 ms an iteration, now 11.0-11.7 (3 alternating runs). */
typedef struct {
    bn_d2 l01, l23, l45, l67;
} bn_lanes;

/* values 0-1 of v, and 2-3, in fp64 */
static inline bn_d2 bn_lo(bn_f4 v)
{
    bn_d4 d = __builtin_convertvector(v, bn_d4);
    return __builtin_shufflevector(d, d, 0, 1);
}
static inline bn_d2 bn_hi(bn_f4 v)
{
    bn_d4 d = __builtin_convertvector(v, bn_d4);
    return __builtin_shufflevector(d, d, 2, 3);
}

/* lanes 0-3 += lo, 4-7 += hi, each value in fp64 */
static inline void bn_add(bn_lanes *s, bn_f4 lo, bn_f4 hi)
{
    s->l01 += bn_lo(lo), s->l23 += bn_hi(lo), s->l45 += bn_lo(hi), s->l67 += bn_hi(hi);
}

/* lanes 0-3 += lo^2, 4-7 += hi^2 of (v - K) in fp64 (the forward's sums of squares) */
static inline void bn_add_sq(bn_lanes *s1, bn_lanes *s2, bn_f4 lo, bn_f4 hi, double K)
{
    bn_d2 u[4] = {bn_lo(lo) - K, bn_hi(lo) - K, bn_lo(hi) - K, bn_hi(hi) - K};
    s1->l01 += u[0], s1->l23 += u[1], s1->l45 += u[2], s1->l67 += u[3];
    s2->l01 += u[0] * u[0], s2->l23 += u[1] * u[1], s2->l45 += u[2] * u[2], s2->l67 += u[3] * u[3];
}

/* The lanes' total: lane j and lane 4 + j added, for j = 0..3 in turn, onto 0 */
static inline double bn_total(const bn_lanes *s)
{
    return 0.0 + (s->l01[0] + s->l45[0]) + (s->l01[1] + s->l45[1]) + (s->l23[0] + s->l67[0]) + (s->l23[1] + s->l67[1]);
}

/* s[0] += sum(x - K), s[1] += sum((x - K)^2), in fp64 throughout (the forward's one pass, and the
 * whole map's statistics gathered over bands with K = 0). */
static void bn_sums_x(const float *x, double K, int64_t n, double s[2])
{
    bn_lanes s1 = {0}, s2 = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        bn_f4 lo, hi;
        memcpy(&lo, x + i, sizeof lo), memcpy(&hi, x + i + 4, sizeof hi);
        bn_add_sq(&s1, &s2, lo, hi, K);
    }
    double t1 = bn_total(&s1), t2 = bn_total(&s2);
    for (; i < n; i++) {
        double u = x[i] - K;
        t1 += u, t2 += u * u;
    }
    s[0] += t1, s[1] += t2;
}

/* s[0] += sum(dy), s[1] += sum(dy * xhat), xhat = (x - mean) * invstd and its product with dy in
 * fp32 (as the backward's dx uses xhat), each term added in fp64. */
static void bn_sums_dy(const float *dy, const float *x, float mean, float invstd, int64_t n, double s[2])
{
    bn_lanes s1 = {0}, s2 = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        bn_f4 g, h, xg, xh;
        memcpy(&g, dy + i, sizeof g), memcpy(&h, dy + i + 4, sizeof h);
        memcpy(&xg, x + i, sizeof xg), memcpy(&xh, x + i + 4, sizeof xh);
        bn_add(&s1, g, h);
        bn_add(&s2, g * ((xg - mean) * invstd), h * ((xh - mean) * invstd));
    }
    double t1 = bn_total(&s1), t2 = bn_total(&s2);
    for (; i < n; i++) t1 += dy[i], t2 += dy[i] * ((x[i] - mean) * invstd);
    s[0] += t1, s[1] += t2;
}

/* y = (x - mean) * invstd * gamma + beta per channel. Train: mean and biased variance over N,
 * rows [a, b) and W (a band's own statistics); the running ones, when update_running, move by
 * momentum toward the batch mean and the *unbiased* variance (PyTorch). Frozen: running ones.
 * stats receives the mean and invstd used, for backward. */
void bn_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y; /* (N, C, H, W) both */
    int C = x->c, a = c->a, b = c->b;
    int64_t len = cpu_plane_len(x, a, b), M = (int64_t)x->n * len; /* values per channel */
    float eps = l->u.bn.eps, mom = l->u.bn.momentum;
    const float *gamma = c->w, *beta = c->w + C;
    CHECK(c->stats != NULL);
    cpu_check_rows(x, a, b, c->in_h[0]);
    cpu_check_rows(y, a, b, l->h);
#pragma omp parallel for schedule(static) if (cpu_parallel(C * M))
    for (int ch = 0; ch < C; ch++) {
        float mean, invstd;
        if (c->bn == OPS_BN_TRAIN) {
            /* One pass over x - K (K: the channel's first value, near the mean, so the variance
             * does not cancel). */
            double K = cpu_row(x, 0, ch, a)[0], sum[2] = {0};
            for (int n = 0; n < x->n; n++) bn_sums_x(cpu_row(x, n, ch, a), K, len, sum);
            double sd = sum[0], sdd = sum[1];
            double mu = K + sd / (double)M, ss = sdd - sd * sd / (double)M;
            if (ss < 0) ss = 0;
            double var = ss / (double)M;
            mean = (float)mu;
            invstd = (float)(1.0 / sqrt(var + (double)eps));
            if (c->update_running) {
                CHECK(c->running != NULL);
                double unbiased = M > 1 ? ss / (double)(M - 1) : var;
                c->running[ch] = (1.0f - mom) * c->running[ch] + mom * mean;
                c->running[C + ch] = (1.0f - mom) * c->running[C + ch] + mom * (float)unbiased;
            }
        } else if (c->bn == OPS_BN_MAP) { /* the whole map's, gathered over the bands */
            mean = c->stats[ch];
            invstd = c->stats[C + ch];
        } else {
            CHECK(c->running != NULL);
            mean = c->running[ch];
            invstd = 1.0f / sqrtf(c->running[C + ch] + eps);
        }
        c->stats[ch] = mean;
        c->stats[C + ch] = invstd;
        for (int n = 0; n < x->n; n++) {
            const float *xr = cpu_row(x, n, ch, a);
            float *yr = cpu_row(y, n, ch, a);
            for (int64_t i = 0; i < len; i++) yr[i] = (xr[i] - mean) * invstd * gamma[ch] + beta[ch];
        }
    }
}

/* With xhat = (x - mean) * invstd over the rows [a, b) the forward normalized:
 *   dbeta += sum(dy), dgamma += sum(dy * xhat)
 *   train:  dx = gamma * invstd * (dy - sum(dy) / M - xhat * sum(dy * xhat) / M)
 *   frozen: dx = gamma * invstd * dy  (the statistics are constants)
 *   map:    as train with the whole map's sums (c->sums) and M, the mean terms subtracted only on
 *           the rows this call owns: bands that overlap (OverL) each back-propagate their share
 *           of dy, and the mean terms, which belong to the whole map, are added once per row. */
void bn_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int C = dy->c, a = c->a, b = c->b;
    int64_t len = cpu_plane_len(dy, a, b), M = (int64_t)dy->n * len;
    bool train = c->bn != OPS_BN_FROZEN, map = c->bn == OPS_BN_MAP, need_sums = c->bn == OPS_BN_TRAIN || c->dw;
    int own_a = map ? c->own_a : a, own_b = map ? c->own_b : b;
    if (map) CHECK(c->sums != NULL && own_a >= a && own_b <= b && c->count > 0);
    const float *gamma = c->w, *mean = c->stats, *invstd = c->stats + C;
    CHECK(c->stats != NULL);
    cpu_check_rows(dy, a, b, l->h);
    if (need_sums || train) cpu_check_rows(x, a, b, c->in_h[0]);
    bool store = false;
    if (dx->p) {
        store = cpu_dx_store(c, 0);
        cpu_check_rows(dx, a, b, c->in_h[0]);
    }
#pragma omp parallel for schedule(static) if (cpu_parallel(C * M))
    for (int ch = 0; ch < C; ch++) {
        double sdy = 0.0, sdyx = 0.0;
        if (need_sums) {
            double sum[2] = {0};
            for (int n = 0; n < dy->n; n++) bn_sums_dy(cpu_row(dy, n, ch, a), cpu_row(x, n, ch, a), mean[ch], invstd[ch], len, sum);
            sdy = sum[0], sdyx = sum[1];
        }
        if (c->dw) {
            c->dw[ch] += (float)sdyx;
            c->dw[C + ch] += (float)sdy;
        }
        if (!dx->p) continue;
        float k = gamma[ch] * invstd[ch];
        float mdy = (float)(sdy / (double)M), mdyx = (float)(sdyx / (double)M);
        if (map) mdy = (float)(c->sums[ch] / (double)c->count), mdyx = (float)(c->sums[C + ch] / (double)c->count);
        int64_t own0 = cpu_plane_len(dy, a, own_a), own1 = cpu_plane_len(dy, a, own_b); /* the owned rows' values */
        for (int n = 0; n < dy->n; n++) {
            const float *dyr = cpu_row(dy, n, ch, a);
            float *dxr = cpu_row(dx, n, ch, a);
            if (train) { /* (-O3 unswitches the loops on store) */
                const float *xr = cpu_row(x, n, ch, a);
                for (int64_t i = 0; i < own0; i++) dxr[i] = store ? k * dyr[i] : dxr[i] + k * dyr[i];
                for (int64_t i = own0; i < own1; i++) {
                    float xhat = (xr[i] - mean[ch]) * invstd[ch], g = k * (dyr[i] - mdy - xhat * mdyx);
                    dxr[i] = store ? g : dxr[i] + g;
                }
                for (int64_t i = own1; i < len; i++) dxr[i] = store ? k * dyr[i] : dxr[i] + k * dyr[i];
            } else {
                for (int64_t i = 0; i < len; i++) dxr[i] = store ? k * dyr[i] : dxr[i] + k * dyr[i];
            }
        }
    }
}

/* Whole-map statistics gathered band by band (ops.h: ops_stats), per channel in fp64: four
 * independent lanes per channel as in bn_forward, each channel on one thread (deterministic). The
 * END step finishes them like a whole-map bn_forward: mean and biased variance for normalizing,
 * the unbiased variance for the running statistics. */
void bn_cpu_stats(const ops_call *c, ops_stats what)
{
    const net_layer *l = c->l;
    int C = l->c, a = c->a, b = c->b;
    double *s1 = c->sums, *s2 = c->sums + C;
    CHECK(c->sums != NULL && c->stats != NULL);
    if (what == OPS_STATS_END) {
        double M = (double)c->count;
        float mom = l->u.bn.momentum;
        CHECK(c->count > 0 && c->running != NULL);
        for (int ch = 0; ch < C; ch++) {
            double mu = s1[ch] / M, var = s2[ch] / M - mu * mu;
            if (var < 0) var = 0;
            float mean = (float)mu;
            c->stats[ch] = mean;
            c->stats[C + ch] = (float)(1.0 / sqrt(var + (double)l->u.bn.eps));
            if (c->update_running) {
                double unbiased = M > 1 ? var * M / (M - 1) : var;
                c->running[ch] = (1.0f - mom) * c->running[ch] + mom * mean;
                c->running[C + ch] = (1.0f - mom) * c->running[C + ch] + mom * (float)unbiased;
            }
        }
        return;
    }
    const ten *x = &c->x[0], *dy = &c->dy; /* (N, C, H, W) */
    bool grad = what == OPS_STATS_DY;
    cpu_check_rows(x, a, b, c->in_h[0]);
    if (grad) cpu_check_rows(dy, a, b, l->h);
    int64_t len = cpu_plane_len(x, a, b);
    const float *mean = c->stats, *invstd = c->stats + C;
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)C * x->n * len))
    for (int ch = 0; ch < C; ch++) {
        double sum[2] = {0};
        for (int n = 0; n < x->n; n++) {
            const float *xr = cpu_row(x, n, ch, a);
            if (grad)
                bn_sums_dy(cpu_row(dy, n, ch, a), xr, mean[ch], invstd[ch], len, sum);
            else
                bn_sums_x(xr, 0.0, len, sum);
        }
        s1[ch] += sum[0], s2[ch] += sum[1];
    }
}

/* --- group and layer normalization --------------------------------------------------------------
 * gnorm (whole maps): image n's channel group q, cg = C / G channels of H*W values, normalized by
 * its own mean and biased variance: stats (mean (N*G) then inverse std (N*G)) receives them. lnorm
 * (rows [a, b)): the C values at each place, stats (mean (N, rows, W) then inverse std) per place.
 * Both: y = xhat * gamma + beta; backward, with g = dy * gamma and means over the normalized set,
 * dx = invstd * (g - mean(g) - xhat * mean(g * xhat)), dgamma += sum(dy * xhat), dbeta += sum(dy),
 * PyTorch's formulas (GroupNorm, LayerNorm), reductions in fp64 in a fixed order. */

void gnorm_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    int C = x->c, G = c->l->u.norm.groups, cg = C / G, N = x->n;
    int64_t plane = (int64_t)x->h * x->w, M = cg * plane;
    const float *gamma = c->w, *beta = c->w + C;
    CHECK(c->stats != NULL && x->row0 == 0 && x->h == c->in_h[0] && y->row0 == 0 && y->h == c->l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)N * C * plane))
    for (int n = 0; n < N; n++)
        for (int q = 0; q < G; q++) {
            double s1 = 0.0, s2 = 0.0;
            for (int ch = q * cg; ch < (q + 1) * cg; ch++) {
                const float *xr = cpu_row(x, n, ch, 0);
                for (int64_t i = 0; i < plane; i++) s1 += xr[i];
            }
            double mu = s1 / (double)M;
            for (int ch = q * cg; ch < (q + 1) * cg; ch++) {
                const float *xr = cpu_row(x, n, ch, 0);
                for (int64_t i = 0; i < plane; i++) s2 += (xr[i] - mu) * (xr[i] - mu);
            }
            float mean = (float)mu, invstd = (float)(1.0 / sqrt(s2 / (double)M + (double)c->l->u.norm.eps));
            c->stats[n * G + q] = mean, c->stats[(int64_t)N * G + n * G + q] = invstd;
            for (int ch = q * cg; ch < (q + 1) * cg; ch++) {
                const float *xr = cpu_row(x, n, ch, 0);
                float *yr = cpu_row(y, n, ch, 0);
                for (int64_t i = 0; i < plane; i++) yr[i] = (xr[i] - mean) * invstd * gamma[ch] + beta[ch];
            }
        }
}

void gnorm_cpu_backward(const ops_call *c)
{
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int C = dy->c, G = c->l->u.norm.groups, cg = C / G, N = dy->n;
    int64_t plane = (int64_t)dy->h * dy->w, M = cg * plane;
    const float *gamma = c->w, *mean = c->stats, *invstd = c->stats + (int64_t)N * G;
    CHECK(c->stats != NULL && x->row0 == 0 && x->h == c->in_h[0] && dy->row0 == 0 && dy->h == c->l->h);
    if (c->dw) /* per channel over the images, in order */
        for (int ch = 0; ch < C; ch++) {
            double sg = 0.0, sb = 0.0;
            for (int n = 0; n < N; n++) {
                const float *xr = cpu_row(x, n, ch, 0), *g = cpu_row(dy, n, ch, 0);
                float mu = mean[n * G + ch / cg], is = invstd[n * G + ch / cg];
                for (int64_t i = 0; i < plane; i++) sg += (double)g[i] * ((xr[i] - mu) * is), sb += g[i];
            }
            c->dw[ch] += (float)sg, c->dw[C + ch] += (float)sb;
        }
    if (!dx->p) return;
    cpu_dx_begin(c, 0);
    CHECK(dx->row0 == 0 && dx->h == c->in_h[0]);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)N * C * plane))
    for (int n = 0; n < N; n++)
        for (int q = 0; q < G; q++) {
            float mu = mean[n * G + q], is = invstd[n * G + q];
            double s1 = 0.0, s2 = 0.0; /* sums of g and g * xhat over the group */
            for (int ch = q * cg; ch < (q + 1) * cg; ch++) {
                const float *xr = cpu_row(x, n, ch, 0), *g = cpu_row(dy, n, ch, 0);
                for (int64_t i = 0; i < plane; i++) {
                    double gi = (double)g[i] * gamma[ch];
                    s1 += gi, s2 += gi * ((xr[i] - mu) * is);
                }
            }
            float m1 = (float)(s1 / (double)M), m2 = (float)(s2 / (double)M);
            for (int ch = q * cg; ch < (q + 1) * cg; ch++) {
                const float *xr = cpu_row(x, n, ch, 0), *g = cpu_row(dy, n, ch, 0);
                float *d = cpu_row(dx, n, ch, 0);
                for (int64_t i = 0; i < plane; i++) d[i] += is * (g[i] * gamma[ch] - m1 - (xr[i] - mu) * is * m2);
            }
        }
}

/* The place index of row r, column col of image n among rows [a, b) (lnorm's statistics). */
static int64_t place(const ops_call *c, int n, int r, int col, int w) { return ((int64_t)n * (c->b - c->a) + (r - c->a)) * w + col; }

/* Layer norm normalizes each place over its channels, which lie a plane apart: a place at a time
 * read one float a cache line (ConvNeXt-tiny at batch 2: 32 ms of a 400 ms iteration). So a row's
 * places go LN_COLS at a time, each channel's stretch of the row read whole into per-place sums,
 * vector lanes across places. Each place's sums take their terms in channel order as before, in
 * fp64, and its values go through the same expressions: the same bits. */
enum { LN_COLS = 64 };

void lnorm_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    int C = x->c, a = c->a, b = c->b, W = x->w;
    int64_t places = (int64_t)x->n * (b - a) * W;
    const float *gamma = c->w, *beta = c->w + C;
    double eps = (double)c->l->u.norm.eps;
    CHECK(c->stats != NULL);
    cpu_check_rows(x, a, b, c->in_h[0]);
    cpu_check_rows(y, a, b, c->l->h);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * C * (b - a) * W))
    for (int n = 0; n < x->n; n++)
        for (int r = a; r < b; r++)
            for (int c0 = 0; c0 < W; c0 += LN_COLS) {
                int m = W - c0 < LN_COLS ? W - c0 : LN_COLS;
                double s1[LN_COLS] = {0}, s2[LN_COLS] = {0}, mu[LN_COLS];
                float mean[LN_COLS], invstd[LN_COLS];
                for (int ch = 0; ch < C; ch++) {
                    const float *xr = cpu_row(x, n, ch, r) + c0;
                    for (int j = 0; j < m; j++) s1[j] += xr[j];
                }
                for (int j = 0; j < m; j++) mu[j] = s1[j] / C;
                for (int ch = 0; ch < C; ch++) {
                    const float *xr = cpu_row(x, n, ch, r) + c0;
                    for (int j = 0; j < m; j++) {
                        double d = xr[j] - mu[j];
                        s2[j] += d * d;
                    }
                }
                float *st = c->stats + place(c, n, r, c0, W);
                for (int j = 0; j < m; j++) {
                    mean[j] = (float)mu[j], invstd[j] = (float)(1.0 / sqrt(s2[j] / C + eps));
                    st[j] = mean[j], st[places + j] = invstd[j];
                }
                for (int ch = 0; ch < C; ch++) {
                    const float *xr = cpu_row(x, n, ch, r) + c0;
                    float *yr = cpu_row(y, n, ch, r) + c0;
                    for (int j = 0; j < m; j++) yr[j] = (xr[j] - mean[j]) * invstd[j] * gamma[ch] + beta[ch];
                }
            }
}

void lnorm_cpu_backward(const ops_call *c)
{
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int C = dy->c, a = c->a, b = c->b, W = dy->w;
    int64_t places = (int64_t)dy->n * (b - a) * W;
    const float *gamma = c->w, *mean = c->stats, *invstd = c->stats + places;
    CHECK(c->stats != NULL);
    cpu_check_rows(x, a, b, c->in_h[0]);
    cpu_check_rows(dy, a, b, c->l->h);
    if (c->dw) { /* per channel over the places, in order; a thread a channel */
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)dy->n * C * (b - a) * W))
        for (int ch = 0; ch < C; ch++) {
            double sg = 0.0, sb = 0.0;
            for (int n = 0; n < dy->n; n++)
                for (int r = a; r < b; r++) {
                    const float *xr = cpu_row(x, n, ch, r), *g = cpu_row(dy, n, ch, r);
                    const float *mr = mean + place(c, n, r, 0, W), *ir = invstd + place(c, n, r, 0, W);
                    for (int col = 0; col < W; col++) sg += (double)g[col] * ((xr[col] - mr[col]) * ir[col]), sb += g[col];
                }
            c->dw[ch] += (float)sg, c->dw[C + ch] += (float)sb;
        }
    }
    if (!dx->p) return;
    bool store = cpu_dx_store(c, 0);
    cpu_check_rows(dx, a, b, c->in_h[0]);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * C * (b - a) * W))
    for (int n = 0; n < dy->n; n++)
        for (int r = a; r < b; r++)
            for (int c0 = 0; c0 < W; c0 += LN_COLS) {
                int m = W - c0 < LN_COLS ? W - c0 : LN_COLS;
                const float *mu = mean + place(c, n, r, c0, W), *is = invstd + place(c, n, r, c0, W);
                double s1[LN_COLS] = {0}, s2[LN_COLS] = {0};
                float m1[LN_COLS], m2[LN_COLS];
                for (int ch = 0; ch < C; ch++) {
                    const float *xr = cpu_row(x, n, ch, r) + c0, *g = cpu_row(dy, n, ch, r) + c0;
                    for (int j = 0; j < m; j++) {
                        double gi = (double)g[j] * gamma[ch];
                        s1[j] += gi, s2[j] += gi * ((xr[j] - mu[j]) * is[j]);
                    }
                }
                for (int j = 0; j < m; j++) m1[j] = (float)(s1[j] / C), m2[j] = (float)(s2[j] / C);
                for (int ch = 0; ch < C; ch++) {
                    const float *xr = cpu_row(x, n, ch, r) + c0, *g = cpu_row(dy, n, ch, r) + c0;
                    float *d = cpu_row(dx, n, ch, r) + c0;
                    for (int j = 0; j < m; j++) {
                        float v = is[j] * (g[j] * gamma[ch] - m1[j] - (xr[j] - mu[j]) * is[j] * m2[j]);
                        d[j] = store ? v : d[j] + v;
                    }
                }
            }
}
