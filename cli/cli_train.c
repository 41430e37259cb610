/* lrcnn train: run the engine on a plan for K iterations and report what it measured beside what
 * the simulator predicted for the same schedule. Every input (net, plan, data, weights, output
 * paths) is checked before the first iteration, so a bad one stops the run with nothing written. */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/data.h"
#include "engine/exec.h"
#include "io/h5.h"
#include "io/weights.h"

static const char *usage =
    "usage: lrcnn train --net NET [--image S] [--batch N] [--plan P] [--iters K] [--optimizer sgd|adam]\n"
    "                   [--lr F] [--seed X] [--bn MODE] [--data DIR] [--init-weights W.h5] [--dump D.h5]\n"
    "                   [--host-budget BYTES] [--backend cpu|cuda] [-o RUN.h5] [--force]\n"
    "\n"
    "Trains NET with plan P on the engine (--backend: cpu, the default, or cuda on an NVIDIA GPU): real forward, backward and optimizer steps through an\n"
    "accounting allocator. Prints the loss, time and measured peak per iteration, then the measured peak\n"
    "by category beside the simulator's replay and closed-form predictions and the process's RSS high-water\n"
    "mark. Data: a deterministic synthetic dataset (default) or DIR/<class>/<image>.png|ppm.\n"
    "--init-weights loads parameters (weights.h layout); --dump writes the last iteration's input, labels,\n"
    "parameters before and after the step and all gradients; -o writes the run (results/SCHEMA.md).\n"
    "--host-budget: refuse a plan that would offload more than BYTES to host memory.\n"
    "Defaults: --batch 8 --plan layer --iters 10 --optimizer sgd (lr 0.01, momentum 0.9; adam: lr 1e-3) --seed 1.\n"
    "\n"
    "example: lrcnn train --net vgg-small --batch 16 --plan ckpt-sqrt --iters 50 -o /tmp/run.h5\n";

typedef struct {
    const net *n;
    int64_t count[256];
    float **before, **grads;
} dump_copy;

