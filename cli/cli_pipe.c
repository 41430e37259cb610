/* lrcnn pipe: the memory and time of pipelined model-parallel training (sim/predict/pipe.h) — a
 * net cut into stages over devices, a batch into micro-batches, one of three schedules — per
 * device and for the iteration, from one lowering of the net at the micro-batch size under a plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "engine/pipe_run.h"
#include "io/data.h"
#include "io/units.h"
#include "sim/lower/pipeline.h"
#include "sim/planner/pipe_split.h"

static const char usage[] =
    "usage: lrcnn pipe --net NET --devices P --micro-batches M [--schedule gpipe|1f1b|interleaved] [--chunks V]\n"
    "                  [--batch N] [--image S|HxW] [--optimizer sgd|adam] [--plan PLAN] [--bn MODE]\n"
    "                  [--profile PROFILE.h5 | --device NAME] [--link nvlink|pcie4|pcie5|ib|GBPS] [--run]\n"
    "                  [--budget BYTES [--candidates PLAN,PLAN,... [--solver dp|ilp]]]\n"
    "\n"
    "Pipelined model parallelism: the net cut at clean cuts into P stages (V a device, interleaved)\n"
    "balancing their forward times, the batch N into M micro-batches of N/M, and each device running its\n"
    "stages' forwards and backwards in the schedule's order (gpipe: every forward, then every backward;\n"
    "1f1b: PipeDream-Flush; interleaved: Megatron-LM's 1F1B over V chunks a device, M a multiple of P).\n"
    "From that order the command walks how many micro-batches each device holds at once, and prints per\n"
    "device: its stages, micro-batches in flight at the peak, what a stage keeps per micro-batch (its\n"
    "backward's reads under PLAN), its parameters, gradients and optimizer state, and two peaks: the replay\n"
    "of the device's own schedule, step by step (its ops in order, each micro-batch on its own buffers,\n"
    "what it receives arriving before its first use: exact, what the --budget search holds to B), and\n"
    "the stage sums (persistent + the stashes in flight + the running stage's working bytes: a quick\n"
    "estimate, most often equal or over). --run: one iteration on the CPU engine, P engines in one\n"
    "process exchanging the activations and gradients at the cuts, on a synthetic batch, each device's\n"
    "measured peak beside them. Then the iteration's time (each device in its order, an op when its input has crossed the\n"
    "link) and the bubble. Stage times come from the device's model (--profile, else the --device\n"
    "roofline, cpu by default); the link between devices: nvlink 450 GB/s (NVLink 4, H100), pcie4 25,\n"
    "pcie5 50, ib 50 (InfiniBand NDR 400 Gb/s), or GB/s. --budget B (GPipe and 1F1B): the stages instead\n"
    "from a dynamic program over the clean cuts, the split whose slowest stage (forward and backward of\n"
    "a micro-batch) is fastest with every device's peak within B; exit 2 naming the least budget any\n"
    "split needs when none fits. --candidates LIST (with --budget): each stage may run its own plan, any\n"
    "candidate's segments over its layers (its ends outside that candidate's row and checkpoint segments);\n"
    "the split and the plans chosen together, by a dynamic program (--solver dp) or an integer program\n"
    "through GLPK (--solver ilp), the same answer; each stage's plan is printed, and the whole net's\n"
    "runs as --plan would; --candidates default: " PIPE_CANDIDATES ", those the net's sizes allow.\n"
    "lrcnn plan --pipeline P is this with --devices P (and --candidates default). Defaults: --schedule 1f1b --chunks 1 --plan layer --batch 32\n"
    "--optimizer sgd --link nvlink.\n"
    "\n"
    "example: lrcnn pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 --schedule 1f1b\n"
    "example: lrcnn pipe --net vgg16 --devices 2 --micro-batches 4 --schedule interleaved --chunks 2 --plan ckpt-sqrt\n"
    "example: lrcnn pipe --net resnet50 --devices 4 --micro-batches 8 --batch 32 --budget 300MiB --plan ckpt-sqrt\n"
    "example: lrcnn pipe --net vgg16 --image 64 --batch 8 --devices 2 --micro-batches 4 --run\n"
    "example: lrcnn pipe --net vgg16 --devices 4 --micro-batches 8 --batch 32 --budget 1GiB --candidates layer,ckpt-sqrt,2ps:4,overl:4\n";

/* GB/s of a named link, or a number; -1 if neither. */
static double link_gbps(const char *s)
{
    static const struct { const char *name; double gbps; } links[] = {{"nvlink", 450}, {"pcie4", 25}, {"pcie5", 50}, {"ib", 50}};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++)
        if (!strcmp(s, links[i].name)) return links[i].gbps;
    char *end;
    double v = strtod(s, &end);
    return end != s && !*end && v > 0 && v < 1e6 ? v : -1;
}

