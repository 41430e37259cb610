/* lrcnn plan: given a memory budget, either the fastest plan that fits it (the planner,
 * sim/planner/search.h), or, for each of a list of plans, the largest batch (--max-batch) or square input
 * (--max-image) that fits. The budget is compared with the replay peak (the engine's allocated
 * bytes); peaks grow monotonically with batch and input size, so a doubling search followed by
 * bisection finds the boundary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/run.h"
#include "engine/threads.h"
#include "io/data.h"
#include "sim/base/heap.h"
#include "sim/planner/offsel.h"
#include "sim/planner/search.h"


static const char *usage =
    "usage: lrcnn plan --budget BYTES --net NET [--image S|HxW] [--batch N] [--optimizer sgd|adam] [--bn MODE]\n"
    "                  [--profile PROFILE.h5 | --device NAME|PROFILE.h5] [--space KINDS] [--pareto OUT.h5] [--force]\n"
    "                  [--margin PCT] [--measure K] [--explain]\n"
    "       lrcnn plan --budget BYTES --net NET (--max-batch | --max-image) [--plan PLANS] [--image S|HxW] [--batch N]\n"
    "                  [--optimizer sgd|adam] [--bn MODE] [--calibrate RUNS.h5]\n"
    "       lrcnn plan --budget BYTES --net NET --offload-select [--window W] [--time-limit S] [--image S|HxW] [--batch N]\n"
    "                  [--optimizer sgd|adam] [--bn MODE] [--profile PROFILE.h5 | --device NAME|PROFILE.h5]\n"
    "       lrcnn plan --pipeline P --micro-batches M --budget BYTES --net NET [--schedule gpipe|1f1b]\n"
    "                  [--candidates PLANS] [--solver dp|ilp] [lrcnn pipe's options]\n"
    "\n"
    "--pipeline P (the fourth form): P devices in a pipeline, the stages and a plan a stage chosen\n"
    "together so that the slowest stage is fastest with every device within BYTES: lrcnn pipe --devices P\n"
    "--candidates PLANS (default: " PIPE_CANDIDATES ", those the net's sizes allow); see lrcnn pipe --help.\n"
    "\n"
    "The planner (first form): the plan with the least predicted iteration time whose predicted peak\n"
    "(replay: the engine's allocated bytes) fits BYTES (16GiB, 12G, 80e9 ...), as a plan any command\n"
    "takes, with its peak and time, beside the fastest preset that fits. It searches one set of plans that\n"
    "does not depend on the budget: every preset of the space; the splits of a dynamic program over the\n"
    "net's clean cuts (layer, ckpt, offload(all) or offload(conv) per segment; one table answers every\n"
    "memory); and each row stage (2PS or OverL, 2..8 bands, from the input to the first clean cut at each\n"
    "height, and to the last) followed by the DP's splits of the rest; on a device whose moves overlap\n"
    "compute, the offload lists of the third form's heuristics at vDNN's two peaks. A plan that does not\n"
    "fit is tried with its variants (bn=train-offload, bn=train-rebuild and bn=train-recompute for a row\n"
    "plan's BatchNorm stages unless --bn names a mode, and where every level offloaded or rebuilt fits,\n"
    "the fewest levels that do, bn=train-offload:K or bn=train-rebuild:K, every level rebuilt but\n"
    "one in 2 or 3, bn=train-rebuild/M, and, where every level offloaded fits, one level in 2, 3 or 4\n"
    "offloaded and the others rebuilt from it, bn=train:ro..., rro..., rrro...; +gist's lossless\n"
    "encodings). An answer with levels off the device is then refined a letter at a time\n"
    "(bn=train:LETTERS: k kept, o offloaded, r rebuilt) until no one-letter change that fits is faster\n"
    "and, where moving parameters, gradients\n"
    "or optimizer state off the device between uses could make it fit, +migrate. Every candidate is\n"
    "replayed and the answer is the fastest whose arena fits. So the answer's time never rises when the\n"
    "budget grows (by at most the margin below), it is never slower (predicted) than a preset of the\n"
    "space that fits, a budget a preset meets is never refused, and a refused budget names the space's\n"
    "smallest footprint, the same at every budget (tests/test_search.c guarantees). --space narrows it:\n"
    "a comma list of ckpt, offload, rows, gist, presets, migrate (all: the default; --space ckpt alone is\n"
    "optimal checkpointing, which every command takes as the plan ckpt-opt:B; presets alone: every\n"
    "preset). Times come from --profile (lrcnn calibrate), or the roofline of --device (cpu; h100-pcie4,\n"
    "h100-pcie5 and gh200 differ in the host link offload uses; gtx1650, jetson-nano, rpi4: memory-poor\n"
    "devices, docs/commands.md); with neither, from $LRCNN_PROFILE, else\n"
    "the project's own CPU profile (results/profile_cpu_b8_32.h5), as the answer says.\n"
    "--pareto writes every candidate and the memory/time frontier to OUT.h5 (searched at budgets from\n"
    "the smallest peak to layer's).\n"
    "A plan of the search is answered over the fastest preset that fits only when predicted faster by\n"
    "more than the time model can tell apart: 2.69x the median error of the profile's held-out checks\n"
    "(90% confidence that two predictions differ; sim/predict/timing.h), or --margin PCT percent (--margin 0:\n"
    "the predicted fastest, however close). On a roofline there is no such error: the margin is 0 (said).\n"
    "The answer's legend explains its source tag (preset, dp, rows, rows+dp, offsel, migrate). A budget below\n"
    "every plan's footprint exits 2 and names the smallest. --measure K runs the\n"
    "planner's plan and that preset on the CPU engine (K iterations each, in child processes) and prints\n"
    "their measured peaks and median times. --explain prints the plan layer by layer: how each runs (layer,\n"
    "ckpt, offload, rows and its bands), the bytes it keeps from forward to backward, moves to the host,\n"
    "its encoding, its migrated bytes, and the time of its steps, of which recomputation.\n"
    "\n"
    "Second form: for each plan, the largest batch (at --image, default the net's) or the largest square\n"
    "input (at --batch) whose predicted peak fits BYTES.\n"
    "\n"
    "Third form, offload selection (Beaumont, Eyraud-Dubois and Shilova's problem: which kept maps to move\n"
    "to the host, and when, so the iteration fits BYTES at the least time): vDNN's two policies beside a\n"
    "GLPK model of the problem solved by two relaxation heuristics (round: the LP relaxation rounded;\n"
    "dive: LP diving) and exactly (branch and bound, within --time-limit S seconds, default 10, against\n"
    "round's plan: when the limit stops it, its answer and the bound it proved, so the gap to the optimum\n"
    "is printed), each as an offload(...) plan any command takes, with its replayed peak and its time on\n"
    "the device (on a GPU device moves overlap compute; sim/planner/offsel.h). --window W (1..8, default\n"
    "8): the release delays and prefetch leads tried per layer.\n"
    "Defaults: --batch 8 --optimizer sgd --space all; --plan layer,ckpt-sqrt,vdnn-all,vdnn-conv,2ps:4,\n"
    "overl:4,2ps-h,overl-h.\n"
    "\n"
    "example: lrcnn plan --budget 1.6GiB --net vgg16 --image 224 --profile results/profile_cpu.h5\n"
    "example: lrcnn plan --max-batch --budget 12GiB --net vgg16 --plan layer,2ps:6,overl-h\n"
    "example: lrcnn plan --offload-select --budget 6GiB --net vgg16 --batch 32 --device h100-pcie4\n";

static int parse_space(const char *list, unsigned *space)
{
    static const struct { const char *name; unsigned bit; } kinds[] = {
        {"ckpt", SEARCH_CKPT}, {"offload", SEARCH_OFFLOAD}, {"rows", SEARCH_ROWS}, {"gist", SEARCH_GIST},
        {"presets", SEARCH_PRESETS}, {"migrate", SEARCH_MIGRATE}, {"all", SEARCH_ALL},
    };
    *space = 0;
    const char *at = list;
    while (*at) {
        size_t len = strcspn(at, ",");
        size_t k = 0;
        for (; k < sizeof kinds / sizeof *kinds; k++)
            if (strlen(kinds[k].name) == len && !strncmp(at, kinds[k].name, len)) break;
        if (k == sizeof kinds / sizeof *kinds) return -1;
        *space |= kinds[k].bit;
        at += len + (at[len] == ',');
    }
    return *space ? 0 : -1;
}

/* The searches behind --pareto: budgets spaced evenly in log from the smallest peak to layer's. */
static void pareto_points(search_req rq, const search_result *first, search_result *all, err *e)
{
    int cap = first->n_pts * 2 + 64, n = 0;
    search_point *pts = err_calloc((size_t)cap, sizeof *pts);
    int64_t lo = first->pts[first->least].footprint, hi = first->pts[0].footprint; /* pts[0] is layer */
    rq.place_all = true;
    for (int k = 0; k <= 16; k++) {
        rq.budget = (int64_t)((double)lo * pow((double)hi / (double)lo, k / 16.0)) + 1;
        search_result r;
        if (search_run(&rq, &r, e)) continue;
        for (int i = 0; i < r.n_pts; i++) {
            bool seen = !r.pts[i].placed; /* over that budget: no arena planned */
            for (int j = 0; j < n && !seen; j++) seen = !strcmp(pts[j].text, r.pts[i].text);
            if (seen) continue;
            if (n == cap) pts = err_realloc(pts, (size_t)(cap *= 2) * sizeof *pts);
            pts[n] = r.pts[i];
            pts[n++].text = err_strdup(r.pts[i].text);
        }
        search_free(&r);
    }
    *all = (search_result){.pts = pts, .n_pts = n, .best = -1, .least = -1};
}

