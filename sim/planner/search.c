/* search: see search.h. */
#include "sim/planner/search.h"
#include "sim/lower/pipeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/predict/arena.h"
#include "sim/predict/closed.h"
#include "sim/net/kind.h"
#include "sim/planner/chain.h"
#include "sim/planner/offsel.h"

int search_chain(const search_req *r, int first, int64_t extra, char *buf, size_t len)
{
    chain_net cn;
    chain c;
    err e;
    if (chain_net_init(&cn, r, &e)) return -1;
    chain_init(&c, r, &cn, first);
    int rc = chain_dp(&c, extra, buf, len);
    chain_free(&c), chain_net_free(&cn);
    return rc;
}

/* --- candidates -------------------------------------------------------------------------------- */

typedef struct {
    const search_req *r;
    search_result *out;
    int cap;
    bool least;           /* nothing fits: looking for the smallest peak (every encoding tried) */
    bool basis;           /* the plans evaluated now are basis plans (search_point.basis) */
    int basis_least;      /* the basis plan of the smallest footprint placed so far, -1 none */
    const chain_net *cn;  /* NULL: the space has neither checkpoints nor offload (no DP) */
    err *e;
} search_ctx;

/* Migrations, cheapest first (sim/plan/plan.h): gradients released at their layer's update (no moves);
 * optimizer state on the host too; parameters too. */
static const char *const migrations[] = {"migrate:grads", "migrate:grads:optim", "migrate"};
#define MIGRATE_TRIES 16 /* candidates tried per migration */
#define MIGRATE_FITS 4   /* ... of which this many fitting end it */

/* The most migration m can take off the device at a plan's peak: all it moves (at some moments no
 * layer is at work; a closer bound would have to know the moment of the peak). */
static int64_t migrate_savable(const search_req *r, int m)
{
    int state = r->cfg.optimizer == SCHED_ADAM ? 2 : 1; /* optimizer state per parameter */
    int64_t all = 0;
    for (int L = 0; L < r->n->n; L++) all += r->n->layers[L].params * 4 * (1 + (m >= 1 ? state : 0) + (m == 2));
    return all;
}

/* A basis plan of this peak may have the smallest footprint: nothing fits, and no basis plan's arena
 * planned so far is below its peak (no arena is smaller than its plan's peak). */
static bool may_be_least(const search_ctx *c, int64_t peak)
{
    return c->least && c->basis && (c->basis_least < 0 || peak < c->out->pts[c->basis_least].footprint);
}

/* Point i evaluated while c->basis: marked so, and the smallest basis footprint kept. */
static int basis_mark(search_ctx *c, int i)
{
    search_point *pt = &c->out->pts[i];
    if (!c->basis) return i;
    pt->basis = true;
    if (pt->placed && (c->basis_least < 0 || pt->footprint < c->out->pts[c->basis_least].footprint)) c->basis_least = i;
    return i;
}

/* Lowers, replays and times `text` with BatchNorm mode `bn` (NULL: the default), and plans its
 * arena where its peak may fit and it may be the answer, or be the smallest footprint found (once: a text seen before returns its
 * index, unless nothing fits and it has no arena yet though its peak is below the smallest
 * footprint found: then it is evaluated again, so that the smallest footprint reported is an
 * arena's); -1 if it is not a plan for this net. */
