/* CUDA backend against the CPU engine (needs a GPU; exits 77, ctest's skip code, without one).
 *
 * For each net and plan: one SGD iteration from identical weights and data on both backends.
 *   - every parameter gradient: normalized MSE ||g_cuda - g_cpu||^2 / ||g_cpu||^2 <= 1e-7 on
 *     kernels.net (one layer of every kind, odd sizes, stride 2, dilation, padding 0) and <= 1e-6
 *     on the small VGG and ResNet (fp32 through a dozen layers, summed in different orders), with
 *     NaN and Inf counted separately (must be none); loss within 1e-5 relative;
 *   - the allocated peak equals the replay of the CUDA schedule (lowered with cuDNN's workspace
 *     sizes and the staging of slices cuDNN refuses), per category, byte for byte — a data-sized
 *     encoding (gist's sparse relu outputs) at the bytes the engine stored;
 *   - the arena (the default, engine/exec.h) the engine reserved equals the simulator's for the
 *     CUDA schedule, to the byte, and its blocks reach its end; and a few plans run with --alloc
 *     pool train as with the arena (normalized MSE <= 1e-10, the second loss within 1e-6).
 * BatchNorm in each mode inside row segments (train: whole-map statistics over the bands, in stages;
 * train-offload: the stages' kept maps on the host; train-rebuild: rebuilt in the backward;
 * train-recompute: in passes from the segment input; frozen; per-band: each band's own) under 2ps:4
 * and overl:4 on ResNet-small, whose fp32 floor is small, at 32x32 and at 35x35 (odd rows: its
 * stride-2 downsample reads 17 of 18), and train-rebuild on stem-small (a max pool between bns,
 * its argmax rebuilt over the forward's rows under OverL); kernels.net's stride-2 and dilated
 * convolutions under every plan.
 * The codecs of kept maps (engine/cuda/codec.cu): every encoding but ZFP's, on maps with zeros,
 * negatives, -0.0 and values at fp8's and fp16's edges, must produce the CPU codec's bytes exactly
 * and decode back to the CPU's values; and the encoded plans (gist, dpr) must match the CPU
 * engine like the others, with ZFP refused in one line (an expected refusal, not a failure).
 * Usage: test_cuda [--no-cupti] [NET PLAN...] (default: the cases above; --no-cupti, as under
 * compute-sanitizer, which takes CUPTI for itself); test_cuda --self runs them all with the
 * CPU engine on both sides, without a GPU (the harness itself, in CI); --codecs-on-cpu the codecs
 * only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/ops_cuda.h"
#include "sim/net/load.h"
#include "tests/harness.h"

#define SKIP 77

/* One SGD iteration (batch 4) of plan `text` on a backend (tests/harness.h); a failure is printed
 * with why in `why` (NULL: as a failure line). */
static int run_one(const net *n, const char *text, const ops_table *ops, outcome *o, err *why)
{
    err e;
    if (!harness_run(n, text, 4, ops, o, &e)) return 0;
    if (why) *why = e;
    else printf("FAIL %s: %s\n", text, e.msg);
    return -1;
}

static int failures;

