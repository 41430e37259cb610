/* CPU engine speed, measured against peers in the same run (figures, not assertions):
 *   1. every VGG-16 and ResNet-50 convolution at 224x224 (batch 2; each shape once): forward and
 *      backward GFLOP/s against OpenBLAS sgemm on the matrix products of the conv's own shapes,
 *      timed in turn with it, best of 5 rounds: the
 *      forward's (M = C_out, N = H*W, K = C_in*k*k), and the backward's two, the filter's (an
 *      output of C_out x K) and the data's, or the filter's alone for a layer that reads the net's
 *      input (goal: >= 85% of sgemm for every layer, both ways);
 *   2. one training iteration (layer plan, SGD, the batch given) of VGG-16 and ResNet-50 at 224x224:
 *      time and peak, and where the time goes (the heaviest layers, forward + backward).
 *   3. `alloc`: the arena against the pool (engine/exec.h: --alloc arena|pool) in the same process,
 *      runs alternating so that neither gets the warmer machine: the median iteration of each,
 *      their ratio and the range of the pairs' ratios (the noise), and the best iteration of each
 *      (the least disturbed), on plans with few large buffers (layer) and many small ones (2ps:8).
 * The PyTorch peer of 2 is bench/torch_peer.py (./lrcnn bench runs both). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/resource.h>

#include <cblas.h>

#include "io/data.h"
#include "io/machine.h"
#include "sim/net/load.h"
#include "sim/net/kind.h"
#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "engine/cpu/ops_cpu.h"
#include "engine/run.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The process's RSS high-water mark so far, MiB (Linux reports ru_maxrss in KiB). */
static double rss_high_water(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_maxrss / 1024.0;
}

