/* lrcnn validate: predict (closed form and replay) and measure (the engine's tracked peak by
 * category, the process's RSS high-water mark, time) a list of plans for one configuration, and
 * compare each plan's gradients with `layer`'s. Each plan runs in a process of its own
 * (engine/run.h: run_isolated), so that every figure is that plan's alone — its RSS on the CPU; on
 * CUDA the pool's reservation, the device's bytes in use: this process never opens the device, the
 * child does — measuring K iterations first, then running iteration 0 again to compare its
 * gradients with the reference `layer`'s process left in shared memory, so the comparison's memory
 * never shows in a measurement. On a device the prediction is made in the child too, with the
 * backend's workspace model (cuDNN's algorithms need the device); this process checks every plan
 * first with the model's host-side part (ops_ws_estimate).
 * cli_validate_run is the work for one configuration; specs with run = validate call it too. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/h5run.h"
#include "engine/run.h"
#include "io/data.h"
#include "io/spec.h"

static const char *usage =
    "usage: lrcnn validate --net NET [--plan PLANS] [--image S|HxW] [--batch N] [--iters K] [--optimizer sgd|adam]\n"
    "                      [--bn MODE] [--seed X] [--host-budget BYTES] [--calibrate RUNS.h5] [--profile PROFILE.h5]\n"
    "                      [--backend cpu|cuda] [--no-cupti] [--alloc arena|pool] [-o FILE.h5] [--force]\n"
    "\n"
    "For each plan: the simulator's predictions (replay and closed form) beside the engine's measured\n"
    "peak, the error of each, the reduction and time against `layer`, the largest gradient deviation\n"
    "from `layer` (relative norm, iteration 0, same weights and batch) and the RSS high-water mark.\n"
    "PLANS: comma-separated, ranges expand (2ps:2..8); `layer` is always run first as the reference.\n"
    "Plans with sparse or zfp:acc encodings also print their encoded bytes predicted against those stored\n"
    "(and the density or ratio behind each); --calibrate takes those per layer from an earlier result.\n"
    "--profile: also the predicted iteration time of each plan (lrcnn calibrate's model) against the\n"
    "measured median.\n"
    "--backend cuda: the same on the GPU, each plan in a process of its own, and the device's own view of\n"
    "each: the pool's reservation beside the allocated peak, bytes held beside the pool, the device's bytes\n"
    "in use (lrcnn train --help; --no-cupti as there), in a second table and the file.\n"
    "--alloc arena (the default): the engine reserves each plan's arena (lrcnn sim prints it) and places every\n"
    "buffer at the plan's offset; a table shows the arena predicted, reserved and reached, with its resident\n"
    "pages on the CPU and the device's bytes in use on a GPU. --alloc pool: blocks from the backend's allocator.\n"
    "Defaults: --plan layer,ckpt-sqrt,vdnn-conv,2ps:2..8,overl:2..8,2ps-h,overl-h --batch 2 --iters 2\n"
    "--optimizer sgd --seed 1. A spec with `run = validate` does the same per configuration.\n"
    "\n"
    "example: lrcnn validate --net vgg-small --batch 16 --plan layer,2ps:2..4,overl-h -o /tmp/v.h5\n";

/* The plan column's width: the longest plan's name of this run, 14 at least (set before printing). */
static int plan_w = 14;

static void print_header(const cli_validate_job *j)
{
    const net_layer *in = &j->n->layers[0];
    printf("%s @ %dx%d, batch %d, %s, %d iteration%s per plan (time: median after the first), seed %llu, %s\n\n", j->n->name,
           in->h, in->w, j->cfg.batch, cli_optimizer_name(j->cfg.optimizer), j->iters, j->iters > 1 ? "s" : "",
           (unsigned long long)j->seed, cli_threads_text());
    printf("  %-*s %10s %10s %10s %8s %8s %8s %9s %7s %9s %-14s %10s\n", plan_w, "plan", "replay", "closed", "measured", "err rep",
           "err cl", "vs layer", "time/it", "vs lay", "grad dev", "(worst)", "RSS");
}

