/* lrcnn calibrate: the device profile of this machine (io/profile.h). Runs a set of fitting plans
 * on the engine and records every step's time (the median over the iterations after the first);
 * fits the time model (sim/predict/timing.h) from those samples; then runs held-out check plans and
 * prints the model's predicted iteration time for each against the measured one. The check plans
 * never feed the fit, so their error is the model's error on plans it has not seen. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "sim/lower/pipeline.h"
#include "engine/run.h"
#include "io/data.h"
#include "io/profile.h"

static const char *usage =
    "usage: lrcnn calibrate -o PROFILE.h5 [--backend cpu|cuda] [--net NETS] [--image S|HxW] [--batch N[,N...]]\n"
    "                       [--optimizer sgd|adam] [--plan PLANS] [--check PLANS] [--iters K] [--seed X] [--force]\n"
    "\n"
    "Measures this machine for the time model that sim, sweep and plan take with --profile: every step\n"
    "of each fitting plan (--plan) on the engine, as the median of the iterations after the first, on each\n"
    "net of NETS (comma-separated). Each kind of step is fitted as a + b x (x: output rows x batch for a\n"
    "layer, bytes for copies, moves, encodings and the optimizer). Then each check plan (--check, held out\n"
    "of the fit) runs too, and its predicted iteration time is printed against the measured median; the\n"
    "profile keeps the samples and the checks (results/SCHEMA.md). A plan that does not apply to a net\n"
    "(an authors- preset on another net) is skipped for it, and said so. Several batches (--batch 8,32)\n"
    "run every fitting and check plan at each: a key's samples then span the sizes large batches run at,\n"
    "where one batch's fit extrapolates (memory-bound steps slow down once their maps leave the cache).\n"
    "On cuda with LRCNN_CUDNN_FIND=1 the profile also keeps cuDNN's measured algorithm choices\n"
    "(profile/algos), which a run given the profile in find mode takes instead of measuring again.\n"
    "Defaults: --backend cpu --net vgg16 --image (each net's own) --batch 8 --optimizer sgd --iters 3\n"
    "--plan layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3\n"
    "--check ckpt-sqrt,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h (--check none: no checks).\n"
    "\n"
    "example: lrcnn calibrate --net vgg-small --batch 4,16 --iters 3 -o /tmp/cpu.h5\n";

#define CALIB_MAX_BATCHES 8

typedef struct {
    const char *backend;
    const ops_table *ops;
    int batch, iters;
    sched_optimizer optimizer;
    uint64_t seed;
} calib_job;

/* Every measured step so far; keys and classes are owned copies. */
typedef struct {
    profile_sample *v;
    int n, cap;
} sample_set;

static void sample_add(sample_set *ss, profile_sample s)
{
    if (ss->n == ss->cap) {
        ss->cap = ss->cap ? 2 * ss->cap : 1024;
        ss->v = err_realloc(ss->v, (size_t)ss->cap * sizeof *ss->v);
    }
    s.key = err_strdup(s.key), s.cls = err_strdup(s.cls);
    ss->v[ss->n++] = s;
}

/* The median of v[0], v[stride], ... (n values). */
static double median(const double *v, int n, int stride)
{
    double *w = err_calloc((size_t)n, sizeof *w);
    for (int i = 0; i < n; i++) w[i] = v[(size_t)i * stride];
    double m = run_median(w, n);
    free(w);
    return m;
}

typedef struct {
    double *us; /* [iters][n_step] */
    int n_step, iters;
    const char *what;
} step_log;

static void log_iter(const run *r, int it, void *ctx)
{
    step_log *l = ctx;
    if (!l->us) l->n_step = r->s.n_step, l->us = err_calloc((size_t)l->n_step * l->iters, sizeof(double));
    memcpy(l->us + (size_t)it * l->n_step, r->x.step_us, (size_t)l->n_step * sizeof(double));
    cli_progress(l->what, it + 1, l->iters);
}

/* Runs plan `text` on n; the per-step medians (after the first iteration) into samples (when ss is
 * given), the iteration's median into *iter_us, and (pred given) the model's prediction of the same
 * schedule into pred and its fitted share into fitted. */
