/* act_cpu: the CPU backend's elementwise activations (engine/act.h's kinds but relu, which
 * ops_cpu.c runs): a loop a kind over rows [a, b) of each (image, channel) plane, each inlining
 * act.h's formula; GELU, SiLU and the sigmoid take their erf and exp a chunk at a time first. */
#include <math.h>
#include <string.h>

#include "engine/act.h"
#include "engine/cpu/ops_cpu.h"
#include "sim/net/kind.h"

/* erff and expf of n values (n <= ACT_CHUNK), four at a time through glibc's vector math library
 * (libmvec, x86-64, glibc 2.35 on: LRCNN_MVEC) where it is there, the last four padded, so that
 * each value's result depends on it alone, not on where a call's rows start; else libm's one at a
 * time. Within 2 ulp of libm's. GELU, SiLU and the sigmoid take them: on a 96 x 112 x 112 map at
 * batch 2, GELU's forward and backward went from 3.6 and 6.6 ms to 1.4 and 2.4, SiLU's from 2.6
 * and 3.5 to 1.1 and 1.3 (libm's erff a value, then the formula, were a fifth of ConvNeXt's
 * iteration). */
enum { ACT_CHUNK = 256 };

#if LRCNN_MVEC
typedef float act_f4 __attribute__((vector_size(16)));
act_f4 _ZGVbN4v_erff(act_f4 x);
act_f4 _ZGVbN4v_expf(act_f4 x);

static void act_vec(act_f4 (*f)(act_f4), const float *x, float *y, int n)
{
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        act_f4 v;
        memcpy(&v, x + i, sizeof v);
        v = f(v);
        memcpy(y + i, &v, sizeof v);
    }
    if (i < n) {
        act_f4 v = {0};
        for (int j = 0; j < n - i; j++) v[j] = x[i + j];
        v = f(v);
        for (int j = 0; j < n - i; j++) y[i + j] = v[j];
    }
}
static void act_erff(const float *x, float *y, int n) { act_vec(_ZGVbN4v_erff, x, y, n); }
static void act_expf(const float *x, float *y, int n) { act_vec(_ZGVbN4v_expf, x, y, n); }
#else
static void act_erff(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++) y[i] = erff(x[i]);
}
static void act_expf(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i++) y[i] = expf(x[i]);
}
#endif

/* SiLU's and the sigmoid's rows, ACT_CHUNK values at a time: exp(-x) first, then act.h's formula
 * (the sigmoid's backward reads y alone: act_dx). */
static void silu_row_fwd(int kind, const float *x, float *y, int64_t len)
{
    float u[ACT_CHUNK], e[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < len; i0 += ACT_CHUNK) {
        int n = len - i0 < ACT_CHUNK ? (int)(len - i0) : ACT_CHUNK;
        for (int j = 0; j < n; j++) u[j] = -x[i0 + j];
        act_expf(u, e, n);
        if (kind == NET_SILU)
            for (int j = 0; j < n; j++) y[i0 + j] = act_silu(x[i0 + j], e[j]);
        else
            for (int j = 0; j < n; j++) y[i0 + j] = act_sigmoid(e[j]);
    }
}

static void silu_row_bwd(const float *m, const float *dy, float *dx, int64_t len, bool store)
{
    float u[ACT_CHUNK], e[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < len; i0 += ACT_CHUNK) {
        int n = len - i0 < ACT_CHUNK ? (int)(len - i0) : ACT_CHUNK;
        for (int j = 0; j < n; j++) u[j] = -m[i0 + j];
        act_expf(u, e, n);
        for (int j = 0; j < n; j++) {
            float g = dy[i0 + j] * act_silu_grad(m[i0 + j], e[j]);
            dx[i0 + j] = store ? g : dx[i0 + j] + g;
        }
    }
}

/* GELU's rows, ACT_CHUNK values at a time: erf (and, backward, exp) first, then act.h's formula. */
static void gelu_row_fwd(const float *x, float *y, int64_t len)
{
    float u[ACT_CHUNK], e[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < len; i0 += ACT_CHUNK) {
        int n = len - i0 < ACT_CHUNK ? (int)(len - i0) : ACT_CHUNK;
        for (int j = 0; j < n; j++) u[j] = x[i0 + j] * ACT_RSQRT2;
        act_erff(u, e, n);
        for (int j = 0; j < n; j++) y[i0 + j] = act_gelu(x[i0 + j], e[j]);
    }
}

