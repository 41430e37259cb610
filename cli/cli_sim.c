/* lrcnn sim: predict one or more plans for one configuration and print them. One plan prints the
 * breakdown by category for both models; several print one summary row each, with reduction and
 * FLOPs overhead against `layer` computed in the same run. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/h5run.h"
#include "sim/lower/pipeline.h"
#include "io/h5.h"
#include "sim/base/heap.h"

static const char *usage =
    "usage: lrcnn sim --net NET [--plan PLANS] [--batch N] [--image S|HxW] [--optimizer sgd|adam]\n"
    "                 [--bn auto|train[:LETTERS]|train-offload[:K]|train-rebuild[:K][/M]|train-recompute|frozen|per-band]\n"
    "                 [--device NAME|PROFILE.h5] [--profile PROFILE.h5]\n"
    "                 [--calibrate RUNS.h5]\n"
    "                 [-o FILE.h5 [--force]]\n"
    "\n"
    "Predicts peak memory (by category) and compute for each plan: 'replay' walks the lowered schedule\n"
    "(the engine's allocated bytes, exactly), 'closed' evaluates the closed-form equations of\n"
    "paper/model.md. PLANS is a comma-separated list; ranges expand (2ps:2..8).\n"
    "Presets: layer ckpt-sqrt ckpt:K vdnn-all vdnn-conv 2ps:R overl:R 2ps-h[:R] overl-h[:R], and\n"
    "ckpt-opt[:B], optimal checkpointing: the fastest checkpoint split within B (bytes, 60% of layer's\n"
    "footprint, or a plan's: ckpt-opt:ckpt-sqrt; without B the smallest), found by the planner (plan --space\n"
    "ckpt) when the plan is used;\n"
    "custom plans: docs/plans.md. Defaults: --plan layer --batch 8 --optimizer sgd --bn auto --device cpu.\n"
    "Modifiers store kept maps encoded: +gist, +dpr:fp16|bf16|fp8, +zfp:rate=R|acc=E (e.g. 2ps:4+gist+dpr:fp16);\n"
    "+migrate[:grads][:optim][:weights] moves parameters, gradients and optimizer state off the device\n"
    "between their uses (Layrub-style; bare: all three); +torch, +torch2: the plan as python/lrcnn_torch\n"
    "runs it in PyTorch 1.13 or 2.x, a prediction of PyTorch's memory. The closed form does not model modifiers yet\n"
    "(n/a), nor train-mode BatchNorm's stages inside row segments (bn=train, train-offload, train-rebuild; the passes of\n"
    "bn=train-recompute it does: docs/plans.md).\n"
    "Sparse and zfp:acc sizes depend on the values: they are\n"
    "predicted from the modifier's density=/ratio=, or per layer from the engine's measurements in RUNS.h5\n"
    "(any validate or train result of the same net with those encodings) with --calibrate.\n"
    "Time: the roofline of --device (cpu, h100, h100-pcie4, h100-pcie5, gh200: those three differ in\n"
    "their host link; gtx1650, a 4 GB GPU; jetson-nano and rpi4, edge boards offloading to a microSD\n"
    "card), or the model lrcnn calibrate measured on a machine (--profile FILE, or --device FILE).\n"
    "\n"
    "example: lrcnn sim --net vgg16 --batch 8 --image 224 --plan 2ps:6\n"
    "         lrcnn sim --net resnet50 --batch 32 --plan layer,layer+gist,2ps:8+zfp:rate=8\n";

static void print_breakdown(const net *n, const sched_cfg *cfg, const sim_device *dev, const char *text,
                            const char *resolved, const sim_result *r)
{
    char a[32], b[32], c[32], d[32];
    printf("%s @ %dx%d, batch %d, %s, plan %s\n  %s\n  net: %d layers, %lld parameters, %lld multiply-accumulates per image\n\n",
           n->name, n->layers[0].h, n->layers[0].w, cfg->batch, cli_optimizer_name(cfg->optimizer), text, resolved, n->n,
           (long long)net_params(n), (long long)net_macs(n));
    printf("  %-14s %14s %14s %14s\n", "category", "replay@peak", "closed@peak", "replay max");
    for (int k = 0; k < MEM_NCAT; k++)
        printf("  %-14s %14s %14s %14s\n", mem_cat_name((mem_cat)k), units_fmt_bytes(r->replay.at_peak[k], a, sizeof a),
               cli_fmt_closed(r, k, b, sizeof b), units_fmt_bytes(r->replay.max[k], c, sizeof c));
    printf("  %-14s %14s %14s   (closed vs replay %s)\n", "peak (device)", units_fmt_bytes(r->replay.peak, a, sizeof a),
           cli_fmt_closed(r, -1, b, sizeof b), cli_fmt_closed_err(r, r->replay.peak, "%+.1f%%", d, sizeof d));
    cli_print_arena(&r->arena);
    if (r->reserved) { /* a torch plan */
        int64_t kept = 0;
        for (int k = MEM_ACT; k < MEM_HOST; k++) kept += r->replay.at_backward[k];
        printf("  PyTorch: allocated peak %s (the replay), kept for backward %s, reserved %s (CUDA caching allocator)\n",
               units_fmt_bytes(r->replay.peak, a, sizeof a), units_fmt_bytes(kept, b, sizeof b),
               units_fmt_bytes(r->reserved, c, sizeof c));
    }
    if (!r->closed_ok)
        printf("  (the closed form does not model encodings, migration or the torch plans: the replay is the prediction)\n");
    char t[600];
    printf("  FLOPs %.4g G (fwd+bwd incl. recompute), %d steps\n  time %.1f ms per iteration, %s\n", r->flops / 1e9,
           r->n_steps, r->time_us / 1e3, cli_time_source(dev, t, sizeof t));
    cli_print_calib(r, cfg);
}

