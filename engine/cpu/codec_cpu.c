/* codec_cpu: the encodings of kept maps (sim/plan/enc.h) on the CPU, image by image, images in parallel.
 *
 * Formats (the sizes sim/plan/enc.c predicts, byte for byte for the fixed-size ones):
 *   sign      a bitmap of v > 0, least significant bit first; decodes to 1.0 and 0.0, which is all
 *             a relu backward (mask y > 0) and a max-pool backward (argmax only) read
 *   argmax    each winner's place ki * k + kj in its k x k window, `bits` bits each, packed least
 *             significant first; decodes to the input element index again
 *   sparse    header: each image's bytes (int64); an image: a bitmap of the values whose bits are
 *             not all zero (so -0.0 and NaN survive), then those values in order
 *   fp16      IEEE half (the compiler's _Float16 conversion, round to nearest even; see `half`)
 *   bf16      the top 16 bits after round to nearest even; NaN stays NaN
 *   fp8       E4M3 as OCP FP8 (bias 7, no infinities, 0x7f NaN): nearest even, saturating at +-448
 *   zfp-rate  one ZFP fixed-rate stream per image (2-d field: W by C x rows), no header
 *   zfp-acc   header: the absolute error bound (double), then each image's bytes; one ZFP
 *             fixed-accuracy stream per image. The bound is acc x (max - min) over the whole map,
 *             the layer's value range (acc itself where the range is 0).
 * Every loop over images gives each image to one thread: results do not depend on the split. */
#include <cpuid.h>
#include <float.h>
#include <math.h>
#include <string.h>
#include <immintrin.h>
#include <zfp.h>

#include "engine/cpu/ops_cpu.h"

static int64_t image_values(const ops_codec *m) { return m->shape.nx * m->shape.ny; }

static uint32_t bits_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* --- floats ----------------------------------------------------------------------------------- */

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if (isnan(f)) return (uint16_t)((u >> 16) | 0x40); /* quiet, sign kept */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp32 bits to E4M3: below 2^-6 a subnormal in steps of 2^-9 (8 steps is 2^-6 itself, the code
 * that follows); above, the exponent and top 3 mantissa bits after rounding the 20 dropped ones to
 * nearest even (a carry moves into the exponent), rebiased from 127 to 7; from 448 on, 448. */
static uint8_t to_fp8(float f)
{
    uint32_t u = bits_of(f), a = u & 0x7fffffff;
    uint32_t normal = ((a + 0x7ffff + ((a >> 20) & 1)) >> 20) - (120 << 3);
    /* x + 1.5 * 2^23 - 1.5 * 2^23 rounds x < 2^22 to an integer, nearest even (a select, no branch,
     * so the loop vectorizes) */
    uint32_t sub = (uint32_t)((fabsf(f) * 512.0f + 0x1.8p23f) - 0x1.8p23f);
    uint32_t r = a < 0x3c800000 ? sub : normal;
    r = a >= 0x43e00000 ? 0x7e : r; /* >= 448: saturate (480 would be the NaN code) */
    r = a > 0x7f800000 ? 0x7f : r;  /* NaN */
    return (uint8_t)(((u >> 24) & 0x80) | r);
}

/* E4M3 to fp32: a table of the 256 codes (0x7f and 0xff are NaN), built on first use. */
static float fp8_table[256];
__attribute__((constructor)) static void fp8_table_init(void)
{
    for (int b = 0; b < 256; b++) {
        int exp = (b >> 3) & 15, mant = b & 7;
        float v = exp ? ldexpf(1.0f + (float)mant / 8.0f, exp - 7) : ldexpf((float)mant, -9);
        if ((b & 0x7f) == 0x7f) v = NAN;
        fp8_table[b] = b & 0x80 ? -v : v;
    }
}

/* The compiler's IEEE half: _Float16; Clang before 15 has none on x86, but its storage-only
 * __fp16 converts the same way (round to nearest even) — the fuzz build (tests/fuzz) uses Clang 14. */
#if defined(__clang__) && !defined(__FLT16_MAX__)
typedef __fp16 half;
#else
typedef _Float16 half;
#endif

/* fp16 through the F16C instructions where the CPU has them (round to nearest even, as the
 * compiler's half conversion, which is the fallback and ~15x slower). */
__attribute__((target("f16c,avx"))) static void f16c_encode(const float *x, uint16_t *o, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(o + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) {
        half h = (half)x[i];
        memcpy(o + i, &h, 2);
    }
}

