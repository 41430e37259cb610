/* offsel: see offsel.h. The instance and its program are milp.c's; here they are solved and the
 * choice read back, repaired where rounding left the budget, and timed. */
#include "sim/planner/offsel.h"
#include "sim/lower/pipeline.h"

#include <glpk.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "sim/lower/lower.h"
#include "sim/planner/milp.h"


const char *offsel_method_name(offsel_method m)
{
    static const char *names[] = {"round", "dive", "exact"};
    return names[m];
}

static int lp_solve(glp_prob *lp, bool presolve);

/* --- solutions ---------------------------------------------------------------------------------- */

/* A choice per candidate: -1 not moved, else its release option d and prefetch option a (1-based). */
typedef struct {
    int *d, *a;
} choice;

/* The modelled peak of choice ch over the budget (0 when it fits): the most any period exceeds it. */
static int64_t model_excess(const milp_inst *in, const choice *ch)
{
    int64_t worst = 0;
    for (int k = 0; k < in->K; k++) {
        if (in->base[k] <= in->r->budget) continue;
        int64_t away = 0;
        for (int c = 0; c < in->n_cand; c++) {
            const milp_cand *cd = &in->cands[c];
            if (ch->d[c] < 0) continue;
            for (int i = cd->map0; i < cd->map0 + cd->n_map; i++)
                if (in->maps[i].r[ch->d[c]] <= k && in->maps[i].q[ch->a[c] - 1] > k) away += in->maps[i].bytes;
        }
        if (in->base[k] - away - in->r->budget > worst) worst = in->base[k] - away - in->r->budget;
    }
    return worst;
}

/* The plan of a choice: prefix; offload(NAME[:d:a], ...)@FIRST..LAST; NULL when nothing is moved
 * or the text is too long. */
static char *choice_text(const milp_inst *in, const choice *ch)
{
    const offsel_req *r = in->r;
    const net *n = r->n;
    char *t = err_calloc(PLAN_TEXT_LEN, 1);
    size_t at = (size_t)snprintf(t, PLAN_TEXT_LEN, "%s%soffload(", r->prefix, *r->prefix ? "; " : "");
    int picked = 0;
    for (int c = 0; c < in->n_cand && at < PLAN_TEXT_LEN; c++) {
        if (ch->d[c] < 0) continue;
        const char *name = n->layers[in->cands[c].layer].name;
        if (ch->d[c] == 0 && ch->a[c] == 1) at += (size_t)snprintf(t + at, PLAN_TEXT_LEN - at, "%s%s", picked ? ", " : "", name);
        else at += (size_t)snprintf(t + at, PLAN_TEXT_LEN - at, "%s%s:%d:%d", picked ? ", " : "", name, ch->d[c], ch->a[c]);
        picked++;
    }
    if (at < PLAN_TEXT_LEN)
        at += (size_t)snprintf(t + at, PLAN_TEXT_LEN - at, ")@%s..%s", n->layers[r->first].name, n->layers[n->n - 1].name);
    if (!picked || at + 64 >= PLAN_TEXT_LEN) { /* room for " bn=..." */
        free(t);
        return NULL;
    }
    return t;
}

static double col_val(const milp_inst *in, int j, bool mip) { return mip ? glp_mip_col_val(in->lp, j) : glp_get_col_prim(in->lp, j); }

/* The option of the largest value among n columns from j0 (the first of equals). */
static int argmax(const milp_inst *in, int j0, int n, bool mip)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (col_val(in, j0 + k, mip) > col_val(in, j0 + best, mip) + 1e-9) best = k;
    return best;
}

/* The current LP or MIP solution as a choice: the layers at x >= 1/2, each at its likeliest timing. */
static void choice_read(const milp_inst *in, choice *ch, bool mip)
{
    for (int c = 0; c < in->n_cand; c++) {
        const milp_cand *cd = &in->cands[c];
        bool on = col_val(in, cd->x, mip) >= 0.5;
        ch->d[c] = on ? argmax(in, cd->y0, cd->n_free, mip) : -1;
        ch->a[c] = on ? argmax(in, cd->z0, cd->n_fetch, mip) + 1 : 0;
    }
}

/* ROUND's repair: while the memory model says the choice does not fit, the next layer by
 * decreasing relaxed x (then bytes) joins at its likeliest timing, or at vDNN's without one. */
