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
#include "engine/run.h"
#include "engine/cuda/ops_cuda.h"
#include "sim/sim.h"

#define SKIP 77

typedef struct {
    plan p;
    run r;
    sim_mem replay;
} outcome;

/* One SGD iteration (batch 4) of plan `text` on a backend, from seed 3's weights on synthetic
 * batch 0 (seed 7), gradients kept; the replay of the schedule it lowers with the backend's
 * workspace model. */
static int run_one(const net *n, const char *text, const ops_table *ops, outcome *o)
{
    err e;
    sched_cfg cfg = {.batch = 4, .optimizer = SCHED_SGD, .ws = ops->ws};
    if (plan_parse(&o->p, n, text, &e)) {
        printf("FAIL %s: %s\n", text, e.msg);
        return -1;
    }
    const net_layer *in = &n->layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n->layers[n->n - 1].c, 7);
    run_cfg c = {.n = n, .p = &o->p, .sched = cfg, .ops = ops, .hp = exec_default_hparams(SCHED_SGD), .seed = 3, .iters = 1,
                 .batches = data_batches(&d), .grads = true};
    if (run_plan(&o->r, &c, &e)) {
        printf("FAIL %s: %s\n", text, e.msg);
        plan_free(&o->p);
        return -1;
    }
    sim_replay(&o->r.s, &o->replay, NULL); /* the schedule the run executed */
    return 0;
}

static int failures;

static void compare(const net *n, const char *text, const ops_table *cpu, const ops_table *cu, double tol)
{
    outcome a, b;
    if (run_one(n, text, cpu, &a)) { failures++; return; }
    if (run_one(n, text, cu, &b)) { failures++; run_free(&a.r), plan_free(&a.p); return; }
    run_summary *m = &b.r.sum;
    run_compare(m, n, b.r.grads, a.r.grads, m->loss0, a.r.sum.loss0);
    double nmse = m->grad_dev * m->grad_dev; /* normalized MSE: the relative norm, squared */
    bool mem = m->peak == b.replay.peak;
    for (int k = 0; k < MEM_NCAT; k++) mem &= m->at_peak[k] == b.replay.at_peak[k];
    bool ok = nmse <= tol && !m->non_finite && m->loss_dev <= 1e-5 && mem;
    printf("%s %-14s %-12s loss %+.1e  worst nmse %-18s %.2e  non-finite %lld  allocated %lld = replay %s\n", ok ? "ok  " : "FAIL",
           n->name, text, m->loss_dev, m->worst[0] ? m->worst : "-", nmse, (long long)m->non_finite, (long long)m->peak,
           mem ? "yes" : "NO");
    failures += !ok;
    run_free(&a.r), plan_free(&a.p), run_free(&b.r), plan_free(&b.p);
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
