/* act: the elementwise activations' formulas, one definition for every backend (the CPU's loops,
 * the CUDA kernels), each as PyTorch 1.13 computes it (aten/src/ATen/native/Activation.cpp and
 * its CPU kernels):
 *
 *   relu       y = x < 0 ? 0 : x                 dx = dy where y > 0, else 0     (keeps y: in place;
 *                                                 the CPU runs its own loops, CUDA these formulas)
 *   sigmoid    y = 1 / (1 + e^-x)                dx = dy * (1 - y) * y            (keeps y)
 *   relu6      y = min(max(x, 0), 6)             dx = dy where 0 < y < 6, else 0 (keeps y: in place)
 *   leakyrelu  y = x > 0 ? x : slope * x         dx = y > 0 ? dy : slope * dy     (keeps y: in place;
 *                                                 slope >= 0, so y > 0 exactly where x > 0)
 *   silu       y = x * s, s = sigmoid(x)         dx = dy * s * (1 + x * (1 - s))  (keeps x)
 *   gelu       y = x * Phi(x) (erf form)         dx = dy * (Phi(x) + x * phi(x))  (keeps x)
 *   hardswish  y = x * min(max(x + 3, 0), 6) / 6 dx = 0 below -3, dy * (x / 3 + 1/2) up to 3,
 *                                                 dy above                         (keeps x)
 *
 * act_fwd(kind, slope, x) is y; act_grad(kind, slope, m) is dx / dy, where m is what the kind
 * keeps (y or x, kind.c), and act_dx(kind, slope, m, dy) is dx. Not done here: loops, bands, in
 * place (the backends). */
#ifndef LRCNN_ACT_H
#define LRCNN_ACT_H

#include <math.h>
#include <stdint.h>

#include "sim/net/net.h"

#ifdef __CUDACC__
#define ACT_FN __host__ __device__ static inline
#else
#define ACT_FN static inline
#endif

/* Is kind one of the activations here? */
ACT_FN int act_is(int kind) { return (kind >= NET_SIGMOID && kind <= NET_HSWISH) || kind == NET_HSIGMOID; }

/* t clamped to [0, 6], NaN passing through (PyTorch's clamp: hardsigmoid's NaN stays NaN, where
 * fmaxf(NaN, 0) made it 0). Written as selects, which the compiler turns into vector blends:
 * fminf and fmaxf, which must return the number beside a NaN, stayed calls, and made relu6's
 * forward 4x relu's (1.8 against 0.4 ms on a 96 x 112 x 112 map at batch 2; now 0.5). */
ACT_FN float act_clamp6(float t) { return t < 0.0f ? 0.0f : t > 6.0f ? 6.0f : t; }

/* GELU given erf(x / sqrt 2) (erf_v) and, for its gradient, exp(-x^2 / 2) (exp_v), which a backend
 * may compute apart: the CPU four at a time through glibc's vector math library (act_cpu.c). */
#define ACT_RSQRT2 0.70710678118654752f
ACT_FN float act_gelu(float x, float erf_v) { return x * 0.5f * (1.0f + erf_v); }
ACT_FN float act_gelu_grad(float m, float erf_v, float exp_v)
{
    return 0.5f * (1.0f + erf_v) + m * (exp_v * 0.39894228040143268f);
}

/* SiLU and the sigmoid given exp(-x) (e), which the CPU also computes apart. */
ACT_FN float act_silu(float x, float e) { return x / (1.0f + e); }
ACT_FN float act_sigmoid(float e) { return 1.0f / (1.0f + e); }
ACT_FN float act_silu_grad(float m, float e)
{
    float s = 1.0f / (1.0f + e);
    return s * (1.0f + m * (1.0f - s));
}

ACT_FN float act_fwd(int kind, float slope, float x)
{
    switch (kind) {
    case NET_RELU: return x < 0.0f ? 0.0f : x; /* NaN and -0.0 pass, as the CPU's relu */
    case NET_SIGMOID: return act_sigmoid(expf(-x));
    case NET_RELU6: return act_clamp6(x);
    case NET_LEAKY: return x > 0.0f ? x : x * slope;
    case NET_SILU: return act_silu(x, expf(-x));
    case NET_GELU: return act_gelu(x, erff(x * ACT_RSQRT2));
    case NET_HSWISH: return x * act_clamp6(x + 3.0f) / 6.0f;
    case NET_HSIGMOID: return act_clamp6(x + 3.0f) / 6.0f;
    default: return x;
    }
}

