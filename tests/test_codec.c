/* The CPU codecs of kept maps (engine/cpu/codec_cpu.c), one map at a time:
 *   sign, sparse, argmax  decode(encode(x)) gives back what the backward reads, exactly: the sign
 *                         (sparse: every bit, -0.0 and NaN included); argmax places on windows
 *                         with stride, padding and dilation, and a band's first row not 0
 *   zfp:acc               |decoded - x| <= acc x (max - min) everywhere, smaller encodings as acc
 *                         loosens; zfp:rate and every fixed-size kind write exactly the bytes the
 *                         simulator predicts (sim/plan/enc.c)
 *   mask                  a lossy relu output decodes zeros as zeros and positives as positive
 *   fp16, bf16, fp8       written to DIR (input.f32, fp16.f32, bf16.f32, fp8.f32) for
 *                         tests/codec_ref.py to compare with PyTorch's conversions (fp16, bf16)
 *                         and with every E4M3 value by nearest even (fp8)
 * Usage: test_codec DIR */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/ops_cpu.h"

static int failures;

#define EXPECT(cond, ...)                                 \
    do {                                                  \
        if (!(cond)) {                                    \
            printf("FAIL " __VA_ARGS__), printf("\n");    \
            failures++;                                   \
        }                                                 \
    } while (0)

static uint64_t state = 12345;
static double uni(void) /* [0, 1) */
{
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(state >> 11) * 0x1.0p-53;
}

/* encode then decode map x (images x nx x ny) with kind k; returns the bytes written */
static int64_t round_trip(ops_codec *m, const void *x, void *y, int64_t *predicted)
{
    int64_t scratch_bytes = enc_scratch_bytes(m->kind, m->shape);
    void *scratch = scratch_bytes ? malloc((size_t)scratch_bytes) : NULL;
    int64_t size = cpu_codec_encode(m, x, NULL, scratch);
    void *buf = malloc((size_t)size + 1);
    int64_t wrote = cpu_codec_encode(m, x, buf, scratch);
    EXPECT(wrote == size, "%s: size call said %lld, wrote %lld", enc_name(m->kind), (long long)size, (long long)wrote);
    cpu_codec_decode(m, buf, y);
    free(buf), free(scratch);
    *predicted = enc_bytes(m->kind, m->mod, m->shape);
    return wrote;
}

static void check_lossless(void)
{
    enc_mod mod = {.kind = ENC_MOD_GIST, .density = 0.5};
    enc_shape sh = {3, 13, 7 * 5, 0, false}; /* odd sizes: bitmaps end mid-byte */
    int64_t n = sh.images * sh.nx * sh.ny, pred;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = uni() < 0.4 ? 0.0f : (float)(uni() * 4 - 1);
    x[5] = -0.0f, x[6] = NAN, x[7] = INFINITY;
    ops_codec m = {.kind = ENC_SIGN, .mod = &mod, .shape = sh};
    int64_t bytes = round_trip(&m, x, y, &pred);
    bool same = bytes == pred;
    for (int64_t i = 0; i < n; i++) same &= (y[i] > 0) == (x[i] > 0);
    EXPECT(same, "sign: signs differ or %lld bytes != predicted %lld", (long long)bytes, (long long)pred);
    m.kind = ENC_SPARSE;
    bytes = round_trip(&m, x, y, &pred);
    EXPECT(!memcmp(x, y, (size_t)n * 4), "sparse: decoded bits differ");
    printf("ok   sign %lld bytes, sparse %lld bytes for %lld values (predicted %lld at density 0.5)\n",
           (long long)enc_bytes(ENC_SIGN, &mod, sh), (long long)bytes, (long long)n, (long long)pred);
    free(x), free(y);
}

/* Random winners of a pool (k, s, p, d) over rows [row0, row0 + rows) of its output. */
static void check_argmax(int k, int s, int p, int d, int row0)
{
    net_layer l = {.kind = NET_MAXPOOL, .win = {.k = k, .s = s, .p = p, .d = d}};
    int in_h = 40, in_w = 23, out_w = (in_w + 2 * p - d * (k - 1) - 1) / s + 1, rows = 4, c = 3, images = 2;
    enc_mod mod = {.kind = ENC_MOD_GIST};
    enc_shape sh = {images, out_w, (int64_t)c * rows, enc_argmax_bits(&l), false};
    int64_t n = images * sh.nx * sh.ny, *a = malloc((size_t)n * 8), *b = malloc((size_t)n * 8), pred;
    for (int i = 0; i < images; i++)
        for (int ch = 0; ch < c; ch++)
            for (int r = 0; r < rows; r++)
                for (int ow = 0; ow < out_w; ow++) {
                    int ih, iw;
                    do { /* an in-map place of the window */
                        ih = (row0 + r) * s - p + d * (int)(uni() * k);
                        iw = ow * s - p + d * (int)(uni() * k);
                    } while (ih < 0 || ih >= in_h || iw < 0 || iw >= in_w);
                    a[(((int64_t)i * c + ch) * rows + r) * out_w + ow] = (int64_t)ih * in_w + iw;
                }
    ops_codec m = {.kind = ENC_ARGMAX, .mod = &mod, .shape = sh, .row0 = row0, .c = c, .w = out_w, .in_w = in_w, .win = l.win};
    int64_t bytes = round_trip(&m, a, b, &pred);
    EXPECT(!memcmp(a, b, (size_t)n * 8) && bytes == pred, "argmax k=%d s=%d p=%d d=%d: places differ or %lld != %lld bytes", k, s,
           p, d, (long long)bytes, (long long)pred);
    printf("ok   argmax k=%d s=%d p=%d d=%d rows from %d: %d bits a winner, %lld bytes for %lld int64s\n", k, s, p, d, row0,
           sh.bits, (long long)bytes, (long long)n);
    free(a), free(b);
}