static int measure(const calib_job *j, const net *n, const char *text, sample_set *ss, double *iter_us,
                   const sim_device *pred_dev, double *pred, double *fitted, err *e)
{
    plan p;
    if (plan_parse(&p, n, text, e)) return -1;
    data d;
    data_synthetic_for(&d, n, j->seed);
    sched_cfg cfg = {.batch = j->batch, .optimizer = j->optimizer, .ws = j->ops->ws};
    char what[96];
    snprintf(what, sizeof what, "%s %s", n->name, text);
    step_log l = {.iters = j->iters, .what = what};
    run_cfg rc = {.n = n, .p = &p, .sched = cfg, .ops = j->ops, .hp = exec_default_hparams(j->optimizer), .seed = j->seed,
                  .iters = j->iters, .batches = data_batches(&d), .sync_steps = true, .on_iter = log_iter, .ctx = &l};
    run r;
    int ret = run_plan(&r, &rc, e);
    if (ret == 0) {
        int first = j->iters > 1; /* the first iteration pays for first touches */
        int k = j->iters - first;
        *iter_us = r.sum.median_us;
        for (int i = 0; ss && i < r.s.n_step; i++) {
            timing_probe pr;
            timing_probe_step(n, &r.s, &r.s.steps[i], &pr);
            sample_add(ss, (profile_sample){.net = n->name, .plan = text, .batch = j->batch, .step = i, .key = pr.key,
                                            .cls = pr.cls, .x = pr.x, .work = pr.work,
                                            .us = median(l.us + (size_t)first * l.n_step + i, k, l.n_step)});
        }
        if (pred) *pred = sim_time_us(n, &r.s, pred_dev, fitted);
        run_free(&r);
    }
    free(l.us);
    plan_free(&p), data_free(&d);
    return ret;
}

static void print_check(const profile_check *c)
{
    printf("  %-12s %5d  %-24s %10.1f ms %10.1f ms %+7.1f%% %7.0f%%\n", c->net, c->batch, c->plan, c->predicted_us / 1e3, c->measured_us / 1e3,
           100 * (c->predicted_us - c->measured_us) / c->measured_us, 100 * c->fitted);
    fflush(stdout);
}

