/* lrcnn train: run the engine on a plan for K iterations and report what it measured beside what
 * the simulator predicted for the same schedule. Every input (net, plan, data, weights, output
 * paths) is checked before the first iteration, so a bad one stops the run with nothing written.
 * cli_train_run is the run itself; specs with run = train call it once per plan. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/h5run.h"
#include "io/profile.h"
#include "io/outfile.h"
#include "io/data.h"
#include "engine/run.h"
#include "io/h5.h"
#include "io/spec.h"
#include "io/weights.h"

static const char *usage =
    "usage: lrcnn train --net NET [--image S|HxW] [--batch N] [--plan P] [--iters K] [--optimizer sgd|adam]\n"
    "                   [--lr F] [--seed X] [--bn MODE] [--data DIR] [--init-weights W.h5] [--dump D.h5]\n"
    "                   [--host-budget BYTES] [--backend cpu|cuda] [--no-cupti] [--calibrate RUNS.h5]\n"
    "                   [--profile PROFILE.h5] [--alloc arena|pool] [-o RUN.h5] [--force]\n"
    "\n"
    "Trains NET with plan P on the engine (--backend: cpu, the default, or cuda on an NVIDIA GPU): real forward, backward and optimizer steps through an\n"
    "accounting allocator. Prints the loss, time and measured peak per iteration, then the measured peak\n"
    "by category beside the simulator's replay and closed-form predictions and the process's RSS high-water\n"
    "mark. Data: a deterministic synthetic dataset (default) or DIR/<class>/<image>.png|ppm.\n"
    "--init-weights loads parameters (weights.h layout); --dump writes the last iteration's input, labels,\n"
    "parameters before and after the step and all gradients; -o writes the run (results/SCHEMA.md).\n"
    "--host-budget: refuse a plan that would offload more than BYTES to host memory.\n"
    "--alloc arena (the default): reserve the plan's arena once (lrcnn sim prints its size) and place every\n"
    "buffer at the plan's offset, each placement checked against the blocks still there; --alloc pool: take\n"
    "each block from the backend's allocator (the heap; on a GPU its stream-ordered pool) as the schedule asks.\n"
    "--backend cuda also reports the device's own view of the last iteration: the pool's reserved and\n"
    "used peaks, the bytes in use at every step's end, the context's bytes, and through CUPTI the\n"
    "reserved and sub-allocated peaks and kernel time per layer (--no-cupti: without CUPTI or sampling).\n"
    "CUPTI watches only the last iteration, which is then not among those timed (with more than two).\n"
    "--calibrate: predict sparse and zfp:acc encodings from the densities and ratios measured in RUNS.h5.\n"
    "--profile: predict the iteration time with the model lrcnn calibrate measured (printed beside the\n"
    "measured median; without it, the roofline of the cpu, or of an h100 for --backend cuda); on cuda with\n"
    "LRCNN_CUDNN_FIND=1, also take the cuDNN algorithm choices it stores instead of measuring them again.\n"
    "Defaults: --batch 8 --plan layer --iters 10 --optimizer sgd (lr 0.01, momentum 0.9; adam: lr 1e-3) --seed 1.\n"
    "A spec with `run = train` trains each of its configurations and plans the same way.\n"
    "\n"
    "example: lrcnn train --net vgg-small --batch 16 --plan ckpt-sqrt --iters 50 -o /tmp/run.h5\n";

/* The hooks' state: weights to load, the dump's copies, progress. */
typedef struct {
    const char *init;
    char header[4 * PLAN_TEXT_LEN];                     /* printed once the weights are in */
    bool dump, quiet;
    int iters, every;
    float **before, **grads, **run_before; /* [layers]: for the dump of the last iteration */
} train_ctx;

/* Host copies of every layer's buffer of `kind` (layer -1), or of one layer's. */
static void copy_layers(exec *x, buf_kind kind, int layer, float **to)
{
    for (int L = 0; L < x->n->n; L++)
        if (layer < 0 || L == layer) free(to[L]), to[L] = exec_param_copy(x, kind, L, NULL);
}

static void copy_all(exec *x, buf_kind kind, float **to) { copy_layers(x, kind, -1, to); }

