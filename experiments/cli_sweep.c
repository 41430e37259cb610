/* lrcnn sweep / lrcnn demo: an experiment spec evaluated by the simulator into one HDF5 file,
 * then one summary table per (net, image, batch, optimizer). Every configuration is checked
 * before the file is created, so a bad spec writes nothing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "h5.h"
#include "spec.h"

static const char *usage =
    "usage: lrcnn sweep SPEC [-o FILE.h5] [--force] [--quiet]\n"
    "\n"
    "Evaluates every configuration of an experiment spec (experiments/README.md: nets x batch x image x\n"
    "plans x optimizer) with the simulator and writes one HDF5 file (results/SCHEMA.md): the spec's\n"
    "'output', or results/<name>.h5, or -o. An existing file is kept unless --force.\n"
    "\n"
    "example: lrcnn sweep experiments/baselines.spec -o /tmp/baselines.h5\n";

typedef struct {
    int net, batch, image, plan, opt;
    sim_result r;
} cell;

static void print_tables(const spec *s, net *nets, const cell *cells, long count)
{
    char a[32], b[32];
    for (long i = 0; i < count; i++) {
        const cell *c = &cells[i];
        if (c->plan != 0) continue; /* first plan of each group opens its table */
        const net *n = &nets[c->net * s->n_images + c->image];
        printf("\n%s @ %dx%d, batch %d, %s, device profile %s\n", n->name, n->layers[0].h, n->layers[0].w, s->batches[c->batch],
               s->optimizers[c->opt], s->device);
        printf("  %-18s %12s %12s %8s %9s %10s %9s\n", "plan", "replay peak", "closed peak", "closed", "vs layer", "FLOPs", "vs layer");
        const sim_result *base = NULL;
        for (int p = 0; p < s->n_plans; p++)
            if (!strcmp(s->plans[p], "layer")) base = &cells[i + p].r;
        for (int p = 0; p < s->n_plans; p++) {
            const sim_result *r = &cells[i + p].r;
            char red[16] = "-", fl[16] = "-";
            if (base) {
                snprintf(red, sizeof red, "%.1f%%", 100.0 * (1.0 - (double)r->replay.peak / (double)base->replay.peak));
                snprintf(fl, sizeof fl, "%.3fx", r->flops / base->flops);
            }
            printf("  %-18s %12s %12s %+7.1f%% %9s %9.4gG %9s\n", s->plans[p], cli_fmt_bytes(r->replay.peak, a, sizeof a),
                   cli_fmt_bytes(r->closed.peak, b, sizeof b),
                   100.0 * (double)(r->closed.peak - r->replay.peak) / (double)r->replay.peak, red, r->flops / 1e9, fl);
        }
    }
}