static float *rnd(int64_t n)
{
    float *p = aligned_alloc(64, ((size_t)n * 4 + 63) / 64 * 64);
    for (int64_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    return p;
}

/* Seconds that stmt takes, once. */
#define TIMED(stmt)              \
    ({                           \
        double t0_ = now();      \
        stmt;                    \
        now() - t0_;             \
    })

/* Is conv L of n the same problem as an earlier conv of n (shape, window, and whether it reads
 * the net's input, which takes no data gradient)? ResNet-50's 53 convolutions are 20 shapes. */
static bool conv_seen(const net *n, int L)
{
    const net_layer *l = &n->layers[L], *in = &n->layers[l->in[0]];
    for (int j = 1; j < L; j++) {
        const net_layer *m = &n->layers[j], *jn = &n->layers[m->in[0]];
        if (m->kind == NET_CONV && m->c == l->c && m->h == l->h && m->w == l->w && jn->c == in->c && jn->h == in->h &&
            jn->w == in->w && !memcmp(&m->win, &l->win, sizeof l->win) && !memcmp(&m->win_w, &l->win_w, sizeof l->win_w) &&
            m->u.conv.groups == l->u.conv.groups && m->u.conv.bias == l->u.conv.bias && (jn->kind == NET_INPUT) == (in->kind == NET_INPUT))
            return true;
    }
    return false;
}

/* One line of the table: conv L of n at `batch` against sgemm on its own products, ROUNDS rounds
 * each timing all four once (so that a slow spell of the machine falls on all of them), best of
 * each. */
static void conv_line(const net *n, int L, int batch)
{
    enum { ROUNDS = 5 };
    const net_layer *l = &n->layers[L];
    const net_layer *in = &n->layers[l->in[0]];
    int M = l->c, N = l->h * l->w, K = in->c * l->win.k * l->win_w.k;
    float *x = rnd((int64_t)batch * in->c * in->h * in->w), *y = rnd((int64_t)batch * l->c * l->h * l->w);
    float *dx = rnd((int64_t)batch * in->c * in->h * in->w), *dy = rnd((int64_t)batch * l->c * l->h * l->w);
    int64_t ws_bytes = sched_workspace_bytes(n, L, l->h, batch);
    float *w = rnd(l->params), *dw = rnd(l->params), *ws = rnd(ws_bytes / 4 + 1);
    float *A = rnd((int64_t)M * K), *B = rnd((int64_t)K * N), *C = rnd((int64_t)M * N);
    int products = 2; /* backward: the filter's and the data's; a layer reading the net's input has no dx (sim/lower) */
    if (in->kind == NET_INPUT) products = 1;
    ops_call c = {.l = l, .in_h = {in->h}, .a = 0, .b = l->h, .w = w, .dw = dw, .ws = ws, .ws_bytes = ws_bytes};
    c.x[0] = (ten){x, batch, in->c, in->h, in->w, 0};
    c.y = (ten){y, batch, l->c, l->h, l->w, 0};
    if (products == 2) c.dx[0] = (ten){dx, batch, in->c, in->h, in->w, 0};
    c.dy = (ten){dy, batch, l->c, l->h, l->w, 0};
    double t_gemm = 1e30, t_gemm_bwd = 1e30, t_fwd = 1e30, t_bwd = 1e30, t;
    for (int r = 0; r < ROUNDS; r++) {
        t = TIMED(for (int b = 0; b < batch; b++)
                      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N));
        t_gemm = t < t_gemm ? t : t_gemm;
        /* the backward's own products: dw (M, K) += dy (M, N) x col^T, col (K, N) = w^T x dy */
        t = TIMED(for (int b = 0; b < batch; b++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, N, 1.0f, C, N, B, N, 1.0f, A, K);
            if (products == 2) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, N, M, 1.0f, A, K, C, N, 0.0f, B, N);
        });
        t_gemm_bwd = t < t_gemm_bwd ? t : t_gemm_bwd;
        t = TIMED(ops_cpu.forward(&c)), t_fwd = t < t_fwd ? t : t_fwd;
        t = TIMED(ops_cpu.backward(&c)), t_bwd = t < t_bwd ? t : t_bwd;
    }
    double flops = 2.0 * (double)l->macs * batch;
    char hw[16], win[16];
    snprintf(hw, sizeof hw, "%dx%d", l->h, l->w);
    snprintf(win, sizeof win, "%dx%d/%d", l->win.k, l->win_w.k, l->win.s);
    printf("  %-22s %5d %5d %-7s %-7s %7.1f  %7.1f  %7.1f  %7.1f  %5.0f%% %5.0f%% %5.0f%%\n", l->name, in->c, l->c, win, hw,
           flops / t_gemm / 1e9, products * flops / t_gemm_bwd / 1e9, flops / t_fwd / 1e9, products * flops / t_bwd / 1e9,
           100 * t_gemm / t_fwd, 100 * t_gemm_bwd / t_bwd, 100 * products * t_gemm / t_bwd);
    free(x), free(y), free(dx), free(dy), free(w), free(dw), free(ws), free(A), free(B), free(C);
}

static void conv_table(const net *n, const char *title, int batch)
{
    printf("%s convolutions at %dx%d, batch %d (each shape once): GFLOP/s, and as a fraction of sgemm of the same shape\n\n",
           title, n->layers[0].h, n->layers[0].w, batch);
    printf("  %-22s %5s %5s %-7s %-7s %8s %8s %8s %8s  %6s %6s %6s\n", "layer", "C_in", "C_out", "k/s", "out", "sgemm", "sgemm'",
           "fwd", "bwd", "fwd%", "bwd%", "bwd%'");
    for (int L = 1; L < n->n; L++)
        if (n->layers[L].kind == NET_CONV && !conv_seen(n, L)) conv_line(n, L, batch);
    printf("\n");
}

static void conv_notes(void)
{
    printf("  sgemm: OpenBLAS on the forward's product (C_out x K times K x H*W); sgemm': on the backward's own\n"
           "  two (the filter's, dy x col^T, whose output is only C_out x K, and the data's, w^T x dy), or the\n"
           "  filter's alone where the layer reads the net's input, which takes no gradient. fwd%% and bwd%%:\n"
           "  our time against sgemm's on those shapes; bwd%%': the backward against the forward's shape, once\n"
           "  a product (the table's only measure before 2026-11-29). Best of 5 rounds, each timing the four\n"
           "  once, in turn (before 2026-11-30: best of 3 of each in a row, which a slow spell of a VM could\n"
           "  fall on one of). A stride-1 layer on a wide map (16 places a row per junk place: 32 for 3x3)\n"
           "  runs its forward as one product per tap over its input rows copied once\n"
           "  (engine/cpu/conv_shift.c, since 2026-12-01): it reads no K x H*W matrix from memory, as the\n"
           "  sgemm here does, so its fwd%% may pass 100%%.\n\n");
}

