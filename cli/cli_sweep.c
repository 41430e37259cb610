/* lrcnn sweep / lrcnn demo: an experiment spec into one HDF5 file. run = sim: the simulator over
 * the grid (or a capacity search), optionally each configuration measured on the engine too, then
 * one summary table per (net, image, batch, optimizer); run = validate and run = train: per
 * configuration what lrcnn validate does, or lrcnn train per plan (cli_validate_run,
 * cli_train_run: one implementation each). Every plan is checked against every net before the file
 * is created, so a bad spec writes nothing; a run that fails later removes the file.
 * --shard I/N runs the I-th of N disjoint parts, for sweeps spread over machines: jobs (a run; for
 * validate, a configuration) are dealt round-robin by their place in the whole sweep, each run
 * keeps its place as its name, and lrcnn merge joins the parts (cli_merge.c). */
#include <errno.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/cli_sweep.h"
#include "io/profile.h"
#include "io/h5run.h"
#include "sim/lower/pipeline.h"
#include "engine/run.h"
#include "engine/threads.h"
#include "io/calib.h"
#include "io/data.h"
#include "io/h5.h"
#include "io/machine.h"
#include "io/spec.h"
#include "sim/base/heap.h"
#include "sim/predict/timing.h"

static const char *usage =
    "usage: lrcnn sweep SPEC [-o FILE.h5] [--shard I/N] [--force] [--quiet]\n"
    "\n"
    "Runs an experiment spec (experiments/README.md: nets x image x batch x optimizer x plans) and writes\n"
    "one HDF5 file (results/SCHEMA.md): -o, or the spec's 'output', or results/<name>.h5. Per the spec's\n"
    "'run': sim (default) evaluates every configuration with the simulator (measure = K: also on the CPU\n"
    "engine; search = batch|image: the largest that fits each budget); validate does what lrcnn validate\n"
    "does for each configuration; train trains every plan of each configuration for 'measure' iterations,\n"
    "like lrcnn train -o. An existing file is kept unless --force; --quiet prints no tables.\n"
    "\n"
    "--shard I/N (1 <= I <= N) runs only the I-th of N disjoint parts of the sweep, for several machines or\n"
    "jobs; lrcnn merge joins the N part files into the file the whole sweep would have written (README:\n"
    "\"Sweeps on many machines\" has a Slurm array and a GNU parallel line).\n"
    "\n"
    "example: lrcnn sweep experiments/baselines.spec -o /tmp/baselines.h5\n"
    "         lrcnn sweep experiments/baselines.spec --shard 2/3 -o /tmp/part2.h5\n";


typedef struct {
    const char *search;
    int64_t budget;
    int max_value;
} search_info;

/* One run of the sweep between its computation and its writing: what the file needs of it. */
typedef struct {
    plan pl;
    sched sc;
    sched_cfg cfg;
    int64_t *tl, *tc; /* the timelines, when the spec asks for them */
    run_summary m;    /* measure = K: the engine's run */
    bool lowered;     /* pl and sc hold something */
    int rc;           /* 0, SWEEP_INFEASIBLE (e says why) or -1 (the sweep cannot go on) */
    err e;
} sweep_job;

/* Simulates plan p of the spec on net n at `batch` into j and c (and with measure = K runs it on the
 * CPU engine). Writes nothing, so that many may run at once (measure = K aside). */