/* Plan k's row: predictions, measurement (m), its comparison (c) and the reference (m0). */
static void print_row(const char *item, const sim_result *pred, const run_summary *m, const run_summary *c,
                      const run_summary *m0, bool reference)
{
    char a[32], b[32], d[32], r[32], ce[16];
    printf("  %-*s %10s %10s %10s %+7.3f%% %8s %7.1f%% %7.0fms %6.2fx %9.1e %-14s %10s\n", plan_w, item,
           units_fmt_bytes(pred->replay.peak, a, sizeof a), cli_fmt_closed(pred, -1, b, sizeof b),
           units_fmt_bytes(m->peak, d, sizeof d), 100.0 * (double)(pred->replay.peak - m->peak) / (double)m->peak,
           cli_fmt_closed_err(pred, m->peak, "%+.2f%%", ce, sizeof ce), 100.0 * (1.0 - (double)m->peak / (double)m0->peak),
           m->median_us / 1e3, m->median_us / m0->median_us, c->grad_dev, reference ? "(reference)" : c->worst,
           units_fmt_bytes(m->rss_peak, r, sizeof r));
    fflush(stdout);
}

/* On a device: what it saw of each plan, in the plan's own process. */
static void print_device_table(const char **items, const sim_result *pred, const run_summary *meas, int count)
{
    const ops_device *d0 = NULL;
    for (int k = 0; k < count && !d0; k++)
        if (meas[k].ok && meas[k].has_device) d0 = &meas[k].device;
    if (!d0) return;
    char a[32], b[32], c[32], x[32], y[32], z[32];
    printf("\n  the device's own view, each plan in its own process: %s (compute capability %s; driver %s, CUDA %s, cuDNN %s, "
           "cuBLAS %s); context and libraries %s before the first allocation%s%s\n", d0->name, d0->capability, d0->driver, d0->runtime,
           d0->dnn, d0->blas, units_fmt_bytes(d0->context_bytes, a, sizeof a), d0->conv_policy[0] ? "; convolutions: " : "", d0->conv_policy);
    printf("  %-*s %10s %10s %8s %10s %10s %10s %10s %9s\n", plan_w, "plan", "replay", "allocated", "err", "reserved", "res-alloc",
           "off-pool", "in use", "err dev");
    for (int k = 0; k < count; k++) {
        const run_summary *m = &meas[k];
        if (!m->ok || !m->has_device) continue;
        const ops_device *d = &m->device;
        int64_t in_use = d->device_peak >= 0 ? d->device_peak - d->context_bytes : -1;
        bool pool = d->pool_reserved_peak > 0; /* else the plan ran in its arena (the arena's table) */
        char dev[16] = "-";
        if (pool) snprintf(dev, sizeof dev, "%+8.2f%%", 100.0 * (double)(pred[k].replay.peak - d->pool_reserved_peak) / (double)d->pool_reserved_peak);
        printf("  %-*s %10s %10s %+7.3f%% %10s %10s %10s %10s %9s\n", plan_w, items[k], units_fmt_bytes(pred[k].replay.peak, a, sizeof a),
               units_fmt_bytes(m->peak, b, sizeof b), 100.0 * (double)(pred[k].replay.peak - m->peak) / (double)m->peak,
               pool ? units_fmt_bytes(d->pool_reserved_peak, c, sizeof c) : "-",
               pool ? units_fmt_bytes(d->pool_reserved_peak - m->peak, x, sizeof x) : "-", units_fmt_bytes(d->outside_pool, y, sizeof y),
               in_use >= 0 ? units_fmt_bytes(in_use, z, sizeof z) : "-", dev);
    }
    printf("  reserved: the pool's high-water mark (what the device holds for the plan); res-alloc: the pool's overhead;\n"
           "  off-pool: cuBLAS's workspace and the engine's scratch; in use: cudaMemGetInfo's peak at step ends less the\n"
           "  context (-: with --no-cupti); err dev: the replay against the reservation (-: the plan ran in its arena, whose\n"
           "  own table follows, and the pool held nothing)\n");
}

/* --alloc arena: the plan's arena beside what the engine reserved and reached; on the CPU the arena's
 * resident pages against the process's RSS, on a device its bytes in use against arena and
 * workspaces. */
