/* Offload selection (sim/planner/offsel.h) and the time model of moves beside compute (sim.h, overlap).
 *
 * Overlap: on every test net, for plans with and without moves, the two-stream time is at least
 * the compute stream's work and the link's, at most the in-line sum, equal to it without moves;
 * with a link of no cost it is the compute alone.
 * Memory model: for random offload lists (layers, release delays, prefetch leads) and for every
 * method's answers, the model's peak equals the replay of the plan the list lowers to, byte for
 * byte (the MILP's memory rows are exact, not an estimate).
 * Methods, at budgets from vdnn-all's peak to layer's: every answer's replay fits; EXACT, when it
 * proves optimality, is no slower in the model than ROUND or DIVE and no faster than the LP bound;
 * with one timing option per layer (vDNN's) EXACT equals brute force over every subset of layers.
 * The model's times beside the two-stream simulation of the lowered plans are printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/planner/offsel.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "tests/expect.h"

static const sim_device *pcie4(void) { return sim_device_find("h100-pcie4"); }

/* Replay peak and time of plan text on d; -1 if it does not lower. */
static int run(const net *n, const char *text, const sched_cfg *cfg, const sim_device *d, sim_result *r)
{
    plan p;
    err e;
    if (plan_parse(&p, n, text, &e)) return printf("  (%s: %s)\n", text, e.msg), -1;
    int rc = sim_run(n, &p, cfg, d, r, NULL, &e);
    plan_free(&p);
    if (rc) printf("  (%s: %s)\n", text, e.msg);
    return rc;
}

static void test_overlap(const net *n, const sched_cfg *cfg)
{
    const char *plans[] = {"layer", "vdnn-all", "vdnn-conv", "ckpt-sqrt+migrate", "2ps:2", "layer+migrate:grads:optim"};
    sim_device on = *pcie4(), off = on, free_link = on;
    off.overlap = false, free_link.link_gbps = 1e12;
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        plan p;
        sched s;
        err e;
        if (plan_parse(&p, n, plans[i], &e) || pipeline_lower(&s, n, &p, cfg, &e)) {
            EXPECT(0, "%s: %s", plans[i], e.msg);
            continue;
        }
        double compute = 0, link = 0;
        for (int k = 0; k < s.n_step; k++) {
            timing_how how;
            double us = sim_step_us(n, &s, k, &on, &how);
            if (s.steps[k].op == SCHED_OFFLOAD || s.steps[k].op == SCHED_PREFETCH) link += us;
            else compute += us;
        }
        double t = sim_time_us(n, &s, &on, NULL), serial = sim_time_us(n, &s, &off, NULL);
        double tol = 1e-9 * serial;
        EXPECT(t >= compute - tol && t >= link - tol && t <= serial + tol, "%s %s: two streams %.3f us, compute %.3f, link %.3f, in line %.3f",
               n->name, plans[i], t, compute, link, serial);
        if (link == 0) EXPECT(fabs(t - serial) <= tol, "%s %s: no moves, yet %.3f != %.3f", n->name, plans[i], t, serial);
        double t0 = sim_time_us(n, &s, &free_link, NULL);
        EXPECT(fabs(t0 - compute) <= 1e-6 * compute + 1e-6, "%s %s: a free link leaves the compute %.3f, got %.3f", n->name, plans[i],
               compute, t0);
        sched_free(&s);
        plan_free(&p);
    }
}

/* The layers whose maps offload(all) moves: the candidates. */
static int candidates(const net *n, const sched_cfg *cfg, int *out)
{
    char text[256];
    snprintf(text, sizeof text, "offload(all)@%s..%s", n->layers[1].name, n->layers[n->n - 1].name);
    plan p;
    sched s;
    err e;
    if (plan_parse(&p, n, text, &e) || pipeline_lower(&s, n, &p, cfg, &e)) return 0;
    bool *on = calloc((size_t)n->n, sizeof(bool));
    for (int b = 0; b < s.n_buf; b++)
        if (s.bufs[b].offload) on[s.bufs[b].layer] = true;
    int k = 0;
    for (int L = 0; L < n->n; L++)
        if (on[L]) out[k++] = L;
    free(on);
    sched_free(&s);
    plan_free(&p);
    return k;
}