#define SWEEP_INFEASIBLE 1
static void sweep_compute(const spec *s, const net *n, const sim_device *d, const enc_calib *cal, int batch, int o, int p,
                          sweep_job *j, cell *c)
{
    *j = (sweep_job){.cfg = {.batch = batch, .calib = cal, .ws = s->measure ? ops_cpu.ws : NULL}}; /* measured: the CPU engine's */
    cli_parse_optimizer(s->optimizers[o], &j->cfg.optimizer);
    char text[PLAN_TEXT_LEN + 64];
    cli_plan_text(s->plans[p], s->bn, text, sizeof text);
    int parsed = cli_plan_parse(&j->pl, n, s->plans[p], s->bn, &j->cfg, d, &j->e);
    if (parsed) { /* 1: a named plan with nothing that fits its budget here */
        j->rc = parsed > 0 ? SWEEP_INFEASIBLE : -1;
        return;
    }
    /* lean where only the predictions read the schedule (no timeline's steps, no engine) */
    bool lean = !s->timeline && !s->measure;
    if ((lean ? pipeline_lower_lean : pipeline_lower)(&j->sc, n, &j->pl, &j->cfg, &j->e)) {
        plan_free(&j->pl);
        j->rc = SWEEP_INFEASIBLE;
        return;
    }
    j->lowered = true;
    if (s->timeline) {
        j->tl = err_calloc((size_t)j->sc.n_step + 1, sizeof(int64_t));
        j->tc = err_calloc(((size_t)j->sc.n_step + 1) * MEM_NCAT, sizeof(int64_t));
        sched_bytes_by_category(&j->sc, j->tc);
        for (int i = 0; i < j->sc.n_step; i++)
            for (int k = 0; k < MEM_NCAT; k++) j->tl[i] += k == MEM_HOST ? 0 : j->tc[(int64_t)i * MEM_NCAT + k];
    }
    sim_predict(n, &j->pl, &j->cfg, &j->sc, d, &c->r, NULL);
    if (!s->measure) return;
    if (cli_check_memory(&c->r, -1, true, text, &j->e)) { /* the CPU engine measures */
        j->rc = SWEEP_INFEASIBLE;
        return;
    }
    data dt; /* the engine runs the same schedule, in its own process */
    data_synthetic_for(&dt, n, (uint64_t)s->seed);
    run_cfg rcfg = {.n = n, .p = &j->pl, .sched = j->cfg, .ops = &ops_cpu, .hp = exec_default_hparams(j->cfg.optimizer),
                    .seed = (uint64_t)s->seed, .iters = s->measure, .batches = data_batches(&dt)};
    run_forked(&rcfg, NULL, 0, &j->m);
    if (!j->m.ok) j->rc = SWEEP_INFEASIBLE, err_set(&j->e, "%s at batch %d: engine: %s", text, batch, j->m.err);
    c->measured = j->m.peak, c->us = j->m.median_us;
}

/* What job j holds, freed. */
static void sweep_job_free(sweep_job *j)
{
    if (!j->lowered) return;
    sched_free(&j->sc);
    plan_free(&j->pl);
    run_summary_free(&j->m);
    free(j->tl), free(j->tc);
    j->lowered = false;
}

/* Writes job j (computed for the same arguments) as the file's next run, unless it failed, and
 * frees it. si: a capacity search's result, or NULL. Returns j's status, or -1 when the write fails
 * (e says why). */
static int sweep_write(const spec *s, const net *n, const sim_device *d, const enc_calib *cal, int batch, int o, int p,
                       const search_info *si, h5_file *f, sweep_job *j, cell *c, err *e)
{
    int rc = j->rc;
    if (rc) *e = j->e;
    if (!j->lowered) return rc;
    h5_run run = {.kind = s->measure ? "train" : "sim", .n = n, .p = &j->pl, .plan = s->plans[p], .batch = batch,
                  .optimizer = s->optimizers[o], .device = d->name, .sim = &c->r, .timeline = j->tl,
                  .timeline_cat = j->tc, .n_timeline = j->sc.n_step, .steps = &j->sc, .measured = s->measure ? &j->m : NULL,
                  .backend = "cpu", .data = "synthetic", .seed = (uint64_t)s->seed, .search = si ? si->search : NULL,
                  .budget = si ? si->budget : 0, .max_value = si ? si->max_value : 0, .calibration = cal ? cal->source : NULL};
    if (!rc) rc = h5_write_run(f, &run, e);
    sweep_job_free(j);
    return rc;
}

/* Simulates plan p of the spec on net n at `batch` and writes the run (and its per-category
 * timeline). si: a capacity search's result, or NULL. Returns 0, SWEEP_INFEASIBLE when the
 * configuration cannot be run (e says why; nothing written) or -1 when the sweep cannot go on. */
static int sweep_one(const spec *s, const net *n, const sim_device *d, const enc_calib *cal, int batch, int o, int p,
                     const search_info *si, h5_file *f, cell *c, err *e)
{
    sweep_job j;
    sweep_compute(s, n, d, cal, batch, o, p, &j, c);
    return sweep_write(s, n, d, cal, batch, o, p, si, f, &j, c, e);
}