static void print_arena_table(const char **items, const sim_result *pred, const run_summary *meas, int count, bool device)
{
    bool any = false;
    for (int k = 0; k < count; k++) any |= meas[k].ok && meas[k].arena;
    if (!any) return;
    char a[32], b[32], c[32], x[32], y[32], z[32];
    printf("\n  the arena (--alloc arena): each plan's blocks at the offsets of its static memory plan\n");
    printf("  %-*s %10s %10s %10s %6s %10s %10s %10s\n", plan_w, "plan", "predicted", "reserved", "reached", "equal", device ? "+ outside" : "resident",
           device ? "in use" : "RSS peak", device ? "err" : "rest");
    for (int k = 0; k < count; k++) {
        const run_summary *m = &meas[k];
        if (!m->ok || !m->arena) continue;
        bool eq = m->arena_size == pred[k].arena.size && m->arena_extent == m->arena_size && m->arena_host_size == pred[k].arena.host_size;
        printf("  %-*s %10s %10s %10s %6s", plan_w, items[k], units_fmt_bytes(pred[k].arena.size, a, sizeof a),
               units_fmt_bytes(m->arena_size, b, sizeof b), units_fmt_bytes(m->arena_extent, c, sizeof c), eq ? "yes" : "NO");
        if (!device) {
            printf(" %10s %10s %10s\n", m->arena_resident >= 0 ? units_fmt_bytes(m->arena_resident, x, sizeof x) : "-",
                   units_fmt_bytes(m->rss_peak, y, sizeof y),
                   m->arena_resident >= 0 ? units_fmt_bytes(m->rss_peak - m->arena_resident, z, sizeof z) : "-");
            continue;
        }
        const ops_device *d = &m->device;
        int64_t expect = m->arena_size + pred[k].arena.apart + (m->has_device ? d->outside_pool : 0);
        int64_t in_use = m->has_device && d->device_peak >= 0 ? d->device_peak - d->context_bytes : -1;
        printf(" %10s %10s", units_fmt_bytes(expect, x, sizeof x), in_use >= 0 ? units_fmt_bytes(in_use, y, sizeof y) : "-");
        if (in_use > 0) printf(" %+8.2f%%\n", 100.0 * (double)(expect - in_use) / (double)in_use);
        else printf(" %9s\n", "-");
    }
    if (device)
        printf("  reached: the highest byte a placed block reached; + outside: the arena, data-sized encodings at their predicted\n"
               "  bytes and what the engine holds outside it (cuBLAS's workspace, scratch); in use: cudaMemGetInfo's peak at step\n"
               "  ends less the context (-: with --no-cupti); err: + outside against in use\n");
    else
        printf("  reached: the highest byte a placed block reached; resident: the arena's pages its blocks touched (mincore);\n"
               "  rest: the RSS high-water mark beyond them (code, libraries, OpenBLAS's buffers, data, the reference's copies)\n");
}

/* What a plan's process does before it runs on a device: the prediction, with the backend's own
 * workspace model (engine/run.h: run_job.first). */
typedef struct {
    const cli_validate_job *j;
    const plan *p;
} predict_ctx;

static int predict_here(const ops_table *ops, void *ctx, void *out, err *e)
{
    const predict_ctx *c = ctx;
    sched_cfg cfg = c->j->cfg;
    cfg.ws = ops->ws;
    return sim_run(c->j->n, c->p, &cfg, c->j->dev ? c->j->dev : &sim_device_cpu, out, NULL, e);
}

/* The measured runs into f: each a forked run's summary with iteration 0's comparison. */
static int write_runs(const cli_validate_job *j, h5_file *f, const char **items, const plan *ps, const sim_result *pred,
                      const run_summary *meas, const run_summary *cmpr, int count, err *e)
{
    for (int k = 0; k < count; k++) {
        run_summary m = meas[k];
        m.compared = true, m.grad_dev = cmpr[k].grad_dev, m.loss_dev = cmpr[k].loss_dev;
        snprintf(m.worst, sizeof m.worst, "%s", cmpr[k].worst);
        h5_run run = {.kind = "validate", .n = j->n, .p = &ps[k], .plan = items[k], .batch = j->cfg.batch,
                      .optimizer = cli_optimizer_name(j->cfg.optimizer), .device = j->dev ? j->dev->name : "cpu",
                      .sim = &pred[k], .measured = &m,
                      .backend = j->backend ? j->backend : "cpu", .data = "synthetic", .seed = j->seed,
                      .calibration = j->cfg.calib ? j->cfg.calib->source : NULL};
        if (h5_write_run(f, &run, e)) return -1;
    }
    return 0;
}

