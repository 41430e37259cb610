/* codec: the encodings of kept maps on the device, in the formats of engine/cpu/codec_cpu.c (its
 * header comment), so a map encoded here decodes there and back, byte for byte (tests/test_cuda.c).
 * ZFP is not here: Debian's libzfp has no CUDA policy, and the backend refuses it.
 * Fixed-size kinds run one thread per output byte or value over all images; sparse storage runs
 * one block per image, which walks its image in tiles of 1024 values with a block-wide prefix sum
 * (no scratch memory, images in parallel). */
#include <cub/block/block_scan.cuh>
#include <cuda_fp16.h>
#include <float.h>

#include "engine/cuda/kernels.h"

#define THREADS 256
#define TILE 1024

static int blocks(int64_t n) { return (int)((n + THREADS - 1) / THREADS); }

__device__ static uint32_t u32(float v) { return __float_as_uint(v); }

/* --- floats (codec_cpu.c's to_bf16, to_fp8 and its table, on the device) ---------------------- */

__device__ static uint16_t to_bf16(float f)
{
    uint32_t u = u32(f);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

__device__ static uint8_t to_fp8(float f)
{
    uint32_t u = u32(f), a = u & 0x7fffffff;
    uint32_t normal = ((a + 0x7ffff + ((a >> 20) & 1)) >> 20) - (120 << 3);
    uint32_t sub = (uint32_t)__fsub_rn(__fadd_rn(fabsf(f) * 512.0f, 0x1.8p23f), 0x1.8p23f);
    uint32_t r = a < 0x3c800000 ? sub : normal;
    r = a >= 0x43e00000 ? 0x7e : r;
    r = a > 0x7f800000 ? 0x7f : r;
    return (uint8_t)(((u >> 24) & 0x80) | r);
}

__device__ static float from_fp8(uint8_t b)
{
    int exp = (b >> 3) & 15, mant = b & 7;
    float v = exp ? ldexpf(1.0f + (float)mant / 8.0f, exp - 7) : ldexpf((float)mant, -9);
    if ((b & 0x7f) == 0x7f) v = __int_as_float(0x7fc00000);
    return b & 0x80 ? -v : v;
}

__global__ static void floats_enc(int kind, const float *x, uint8_t *out, int64_t total)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    if (kind == KC_FP16) {
        __half h = __float2half_rn(x[i]);
        ((uint16_t *)out)[i] = *(uint16_t *)&h;
    } else if (kind == KC_BF16) {
        ((uint16_t *)out)[i] = to_bf16(x[i]);
    } else {
        out[i] = to_fp8(x[i]);
    }
}

__global__ static void floats_dec(int kind, const uint8_t *in, float *x, int64_t total)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= total) return;
    if (kind == KC_FP16) {
        uint16_t b = ((const uint16_t *)in)[i];
        x[i] = __half2float(*(__half *)&b);
    } else if (kind == KC_BF16) {
        x[i] = __uint_as_float((uint32_t)((const uint16_t *)in)[i] << 16);
    } else {
        x[i] = from_fp8(in[i]);
    }
}

/* --- bitmaps: signs (and the sign masks of lossy relu outputs) --------------------------------- */

/* Image i's bitmap of x > 0 at out + i * stride (bytes), one thread per byte. */
__global__ static void sign_enc(const float *x, int64_t n, int images, uint8_t *out, int64_t stride)
{
    int64_t per = (n + 7) / 8, g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= per * images) return;
    int64_t i = g / per, j = g % per;
    const float *xi = x + i * n;
    uint8_t b = 0;
    for (int k = 0; k < 8 && j * 8 + k < n; k++) b |= (uint8_t)((xi[j * 8 + k] > 0.0f) << k);
    out[i * stride + j] = b;
}

/* mask false: x = bit ? 1 : 0 (a sign encoding); true: x = bit ? max(x, FLT_MIN) : 0 (the mask of
 * a lossy relu output, applied after its values are decoded). */