/* What the modes below share: the spec, its nets (net i at image k: nets[i * n_images + k]), the
 * device profile, the open file and the cells the tables are printed from. */
typedef struct {
    const spec *s;
    net *nets;
    const sim_device *d;
    const ops_table *ops;    /* run = train: the spec's backend, opened here (validate opens it in each plan's process) */
    const enc_calib *calib;  /* the spec's calibrate = FILE, or NULL */
    h5_file *f;
    cell *cells;
    long count, done;       /* jobs of this shard (of the whole sweep without --shard), and done */
    int shard, n_shards;    /* --shard I/N; 0/0: the whole sweep */
    bool quiet;
    infeasible_row *infeasible; /* configurations that could not be run, in sweep order */
    int n_infeasible, cap_infeasible;
    long written;           /* runs in the file */
} sweep_ctx;

/* Records a configuration that could not be run (why: e's message) in place of its runs
 * first..first + runs - 1, which stay unused, and carries on. plan: NULL for all of them. */
static void note_infeasible(sweep_ctx *c, long first, long runs, const net *n, int batch, int o, const char *plan,
                            const err *e)
{
    if (c->n_infeasible == c->cap_infeasible) {
        c->cap_infeasible = c->cap_infeasible ? 2 * c->cap_infeasible : 16;
        c->infeasible = err_realloc(c->infeasible, (size_t)c->cap_infeasible * sizeof *c->infeasible);
    }
    c->infeasible[c->n_infeasible++] = (infeasible_row){
        .first_run = (int)first, .runs = (int)runs, .net = err_strdup(n->name), .image_h = n->layers[0].h,
        .image_w = n->layers[0].w, .batch = batch, .optimizer = err_strdup(c->s->optimizers[o]),
        .plan = err_strdup(plan ? plan : "(every plan)"), .reason = err_strdup(e->msg)};
    if (!c->quiet) fprintf(stderr, "%sinfeasible, recorded and skipped: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", e->msg);
}

/* Whether job k of the whole sweep (a run; a configuration for validate) is this shard's, and if
 * so, names its first run: run (the run's place in the whole sweep). */
static bool is_mine(const sweep_ctx *c, long k) { return !c->n_shards || k % c->n_shards == c->shard - 1; }

static int own(sweep_ctx *c, long k, long run, bool *mine, err *e)
{
    *mine = is_mine(c, k);
    return *mine ? h5_set_next_run(c->f, run, e) : 0;
}

/* run = sim over the grid: the runs computed on every thread the engine would use (the timing
 * model's memo is the one thing a prediction writes: each thread has its own), each written by
 * thread 0 in the sweep's order as soon as it is ready, at most SWEEP_AHEAD runs ahead of the
 * writing. measure = K runs one at a time: the engine's timings want the machine to themselves. */
#define SWEEP_AHEAD 64
typedef struct {
    sweep_job job;
    atomic_bool ready;
} sweep_slot;

/* Where run k of the grid is: the plan varies fastest, then the optimizer, batch, image and net. */
static cell cell_of(const spec *s, long k)
{
    cell at = {.plan = (int)(k % s->n_plans)};
    k /= s->n_plans, at.opt = (int)(k % s->n_optimizers);
    k /= s->n_optimizers, at.batch = (int)(k % s->n_batches);
    k /= s->n_batches, at.image = (int)(k % s->n_images);
    at.net = (int)(k / s->n_images);
    return at;
}