static void check_zfp(void)
{
    enc_shape sh = {2, 29, 4 * 11, 0, false};
    int64_t n = sh.images * sh.nx * sh.ny, pred, last = INT64_MAX;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(sin((double)(i % sh.nx) * 0.3) * 3 + cos((double)(i / sh.nx) * 0.2) + uni() * 0.1);
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < n; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    double accs[] = {1e-5, 1e-3, 1e-1};
    for (int a = 0; a < 3; a++) {
        enc_mod mod = {.kind = ENC_MOD_ZFP, .format = ENC_ZFP_ACC, .acc = accs[a], .ratio = 4};
        ops_codec m = {.kind = ENC_ZFP_ACC, .mod = &mod, .shape = sh};
        int64_t bytes = round_trip(&m, x, y, &pred);
        double worst = 0, bound = accs[a] * ((double)hi - lo);
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)y[i] - x[i]));
        EXPECT(worst <= bound && bytes < last, "zfp:acc=%g: error %.3g > bound %.3g, or %lld bytes not below the tighter bound's",
               accs[a], worst, bound, (long long)bytes);
        printf("ok   zfp:acc=%g: worst error %.3g <= bound %.3g, %lld bytes (%.1fx smaller than fp32)\n", accs[a], worst, bound,
               (long long)bytes, (double)n * 4 / (double)bytes);
        last = bytes;
    }
    for (double rate = 1; rate <= 32; rate *= 2) {
        enc_mod mod = {.kind = ENC_MOD_ZFP, .format = ENC_ZFP_RATE, .rate = rate};
        ops_codec m = {.kind = ENC_ZFP_RATE, .mod = &mod, .shape = sh};
        int64_t bytes = round_trip(&m, x, y, &pred);
        EXPECT(bytes == pred, "zfp:rate=%g: %lld bytes, predicted %lld", rate, (long long)bytes, (long long)pred);
    }
    printf("ok   zfp:rate=1..32: sizes as predicted\n");
    free(x), free(y);
}

/* A lossy relu output with its sign bitmap: zeros stay zero, positives positive. */
static void check_mask(void)
{
    enc_shape sh = {2, 16, 16, 0, true};
    int64_t n = sh.images * sh.nx * sh.ny, pred;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) x[i] = uni() < 0.5 ? 0.0f : (float)(uni() * 1e-3);
    enc_mod mod = {.kind = ENC_MOD_ZFP, .format = ENC_ZFP_RATE, .rate = 2};
    ops_codec m = {.kind = ENC_ZFP_RATE, .mod = &mod, .shape = sh};
    int64_t bytes = round_trip(&m, x, y, &pred);
    bool ok = bytes == pred;
    for (int64_t i = 0; i < n; i++) ok &= x[i] > 0 ? y[i] > 0 : y[i] == 0;
    EXPECT(ok, "mask: a relu sign flipped, or %lld != %lld bytes", (long long)bytes, (long long)pred);
    printf("ok   zfp:rate=2 with a sign bitmap: no relu mask flips\n");
    free(x), free(y);
}

/* The dpr formats of a spread of values, for codec_ref.py. */
static int write_dpr(const char *dir)
{
    const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, INFINITY, -INFINITY, NAN, FLT_MIN, FLT_MAX, -FLT_MAX, 1e-40f, 65504.0f,
                             65519.99f, 65520.0f, 448.0f, 464.0f, 464.01f, 480.0f, 1e-3f, 0x1p-9f, 0x1p-10f, 0x1.8p-10f,
                             0x1.4p-7f, 1.0625f, 1.1875f, 3.3895314e38f};
    int ns = sizeof special / sizeof *special, n = 1 << 16;
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    for (int i = 0; i < n; i++) x[i] = i < ns ? special[i] : (float)((uni() * 2 - 1) * pow(2.0, uni() * 40 - 24));
    const enc_kind kinds[] = {ENC_FP16, ENC_BF16, ENC_FP8};
    const char *names[] = {"input", "fp16", "bf16", "fp8"};
    for (int k = -1; k < 3; k++) {
        if (k >= 0) {
            enc_mod mod = {.kind = ENC_MOD_DPR, .format = kinds[k]};
            ops_codec m = {.kind = kinds[k], .mod = &mod, .shape = {1, n, 1, 0, false}};
            int64_t pred, bytes = round_trip(&m, x, y, &pred);
            EXPECT(bytes == pred, "%s: %lld bytes, predicted %lld", names[k + 1], (long long)bytes, (long long)pred);
        }
        char path[512];
        snprintf(path, sizeof path, "%s/%s.f32", dir, names[k + 1]);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(k < 0 ? x : y, 4, (size_t)n, f) != (size_t)n || fclose(f)) {
            printf("FAIL cannot write %s\n", path);
            return -1;
        }
    }
    printf("ok   fp16, bf16, fp8 of %d values written to %s for codec_ref.py\n", n, dir);
    free(x), free(y);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test_codec DIR\n");
        return 2;
    }
    check_lossless();
    check_argmax(2, 2, 0, 1, 0);
    check_argmax(3, 2, 1, 1, 5);
    check_argmax(3, 1, 2, 2, 3);
    check_argmax(7, 3, 3, 1, 2);
    check_zfp();
    check_mask();
    if (write_dpr(argv[1])) failures++;
    printf("%s\n", failures ? "FAILED" : "all codecs as required");
    return failures != 0;
}