static void compare(const net *n, const char *text, const ops_table *cpu, const ops_table *cu, double tol)
{
    outcome a, b;
    if (run_one(n, text, cpu, &a, NULL)) { failures++; return; }
    if (run_one(n, text, cu, &b, NULL)) { failures++; harness_drop(&a); return; }
    run_summary *m = &b.r.sum;
    sim_mem replay; /* of the schedule the run executed, lowered with the backend's workspace model */
    harness_replay_measured(&b, &replay);
    run_compare(m, n, b.r.grads, a.r.grads, m->loss0, a.r.sum.loss0);
    double nmse = m->grad_dev * m->grad_dev; /* normalized MSE: the relative norm, squared */
    bool mem = m->peak == replay.peak;
    for (int k = 0; k < MEM_NCAT; k++) mem &= m->at_peak[k] == replay.at_peak[k];
    /* the arena (the default): what the engine reserved is the plan's, and its blocks reached its end */
    bool arena = m->arena && m->arena_size == b.pred.arena.size && m->arena_extent == m->arena_size &&
                 m->arena_host_size == b.pred.arena.host_size && m->arena_host_extent == m->arena_host_size;
    if (!arena)
        printf("     arena: reserved %lld (reached %lld), host %lld (reached %lld); predicted %lld, host %lld\n", (long long)m->arena_size,
               (long long)m->arena_extent, (long long)m->arena_host_size, (long long)m->arena_host_extent, (long long)b.pred.arena.size,
               (long long)b.pred.arena.host_size);
    bool ok = nmse <= tol && !m->non_finite && m->loss_dev <= 1e-5 && mem && arena;
    printf("%s %-14s %5dx%-4d %-26s loss %+.1e  worst nmse %-18s %.2e  non-finite %lld  allocated %lld = replay %s\n", ok ? "ok  " : "FAIL",
           n->name, n->layers[0].h, n->layers[0].w, text, m->loss_dev, m->worst[0] ? m->worst : "-", nmse, (long long)m->non_finite,
           (long long)m->peak, mem ? "yes" : "NO");
    if (!mem)
        for (int k = 0; k < MEM_NCAT; k++)
            if (m->at_peak[k] != replay.at_peak[k])
                printf("     %s at the peak: allocated %lld, replay %lld\n", mem_cat_name((mem_cat)k), (long long)m->at_peak[k],
                       (long long)replay.at_peak[k]);
    failures += !ok;
    if (m->has_device) { /* what the device saw: printed, to be compared on a GPU (not asserted yet) */
        const ops_device *d = &m->device;
        printf("     device: pool used %lld, CUPTI sub-allocated %lld (allocated %lld); reserved: pool %lld, CUPTI %lld; "
               "in use %lld (context %lld); dropped records %lld\n", (long long)d->pool_used_peak, (long long)d->cupti_suballoc_peak,
               (long long)m->peak, (long long)d->pool_reserved_peak, (long long)d->cupti_reserved_peak, (long long)d->device_peak,
               (long long)d->context_bytes, (long long)d->dropped);
        if (d->dropped > 0) printf("FAIL %s %s: CUPTI dropped records\n", n->name, text), failures++; /* -1: CUPTI off */
    }
    harness_drop(&a), harness_drop(&b);
}

/* The backend with --alloc pool against its arena: the same schedule, so the same kernels on the same
 * values (up to cuDNN's atomics), and the same accounted peak. */
static void pool_vs_arena(const char *name, const char *text, const ops_table *cu)
{
    net n;
    err e;
    outcome a, b;
    if (net_load_named(&n, name, &e)) { printf("FAIL %s\n", e.msg); failures++; return; }
    if (harness_run_alloc(&n, text, 4, cu, SCHED_SGD, 2, true, &a, &e)) { printf("FAIL %s pool: %s\n", text, e.msg); failures++; net_free(&n); return; }
    if (harness_run_alloc(&n, text, 4, cu, SCHED_SGD, 2, false, &b, &e)) {
        printf("FAIL %s arena: %s\n", text, e.msg);
        failures++, harness_drop(&a), net_free(&n);
        return;
    }
    run_summary *m = &b.r.sum;
    run_compare(m, &n, b.r.grads, a.r.grads, b.r.loss[1], a.r.loss[1]);
    bool ok = m->grad_dev * m->grad_dev <= 1e-10 && !m->non_finite && m->loss_dev <= 1e-6 && a.r.sum.peak == m->peak;
    printf("%s %-14s %-26s arena against pool: nmse %.2e, second loss %+.1e, allocated %lld both\n", ok ? "ok  " : "FAIL", name, text,
           m->grad_dev * m->grad_dev, m->loss_dev, (long long)m->peak);
    failures += !ok;
    harness_drop(&a), harness_drop(&b), net_free(&n);
}

/* Each plan of net `name` (at an image x image input; 0: its own) with BatchNorm mode bn (NULL: the plan's). */
static void check_at(const char *name, int image, const char *bn, char **plans, int np, double tol, const ops_table *cpu,
                     const ops_table *cu)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (image && net_set_input(&n, image, image, &e))) { printf("FAIL %s\n", e.msg); failures++; return; }
    for (int i = 0; i < np; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s%s", plans[i], bn ? " bn=" : "", bn ? bn : "");
        compare(&n, text, cpu, cu, tol);
    }
    net_free(&n);
}

static void check(const char *name, const char *bn, char **plans, int np, double tol, const ops_table *cpu, const ops_table *cu)
{
    check_at(name, 0, bn, plans, np, tol, cpu, cu);
}