static int sweep_grid(sweep_ctx *c, err *e)
{
    const spec *s = c->s;
    long jobs = spec_runs(s);
    int threads = s->measure ? 1 : engine_threads();
    sweep_slot *slot = err_calloc(SWEEP_AHEAD, sizeof *slot);
    atomic_long next = 0, written = 0; /* the next job to compute; jobs written */
    atomic_bool stop = false;
    int rc = 0;
#pragma omp parallel num_threads(threads)
    {
        sim_device dev = *c->d; /* this thread's: the timing model's memo its own */
        timing_model view;
        if (c->d->model) view = timing_share(c->d->model), dev.model = &view;
        bool writer = omp_get_thread_num() == 0;
        while (!atomic_load(&stop)) {
            long w = atomic_load(&written);
            if (writer && w == jobs) break;
            sweep_slot *sl = &slot[w % SWEEP_AHEAD];
            if (writer && w < jobs && atomic_load_explicit(&sl->ready, memory_order_acquire)) { /* the next run, in order */
                const cell at = cell_of(s, w);
                const net *n = &c->nets[at.net * s->n_images + at.image];
                cell *cl = &c->cells[w];
                bool mine;
                int r = own(c, w, w, &mine, e);
                if (!r && mine) r = sweep_write(s, n, &dev, c->calib, s->batches[at.batch], at.opt, at.plan, NULL, c->f, &sl->job, cl, e);
                if (r == SWEEP_INFEASIBLE) note_infeasible(c, w, 1, n, s->batches[at.batch], at.opt, s->plans[at.plan], e);
                if (r < 0) rc = -1, atomic_store(&stop, true);
                cl->infeasible = r == SWEEP_INFEASIBLE, c->written += mine && !r, c->done += mine;
                atomic_store_explicit(&sl->ready, false, memory_order_relaxed);
                atomic_store(&written, w + 1);
                if (mine && !c->quiet) cli_progress("runs", (int)c->done, (int)c->count);
                continue;
            }
            long k = atomic_load(&next), limit = w + SWEEP_AHEAD < jobs ? w + SWEEP_AHEAD : jobs;
            while (k < limit && !atomic_compare_exchange_weak(&next, &k, k + 1)) {}
            if (k < limit) { /* computed here, written by thread 0 */
                cell *cl = &c->cells[k];
                sweep_slot *to = &slot[k % SWEEP_AHEAD];
                to->job = (sweep_job){0};
                if (is_mine(c, k)) {
                    *cl = cell_of(s, k);
                    sweep_compute(s, &c->nets[cl->net * s->n_images + cl->image], &dev, c->calib, s->batches[cl->batch], cl->opt,
                                  cl->plan, &to->job, cl);
                }
                atomic_store_explicit(&to->ready, true, memory_order_release);
            } else if (!writer && k >= jobs) {
                break;
            } else {
                sched_yield(); /* the window is full, or the next run to write is still being computed */
            }
        }
        if (c->d->model) timing_unshare(&view);
    }
    for (long k = atomic_load(&written); k < atomic_load(&next); k++) sweep_job_free(&slot[k % SWEEP_AHEAD].job); /* stopped */
    free(slot);
    return rc;
}

/* run = sim with search: the largest batch (at each image) or square input (at each batch) per budget. */
static int sweep_search(sweep_ctx *c, err *e)
{
    const spec *s = c->s;
    bool by_image = !strcmp(s->search, "image");
    char text[PLAN_TEXT_LEN + 64];
    long job = 0;
    bool mine;
    for (int i = 0; i < s->n_nets; i++)
        for (int k = 0; k < (by_image ? s->n_batches : s->n_images); k++)
            for (int o = 0; o < s->n_optimizers; o++)
                for (int p = 0; p < s->n_plans; p++)
                    for (int g = 0; g < s->n_budgets; g++, job++) {
                        if (own(c, job, job, &mine, e)) return -1;
                        if (!mine) continue;
                        cell *cl = &c->cells[job];
                        *cl = (cell){.net = i, .image = by_image ? 0 : k, .batch = by_image ? k : 0, .opt = o, .plan = p};
                        cli_plan_text(s->plans[p], s->bn, text, sizeof text);
                        cli_probe pr = {.net_name = s->nets[i], .plan_text = text, .image = by_image ? 0 : s->images[k],
                                        .image_w = by_image ? 0 : s->images_w[k],
                                        .batch = by_image ? s->batches[k] : 0, .budget = s->budgets[g]};
                        cli_parse_optimizer(s->optimizers[o], &pr.cfg.optimizer);
                        pr.cfg.calib = c->calib;
                        int best = cli_max_fit(&pr, by_image);
                        /* the run describes the largest configuration that fits (or the smallest tried) */
                        net at;
                        int image = by_image ? (best ? best : 0) : s->images[k], batch = by_image ? s->batches[k] : (best ? best : 1);
                        search_info si = {s->search, s->budgets[g], best};
                        cl->max_value = best;
                        if (cli_load_net(&at, s->nets[i], image, by_image ? 0 : s->images_w[k], e)) return -1;
                        int rc = sweep_one(s, &at, c->d, c->calib, batch, o, p, &si, c->f, cl, e);
                        if (rc == SWEEP_INFEASIBLE) note_infeasible(c, job, 1, &at, batch, o, s->plans[p], e);
                        cl->infeasible = rc == SWEEP_INFEASIBLE, c->written += !rc;
                        net_free(&at);
                        if (rc < 0) return -1;
                        c->done++;
                        if (!c->quiet) cli_progress("searches", (int)c->done, (int)c->count);
                    }
    return 0;
}