static int on_start(exec *x, void *ctx, err *e)
{
    train_ctx *t = ctx;
    if (t->init && weights_load(x, t->init, e)) return -1;
    if (t->dump && t->iters == 1) copy_all(x, BUF_RUNSTAT, t->run_before);
    if (!t->quiet) printf("%s", t->header);
    return 0;
}

/* The last iteration's parameters before the step and its gradients, for the dump. */
static void before_update(exec *x, int iter, int layer, void *ctx)
{
    train_ctx *t = ctx;
    if (!t->dump || iter != t->iters - 1) return;
    copy_layers(x, BUF_PARAM, layer, t->before);
    copy_layers(x, BUF_PGRAD, layer, t->grads);
}

static void on_iter(const run *r, int it, void *ctx)
{
    train_ctx *t = ctx;
    char a[32];
    if (t->dump && it == t->iters - 2) copy_all((exec *)&r->x, BUF_RUNSTAT, t->run_before); /* before the last */
    if (t->quiet) return;
    if (it % t->every == 0 || it == t->iters - 1)
        printf("  %6d %12.6f %8.1f ms %14s\n", it, r->loss[it], r->iter_us[it] / 1e3, units_fmt_bytes(r->x.mem.peak, a, sizeof a));
    cli_progress("iterations", it + 1, t->iters);
}

/* Measured beside both predictions, by category. */
static void print_table(const run_summary *m, const sim_result *pred)
{
    char a[32], b[32], c[32], d[32];
    printf("\n  %-14s %14s %14s %14s\n", "category", "measured", "replay", "closed");
    for (int k = 0; k < MEM_NCAT; k++)
        printf("  %-14s %14s %14s %14s\n", mem_cat_name((mem_cat)k), units_fmt_bytes(m->at_peak[k], a, sizeof a),
               units_fmt_bytes(pred->replay.at_peak[k], b, sizeof b), cli_fmt_closed(pred, k, c, sizeof c));
    double err_replay = 100.0 * (double)(pred->replay.peak - m->peak) / (double)m->peak;
    printf("  %-14s %14s %14s %14s\n", "peak", units_fmt_bytes(m->peak, a, sizeof a), units_fmt_bytes(pred->replay.peak, b, sizeof b),
           cli_fmt_closed(pred, -1, c, sizeof c));
    printf("  prediction error vs measured: replay %+.3f%%, closed form %s; process RSS high-water %s\n", err_replay,
           cli_fmt_closed_err(pred, m->peak, "%+.2f%%", d, sizeof d), units_fmt_bytes(m->rss_peak, a, sizeof a));
}

/* What the device itself saw (backends that watch it: cuda), beside the accounting's peak. */
static void print_device(const run_summary *m)
{
    const ops_device *d = &m->device;
    char a[32], b[32], c[32], x[32];
    printf("  device %s (compute capability %s; driver %s, runtime %s, cuDNN %s, cuBLAS %s)\n", d->name, d->capability, d->driver,
           d->runtime, d->dnn, d->blas);
    if (d->conv_policy[0]) printf("  convolutions: %s\n", d->conv_policy);
    printf("  pool: used peak %s (allocated %s), reserved peak %s; context and libraries %s\n",
           units_fmt_bytes(d->pool_used_peak, a, sizeof a), units_fmt_bytes(m->peak, b, sizeof b),
           units_fmt_bytes(d->pool_reserved_peak, c, sizeof c), units_fmt_bytes(d->context_bytes, x, sizeof x));
    printf("  beside the pool: %s (cuBLAS's workspace, the engine's scratch); pinned host arena %s%s\n",
           units_fmt_bytes(d->outside_pool, a, sizeof a), units_fmt_bytes(d->host_arena, b, sizeof b),
           d->host_outside ? " (and pinned apart, past it: see measured/device/host_outside)" : "");
    if (!d->profiled) return;
    printf("  in use at step ends: peak %s; CUPTI: reserved peak %s, sub-allocated peak %s, kernels %.1f ms%s\n",
           units_fmt_bytes(d->device_peak, a, sizeof a), units_fmt_bytes(d->cupti_reserved_peak, b, sizeof b),
           units_fmt_bytes(d->cupti_suballoc_peak, c, sizeof c), d->kernel_us / 1e3,
           d->dropped ? " (records were dropped: these figures are not valid)" : "");
}