/* One plan of the list, item parsed into p (freed here): simulated, printed (its breakdown when it
 * is the only one, else a row against `layer`'s base) and written to f if given. */
static int sim_one(const net *n, const char *item, plan *pp, const sched_cfg *cfg, const sim_device *d,
                   const sim_result *base, bool alone, h5_file *f, err *e)
{
    char resolved[2 * PLAN_TEXT_LEN], a[32], b[32], c[32];
    sim_result r;
    int64_t *tl = NULL;
    plan p = *pp;
    if (sim_run(n, &p, cfg, d, &r, f ? &tl : NULL, e)) {
        plan_free(&p);
        return -1;
    }
    plan_describe(&p, n, resolved, sizeof resolved);
    if (alone) {
        print_breakdown(n, cfg, d, p.text, resolved, &r);
    } else {
        double red = 100.0 * (1.0 - (double)r.replay.peak / (double)base->replay.peak);
        char ar[32];
        printf("  %-16s %12s %12s %7.2f%% %12s %8s %9.1f%% %10.4gG %8.3fx %10.1fms %8.3fx\n", item, units_fmt_bytes(r.replay.peak, a, sizeof a),
               units_fmt_bytes(r.arena.size, ar, sizeof ar), cli_arena_gap(&r.arena), cli_fmt_closed(&r, -1, b, sizeof b),
               cli_fmt_closed_err(&r, r.replay.peak, "%+.1f%%", c, sizeof c), red, r.flops / 1e9, r.flops / base->flops,
               r.time_us / 1e3, r.time_us / base->time_us);
    }
    sched sc; /* the same schedule again, to label the timeline's steps */
    bool labels = f && !pipeline_lower(&sc, n, &p, cfg, e);
    h5_run run = {.kind = "sim", .n = n, .p = &p, .plan = item, .batch = cfg->batch, .optimizer = cli_optimizer_name(cfg->optimizer),
                  .device = d->name, .sim = &r, .timeline = tl, .n_timeline = r.n_steps, .steps = labels ? &sc : NULL,
                  .calibration = cfg->calib ? cfg->calib->source : NULL};
    int rc = f ? h5_write_run(f, &run, e) : 0;
    if (labels) sched_free(&sc);
    free(tl);
    plan_free(&p);
    return rc;
}