/* run = validate (one lrcnn validate per configuration) or run = train (one lrcnn train -o per
 * configuration and plan). Returns a CLI status. */
static int sweep_engine(sweep_ctx *c, err *e)
{
    const spec *s = c->s;
    long job = 0, configs = (long)s->n_nets * s->n_images * s->n_batches * s->n_optimizers;
    long per_config = spec_runs(s) / configs; /* validate: the plans, and layer where they lack it */
    bool mine;
    for (int i = 0; i < s->n_nets; i++)
        for (int k = 0; k < s->n_images; k++)
            for (int b = 0; b < s->n_batches; b++)
                for (int o = 0; o < s->n_optimizers; o++) {
                    const net *n = &c->nets[i * s->n_images + k];
                    sched_cfg cfg = {.batch = s->batches[b], .calib = c->calib};
                    cli_parse_optimizer(s->optimizers[o], &cfg.optimizer);
                    if (s->run == SPEC_VALIDATE) {
                        if (own(c, job, job * per_config, &mine, e)) return CLI_USAGE;
                        job++;
                        if (!mine) continue;
                        cli_validate_job j = {.n = n, .plans = s->plans, .n_plans = s->n_plans, .bn = s->bn, .cfg = cfg,
                                              .iters = s->measure, .seed = (uint64_t)s->seed, .host_budget = -1, .dev = c->d,
                                              .backend = s->backend, .profile = true, .quiet = c->quiet};
                        if (cli_validate_run(&j, c->f, e) != CLI_OK) note_infeasible(c, (job - 1) * per_config, per_config, n, cfg.batch, o, NULL, e);
                        else c->written += per_config;
                        if (!c->quiet) printf("\n");
                        continue;
                    }
                    for (int p = 0; p < s->n_plans; p++, job++) {
                        if (own(c, job, job, &mine, e)) return CLI_USAGE;
                        if (!mine) continue;
                        cli_train_job j = {.n = n, .plan = s->plans[p], .bn = s->bn, .cfg = cfg, .ops = c->ops,
                                           .iters = s->measure, .seed = (uint64_t)s->seed, .host_budget = -1, .dev = c->d,
                                           .quiet = c->quiet};
                        if (cli_train_run(&j, c->f, e) != CLI_OK) note_infeasible(c, job, 1, n, cfg.batch, o, s->plans[p], e);
                        else c->written++;
                        if (!c->quiet) printf("\n");
                    }
                }
    c->done = c->count;
    return CLI_OK;
}

/* Loads the spec's nets, parses every plan for each and lowers it (at the first batch, with each
 * optimizer), so that a bad spec — a plan some net cannot take — fails before a file exists; what
 * fails later is a configuration this machine cannot run, recorded in /infeasible. */
static int sweep_check(const spec *s, net *nets, const enc_calib *cal, err *e)
{
    char text[PLAN_TEXT_LEN + 64];
    for (int i = 0; i < s->n_nets; i++)
        for (int k = 0; k < s->n_images; k++)
            if (cli_load_net(&nets[i * s->n_images + k], s->nets[i], s->images[k], s->images_w[k], e))
                return err_wrap(e, "%s", s->path);
    for (int i = 0; i < s->n_nets * s->n_images; i++)
        for (int p = 0; p < s->n_plans; p++) {
            plan pl;
            cli_plan_text(s->plans[p], s->bn, text, sizeof text);
            bool named = cli_plan_named(s->plans[p]); /* found per cell: one where nothing fits is infeasible */
            if (named ? cli_plan_check(&nets[i], s->plans[p], s->bn, e) : plan_parse(&pl, &nets[i], text, e))
                return err_wrap(e, "%s:%d: %s at %dx%d", s->path, s->plans_line, nets[i].name, nets[i].layers[0].h, nets[i].layers[0].w);
            if (named) continue;
            int rc = 0;
            for (int o = 0; o < s->n_optimizers && !rc; o++) {
                sched sc;
                sched_cfg cfg = {.batch = s->batches[0], .calib = cal};
                cli_parse_optimizer(s->optimizers[o], &cfg.optimizer);
                if (!(rc = pipeline_lower(&sc, &nets[i], &pl, &cfg, e))) sched_free(&sc);
            }
            if (!rc) cli_warn_plan(&pl, &nets[i]);
            plan_free(&pl);
            if (rc) return err_wrap(e, "%s:%d: %s at %dx%d", s->path, s->plans_line, nets[i].name, nets[i].layers[0].h, nets[i].layers[0].w);
        }
    return 0;
}