/* Each device's schedule replayed (pipe_sched.h), into replay[P]; and with `run`, one iteration on
 * the CPU engine, its measured peaks into measured[P]. -1 (e) when the plan's schedule does not
 * compose (a segment across a cut, moves to the host). */
static int exact_peaks(const net *n, const plan *p, const sched_cfg *cfg, const pipe_cfg *c, const int *first, bool run, int64_t *replay,
                       int64_t *measured, err *e)
{
    if (run) {
        data dt;
        data_synthetic_for(&dt, n, 7);
        int N = cfg->batch * c->micro;
        float *img = calloc((size_t)N * n->layers[0].c * n->layers[0].h * n->layers[0].w + 1, sizeof *img);
        int64_t *lab = calloc((size_t)(N * net_labels_per_image(n)) + 1, sizeof *lab);
        if (!img || !lab) abort();
        data_batch(&dt, 0, N, img, lab);
        pipe_run_result r;
        int rc = pipe_run(n, p, cfg->optimizer, N, c, first, &ops_cpu, img, lab, 3, &r, e);
        for (int d = 0; !rc && d < c->devices; d++) replay[d] = r.dev[d].replay, measured[d] = r.dev[d].measured;
        if (!rc) pipe_run_free(&r);
        free(img), free(lab);
        data_free(&dt);
        return rc;
    }
    sched whole;
    if (pipeline_lower(&whole, n, p, cfg, e)) return -1;
    int rc = 0;
    for (int d = 0; !rc && d < c->devices; d++)
        if ((replay[d] = pipe_device_peak_exact(&whole, n, cfg, c, first, d, e)) < 0) rc = -1;
    sched_free(&whole);
    return rc;
}

static void print_devices(const pipe_cfg *c, const net *n, const pipe_stage *st, const int64_t *replay, const int64_t *measured)
{
    char a[32], b[32], d[32], r[32], m[32];
    printf("  %-6s %-36s %9s %11s %11s %11s %11s%s\n", "device", "stages (layers)", "in flight", "stash / mb", "persistent", "peak",
           "stage sums", measured ? "    measured" : "");
    int S = pipe_stages(c);
    for (int dev = 0; dev < c->devices; dev++) {
        int64_t persistent = 0, kept = 0;
        char names[256] = "";
        size_t at = 0;
        for (int s = dev; s < S; s += c->devices) {
            persistent += st[s].persistent, kept += st[s].stash;
            at += (size_t)snprintf(names + at, sizeof names - (at < sizeof names ? at : sizeof names), "%s%s..%s", at ? ", " : "",
                                   n->layers[st[s].first].name, n->layers[st[s].last].name);
        }
        printf("  %-6d %-36.36s %9d %11s %11s %11s %11s", dev, names, pipe_in_flight(c, dev, NULL, NULL, NULL),
               units_fmt_bytes(kept, a, sizeof a), units_fmt_bytes(persistent, b, sizeof b), replay[dev] < 0 ? "n/a" : units_fmt_bytes(replay[dev], r, sizeof r),
               units_fmt_bytes(pipe_device_peak(c, dev, st), d, sizeof d));
        if (measured) printf(" %11s", units_fmt_bytes(measured[dev], m, sizeof m));
        printf("\n");
    }
}

/* --candidates: the stages and a plan a stage (pipe_split.h, by dp or ilp) within `budget`; the whole
 * net's plan, each stage's share of a candidate, into *p (texts[k]: stage k's share). 0; 1 (e) when
 * nothing fits, naming the least budget; -1 (e) on bad input. */