__attribute__((target("f16c,avx"))) static void f16c_decode(const uint16_t *in, float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++) {
        half h;
        memcpy(&h, in + i, 2);
        x[i] = (float)h;
    }
}

static bool has_f16c(void)
{
    static int has = -1;
    unsigned a, b, c, d; /* F16C from CPUID leaf 1: Clang 14's __builtin_cpu_supports does not know it */
    if (has < 0) has = __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    return has;
}

static void encode_floats(enc_kind k, const float *x, void *out, int64_t n)
{
    if (k == ENC_FP16 && has_f16c())
        f16c_encode(x, out, n);
    else if (k == ENC_FP16)
        for (int64_t i = 0; i < n; i++) ((half *)out)[i] = (half)x[i];
    else if (k == ENC_BF16)
        for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = to_bf16(x[i]);
    else
        for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i] = to_fp8(x[i]);
}

static void decode_floats(enc_kind k, const void *in, float *x, int64_t n)
{
    if (k == ENC_FP16 && has_f16c())
        f16c_decode(in, x, n);
    else if (k == ENC_FP16)
        for (int64_t i = 0; i < n; i++) x[i] = (float)((const half *)in)[i];
    else if (k == ENC_BF16)
        for (int64_t i = 0; i < n; i++) x[i] = from_bf16(((const uint16_t *)in)[i]);
    else
        for (int64_t i = 0; i < n; i++) x[i] = fp8_table[((const uint8_t *)in)[i]];
}

/* --- gist ------------------------------------------------------------------------------------- */

static void encode_sign(const float *x, uint8_t *out, int64_t n)
{
    for (int64_t j = 0; j < (n + 7) / 8; j++) {
        uint8_t b = 0;
        for (int k = 0; k < 8 && j * 8 + k < n; k++) b |= (uint8_t)((x[j * 8 + k] > 0.0f) << k);
        out[j] = b;
    }
}

static void decode_sign(const uint8_t *in, float *x, int64_t n)
{
    int64_t whole = n / 8 * 8;
    for (int64_t j = 0; j < whole; j += 8) /* a byte at a time: the inner loop vectorizes */
        for (int k = 0; k < 8; k++) x[j + k] = (in[j >> 3] >> k) & 1 ? 1.0f : 0.0f;
    for (int64_t i = whole; i < n; i++) x[i] = (in[i >> 3] >> (i & 7)) & 1 ? 1.0f : 0.0f;
}

/* Image `img`'s argmax, as places in the window (encode) or back to input indices (decode). */
static void code_argmax(const ops_codec *m, const int64_t *arg_in, uint8_t *bits_out, const uint8_t *bits_in, int64_t *arg_out)
{
    int bits = m->shape.bits, k = m->win.k, rows = (int)(m->shape.ny / m->c);
    int64_t at = 0; /* bit position */
    if (bits_out) memset(bits_out, 0, (size_t)((image_values(m) * bits + 7) / 8));
    for (int ch = 0; ch < m->c; ch++)
        for (int r = 0; r < rows; r++)
            for (int ow = 0; ow < m->w; ow++, at += bits) {
                int top = (m->row0 + r) * m->win.s - m->win.p, left = ow * m->win.s - m->win.p;
                int64_t i = ((int64_t)ch * rows + r) * m->w + ow;
                if (bits_out) {
                    int64_t a = arg_in[i], ih = a / m->in_w, iw = a % m->in_w;
                    int64_t ki = (ih - top) / m->win.d, kj = (iw - left) / m->win.d, place = ki * k + kj;
                    CHECK(ki >= 0 && ki < k && kj >= 0 && kj < k && ih == top + ki * m->win.d && iw == left + kj * m->win.d);
                    for (int b = 0; b < bits; b++) bits_out[(at + b) >> 3] |= (uint8_t)(((place >> b) & 1) << ((at + b) & 7));
                } else {
                    int64_t place = 0;
                    for (int b = 0; b < bits; b++) place |= (int64_t)((bits_in[(at + b) >> 3] >> ((at + b) & 7)) & 1) << b;
                    int64_t ki = place / k, kj = place % k;
                    arg_out[i] = (int64_t)(top + ki * m->win.d) * m->in_w + left + kj * m->win.d;
                }
            }
}

/* Bytes of one image's sparse encoding. */
static int64_t sparse_bytes(const float *x, int64_t n)
{
    int64_t nnz = 0;
    for (int64_t i = 0; i < n; i++) nnz += bits_of(x[i]) != 0;
    return (n + 7) / 8 + 4 * nnz;
}