/* The spec's text as 16 hex digits (64-bit FNV-1a), so that lrcnn merge can tell parts of one spec
 * from parts of another saved under the same name. */
static int spec_digest(const char *path, char *out, size_t len, err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return err_set(e, "%s: cannot open spec (%s)", path, strerror(errno));
    uint64_t h = 14695981039346656037ull;
    for (int ch; (ch = getc(f)) != EOF;) h = (h ^ (uint64_t)(unsigned char)ch) * 1099511628211ull;
    bool bad = ferror(f);
    fclose(f);
    if (bad) return err_set(e, "%s: cannot read spec", path);
    snprintf(out, len, "%016llx", (unsigned long long)h);
    return 0;
}

/* The root attributes that say which sweep (and which part of it) a file holds. */
static int write_provenance(const sweep_ctx *c, const char *spec_path, err *e)
{
    char digest[32], where[4096];
    machine_portable_path(spec_path, where, sizeof where); /* the same text on every checkout */
    if (spec_digest(spec_path, digest, sizeof digest, e) || h5_set_root_attr(c->f, "spec", where, e) ||
        h5_set_root_attr(c->f, "experiment", c->s->name, e) || h5_set_root_attr(c->f, "spec_digest", digest, e))
        return -1;
    if (!c->n_shards) return 0;
    char part[32];
    snprintf(part, sizeof part, "%d/%d", c->shard, c->n_shards);
    if (h5_set_root_attr(c->f, "shard", part, e)) return -1;
    return h5_attr_int(h5_root(c->f), "sweep_runs", (int)spec_runs(c->s), e);
}

/* Jobs of the whole sweep: runs, or configurations for validate (one lrcnn validate each). */
static long sweep_jobs(const spec *s)
{
    if (s->run != SPEC_VALIDATE) return spec_runs(s);
    return (long)s->n_nets * s->n_images * s->n_batches * s->n_optimizers;
}

/* Runs spec_path into out (NULL: from the spec), all of it or shard I of n (n = 0: all). Returns a
 * CLI status. */