__global__ static void sign_dec(const uint8_t *in, int64_t stride, int64_t n, int images, float *x, bool mask)
{
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n * images) return;
    int64_t i = g / n, j = g % n;
    bool on = (in[i * stride + (j >> 3)] >> (j & 7)) & 1;
    x[g] = on ? (mask ? fmaxf(x[g], FLT_MIN) : 1.0f) : 0.0f;
}

/* --- argmax ----------------------------------------------------------------------------------- */

/* Where value v (channel-major: ch, row, ow) of an image sits: its window's top-left input place. */
__device__ static void window_of(const kcodec *m, int64_t v, int64_t *top, int64_t *left)
{
    int rows = (int)(m->n / ((int64_t)m->c * m->w));
    int64_t r = (v / m->w) % rows, ow = v % m->w;
    *top = (m->row0 + r) * m->win.s - m->win.p, *left = ow * m->win.s - m->win.p;
}

/* One thread per output byte: the bits of the values that overlap it (no two threads write a byte). */
__global__ static void argmax_enc(kcodec m, const int64_t *arg, uint8_t *out, int64_t per)
{
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= per * m.images) return;
    int64_t i = g / per, j = g % per, first = j * 8 / m.bits, last = (j * 8 + 7) / m.bits;
    uint8_t b = 0;
    for (int64_t v = first; v <= last && v < m.n; v++) {
        int64_t top, left, a = arg[i * m.n + v];
        window_of(&m, v, &top, &left);
        int64_t ki = (a / m.in_w - top) / m.win.d, kj = (a % m.in_w - left) / m.win.d, place = ki * m.win.k + kj;
        for (int k = 0; k < m.bits; k++) {
            int64_t bit = v * m.bits + k;
            if (bit >= j * 8 && bit < j * 8 + 8) b |= (uint8_t)(((place >> k) & 1) << (bit - j * 8));
        }
    }
    out[i * per + j] = b;
}

__global__ static void argmax_dec(kcodec m, const uint8_t *in, int64_t per, int64_t *arg)
{
    int64_t g = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= m.n * m.images) return;
    int64_t i = g / m.n, v = g % m.n, place = 0, top, left;
    const uint8_t *bits = in + i * per;
    for (int k = 0; k < m.bits; k++) {
        int64_t bit = v * m.bits + k;
        place |= (int64_t)((bits[bit >> 3] >> (bit & 7)) & 1) << k;
    }
    window_of(&m, v, &top, &left);
    arg[g] = (top + place / m.win.k * m.win.d) * m.in_w + left + place % m.win.k * m.win.d;
}

/* --- sparse: one block per image --------------------------------------------------------------- */

typedef cub::BlockScan<int, TILE> tile_scan;

/* Image blockIdx.x's bytes into sizes (count only: out NULL), or its bitmap and values at
 * out + at[image]. */
__global__ static void __launch_bounds__(TILE) sparse_enc(const float *x, int64_t n, const int64_t *at, uint8_t *out, int64_t *sizes)
{
    __shared__ typename tile_scan::TempStorage tmp;
    __shared__ int64_t base;
    const float *xi = x + blockIdx.x * n;
    uint8_t *bitmap = out ? out + at[blockIdx.x] : NULL, *vals = bitmap ? bitmap + (n + 7) / 8 : NULL;
    if (threadIdx.x == 0) base = 0;
    __syncthreads();
    for (int64_t t0 = 0; t0 < n; t0 += TILE) {
        int64_t i = t0 + threadIdx.x;
        uint32_t u = i < n ? u32(xi[i]) : 0;
        int pre, total;
        tile_scan(tmp).ExclusiveSum(u != 0, pre, total);
        if (vals && u)
            for (int k = 0; k < 4; k++) vals[4 * (base + pre) + k] = (uint8_t)(u >> (8 * k)); /* unaligned: bytes */
        __syncthreads();
        if (threadIdx.x == 0) base += total;
        __syncthreads();
    }
    if (bitmap)
        for (int64_t j = threadIdx.x; j < (n + 7) / 8; j += blockDim.x) {
            uint8_t b = 0;
            for (int k = 0; k < 8 && j * 8 + k < n; k++) b |= (uint8_t)((u32(xi[j * 8 + k]) != 0) << k);
            bitmap[j] = b;
        }
    if (threadIdx.x == 0 && sizes) sizes[blockIdx.x] = (n + 7) / 8 + 4 * base;
}