static void encode_sparse(const float *x, uint8_t *out, int64_t n)
{
    uint8_t *v = out + (n + 7) / 8;
    memset(out, 0, (size_t)(n + 7) / 8);
    for (int64_t i = 0, at = 0; i < n; i++)
        if (bits_of(x[i])) out[i >> 3] |= (uint8_t)(1u << (i & 7)), memcpy(v + 4 * at++, &x[i], 4);
}

static void decode_sparse(const uint8_t *in, float *x, int64_t n)
{
    const uint8_t *v = in + (n + 7) / 8; /* images pack unaligned: values are copied, not loaded */
    for (int64_t i = 0, at = 0; i < n; i++) {
        x[i] = 0.0f;
        if ((in[i >> 3] >> (i & 7)) & 1) memcpy(&x[i], v + 4 * at++, 4);
    }
}

/* --- zfp -------------------------------------------------------------------------------------- */

/* Compresses (out) or decompresses (in) one image's nx x ny field at the map's rate or bound;
 * returns the stream's bytes. */
static int64_t zfp_image(const ops_codec *m, double tol, float *x, void *buf, int64_t cap, bool compress)
{
    zfp_field *f = zfp_field_2d(x, zfp_type_float, (size_t)m->shape.nx, (size_t)m->shape.ny);
    zfp_stream *z = zfp_stream_open(NULL);
    if (m->kind == ENC_ZFP_RATE) zfp_stream_set_rate(z, m->mod->rate, zfp_type_float, 2, zfp_false);
    else zfp_stream_set_accuracy(z, tol);
    CHECK((int64_t)zfp_stream_maximum_size(z, f) <= enc_zfp_max_bytes(m->shape));
    bitstream *bs = stream_open(buf, (size_t)cap);
    zfp_stream_set_bit_stream(z, bs);
    zfp_stream_rewind(z);
    size_t bytes = compress ? zfp_compress(z, f) : zfp_decompress(z, f);
    CHECK(bytes > 0 && (int64_t)bytes <= cap);
    stream_close(bs);
    zfp_stream_close(z);
    zfp_field_free(f);
    return (int64_t)bytes;
}

/* The map's absolute bound: the one given, else acc x its value range over finite values (acc
 * where that is 0). */
static double zfp_bound(const ops_codec *m, const float *x)
{
    if (m->bound > 0) return m->bound; /* adapted (engine/adapt.h) */
    int64_t n = image_values(m) * m->shape.images;
    float lo = INFINITY, hi = -INFINITY;
#pragma omp parallel for reduction(min : lo) reduction(max : hi) schedule(static) if (cpu_parallel(n))
    for (int64_t i = 0; i < n; i++)
        if (isfinite(x[i])) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    double range = hi > lo ? (double)hi - (double)lo : 0.0;
    return range > 0 ? m->mod->acc * range : m->mod->acc;
}

/* The sign bitmaps of a lossy encoding of a relu's output (enc_shape.mask), after the images. */
static int64_t mask_bytes(const ops_codec *m) { return m->shape.mask ? (image_values(m) + 7) / 8 : 0; }

static void write_masks(const ops_codec *m, const float *x, uint8_t *at)
{
    int64_t n = image_values(m), mb = mask_bytes(m);
    if (!mb) return;
#pragma omp parallel for schedule(static) if (cpu_parallel(n * m->shape.images))
    for (int i = 0; i < m->shape.images; i++) encode_sign(x + i * n, at + i * mb, n);
}

/* Zeros stay zeros and positives positive, whatever the lossy values (the relu mask is exact). */
static void apply_mask(const uint8_t *mask, float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = (mask[i >> 3] >> (i & 7)) & 1 ? fmaxf(x[i], FLT_MIN) : 0.0f;
}

/* --- the two calls ---------------------------------------------------------------------------- */

/* Where each image's encoding starts, at[0..N) after the header, and at[N] where the images end
 * (the masks follow): from the header's sizes for the data-sized kinds, else the fixed size. */
static int64_t *image_offsets(const ops_codec *m, const int64_t *sizes)
{
    const int N = m->shape.images;
    int64_t fixed = enc_data_sized(m->kind) ? 0 : enc_image_bytes(m->kind, m->mod, m->shape);
    int64_t *at = err_calloc((size_t)N + 1, sizeof(int64_t));
    at[0] = enc_header_bytes(m->kind, m->shape);
    for (int i = 0; i < N; i++) at[i + 1] = at[i] + (sizes ? sizes[i] : fixed);
    return at;
}