static int search_stages(const net *n, const char *list, const char *bn, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c,
                         int64_t budget, bool ilp, plan *p, int *first, char **texts, char *how, size_t how_len, err *e)
{
    char **items;
    bool lenient = !strcmp(list, "default"); /* the default list: a candidate the net's sizes refuse is left out */
    int Q, rc = 0, P = c->devices, parsed = 0;
    if (plan_list_expand(lenient ? PIPE_CANDIDATES : list, &items, &Q, e)) return -1;
    int n_items = Q;
    plan *cand = calloc((size_t)Q, sizeof *cand);
    if (!cand) abort();
    for (int q = 0; q < Q && !rc; q++) {
        if (cli_plan_parse(&cand[parsed], n, items[q], bn, cfg, d, e)) {
            if (!lenient) rc = -1;
            continue;
        }
        /* levels are counted in a whole segment, which the stages split */
        if (cand[parsed].bn_levels || cand[parsed].bn_keep_every || cand[parsed].bn_pick[0]) {
            char mode[PLAN_BN_TEXT_LEN];
            rc = err_set(e, "candidate '%s': bn=%s counts the levels of a whole row segment, which a pipeline "
                            "splits across devices; use bn=%s", items[q], plan_bn_text(&cand[parsed], mode, sizeof mode),
                         plan_bn_name(cand[parsed].bn));
            plan_free(&cand[parsed]);
            break;
        }
        char *keep = items[q]; /* the names of the candidates kept, in order */
        items[q] = items[parsed], items[parsed++] = keep;
    }
    if (!rc && !parsed) rc = err_set(e, "no candidate plan applies to %s at this size", n->name);
    Q = parsed;
    pipe_table t = {0};
    pipe_answer a;
    pipe_answer_init(&a, P);
    double t0 = cli_now();
    if (!rc && !(rc = pipe_table_build(&t, n, cand, Q, cfg, d, c, e))) {
        double t1 = cli_now();
        rc = ilp ? pipe_split_ilp(&t, budget, 60, &a, e) : pipe_split_dp(&t, budget, &a);
        int ranges = 0;
        for (size_t k = 0; k < (size_t)(t.m + 1) * (size_t)(t.m + 1) * (size_t)Q; k++) ranges += t.ok[k];
        snprintf(how, how_len, "%d (range, candidate) pairs over %d clean cuts costed in %.0f ms; %s solved in %.1f ms", ranges, t.m - 1,
                 1e3 * (t1 - t0), ilp ? "the integer program (GLPK)" : "the dynamic program", 1e3 * (cli_now() - t1));
        if (rc == 1) {
            pipe_split_dp(&t, INT64_MAX, &a); /* nothing fits: the least any choice needs, from the dp's table */
            err_set(e, "pipeline: no split of %s into %d stages with a plan each from the %d candidates fits %.2f MiB a device; the least any needs is %.2f MiB",
                    n->name, P, Q, (double)budget / 1048576.0, (double)a.least / 1048576.0);
        }
    }
    if (!rc) { /* the whole net's plan: each stage's share of its candidate */
        char whole[PLAN_TEXT_LEN * 4] = "";
        size_t at = 0;
        for (int k = 0; k < P; k++) {
            char part[PLAN_TEXT_LEN * 2];
            plan_describe_range(&cand[a.which[k]], n, a.first[k], a.first[k + 1] - 1, part, sizeof part);
            texts[k] = malloc(strlen(part) + strlen(items[a.which[k]]) + 16);
            if (!texts[k]) abort();
            sprintf(texts[k], "%s (from %s)", part, items[a.which[k]]);
            at += (size_t)snprintf(whole + at, sizeof whole - (at < sizeof whole ? at : sizeof whole), "%s%s", k ? "; " : "", part);
        }
        snprintf(whole + (at < sizeof whole ? at : sizeof whole - 1), sizeof whole - (at < sizeof whole ? at : sizeof whole - 1), " bn=%s",
                 plan_bn_name(cand[0].bn));
        memcpy(first, a.first, sizeof(int) * (size_t)(P + 1));
        if (plan_parse(p, n, whole, e)) rc = -1;
    }
    pipe_answer_free(&a);
    pipe_table_free(&t);
    for (int q = 0; q < parsed; q++) plan_free(&cand[q]);
    free(cand);
    plan_list_free(items, n_items);
    return rc;
}

/* What the command found: the stages' costs, each device's exact peak (-1: n/a, for `why`) and
 * measured one (NULL: not run), each stage's share of the plan where one was chosen a stage (NULL:
 * one plan) with what the search cost, and the search's settings. */
typedef struct {
    const pipe_stage *st;
    const int64_t *replay, *measured;
    char **texts;
    const char *how, *why, *cands, *solver;
    int64_t budget;
    double gbps;
} pipe_found;