static int eval_bn(search_ctx *c, const char *text, const char *bn, const char *source)
{
    const search_req *r = c->r;
    char full[PLAN_TEXT_LEN];
    if ((size_t)snprintf(full, sizeof full, "%s%s%s", text, bn ? " bn=" : "", bn ? bn : "") >= sizeof full) return -1;
    int redo = -1;
    const search_result *o0 = c->out;
    for (int i = 0; i < o0->n_pts && redo < 0; i++)
        if (!strcmp(o0->pts[i].text, full)) {
            if (o0->pts[i].placed || !may_be_least(c, o0->pts[i].peak)) return basis_mark(c, i);
            redo = i;
        }
    plan p;
    sched s;
    err e;
    sim_mem mem;
    double us = NAN;
    int64_t foot;
    bool placed = false;
    if (plan_parse(&p, r->n, full, &e)) return -1;
    bool staged = false;
    for (int k = 0; k < p.n_seg; k++) staged |= p.segs[k].passes.staged;
    /* the closed form equals the replay for plans without encodings (tests/test_closed.c) and
     * costs no schedule: a plan it says does not fit is not lowered, nor timed, unless migration
     * could make it fit (the migration pass orders candidates by time) */
    if (!plan_modified(&p)) closed_predict(r->n, &p, &r->cfg, &mem);
    bool may_migrate = !plan_modified(&p) && (r->space & SEARCH_MIGRATE) && mem.peak - migrate_savable(r, 2) <= r->budget;
    if (!plan_modified(&p) && mem.peak > r->budget && !may_migrate && !may_be_least(c, mem.peak)) {
        plan_free(&p);
        foot = mem.peak;
    } else {
        int rc = pipeline_lower(&s, r->n, &p, &r->cfg, &e);
        plan_free(&p);
        if (rc) return -1;
        sim_replay(&s, &mem, NULL);
        us = sim_time_us(r->n, &s, r->dev, NULL);
        /* no arena is smaller than the peak: one is planned only where it may fit and be the answer (a
         * preset, or faster than the best so far), or be the smallest footprint */
        foot = mem.peak;
        bool may_answer = !strcmp(source, "preset") || o0->best < 0 || us < o0->pts[o0->best].time_us * (1 - 1e-3);
        if ((mem.peak <= r->budget && may_answer) || may_be_least(c, mem.peak)) {
            arena a; /* what it reserves decides whether it fits */
            arena_plan(&s, &a);
            foot = a.size + a.apart, placed = true;
            arena_free(&a);
        }
        sched_free(&s);
    }
    search_result *o = c->out;
    if (o->n_pts == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 256;
        o->pts = err_realloc(o->pts, (size_t)c->cap * sizeof *o->pts);
    }
    int at = redo >= 0 ? redo : o->n_pts;
    if (redo >= 0) source = o->pts[at].source, free(o->pts[at].text);
    /* what encodings could save at the peak at most: every kept activation and boundary there */
    int64_t savable = mem.at_peak[MEM_ACT] + mem.at_peak[MEM_BOUNDARY];
    bool basis = redo >= 0 && o->pts[at].basis;
    o->pts[at] = (search_point){err_strdup(full), mem.peak, foot, us, source, mem.peak - savable, staged, placed, basis};
    /* faster by more than the model's resolution, else the earlier (simpler: presets come first) stays */
    if (foot <= r->budget && (o->best < 0 || us < o->pts[o->best].time_us * (1 - 1e-3))) o->best = at;
    /* the smallest footprint: an arena's (a plan without one has only its peak, which its arena may exceed) */
    if (placed && (o->least < 0 || foot < o->pts[o->least].footprint)) o->least = at;
    if (redo < 0) o->n_pts++;
    return basis_mark(c, at);
}

static int eval(search_ctx *c, const char *text, const char *source) { return eval_bn(c, text, c->r->bn, source); }

/* text; when it does not fit, BatchNorm's statistics are gathered in stages (bn=train) and the
 * user named no mode, its bn=train-offload variant, else its bn=train-recompute one (less memory,
 * more time); when none fits and the space has gist,
 * text+gist too (gist's encodings only ever cost time, so a plan that fits without them is never
 * faster with them). Returns the index of the one that fits, else of the last tried (-1: not a
 * plan for this net). */