/* Runs spec_path into out (NULL: from the spec). Returns a CLI status. */
int sweep_run(const char *cmd, const char *spec_path, const char *out, bool overwrite, bool quiet)
{
    err e;
    spec s;
    if (spec_load(&s, spec_path, &e)) return cli_fail(cmd, "%s", e.msg);
    char path[512];
    if (out) snprintf(path, sizeof path, "%s", out);
    else if (s.output[0]) snprintf(path, sizeof path, "%s", s.output);
    else snprintf(path, sizeof path, "results/%s.h5", s.name);
    int rc = CLI_OK;
    const sim_device *d = sim_device_find(s.device);
    int n_nets = s.n_nets * s.n_images;
    net *nets = err_calloc((size_t)n_nets, sizeof(net));
    long count = spec_runs(&s), done = 0;
    cell *cells = err_calloc((size_t)count, sizeof(cell));
    h5_file *f = NULL;
    if (!d) {
        rc = cli_fail(cmd, "%s: device '%s' is not a profile (cpu, h100)", spec_path, s.device);
        goto out;
    }
    for (int i = 0; i < s.n_nets; i++)
        for (int k = 0; k < s.n_images; k++)
            if (cli_load_net(&nets[i * s.n_images + k], s.nets[i], s.images[k], &e)) {
                rc = cli_fail(cmd, "%s: %s", spec_path, e.msg);
                goto out;
            }
    char text[320];
    for (int i = 0; i < n_nets; i++)
        for (int p = 0; p < s.n_plans; p++) {
            plan pl;
            snprintf(text, sizeof text, "%s%s%s", s.plans[p], s.bn[0] ? " bn=" : "", s.bn);
            if (plan_parse(&pl, &nets[i], text, &e)) {
                rc = cli_fail(cmd, "%s: at %dx%d: %s", spec_path, nets[i].layers[0].h, nets[i].layers[0].w, e.msg);
                goto out;
            }
            plan_free(&pl);
        }
    if (h5_create(&f, path, overwrite, &e) || h5_set_root_attr(f, "spec", spec_path, &e) ||
        h5_set_root_attr(f, "experiment", s.name, &e)) {
        rc = cli_fail(cmd, "%s", e.msg);
        goto out;
    }
    for (int i = 0; i < s.n_nets; i++)
        for (int k = 0; k < s.n_images; k++)
            for (int b = 0; b < s.n_batches; b++)
                for (int o = 0; o < s.n_optimizers; o++)
                    for (int p = 0; p < s.n_plans; p++) {
                        cell *c = &cells[done];
                        *c = (cell){.net = i, .image = k, .batch = b, .opt = o, .plan = p};
                        const net *n = &nets[i * s.n_images + k];
                        sched_cfg cfg = {.batch = s.batches[b]};
                        cli_parse_optimizer(s.optimizers[o], &cfg.optimizer);
                        char resolved[1024];
                        int64_t *tl = NULL;
                        plan pl;
                        snprintf(text, sizeof text, "%s%s%s", s.plans[p], s.bn[0] ? " bn=" : "", s.bn);
                        if (cli_simulate(n, text, &cfg, d, &c->r, resolved, sizeof resolved, &tl, &e) ||
                            plan_parse(&pl, n, text, &e)) {
                            free(tl);
                            rc = cli_fail(cmd, "%s: %s", spec_path, e.msg);
                            goto out;
                        }
                        int fp = 0, bp = 0;
                        for (int g = 0; g < pl.n_seg && !fp; g++)
                            if (pl.segs[g].mode == PLAN_ROWS) fp = pl.segs[g].fp, bp = pl.segs[g].bp;
                        h5_run run = {.kind = "sim", .net = n->name, .net_path = n->path, .image_h = n->layers[0].h,
                                      .image_w = n->layers[0].w, .batch = cfg.batch, .plan = s.plans[p],
                                      .plan_resolved = resolved, .optimizer = s.optimizers[o], .bn = plan_bn_name(pl.bn),
                                      .device = d->name, .fp_bands = fp, .bp_bands = bp, .sim = &c->r, .timeline = tl,
                                      .n_timeline = c->r.n_steps, .layers = n};
                        plan_free(&pl);
                        int wrc = h5_write_run(f, &run, &e);
                        free(tl);
                        if (wrc) {
                            rc = cli_fail(cmd, "%s", e.msg);
                            goto out;
                        }
                        done++;
                        if (!quiet) cli_progress("runs", (int)done, (int)count);
                    }
    if (h5_close(f, &e)) {
        f = NULL;
        rc = cli_fail(cmd, "%s", e.msg);
        goto out;
    }
    f = NULL;
    if (!quiet) print_tables(&s, nets, cells, count);
    fprintf(stderr, "%swrote %s (%ld runs)\n", quiet ? "" : "\n", path, count);
out:
    if (f) h5_abort(f);
    for (int i = 0; i < n_nets; i++) net_free(&nets[i]);
    free(nets);
    free(cells);
    spec_free(&s);
    return rc;
}

int cli_sweep(int argc, char **argv)
{
    const char *spec_path = NULL, *out = NULL, *v;
    bool force = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        int got;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--force")) force = true;
        else if (!strcmp(argv[i], "--quiet")) quiet = true;
        else if ((got = cli_opt(argc, argv, &i, "-o", &v)) > 0) out = v;
        else if (got < 0) return cli_fail("sweep", "-o needs a file name");
        else if (argv[i][0] == '-') return cli_fail("sweep", "unknown option '%s' (see lrcnn sweep --help)", argv[i]);
        else if (spec_path) return cli_fail("sweep", "one spec at a time (got '%s' and '%s')", spec_path, argv[i]);
        else spec_path = argv[i];
    }
    if (!spec_path) return cli_fail("sweep", "which spec? (e.g. lrcnn sweep experiments/baselines.spec)");
    return sweep_run("sweep", spec_path, out, force, quiet);
}

int cli_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: lrcnn demo\n\nThe default experiment: VGG-16 and ResNet-50 at 224x224, batch 8, Adam, every plan\n"
                 "preset, predicted by the simulator; writes results/demo.h5 (replacing the previous demo file).");
            return CLI_OK;
        }
        return cli_fail("demo", "unknown argument '%s' (lrcnn demo takes none)", argv[i]);
    }
    const char *out = LRCNN_SOURCE_DIR "/results/demo.h5";
    if (access(out, F_OK) == 0) fprintf(stderr, "replacing %s from the previous demo\n", out);
    return sweep_run("demo", LRCNN_SOURCE_DIR "/experiments/demo.spec", out, true, false);
}
