/* bn_cpu: batch normalization on the CPU (ops.h's three modes: the statistics of the rows given,
 * the running ones, or the whole map's gathered over the bands) and the per-channel sums of the
 * statistics passes. Per channel, reductions over a whole batch accumulate in fp64 in four
 * independent lanes, so that their error does not grow with the map and additions overlap; each
 * channel on one thread, in a fixed order (deterministic). Weight gradients are += across bands.
 * Not done here: choosing the mode (the executor, from the schedule). */
#include <math.h>

#include "engine/cpu/ops_cpu.h"

/* Elements of one channel plane in rows [a, b). */
static int64_t plane_len(const ten *t, int a, int b) { return (int64_t)(b - a) * t->w; }

/* y = (x - mean) * invstd * gamma + beta per channel. Train: mean and biased variance over N,
 * rows [a, b) and W (a band's own statistics); the running ones, when update_running, move by
 * momentum toward the batch mean and the *unbiased* variance (PyTorch). Frozen: running ones.
 * stats receives the mean and invstd used, for backward. */
void bn_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y; /* (N, C, H, W) both */
    int C = x->c, a = c->a, b = c->b;
    int64_t len = plane_len(x, a, b), M = (int64_t)x->n * len; /* values per channel */
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
             * does not cancel), four independent double lanes so the additions overlap. */
            double s1[4] = {0}, s2[4] = {0}, K = cpu_row(x, 0, ch, a)[0];
            for (int n = 0; n < x->n; n++) {
                const float *xr = cpu_row(x, n, ch, a);
                int64_t i = 0;
                for (; i + 4 <= len; i += 4)
                    for (int q = 0; q < 4; q++) {
                        double d = xr[i + q] - K;
                        s1[q] += d, s2[q] += d * d;
                    }
                for (; i < len; i++) {
                    double d = xr[i] - K;
                    s1[0] += d, s2[0] += d * d;
                }
            }
            double sd = (s1[0] + s1[1]) + (s1[2] + s1[3]), sdd = (s2[0] + s2[1]) + (s2[2] + s2[3]);
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
    int64_t len = plane_len(dy, a, b), M = (int64_t)dy->n * len;
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
        if (need_sums) { /* four independent double lanes, as in bn_forward */
            double l1[4] = {0}, l2[4] = {0};
            for (int n = 0; n < dy->n; n++) {
                const float *xr = cpu_row(x, n, ch, a), *dyr = cpu_row(dy, n, ch, a);
                int64_t i = 0;
                for (; i + 4 <= len; i += 4)
                    for (int q = 0; q < 4; q++) {
                        float xhat = (xr[i + q] - mean[ch]) * invstd[ch];
                        l1[q] += dyr[i + q], l2[q] += dyr[i + q] * xhat;
                    }
                for (; i < len; i++) {
                    float xhat = (xr[i] - mean[ch]) * invstd[ch];
                    l1[0] += dyr[i], l2[0] += dyr[i] * xhat;
                }
            }
            sdy = (l1[0] + l1[1]) + (l1[2] + l1[3]), sdyx = (l2[0] + l2[1]) + (l2[2] + l2[3]);
        }
        if (c->dw) {
            c->dw[ch] += (float)sdyx;
            c->dw[C + ch] += (float)sdy;
        }
        if (!dx->p) continue;
        float k = gamma[ch] * invstd[ch];
        float mdy = (float)(sdy / (double)M), mdyx = (float)(sdyx / (double)M);
        if (map) mdy = (float)(c->sums[ch] / (double)c->count), mdyx = (float)(c->sums[C + ch] / (double)c->count);
        int64_t own0 = plane_len(dy, a, own_a), own1 = plane_len(dy, a, own_b); /* the owned rows' values */
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
    int64_t len = plane_len(x, a, b);
    const float *mean = c->stats, *invstd = c->stats + C;
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)C * x->n * len))
    for (int ch = 0; ch < C; ch++) {
        double l1[4] = {0}, l2[4] = {0};
        for (int n = 0; n < x->n; n++) {
            const float *xr = cpu_row(x, n, ch, a);
            if (grad) {
                const float *dyr = cpu_row(dy, n, ch, a);
                for (int64_t i = 0; i < len; i++) {
                    float xhat = (xr[i] - mean[ch]) * invstd[ch];
                    l1[i & 3] += dyr[i], l2[i & 3] += dyr[i] * xhat;
                }
            } else {
                for (int64_t i = 0; i < len; i++) l1[i & 3] += xr[i], l2[i & 3] += (double)xr[i] * xr[i];
            }
        }
        s1[ch] += (l1[0] + l1[1]) + (l1[2] + l1[3]);
        s2[ch] += (l2[0] + l2[1]) + (l2[2] + l2[3]);
    }
}