/* The per-layer times of the best timed iteration so far (run.h: on_iter), so that the breakdown
 * and the headline describe the same iteration: the last one's, which the breakdown showed before,
 * came to 118-142% of the best one's on a VM whose speed moves within the run. */
typedef struct {
    int first, end; /* the timed iterations (run_timed) */
    double best, *layer_us; /* [2 * layers] */
} best_iter;

static void keep_best(const run *r, int it, void *ctx)
{
    best_iter *b = ctx;
    if (it < b->first || it >= b->end || r->iter_us[it] >= b->best) return;
    b->best = r->iter_us[it];
    memcpy(b->layer_us, r->x.layer_us, (size_t)r->x.n->n * 2 * sizeof(double));
}

static void iteration(const char *name, int batch, int iters)
{
    double rss0 = rss_high_water();
    net n;
    err e;
    plan p;
    run r;
    if (net_load_named(&n, name, &e) || plan_parse(&p, &n, "layer", &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    data d;
    data_synthetic_for(&d, &n, 1);
    best_iter b = {0, 0, INFINITY, err_calloc((size_t)n.n * 2, sizeof(double))};
    run_timed(iters, false, &b.first, &b.end); /* the CPU profiles no iteration apart */
    run_cfg c = {.n = &n, .p = &p, .sched = {.batch = batch, .optimizer = SCHED_SGD}, .ops = &ops_cpu,
                 .hp = exec_default_hparams(SCHED_SGD), .seed = 1, .iters = iters, .batches = data_batches(&d),
                 .on_iter = keep_best, .ctx = &b};
    if (run_plan(&r, &c, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    CHECK(b.best == r.sum.best_us); /* the breakdown's iteration is the headline's */
    double best = r.sum.best_us / 1e6, *us = b.layer_us; /* the first iteration also allocates the parameters */
    double total = 0;
    for (int L = 0; L < n.n; L++) total += us[2 * L] + us[2 * L + 1];
    printf("%s, batch %d, layer plan, SGD: %.3f s per iteration (best of %d), peak %.1f MiB, kernels %.0f%% of it\n", name, batch,
           best, iters - 1, (double)r.sum.peak / 1048576.0, 100.0 * total / 1e6 / best);
    printf("  by kind (forward + backward, the best iteration's):");
    for (int k = 0; k < NET_NKIND; k++) {
        double t = 0;
        for (int L = 0; L < n.n; L++)
            if (n.layers[L].kind == (net_kind)k && us[2 * L] > 0) t += us[2 * L] + us[2 * L + 1];
        if (t > 0) printf(" %s %.0f ms", kind_name((net_kind)k), t / 1e3);
    }
    printf("\n");
    printf("  heaviest layers (forward + backward, that iteration):");
    for (int k = 0; k < 5; k++) {
        int arg = -1;
        for (int L = 0; L < n.n; L++)
            if (us[2 * L] + us[2 * L + 1] >= 0 && (arg < 0 || us[2 * L] + us[2 * L + 1] > us[2 * arg] + us[2 * arg + 1])) arg = L;
        printf(" %s %.0f+%.0f ms%s", n.layers[arg].name, us[2 * arg] / 1e3, us[2 * arg + 1] / 1e3, k < 4 ? "," : "\n");
        us[2 * arg] = us[2 * arg + 1] = -1e30;
    }
    double rss = rss_high_water();
    printf("  process RSS high-water %.0f MiB, %.0f MiB above the process before the net\n", rss, rss - rss0);
    printf("BENCH %s %.6f %.1f %.1f\n", name, best, (double)r.sum.peak / 1048576.0, rss - rss0);
    free(b.layer_us);
    run_free(&r);
    data_free(&d);
    plan_free(&p);
    net_free(&n);
}

/* The median after the first of `iters` iterations of `text` on net n, arena or pool; the best in *best. */
static double alloc_run(const net *n, const char *text, int batch, int iters, bool pool, double *best)
{
    err e;
    plan p;
    run r;
    data d;
    if (plan_parse(&p, n, text, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    data_synthetic_for(&d, n, 1);
    run_cfg c = {.n = n, .p = &p, .sched = {.batch = batch, .optimizer = SCHED_SGD}, .ops = &ops_cpu,
                 .hp = exec_default_hparams(SCHED_SGD), .seed = 1, .iters = iters, .batches = data_batches(&d), .pool = pool};
    if (run_plan(&r, &c, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    double med = r.sum.median_us;
    *best = r.sum.best_us;
    run_free(&r);
    data_free(&d);
    plan_free(&p);
    return med;
}

static void alloc_compare(const char *name, int image, int batch, const char *text)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (image && net_set_input(&n, image, image, &e))) {
        fprintf(stderr, "%s\n", e.msg);
        exit(1);
    }
    enum { RUNS = 5 };
    double pool[RUNS], arena[RUNS], ratio[RUNS], best_p = 1e300, best_a = 1e300, b;
    for (int k = 0; k < RUNS; k++) {
        pool[k] = alloc_run(&n, text, batch, 5, true, &b), best_p = b < best_p ? b : best_p;
        arena[k] = alloc_run(&n, text, batch, 5, false, &b), best_a = b < best_a ? b : best_a;
        ratio[k] = arena[k] / pool[k];
    }
    double p = run_median(pool, RUNS), a = run_median(arena, RUNS), lo = ratio[0], hi = ratio[0];
    for (int k = 1; k < RUNS; k++) lo = ratio[k] < lo ? ratio[k] : lo, hi = ratio[k] > hi ? ratio[k] : hi;
    printf("  %-9s %3dx%-3d batch %d %-6s median: pool %7.1f ms, arena %7.1f ms, %.3fx (pairs %.2f..%.2f); best: %7.1f, %7.1f ms, %.3fx\n",
           name, n.layers[0].h, n.layers[0].w, batch, text, p / 1e3, a / 1e3, a / p, lo, hi, best_p / 1e3, best_a / 1e3, best_a / best_p);
    printf("ALLOC %s %s %.6f %.6f %.6f %.6f\n", name, text, p / 1e6, a / 1e6, best_p / 1e6, best_a / 1e6);
    net_free(&n);
}

/* Usage: lrcnn_bench_engine [BATCH [NET|convs|alloc]...]: with no nets, the conv table, VGG-16 and
 * ResNet-50; otherwise only what is named (`convs`: the conv table). ./lrcnn bench runs each net in
 * its own process, so each RSS high-water mark is that net's alone. */
int main(int argc, char **argv)
{
    engine_env_reexec(argv); /* OpenMP's wait and OpenBLAS's kernel, as lrcnn runs them */
    int batch = argc > 1 ? atoi(argv[1]) : 2;
    printf("%s, %d threads (%s); idle threads: %s\n\n", blas_cpu_describe(), openblas_get_num_threads(), openblas_get_config(),
           machine_wait_policy());
    const char *all[] = {"convs", "vgg16", "resnet50"};
    int count = argc > 2 ? argc - 2 : 3;
    for (int i = 0; i < count; i++) {
        const char *what = argc > 2 ? argv[i + 2] : all[i];
        if (strcmp(what, "convs") == 0) {
            static const char *const nets[][2] = {{"vgg16", "VGG-16"}, {"resnet50", "ResNet-50"}};
            for (int k = 0; k < 2; k++) {
                net n;
                err e;
                if (net_load_named(&n, nets[k][0], &e)) return fprintf(stderr, "%s\n", e.msg), 1;
                conv_table(&n, nets[k][1], batch);
                net_free(&n);
            }
            conv_notes();
        } else if (strcmp(what, "alloc") == 0) {
            printf("The arena against the pool: median iteration after the first of 5, median of 5 alternating runs each\n\n");
            alloc_compare("vgg16", 112, batch, "layer"), alloc_compare("vgg16", 112, batch, "2ps:8");
            alloc_compare("resnet50", 112, batch, "layer"), alloc_compare("resnet50", 112, batch, "2ps:8");
            printf("\n");
        } else {
            iteration(what, batch, 4);
        }
    }
    return 0;
}