/* What the command prints: the configuration, each device, each stage's plan where one was chosen
 * a stage, the iteration's time. */
static void report(const cli_config *o, const cli_inputs *in, const pipe_cfg *c, const sched_cfg *cfg, const pipe_found *f)
{
    int S = pipe_stages(c);
    double *fw = calloc((size_t)S + 1, sizeof *fw), *bw = calloc((size_t)S + 1, sizeof *bw), *lk = calloc((size_t)S + 1, sizeof *lk);
    double *tail = calloc((size_t)c->devices + 1, sizeof *tail);
    if (!fw || !bw || !lk || !tail) abort();
    for (int s = 0; s < S; s++)
        fw[s] = f->st[s].fwd_us, bw[s] = f->st[s].bwd_us, lk[s] = (double)f->st[s].boundary / (f->gbps * 1e3),
        tail[pipe_device_of(c, s)] += f->st[s].update_us;
    double busy, span = pipe_makespan(c, fw, bw, lk, tail, &busy);
    char t[600];
    printf("%s @ %dx%d, batch %d in %d micro-batches of %d, %s, plan %s: %s over %d devices%s\n  time model: %s; link %g GB/s\n\n",
           in->n.name, in->n.layers[0].h, in->n.layers[0].w, o->batch, c->micro, cfg->batch, cli_optimizer_name(o->optimizer),
           f->cands ? "one a stage (below)" : o->plan ? o->plan : "layer", pipe_kind_name(c->kind), c->devices,
           c->kind == PIPE_INTERLEAVED ? ", interleaved" : "", cli_time_source(&in->dev, t, sizeof t), f->gbps);
    if (f->budget) {
        char b[32];
        printf("  stages: the split%s whose slowest stage is fastest with every device's peak within %s (%s)\n\n",
               f->cands ? ", and a plan a stage from the candidates," : "", units_fmt_bytes(f->budget, b, sizeof b), f->solver);
    }
    print_devices(c, &in->n, f->st, f->replay, f->measured);
    for (int k = 0; f->texts && k < S; k++) printf("  stage %d plan: %s\n", k, f->texts[k]);
    if (f->texts) printf("  search: %s\n", f->how);
    if (f->replay[0] < 0) printf("  peak n/a: %s\n", f->why);
    printf("\n  iteration  %.1f ms (%d micro-batches of %d); the devices compute %.1f%% of it (bubble %.1f%%)\n", span / 1e3, c->micro,
           cfg->batch, 100 * busy, 100 * (1 - busy));
    printf("  peak: the replay of the device's schedule, step by step; stage sums: persistent + the stashes of the\n"
           "  micro-batches in flight + the running stage's working bytes (a quick estimate)%s\n",
           f->measured ? "; measured: the CPU engine's\n  accounting allocator over one iteration, P engines in one process" : "");
    free(fw), free(bw), free(lk), free(tail);
}