ACT_FN float act_grad(int kind, float slope, float m)
{
    switch (kind) {
    case NET_RELU: return m > 0.0f ? 1.0f : 0.0f;
    case NET_SIGMOID: return (1.0f - m) * m;
    case NET_RELU6: return (m > 0.0f) & (m < 6.0f) ? 1.0f : 0.0f;
    case NET_LEAKY: return m > 0.0f ? 1.0f : slope;
    case NET_SILU: return act_silu_grad(m, expf(-m));
    case NET_GELU: return act_gelu_grad(m, erff(m * ACT_RSQRT2), expf(-0.5f * m * m));
    case NET_HSWISH: return m < -3.0f ? 0.0f : m <= 3.0f ? m / 3.0f + 0.5f : 1.0f;
    case NET_HSIGMOID: return (m > -3.0f) & (m < 3.0f) ? 1.0f / 6.0f : 0.0f;
    default: return 1.0f;
    }
}

/* dy's share through the activation: dy * act_grad, except where the gradient is piecewise
 * (relu6, hardsigmoid, hardswish), which selects by piece as PyTorch does (a NaN dy gives 0 where
 * the gradient is 0). A product with a 0/1 factor, which must keep dy * 0's NaN and sign, the
 * compiler left a branch per value: relu6's backward took 10x relu's (5.3 against 0.5 ms on a
 * 96 x 112 x 112 map at batch 2; now 0.6). */
ACT_FN float act_dx(int kind, float slope, float m, float dy)
{
    switch (kind) {
    case NET_RELU6: return (m > 0.0f) & (m < 6.0f) ? dy : 0.0f;
    case NET_HSIGMOID: return (m > -3.0f) & (m < 3.0f) ? dy * (1.0f / 6.0f) : 0.0f;
    case NET_HSWISH: {
        float mid = dy * (m / 3.0f + 0.5f);
        return m < -3.0f ? 0.0f : m <= 3.0f ? mid : dy;
    }
    default: return dy * act_grad(kind, slope, m);
    }
}

/* --- dropout's mask ------------------------------------------------------------------------------
 * Element i of a dropout layer's output (flat over the whole (N, C, H, W) map, i = ((n * C + c) * H
 * + row) * W + col) is kept when u >= p, u = the top 24 bits of splitmix64(key + (i + 1) * golden)
 * over 2^24, key = drop_key(seed, iteration, layer). A function of where the value is in the whole
 * map, so a band draws exactly the values the whole map would, and a recomputation the forward's;
 * tests/torch_ref.py draws the same masks in NumPy. Kept values are scaled by 1 / (1 - p). */

ACT_FN uint64_t drop_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

ACT_FN uint64_t drop_key(uint64_t seed, int64_t iteration, int layer)
{
    return drop_mix(drop_mix(seed + 0x9E3779B97F4A7C15ull) ^ ((uint64_t)iteration << 20) ^ (uint64_t)layer);
}

ACT_FN int drop_keep(uint64_t key, int64_t i, float p)
{
    uint64_t z = drop_mix(key + ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull);
    return (float)(z >> 40) * (1.0f / 16777216.0f) >= p;
}

/* PyTorch's scale of kept values, 1 / (1 - p) in double, rounded to float. */
ACT_FN float drop_scale(float p) { return (float)(1.0 / (1.0 - (double)p)); }

/* The slope of layer l's activation (leakyrelu's; 0 for the others). */
#define ACT_SLOPE(l) ((l)->kind == NET_LEAKY ? (l)->u.leaky.slope : 0.0f)

/* --- bilinear upsampling's taps ------------------------------------------------------------------
 * Output row (or column) o of a map upsampled `scale` times from `in` to `out` rows reads input
 * rows i0 and i1 with weights 1 - l1 and l1, as PyTorch 1.13's upsample_bilinear2d computes them
 * (UpSample.h: area_pixel_compute_scale and _source_index, in float): src = o * (in - 1) / (out - 1)
 * with align corners, else (o + 1/2) / scale - 1/2 clamped at 0; i0 = floor(src), l1 = src - i0,
 * i1 = i0 + 1 but at the last row. Where l1 is 0 the backends skip i1 (a band need not hold it). */
ACT_FN void lerp_taps(int o, int in, int out, int scale, bool align, int *i0, int *i1, float *l1)
{
    float src;
    if (align) {
        float s = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
        src = s * (float)o;
    } else {
        float s = (float)(1.0 / scale);
        src = (float)((double)s * (o + 0.5) - 0.5);
        if (src < 0.0f) src = 0.0f;
    }
    *i0 = (int)src;
    float l = src - (float)*i0;
    *l1 = l < 0.0f ? 0.0f : l > 1.0f ? 1.0f : l;
    *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
}

#endif