int cli_validate_run(const cli_validate_job *j, h5_file *f, err *e)
{
    const net *n = j->n;
    sched_cfg cfg = j->cfg;
    const char *backend = j->backend ? j->backend : "cpu";
    bool device = ops_on_device(backend); /* then predictions are made where the device is open */
    cfg.ws = ops_ws_estimate(backend);
    /* `layer` first, once */
    int count = 1, parsed = 0, rc = CLI_OK;
    const char **items = err_calloc((size_t)j->n_plans + 1, sizeof(char *));
    items[0] = "layer";
    for (int k = 0; k < j->n_plans; k++)
        if (strcmp(j->plans[k], "layer")) items[count++] = j->plans[k];
    plan_w = cli_plan_width(items, count, 14);
    plan *ps = err_calloc((size_t)count, sizeof(plan));
    sim_result *pred = err_calloc((size_t)count, sizeof(sim_result));
    run_summary *meas = err_calloc((size_t)count, sizeof(run_summary)), *cmpr = err_calloc((size_t)count, sizeof(run_summary));
    for (char text[PLAN_TEXT_LEN + 64]; parsed < count; parsed++) { /* everything checked before anything runs */
        cli_plan_text(items[parsed], j->bn, text, sizeof text);
        if (cli_plan_parse(&ps[parsed], n, items[parsed], j->bn, &cfg, j->dev ? j->dev : &sim_device_cpu, e)) {
            rc = CLI_USAGE;
            goto done;
        }
        cli_warn_plan(&ps[parsed], n);
        if (sim_run(n, &ps[parsed], &cfg, j->dev ? j->dev : &sim_device_cpu, &pred[parsed], NULL, e) ||
            cli_check_memory(&pred[parsed], j->host_budget, !device, text, e)) {
            parsed++;
            rc = CLI_USAGE;
            goto done;
        }
    }
    /* the reference's iteration-0 gradients, shared with the children that compare against them */
    size_t shared_bytes = (size_t)(net_params(n) + 1) * sizeof(float);
    float *shared = mmap(NULL, shared_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        rc = CLI_FAILED;
        err_set(e, "cannot map %zu bytes for the reference gradients", shared_bytes);
        goto done;
    }
    data d;
    data_synthetic_for(&d, n, j->seed);
    if (!j->quiet) print_header(j);
    for (int k = 0; k < count; k++) {
        /* its process measures K iterations, then runs iteration 0 again for the gradients */
        run_job job = {.backend = backend, .profile = j->profile, .find = ops_find, .n = 2, .cmp_ref = {NULL, k ? shared : NULL},
                       .cmp_loss = {0, meas[0].loss0}};
        job.cfg[0] = (run_cfg){.n = n, .p = &ps[k], .sched = cfg, .hp = exec_default_hparams(cfg.optimizer), .seed = j->seed,
                               .iters = j->iters, .batches = data_batches(&d), .pool = j->pool};
        job.cfg[1] = job.cfg[0];
        job.cfg[1].iters = 1;
        if (k == 0) job.cfg[1].grads = true, job.cfg[1].grads_to = shared;
        predict_ctx pc = {j, &ps[k]};
        if (device) job.first = predict_here, job.ctx = &pc, job.out_first = &pred[k], job.first_bytes = sizeof pred[k];
        run_summary two[2];
        run_isolated(&job, two);
        meas[k] = two[0], cmpr[k] = two[1];
        if (!meas[k].ok || !cmpr[k].ok) {
            const char *why = meas[k].ok ? cmpr[k].err : meas[k].err;
            if (!j->quiet) printf("  %-*s engine failed: %s\n", plan_w, items[k], why);
            if (rc == CLI_OK) err_set(e, "plan %s: engine failed: %s", items[k], why);
            rc = CLI_FAILED;
            continue;
        }
        if (!j->quiet) print_row(items[k], &pred[k], &meas[k], &cmpr[k], &meas[0], k == 0), cli_print_encoded(&meas[k]);
    }
    if (!j->quiet)
        printf("\n  replay/closed: predictions; measured: the engine's tracked peak; err: prediction vs measured;\n"
               "  vs layer: peak reduction and time ratio; grad dev: max over tensors of |g - g_layer| / |g_layer|\n");
    if (!j->quiet && device) print_device_table(items, pred, meas, count);
    if (!j->quiet) print_arena_table(items, pred, meas, count, device);
    if (!j->quiet && j->dev && j->dev->model) {
        char t[600];
        printf("\n  time per iteration, %s:\n  %-*s %12s %12s %8s\n", cli_time_source(j->dev, t, sizeof t), plan_w, "plan",
               "predicted", "measured", "error");
        for (int k = 0; k < count; k++)
            if (meas[k].ok)
                printf("  %-*s %10.1fms %10.1fms %+7.1f%%\n", plan_w, items[k], pred[k].time_us / 1e3, meas[k].median_us / 1e3,
                       100 * (pred[k].time_us - meas[k].median_us) / meas[k].median_us);
    }
    munmap(shared, shared_bytes);
    if (rc == CLI_OK && f && write_runs(j, f, items, ps, pred, meas, cmpr, count, e)) rc = CLI_USAGE;
done:
    for (int k = 0; k < count; k++) run_summary_free(&meas[k]), run_summary_free(&cmpr[k]);
    for (int k = 0; k < parsed; k++) plan_free(&ps[k]);
    free(ps), free(pred), free(meas), free(cmpr), free(items);
    return rc;
}