static double worst_time_gap; /* the model's time against the two-stream simulation, relative */

/* The model's peak of an offload list equals its replay; returns whether it was a list of the model. */
static bool model_matches(const offsel_req *rq, const char *text)
{
    double us;
    int64_t peak;
    err e;
    if (offsel_model(rq, text, &us, &peak, &e)) return false;
    sim_result r;
    if (run(rq->n, text, &rq->cfg, rq->dev, &r)) {
        EXPECT(0, "%s does not lower", text);
        return false;
    }
    EXPECT(peak == r.replay.peak, "%s %s: model peak %lld, replay %lld", rq->n->name, text, (long long)peak, (long long)r.replay.peak);
    if (!isnan(us) && fabs(us - r.time_us) / r.time_us > worst_time_gap) worst_time_gap = fabs(us - r.time_us) / r.time_us;
    return true;
}

static void test_random_lists(const offsel_req *rq, const int *cand, int nc, unsigned seed)
{
    int tried = 0, of_model = 0;
    for (int t = 0; t < 60; t++) {
        char text[PLAN_TEXT_LEN];
        size_t at = (size_t)snprintf(text, sizeof text, "offload(");
        int picked = 0;
        for (int c = 0; c < nc; c++) {
            seed = seed * 1103515245u + 12345u;
            if ((seed >> 16) % 3) continue;
            int d = (int)((seed >> 8) % 3), a = 1 + (int)((seed >> 20) % 3);
            at += (size_t)snprintf(text + at, sizeof text - at, "%s%s:%d:%d", picked++ ? ", " : "", rq->n->layers[cand[c]].name, d, a);
        }
        if (!picked) continue;
        snprintf(text + at, sizeof text - at, ")@%s..%s", rq->n->layers[1].name, rq->n->layers[rq->n->n - 1].name);
        tried++;
        of_model += model_matches(rq, text); /* a delay or lead past the net's steps is not a plan */
    }
    EXPECT(of_model >= tried / 4, "%s: only %d of %d random lists were plans of the model", rq->n->name, of_model, tried);
    printf("  %-13s %d random offload lists: model peak = replay\n", rq->n->name, of_model);
}

static void test_methods(offsel_req rq, int64_t lo, int64_t hi)
{
    for (int f = 0; f <= 4; f++) {
        rq.budget = lo + (hi - lo) * f / 4;
        offsel_result res[3];
        for (int m = 0; m < 3; m++) {
            err e;
            offsel_result *o = &res[m];
            if (offsel_solve(&rq, (offsel_method)m, o, &e)) {
                EXPECT(0, "%s: %s", offsel_method_name((offsel_method)m), e.msg);
                continue;
            }
            if (!o->found) continue;
            sim_result r;
            if (run(rq.n, o->text, &rq.cfg, rq.dev, &r)) {
                EXPECT(0, "%s: its plan does not lower", offsel_method_name((offsel_method)m));
                continue;
            }
            EXPECT(r.replay.peak <= rq.budget, "%s %s at %lld: replay %lld over the budget (%s)", rq.n->name,
                   offsel_method_name((offsel_method)m), (long long)rq.budget, (long long)r.replay.peak, o->text);
            if (o->chosen) model_matches(&rq, o->text);
            printf("  %-13s budget %9lld %-5s peak %9lld model %9.1f us  simulated %9.1f us  bound %9.1f  %s\n", rq.n->name,
                   (long long)rq.budget, offsel_method_name((offsel_method)m), (long long)r.replay.peak, o->model_us, r.time_us,
                   o->bound_us, o->text);
        }
        EXPECT(res[2].found || !res[0].found, "%s at %lld: a heuristic found a plan, exact none", rq.n->name, (long long)rq.budget);
        if (res[2].found && res[2].optimal) {
            double tol = 1e-6 * res[2].model_us + 0.05; /* the 1e-3 us tie-breaks */
            for (int m = 0; m < 2; m++)
                EXPECT(!res[m].found || res[2].model_us <= res[m].model_us + tol, "%s at %lld: exact %.3f slower than %s %.3f",
                       rq.n->name, (long long)rq.budget, res[2].model_us, offsel_method_name((offsel_method)m), res[m].model_us);
            EXPECT(res[2].model_us >= res[2].bound_us - tol, "exact %.3f under the LP bound %.3f", res[2].model_us, res[2].bound_us);
        }
        for (int m = 0; m < 3; m++) offsel_result_free(&res[m]);
    }
}

