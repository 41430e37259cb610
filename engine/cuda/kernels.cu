// kernels: see kernels.h. This file: copies, optimizers, bias, add, product, concat, channel selections, activations,
// dropout and scale; the families beside it: kpool.cu (pooling and resampling), knorm.cu
// (normalizations), kloss.cu (the loss, fc bias gradient, transposed convolution).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/act.h"
#include "engine/cuda/kcommon.cuh"

extern "C" void k_launched(const char *file, int line)
{
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess) return;
    fprintf(stderr, "lrcnn: kernel launch failed at %s:%d: %s\n", file, line, cudaGetErrorString(r));
    exit(1);
}

__global__ static void probe(void) {}

extern "C" cudaError_t k_image(void)
{
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, probe);
}

__global__ static void copy2d(float *d, int64_t ds, const float *s, int64_t ss, int64_t planes, int64_t len, bool acc)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= planes * len) return;
    int64_t pl, j; /* in 32 bits where the index and the length fit (decompose()'s reason) */
    if ((uint64_t)i <= 0xffffffffu && (uint64_t)len <= 0xffffffffu) {
        uint32_t u = (uint32_t)i, q = u / (uint32_t)len;
        pl = q, j = u - q * (uint32_t)len;
    } else
        pl = i / len, j = i % len;
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

// planar.h's operations, four values a thread: those of one plane (len and the strides are multiples of 4).
__global__ static void planar_k(planar_args p)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= p.n) return;
    int64_t k = planar_plane(i, p.len);
    int ch = planar_channel(i, p.len, p.c);
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 x = p.x.p ? *(const float4 *)planar_at(p.x, k, i, p.len) : zero;
    float4 x2 = p.x2.p ? *(const float4 *)planar_at(p.x2, k, i, p.len) : zero;
    float4 *at_y = (float4 *)planar_at(p.y, k, i, p.len);
    float4 y = planar_reads_y(&p) ? *at_y : zero;
    *at_y = make_float4(planar_value(&p, x.x, x2.x, y.x, ch), planar_value(&p, x.y, x2.y, y.y, ch), planar_value(&p, x.z, x2.z, y.z, ch),
                        planar_value(&p, x.w, x2.w, y.w, ch));
}

void k_planar(cudaStream_t st, const planar_args *p)
{
    if (p->n) {
        planar_k<<<quads(p->n), T, 0, st>>>(*p);
        LAUNCHED();
    }
}

// y = x
__global__ static void copy_flat(const float *x, float *y, int64_t n)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= n) *(float4 *)(y + i) = *(const float4 *)(x + i);
    else
        for (; i < n; i++) y[i] = x[i];
}

// y = x0 + x1, value by value (x0 may be y: dx += dy)
__global__ static void add_flat(const float *x0, const float *x1, float *y, int64_t n)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= n) {
        float4 u = *(const float4 *)(x0 + i), v = *(const float4 *)(x1 + i);
        *(float4 *)(y + i) = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    } else
        for (; i < n; i++) y[i] = x0[i] + x1[i];
}

__global__ static void bias(kview y, int a, int b, const float *bs)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    at(y, q.n, q.c, q.r)[q.col] += bs[q.c];
}

// The same on a flat view whose channel planes are a multiple of four values (kcommon.cuh: flat_plane4).
__global__ static void bias_flat(float *y, int64_t n, int c, int plane, const float *bs)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= n) return;
    float k = bs[planar_channel(i, plane, c)];
    float4 v = *(float4 *)(y + i);
    *(float4 *)(y + i) = make_float4(v.x + k, v.y + k, v.z + k, v.w + k);
}

extern "C" void k_bias(cudaStream_t st, kview y, int a, int b, const float *bs)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    int plane = flat_plane4(y, a, b);
    pview py;
    if (n && plane && flat(y, y, a, b)) {
        bias_flat<<<quads(n), T, 0, st>>>(y.p, n, y.c, plane, bs);
        LAUNCHED();
    } else if (n && planar(y, y, a, b, &py)) {
        planar_args p = {.op = PLANAR_BIAS, .y = py, .n = n, .len = (int64_t)(b - a) * y.w, .c = y.c, .k1 = bs};
        k_planar(st, &p);
    } else if (n) {
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
    pview p0, p1, py;
    if (n && flat(y, y, a, b) && flat(x0, y, a, b) && flat(x1, y, a, b)) {
        add_flat<<<quads(n), T, 0, st>>>(x0.p, x1.p, y.p, n);
        LAUNCHED();
    } else if (n && planar(y, y, a, b, &py) && planar(x0, y, a, b, &p0) && planar(x1, y, a, b, &p1)) {
        planar_args p = {.op = PLANAR_ADD, .x = p0, .x2 = p1, .y = py, .n = n, .len = (int64_t)(b - a) * y.w, .c = y.c};
        k_planar(st, &p);
    } else if (n) {
        add_fwd<<<blocks(n), T, 0, st>>>(x0, x1, y, a, b);
        LAUNCHED();
    }
}

__global__ static void acc_rows(kview dx, kview dy, int off, int a, int b, bool store)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)dx.n * dx.c * (b - a) * dx.w) return;
    pos q = decompose(i, dx.c, a, b, dx.w);
    float g = at(dy, q.n, off + q.c, q.r)[q.col], *d = &at(dx, q.n, q.c, q.r)[q.col];
    *d = store ? g : *d + g;
}