static int sweep_run(const char *cmd, const char *spec_path, const char *out, bool overwrite, bool quiet, int shard,
                     int n_shards)
{
    err e;
    spec s;
    if (spec_load(&s, spec_path, &e)) return cli_fail(cmd, "%s", e.msg);
    char path[512];
    if (out) snprintf(path, sizeof path, "%s", out);
    else if (s.output[0]) snprintf(path, sizeof path, "%s", s.output);
    else snprintf(path, sizeof path, "results/%s.h5", s.name);
    /* the default place: results/ here, made if missing (and removed again if nothing lands in it) */
    bool made_dir = !out && !s.output[0] && mkdir("results", 0777) == 0;
    int n_nets = s.n_nets * s.n_images, rc = CLI_USAGE;
    sim_device dev;
    timing_model tm;
    /* engine runs take no device = (spec.c): their backend's roofline */
    const char *device = s.run == SPEC_SIM ? s.device : cli_engine_device(s.backend);
    bool dev_ok = cli_load_device(device, s.profile[0] ? s.profile : NULL, &dev, &tm, &e) == 0;
    if (!dev_ok) err_wrap(&e, "%s", spec_path);
    sweep_ctx c = {.s = &s, .d = dev_ok ? &dev : NULL, .ops = &ops_cpu, .nets = err_calloc((size_t)n_nets, sizeof(net)),
                   .count = spec_runs(&s), .shard = shard, .n_shards = n_shards, .quiet = quiet};
    /* a train spec's runs are in this process; a validate spec's each in a process of its own, which
     * opens the device itself: here it is only asked whether it opens (in a child) */
    if (c.d && s.run == SPEC_TRAIN && !(c.ops = ops_find(s.backend, true, &e))) c.d = NULL;
    if (c.d && s.run == SPEC_VALIDATE && ops_opens(s.backend, &e)) c.d = NULL;
    if (!c.d && s.run != SPEC_SIM && dev_ok) err_wrap(&e, "%s: backend = %s", spec_path, s.backend); /* e says why */
    if (c.d && s.run == SPEC_TRAIN && s.profile[0] && profile_algos_give(s.profile, c.ops, &e)) /* before any lowering */
        c.d = NULL, err_wrap(&e, "%s: profile = %s", spec_path, s.profile);
    c.cells = err_calloc((size_t)c.count, sizeof(cell));
    long jobs = sweep_jobs(&s);
    if (n_shards) /* this shard's jobs: those k < jobs with k mod N = I - 1 */
        c.count = (jobs - shard + n_shards) / n_shards;
    if (c.d && n_shards > jobs) {
        c.d = NULL; /* e says why */
        err_set(&e, "%s: --shard %d/%d: the sweep has %ld %s, fewer than %d parts", spec_path, shard, n_shards, jobs,
                s.run == SPEC_VALIDATE ? "configurations" : "runs", n_shards);
    }
    bool keep = s.run == SPEC_SIM && !s.measure; /* not where the engine measures RSS; undone below */
    enc_calib cal = {0};
    c.calib = s.calibrate[0] ? &cal : NULL;
    if (!c.d) { /* e says why */
    } else if (c.calib && calib_read(s.calibrate, &cal, &e)) {
        err_wrap(&e, "%s: calibrate", spec_path);
    } else if (!sweep_check(&s, c.nets, c.calib, &e) && !h5_create(&c.f, path, overwrite, &e) && !write_provenance(&c, spec_path, &e)) {
        if (keep) heap_tune(HEAP_SWEEP);
        if (!quiet && s.run == SPEC_SIM) cli_progress(s.search[0] ? "searches" : "runs", 0, (int)c.count); /* the clock starts */
        if (s.run != SPEC_SIM) rc = sweep_engine(&c, &e);
        else rc = (s.search[0] ? sweep_search : sweep_grid)(&c, &e) ? CLI_USAGE : CLI_OK;
        if (keep) heap_tune(HEAP_DEFAULT);
        if (s.measure && c.written) cli_warn_load(); /* the engine timed something */
        if (rc != CLI_OK) err_wrap(&e, "%s", spec_path); /* which spec a run failed in */
    }
    if (rc == CLI_OK && c.n_infeasible && !c.written && !n_shards) {
        err_set(&e, "%s: no configuration could be run; the first: %s", spec_path, c.infeasible[0].reason);
        rc = CLI_USAGE;
    }
    if (rc == CLI_OK && c.n_infeasible && h5_write_infeasible(c.f, c.infeasible, c.n_infeasible, &e)) rc = CLI_USAGE;
    if (rc == CLI_OK) {
        h5_file *f = c.f;
        c.f = NULL;
        if (h5_close(f, &e)) rc = CLI_USAGE;
    }
    if (c.f) h5_abort(c.f);
    /* a shard's tables would have holes: lrcnn export of the merged file has them whole */
    bool tables = rc == CLI_OK && s.run == SPEC_SIM && !quiet && !n_shards;
    if (tables && s.search[0]) sweep_print_capacity(&s, c.cells, c.count);
    else if (tables) sweep_print_tables(&s, &dev, c.nets, c.cells, c.count);
    if (rc == CLI_OK && n_shards)
        fprintf(stderr, "wrote %s (shard %d/%d: %ld of the sweep's %ld %s)\n", path, shard, n_shards, c.count, jobs,
                s.run == SPEC_VALIDATE ? "configurations" : "runs");
    else if (rc == CLI_OK) fprintf(stderr, "%swrote %s (%ld runs)\n", tables ? "\n" : "", path, c.written);
    if (rc == CLI_OK && c.n_infeasible)
        fprintf(stderr, "%d configuration%s could not be run: recorded in %s's /infeasible table, with the reason\n",
                c.n_infeasible, c.n_infeasible == 1 ? "" : "s", path);
    if (made_dir && rc != CLI_OK) rmdir("results");
    for (int i = 0; i < c.n_infeasible; i++) {
        infeasible_row *r = &c.infeasible[i];
        free(r->net), free(r->optimizer), free(r->plan), free(r->reason);
    }
    free(c.infeasible);
    for (int i = 0; i < n_nets; i++) net_free(&c.nets[i]);
    enc_calib_free(&cal);
    timing_free(&tm);
    free(c.nets);
    free(c.cells);
    spec_free(&s);
    return cli_status(cmd, rc, &e);
}