static int eval_both(search_ctx *c, const char *text, const char *source)
{
    int i = eval(c, text, source), j = -1;
    if (i < 0 || c->out->pts[i].footprint <= c->r->budget) return i;
    bool searched = !c->r->bn || !strcmp(c->r->bn, "auto"); /* a mode the user named is kept */
    if (c->out->pts[i].staged && searched) {
        /* the passes recompute the bands once per level, the offload moves each kept map twice: the
         * passes only where the offload does not fit */
        static const char *const modes[] = {"train-offload", "train-recompute"};
        for (int m = 0; m < 2; m++) {
            int k = eval_bn(c, text, modes[m], source);
            if (k >= 0 && c->out->pts[k].footprint <= c->r->budget) return k;
        }
    }
    char g[PLAN_TEXT_LEN];
    bool gist = (c->r->space & SEARCH_GIST) && (size_t)snprintf(g, sizeof g, "%s+gist", text) < sizeof g;
    if (gist && (c->out->pts[i].floor <= c->r->budget || c->least)) j = eval(c, g, source); /* else no encoding brings it under */
    if (c->least && (c->r->space & SEARCH_MIGRATE)) { /* the least-keeping plans: with migration too */
        char m[PLAN_TEXT_LEN];
        if ((size_t)snprintf(m, sizeof m, "%s+migrate", text) < sizeof m) eval(c, m, source);
        if (gist && (size_t)snprintf(m, sizeof m, "%s+gist+migrate", text) < sizeof m) eval(c, m, source);
    }
    return j < 0 ? i : j;
}

/* One DP split for `stage` at DP budget r->budget - extra, evaluated: the index of the plan that
 * fits (-1: none), and its overshoot in *over (> 0 when it does not fit). */
static int chain_try(search_ctx *c, chain *ch, const char *stage, const char *source, int64_t extra, int64_t *over)
{
    char rest[PLAN_TEXT_LEN / 2], text[PLAN_TEXT_LEN];
    *over = INT64_MAX;
    if (chain_dp(ch, extra, rest, sizeof rest)) return -1;
    if ((size_t)snprintf(text, sizeof text, "%.*s%s%s", PLAN_TEXT_LEN / 4, stage, *stage && *rest ? "; " : "",
                         *stage || *rest ? rest : "layer") >= sizeof text)
        return -1;
    int i = eval_both(c, text, source);
    if (i < 0) return -1;
    *over = c->out->pts[i].footprint - c->r->budget;
    return *over <= 0 ? i : -1;
}

/* `stage` followed by the DP's split of the rest: the DP budget drops by each overshoot of the
 * replayed peak until the plan fits (or, with `refine`, rises while the model finds no split);
 * then, `refine` times, a bisection raises it again while the
 * plan still fits (the segment model is conservative: a looser split may fit too, and recompute
 * less). Returns whether a plan fits. */
static bool eval_with_chain(search_ctx *c, chain *ch, const char *stage, const char *source, int refine)
{
    int64_t extra = 0, last_over = INT64_MAX, over;
    for (int tries = 0;; tries++) {
        if (chain_try(c, ch, stage, source, extra, &over) >= 0) break;
        if (over == INT64_MAX && extra <= 0 && tries < 4 && refine) {
            /* no split fits the model: it errs on the safe side, so loosen it (1%, 2%, 4%, 8% of
             * the budget) and let the replay judge (the whole net's DP only: row stages have many) */
            extra = -((c->r->budget / 100) << tries);
            continue;
        }
        if (tries >= 7 || over == INT64_MAX || over >= last_over) return false; /* the rest is not what overshoots */
        extra += over, last_over = over;
    }
    int64_t fits = extra, loose = extra - c->r->budget; /* at `loose` the DP keeps everything it likes */
    for (int k = 0; k < refine; k++) {
        int64_t mid = loose + (fits - loose) / 2;
        if (chain_try(c, ch, stage, source, mid, &over) >= 0) fits = mid;
        else loose = mid;
    }
    return true;
}

static const char *const presets_ckpt[] = {"ckpt-sqrt", "ckpt:2", "ckpt:3", "ckpt:4", "ckpt:6", "ckpt:8"};
static const char *const presets_offload[] = {"vdnn-all", "vdnn-conv"};
static const char *const presets_rows[] = {"authors-2ps", "authors-overl", "authors-2ps-h", "authors-overl-h"};
static const char *const row_policies[] = {"2ps", "overl"};
static const int row_counts[] = {2, 3, 4, 6, 8};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A row stage from the input may end at layer `end` when a clean cut follows it, every layer up to
 * it is rowwise, and its output still has an eighth of the input's rows (as the row presets'
 * prefix: the high-resolution layers, where the activations are): the most bands it takes (at least
 * 2 rows a band, from row_counts), or 0 where it may not end. */