/* --pareto: every candidate with its peak, time, source and whether it is on the frontier. */
static int write_pareto(const char *path, bool force, const search_req *rq, const search_result *all, err *e)
{
    typedef struct {
        const char *plan, *source;
        int64_t peak, arena;
        double time_us;
        int32_t frontier;
    } row;
    static const h5_field fields[] = {
        {"plan", offsetof(row, plan), 's'},     {"source", offsetof(row, source), 's'},
        {"peak", offsetof(row, peak), 'l'},     {"arena", offsetof(row, arena), 'l'},
        {"time_us", offsetof(row, time_us), 'd'}, {"frontier", offsetof(row, frontier), 'i'},
    };
    int nf;
    int *front = search_frontier(all->pts, all->n_pts, &nf);
    row *rows = err_calloc((size_t)all->n_pts + 1, sizeof *rows);
    for (int i = 0; i < all->n_pts; i++)
        rows[i] = (row){all->pts[i].text, all->pts[i].source, all->pts[i].peak, all->pts[i].footprint, all->pts[i].time_us, 0};
    for (int k = 0; k < nf; k++) rows[front[k]].frontier = 1;
    free(front);
    h5_file *f;
    hid_t g = H5I_INVALID_HID;
    int rc = -1;
    if (h5_create(&f, path, force, e)) {
        free(rows);
        return -1;
    }
    const net_layer *in = &rq->n->layers[0];
    H5_TRY(h5_set_root_attr(f, "kind", "pareto", e));
    H5_TRY(h5_set_root_attr(f, "net", rq->n->name, e));
    H5_TRY(h5_set_root_attr(f, "optimizer", cli_optimizer_name(rq->cfg.optimizer), e));
    H5_TRY(h5_set_root_attr(f, "device", rq->dev->name, e));
    H5_CHECK(g = H5Gcreate2(h5_root(f), "pareto", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(h5_attr_int(g, "batch", rq->cfg.batch, e));
    H5_TRY(h5_attr_int(g, "image_h", in->h, e));
    H5_TRY(h5_attr_int(g, "image_w", in->w, e));
    H5_TRY(h5_write_table(g, "points", rows, sizeof *rows, (hsize_t)all->n_pts, fields, (int)(sizeof fields / sizeof *fields), e));
    H5Gclose(g), g = H5I_INVALID_HID;
    rc = h5_close(f, e);
    f = NULL;
cleanup:
    if (g >= 0) H5Gclose(g);
    if (f) h5_abort(f);
    free(rows);
    return rc;
}

/* --measure K: plan `text` on the CPU engine for K iterations, in a child process. */
static int measure_plan(const search_req *rq, const char *text, int iters, run_summary *m, err *e)
{
    plan p;
    if (plan_parse(&p, rq->n, text, e)) return -1;
    data d;
    data_synthetic_for(&d, rq->n, 1);
    sched_cfg cfg = rq->cfg;
    cfg.ws = ops_cpu.ws;
    run_cfg rc = {.n = rq->n, .p = &p, .sched = cfg, .ops = &ops_cpu, .hp = exec_default_hparams(cfg.optimizer), .seed = 1,
                  .iters = iters, .batches = data_batches(&d)};
    run_forked(&rc, NULL, 0, m);
    plan_free(&p), data_free(&d);
    if (!m->ok) return err_set(e, "plan '%s': engine failed: %s", text, m->err);
    return 0;
}

/* The profile the planner times plans with when neither --profile nor --device names one: the
 * user's ($LRCNN_PROFILE), else the project's own CPU profile (calibrated at batch 8 and 32), where
 * the build's source tree has it; NULL: the roofline. */
static const char *default_profile(void)
{
    const char *user = getenv("LRCNN_PROFILE");
    if (user && *user) return user;
    static const char committed[] = LRCNN_SOURCE_DIR "/results/profile_cpu_b8_32.h5";
    return access(committed, R_OK) == 0 ? committed : NULL;
}

static int plan_search(const cli_config *o, int64_t budget, const char *space_list, const char *pareto, const char *device,
                       const double *margin, bool explain)
{
    heap_tune(HEAP_SWEEP); /* hundreds of schedules: page faults were a third of the search */
    unsigned space;
    if (parse_space(space_list, &space))
        return cli_fail("plan", "--space %s: expected a comma list of ckpt, offload, rows, gist, presets, migrate, all", space_list);
    if (pareto && !o->force && access(pareto, F_OK) == 0)
        return cli_fail("plan", "%s exists; use --force to overwrite", pareto);
    err e;
    cli_inputs inputs;
    search_req rq = {.cfg = {.batch = o->batch, .optimizer = o->optimizer}, .budget = budget, .space = space, .bn = o->bn,
                     .margin = margin, .threads = engine_threads()};
    cli_config oc = *o;
    const char *dflt = !o->profile && !device ? default_profile() : NULL;
    if (dflt) oc.profile = dflt;
    if (cli_inputs_load(&inputs, &oc, device, &rq.cfg, &e)) return cli_fail("plan", "%s", e.msg);
    const net *n = &inputs.n;
    const sim_device *dev = &inputs.dev;
    rq.n = n, rq.dev = dev;
    search_result r;
    int rc = CLI_OK;
    char a[32], b[32], t[600];
    if (search_run(&rq, &r, &e)) {
        rc = CLI_USAGE;
        goto done;
    }
    const net_layer *in = &n->layers[0];
    if (r.best < 0) {
        const search_point *l = &r.pts[r.least];
        err_set(&e, "no plan fits %s: the smallest footprint found is %s (%s; its arena, peak %s)", units_fmt_bytes(budget, a, sizeof a),
                units_fmt_bytes(l->footprint, b, sizeof b), l->text, units_fmt_bytes(l->peak, t, sizeof t));
        rc = CLI_USAGE;
    } else {
        const search_point *p = &r.pts[r.best];
        int pre = r.preset;
        printf("%s @ %dx%d, batch %d, %s, budget %s\n  time model: %s\n", n->name, in->h, in->w, o->batch,
               cli_optimizer_name(o->optimizer), units_fmt_bytes(budget, a, sizeof a), cli_time_source(dev, t, sizeof t));
        if (dflt)
            printf("  (the default profile: %s; --profile FILE for one of this machine, lrcnn calibrate; --device cpu for the roofline)\n",
                   dflt == getenv("LRCNN_PROFILE") ? "$LRCNN_PROFILE" : "the project's own, measured on a 2-core AMD EPYC VM");
        printf("\n");
        printf("  plan       %s\n  peak       %s (replay)\n  arena      %s (what it reserves: the budget is held to this)\n"
               "  time       %.1f ms per iteration (%s)\n", p->text, units_fmt_bytes(p->peak, a, sizeof a),
               units_fmt_bytes(p->footprint, b, sizeof b), p->time_us / 1e3, p->source);
        if (r.fastest != r.best)
            printf("  kept       over %s, predicted %.1f%% faster: within the margin of %.1f%% (%s)\n", r.pts[r.fastest].text,
                   100 * (p->time_us / r.pts[r.fastest].time_us - 1), 100 * r.margin,
                   margin ? "--margin" : "2.69x the median error of the time model's held-out checks");
        if (pre >= 0 && pre != r.best)
            printf("  vs preset  %s: arena %s, %.1f ms (%.2fx the planner's time)\n", r.pts[pre].text,
                   units_fmt_bytes(r.pts[pre].footprint, b, sizeof b), r.pts[pre].time_us / 1e3, r.pts[pre].time_us / p->time_us);
        else if (pre < 0 && (space & SEARCH_PRESETS))
            printf("  vs preset  none fits\n");
        printf("  searched   %d plans in %.3f s (%d thread%s)\n", r.n_pts, r.seconds, rq.threads, rq.threads == 1 ? "" : "s");
        if (explain && cli_explain(n, p->text, &rq.cfg, dev, &e)) rc = CLI_USAGE;
        /* --measure: both on the engine, the planner's first */
        int which[2] = {r.best, pre};
        run_summary m[2] = {0};
        for (int k = 0; k < 2 && o->iters && rc == CLI_OK; k++) {
            if (which[k] < 0 || (k == 1 && which[1] == which[0])) continue;
            if (measure_plan(&rq, r.pts[which[k]].text, o->iters, &m[k], &e)) rc = CLI_FAILED;
            else
                printf("  measured   %s: peak %s (%s the budget), %.1f ms per iteration (median of %d after the first; "
                       "predicted %+.1f%%)\n", k ? "preset " : "planner", units_fmt_bytes(m[k].peak, a, sizeof a),
                       m[k].peak <= budget ? "within" : "OVER", m[k].median_us / 1e3, o->iters - 1,
                       100 * (r.pts[which[k]].time_us - m[k].median_us) / m[k].median_us);
        }
        if (o->iters && rc == CLI_OK) cli_warn_load();
        if (rc == CLI_OK && o->iters && pre >= 0 && pre != r.best)
            printf("  measured   speed-up over the preset: %.3fx\n", m[1].median_us / m[0].median_us);
        run_summary_free(&m[0]), run_summary_free(&m[1]);
        /* the legend: where a plan comes from, and the margin it was chosen with */
        printf("\n  (%s): where the plan came from: preset; dp, the dynamic program over clean cuts; rows, a row stage;\n"
               "  rows+dp, a row stage then the DP; offsel, an offload list (which maps move, when); migrate, a plan\n"
               "  +migrate. A plan other than a preset is answered\n"
               "  only when predicted faster than the fastest preset that fits by more than the margin: %.1f%%,\n  %s.\n",
               p->source, 100 * r.margin,
               margin ? "set by --margin" : dev->model ? "2.69x the median error of the time model's held-out checks"
                                                       : "no calibrated time model, so the predicted fastest however close (--profile gives one)");
        if (!dev->model && !margin && pre >= 0 && pre != r.best)
            printf("  NOTE: uncalibrated roofline times: this plan is answered over %s on a predicted %.1f%% edge that no\n"
                   "  measurement backs (a roofline is often tens of percent off); calibrate (lrcnn calibrate) and pass\n"
                   "  --profile, or --margin PCT to ask for a larger edge.\n",
                   r.pts[pre].text, 100 * (1 - p->time_us / r.pts[pre].time_us));
    }
    if (rc == CLI_OK && pareto) {
        search_result all;
        pareto_points(rq, &r, &all, &e);
        if (write_pareto(pareto, o->force, &rq, &all, &e)) rc = CLI_USAGE;
        else fprintf(stderr, "wrote %s (%d plans)\n", pareto, all.n_pts);
        search_free(&all);
    }
    search_free(&r);
done:
    cli_inputs_free(&inputs);
    return cli_status("plan", rc, &e);
}

/* The third form: vDNN's policies, then each offsel method, at one budget. */
static int plan_offload_select(const cli_config *o, int64_t budget, const char *device, int window, double limit)
{
    heap_tune(HEAP_SWEEP);
    err e;
    cli_inputs inputs;
    sched_cfg cfg = {.batch = o->batch, .optimizer = o->optimizer};
    if (cli_inputs_load(&inputs, o, device, &cfg, &e)) return cli_fail("plan", "%s", e.msg);
    const net *n = &inputs.n;
    const net_layer *in = &n->layers[0];
    char a[32], b[32], t[600];
    printf("%s @ %dx%d, batch %d, %s, budget %s: offload selection\n  time model: %s%s\n\n", n->name, in->h, in->w, o->batch,
           cli_optimizer_name(o->optimizer), units_fmt_bytes(budget, a, sizeof a), cli_time_source(&inputs.dev, t, sizeof t),
           inputs.dev.overlap ? "; moves overlap compute on a copy engine" : "; moves in line");
    printf("  %-10s %12s %5s %11s %11s %9s %6s  %s\n", "method", "peak", "fits", "time (ms)", "model (ms)", "solver", "maps",
           "plan");
    int rc = CLI_OK;
    double bound = NAN, exact_us = NAN;
    bool proven = false;
    for (int k = 0; k < 5 && rc == CLI_OK; k++) {
        offsel_result r = {0};
        const char *name = k < 2 ? (k ? "vdnn-conv" : "vdnn-all") : offsel_method_name((offsel_method)(k - 2));
        char text[PLAN_TEXT_LEN + 64], solver[32] = "-", maps[16] = "-";
        if (k >= 2) {
            offsel_req rq = {.n = n, .cfg = cfg, .dev = &inputs.dev, .prefix = "", .first = 1, .bn = o->bn, .budget = budget,
                             .window = window, .time_limit_s = limit};
            if (offsel_solve(&rq, (offsel_method)(k - 2), &r, &e)) {
                rc = CLI_USAGE;
                break;
            }
            bound = r.bound_us;
            if (k == 4 && r.found) exact_us = r.model_us, proven = r.optimal;
            snprintf(solver, sizeof solver, "%.2f s%s", r.seconds, k == 4 && r.found && !r.optimal ? "+" : "");
            snprintf(maps, sizeof maps, "%d/%d", r.chosen, r.candidates);
            if (!r.found) {
                printf("  %-10s %12s %5s %11s %11s %9s %6s  %s\n", name, "-", "-", "-", "-", solver, maps,
                       k == 4 && !isnan(r.bound_us) ? "none found in the time limit" : "nothing fits the model");
                offsel_result_free(&r);
                continue;
            }
        }
        cli_plan_text(k < 2 ? name : r.text, o->bn, text, sizeof text);
        sim_result sr;
        if (cli_simulate(n, text, &cfg, &inputs.dev, &sr, &e)) {
            rc = CLI_USAGE;
        } else {
            char model[32] = "-";
            if (k >= 2) snprintf(model, sizeof model, "%.1f", r.model_us / 1e3);
            printf("  %-10s %12s %5s %11.1f %11s %9s %6s  %.90s%s\n", name, units_fmt_bytes(sr.replay.peak, a, sizeof a),
                   sr.replay.peak <= budget ? "yes" : "NO", sr.time_us / 1e3, model, solver, maps, k < 2 ? name : r.text,
                   k >= 2 && strlen(r.text) > 90 ? "..." : "");
        }
        if (k >= 2 && rc == CLI_OK) fprintf(stderr, "%s: %s\n", name, r.text); /* whole, for scripts */
        offsel_result_free(&r);
    }
    if (rc == CLI_OK) {
        printf("\n  bound: no plan of the model is faster than %s ms (the LP relaxation's, raised by exact's branch and\n"
               "  bound as far as it got)", isnan(bound) ? "-" : (snprintf(b, sizeof b, "%.1f", bound / 1e3), b));
        if (proven) printf("; exact's plan is optimal for the model\n");
        else if (!isnan(exact_us) && !isnan(bound)) printf("; exact's plan is within %.1f%% of the optimum\n", 100 * (exact_us - bound) / exact_us);
        else printf("\n");
        printf("  solver + = time limit (--time-limit, default %.0f s) reached before proof; exact starts from round's plan\n"
               "  peak = replay; time = the device's model of the plan's schedule%s\n", OFFSEL_LIMIT_S,
               inputs.dev.overlap ? " (two streams: compute, and the link)" : "");
    }
    cli_inputs_free(&inputs);
    return cli_status("plan", rc, &e);
}

/* --max-batch (mode 1) or --max-image (mode 2): the largest batch or square input at which each of
 * `plans` fits pr->budget. */
/* "batch 3" (mode 1) or "a 64x64 input" (mode 2). */
static const char *at_text(int mode, int x, char *buf, size_t len)
{
    if (mode == 1) snprintf(buf, len, "batch %d", x);
    else snprintf(buf, len, "a %dx%d input", x, x);
    return buf;
}

static int plan_capacity(const cli_config *o, cli_probe *pr, const char *plans, int mode)
{
    const char *bn = o->bn;
    err e;
    net n;
    enc_calib cal; /* data-sized encodings at measured densities and ratios (sim --help) */
    if (cli_load_calib(o->calibrate, &cal, &pr->cfg, &e)) return cli_fail("plan", "%s", e.msg);
    if (cli_load_net(&n, pr->net_name, pr->image, pr->image_w, &e)) {
        enc_calib_free(&cal);
        return cli_fail("plan", "%s", e.msg);
    }
    if (!pr->image) pr->image = n.layers[0].h, pr->image_w = n.layers[0].w;
    char **items;
    int count;
    if (plan_list_expand(plans, &items, &count, &e)) {
        net_free(&n);
        enc_calib_free(&cal);
        return cli_fail("plan", "--plan: %s", e.msg);
    }
    /* every plan checked before the search: an unknown preset or layer is an error, not a plan that
     * fits nowhere. --max-batch at its input size; --max-image at the starting size or, failing
     * that (more bands than a small input has rows), at a large one */
    char (*texts)[PLAN_TEXT_LEN + 64] = err_calloc((size_t)count, sizeof *texts);
    for (int k = 0; k < count; k++) {
        cli_plan_text(items[k], bn, texts[k], sizeof texts[k]);
        int bad = cli_plan_check(&n, items[k], bn, &e);
        if (bad && mode == 2) {
            net big;
            err e2;
            if (!cli_load_net(&big, pr->net_name, 4096, 0, &e2)) {
                bad = cli_plan_check(&big, items[k], bn, &e2);
                net_free(&big);
            }
            if (!bad) continue;
        }
        if (bad) {
            plan_list_free(items, count);
            net_free(&n);
            enc_calib_free(&cal);
            free(texts);
            return cli_fail("plan", "%s", e.msg);
        }
    }
    /* every row found before anything prints: when no plan fits, one line on stderr and nothing here */
    cli_probe *rows = err_calloc((size_t)count, sizeof *rows);
    int *best = err_calloc((size_t)count, sizeof *best), fitting = 0, least = -1;
    for (int k = 0; k < count; k++) {
        rows[k] = *pr;
        rows[k].plan_text = texts[k];
        best[k] = cli_max_fit(&rows[k], mode == 2);
        fitting += best[k] > 0;
        if (!best[k] && rows[k].least && (least < 0 || rows[k].least < rows[least].least)) least = k;
    }
    const char *what = mode == 1 ? "batch" : "image";
    char a[32], b[32], c[32];
    int rc = CLI_OK;
    if (!fitting) {
        if (least < 0) rc = cli_fail("plan", "no plan can take %s at any %s", n.name, what);
        else rc = cli_fail("plan", "no plan fits %s: the smallest footprint is %s (%s at %s); raise --budget",
                           units_fmt_bytes(pr->budget, a, sizeof a), units_fmt_bytes(rows[least].least, b, sizeof b), items[least],
                           at_text(mode, rows[least].least_at, c, sizeof c));
    } else {
        printf("%s, budget %s, %s, %s\n\n", n.name, units_fmt_bytes(pr->budget, a, sizeof a), cli_optimizer_name(pr->cfg.optimizer),
               mode == 1 ? "largest batch" : "largest square input");
        printf("  %-18s %12s %14s\n", "plan", mode == 1 ? "max batch" : "max image", "arena there");
        for (int k = 0; k < count; k++) {
            char note[96] = "";
            if (!best[k] && rows[k].least)
                snprintf(note, sizeof note, "   needs %s at %s", units_fmt_bytes(rows[k].least, b, sizeof b),
                         at_text(mode, rows[k].least_at, c, sizeof c));
            if (best[k]) printf("  %-18s %12d %14s\n", items[k], best[k], units_fmt_bytes(rows[k].peak, b, sizeof b));
            else printf("  %-18s %12s %14s%s\n", items[k], "none", "-", note);
        }
        printf("\n  max %s = the largest %s whose footprint fits the budget; arena = that footprint: the device memory the\n"
               "  plan's static memory plan reserves, ", what, mode == 1 ? "batch" : "square input");
        if (mode == 1) printf("at image %dx%d", n.layers[0].h, n.layers[0].w);
        else printf("at batch %d", pr->batch);
        printf("; none = not even the smallest fits (needs: its footprint there)\n");
    }
    free(rows);
    free(best);
    plan_list_free(items, count);
    net_free(&n);
    enc_calib_free(&cal);
    free(texts);
    return rc;
}

/* lrcnn plan --pipeline P: lrcnn pipe --devices P, a plan a stage chosen from the candidates
 * (--candidates, else PIPELINE_CANDIDATES) under --budget. */

static int plan_pipeline(int argc, char **argv)
{
    char **v = calloc((size_t)argc + 3, sizeof *v);
    bool chosen = false;
    if (!v) abort();
    for (int i = 0; i < argc; i++) {
        v[i] = !strcmp(argv[i], "--pipeline") ? "--devices" : argv[i];
        chosen |= !strcmp(argv[i], "--candidates") || !strcmp(argv[i], "--plan");
    }
    int n = argc;
    if (!chosen) v[n++] = "--candidates", v[n++] = "default";
    int rc = cli_pipe_as("plan", n, v);
    free(v);
    return rc;
}

int cli_plan(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--pipeline")) return plan_pipeline(argc, argv);
    cli_config o = {.batch = 8, .optimizer = SCHED_SGD, .host_budget = -1};
    const char *budget = NULL, *space = NULL, *pareto = NULL, *device = NULL, *v;
    int mode = 0, window = 0;
    double limit = 0;
    bool select = false, explain = false;
    const char *window_s = NULL, *limit_s = NULL, *margin_s = NULL;
    double margin = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--offload-select") || !strcmp(argv[i], "--explain")) {
            *(argv[i][2] == 'o' ? &select : &explain) = true;
            continue;
        }
        if (!strcmp(argv[i], "--max-batch") || !strcmp(argv[i], "--max-image")) {
            mode = mode ? -1 : argv[i][6] == 'b' ? 1 : 2;
            continue;
        }
        int got = cli_common(argc, argv, &i, "plan", &o);
        if (got < 0) return CLI_USAGE;
        if (got) continue;
        if ((got = cli_opt(argc, argv, &i, "--budget", &v)) > 0) budget = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--space", &v)) > 0) space = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--pareto", &v)) > 0) pareto = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--device", &v)) > 0) device = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--window", &v)) > 0) window_s = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--time-limit", &v)) > 0) limit_s = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--margin", &v)) > 0) margin_s = v;
        else if (got == 0 && (got = cli_opt(argc, argv, &i, "--measure", &v)) > 0 && cli_parse_int(v, 2, 1000, &o.iters))
            return cli_fail("plan", "--measure %s: expected iterations 2..1000", v);
        if (got <= 0) return cli_unknown("plan", argc, argv, i, got);
    }
    const char *plans = o.plan ? o.plan : "layer,ckpt-sqrt,vdnn-all,vdnn-conv,2ps:4,overl:4,2ps-h,overl-h";
    cli_probe pr = {.net_name = o.net, .image = o.image, .image_w = o.image_w, .batch = o.batch, .cfg = {.batch = o.batch, .optimizer = o.optimizer}};
    if (mode < 0) return cli_fail("plan", "--max-batch and --max-image: one of them");
    if (!budget) return cli_fail("plan", "--budget is required (e.g. --budget 16GiB)");
    if (units_parse_bytes(budget, &pr.budget)) return cli_fail("plan", "--budget %s: expected bytes like 16GiB, 12G, 80e9 (at most 1 EiB)", budget);
    if (!pr.net_name) return cli_fail("plan", "--net is required");
    const char *stray = o.seed ? "--seed" : o.out ? "-o" : o.host ? "--host-budget" : NULL;
    if (stray) return cli_fail("plan", "%s does not apply to plan", stray);
    if ((window_s || limit_s) && !select) return cli_fail("plan", "%s applies with --offload-select", window_s ? "--window" : "--time-limit");
    if (window_s && cli_parse_int(window_s, 1, OFFSEL_WINDOW, &window))
        return cli_fail("plan", "--window %s: expected 1..%d", window_s, OFFSEL_WINDOW);
    if (limit_s) {
        char *end;
        limit = strtod(limit_s, &end);
        if (end == limit_s || *end || !(limit > 0 && limit <= 86400))
            return cli_fail("plan", "--time-limit %s: expected seconds in (0, 86400]", limit_s);
    }
    if (margin_s) {
        char *end;
        margin = strtod(margin_s, &end) / 100;
        if (end == margin_s || *end || !(margin >= 0 && margin <= 1))
            return cli_fail("plan", "--margin %s: expected a percentage 0..100", margin_s);
        if (select || mode) return cli_fail("plan", "--margin applies to the planner (without --offload-select, --max-batch or --max-image)");
    }
    if (select) {
        const char *bad = mode ? "--max-batch/--max-image" : o.plan ? "--plan" : o.calibrate ? "--calibrate" : space ? "--space"
                          : pareto ? "--pareto" : o.iters ? "--measure" : o.force ? "--force" : explain ? "--explain" : NULL;
        if (bad) return cli_fail("plan", "%s does not apply with --offload-select", bad);
        return plan_offload_select(&o, pr.budget, device, window, limit);
    }
    if (mode == 0) {
        if (o.plan || o.calibrate) return cli_fail("plan", "%s applies with --max-batch or --max-image", o.plan ? "--plan" : "--calibrate");
        return plan_search(&o, pr.budget, space ? space : "all", pareto, device, margin_s ? &margin : NULL, explain);
    }
    if (space || pareto || o.profile || o.force || o.iters || device || explain)
        return cli_fail("plan", "%s applies to the planner (without --max-batch or --max-image)",
                        space ? "--space" : pareto ? "--pareto" : o.profile ? "--profile" : o.force ? "--force"
                        : o.iters ? "--measure" : device ? "--device" : "--explain");
    return plan_capacity(&o, &pr, plans, mode);
}