/* The last iteration's batch, parameters and gradients into j->dump (io/weights.h). */
static int write_dump(const cli_train_job *j, run *r, const plan *p, const data *d, const train_ctx *t, err *e)
{
    const net_layer *in = &j->n->layers[0];
    int64_t img = (int64_t)j->cfg.batch * in->c * in->h * in->w;
    float *images = err_calloc((size_t)img, sizeof(float));
    int64_t *labels = err_calloc((size_t)(j->cfg.batch * net_labels_per_image(j->n)), sizeof(int64_t));
    data_batch(d, j->iters - 1, j->cfg.batch, images, labels); /* the last iteration's batch again */
    char bn[PLAN_BN_TEXT_LEN];
    weights_dump_args da = {.plan = j->plan, .optimizer = cli_optimizer_name(j->cfg.optimizer), .bn = plan_bn_text(p, bn, sizeof bn),
                            .iteration = j->iters - 1, .seed = (long long)j->seed, .input = images, .labels = labels,
                            .before = t->before, .grads = t->grads, .run_before = t->run_before};
    int rc = weights_dump(&r->x, j->dump, j->force, &da, e);
    free(images), free(labels);
    return rc;
}

int cli_train_run(const cli_train_job *j, h5_file *f, err *e)
{
    const net *n = j->n;
    sched_cfg cfg = {.batch = j->cfg.batch, .optimizer = j->cfg.optimizer, .ws = j->ops->ws, .calib = j->cfg.calib};
    char text[PLAN_TEXT_LEN + 64], resolved[2 * PLAN_TEXT_LEN];
    cli_plan_text(j->plan, j->bn, text, sizeof text);
    plan p;
    sim_result pred;
    data d = {0};
    run r;
    int rc = CLI_OK;
    const sim_device *dev = j->dev ? j->dev : &sim_device_cpu;
    if (cli_plan_parse(&p, n, j->plan, j->bn, &cfg, dev, e)) return CLI_USAGE;
    cli_warn_plan(&p, n);
    plan_describe(&p, n, resolved, sizeof resolved);
    if (sim_run(n, &p, &cfg, dev, &pred, NULL, e) || cli_check_memory(&pred, j->host_budget, j->ops == &ops_cpu, text, e)) {
        rc = CLI_USAGE;
        goto done_plan;
    }
    const net_layer *in = &n->layers[0], *loss = &n->layers[n->n - 1];
    if (j->data_dir && net_labels_per_image(n) > 1) {
        err_set(e, "--data %s: a directory of images holds a class an image, but %s's loss '%s' is per pixel (a label for each of "
                   "its %dx%d places); train it on the synthetic data", j->data_dir, n->name, loss->name, loss->h, loss->w);
        rc = CLI_USAGE;
        goto done_plan;
    }
    if (j->data_dir ? data_open_dir(&d, j->data_dir, in->c, in->h, in->w, loss->c, j->seed, e) : (data_synthetic_for(&d, n, j->seed), 0)) {
        rc = CLI_USAGE;
        goto done_plan;
    }
    exec_hparams hp = exec_default_hparams(cfg.optimizer);
    if (j->lr > 0) hp.lr = j->lr;
    train_ctx t = {.init = j->init, .dump = j->dump != NULL, .quiet = j->quiet, .iters = j->iters,
                   .every = j->iters > 20 ? j->iters / 20 : 1, .before = err_calloc((size_t)n->n, sizeof(float *)),
                   .grads = err_calloc((size_t)n->n, sizeof(float *)), .run_before = err_calloc((size_t)n->n, sizeof(float *))};
    run_cfg rcfg = {.n = n, .p = &p, .sched = cfg, .ops = j->ops, .hp = hp, .seed = j->seed, .iters = j->iters,
                    .batches = data_batches(&d), .on_start = on_start, .on_iter = on_iter, .before_update = before_update,
                    .ctx = &t, .pool = j->pool};
    snprintf(t.header, sizeof t.header, "%s @ %dx%d, batch %d, %s (lr %g), plan %s\n  %s\n\n  %6s %12s %10s %14s\n", n->name,
             in->h, in->w, cfg.batch, cli_optimizer_name(cfg.optimizer), hp.lr, text, resolved, "iter", "loss", "time",
             "measured peak");
    if (run_plan(&r, &rcfg, e)) {
        rc = CLI_USAGE;
        goto done_ctx;
    }
    if (!j->quiet) {
        print_table(&r.sum, &pred), cli_print_encoded(&r.sum);
        if (r.sum.has_device) print_device(&r.sum);
        char ts[600];
        double med = r.sum.median_us;
        printf("  time per iteration: predicted %.1f ms, measured %.1f ms (median after the first, %s, %+.1f%%); %s\n",
               pred.time_us / 1e3, med / 1e3, cli_threads_text(), 100 * (pred.time_us - med) / med, cli_time_source(dev, ts, sizeof ts));
    }
    h5_run hr = {.kind = "train", .n = n, .p = &p, .plan = j->plan, .batch = cfg.batch, .optimizer = cli_optimizer_name(cfg.optimizer),
                 .device = dev->name, .sim = &pred, .measured = &r.sum, .trace = &r, .backend = j->ops->backend,
                 .data = j->data_dir ? j->data_dir : "synthetic", .seed = j->seed, .hp = &hp,
                 .calibration = cfg.calib ? cfg.calib->source : NULL};
    if (f && h5_write_run(f, &hr, e)) rc = CLI_USAGE;
    if (j->dump && rc == CLI_OK) {
        if (write_dump(j, &r, &p, &d, &t, e)) rc = CLI_USAGE;
        else fprintf(stderr, "wrote %s\n", j->dump);
    }
    run_free(&r);
done_ctx:
    for (int L = 0; L < n->n; L++) free(t.before[L]), free(t.grads[L]), free(t.run_before[L]);
    free(t.before), free(t.grads), free(t.run_before);
    data_free(&d);
done_plan:
    plan_free(&p);
    return rc;
}

