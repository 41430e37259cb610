/* The time model's fit and the planner.
 *
 * Fit: samples drawn from known lines (a + b x per key, with no noise) give those lines back; a key
 * measured at one size scales through the origin; an unknown key takes its class's rate and an
 * unknown class the roofline.
 *
 * Planner, on vgg-small, resnet-small and VGG-16 (224x224), SGD and Adam, at budgets from the
 * smallest footprint it finds to layer's: its plan, lowered again from its text, fits the budget
 * with its arena (sim/predict/arena.h: what an engine reserves for it); no preset that fits is faster; and against brute force over the chain DP's own space
 * (every split of the net at clean cuts into layer and ckpt segments, each replayed and timed —
 * feasible on the small nets): `--space ckpt` is never slower than the best split that fits, by
 * more than the DP's segment model leaves (reported; asserted within 2%). A budget under every
 * peak finds nothing. Times here come from the roofline: what is tested is the search, not the
 * device.
 *
 * Guarantees (`test_search guarantees N`): N random nets (tests/randnet.h), each at a random batch,
 * optimizer and space (an eighth on the H100, whose moves overlap compute: offload lists join), searched at random budgets from under the smallest footprint to over
 * `layer`'s: every answer, lowered again, has an arena (and bytes apart) within the budget and a
 * replayed peak within it; while some preset of the space fits (each replayed here, apart from the
 * search), the search answers, no slower (predicted) than the fastest such preset; every budget
 * it refuses reports the same smallest footprint, which does not fit it, and no answer at a larger
 * budget undercuts it; and the answer's predicted time never rises with the budget — by more than
 * the margin, on the quarter of the nets searched with a 5% margin (a preset within it of the
 * fastest plan is answered instead, and a larger budget may find a faster plan the preset is not
 * within 5% of). On a quarter of the random nets and at every budget of the named ones, the search
 * run again with its candidates evaluated ahead on two threads (search_req.threads) gives the same
 * points, figures and answers. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/planner/search.h"
#include "sim/predict/arena.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "tests/randnet.h"
#include "tests/expect.h"

static int margin_kept; /* budgets where a 10% margin kept a preset over the plan found */

static void test_fit(void)
{
    timing_sample v[] = {
        {"fwd conv A", "fwd conv", 10, 100, 5 + 2 * 10},  {"fwd conv A", "fwd conv", 20, 200, 5 + 2 * 20},
        {"fwd conv A", "fwd conv", 40, 400, 5 + 2 * 40},  {"bwd relu B", "bwd relu", 8, 64, 24},
        {"bwd relu B", "bwd relu", 8, 64, 24},            {"alloc zero", "alloc zero", 1000, 1000, 3 + 0.01 * 1000},
        {"alloc zero", "alloc zero", 3000, 3000, 3 + 0.01 * 3000},
    };
    timing_model m = {0};
    timing_fit(&m, v, sizeof v / sizeof *v);
    timing_how how;
    timing_probe p = {.key = "fwd conv A", .cls = "fwd conv", .x = 30, .work = 300};
    double us = timing_step_us(&m, &p, -1, &how);
    EXPECT(how == TIMING_FITTED && fabs(us - 65) < 1e-9, "fitted line: %g us at x = 30 (want 65)", us);
    timing_probe q = {.key = "bwd relu B", .cls = "bwd relu", .x = 16, .work = 128};
    us = timing_step_us(&m, &q, -1, &how);
    EXPECT(how == TIMING_FITTED && fabs(us - 48) < 1e-9, "one size scales through the origin: %g (want 48)", us);
    timing_probe r = {.key = "alloc zero", .cls = "alloc zero", .x = 2000, .work = 2000};
    us = timing_step_us(&m, &r, -1, &how);
    EXPECT(fabs(us - 23) < 1e-9, "alloc line: %g (want 23)", us);
    timing_probe s = {.key = "fwd conv C", .cls = "fwd conv", .x = 1, .work = 700};
    us = timing_step_us(&m, &s, -1, &how);
    double rate = (25 + 45 + 85) / 700.0; /* the class's measured us per unit of work */
    EXPECT(how == TIMING_CLASS && fabs(us - rate * 700) < 1e-9, "class rate: %g (want %g)", us, rate * 700);
    timing_probe t = {.key = "fwd pool D", .cls = "fwd pool", .x = 1, .work = 1};
    us = timing_step_us(&m, &t, 42, &how);
    EXPECT(how == TIMING_ROOFLINE && us == 42, "unknown class: the roofline (%g)", us);
    /* the margin at a median held-out error of 3.4%: two normal errors of that median differ by more
     * than 9.14% one time in ten */
    m.error = 0.034;
    EXPECT(fabs(timing_margin(&m) - 0.0914) < 5e-4, "margin at 3.4%%: %g (want 0.0914)", timing_margin(&m));
    timing_free(&m);
    printf("%s fit\n", failures ? "FAIL" : "ok  ");
}

