/* planar: how the CUDA backend's elementwise kernels (kernels.cu, knorm.cu) run four values a thread
 * over a band view that is not a whole buffer of its own: rows [a, b) of a band buffer that holds
 * more rows (2PS's and OverL's halos, a stage's whole map read band by band). Such a view is not one
 * array (kcommon.cuh's flat launches need that), but it is planes at a stride: each (image,
 * channel) plane's rows [a, b) are len = (b - a) * w contiguous values, and plane k (k = image * c +
 * channel) starts `stride` values after plane k - 1 (the buffer's h * w). Value i of the launch (in
 * image, channel, row, column order) is then at plane i / len, offset i % len: one division, where
 * the general kernels' decompose() makes three for every value (on an H200 a band's ReLU, add and
 * BN map took 3-4x the time of the same rows as a whole map). Four values a thread need len, the
 * stride and the base 16-byte aligned, so that four values never leave a plane and load as one.
 * Plain C as well as CUDA, so that the arithmetic is tested without a GPU (tests/test_planar.c). */
#ifndef LRCNN_PLANAR_H
#define LRCNN_PLANAR_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/act.h"

#ifdef __CUDACC__
#define PLANAR_HD __host__ __device__
#else
#define PLANAR_HD
#endif

/* A view's rows [a, b) as planes: the first value of plane 0, and the values from one plane to the next. */
typedef struct {
    float *p;
    int64_t stride;
} pview;

/* Rows [a, b) of a view on rows [row0, row0 + h) of maps n x c x ? x w, as planes of (b - a) * w
 * values to be read four at a time, when it is one: it has the launch's images, channels and width
 * (like_*), holds the rows, and its base, its stride and the plane length are multiples of four
 * values (the base 16-byte aligned). False: the general kernel's. */
static inline bool planar_view(float *p, int n, int c, int h, int w, int row0, int like_n, int like_c, int like_w, int a, int b,
                               pview *out)
{
    if (n != like_n || c != like_c || w != like_w || a < row0 || b > row0 + h || b <= a) return false;
    int64_t len = (int64_t)(b - a) * w, stride = (int64_t)h * w;
    float *base = p + (int64_t)(a - row0) * w;
    if (len % 4 || stride % 4 || ((uintptr_t)base & 15) || len > 0x7fffffff) return false;
    out->p = base, out->stride = stride;
    return true;
}

/* The plane of value i of planes of len values: image * c + channel, so its channel is the plane % c.
 * In 32 bits where i fits (kcommon.cuh's decompose: a 64-bit division is slow on the GPU). */
PLANAR_HD static inline int64_t planar_plane(int64_t i, int64_t len)
{
    return (uint64_t)i <= 0xffffffffu ? (int64_t)((uint32_t)i / (uint32_t)len) : i / len;
}

/* The channel of value i of planes of len values, c channels (in 32 bits where the plane fits). */
PLANAR_HD static inline int planar_channel(int64_t i, int64_t len, int c)
{
    int64_t k = planar_plane(i, len);
    return (uint64_t)k <= 0xffffffffu ? (int)((uint32_t)k % (uint32_t)c) : (int)(k % c);
}

/* Where value i of plane k (planar_plane) lies in view v: never past its plane's end for the four
 * values from a multiple of 4. */
PLANAR_HD static inline float *planar_at(pview v, int64_t k, int64_t i, int64_t len) { return v.p + k * v.stride + (i - k * len); }

/* The elementwise operations that run on planes, each the arithmetic of its general kernel: */
enum {
    PLANAR_COPY,    /* y = x                                                  (k_acc_rows, store) */
    PLANAR_ADD,     /* y = x + x2 (x may be y: dx += dy)                      (k_add_fwd, k_acc_rows) */
    PLANAR_ACT_FWD, /* y = act_fwd(x)                                         (k_act_fwd) */
    PLANAR_ACT_BWD, /* y (= or +=) act_dx(x, x2): x what the kind keeps, x2 dy (k_act_bwd)   */
    PLANAR_BIAS,    /* y += k1[channel]                                       (k_bias) */
    PLANAR_BN_MAP,  /* y = (x - k2[ch]) * k2[c + ch] * k1[ch] + k1[c + ch]    (k_bn_map_fwd: k1 the
                       weights, k2 the statistics) */
};

typedef struct {
    int op;              /* PLANAR_* */
    pview x, x2, y;      /* the operands the op reads (p NULL where it reads none) and writes */
    int64_t n, len;      /* values in all, in planes of len */
    int c;               /* channels: a plane's channel is its index % c */
    int kind;            /* the activation (engine/act.h), and its slope */
    float slope;
    bool store;          /* PLANAR_ACT_BWD: y = rather than += */
    const float *k1, *k2; /* per-channel values */
} planar_args;

/* Whether op p reads y's old values (it adds to them). */
PLANAR_HD static inline bool planar_reads_y(const planar_args *p) { return p->op == PLANAR_BIAS || (p->op == PLANAR_ACT_BWD && !p->store); }

/* The op's value for one place: x, x2 and y its operands' values there (y the old one), ch its channel. */
PLANAR_HD static inline float planar_value(const planar_args *p, float x, float x2, float y, int ch)
{
    switch (p->op) {
    case PLANAR_COPY: return x;
    case PLANAR_ADD: return x + x2;
    case PLANAR_ACT_FWD: return act_fwd(p->kind, p->slope, x);
    case PLANAR_ACT_BWD: {
        float g = act_dx(p->kind, p->slope, x, x2);
        return p->store ? g : y + g;
    }
    case PLANAR_BIAS: return y + p->k1[ch];
    default: return (x - p->k2[ch]) * p->k2[p->c + ch] * p->k1[ch] + p->k1[p->c + ch]; /* PLANAR_BN_MAP */
    }
}

#endif