/* items split on commas into a malloc'd array (the strings point into a copy the caller frees). */
static int split_list(const char *list, char **copy, char ***items)
{
    int n = 0;
    *copy = err_strdup(list);
    *items = err_calloc(strlen(list) + 1, sizeof(char *));
    for (char *save = NULL, *t = strtok_r(*copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (*t) (*items)[n++] = t;
    return n;
}

/* --batch's list ("8" or "8,32"): distinct counts 1..2^20, at most CALIB_MAX_BATCHES. */
static int parse_batches(const char *list, int *batches, int *n)
{
    char *copy, **items;
    int k = split_list(list, &copy, &items), rc = 0;
    if (k < 1 || k > CALIB_MAX_BATCHES) rc = cli_fail("calibrate", "--batch %s: expected 1 to %d batch sizes, comma-separated", list, CALIB_MAX_BATCHES);
    for (int i = 0; i < k && !rc; i++) {
        if (cli_parse_int(items[i], 1, 1 << 20, &batches[i]))
            rc = cli_fail("calibrate", "--batch %s: '%s' is not an integer 1..%d", list, items[i], 1 << 20);
        for (int m = 0; m < i && !rc; m++)
            if (batches[m] == batches[i]) rc = cli_fail("calibrate", "--batch %s: %d given twice", list, batches[i]);
    }
    if (!rc) *n = k;
    free(copy), free(items);
    return rc;
}

/* One calibration: its nets and plans (fitting, then held-out checks), which plan applies to which
 * net, the samples measured, the checks and the model fitted from the samples. */
typedef struct {
    calib_job j;
    const int *batches;
    int n_batches, n_nets, n_fit, n_chk, n_checks;
    net *nets;
    char **fit, **chk;
    bool *applies;              /* [(fit, then check) * n_nets + net] */
    sample_set ss;
    profile_check *checks;
    timing_model model;
    sim_device dev;
} calib_ctx;

/* Everything checked before anything runs: each plan applies to some net. */
static int check_plans(calib_ctx *c, err *e)
{
    for (int k = 0; k < c->n_fit + c->n_chk; k++) {
        const char *text = k < c->n_fit ? c->fit[k] : c->chk[k - c->n_fit];
        bool any = false;
        for (int m = 0; m < c->n_nets; m++) {
            plan p;
            err pe;
            if ((c->applies[k * c->n_nets + m] = plan_parse(&p, &c->nets[m], text, &pe) == 0)) plan_free(&p), any = true;
            else if (c->n_nets == 1) *e = pe;
        }
        if (!any) {
            if (c->n_nets > 1) err_set(e, "plan '%s' applies to none of the nets", text);
            return CLI_USAGE;
        }
    }
    return CLI_OK;
}

/* The fitting plans on every net and batch, their steps into the samples; then the model fitted. */
static int run_fits(calib_ctx *c, err *e)
{
    char bs[CALIB_MAX_BATCHES * 10] = "";
    for (int b = 0, at = 0; b < c->n_batches; b++) at += snprintf(bs + at, sizeof bs - (size_t)at, "%s%d", b ? ", " : "", c->batches[b]);
    printf("calibrating the %s backend: %d fitting plan%s%s, batch %s, %s, %d iterations each (median after the first), %s\n",
           c->j.backend, c->n_fit, c->n_fit == 1 ? "" : "s", c->n_nets > 1 ? " per net" : "", bs, cli_optimizer_name(c->j.optimizer),
           c->j.iters, cli_threads_text());
    for (int b = 0; b < c->n_batches; b++)
        for (int m = 0; m < c->n_nets; m++)
            for (int k = 0; k < c->n_fit; k++) {
                double us;
                c->j.batch = c->batches[b];
                if (!c->applies[k * c->n_nets + m]) {
                    if (!b) printf("  %-12s %5s  %-24s skipped: not a plan for this net\n", c->nets[m].name, "", c->fit[k]);
                    continue;
                }
                if (measure(&c->j, &c->nets[m], c->fit[k], &c->ss, &us, NULL, NULL, NULL, e)) return CLI_FAILED;
                printf("  %-12s %5d  %-24s %10.1f ms\n", c->nets[m].name, c->j.batch, c->fit[k], us / 1e3);
                fflush(stdout);
                c->checks[c->n_checks++] = (profile_check){.net = c->nets[m].name, .plan = c->fit[k], .batch = c->j.batch,
                                                           .image = c->nets[m].layers[0].h, .measured_us = us};
            }
    timing_sample *ts = err_calloc((size_t)c->ss.n + 1, sizeof *ts);
    for (int i = 0; i < c->ss.n; i++) ts[i] = (timing_sample){c->ss.v[i].key, c->ss.v[i].cls, c->ss.v[i].x, c->ss.v[i].work, c->ss.v[i].us};
    timing_fit(&c->model, ts, c->ss.n);
    free(ts);
    printf("fitted %d kinds of step in %d classes from %d samples\n", c->model.n_key, c->model.n_cls, c->ss.n);
    return CLI_OK;
}

/* The fitting plans' own predictions: the in-sample error, beside the held-out one. */
static int predict_fits(calib_ctx *c, err *e)
{
    for (int k = 0; k < c->n_checks; k++) {
        profile_check *pc = &c->checks[k];
        const net *n = NULL;
        for (int m = 0; m < c->n_nets; m++)
            if (!strcmp(c->nets[m].name, pc->net)) n = &c->nets[m];
        plan p;
        sched s;
        sched_cfg cfg = {.batch = pc->batch, .optimizer = c->j.optimizer, .ws = c->j.ops->ws};
        if (plan_parse(&p, n, pc->plan, e)) return CLI_FAILED;
        if (pipeline_lower(&s, n, &p, &cfg, e)) return plan_free(&p), CLI_FAILED;
        pc->predicted_us = sim_time_us(n, &s, &c->dev, &pc->fitted), sched_free(&s), plan_free(&p);
    }
    printf("\npredicted iteration time (the fitted model) vs measured median; fitting plans first (in-sample)\n\n");
    printf("  %-12s %5s  %-24s %12s %12s %8s %8s\n", "net", "batch", "plan", "predicted", "measured", "error", "fitted");
    for (int k = 0; k < c->n_checks; k++) print_check(&c->checks[k]);
    return CLI_OK;
}

/* The plans held out of the fit, measured and predicted. */
static int run_checks(calib_ctx *c, err *e)
{
    printf("  held out of the fit:\n");
    for (int b = 0; b < c->n_batches; b++)
        for (int m = 0; m < c->n_nets; m++)
            for (int k = 0; k < c->n_chk; k++) {
                profile_check *pc = &c->checks[c->n_checks];
                c->j.batch = c->batches[b];
                if (!c->applies[(c->n_fit + k) * c->n_nets + m]) {
                    if (!b) printf("  %-12s %5s  %-24s skipped: not a plan for this net\n", c->nets[m].name, "", c->chk[k]);
                    continue;
                }
                *pc = (profile_check){.net = c->nets[m].name, .plan = c->chk[k], .batch = c->j.batch, .image = c->nets[m].layers[0].h,
                                      .held_out = 1};
                if (measure(&c->j, &c->nets[m], c->chk[k], NULL, &pc->measured_us, &c->dev, &pc->predicted_us, &pc->fitted, e))
                    return CLI_FAILED;
                print_check(&c->checks[c->n_checks++]);
            }
    return CLI_OK;
}

int cli_calibrate(int argc, char **argv)
{
    cli_config o = {.net = "vgg16", .batch = 8, .iters = 3, .seed = 1, .optimizer = SCHED_SGD,
                    .plan = "layer,ckpt:3,vdnn-all+dpr:fp16,2ps:3+gist,overl:3", .host_budget = -1};
    const char *check = "ckpt-sqrt,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h", *backend = "cpu", *v;
    int batches[CALIB_MAX_BATCHES] = {8}, n_batches = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_opt(argc, argv, &i, "--batch", &v);
        if (got > 0) {
            if (parse_batches(v, batches, &n_batches)) return CLI_USAGE;
            continue;
        }
        got = cli_common(argc, argv, &i, "calibrate", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--check", &v)) > 0) check = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--backend", &v)) > 0) backend = v;
        if (got <= 0) return cli_unknown("calibrate", argc, argv, i, got);
    }
    if (!o.out) return cli_fail("calibrate", "-o PROFILE.h5 is required");
    if (!o.force && access(o.out, F_OK) == 0) return cli_fail("calibrate", "%s exists; use --force to overwrite", o.out);
    if (o.bn || o.calibrate || o.host)
        return cli_fail("calibrate", "--bn, --calibrate and --host-budget do not apply (plans may carry their own bn=)");
    if (!strcmp(check, "none")) check = "";

    err e;
    calib_ctx c = {.j = {.backend = backend, .batch = batches[0], .iters = o.iters, .optimizer = o.optimizer, .seed = (uint64_t)o.seed},
                   .batches = batches, .n_batches = n_batches};
    if (!(c.j.ops = ops_find(backend, false, &e))) /* CUPTI off: steps are timed one by one */
        return cli_fail("calibrate", "--backend %s: %s", backend, e.msg);
    char *net_copy, **net_names;
    c.n_nets = split_list(o.net, &net_copy, &net_names);
    if (plan_list_expand(o.plan, &c.fit, &c.n_fit, &e)) {
        free(net_copy), free(net_names);
        return cli_fail("calibrate", "--plan: %s", e.msg);
    }
    if (*check && plan_list_expand(check, &c.chk, &c.n_chk, &e)) {
        plan_list_free(c.fit, c.n_fit), free(net_copy), free(net_names);
        return cli_fail("calibrate", "--check: %s", e.msg);
    }
    c.nets = err_calloc((size_t)c.n_nets + 1, sizeof(net));
    c.applies = err_calloc((size_t)(c.n_fit + c.n_chk) * c.n_nets + 1, sizeof(bool));
    c.checks = err_calloc((size_t)(c.n_chk + c.n_fit) * c.n_nets * n_batches + 1, sizeof *c.checks);
    c.dev = sim_device_cpu;
    c.dev.name = o.out, c.dev.model = &c.model;
    int rc = CLI_OK, loaded = 0;
    while (loaded < c.n_nets && rc == CLI_OK)
        if (cli_load_net(&c.nets[loaded], net_names[loaded], o.image, o.image_w, &e)) rc = CLI_USAGE;
        else loaded++;
    if (rc == CLI_OK) rc = check_plans(&c, &e);
    if (rc == CLI_OK) rc = run_fits(&c, &e);
    if (rc == CLI_OK) rc = predict_fits(&c, &e);
    if (rc == CLI_OK && c.n_chk) rc = run_checks(&c, &e);
    if (rc == CLI_OK) {
        profile_data pd = {.backend = backend, .samples = c.ss.v, .n_samples = c.ss.n, .checks = c.checks, .n_checks = c.n_checks,
                           .algos = c.j.ops->algos_made ? c.j.ops->algos_made() : NULL}; /* cuda's measured choices */
        if (profile_write(o.out, o.force, &pd, &e)) rc = CLI_USAGE;
        else fprintf(stderr, "wrote %s\n", o.out);
    }
    if (rc == CLI_OK) cli_warn_load();
    timing_free(&c.model);
    for (int i = 0; i < c.ss.n; i++) free((char *)c.ss.v[i].key), free((char *)c.ss.v[i].cls);
    free(c.ss.v), free(c.checks), free(c.applies);
    for (int m = 0; m < loaded; m++) net_free(&c.nets[m]);
    free(c.nets), free(net_copy), free(net_names);
    plan_list_free(c.fit, c.n_fit);
    if (c.n_chk) plan_list_free(c.chk, c.n_chk);
    return cli_status("calibrate", rc, &e);
}