/* Lowers text for n: its footprint (the arena and the bytes apart from it, which the planner holds to
 * its budget) and time (NAN if it does not lower). */
static int64_t replay(const search_req *r, const char *text, double *us)
{
    plan p;
    sched s;
    err e;
    *us = NAN;
    if (plan_parse(&p, r->n, text, &e)) return -1;
    int rc = pipeline_lower(&s, r->n, &p, &r->cfg, &e);
    plan_free(&p);
    if (rc) return -1;
    arena a;
    arena_plan(&s, &a);
    *us = sim_time_us(r->n, &s, r->dev, NULL);
    sched_free(&s);
    int64_t foot = a.size + a.apart;
    arena_free(&a);
    return foot;
}

/* The search r again with its candidates evaluated ahead on two threads (search_req.threads): the same
 * points, in the same order, with the same figures, and the same answers as s, the search on one. */
static int ahead_checked, ahead_failed;
static void expect_same_ahead(search_req r, const search_result *s, const char *what)
{
    search_result t;
    err e;
    int before = failures;
    r.threads = 2;
    ahead_checked++;
    if (search_run(&r, &t, &e)) {
        EXPECT(0, "%s, candidates ahead on 2 threads: %s", what, e.msg);
        ahead_failed++;
        return;
    }
    EXPECT(t.n_pts == s->n_pts && t.best == s->best && t.least == s->least && t.preset == s->preset && t.fastest == s->fastest,
           "%s, candidates ahead on 2 threads: %d points, answer %d, least %d, preset %d; on one %d, %d, %d, %d", what, t.n_pts,
           t.best, t.least, t.preset, s->n_pts, s->best, s->least, s->preset);
    for (int i = 0; i < t.n_pts && i < s->n_pts; i++) {
        const search_point *a = &s->pts[i], *b = &t.pts[i];
        bool same = !strcmp(a->text, b->text) && !strcmp(a->source, b->source) && a->peak == b->peak && a->footprint == b->footprint &&
                    a->floor == b->floor && a->fwd_peak == b->fwd_peak && a->staged == b->staged && a->levels == b->levels &&
                    a->placed == b->placed && a->variants == b->variants &&
                    (a->time_us == b->time_us || (isnan(a->time_us) && isnan(b->time_us)));
        if (!same) {
            EXPECT(0, "%s, candidates ahead on 2 threads: point %d is '%s' (peak %lld, %.9g us), on one '%s' (peak %lld, %.9g us)", what, i,
                   b->text, (long long)b->peak, b->time_us, a->text, (long long)a->peak, a->time_us);
            break;
        }
    }
    ahead_failed += failures > before;
    search_free(&t);
}

/* Brute force over the DP's space: the fastest split into layer and ckpt segments at clean cuts
 * (the last one layer) whose footprint fits; its time, INFINITY if none. */