static void choice_repair(const milp_inst *in, choice *ch, const double *x)
{
    int *order = err_calloc((size_t)in->n_cand + 1, sizeof(int)), n = 0;
    for (int c = 0; c < in->n_cand; c++)
        if (ch->d[c] < 0) order[n++] = c;
    for (int i = 1; i < n; i++) /* insertion sort: n is a few hundred at most */
        for (int j = i; j > 0; j--) {
            int p = order[j - 1], q = order[j];
            int64_t bp = in->maps[in->cands[p].map0].bytes, bq = in->maps[in->cands[q].map0].bytes;
            if (x[q] > x[p] + 1e-9 || (fabs(x[q] - x[p]) <= 1e-9 && bq > bp)) order[j - 1] = q, order[j] = p;
            else break;
        }
    for (int i = 0; i < n && model_excess(in, ch) > 0; i++) {
        const milp_cand *cd = &in->cands[order[i]];
        bool lp = x[order[i]] > 1e-9;
        ch->d[order[i]] = lp ? argmax(in, cd->y0, cd->n_free, false) : 0;
        ch->a[order[i]] = lp ? argmax(in, cd->z0, cd->n_fetch, false) + 1 : 1;
    }
    free(order);
}

/* The model's time of a choice: the LP over the transfers alone, every binary fixed to the choice. */
static double choice_time(milp_inst *in, const choice *ch)
{
    for (int c = 0; c < in->n_cand; c++) {
        const milp_cand *cd = &in->cands[c];
        bool on = ch->d[c] >= 0;
        glp_set_col_bnds(in->lp, cd->x, GLP_FX, on, on);
        for (int d = 0; d < cd->n_free; d++) glp_set_col_bnds(in->lp, cd->y0 + d, GLP_FX, on && d == ch->d[c], on && d == ch->d[c]);
        for (int a = 0; a < cd->n_fetch; a++)
            glp_set_col_bnds(in->lp, cd->z0 + a, GLP_FX, on && a + 1 == ch->a[c], on && a + 1 == ch->a[c]);
    }
    return lp_solve(in->lp, true) ? NAN : glp_get_obj_val(in->lp);
}

/* One LP solve: from scratch (presolve), or warm from the last basis after bounds changed (the
 * dual simplex, which such a change leaves feasible). Bounded in time: a degenerate LP can make
 * the simplex stall for minutes (seen on resnet-small), and then the caller falls back. */
#define LP_MS 3000
static int lp_solve(glp_prob *lp, bool presolve)
{
    glp_smcp sm;
    glp_init_smcp(&sm);
    sm.msg_lev = GLP_MSG_OFF, sm.presolve = presolve ? GLP_ON : GLP_OFF, sm.tm_lim = LP_MS;
    if (!presolve) sm.meth = GLP_DUALP;
    int rc = glp_simplex(lp, &sm);
    if (rc == GLP_EFAIL || rc == GLP_ESING || rc == GLP_ECOND) { /* the warm basis went bad: from scratch */
        glp_adv_basis(lp, 0);
        rc = glp_simplex(lp, &sm);
    }
    return !rc && glp_get_status(lp) == GLP_OPT ? 0 : -1;
}

/* Every binary free again, in [0, 1]. */
static void unfix(milp_inst *in)
{
    for (int j = 1; j <= glp_get_num_cols(in->lp); j++)
        if (glp_get_col_kind(in->lp, j) != GLP_CV) glp_set_col_bnds(in->lp, j, GLP_DB, 0, 1); /* a fixed binary reads GLP_IV */
}

/* The binary column among [lo, hi) of the candidates' x (xs) or y and z (!xs) whose relaxed value is
 * fractional and the smallest (smallest) or largest; 0 when none is. */
static int fractional(const milp_inst *in, bool xs, bool smallest)
{
    int pick = 0;
    double best = smallest ? 2 : -1;
    for (int c = 0; c < in->n_cand; c++) {
        const milp_cand *cd = &in->cands[c];
        int j0 = xs ? cd->x : cd->y0, n = xs ? 1 : cd->n_free + cd->n_fetch; /* z follows y */
        for (int j = j0; j < j0 + n; j++) {
            if (glp_get_col_type(in->lp, j) == GLP_FX) continue;
            double v = glp_get_col_prim(in->lp, j);
            if (v > 1e-6 && v < 1 - 1e-6 && (smallest ? v < best : v > best)) best = v, pick = j;
        }
    }
    return pick;
}

