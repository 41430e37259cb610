/* CUDA backend against the CPU engine (needs a GPU; exits 77, ctest's skip code, without one).
 *
 * For each net and plan: one SGD iteration from identical weights and data on both backends.
 *   - every parameter gradient: normalized MSE ||g_cuda - g_cpu||^2 / ||g_cpu||^2 <= 1e-7 on
 *     kernels.net (one layer of every kind, odd sizes, stride 2, dilation, padding 0) and <= 1e-6
 *     on the small VGG and ResNet (fp32 through a dozen layers, summed in different orders), with
 *     NaN and Inf counted separately (must be none); loss within 1e-5 relative;
 *   - the allocated peak equals the replay of the CUDA schedule (lowered with cuDNN's workspace
 *     sizes), per category, byte for byte.
 * Usage: test_cuda [NET PLAN...] (default: kernels, vgg-small and resnet-small under layer,
 * 2ps:4, overl:4, ckpt-sqrt and vdnn-all). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/data.h"
#include "engine/exec.h"
#include "engine/cuda/ops_cuda.h"
#include "sim/sim.h"

#define SKIP 77

typedef struct {
    float loss;
    float **g;
    int64_t *count;
    alloc_stats mem;
    sim_mem replay;
} outcome;

static outcome *capturing;

static void capture(exec *x, void *ctx)
{
    (void)ctx;
    for (int L = 0; L < x->n->n; L++) capturing->g[L] = exec_param_copy(x, BUF_PGRAD, L, &capturing->count[L]);
}

static int run(const net *n, const char *text, const ops_table *ops, outcome *o)
{
    err e;
    plan p;
    sched s;
    int batch = 4;
    sched_cfg cfg = {.batch = batch, .optimizer = SCHED_SGD, .ws = ops->ws};
    if (plan_parse(&p, n, text, &e) || sched_lower(&s, n, &p, &cfg, &e)) {
        printf("FAIL %s: %s\n", text, e.msg);
        return -1;
    }
    sim_replay(&s, &o->replay, NULL);
    const net_layer *in = &n->layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n->layers[n->n - 1].c, 7);
    float *img = calloc((size_t)batch * in->c * in->h * in->w, sizeof(float));
    int64_t *lab = calloc((size_t)batch, sizeof(int64_t));
    data_batch(&d, 0, batch, img, lab);
    exec x;
    exec_init(&x, n, &p, &s, ops, SCHED_SGD, exec_default_hparams(SCHED_SGD), 3);
    o->g = calloc((size_t)n->n, sizeof(float *)), o->count = calloc((size_t)n->n, sizeof(int64_t));
    capturing = o;
    x.before_update = capture;
    exec_iteration(&x, img, lab);
    o->loss = x.loss;
    o->mem = x.mem;
    o->mem.timeline = NULL;
    exec_free(&x);
    free(img), free(lab);
    sched_free(&s);
    plan_free(&p);
    return 0;
}

static int failures;

static void compare(const net *n, const char *text, const ops_table *cpu, const ops_table *cu, double tol)
{
    outcome a = {0}, b = {0};
    if (run(n, text, cpu, &a) || run(n, text, cu, &b)) { failures++; return; }
    double worst = 0;
    int worst_L = -1;
    long bad = 0;
    for (int L = 0; L < n->n; L++) {
        if (!a.g[L]) continue;
        double d2 = 0, r2 = 0;
        for (int64_t i = 0; i < a.count[L]; i++) {
            if (!isfinite(b.g[L][i])) { bad++; continue; }
            double d = (double)b.g[L][i] - a.g[L][i];
            d2 += d * d, r2 += (double)a.g[L][i] * a.g[L][i];
        }
        double nmse = r2 > 0 ? d2 / r2 : d2;
        if (nmse > worst) worst = nmse, worst_L = L;
    }
    bool mem = b.mem.peak == b.replay.peak;
    for (int k = 0; k < MEM_NCAT; k++) mem &= b.mem.at_peak[k] == b.replay.at_peak[k];
    double dloss = fabs((double)b.loss - a.loss) / fabs((double)a.loss);
    bool ok = worst <= tol && !bad && dloss <= 1e-5 && mem;
    printf("%s %-14s %-12s loss %+.1e  worst nmse %-18s %.2e  non-finite %ld  allocated %lld = replay %s\n", ok ? "ok  " : "FAIL", n->name,
           text, dloss, worst_L >= 0 ? n->layers[worst_L].name : "-", worst, bad, (long long)b.mem.peak, mem ? "yes" : "NO");
    failures += !ok;
    for (int L = 0; L < n->n; L++) free(a.g[L]), free(b.g[L]);
    free(a.g), free(a.count), free(b.g), free(b.count);
}

static void check(const char *name, const char *bn, char **plans, int np, double tol, const ops_table *cpu, const ops_table *cu)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e)) { printf("FAIL %s\n", e.msg); failures++; return; }
    for (int i = 0; i < np; i++) {
        char text[256];
        snprintf(text, sizeof text, "%s%s%s", plans[i], bn ? " bn=" : "", bn ? bn : "");
        compare(&n, text, cpu, cu, tol);
    }
    net_free(&n);
}

int main(int argc, char **argv)
{
    err e;
    const ops_table *cu = ops_find("cuda", &e), *cpu = &ops_cpu;
    if (!cu) {
        printf("skipped: %s\n", e.msg);
        return SKIP;
    }
    char desc[256];
    ops_cuda_describe(desc, sizeof desc);
    printf("%s\n", desc);
    if (argc >= 3) {
        check(argv[1], NULL, argv + 2, argc - 2, 1e-6, cpu, cu);
    } else {
        char *plans[] = {"layer", "2ps:4", "overl:4", "ckpt-sqrt", "vdnn-all"};
        check("kernels", NULL, plans, 1, 1e-7, cpu, cu);
        check("vgg-small", NULL, plans, 5, 1e-6, cpu, cu);
        check("resnet-small", "frozen", plans, 5, 1e-6, cpu, cu);
        check("resnet-small", "train", plans, 1, 1e-6, cpu, cu);
    }
    printf("%s\n", failures ? "FAILED" : "CUDA matches the CPU engine");
    return failures != 0;
}