/* before_update hook: the parameters before the step and the iteration's gradients. */
static void take_copies(exec *x, void *ctx)
{
    dump_copy *d = ctx;
    for (int L = 0; L < x->n->n; L++) {
        float *p = exec_param_copy(x, BUF_PARAM, L, NULL);
        if (!p) continue;
        free(d->before[L]), free(d->grads[L]);
        d->before[L] = p, d->grads[L] = exec_param_copy(x, BUF_PGRAD, L, NULL);
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int64_t rss_peak_bytes(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (int64_t)u.ru_maxrss * 1024;
}

int cli_train(int argc, char **argv)
{
    cli_config o = {.plan = "layer", .batch = 8, .iters = 10, .seed = 1, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *dir = NULL, *init = NULL, *dump = NULL, *backend = "cpu", *v;
    double lr = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, "train", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        const char **strs[] = {&dir, &init, &dump, &backend};
        const char *names[] = {"--data", "--init-weights", "--dump", "--backend"};
        for (int k = 0; k < 4 && !got; k++)
            if ((got = cli_opt(argc, argv, &i, names[k], &v)) > 0) *strs[k] = v;
        if (got == 0 && (got = cli_opt(argc, argv, &i, "--lr", &v)) > 0) {
            char *end;
            lr = strtod(v, &end);
            if (*end || end == v || !(lr > 0)) return cli_fail("train", "--lr %s: expected a positive number", v);
        }
        if (got <= 0) return cli_unknown("train", argc, argv, i, got);
    }
    const char *net_name = o.net, *plan_text = o.plan, *bn = o.bn, *out = o.out;
    int image = o.image, iters = o.iters, force = o.force;
    long long seed = o.seed;
    int64_t host_budget = o.host_budget;
    if (!net_name) return cli_fail("train", "--net is required (e.g. --net vgg-small)");
    const char *outs[2] = {out, dump};
    for (int k = 0; k < 2; k++)
        if (outs[k] && !force && access(outs[k], F_OK) == 0)
            return cli_fail("train", "%s exists; use --force to overwrite", outs[k]);
    if (out && dump && !strcmp(out, dump)) return cli_fail("train", "-o and --dump name the same file");

    err e;
    net n;
    const ops_table *ops = ops_find(backend, &e);
    if (!ops) return cli_fail("train", "--backend %s: %s", backend, e.msg);
    sched_cfg cfg = {.batch = o.batch, .optimizer = o.optimizer, .ws = ops->ws};
    if (cli_load_net(&n, net_name, image, &e)) return cli_fail("train", "%s", e.msg);
    char text[320], resolved[1024];
    snprintf(text, sizeof text, "%s%s%s", plan_text, bn ? " bn=" : "", bn ? bn : "");
    plan p;
    sched s;
    sim_result pred;
    data d = {0};
    exec x;
    bool have_exec = false;
    int rc = CLI_OK;
    dump_copy dc = {.n = &n};
    if (plan_parse(&p, &n, text, &e)) {
        net_free(&n);
        return cli_fail("train", "%s", e.msg);
    }
    plan_describe(&p, &n, resolved, sizeof resolved);
    if (sched_lower(&s, &n, &p, &cfg, &e) || sim_run(&n, &p, &cfg, &sim_device_cpu, &pred, NULL, &e) ||
        cli_check_host(&pred, host_budget, text, &e)) {
        rc = cli_fail("train", "%s", e.msg);
        goto done_plan;
    }
    const net_layer *in = &n.layers[0];
    int classes = n.layers[n.n - 1].c;
    if (dir) {
        if (data_open_dir(&d, dir, in->c, in->h, in->w, classes, (uint64_t)seed, &e)) {
            rc = cli_fail("train", "%s", e.msg);
            goto done_sched;
        }
    } else {
        data_synthetic(&d, in->c, in->h, in->w, classes, (uint64_t)seed);
    }
    exec_hparams hp = exec_default_hparams(cfg.optimizer);
    if (lr > 0) hp.lr = lr;
    exec_init(&x, &n, &p, &s, ops, cfg.optimizer, hp, (uint64_t)seed);
    have_exec = true;
    if (init && weights_load(&x, init, &e)) {
        rc = cli_fail("train", "%s", e.msg);
        goto done_exec;
    }
    dc.before = err_calloc((size_t)n.n, sizeof(float *));
    dc.grads = err_calloc((size_t)n.n, sizeof(float *));
    float **run_before = err_calloc((size_t)n.n, sizeof(float *));

    int64_t img = (int64_t)cfg.batch * in->c * in->h * in->w;
    float *images = err_calloc((size_t)img, sizeof(float)), *loss = err_calloc((size_t)iters, sizeof(float));
    int64_t *labels = err_calloc((size_t)cfg.batch, sizeof(int64_t));
    double *iter_us = err_calloc((size_t)iters, sizeof(double));
    char a[32], b[32];
    printf("%s @ %dx%d, batch %d, %s (lr %g), plan %s\n  %s\n\n", n.name, in->h, in->w, cfg.batch,
           cli_optimizer_name(cfg.optimizer), hp.lr, text, resolved);
    printf("  %6s %12s %10s %14s\n", "iter", "loss", "time", "measured peak");
    int every = iters > 20 ? iters / 20 : 1;
    for (int it = 0; it < iters; it++) {
        data_batch(&d, it, cfg.batch, images, labels);
        bool last = it == iters - 1;
        if (dump && last) {
            exec_start(&x);
            x.before_update = take_copies, x.before_update_ctx = &dc;
            for (int L = 0; L < n.n; L++) run_before[L] = exec_param_copy(&x, BUF_RUNSTAT, L, NULL);
        }
        double t0 = now_us();
        exec_iteration(&x, images, labels);
        iter_us[it] = now_us() - t0;
        loss[it] = x.loss;
        if (it % every == 0 || last)
            printf("  %6d %12.6f %8.1f ms %14s\n", it, loss[it], iter_us[it] / 1e3, units_fmt_bytes(x.mem.peak, a, sizeof a));
        cli_progress("iterations", it + 1, iters);
    }
    int64_t rss = rss_peak_bytes();
    printf("\n  %-14s %14s %14s %14s\n", "category", "measured", "replay", "closed");
    for (int k = 0; k < MEM_NCAT; k++) {
        char c[32];
        printf("  %-14s %14s %14s %14s\n", mem_cat_name((mem_cat)k), units_fmt_bytes(x.mem.at_peak[k], a, sizeof a),
               units_fmt_bytes(pred.replay.at_peak[k], b, sizeof b), units_fmt_bytes(pred.closed.at_peak[k], c, sizeof c));
    }
    double err_replay = 100.0 * (double)(pred.replay.peak - x.mem.peak) / (double)x.mem.peak;
    double err_closed = 100.0 * (double)(pred.closed.peak - x.mem.peak) / (double)x.mem.peak;
    printf("  %-14s %14s %14s %14s\n", "peak", units_fmt_bytes(x.mem.peak, a, sizeof a), units_fmt_bytes(pred.replay.peak, b, sizeof b),
           units_fmt_bytes(pred.closed.peak, text, sizeof text));
    printf("  prediction error vs measured: replay %+.3f%%, closed form %+.2f%%; process RSS high-water %s\n", err_replay,
           err_closed, units_fmt_bytes(rss, a, sizeof a));
    if (out) {
        h5_file *f;
        h5_measure m = {.peak = x.mem.peak, .host_peak = x.mem.host_peak, .rss_peak = rss, .seed = (uint64_t)seed,
                        .data = dir ? dir : "synthetic", .backend = ops->backend, .loss = loss, .iter_us = iter_us, .n_iters = iters,
                        .timeline = x.mem.timeline, .n_timeline = x.mem.n_timeline, .layer_us = x.layer_us};
        memcpy(m.at_peak, x.mem.at_peak, sizeof m.at_peak);
        memcpy(m.max, x.mem.max, sizeof m.max);
        int fp = 0, bp = 0;
        for (int g = 0; g < p.n_seg && !fp; g++)
            if (p.segs[g].mode == PLAN_ROWS) fp = p.segs[g].fp, bp = p.segs[g].bp;
        h5_run run = {.kind = "train", .net = n.name, .net_path = n.path, .image_h = in->h, .image_w = in->w, .batch = cfg.batch,
                      .plan = plan_text, .plan_resolved = resolved, .optimizer = cli_optimizer_name(cfg.optimizer),
                      .bn = plan_bn_name(p.bn), .device = "cpu", .fp_bands = fp, .bp_bands = bp, .sim = &pred,
                      .layers = &n, .measured = &m};
        if (h5_create(&f, out, force, &e) || h5_write_run(f, &run, &e)) {
            rc = cli_fail("train", "%s", e.msg);
        } else if (h5_close(f, &e)) {
            rc = cli_fail("train", "%s", e.msg);
        } else {
            fprintf(stderr, "wrote %s\n", out);
        }
    }
    if (dump && rc == CLI_OK) {
        weights_dump_args da = {.plan = plan_text, .optimizer = cli_optimizer_name(cfg.optimizer), .bn = plan_bn_name(p.bn),
                                .iteration = iters - 1, .seed = seed, .input = images, .labels = labels,
                                .before = dc.before, .grads = dc.grads, .run_before = run_before};
        if (weights_dump(&x, dump, force, &da, &e)) rc = cli_fail("train", "%s", e.msg);
        else fprintf(stderr, "wrote %s\n", dump);
    }
    for (int L = 0; L < n.n; L++) free(dc.before[L]), free(dc.grads[L]), free(run_before[L]);
    free(dc.before), free(dc.grads), free(run_before);
    free(images), free(loss), free(labels), free(iter_us);
done_exec:
    if (have_exec) exec_free(&x);
    data_free(&d);
done_sched:
    sched_free(&s);
done_plan:
    plan_free(&p);
    net_free(&n);
    return rc;
}