static char brute_best[PLAN_TEXT_LEN];
static double brute(const search_req *r, int *tried)
{
    const net *n = r->n;
    int pos[64], m = 0;
    pos[m++] = 1;
    for (int L = 2; L < n->n && m < 64; L++)
        if (n->layers[L].cut_before) pos[m++] = L;
    if (m > 13) return NAN; /* 3^12 plans: too many */
    double best = INFINITY;
    long total = 1;
    for (int i = 1; i < m; i++) total *= 3;
    for (long code = 0; code < total * 2; code++) {
        /* position 0: layer or ckpt; each later one: continue, new layer or new ckpt */
        int mode[64];
        long c = code;
        mode[0] = 1 + (int)(c % 2), c /= 2;
        for (int i = 1; i < m; i++) mode[i] = (int)(c % 3), c /= 3;
        char text[PLAN_TEXT_LEN];
        size_t at = 0;
        int start = 0, cur = mode[0];
        bool ok = true;
        for (int i = 1; i <= m && ok; i++) {
            if (i < m && mode[i] == 0) continue;
            if (cur == 2) {
                if (i == m) ok = false; /* the last segment runs as layer */
                else at += (size_t)snprintf(text + at, sizeof text - at, "%sckpt@%s..%s", at ? "; " : "", n->layers[pos[start]].name,
                                            n->layers[pos[i] - 1].name);
            }
            if (i < m) start = i, cur = mode[i];
        }
        if (!ok) continue;
        if (!at) snprintf(text, sizeof text, "layer");
        double us;
        (*tried)++;
        if (replay(r, text, &us) <= r->budget && us < best) best = us, snprintf(brute_best, sizeof brute_best, "%s", text);
    }
    return best;
}

static void test_planner(const char *name, int image, int batch, sched_optimizer opt, bool with_brute)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (image && net_set_input(&n, image, image, &e))) {
        printf("FAIL %s: %s\n", name, e.msg);
        failures++;
        return;
    }
    search_req r = {.n = &n, .cfg = {.batch = batch, .optimizer = opt}, .dev = &sim_device_cpu, .space = SEARCH_ALL};
    double layer_us;
    int64_t layer_peak = replay(&r, "layer", &layer_us);
    r.budget = 0; /* nothing fits: the search tries what keeps least everywhere */
    search_result first;
    if (search_run(&r, &first, &e)) {
        printf("FAIL %s: %s\n", name, e.msg);
        failures++;
        net_free(&n);
        return;
    }
    int64_t lo = first.pts[first.least].footprint;
    search_free(&first);
    double worst_gap = 0;
    int budgets = 0, tried = 0;
    for (int k = 0; k <= 6; k++) {
        r.budget = lo + (layer_peak - lo) * k / 6;
        r.space = SEARCH_ALL;
        search_result s;
        if (search_run(&r, &s, &e)) {
            EXPECT(0, "%s: %s", name, e.msg);
            continue;
        }
        budgets++;
        char what[96];
        snprintf(what, sizeof what, "%s budget %lld", name, (long long)r.budget);
        expect_same_ahead(r, &s, what);
        EXPECT(s.best >= 0, "%s budget %lld: nothing found, though %lld was reached", name, (long long)r.budget, (long long)lo);
        if (s.best >= 0) {
            double us;
            int64_t peak = replay(&r, s.pts[s.best].text, &us);
            EXPECT(peak >= 0 && peak <= r.budget, "%s budget %lld: '%s' replays at %lld", name, (long long)r.budget,
                   s.pts[s.best].text, (long long)peak);
            for (int i = 0; i < s.n_pts; i++)
                if (!strcmp(s.pts[i].source, "preset") && s.pts[i].footprint <= r.budget)
                    EXPECT(s.pts[i].time_us >= s.pts[s.best].time_us, "%s: preset %s is faster than the planner's %s", name,
                           s.pts[i].text, s.pts[s.best].text);
        }
        search_free(&s);
        /* the margin: a preset within 10% of the fastest plan is the answer, else that plan */
        const double margin = 0.10;
        r.margin = &margin;
        search_result m;
        if (!search_run(&r, &m, &e) && m.fastest >= 0) {
            int want = m.preset >= 0 && m.pts[m.preset].time_us <= m.pts[m.fastest].time_us * (1 + margin) ? m.preset : m.fastest;
            EXPECT(m.best == want, "%s budget %lld, margin 10%%: answered %s, want %s", name, (long long)r.budget,
                   m.pts[m.best].text, m.pts[want].text);
            margin_kept += m.best != m.fastest;
            search_free(&m);
        }
        r.margin = NULL;
        if (!with_brute) continue;
        r.space = SEARCH_CKPT | SEARCH_PRESETS;
        if (search_run(&r, &s, &e)) continue;
        double best = brute(&r, &tried);
        if (s.best >= 0 && isfinite(best)) {
            double gap = s.pts[s.best].time_us / best - 1;
            if (gap > worst_gap) worst_gap = gap;
            EXPECT(gap <= 0.02, "%s budget %lld: ckpt planner %.1f us (%s) vs brute force %.1f us (%s)", name,
                   (long long)r.budget, s.pts[s.best].time_us, s.pts[s.best].text, best, brute_best);
        } else {
            EXPECT(!(s.best < 0 && isfinite(best)), "%s budget %lld: brute force fits, the ckpt planner does not", name,
                   (long long)r.budget);
        }
        search_free(&s);
    }
    r.budget = lo - 1;
    r.space = SEARCH_ALL;
    search_result none;
    if (!search_run(&r, &none, &e)) {
        EXPECT(none.best < 0, "%s: %s fits under the smallest peak %lld", name, none.pts[none.best].text, (long long)lo);
        search_free(&none);
    }
    printf("ok   %-12s %4d, batch %2d, %s: %d budgets from %lld to %lld bytes%s", name, n.layers[0].h, batch,
           opt == SCHED_ADAM ? "adam" : "sgd ", budgets, (long long)lo, (long long)layer_peak, with_brute ? "" : "\n");
    if (with_brute) printf("; ckpt planner vs brute force (%d plans): worst %+.2f%%\n", tried, 100 * worst_gap);
    net_free(&n);
}