__global__ static void __launch_bounds__(TILE) sparse_dec(const uint8_t *in, int64_t n, const int64_t *at, float *x)
{
    __shared__ typename tile_scan::TempStorage tmp;
    __shared__ int64_t base;
    const uint8_t *bitmap = in + at[blockIdx.x], *vals = bitmap + (n + 7) / 8;
    float *xi = x + blockIdx.x * n;
    if (threadIdx.x == 0) base = 0;
    __syncthreads();
    for (int64_t t0 = 0; t0 < n; t0 += TILE) {
        int64_t i = t0 + threadIdx.x;
        int on = i < n ? (bitmap[i >> 3] >> (i & 7)) & 1 : 0, pre, total;
        tile_scan(tmp).ExclusiveSum(on, pre, total);
        if (i < n) {
            uint32_t u = 0;
            if (on)
                for (int k = 0; k < 4; k++) u |= (uint32_t)vals[4 * (base + pre) + k] << (8 * k);
            xi[i] = __uint_as_float(u);
        }
        __syncthreads();
        if (threadIdx.x == 0) base += total;
        __syncthreads();
    }
}

/* --- the calls --------------------------------------------------------------------------------- */

extern "C" void k_codec_sparse_sizes(cudaStream_t st, const kcodec *m, const float *x, int64_t *sizes)
{
    sparse_enc<<<m->images, TILE, 0, st>>>(x, m->n, NULL, NULL, sizes);
    LAUNCHED();
}

extern "C" void k_codec_encode(cudaStream_t st, const kcodec *m, const void *x, uint8_t *out, const int64_t *at_dev, int64_t masks_at)
{
    int64_t n = m->n, total = n * m->images;
    switch (m->kind) {
    case KC_SIGN:
        sign_enc<<<blocks((n + 7) / 8 * m->images), THREADS, 0, st>>>((const float *)x, n, m->images, out, (n + 7) / 8);
        LAUNCHED();
        break;
    case KC_ARGMAX: {
        int64_t per = (n * m->bits + 7) / 8;
        argmax_enc<<<blocks(per * m->images), THREADS, 0, st>>>(*m, (const int64_t *)x, out, per);
        LAUNCHED();
        break;
    }
    case KC_SPARSE:
        sparse_enc<<<m->images, TILE, 0, st>>>((const float *)x, n, at_dev, out, NULL);
        LAUNCHED();
        break;
    default:
        floats_enc<<<blocks(total), THREADS, 0, st>>>(m->kind, (const float *)x, out, total);
        LAUNCHED();
        break;
    }
    if (m->mask) {
        sign_enc<<<blocks((n + 7) / 8 * m->images), THREADS, 0, st>>>((const float *)x, n, m->images, out + masks_at, (n + 7) / 8);
        LAUNCHED();
    }
}

extern "C" void k_codec_decode(cudaStream_t st, const kcodec *m, const uint8_t *in, void *x, const int64_t *at_dev, int64_t masks_at)
{
    int64_t n = m->n, total = n * m->images;
    switch (m->kind) {
    case KC_SIGN:
        sign_dec<<<blocks(total), THREADS, 0, st>>>(in, (n + 7) / 8, n, m->images, (float *)x, false);
        LAUNCHED();
        break;
    case KC_ARGMAX:
        argmax_dec<<<blocks(total), THREADS, 0, st>>>(*m, in, (n * m->bits + 7) / 8, (int64_t *)x);
        LAUNCHED();
        break;
    case KC_SPARSE:
        sparse_dec<<<m->images, TILE, 0, st>>>(in, n, at_dev, (float *)x);
        LAUNCHED();
        break;
    default:
        floats_dec<<<blocks(total), THREADS, 0, st>>>(m->kind, in, (float *)x, total);
        LAUNCHED();
        break;
    }
    if (m->mask) {
        sign_dec<<<blocks(total), THREADS, 0, st>>>(in + masks_at, (n + 7) / 8, n, m->images, (float *)x, true);
        LAUNCHED();
    }
}