/* DIVE: first the layers — the chosen layer least used by the relaxation is fixed out (in, when the
 * rest cannot fit without it) and the relaxation solved again, until every x is whole; then their
 * timings — the likeliest release or prefetch option fixed in (out where infeasible). -1 when
 * neither way is feasible. */
#define DIVE_S 10.0 /* a dive longer than this gives up (ROUND answers instead) */
static double now_s(void);
static int dive(milp_inst *in)
{
    double t0 = now_s();
    for (int phase = 0; phase < 2; phase++)
        for (int pick; (pick = fractional(in, phase == 0, phase == 0));) {
            if (now_s() - t0 > DIVE_S) return -1;
            double first = phase == 0 ? 0 : 1;
            glp_set_col_bnds(in->lp, pick, GLP_FX, first, first);
            if (!lp_solve(in->lp, false)) continue;
            glp_set_col_bnds(in->lp, pick, GLP_FX, 1 - first, 1 - first);
            if (lp_solve(in->lp, false)) return -1;
        }
    return 0;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* EXACT's branch and bound keeps the best bound of its open nodes as the tree grows (it only rises),
 * so that a search stopped by the time limit still proves how far its answer can be from the
 * optimum. */
static void bnb_callback(glp_tree *T, void *info)
{
    double *bound = info;
    int p = glp_ios_best_node(T);
    if (p) {
        double v = glp_ios_node_bound(T, p);
        if (isnan(*bound) || v > *bound) *bound = v;
    }
}

/* EXACT: GLPK's branch and bound (with its MIP presolve: on VGG-16 b32 it proves the optimum in 7 s,
 * where a start handed to the tree without presolve leaves a 17% gap at 10 s) for what is left of
 * the time limit, against ROUND's answer: the faster in the model stands. Returns whether a
 * solution is in `ch`; *optimal when the tree proved its own, *bound the proven bound on the
 * objective (from `lp`, the relaxation's, up). */
static bool exact(milp_inst *in, const offsel_req *r, choice *ch, const double *x, double t0, double lp_s, double lp, bool *optimal,
                  double *bound)
{
    choice_read(in, ch, false);
    choice_repair(in, ch, x);
    int *rd = err_calloc((size_t)in->n_cand + 1, sizeof *rd), *ra = err_calloc((size_t)in->n_cand + 1, sizeof *ra);
    memcpy(rd, ch->d, (size_t)in->n_cand * sizeof *rd), memcpy(ra, ch->a, (size_t)in->n_cand * sizeof *ra);
    double start = model_excess(in, ch) == 0 ? choice_time(in, ch) : NAN;
    unfix(in);
    double limit = r->time_limit_s > 0 ? r->time_limit_s : OFFSEL_LIMIT_S;
    *bound = lp;
    glp_iocp io;
    glp_init_iocp(&io);
    io.msg_lev = GLP_MSG_OFF, io.presolve = GLP_ON, io.cb_func = bnb_callback, io.cb_info = bound;
    /* the tree checks its clock between nodes, and its root solves the relaxation again: the limit
     * less what is spent, less twice one relaxation's time (lp_s: the presolved root, and a node) */
    io.tm_lim = (int)(1000 * fmax(0.1, limit - (now_s() - t0) - 2 * lp_s));
    int rc = glp_intopt(in->lp, &io), st = glp_mip_status(in->lp);
    bool tree = (rc == 0 || rc == GLP_ETMLIM) && (st == GLP_OPT || st == GLP_FEAS);
    *optimal = rc == 0 && st == GLP_OPT;
    if (tree) choice_read(in, ch, true);
    if (*optimal) *bound = glp_mip_obj_val(in->lp);
    bool have = tree;
    if (!isnan(start) && (!tree || (!*optimal && glp_mip_obj_val(in->lp) > start))) { /* ROUND's stands */
        memcpy(ch->d, rd, (size_t)in->n_cand * sizeof *rd), memcpy(ch->a, ra, (size_t)in->n_cand * sizeof *ra);
        have = true;
    }
    free(rd), free(ra);
    return have;
}

int offsel_solve(const offsel_req *r, offsel_method m, offsel_result *out, err *e)
{
    double t0 = now_s();
    memset(out, 0, sizeof *out);
    out->model_us = out->bound_us = NAN;
    milp_inst in;
    if (milp_build(&in, r, e)) return -1;
    glp_term_out(GLP_OFF);
    milp_lp(&in);
    out->candidates = in.n_cand, out->binaries = in.n_bin, out->rows = glp_get_num_rows(in.lp);
    double compute = 0;
    for (int k = 0; k < in.K; k++) compute += in.c[k];
    choice ch = {err_calloc((size_t)in.n_cand + 1, sizeof(int)), err_calloc((size_t)in.n_cand + 1, sizeof(int))};
    for (int c = 0; c < in.n_cand; c++) ch.d[c] = -1;
    bool fits = model_excess(&in, &ch) == 0, have = false;
    if (fits) { /* the prefix fits as it is: nothing to move */
        out->found = true, out->optimal = true;
        out->text = err_strdup(*r->prefix ? r->prefix : "layer");
        out->model_us = out->bound_us = compute;
    } else if (in.n_cand && !lp_solve(in.lp, true)) {
        double lp_s = now_s() - t0;
        out->bound_us = compute + glp_get_obj_val(in.lp);
        double *x = err_calloc((size_t)in.n_cand + 1, sizeof(double));
        for (int c = 0; c < in.n_cand; c++) x[c] = glp_get_col_prim(in.lp, in.cands[c].x);
        if (m == OFFSEL_EXACT) {
            double bound;
            have = exact(&in, r, &ch, x, t0, lp_s, glp_get_obj_val(in.lp), &out->optimal, &bound);
            out->bound_us = compute + bound;
        } else if (m == OFFSEL_DIVE && !dive(&in)) {
            choice_read(&in, &ch, false);
            have = true;
        }
        if (!have || m == OFFSEL_ROUND) { /* ROUND, or a dive that failed: round the first relaxation */
            if (m == OFFSEL_DIVE) unfix(&in), lp_solve(in.lp, true); /* the relaxation again, for its timings */
            if (m != OFFSEL_EXACT) {
                choice_read(&in, &ch, false);
                choice_repair(&in, &ch, x);
                have = true;
            }
        }
        free(x);
    }
    if (have && model_excess(&in, &ch) == 0) {
        out->text = choice_text(&in, &ch);
        out->found = out->text != NULL;
        for (int c = 0; c < in.n_cand; c++) out->chosen += ch.d[c] >= 0;
        if (out->found) out->model_us = compute + choice_time(&in, &ch);
    }
    free(ch.d), free(ch.a);
    milp_free(&in);
    out->seconds = now_s() - t0;
    return 0;
}

int offsel_model(const offsel_req *r, const char *text, double *us, int64_t *peak, err *e)
{
    milp_inst in;
    if (milp_build(&in, r, e)) return -1;
    glp_term_out(GLP_OFF);
    milp_lp(&in);
    choice ch = {err_calloc((size_t)in.n_cand + 1, sizeof(int)), err_calloc((size_t)in.n_cand + 1, sizeof(int))};
    plan p;
    int rc = plan_parse(&p, r->n, text, e);
    bool parsed = !rc;
    for (int c = 0; !rc && c < in.n_cand; c++) {
        const plan_pick *k = plan_pick_of(&p, in.cands[c].layer);
        ch.d[c] = k ? k->free : -1, ch.a[c] = k ? k->fetch : 0;
        if (k && (k->free >= in.cands[c].n_free || k->fetch > in.cands[c].n_fetch))
            rc = err_set(e, "offload(%s:%d:%d): outside the model's options", r->n->layers[k->layer].name, k->free, k->fetch);
    }
    if (!rc) {
        offsel_req loose = *r; /* the peak: the excess over a budget of 0 */
        loose.budget = 0;
        in.r = &loose;
        *peak = model_excess(&in, &ch);
        in.r = r;
        double compute = 0;
        for (int k = 0; k < in.K; k++) compute += in.c[k];
        *us = compute + choice_time(&in, &ch);
    }
    if (parsed) plan_free(&p);
    free(ch.d), free(ch.a);
    milp_free(&in);
    return rc;
}

void offsel_result_free(offsel_result *o)
{
    free(o->text);
    memset(o, 0, sizeof *o);
}