/* The presets of space (as the search's eval_presets names them), into names; their count. */
static int space_presets(unsigned space, const char **names, char store[][24])
{
    static const char *const fixed_ckpt[] = {"ckpt-sqrt", "ckpt:2", "ckpt:3", "ckpt:4", "ckpt:6", "ckpt:8"};
    static const int counts[] = {2, 3, 4, 6, 8};
    unsigned kinds = space == SEARCH_PRESETS ? SEARCH_ALL : space;
    int m = 0;
    names[m++] = "layer";
    for (int i = 0; (kinds & SEARCH_CKPT) && i < 6; i++) names[m++] = fixed_ckpt[i];
    if (kinds & SEARCH_OFFLOAD) names[m++] = "vdnn-all", names[m++] = "vdnn-conv";
    for (int k = 0; (kinds & SEARCH_ROWS) && k < 5; k++)
        for (int h = 0; h < ((kinds & SEARCH_CKPT) ? 2 : 1); h++)
            for (int pol = 0; pol < 2; pol++) {
                snprintf(store[m], 24, "%s%s:%d", pol ? "overl" : "2ps", h ? "-h" : "", counts[k]);
                names[m] = store[m], m++;
            }
    return m;
}

static void test_guarantees(int cases)
{
    static const unsigned spaces[] = {SEARCH_ALL, SEARCH_CKPT, SEARCH_CKPT | SEARCH_ROWS, SEARCH_OFFLOAD, SEARCH_ROWS,
                                      SEARCH_PRESETS, SEARCH_CKPT | SEARCH_OFFLOAD | SEARCH_GIST};
    randnet_rng g = {20261127};
    int done = 0, answers = 0, refusals = 0, preset_fits = 0, rises = 0;
    double worst_rise = 0;
    char text[8192];
    while (done < cases) {
        int h = 8 + randnet_below(&g, 24);
        randnet_text(&g, RANDNET_WIDE, text, sizeof text, h);
        net n;
        err e;
        if (net_parse(&n, text, "random.net", &e)) continue;
        unsigned space = spaces[randnet_below(&g, (int)(sizeof spaces / sizeof *spaces))];
        search_req r = {.n = &n, .cfg = {.batch = 1 + randnet_below(&g, 8), .optimizer = randnet_below(&g, 2) ? SCHED_ADAM : SCHED_SGD},
                        .dev = &sim_device_cpu, .space = space};
        const char *names[64];
        char store[64][24];
        int np = space_presets(space, names, store);
        int64_t foot[64];
        double us[64];
        for (int i = 0; i < np; i++) foot[i] = replay(&r, names[i], &us[i]); /* -1: not a plan for this net */
        if (foot[0] < 0) {
            net_free(&n);
            continue;
        }
        done++;
        double margin = done % 4 == 0 ? 0.05 : 0;
        r.margin = &margin;
        if (done % 8 == 1) { /* a device whose moves overlap compute: the offload lists join the space */
            r.dev = &sim_device_h100;
            for (int i = 0; i < np; i++) foot[i] = replay(&r, names[i], &us[i]);
        }
        int64_t least = -1; /* what the first refusal reported */
        double last_us = INFINITY;
        int64_t budgets[5];
        for (int k = 0; k < 5; k++) budgets[k] = (int64_t)((double)foot[0] * (0.25 + 0.95 * k / 4.0 + 0.05 * randnet_below(&g, 3)));
        for (int k = 0; k < 5; k++) {
            r.budget = budgets[k];
            search_result s;
            if (search_run(&r, &s, &e)) {
                EXPECT(0, "case %d: %s", done, e.msg);
                continue;
            }
            if (done % 4 == 2) { /* a quarter of the nets: the same search with its candidates evaluated ahead */
                char what[64];
                snprintf(what, sizeof what, "case %d budget %lld", done, (long long)r.budget);
                expect_same_ahead(r, &s, what);
            }
            int fast = -1; /* the fastest preset of the space that fits, replayed here */
            for (int i = 0; i < np; i++)
                if (foot[i] >= 0 && foot[i] <= r.budget && (fast < 0 || us[i] < us[fast])) fast = i;
            preset_fits += fast >= 0;
            if (s.best >= 0) {
                double u;
                int64_t f = replay(&r, s.pts[s.best].text, &u);
                answers++;
                EXPECT(f >= 0 && f <= r.budget && s.pts[s.best].peak <= r.budget, "case %d budget %lld: '%s' reserves %lld, peak %lld",
                       done, (long long)r.budget, s.pts[s.best].text, (long long)f, (long long)s.pts[s.best].peak);
                EXPECT(fast < 0 || s.pts[s.best].time_us <= us[fast] * (1 + 1e-9), "case %d budget %lld: '%s' %.1f us, slower than %s %.1f us",
                       done, (long long)r.budget, s.pts[s.best].text, s.pts[s.best].time_us, names[fast], us[fast]);
                EXPECT(least < 0 || s.pts[s.best].footprint >= least, "case %d budget %lld: '%s' reserves %lld, under the smallest footprint %lld reported at a smaller budget",
                       done, (long long)r.budget, s.pts[s.best].text, (long long)s.pts[s.best].footprint, (long long)least);
                double rise = s.pts[s.best].time_us / last_us - 1;
                EXPECT(rise <= margin + 1e-9, "case %d budget %lld: '%s' %.3f us, %.2f%% slower than the answer at a smaller budget (margin %.0f%%)",
                       done, (long long)r.budget, s.pts[s.best].text, s.pts[s.best].time_us, 100 * rise, 100 * margin);
                rises += rise > 1e-9, worst_rise = rise > worst_rise ? rise : worst_rise;
                last_us = s.pts[s.best].time_us;
            } else {
                refusals++;
                EXPECT(fast < 0, "case %d budget %lld: refused while %s fits (%lld)", done, (long long)r.budget, names[fast],
                       (long long)foot[fast]);
                int64_t l = s.least >= 0 ? s.pts[s.least].footprint : -1;
                EXPECT(least < 0 || l == least, "case %d budget %lld: smallest footprint %lld, %lld at a smaller budget", done,
                       (long long)r.budget, (long long)l, (long long)least);
                EXPECT(l > r.budget, "case %d budget %lld: refused, yet the smallest footprint %lld fits", done, (long long)r.budget,
                       (long long)l);
                if (least < 0) least = l;
            }
            search_free(&s);
        }
        net_free(&n);
    }
    printf("%s guarantees: %d random nets, %d answers (each replayed within its budget, none slower than a preset that\n"
           "     fits, none under the smallest footprint), %d refusals (none while a preset fits, which %d budgets had;\n"
           "     one smallest footprint per net at every budget refused); the answer's time never rose with the budget\n"
           "     without a margin, and with a 5%% margin it rose at %d budgets, by at most %.2f%%; %d searches (a quarter\n"
           "     of the nets) the same with their candidates evaluated ahead on 2 threads\n",
           failures ? "FAIL" : "ok  ", done, answers, refusals, preset_fits, rises, 100 * worst_rise, ahead_checked - ahead_failed);
}