int cli_sweep_run(const char *cmd, const char *spec_path, const char *out, bool overwrite, bool quiet)
{
    return sweep_run(cmd, spec_path, out, overwrite, quiet, 0, 0);
}

/* "I/N" with 1 <= I <= N <= SPEC_MAX_RUNS. */
static int parse_shard(const char *v, int *shard, int *n)
{
    char a[16], b[16];
    const char *slash = strchr(v, '/');
    if (!slash || slash - v >= (long)sizeof a || strlen(slash + 1) >= sizeof b) return -1;
    snprintf(a, sizeof a, "%.*s", (int)(slash - v), v);
    snprintf(b, sizeof b, "%s", slash + 1);
    if (cli_parse_int(b, 1, SPEC_MAX_RUNS, n) || cli_parse_int(a, 1, *n, shard)) return -1;
    return 0;
}

int cli_sweep(int argc, char **argv)
{
    const char *spec_path = NULL, *out = NULL, *v;
    bool force = false, quiet = false;
    int shard = 0, n_shards = 0;
    for (int i = 1; i < argc; i++) {
        int got;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--force")) force = true;
        else if (!strcmp(argv[i], "--quiet")) quiet = true;
        else if ((got = cli_opt(argc, argv, &i, "-o", &v)) > 0) out = v;
        else if (got < 0) return cli_fail("sweep", "-o needs a file name");
        else if ((got = cli_opt(argc, argv, &i, "--shard", &v)) != 0) {
            if (got < 0 || parse_shard(v, &shard, &n_shards))
                return cli_fail("sweep", "--shard %s: expected I/N with 1 <= I <= N (e.g. --shard 2/3)", got < 0 ? "" : v);
        }
        else if (argv[i][0] == '-') return cli_fail("sweep", "unknown option '%s' (see lrcnn sweep --help)", argv[i]);
        else if (spec_path) return cli_fail("sweep", "one spec at a time (got '%s' and '%s')", spec_path, argv[i]);
        else spec_path = argv[i];
    }
    if (!spec_path) return cli_fail("sweep", "which spec? (e.g. lrcnn sweep experiments/baselines.spec)");
    return sweep_run("sweep", spec_path, out, force, quiet, shard, n_shards);
}

int cli_demo(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: lrcnn demo\n\nThe default experiment (experiments/demo.spec): a short real training run of VGG-16's\n"
                 "convolutional trunk (GAP head, 128x128, batch 8) under every plan preset on the CPU engine, its measured\n"
                 "peak beside the simulator's predictions; writes results/demo.h5 and results/demo_timeline.png\n"
                 "(replacing the previous demo's files). About two minutes on two cores.");
            return CLI_OK;
        }
        return cli_fail("demo", "unknown argument '%s' (lrcnn demo takes none)", argv[i]);
    }
    const char *out = LRCNN_SOURCE_DIR "/results/demo.h5";
    if (access(out, F_OK) == 0) fprintf(stderr, "replacing %s from the previous demo\n", out);
    int rc = cli_sweep_run("demo", LRCNN_SOURCE_DIR "/experiments/demo.spec", out, true, false);
    if (rc != CLI_OK) return rc;
    /* the memory timeline of every plan, drawn from the file just written */
    const char *draw = "cd '" LRCNN_SOURCE_DIR "' && d=$(mktemp -d) && /usr/bin/python3 plots/timeline.py --out \"$d\" results/demo.h5 "
                       ">/dev/null && mv \"$d/timeline.png\" results/demo_timeline.png && rm -rf \"$d\"";
    if (system(draw) != 0) return cli_fail("demo", "could not draw results/demo_timeline.png (plots/timeline.py)");
    fprintf(stderr, "wrote %s/results/demo_timeline.png\n", LRCNN_SOURCE_DIR);
    return CLI_OK;
}