static int row_stage_bands(const net *n, int end)
{
    if (end + 1 >= n->n || !n->layers[end + 1].cut_before || n->layers[end].h < (n->layers[0].h + 7) / 8) return 0;
    for (int L = 1; L <= end; L++)
        if (!n->layers[L].rowwise) return 0;
    int most = 0;
    for (size_t k = 0; k < sizeof row_counts / sizeof *row_counts; k++)
        if (n->layers[end].h >= 2 * row_counts[k]) most = row_counts[k];
    return most;
}

/* The presets of every kind the space has (a checkpointing preset is a plan of the ckpt space, so
 * the search never refuses a budget one of them meets; `presets` alone: every preset), `layer` first. */
static void eval_presets(search_ctx *c)
{
    const search_req *r = c->r;
    char text[PLAN_TEXT_LEN];
    unsigned kinds = r->space == SEARCH_PRESETS ? SEARCH_ALL : r->space; /* `presets` alone: all of them */
    eval_both(c, "layer", "preset");
    for (size_t i = 0; (kinds & SEARCH_CKPT) && i < sizeof presets_ckpt / sizeof *presets_ckpt; i++)
        eval_both(c, presets_ckpt[i], "preset");
    for (size_t i = 0; (kinds & SEARCH_OFFLOAD) && i < sizeof presets_offload / sizeof *presets_offload; i++)
        eval_both(c, presets_offload[i], "preset");
    for (size_t k = 0; (kinds & SEARCH_ROWS) && k < sizeof row_counts / sizeof *row_counts; k++)
        for (int pol = 0; pol < 2; pol++) {
            snprintf(text, sizeof text, "%s:%d", row_policies[pol], row_counts[k]);
            eval_both(c, text, "preset");
            if (!(kinds & SEARCH_CKPT)) continue;
            snprintf(text, sizeof text, "%s-h:%d", row_policies[pol], row_counts[k]);
            eval_both(c, text, "preset");
        }
    for (size_t i = 0; (kinds & SEARCH_ROWS) && i < sizeof presets_rows / sizeof *presets_rows; i++)
        eval_both(c, presets_rows[i], "preset");
}

/* The candidates that keep least, none chosen by the budget (the basis plans: search_point.basis):
 * the presets again (each with every encoding, and an arena where it may be the smallest); the
 * whole net's least-keeping split, and the DP's splits at LEAST_LADDER model budgets spaced evenly in
 * log from the replayed peak of that split down to half of it (the DP's model is conservative: a
 * split it says keeps more may replay smaller); and each row stage at every band count followed by
 * the least-keeping split of the rest. */
#define LEAST_LADDER 16
static void eval_least(search_ctx *c)
{
    const search_req *r = c->r;
    const net *n = r->n;
    char text[PLAN_TEXT_LEN], rest[PLAN_TEXT_LEN / 2];
    chain ch;
    c->basis = true;
    eval_presets(c);
    if (c->cn) {
        chain_init(&ch, r, c->cn, 1);
        chain_min(&ch, text, sizeof text);
        int i = *text ? eval_both(c, text, "dp") : -1;
        for (int k = 0; i >= 0 && k < LEAST_LADDER; k++) {
            int64_t model = (int64_t)((double)c->out->pts[i].peak * pow(0.5, (double)k / (LEAST_LADDER - 1)));
            if (!chain_dp(&ch, r->budget - model, text, sizeof text) && *text) eval_both(c, text, "dp");
        }
        chain_free(&ch);
    }
    for (int end = 1; (r->space & SEARCH_ROWS) && end < n->n; end++) {
        int most = row_stage_bands(n, end);
        if (!most) continue;
        rest[0] = 0;
        if (c->cn) chain_init(&ch, r, c->cn, end + 1), chain_min(&ch, rest, sizeof rest), chain_free(&ch);
        for (int pol = 0; pol < 2; pol++) /* every band count: more bands keep less, but their halos may not */
            for (size_t k = 0; k < sizeof row_counts / sizeof *row_counts && row_counts[k] <= most; k++) {
                snprintf(text, sizeof text, "rows(%s,%d)@%s..%s%s%.*s", row_policies[pol], row_counts[k], n->layers[1].name,
                         n->layers[end].name, *rest ? "; " : "", PLAN_TEXT_LEN / 2 - 1, rest);
                eval_both(c, text, "rows+dp");
            }
    }
}