int cli_validate(int argc, char **argv)
{
    cli_config o = {.plan = "layer,ckpt-sqrt,vdnn-conv,2ps:2..8,overl:2..8,2ps-h,overl-h", .batch = 2, .iters = SPEC_VALIDATE_ITERS, .seed = 1,
                    .optimizer = SCHED_SGD, .host_budget = -1};
    const char *backend = "cpu";
    bool cupti = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--no-cupti")) {
            cupti = false;
            continue;
        }
        int got = cli_common(argc, argv, &i, "validate", &o);
        if (got < 0) return CLI_USAGE;
        if (got == 0) got = cli_opt(argc, argv, &i, "--backend", &backend);
        if (got <= 0) return cli_unknown("validate", argc, argv, i, got);
    }
    if (!o.net) return cli_fail("validate", "--net is required (e.g. --net vgg-small)");
    if (o.out && !o.force && access(o.out, F_OK) == 0) return cli_fail("validate", "%s exists; use --force to overwrite", o.out);
    err e;
    char **items;
    int count, rc;
    if (ops_opens(backend, &e)) return cli_fail("validate", "--backend %s: %s", backend, e.msg);
    cli_validate_job j = {.bn = o.bn, .cfg = {.batch = o.batch, .optimizer = o.optimizer}, .iters = o.iters, .seed = (uint64_t)o.seed,
                          .host_budget = o.host_budget, .backend = backend, .profile = cupti, .pool = o.pool};
    cli_inputs in;
    if (cli_inputs_load(&in, &o, cli_engine_device(backend), &j.cfg, &e)) return cli_fail("validate", "%s", e.msg);
    if (plan_list_expand(o.plan, &items, &count, &e)) {
        cli_inputs_free(&in);
        return cli_fail("validate", "--plan: %s", e.msg);
    }
    j.dev = &in.dev;
    j.n = &in.n, j.plans = items, j.n_plans = count;
    h5_file *f = NULL;
    if (o.out && h5_create(&f, o.out, o.force, &e)) rc = CLI_USAGE;
    else if ((rc = cli_validate_run(&j, f, &e)) == CLI_OK) cli_warn_load();
    if (f && rc != CLI_OK) h5_abort(f);
    else if (f && h5_close(f, &e)) rc = CLI_USAGE;
    else if (f) fprintf(stderr, "wrote %s\n", o.out);
    plan_list_free(items, count);
    cli_inputs_free(&in);
    return cli_status("validate", rc, &e);
}
