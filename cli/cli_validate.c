/* lrcnn validate: predict (closed form and replay) and measure (the engine's tracked peak by
 * category, the process's RSS high-water mark, time) a list of plans for one configuration, and
 * compare each plan's gradients with `layer`'s. Each plan runs in forked children so that every
 * RSS figure is that plan's alone: one child measures (K iterations), another runs iteration 0
 * again and compares its gradients with the reference that `layer`'s child left in shared memory.
 * The comparison's extra memory therefore never shows in a measurement. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/h5.h"
#include "engine/run.h"
#include "io/data.h"

static const char *usage =
    "usage: lrcnn validate --net NET [--plan PLANS] [--image S] [--batch N] [--iters K] [--optimizer sgd|adam]\n"
    "                      [--bn MODE] [--seed X] [--host-budget BYTES] [-o FILE.h5] [--force]\n"
    "\n"
    "For each plan: the simulator's predictions (replay and closed form) beside the engine's measured\n"
    "peak, the error of each, the reduction and time against `layer`, the largest gradient deviation\n"
    "from `layer` (relative norm, iteration 0, same weights and batch) and the RSS high-water mark.\n"
    "PLANS: comma-separated, ranges expand (2ps:2..8); `layer` is always run first as the reference.\n"
    "Defaults: --plan layer,ckpt-sqrt,vdnn-conv,2ps:2..8,overl:2..8,2ps-h,overl-h --batch 2 --iters 2\n"
    "--optimizer sgd --seed 1.\n"
    "\n"
    "example: lrcnn validate --net vgg-small --batch 16 --plan layer,2ps:2..4,overl-h -o /tmp/v.h5\n";

int cli_validate(int argc, char **argv)
{
    cli_config o = {.plan = "layer,ckpt-sqrt,vdnn-conv,2ps:2..8,overl:2..8,2ps-h,overl-h", .batch = 2, .iters = 2, .seed = 1,
                    .optimizer = SCHED_SGD, .host_budget = -1};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, "validate", &o);
        if (got < 0) return CLI_USAGE;
        if (!got) return cli_unknown("validate", argc, argv, i, got);
    }
    const char *net_name = o.net, *plans = o.plan, *bn = o.bn, *out = o.out;
    int image = o.image, iters = o.iters, force = o.force;
    long long seed = o.seed;
    int64_t host_budget = o.host_budget;
    sched_cfg cfg = {.batch = o.batch, .optimizer = o.optimizer};
    if (!net_name) return cli_fail("validate", "--net is required (e.g. --net vgg-small)");
    if (out && !force && access(out, F_OK) == 0) return cli_fail("validate", "%s exists; use --force to overwrite", out);
    err e;
    net n;
    if (cli_load_net(&n, net_name, image, &e)) return cli_fail("validate", "%s", e.msg);
    char **items0;
    int count0, rc = CLI_OK;
    if (plan_list_expand(plans, &items0, &count0, &e)) {
        net_free(&n);
        return cli_fail("validate", "--plan: %s", e.msg);
    }
    /* `layer` first, once */
    int count = 1;
    char **items = err_calloc((size_t)count0 + 1, sizeof(char *));
    items[0] = "layer";
    for (int k = 0; k < count0; k++)
        if (strcmp(items0[k], "layer")) items[count++] = items0[k];
    plan *ps = err_calloc((size_t)count, sizeof(plan));
    sim_result *pred = err_calloc((size_t)count, sizeof(sim_result));
    run_summary *meas = err_calloc((size_t)count, sizeof(run_summary)), *cmpr = err_calloc((size_t)count, sizeof(run_summary));
    char (*texts)[320] = err_calloc((size_t)count, sizeof *texts);
    int parsed = 0;
    for (; parsed < count; parsed++) { /* everything checked before anything runs */
        snprintf(texts[parsed], sizeof texts[parsed], "%s%s%s", items[parsed], bn ? " bn=" : "", bn ? bn : "");
        if (plan_parse(&ps[parsed], &n, texts[parsed], &e) || sim_run(&n, &ps[parsed], &cfg, &sim_device_cpu, &pred[parsed], NULL, &e)) {
            rc = cli_fail("validate", "%s", e.msg);
            goto done;
        }
        cli_warn_plan("validate", &ps[parsed], &n);
        if (cli_check_host(&pred[parsed], host_budget, texts[parsed], &e)) {
            parsed++;
            rc = cli_fail("validate", "%s", e.msg);
            goto done;
        }
    }
    /* the reference's iteration-0 gradients, shared with the children that compare against them */
    int64_t params = net_params(&n);
    float *shared = mmap(NULL, (size_t)(params + 1) * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        rc = cli_fail("validate", "cannot map %lld bytes for the reference gradients", (long long)(params + 1) * 4);
        goto done;
    }
    const net_layer *in = &n.layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n.layers[n.n - 1].c, (uint64_t)seed);
    printf("%s @ %dx%d, batch %d, %s, %d iteration%s per plan (time: best after the first), seed %lld\n\n", n.name, in->h, in->w,
           cfg.batch, cli_optimizer_name(cfg.optimizer), iters, iters > 1 ? "s" : "", seed);
    printf("  %-14s %10s %10s %10s %8s %8s %8s %9s %7s %9s %-14s %10s\n", "plan", "replay", "closed", "measured", "err rep", "err cl",
           "vs layer", "time/it", "vs lay", "grad dev", "(worst)", "RSS");
    for (int k = 0; k < count; k++) {
        /* one child measures K iterations; another runs iteration 0 again for the gradients, so the
         * comparison's memory never shows in a measurement */
        run_cfg rcfg = {.n = &n, .p = &ps[k], .sched = cfg, .ops = &ops_cpu, .hp = exec_default_hparams(cfg.optimizer),
                        .seed = (uint64_t)seed, .iters = iters, .batches = data_batches(&d)};
        run_forked(&rcfg, NULL, 0, &meas[k]);
        rcfg.iters = 1;
        if (k == 0) rcfg.grads = true, rcfg.grads_to = shared;
        run_forked(&rcfg, k ? shared : NULL, meas[0].loss0, &cmpr[k]);
        const run_summary *m = &meas[k];
        if (!m->ok || !cmpr[k].ok) {
            printf("  %-14s engine failed: %s\n", items[k], m->ok ? cmpr[k].err : m->err);
            rc = CLI_FAILED;
            continue;
        }
        char a[32], b[32], c[32], r[32];
        printf("  %-14s %10s %10s %10s %+7.3f%% %+7.2f%% %7.1f%% %7.0fms %6.2fx %9.1e %-14s %10s\n", items[k],
               units_fmt_bytes(pred[k].replay.peak, a, sizeof a), units_fmt_bytes(pred[k].closed.peak, b, sizeof b),
               units_fmt_bytes(m->peak, c, sizeof c), 100.0 * (double)(pred[k].replay.peak - m->peak) / (double)m->peak,
               100.0 * (double)(pred[k].closed.peak - m->peak) / (double)m->peak,
               100.0 * (1.0 - (double)m->peak / (double)meas[0].peak), m->best_us / 1e3, m->best_us / meas[0].best_us,
               cmpr[k].grad_dev, k ? cmpr[k].worst : "(reference)", units_fmt_bytes(m->rss_peak, r, sizeof r));
        fflush(stdout);
    }
    printf("\n  replay/closed: predictions; measured: the engine's tracked peak; err: prediction vs measured;\n"
           "  vs layer: peak reduction and time ratio; grad dev: max over tensors of |g - g_layer| / |g_layer|\n");
    munmap(shared, (size_t)(params + 1) * sizeof(float));
    if (out && rc == CLI_OK) {
        h5_file *f;
        if (h5_create(&f, out, force, &e)) {
            rc = cli_fail("validate", "%s", e.msg);
            goto done;
        }
        for (int k = 0; k < count && rc == CLI_OK; k++) {
            run m = {.sum = meas[k]}; /* a forked run: its summary, and iteration 0's gradient comparison */
            m.sum.compared = true, m.sum.grad_dev = cmpr[k].grad_dev, m.sum.loss_dev = cmpr[k].loss_dev;
            snprintf(m.sum.worst, sizeof m.sum.worst, "%s", cmpr[k].worst);
            h5_run run = {.kind = "validate", .n = &n, .p = &ps[k], .plan = items[k], .batch = cfg.batch,
                          .optimizer = cli_optimizer_name(cfg.optimizer), .device = "cpu", .sim = &pred[k], .measured = &m,
                          .backend = "cpu", .data = "synthetic", .seed = (uint64_t)seed};
            if (h5_write_run(f, &run, &e)) rc = cli_fail("validate", "%s", e.msg);
        }
        if (rc == CLI_OK && h5_close(f, &e)) rc = cli_fail("validate", "%s", e.msg);
        else if (rc != CLI_OK) h5_abort(f);
        if (rc == CLI_OK) fprintf(stderr, "wrote %s\n", out);
    }
done:
    for (int k = 0; k < parsed && k < count; k++) plan_free(&ps[k]);
    free(ps), free(pred), free(meas), free(cmpr), free(texts), free(items);
    plan_list_free(items0, count0);
    net_free(&n);
    return rc;
}