static const search_point *order_pts;
static int by_time(const void *a, const void *b)
{
    double x = order_pts[*(const int *)a].time_us, y = order_pts[*(const int *)b].time_us;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

/* Migration where it could make a faster plan fit: for each migration (when a plan already fits,
 * only the gradients' release, which moves nothing: the others' moves cost time a fitting plan
 * need not spend), the candidates so far that do not fit, are not known to be slower than the
 * best that does, carry no migration yet and could fit with it (peak minus all it moves),
 * fastest first (a migration adds about the same moves to every plan); at most MIGRATE_TRIES
 * each, until MIGRATE_FITS fit.
 * Every migration is tried when nothing fits without one: which is faster, moving more or
 * recomputing more, depends on the link (on a CPU, moves are copies within one memory). */
static void eval_migrations(search_ctx *c)
{
    const search_req *r = c->r;
    int n = c->out->n_pts;
    int *idx = err_calloc((size_t)n + 1, sizeof(int));
    char text[PLAN_TEXT_LEN];
    bool fitted = c->out->best >= 0;
    for (int m = 0; m < (int)(sizeof migrations / sizeof *migrations); m++) {
        if (m > 0 && fitted) break;
        int64_t savable = migrate_savable(r, m), k = 0;
        const search_point *pts = c->out->pts;
        double best_us = fitted ? pts[c->out->best].time_us : INFINITY;
        for (int i = 0; i < n; i++)
            if (pts[i].footprint > r->budget && pts[i].peak - savable <= r->budget && !strstr(pts[i].text, "+migrate") &&
                !(pts[i].time_us >= best_us))
                idx[k++] = i;
        order_pts = pts;
        qsort(idx, (size_t)k, sizeof *idx, by_time);
        for (int j = 0, tried = 0, fits = 0; j < k && tried < MIGRATE_TRIES && fits < MIGRATE_FITS; j++) {
            const char *base = c->out->pts[idx[j]].text, *bn = strstr(base, " bn=");
            int len = bn ? (int)(bn - base) : (int)strlen(base);
            if ((size_t)snprintf(text, sizeof text, "%.*s+%s", len, base, migrations[m]) >= sizeof text) continue;
            int i = eval(c, text, "migrate");
            tried++;
            fits += i >= 0 && c->out->pts[i].footprint <= r->budget;
        }
    }
    free(idx);
}

int search_run(const search_req *r, search_result *out, err *e)
{
    double t0 = now_s();
    memset(out, 0, sizeof *out);
    out->best = out->least = -1;
    search_ctx c = {.r = r, .out = out, .e = e, .basis_least = -1};
    const net *n = r->n;
    char text[PLAN_TEXT_LEN];
    if (eval(&c, "layer", "preset") < 0) return err_set(e, "plan 'layer' does not lower for %s", n->name);
    c.basis = true;
    eval_presets(&c);
    c.basis = false;
    chain_net cn;
    if (r->space & (SEARCH_CKPT | SEARCH_OFFLOAD)) {
        if (chain_net_init(&cn, r, e)) return -1;
        c.cn = &cn;
        chain ch;
        chain_init(&ch, r, c.cn, 1);
        eval_with_chain(&c, &ch, "", "dp", 8);
        chain_min(&ch, text, sizeof text);
        if (*text) eval_both(&c, text, "dp");
        chain_free(&ch);
    }
    if (r->space & SEARCH_OFFLOAD) /* which maps move and when (Beaumont et al.), by both relaxations */
        for (int m = OFFSEL_ROUND; m <= OFFSEL_DIVE; m++) {
            offsel_req oq = {.n = n, .cfg = r->cfg, .dev = r->dev, .prefix = "", .first = 1, .bn = r->bn, .budget = r->budget,
                             .window = m == OFFSEL_ROUND ? 2 : 1}; /* ResNet-50 under a second */
            offsel_result o;
            if (!offsel_solve(&oq, (offsel_method)m, &o, e) && o.found && o.chosen) eval_both(&c, o.text, "offsel");
            offsel_result_free(&o);
        }
    for (int end = 1; (r->space & SEARCH_ROWS) && end < n->n; end++) {
        int most = row_stage_bands(n, end);
        if (!most) continue;
        chain ch;
        bool dp = c.cn != NULL;
        if (dp) chain_init(&ch, r, c.cn, end + 1);
        /* more bands cost more time for less memory: per policy, the fewest bands that fit; none
         * when the most bands with the least-keeping rest do not */
        for (int pol = 0; pol < 2; pol++) {
            char rest[PLAN_TEXT_LEN / 2] = "";
            if (dp) chain_min(&ch, rest, sizeof rest);
            snprintf(text, sizeof text, "rows(%s,%d)@%s..%s%s%s", row_policies[pol], most, n->layers[1].name,
                     n->layers[end].name, *rest ? "; " : "", rest);
            int i = eval_both(&c, text, "rows+dp");
            if (i < 0 || c.out->pts[i].footprint > r->budget) continue;
            for (size_t k = 0; k < sizeof row_counts / sizeof *row_counts && row_counts[k] <= most; k++) {
                snprintf(text, sizeof text, "rows(%s,%d)@%s..%s", row_policies[pol], row_counts[k], n->layers[1].name,
                         n->layers[end].name);
                if (dp ? eval_with_chain(&c, &ch, text, "rows+dp", 0)
                       : ((i = eval_both(&c, text, "rows")) >= 0 && c.out->pts[i].footprint <= r->budget))
                    break;
            }
        }
        if (dp) chain_free(&ch);
    }
    if (r->space & SEARCH_MIGRATE) eval_migrations(&c);
    if (out->best < 0 && !c.least) {
        /* nothing fits: the least-keeping candidates, each with every encoding, so that the smallest
         * footprint reported is the space's (the basis plans'), not that of what this budget tried */
        c.least = true;
        eval_least(&c);
        if (c.basis_least >= 0) out->least = c.basis_least;
    }
    if (c.cn) chain_net_free(&cn);
    /* a preset is kept unless the plan found is faster by more than the model can tell apart */
    out->fastest = out->best, out->preset = -1;
    for (int i = 0; i < out->n_pts; i++)
        if (!strcmp(out->pts[i].source, "preset") && out->pts[i].footprint <= r->budget &&
            (out->preset < 0 || out->pts[i].time_us < out->pts[out->preset].time_us))
            out->preset = i;
    out->margin = r->margin ? *r->margin : r->dev->model ? timing_margin(r->dev->model) : 0;
    if (out->preset >= 0 && out->best >= 0 && out->pts[out->preset].time_us <= out->pts[out->best].time_us * (1 + out->margin))
        out->best = out->preset;
    out->seconds = now_s() - t0;
    return 0;
}

void search_free(search_result *r)
{
    for (int i = 0; i < r->n_pts; i++) free(r->pts[i].text);
    free(r->pts);
    memset(r, 0, sizeof *r);
}

static const search_point *sort_pts;
static int by_footprint(const void *a, const void *b)
{
    const search_point *x = &sort_pts[*(const int *)a], *y = &sort_pts[*(const int *)b];
    if (x->footprint != y->footprint) return x->footprint < y->footprint ? -1 : 1;
    return (x->time_us > y->time_us) - (x->time_us < y->time_us);
}

int *search_frontier(const search_point *pts, int n, int *count)
{
    int *idx = err_calloc((size_t)n + 1, sizeof(int)), k = 0;
    for (int i = 0; i < n; i++) idx[i] = i;
    sort_pts = pts;
    qsort(idx, (size_t)n, sizeof *idx, by_footprint);
    double fastest = INFINITY;
    for (int i = 0; i < n; i++)
        if (pts[idx[i]].time_us < fastest) fastest = pts[idx[i]].time_us, idx[k++] = idx[i];
    *count = k;
    return idx;
}