int64_t cpu_codec_encode(const ops_codec *m, const void *x, void *out, void *scratch)
{
    const int N = m->shape.images;
    const int64_t n = image_values(m), hdr = enc_header_bytes(m->kind, m->shape);
    const int64_t fixed = enc_data_sized(m->kind) ? 0 : enc_image_bytes(m->kind, m->mod, m->shape);
    const float *xf = x;
    const int64_t masks = N * mask_bytes(m);
    int64_t *sizes = NULL; /* data-sized: each image's bytes, in the header */
    if (m->kind == ENC_SPARSE) {
        sizes = out ? (int64_t *)out : NULL;
        if (!out) { /* the size call: count */
            int64_t total = hdr;
#pragma omp parallel for reduction(+ : total) schedule(static) if (cpu_parallel(n * N))
            for (int i = 0; i < N; i++) total += sparse_bytes(xf + i * n, n);
            return total;
        }
    }
    if (m->kind == ENC_ZFP_ACC && !out) { /* the size call compresses into scratch: bound, sizes, streams */
        int64_t slot = enc_zfp_max_bytes(m->shape), total = hdr;
        uint8_t *s = scratch;
        double tol = zfp_bound(m, xf);
        memcpy(s, &tol, 8);
        sizes = (int64_t *)(s + 8);
#pragma omp parallel for reduction(+ : total) schedule(static) if (cpu_parallel(n * N))
        for (int i = 0; i < N; i++) total += sizes[i] = zfp_image(m, tol, (float *)(xf + i * n), s + hdr + i * slot, slot, true);
        return total + masks;
    }
    if (!out) return hdr + N * fixed + masks;
    uint8_t *o = out;
    if (m->kind == ENC_ZFP_ACC) { /* the write call: header and streams from scratch, packed */
        const uint8_t *s = scratch;
        int64_t slot = enc_zfp_max_bytes(m->shape), *at = image_offsets(m, (const int64_t *)(s + 8)), end = at[N];
        memcpy(o, s, (size_t)hdr);
        for (int i = 0; i < N; i++) memcpy(o + at[i], s + hdr + i * slot, (size_t)(at[i + 1] - at[i]));
        free(at);
        write_masks(m, xf, o + end);
        return end + masks;
    }
    if (sizes)
        for (int i = 0; i < N; i++) sizes[i] = sparse_bytes(xf + i * n, n);
    int64_t *at = image_offsets(m, sizes), end = at[N];
#pragma omp parallel for schedule(static) if (cpu_parallel(n * N))
    for (int i = 0; i < N; i++) {
        const float *xi = xf + i * n;
        switch (m->kind) {
        case ENC_SIGN: encode_sign(xi, o + at[i], n); break;
        case ENC_ARGMAX: code_argmax(m, (const int64_t *)x + i * n, o + at[i], NULL, NULL); break;
        case ENC_SPARSE: encode_sparse(xi, o + at[i], n); break;
        case ENC_ZFP_RATE: CHECK(zfp_image(m, 0, (float *)xi, o + at[i], fixed, true) == fixed); break;
        default: encode_floats(m->kind, xi, o + at[i], n); break;
        }
    }
    free(at);
    write_masks(m, xf, o + end);
    return end + masks;
}

void cpu_codec_decode(const ops_codec *m, const void *in, void *x)
{
    const int N = m->shape.images;
    const int64_t n = image_values(m);
    const uint8_t *p = in;
    const int64_t *sizes = m->kind == ENC_SPARSE ? (const int64_t *)p : m->kind == ENC_ZFP_ACC ? (const int64_t *)(p + 8) : NULL;
    double tol = 0;
    if (m->kind == ENC_ZFP_ACC) memcpy(&tol, p, 8);
    float *xf = x;
    int64_t *at = image_offsets(m, sizes), end = at[N]; /* the masks follow the images */
#pragma omp parallel for schedule(static) if (cpu_parallel(n * N))
    for (int i = 0; i < N; i++) {
        float *xi = xf + i * n;
        switch (m->kind) {
        case ENC_SIGN: decode_sign(p + at[i], xi, n); break;
        case ENC_ARGMAX: code_argmax(m, NULL, NULL, p + at[i], (int64_t *)x + i * n); break;
        case ENC_SPARSE: decode_sparse(p + at[i], xi, n); break;
        case ENC_ZFP_RATE:
        case ENC_ZFP_ACC: zfp_image(m, tol, xi, (void *)(p + at[i]), at[i + 1] - at[i], false); break;
        default: decode_floats(m->kind, p + at[i], xi, n); break;
        }
        if (m->shape.mask) apply_mask(p + end + i * mask_bytes(m), xi, n);
    }
    free(at);
}