/* Offloaded or rebuilt stages with fewer levels: ResNet-50's row plans at budgets between their
 * peaks with every level's maps offloaded (bn=train-offload) and with none (bn=train), on the H100
 * over PCIe 4.0 (rows and presets alone): each answer with bn=train-offload:K or bn=train-rebuild:K
 * fits with its arena, and K is the fewest that does in its mode (its base plan with K - 1, or with
 * bn=train for K = 1, peaks over the budget); one with bn=train-rebuild/M fits; some budget is
 * answered so. */
static void test_bn_levels(void)
{
    net n;
    err e;
    if (net_load_named(&n, "resnet50", &e)) {
        EXPECT(0, "%s", e.msg);
        return;
    }
    search_req r = {.n = &n, .cfg = {.batch = 8, .optimizer = SCHED_SGD}, .dev = sim_device_find("h100-pcie4"),
                    .space = SEARCH_ROWS | SEARCH_PRESETS};
    double us;
    int64_t hi = replay(&r, "2ps:4 bn=train", &us), lo = replay(&r, "2ps:4 bn=train-offload", &us);
    int with_k = 0;
    int mixed = 0;
    for (int q = 0; q <= 4; q++) {
        r.budget = lo + (hi - lo) * (q ? 10 * q : 1) / 50; /* the first just over every level offloaded */
        search_result s;
        if (search_run(&r, &s, &e)) {
            EXPECT(0, "resnet50 budget %lld: %s", (long long)r.budget, e.msg);
            continue;
        }
        const char *text = s.best >= 0 ? s.pts[s.best].text : "", *bn = strstr(text, " bn="), *k = bn ? strchr(bn, ':') : NULL;
        EXPECT(s.best >= 0, "resnet50 budget %lld: nothing found under %s's", (long long)r.budget, "2ps:4 bn=train");
        if (bn && (strchr(bn, '/') || (k && isalpha((unsigned char)k[1])))) { /* one level in M kept, or letters: it fits */
            double off_us;
            int64_t at = replay(&r, text, &us);
            replay(&r, "2ps:4 bn=train-offload", &off_us);
            EXPECT(at >= 0 && at <= r.budget, "budget %lld: '%s' reserves %lld", (long long)r.budget, text, (long long)at);
            int better = 0, tried = 0;
            if (k && isalpha((unsigned char)k[1])) /* letters: refined until no one-letter change that fits is faster */
                for (size_t q = 1; k[q]; q++)
                    for (const char *ch = "kor"; *ch; ch++) {
                        if (*ch == k[q]) continue;
                        char next[PLAN_TEXT_LEN];
                        double next_us;
                        snprintf(next, sizeof next, "%s", text);
                        next[k - text + q] = *ch;
                        int64_t foot = replay(&r, next, &next_us);
                        tried += foot >= 0 && foot <= r.budget;
                        if (foot >= 0 && foot <= r.budget && next_us < us) {
                            better++;
                            fprintf(stderr, "budget %lld: '%s' fits (%lld) in %.1f us, faster than the answer's %.1f\n",
                                    (long long)r.budget, next, (long long)foot, next_us, us);
                        }
                    }
            EXPECT(!better, "budget %lld: %d one-letter changes of '%s' fit and are faster", (long long)r.budget, better, text);
            printf("ok   resnet50 budget %.1f MiB: %s (%.1f MiB reserved, %.1f ms; 2ps:4 bn=train-offload %.1f ms)%s\n",
                   r.budget / 1048576.0, text, at / 1048576.0, us / 1e3, off_us / 1e3,
                   tried ? "; no one-letter change that fits is faster" : "");
            with_k++, mixed += k && isalpha((unsigned char)k[1]);
        } else if (k) {
            int K = atoi(k + 1);
            char fewer[PLAN_TEXT_LEN];
            if (K > 1) snprintf(fewer, sizeof fewer, "%.*s:%d", (int)(k - text), text, K - 1);
            else snprintf(fewer, sizeof fewer, "%.*s bn=train", (int)(bn - text), text);
            int64_t at = replay(&r, text, &us), over = replay(&r, fewer, &us);
            EXPECT(at >= 0 && at <= r.budget, "budget %lld: '%s' reserves %lld", (long long)r.budget, text, (long long)at);
            plan p;
            sched sc;
            sim_mem m;
            if (!plan_parse(&p, &n, fewer, &e) && !pipeline_lower(&sc, &n, &p, &r.cfg, &e)) {
                sim_replay(&sc, &m, NULL);
                EXPECT(m.peak > r.budget, "budget %lld: '%s' peaks at %lld, under it: K is not the fewest", (long long)r.budget,
                       fewer, (long long)m.peak);
                sched_free(&sc), plan_free(&p);
            }
            with_k++;
            printf("ok   resnet50 budget %.1f MiB: %s (%.1f MiB reserved), one level fewer peaks over it (%.1f MiB reserved)\n",
                   r.budget / 1048576.0, text, at / 1048576.0, over / 1048576.0);
        }
        search_free(&s);
    }
    EXPECT(with_k > 0, "resnet50: no budget between bn=train-offload's peak and bn=train's answered with a count of levels");
    EXPECT(mixed > 0, "resnet50: no budget answered with levels mixed (bn=train:LETTERS)");
    net_free(&n);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "guarantees")) {
        test_guarantees(atoi(argv[2]));
        printf("%s\n", failures ? "FAILED" : "all passed");
        return failures != 0;
    }
    test_fit();
    test_bn_levels();
    test_planner("vgg-small", 0, 16, SCHED_SGD, true);
    test_planner("vgg-small", 0, 16, SCHED_ADAM, true);
    test_planner("resnet-small", 0, 8, SCHED_ADAM, true);
    test_planner("vgg16", 224, 8, SCHED_ADAM, false);
    test_planner("resnet50", 224, 8, SCHED_SGD, false);
    printf("%s margin: at %d budgets a preset within 10%% of the plan found was the answer\n", margin_kept ? "ok  " : "FAIL",
           margin_kept);
    failures += !margin_kept;
    printf("%s %d searches of the named nets (every budget above) the same with their candidates evaluated ahead on 2 threads\n",
           ahead_failed ? "FAIL" : "ok  ", ahead_checked - ahead_failed);
    printf("%s\n", failures ? "FAILED" : "all passed");
    return failures != 0;
}