static void gelu_row_bwd(const float *m, const float *dy, float *dx, int64_t len, bool store)
{
    float u[ACT_CHUNK], e[ACT_CHUNK], p[ACT_CHUNK];
    for (int64_t i0 = 0; i0 < len; i0 += ACT_CHUNK) {
        int n = len - i0 < ACT_CHUNK ? (int)(len - i0) : ACT_CHUNK;
        for (int j = 0; j < n; j++) u[j] = m[i0 + j] * ACT_RSQRT2;
        act_erff(u, e, n);
        for (int j = 0; j < n; j++) u[j] = -0.5f * m[i0 + j] * m[i0 + j];
        act_expf(u, p, n);
        for (int j = 0; j < n; j++) {
            float g = dy[i0 + j] * act_gelu_grad(m[i0 + j], e[j], p[j]);
            dx[i0 + j] = store ? g : dx[i0 + j] + g;
        }
    }
}

/* One loop per kind, so that each inlines its own formula (and vectorizes where it can). GELU and
 * SiLU take the chunked rows above, and so does the sigmoid's forward (its backward reads y alone). */
#define ACT_KINDS(X) X(NET_RELU6) X(NET_LEAKY) X(NET_HSWISH) X(NET_HSIGMOID)

static void act_row_fwd(int kind, float slope, const float *x, float *y, int64_t len)
{
    switch (kind) {
    case NET_GELU: gelu_row_fwd(x, y, len); break;
    case NET_SILU:
    case NET_SIGMOID: silu_row_fwd(kind, x, y, len); break;
#define ACT_FWD_LOOP(K) \
    case K: for (int64_t i = 0; i < len; i++) y[i] = act_fwd(K, slope, x[i]); break;
        ACT_KINDS(ACT_FWD_LOOP)
#undef ACT_FWD_LOOP
    default: CHECK(0);
    }
}

static void act_row_bwd(int kind, float slope, const float *m, const float *dy, float *dx, int64_t len, bool store)
{
    switch (kind) {
    case NET_GELU: gelu_row_bwd(m, dy, dx, len, store); break;
    case NET_SILU: silu_row_bwd(m, dy, dx, len, store); break;
#define ACT_BWD_LOOP(K) \
    case K: \
        for (int64_t i = 0; i < len; i++) { \
            float g = act_dx(K, slope, m[i], dy[i]); \
            dx[i] = store ? g : dx[i] + g; \
        } \
        break;
        ACT_KINDS(ACT_BWD_LOOP)
        ACT_BWD_LOOP(NET_SIGMOID)
#undef ACT_BWD_LOOP
    default: CHECK(0);
    }
}

/* y = f(x) on rows [a, b); y may be x itself (relu6 and leakyrelu in place). */
void act_cpu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    cpu_check_rows(x, c->a, c->b, c->in_h[0]);
    cpu_check_rows(y, c->a, c->b, c->l->h);
    if (x->p == y->p) CHECK(x->row0 == y->row0 && x->h == y->h);
    int64_t len = cpu_plane_len(x, c->a, c->b);
    int kind = c->l->kind;
    float slope = ACT_SLOPE(c->l);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * len))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++) act_row_fwd(kind, slope, cpu_row(x, n, ch, c->a), cpu_row(y, n, ch, c->a), len);
}

/* dx (+)= dy * f'(what the kind keeps: y or x); in place (dx is dy) as relu's backward. */
void act_cpu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    bool keeps_y = kind_of(c->l)->keeps_y && c->y.p; /* a torch plan's relu6 keeps its input instead (lower.c) */
    const ten *m = keeps_y ? &c->y : &c->x[0];
    if (!dx->p) return;
    int a = c->a, b = c->b;
    bool store = cpu_pointwise_dx_begin(c, m, keeps_y ? c->l->h : c->in_h[0]);
    int64_t len = cpu_plane_len(dy, a, b);
    int kind = c->l->kind;
    float slope = ACT_SLOPE(c->l);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * len))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++)
            act_row_bwd(kind, slope, cpu_row(m, n, ch, a), cpu_row(dy, n, ch, a), cpu_row(dx, n, ch, a), len, store);
}