extern "C" void k_acc_rows(cudaStream_t st, kview dx, kview dy, int off, int a, int b, bool store)
{
    int64_t n = (int64_t)dx.n * dx.c * (b - a) * dx.w;
    pview pdx, pdy;
    if (n && off == 0 && flat(dx, dx, a, b) && flat(dy, dx, a, b)) {
        if (store) copy_flat<<<quads(n), T, 0, st>>>(dy.p, dx.p, n);
        else add_flat<<<quads(n), T, 0, st>>>(dx.p, dy.p, dx.p, n);
        LAUNCHED();
    } else if (n && off == 0 && planar(dx, dx, a, b, &pdx) && planar(dy, dx, a, b, &pdy)) {
        planar_args p = {.op = store ? PLANAR_COPY : PLANAR_ADD, .x = store ? pdy : pdx, .x2 = store ? pview{} : pdy, .y = pdx,
                         .n = n, .len = (int64_t)(b - a) * dx.w, .c = dx.c};
        k_planar(st, &p);
    } else if (n) {
        acc_rows<<<blocks(n), T, 0, st>>>(dx, dy, off, a, b, store);
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

/* channel selections: the input channel output channel o copies (sim/net/net.h: net_channel_src) */
__device__ static int chan_src(kchan m, int o) { return m.groups ? o % m.groups * (m.in_c / m.groups) + o / m.groups : m.start + o; }

/* forward: y's channel o = x's channel chan_src(o); backward (!fwd, x and y being dx and dy): dx's
 * channel chan_src(o) += dy's channel o. Rows [a, b), one thread a value of y. */
__global__ static void channels_k(kview x, kview y, kchan m, int a, int b, bool fwd)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)y.n * y.c * (b - a) * y.w) return;
    pos q = decompose(i, y.c, a, b, y.w);
    float *xv = &at(x, q.n, chan_src(m, q.c), q.r)[q.col], *yv = &at(y, q.n, q.c, q.r)[q.col];
    if (fwd)
        *yv = *xv;
    else
        *xv += *yv;
}

extern "C" void k_channels(cudaStream_t st, kview x, kview y, kchan m, int a, int b, bool fwd)
{
    int64_t n = (int64_t)y.n * y.c * (b - a) * y.w;
    if (n) {
        channels_k<<<blocks(n), T, 0, st>>>(x, y, m, a, b, fwd);
        LAUNCHED();
    }
}

__global__ static void act_fwd_flat(int kind, float slope, const float *x, float *y, int64_t n)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= n) {
        float4 v = *(const float4 *)(x + i);
        *(float4 *)(y + i) = make_float4(act_fwd(kind, slope, v.x), act_fwd(kind, slope, v.y), act_fwd(kind, slope, v.z),
                                         act_fwd(kind, slope, v.w));
    } else
        for (; i < n; i++) y[i] = act_fwd(kind, slope, x[i]);
}

__global__ static void act_bwd_flat(int kind, float slope, const float *m, const float *dy, float *dx, int64_t n, bool store)
{
    int64_t i = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 4 <= n) {
        float4 k = *(const float4 *)(m + i), g = *(const float4 *)(dy + i);
        g = make_float4(g.x * act_grad(kind, slope, k.x), g.y * act_grad(kind, slope, k.y), g.z * act_grad(kind, slope, k.z),
                        g.w * act_grad(kind, slope, k.w));
        if (!store) {
            float4 o = *(const float4 *)(dx + i);
            g = make_float4(o.x + g.x, o.y + g.y, o.z + g.z, o.w + g.w);
        }
        *(float4 *)(dx + i) = g;
    } else
        for (; i < n; i++) {
            float g = dy[i] * act_grad(kind, slope, m[i]);
            dx[i] = store ? g : dx[i] + g;
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
    pview px, py;
    if (n && flat(y, y, a, b) && flat(x, y, a, b)) {
        act_fwd_flat<<<quads(n), T, 0, st>>>(kind, slope, x.p, y.p, n);
        LAUNCHED();
    } else if (n && planar(y, y, a, b, &py) && planar(x, y, a, b, &px)) {
        planar_args p = {.op = PLANAR_ACT_FWD, .x = px, .y = py, .n = n, .len = (int64_t)(b - a) * y.w, .c = y.c, .kind = kind, .slope = slope};
        k_planar(st, &p);
    } else if (n) {
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
    pview pm, pdy, pdx;
    if (n && flat(dy, dy, a, b) && flat(m, dy, a, b) && flat(dx, dy, a, b)) {
        act_bwd_flat<<<quads(n), T, 0, st>>>(kind, slope, m.p, dy.p, dx.p, n, store);
        LAUNCHED();
    } else if (n && planar(dy, dy, a, b, &pdy) && planar(m, dy, a, b, &pm) && planar(dx, dy, a, b, &pdx)) {
        planar_args p = {.op = PLANAR_ACT_BWD, .x = pm, .x2 = pdy, .y = pdx, .n = n, .len = (int64_t)(b - a) * dy.w, .c = dy.c,
                         .kind = kind, .slope = slope, .store = store};
        k_planar(st, &p);
    } else if (n) {
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