/* With vDNN's timing only (window 1), exact = the best subset of layers, by enumeration. */
static void test_brute(offsel_req rq, const int *cand, int nc, int64_t budget)
{
    rq.window = 1, rq.budget = budget;
    double best = INFINITY;
    for (unsigned mask = 1; mask < 1u << nc; mask++) {
        char text[PLAN_TEXT_LEN];
        size_t at = (size_t)snprintf(text, sizeof text, "offload(");
        for (int c = 0, k = 0; c < nc; c++)
            if (mask >> c & 1) at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", k++ ? ", " : "", rq.n->layers[cand[c]].name);
        snprintf(text + at, sizeof text - at, ")@%s..%s", rq.n->layers[1].name, rq.n->layers[rq.n->n - 1].name);
        double us;
        int64_t peak;
        err e;
        if (offsel_model(&rq, text, &us, &peak, &e)) {
            EXPECT(0, "%s: %s", text, e.msg);
            return;
        }
        if (peak <= budget && us < best) best = us;
    }
    offsel_result o;
    err e;
    EXPECT(!offsel_solve(&rq, OFFSEL_EXACT, &o, &e), "%s", e.msg);
    EXPECT(o.found == isfinite(best), "%s at %lld: exact found %d, brute force %g", rq.n->name, (long long)budget, o.found, best);
    if (o.found) EXPECT(fabs(o.model_us - best) <= 1e-6 * best + 0.05, "%s at %lld: exact %.3f us, brute force over %u subsets %.3f",
                        rq.n->name, (long long)budget, o.model_us, (1u << nc) - 1, best);
    printf("  %-13s budget %9lld window 1: exact %.3f us = brute force over %u subsets %.3f\n", rq.n->name, (long long)budget,
           o.model_us, (1u << nc) - 1, best);
    offsel_result_free(&o);
}

static int64_t peak_of(const net *n, const char *text, const sched_cfg *cfg)
{
    sim_result r;
    return run(n, text, cfg, pcie4(), &r) ? -1 : r.replay.peak;
}

int main(void)
{
    const char *nets[] = {"vgg-small", "resnet-small", "kinds"};
    for (size_t i = 0; i < sizeof nets / sizeof *nets; i++)
        for (int opt = 0; opt < 2; opt++) {
            net n;
            err e;
            if (net_load_named(&n, nets[i], &e)) {
                EXPECT(0, "%s", e.msg);
                continue;
            }
            sched_cfg cfg = {.batch = 8, .optimizer = opt ? SCHED_ADAM : SCHED_SGD};
            test_overlap(&n, &cfg);
            offsel_req rq = {.n = &n, .cfg = cfg, .dev = pcie4(), .prefix = "", .first = 1, .time_limit_s = 5};
            int cand[256], nc = candidates(&n, &cfg, cand);
            EXPECT(nc > 0, "%s: no candidates", n.name);
            test_random_lists(&rq, cand, nc, 7u + (unsigned)i * 31u + (unsigned)opt);
            int64_t lo = peak_of(&n, "vdnn-all", &cfg), hi = peak_of(&n, "layer", &cfg);
            test_methods(rq, lo, hi);
            if (nc <= 14) test_brute(rq, cand, nc, lo + (hi - lo) / 3);
            net_free(&n);
        }
    printf("model time vs the two-stream simulation of the lowered plans: at most %.1f%% apart\n", 100 * worst_time_gap);
    printf("%s\n", failures ? "FAILED" : "offload selection ok");
    return failures != 0;
}