int cli_train(int argc, char **argv)
{
    cli_config o = {.plan = "layer", .batch = 8, .iters = SPEC_TRAIN_ITERS, .seed = 1, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *dir = NULL, *init = NULL, *dump = NULL, *backend = "cpu", *v;
    double lr = -1;
    bool cupti = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--no-cupti")) {
            cupti = false;
            continue;
        }
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
    if (!o.net) return cli_fail("train", "--net is required (e.g. --net vgg-small)");
    err e;
    const char *outs[2] = {o.out, dump}; /* both writable before anything runs */
    for (int k = 0; k < 2; k++)
        if (outs[k] && outfile_check(outs[k], o.force, &e)) return cli_fail("train", "%s", e.msg);
    if (o.out && dump && !strcmp(o.out, dump)) return cli_fail("train", "-o and --dump name the same file");

    const ops_table *ops = ops_find(backend, cupti, &e);
    if (!ops) return cli_fail("train", "--backend %s: %s", backend, e.msg);
    cli_train_job j = {.plan = o.plan, .bn = o.bn, .cfg = {.batch = o.batch, .optimizer = o.optimizer}, .ops = ops, .lr = lr,
                       .iters = o.iters, .seed = (uint64_t)o.seed, .host_budget = o.host_budget, .data_dir = dir,
                       .init = init, .dump = dump, .force = o.force, .pool = o.pool};
    cli_inputs in;
    /* --profile's model falls back to this roofline for steps it never measured */
    if (cli_inputs_load(&in, &o, cli_engine_device(backend), &j.cfg, &e)) return cli_fail("train", "%s", e.msg);
    if (o.profile && profile_algos_give(o.profile, ops, &e)) { /* measured algorithm choices, before lowering */
        cli_inputs_free(&in);
        return cli_fail("train", "--profile: %s", e.msg);
    }
    j.n = &in.n, j.dev = &in.dev;
    h5_file *f = NULL;
    int rc = o.out && h5_create(&f, o.out, o.force, &e) ? CLI_USAGE : cli_train_run(&j, f, &e);
    if (rc == CLI_OK) cli_warn_load();
    if (f && rc != CLI_OK) h5_abort(f);
    else if (f && h5_close(f, &e)) rc = CLI_USAGE;
    else if (f) fprintf(stderr, "wrote %s\n", o.out);
    cli_inputs_free(&in);
    return cli_status("train", rc, &e);
}