int cli_pipe_as(const char *who, int argc, char **argv)
{
    cli_config o = {.batch = 32, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *devices = NULL, *micro = NULL, *sched_name = "1f1b", *chunks = NULL, *device = NULL, *link = "nvlink", *budget_s = NULL, *v;
    const char *cands = NULL, *solver = "dp";
    bool run = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        int got = cli_common(argc, argv, &i, who, &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--devices", &v)) > 0) devices = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--micro-batches", &v)) > 0) micro = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--schedule", &v)) > 0) sched_name = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--chunks", &v)) > 0) chunks = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--device", &v)) > 0) device = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--link", &v)) > 0) link = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--budget", &v)) > 0) budget_s = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--candidates", &v)) > 0) cands = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--solver", &v)) > 0) solver = v;
        else if (got == 0 && !strcmp(argv[i], "--run")) run = true, got = 1;
        if (got <= 0) return cli_unknown(who, argc, argv, i, got);
    }
    pipe_cfg c = {.chunks = 1};
    if (!o.net || !devices || !micro) return cli_fail(who, "--net, --devices and --micro-batches are required (see lrcnn pipe --help)");
    if (cli_parse_int(devices, 1, 64, &c.devices)) return cli_fail(who, "--devices %s: expected 1..64", devices);
    if (cli_parse_int(micro, 1, 4096, &c.micro)) return cli_fail(who, "--micro-batches %s: expected 1..4096", micro);
    if (chunks && cli_parse_int(chunks, 1, 16, &c.chunks)) return cli_fail(who, "--chunks %s: expected 1..16", chunks);
    int kind = pipe_kind_of(sched_name);
    if (kind < 0) return cli_fail(who, "--schedule %s: expected gpipe, 1f1b or interleaved", sched_name);
    c.kind = (pipe_kind)kind;
    double gbps = link_gbps(link);
    if (gbps < 0) return cli_fail(who, "--link %s: expected nvlink, pcie4, pcie5, ib or GB/s", link);
    if (o.iters || o.seed || o.host || o.calibrate || o.out) return cli_fail(who, "it predicts: --iters, --seed, -o and the like do not apply");
    err e, why = {0};
    int64_t budget = 0;
    if (budget_s && units_parse_bytes(budget_s, &budget)) return cli_fail(who, "--budget %s: expected bytes like 16GiB, 12G, 80e9", budget_s);
    if (pipe_check(&c, &e)) return cli_fail(who, "%s", e.msg);
    if (strcmp(solver, "dp") && strcmp(solver, "ilp")) return cli_fail(who, "--solver %s: expected dp or ilp", solver);
    if ((cands || strcmp(solver, "dp")) && !budget) return cli_fail(who, "--candidates and --solver choose stages under a --budget");
    if (cands && o.plan) return cli_fail(who, "--candidates and --plan: the candidates are the plans a stage may run");
    if (run && (device || o.profile)) return cli_fail(who, "--run runs the CPU engine: its peaks are the cpu device's (no --device or --profile)");
    if (o.batch % c.micro) return cli_fail(who, "--batch %d is not a multiple of --micro-batches %d", o.batch, c.micro);
    sched_cfg cfg = {.batch = o.batch / c.micro, .optimizer = o.optimizer};
    cli_inputs in;
    if (cli_inputs_load(&in, &o, device, &cfg, &e)) return cli_fail(who, "%s", e.msg);
    int S = pipe_stages(&c), rc = CLI_OK;
    int *first = calloc((size_t)S + 1, sizeof *first);
    pipe_stage *st = calloc((size_t)S + 1, sizeof *st);
    plan p;
    bool parsed = false;
    char **texts = NULL, how[256] = ""; /* a stage's share of the plan, where candidates were searched; the search's cost */
    int64_t *replay = calloc((size_t)c.devices + 1, sizeof *replay), *measured = calloc((size_t)c.devices + 1, sizeof *measured);
    if (!first || !st || !replay || !measured) abort();
    if (cands) {
        texts = calloc((size_t)S, sizeof *texts);
        if (!texts) abort();
        int r = search_stages(&in.n, cands, o.bn, &cfg, &in.dev, &c, budget, !strcmp(solver, "ilp"), &p, first, texts, how, sizeof how, &e);
        if (r) rc = cli_fail(who, "%s", e.msg);
        parsed = !r;
    } else if (cli_plan_parse(&p, &in.n, o.plan ? o.plan : "layer", o.bn, &cfg, &in.dev, &e)) {
        rc = cli_fail(who, "%s", e.msg);
    } else if (parsed = true, budget ? pipe_split(&in.n, &p, &cfg, &in.dev, &c, budget, first, &e) : pipe_balanced_cuts(&in.n, &p, &cfg, &in.dev, S, first, &e)) {
        rc = cli_fail(who, "%s", e.msg);
    }
    if (rc == CLI_OK && pipe_stage_costs(&in.n, &p, &cfg, &in.dev, first, S, st, &e)) rc = cli_fail(who, "%s", e.msg);
    else if (rc == CLI_OK && exact_peaks(&in.n, &p, &cfg, &c, first, run, replay, measured, &why)) {
        if (run) rc = cli_fail(who, "%s", why.msg);
        for (int d = 0; d < c.devices; d++) replay[d] = -1; /* the stage sums alone, and why */
    }
    if (parsed) plan_free(&p);
    pipe_found f = {st, replay, run ? measured : NULL, texts, how, why.msg, cands, solver, budget, gbps};
    if (rc == CLI_OK) report(&o, &in, &c, &cfg, &f);
    for (int k = 0; texts && k < S; k++) free(texts[k]);
    free(texts), free(replay), free(measured);
    free(first), free(st);
    cli_inputs_free(&in);
    return rc;
}

int cli_pipe(int argc, char **argv) { return cli_pipe_as("pipe", argc, argv); }