/* One encoding of a random map (images x n values, every 3rd zero, a -0.0) on both backends. */
static void codec_case(const ops_table *cu, enc_kind kind, int images, int64_t nx, int64_t ny, bool mask, const net_layer *pool)
{
    enc_mod mod = {.kind = kind == ENC_SIGN || kind == ENC_ARGMAX || kind == ENC_SPARSE ? ENC_MOD_GIST : ENC_MOD_DPR,
                   .format = kind, .density = 0.5};
    enc_shape sh = {images, nx, ny, kind == ENC_ARGMAX ? enc_argmax_bits(pool) : 0, mask};
    ops_codec m = {.kind = kind, .mod = &mod, .shape = sh};
    int64_t n = nx * ny * images, *arg = NULL;
    float *x = err_calloc((size_t)n, sizeof(float)), *back_cpu = err_calloc((size_t)n, 8), *back_cu = err_calloc((size_t)n, 8);
    uint64_t r = 12345;
    for (int64_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        double u = (double)(r >> 11) / 9007199254740992.0;
        x[i] = i % 3 == 0 ? 0.0f : (float)((u - 0.4) * (i % 7 == 0 ? 900.0 : 3.0));
    }
    x[1] = -0.0f;
    const void *src = x;
    if (kind == ENC_ARGMAX) { /* places inside each window of a pool over a (rows*s) x (w*s) input */
        m.win = pool->win, m.c = pool->c, m.w = pool->w, m.in_w = (pool->w - 1) * pool->win.s + pool->win.k, m.row0 = 0;
        int rows = (int)(ny / pool->c);
        arg = err_calloc((size_t)n, sizeof(int64_t));
        for (int64_t i = 0; i < n; i++) { /* an unpadded window: every place is inside the input */
            int64_t v = i % (nx * ny), rr = (v / m.w) % rows, ow = v % m.w, place = (i * 7) % (pool->win.k * pool->win.k);
            arg[i] = (rr * m.win.s + place / m.win.k) * m.in_w + ow * m.win.s + place % m.win.k;
        }
        src = arg;
    }
    int64_t elem = kind == ENC_ARGMAX ? 8 : 4, bytes_cpu = ops_cpu.encode(&m, src, NULL, NULL);
    uint8_t *enc_cpu = err_calloc((size_t)bytes_cpu + 1, 1), *enc_cu = err_calloc((size_t)bytes_cpu + 1, 1);
    ops_cpu.encode(&m, src, enc_cpu, NULL);
    void *dx = cu->mem->get(n * elem, false, false), *denc = cu->mem->get(bytes_cpu + 1, false, false);
    void *dback = cu->mem->get(n * elem, false, false);
    cu->upload(dx, src, n * elem);
    int64_t bytes_cu = cu->encode(&m, dx, NULL, NULL);
    bool ok = bytes_cu == bytes_cpu;
    if (ok) {
        cu->encode(&m, dx, denc, NULL);
        cu->download(enc_cu, denc, bytes_cu);
        ok = !memcmp(enc_cu, enc_cpu, (size_t)bytes_cpu);
        ops_cpu.decode(&m, enc_cpu, back_cpu);
        cu->decode(&m, denc, dback);
        cu->download(back_cu, dback, n * elem);
        ok = ok && !memcmp(back_cu, back_cpu, (size_t)(n * elem));
    }
    printf("%s codec %-7s %d x %lld x %lld%s: %lld bytes (cpu %lld), %s\n", ok ? "ok  " : "FAIL", enc_name(kind), images,
           (long long)nx, (long long)ny, mask ? " +mask" : "", (long long)bytes_cu, (long long)bytes_cpu,
           ok ? "same bytes, same values back" : "differs");
    failures += !ok;
    cu->mem->put(dx, false), cu->mem->put(denc, false), cu->mem->put(dback, false);
    free(x), free(arg), free(back_cpu), free(back_cu), free(enc_cpu), free(enc_cu);
}

static void codecs(const ops_table *cu)
{
    net_layer pool = {.kind = NET_MAXPOOL, .win = {3, 2, 0, 1}, .c = 5, .w = 9};
    enc_kind kinds[] = {ENC_SIGN, ENC_SPARSE, ENC_FP16, ENC_BF16, ENC_FP8};
    for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
        codec_case(cu, kinds[k], 3, 37, 45, false, NULL);
        codec_case(cu, kinds[k], 2, 1031, 7, false, NULL); /* images longer than a tile */
    }
    codec_case(cu, ENC_FP16, 3, 37, 45, true, NULL);
    codec_case(cu, ENC_FP8, 2, 13, 11, true, NULL);
    codec_case(cu, ENC_ARGMAX, 3, 9, 5 * 4, false, &pool);
}