int cli_sim(int argc, char **argv)
{
    const char *dev = "cpu";
    cli_config o = {.plan = "layer", .batch = 8, .optimizer = SCHED_SGD, .host_budget = -1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, "sim", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        const char *dv;
        if ((got = cli_opt(argc, argv, &i, "--device", &dv)) > 0) {
            dev = dv;
            continue;
        }
        return cli_unknown("sim", argc, argv, i, got);
    }
    sched_cfg cfg = {.batch = o.batch, .optimizer = o.optimizer};
    if (!o.net) return cli_fail("sim", "--net is required (e.g. --net vgg16; see lrcnn sim --help)");
    if (o.iters || o.seed || o.host) return cli_fail("sim", "%s does not apply to sim", o.iters ? "--iters" : o.seed ? "--seed" : "--host-budget");
    err e;
    cli_inputs in;
    if (cli_inputs_load(&in, &o, dev, &cfg, &e)) return cli_fail("sim", "%s", e.msg);
    const net *n = &in.n;
    const sim_device *d = &in.dev;
    char **items;
    int count, rc = CLI_OK;
    if (plan_list_expand(o.plan, &items, &count, &e)) {
        cli_inputs_free(&in);
        return cli_fail("sim", "--plan: %s", e.msg);
    }
    /* every plan parsed (a named one found) before anything is written; each simulated from its parse */
    char text[PLAN_TEXT_LEN + 64];
    plan *ps = err_calloc((size_t)count, sizeof(plan));
    int parsed = 0;
    for (; parsed < count; parsed++) {
        if (cli_plan_parse(&ps[parsed], n, items[parsed], o.bn, &cfg, d, &e)) {
            rc = cli_fail("sim", "%s", e.msg);
            goto done;
        }
        cli_warn_plan(&ps[parsed], n);
    }
    h5_file *f = NULL;
    if (o.out && h5_create(&f, o.out, o.force, &e)) {
        rc = cli_fail("sim", "%s", e.msg);
        goto done;
    }
    if (count > 1) heap_tune(HEAP_SWEEP); /* many schedules: keep the heap, not fault it in again per plan */
    sim_result base;
    cli_plan_text("layer", o.bn, text, sizeof text);
    if (cli_simulate(n, text, &cfg, d, &base, &e)) {
        rc = cli_fail("sim", "%s", e.msg);
        goto done_file;
    }
    if (count > 1) {
        char t[600];
        printf("%s @ %dx%d, batch %d, %s\n  time: %s\n\n", n->name, n->layers[0].h, n->layers[0].w, cfg.batch,
               cli_optimizer_name(cfg.optimizer), cli_time_source(d, t, sizeof t));
        printf("  %-16s %12s %12s %8s %12s %8s %10s %12s %9s %12s %9s\n", "plan", "replay peak", "arena", "gap", "closed peak", "closed",
               "vs layer", "FLOPs", "vs layer", "time/it", "vs layer");
    }
    for (int k = 0; k < count; k++) { /* each plan freed by sim_one, the rest here after a failure */
        if (rc == CLI_OK && sim_one(n, items[k], &ps[k], &cfg, d, &base, count == 1, f, &e)) rc = cli_fail("sim", "%s", e.msg);
        else if (rc != CLI_OK) plan_free(&ps[k]);
    }
    parsed = 0;
    if (count > 1 && rc == CLI_OK)
        printf("\n  reduction, FLOPs and time are against 'layer' (%s replay peak); closed = closed-form error vs replay;\n"
               "  arena = the device memory a static plan of the schedule reserves, gap = its excess over the live peak\n",
               units_fmt_bytes(base.replay.peak, text, sizeof text));
done_file:
    if (f) {
        if (rc) h5_abort(f);
        else if (h5_close(f, &e)) rc = cli_fail("sim", "%s", e.msg);
        else fprintf(stderr, "wrote %s\n", o.out);
    }
done:
    for (int k = 0; k < parsed; k++) plan_free(&ps[k]); /* those not handed to sim_one */
    free(ps);
    plan_list_free(items, count);
    cli_inputs_free(&in);
    return rc;
}
