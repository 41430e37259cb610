/* Encodings of kept maps on the CPU, measured against peers in the same run (figures, not
 * assertions):
 *   1. encode and decode throughput of every codec (engine/cpu/codec_cpu.c) on a relu output the
 *      size of VGG-16's conv1_1 map at 224x224 for 2 images (half zeros), in GB/s of fp32 map
 *      handled, beside memcpy of the same map (the cost of merely touching it once), and the
 *      encoded size against fp32;
 *   2. the time overhead of each modifier on a whole iteration: `layer` and `layer+MOD` on
 *      vgg-small and resnet-small (batch 32), best of 5, and the share of the iteration spent in
 *      ENCODE and DECODE steps.
 * Usage: lrcnn_bench_codec */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/cpu/ops_cpu.h"
#include "sim/net/load.h"
#include "engine/run.h"
#include "io/data.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define REPS 5

static double best_of(void (*f)(void *), void *ctx)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        f(ctx);
        double dt = now() - t0;
        best = dt < best ? dt : best;
    }
    return best;
}

typedef struct {
    ops_codec m;
    float *x, *y;
    void *enc, *scratch;
    int64_t bytes;
} job;

static void do_memcpy(void *c)
{
    job *j = c;
    memcpy(j->y, j->x, (size_t)(j->m.shape.images * j->m.shape.nx * j->m.shape.ny * 4));
}

static void do_encode(void *c)
{
    job *j = c;
    if (enc_data_sized(j->m.kind)) cpu_codec_encode(&j->m, j->x, NULL, j->scratch); /* the size call is part of it */
    j->bytes = cpu_codec_encode(&j->m, j->x, j->enc, j->scratch);
}

static void do_decode(void *c)
{
    job *j = c;
    cpu_codec_decode(&j->m, j->enc, j->y);
}

static void throughput(void)
{
    enc_shape sh = {2, 224, 64 * 224, 0, false};
    int64_t n = sh.images * sh.nx * sh.ny, fp32 = n * 4;
    job j = {.x = malloc((size_t)fp32), .y = malloc((size_t)fp32)};
    uint64_t s = 1;
    for (int64_t i = 0; i < n; i++) { /* a relu output: half zeros, the rest smooth-ish positive */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        j.x[i] = (s >> 63) ? 0.0f : (float)((i % 224) * 0.01 + (double)(s >> 40) * 0x1.0p-24);
    }
    j.m.shape = sh;
    double mc = best_of(do_memcpy, &j);
    printf("codecs on a %.1f MiB relu output (2 x 64 x 224 x 224, half zeros); GB/s of fp32 map, best of %d\n",
           (double)fp32 / 1048576, REPS);
    printf("  %-14s %10s %10s %11s %11s %9s\n", "encoding", "encode", "decode", "enc/memcpy", "dec/memcpy", "size");
    printf("  %-14s %10.2f %10.2f %11s %11s %8.3fx\n", "memcpy", fp32 / mc / 1e9, fp32 / mc / 1e9, "1.00x", "1.00x", 1.0);
    struct {
        const char *name;
        enc_kind k;
        enc_mod mod;
    } cases[] = {
        {"sign", ENC_SIGN, {.kind = ENC_MOD_GIST}},
        {"sparse", ENC_SPARSE, {.kind = ENC_MOD_GIST, .density = 0.5}},
        {"fp16", ENC_FP16, {.kind = ENC_MOD_DPR, .format = ENC_FP16}},
        {"bf16", ENC_BF16, {.kind = ENC_MOD_DPR, .format = ENC_BF16}},
        {"fp8", ENC_FP8, {.kind = ENC_MOD_DPR, .format = ENC_FP8}},
        {"zfp:rate=8", ENC_ZFP_RATE, {.kind = ENC_MOD_ZFP, .format = ENC_ZFP_RATE, .rate = 8}},
        {"zfp:acc=1e-3", ENC_ZFP_ACC, {.kind = ENC_MOD_ZFP, .format = ENC_ZFP_ACC, .acc = 1e-3, .ratio = 4}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        j.m.kind = cases[c].k, j.m.mod = &cases[c].mod;
        int64_t sb = enc_scratch_bytes(j.m.kind, sh);
        j.scratch = sb ? malloc((size_t)sb) : NULL;
        j.enc = malloc((size_t)(enc_bytes(j.m.kind, j.m.mod, sh) > fp32 * 2 ? enc_bytes(j.m.kind, j.m.mod, sh) : fp32 * 2));
        double te = best_of(do_encode, &j), td = best_of(do_decode, &j);
        printf("  %-14s %10.2f %10.2f %10.2fx %10.2fx %8.3fx\n", cases[c].name, fp32 / te / 1e9, fp32 / td / 1e9, te / mc, td / mc,
               (double)j.bytes / (double)fp32);
        free(j.enc), free(j.scratch);
    }
    free(j.x), free(j.y);
}

static void overhead(const char *name)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    const char *plans[] = {"layer", "layer+gist", "layer+gist:binarize", "layer+dpr:fp16", "layer+dpr:bf16", "layer+dpr:fp8",
                           "layer+zfp:rate=8", "layer+zfp:acc=1e-3"};
    data d;
    data_synthetic_for(&d, &n, 7);
    printf("\n%s, batch 32, SGD: one iteration, best of %d after a warm-up\n", name, REPS);
    printf("  %-22s %10s %9s %12s %12s\n", "plan", "time", "vs layer", "codec share", "peak");
    double base = 0;
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        plan p;
        run r;
        if (plan_parse(&p, &n, plans[i], &e)) {
            fprintf(stderr, "%s\n", e.msg);
            exit(1);
        }
        run_cfg c = {.n = &n, .p = &p, .sched = {.batch = 32, .optimizer = SCHED_SGD}, .ops = &ops_cpu,
                     .hp = exec_default_hparams(SCHED_SGD), .seed = 3, .iters = REPS + 1, .batches = data_batches(&d)};
        if (run_plan(&r, &c, &e)) {
            fprintf(stderr, "%s\n", e.msg);
            exit(1);
        }
        double t = r.sum.best_us;
        if (!i) base = t;
        printf("  %-22s %8.1fms %8.2fx %11.1f%% %9.2f MiB\n", plans[i], t / 1e3, t / base, 100.0 * r.x.codec_us / t,
               (double)r.sum.peak / 1048576);
        run_free(&r);
        plan_free(&p);
    }
    net_free(&n);
}

int main(void)
{
    throughput();
    overhead("vgg-small");
    overhead("resnet-small");
    return 0;
}