int main(int argc, char **argv)
{
    err e;
    if (argc == 2 && !strcmp(argv[1], "--codecs-on-cpu")) { /* the codec harness against itself, no GPU needed */
        codecs(&ops_cpu);
        return failures != 0;
    }
    /* --no-cupti: CUPTI off, as compute-sanitizer needs (it subscribes to CUPTI itself) */
    bool profile = !(argc >= 2 && !strcmp(argv[1], "--no-cupti"));
    if (!profile) argc--, argv++;
    bool self = argc == 2 && !strcmp(argv[1], "--self"); /* every case with the CPU on both sides: the harness */
    const ops_table *cu = self ? &ops_cpu : ops_find("cuda", profile, &e), *cpu = &ops_cpu;
    if (!cu && strncmp(e.msg, "no CUDA device", 14)) { /* a GPU this build cannot serve: a failure, not a skip */
        printf("FAIL: %s\n", e.msg);
        return 1;
    }
    if (!cu) {
        printf("skipped: %s\n", e.msg);
        return SKIP;
    }
    char desc[256] = "the CPU engine on both sides (--self)";
    if (!self) ops_cuda_describe(desc, sizeof desc);
    printf("%s\n", desc);
    if (self) argc = 1;
    if (argc >= 3) {
        check(argv[1], NULL, argv + 2, argc - 2, 1e-6, cpu, cu);
    } else {
        char *plans[] = {"layer", "2ps:4", "overl:4", "ckpt-sqrt", "vdnn-all"};
        check("kernels", NULL, plans, 1, 1e-7, cpu, cu);
        check("vgg-small", NULL, plans, 5, 1e-6, cpu, cu);
        check("kernels", NULL, plans + 1, 4, 1e-6, cpu, cu); /* stride 2, dilation, 7x7 and 5x5 in bands */
        check("resnet-small", "frozen", plans, 5, 1e-6, cpu, cu);
        check("resnet-small", "train", plans, 5, 1e-6, cpu, cu); /* whole-map statistics over the bands */
        check("resnet-small", "train-offload", plans + 1, 2, 1e-6, cpu, cu);   /* ... the stages' maps on the host */
        check("resnet-small", "train-rebuild", plans + 1, 2, 1e-6, cpu, cu);   /* ... rebuilt in the backward */
        check("resnet-small", "train-recompute", plans + 1, 2, 1e-6, cpu, cu); /* ... in passes */
        check("resnet-small", "per-band", plans + 1, 2, 1e-6, cpu, cu); /* each band's own statistics */
        check("stem-small", "train-rebuild", plans + 1, 2, 1e-6, cpu, cu); /* a max pool's argmax rebuilt under OverL */
        check_at("resnet-small", 35, "train", plans, 3, 1e-6, cpu, cu); /* odd rows; the downsample reads 17 of 18 */
        check_at("resnet-small", 35, "frozen", plans + 1, 2, 1e-6, cpu, cu);
        check("kinds", NULL, plans, 5, 1e-6, cpu, cu); /* activations, dropout, groups */
        check("updown", NULL, plans, 5, 1e-6, cpu, cu); /* upsampling, skips across heights */
        check("unet-small", NULL, plans, 5, 1e-6, cpu, cu); /* concatenated skips */
        check("squeeze-small", NULL, plans, 5, 1e-6, cpu, cu); /* ceil-mode max pooling: windows past the map's end */
        check("shuffle-small", "train", plans, 5, 1e-6, cpu, cu); /* channel slices and shuffles */
        codecs(cu);
        char *encoded[] = {"layer+gist", "2ps:4+gist+dpr:bf16", "ckpt-sqrt+dpr:fp8", "vdnn-all+gist:binarize"};
        check("vgg-small", NULL, encoded, 4, 1e-6, cpu, cu);
        check("resnet-small", "frozen", encoded, 2, 1e-6, cpu, cu);
        pool_vs_arena("vgg-small", "2ps:4", cu), pool_vs_arena("resnet-small", "vdnn-all", cu);
        pool_vs_arena("vgg-small", "2ps:2+migrate", cu), pool_vs_arena("vgg-small", "overl:2+gist", cu);
        net n;
        outcome o;
        if (!self && !net_load_named(&n, "vgg-small", &e)) { /* ZFP is refused on CUDA, in one line */
            err why = {{0}};
            bool refused = run_one(&n, "layer+zfp:rate=8", cu, &o, &why) != 0;
            if (!refused) harness_drop(&o);
            printf("%s zfp refused on cuda, as it must be: %s\n", refused ? "ok  " : "FAIL", refused ? why.msg : "it ran");
            failures += !refused;
            net_free(&n);
        }
    }
    if (!self) ops_cuda_close(); /* nothing left for compute-sanitizer's leak check */
    printf("%s\n", failures ? "FAILED" : self ? "the harness holds with the CPU on both sides" : "CUDA matches the CPU engine");
    return failures != 0;
}
