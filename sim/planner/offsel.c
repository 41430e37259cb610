/* offsel: see offsel.h. Periods are compute steps (every step but ALLOC, FREE, OFFLOAD and
 * PREFETCH), numbered in schedule order; "boundary k" is the moment just before period k's compute.
 * Memory is in MiB inside the LP, to keep its coefficients near 1. */
#include "sim/planner/offsel.h"
#include "sim/lower/pipeline.h"

#include <glpk.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "sim/lower/lower.h"

#define MIB 1048576.0
#define EPS_US 1e-3 /* per chosen layer and per step of delay or lead: ties go to moving less */

/* One kept map of a candidate layer. Periods: it is written last in P, used last in the forward
 * in U and first in the backward in V; with release option d it is away from period r[d] on, and
 * with prefetch option a back from period q[a - 1] on. */
typedef struct {
    int64_t bytes;
    int P, U, V;
    double out_us, in_us;          /* its offload and its prefetch on the link */
    int r[OFFSEL_WINDOW], q[OFFSEL_WINDOW];
    int os0, oc0, ps0, pc0;        /* first transfer column of each kind (0: none) */
    int os_lo, os_hi, oc_lo, oc_hi, ps_lo, ps_hi, pc_lo, pc_hi; /* their periods, inclusive */
} map;

typedef struct {
    int layer, map0, n_map;
    int n_free, n_fetch;           /* options d = 0..n_free-1, a = 1..n_fetch */
    int x, y0, z0;                 /* columns */
} cand;

typedef struct {
    const offsel_req *r;
    int K, F;                      /* periods; the first of the backward */
    double *c;                     /* [K] compute time */
    int64_t *base;                 /* [K] device bytes with nothing away */
    cand *cands;
    map *maps;
    int n_cand, n_map;
    int s0;                        /* stall columns s0 .. s0 + K - 1 */
    glp_prob *lp;
    int n_bin;
} inst;

const char *offsel_method_name(offsel_method m)
{
    static const char *names[] = {"round", "dive", "exact"};
    return names[m];
}

static bool is_move(sched_op op) { return op == SCHED_ALLOC || op == SCHED_FREE || op == SCHED_OFFLOAD || op == SCHED_PREFETCH; }

/* Lowers `text` (with the request's bn); -1 if it is not a plan for the net. */
static int lower_text(const offsel_req *r, const char *text, sched *s, err *e)
{
    char full[PLAN_TEXT_LEN];
    if ((size_t)snprintf(full, sizeof full, "%s%s%s", text, r->bn ? " bn=" : "", r->bn ? r->bn : "") >= sizeof full)
        return err_set(e, "plan text too long");
    plan p;
    if (plan_parse(&p, r->n, full, e)) return -1;
    int rc = pipeline_lower(s, r->n, &p, &r->cfg, e);
    plan_free(&p);
    return rc;
}

/* period[i]: the period of step i (a compute step's own; a move's, that of the next compute step,
 * or the last for moves after it); returns the number of periods. */
static int periods(const sched *s, int *period)
{
    int K = 0;
    for (int i = 0; i < s->n_step; i++)
        if (!is_move(s->steps[i].op)) period[i] = K++;
    for (int i = s->n_step - 1, next = K - 1; i >= 0; i--) {
        if (!is_move(s->steps[i].op)) next = period[i];
        else period[i] = next;
    }
    return K;
}

/* The device bytes during each period's compute: what its last memory event leaves (a period with
 * none holds what the last one before left). Within a period the events run FREEs of the step
 * before, then moves, then ALLOCs of its own step (liveness.c places them so), so no state between
 * two computes exceeds the one before or the one after: the replay's peak is the largest of these. */
typedef struct {
    const int *period;
    int64_t *last;
    bool *seen;
} walk_ctx;

static void base_visit(void *ctx, int step, const int64_t cur[MEM_NCAT])
{
    walk_ctx *w = ctx;
    int64_t dev = 0;
    for (int c = 0; c < MEM_NCAT; c++)
        if (c != MEM_HOST) dev += cur[c];
    int k = w->period[step];
    w->seen[k] = true, w->last[k] = dev;
}

/* Periods and their compute times and memory, from the prefix's schedule b. */
static void inst_periods(inst *in, const sched *b)
{
    int *period = err_calloc((size_t)b->n_step + 1, sizeof(int));
    in->K = periods(b, period);
    in->c = err_calloc((size_t)in->K, sizeof(double));
    in->base = err_calloc((size_t)in->K, sizeof(int64_t));
    in->F = in->K;
    for (int i = 0; i < b->n_step; i++) {
        timing_how how;
        in->c[period[i]] += sim_step_us(in->r->n, b, i, in->r->dev, &how);
        if (!is_move(b->steps[i].op) && b->steps[i].bwd_phase && period[i] < in->F) in->F = period[i];
    }
    walk_ctx w = {period, err_calloc((size_t)in->K, sizeof(int64_t)), err_calloc((size_t)in->K, sizeof(bool))};
    sched_walk(b, base_visit, &w);
    for (int k = 0; k < in->K; k++) in->base[k] = w.last[k] = w.seen[k] || !k ? w.last[k] : w.last[k - 1];
    free(period), free(w.last), free(w.seen);
}

/* The map of buffer b of schedule a (offload(all)), its OFFLOAD at step o: its periods and options. */
static void map_init(inst *in, const sched *a, const int *period, const int *issue, int o, int pf, map *m)
{
    int b = a->steps[o].buf;
    memset(m, 0, sizeof *m);
    m->bytes = a->bufs[b].bytes;
    m->U = -1, m->V = in->K;
    for (int i = 0; i < a->n_step; i++) {
        const sched_step *t = &a->steps[i];
        if (is_move(t->op)) continue;
        int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
        for (int u = 0; u < nu; u++) {
            if (uses[u] != b) continue;
            if (!t->bwd_phase) m->U = period[i];
            else if (period[i] < m->V) m->V = period[i];
        }
    }
    m->P = issue[o] >= 0 ? period[issue[o]] : m->U;
    timing_how how;
    m->out_us = sim_step_us(in->r->n, a, o, in->r->dev, &how);
    m->in_us = sim_step_us(in->r->n, a, pf, in->r->dev, &how);
}

/* Release and prefetch options of map m over the compute steps of a (FWD and BWD kinds by period),
 * as stash_place_moves counts them; returns how many of each are valid in *nf, *na. */
static void map_options(const inst *in, const sched_op *op, const bool *bwd, map *m, int window, int *nf, int *na)
{
    int d = 0;
    m->r[d++] = m->U + 1;
    for (int k = m->U + 1; k < in->F && d < window; k++)
        if (op[k] == SCHED_FWD && !bwd[k]) m->r[d++] = k + 1;
    *nf = d;
    int a = 0;
    for (int k = m->V - 1; k >= in->F && a < window; k--)
        if (op[k] == SCHED_BWD) m->q[a++] = k;
    if (!a) m->q[a++] = m->V; /* no backward step between: at the use itself (stash's fallback) */
    *na = a;
}

static void inst_free(inst *in)
{
    free(in->c), free(in->base), free(in->cands), free(in->maps);
    if (in->lp) glp_delete_prob(in->lp);
    glp_free_env(); /* GLPK's own state: nothing of it outlives a solve */
    memset(in, 0, sizeof *in);
}

/* Candidates: the layers of [first - 1, last] whose maps offload(all) moves, grouped, with the
 * options every map of the layer has. */
static int inst_build(inst *in, const offsel_req *r, err *e)
{
    memset(in, 0, sizeof *in);
    in->r = r;
    const net *n = r->n;
    char text[PLAN_TEXT_LEN];
    sched b, a;
    if (lower_text(r, *r->prefix ? r->prefix : "layer", &b, e)) return -1;
    snprintf(text, sizeof text, "%s%soffload(all)@%s..%s", r->prefix, *r->prefix ? "; " : "", n->layers[r->first].name,
             n->layers[n->n - 1].name);
    if (lower_text(r, text, &a, e)) {
        sched_free(&b);
        return -1;
    }
    inst_periods(in, &b);
    int *period = err_calloc((size_t)a.n_step + 1, sizeof(int)), *issue = err_calloc((size_t)a.n_step + 1, sizeof(int));
    int *pf_of = err_calloc((size_t)a.n_buf + 1, sizeof(int));
    CHECK(periods(&a, period) == in->K);
    sched_move_issue(&a, issue);
    sched_op *op = err_calloc((size_t)in->K, sizeof(sched_op));
    bool *bwd = err_calloc((size_t)in->K, sizeof(bool));
    for (int i = 0; i < a.n_step; i++) {
        if (!is_move(a.steps[i].op)) op[period[i]] = a.steps[i].op, bwd[period[i]] = a.steps[i].bwd_phase;
        if (a.steps[i].op == SCHED_PREFETCH) pf_of[a.steps[i].buf] = i;
    }
    in->maps = err_calloc((size_t)a.n_step + 1, sizeof(map));
    in->cands = err_calloc((size_t)n->n + 1, sizeof(cand));
    int window = r->window > 0 && r->window < OFFSEL_WINDOW ? r->window : OFFSEL_WINDOW;
    /* moves in line cost the same wherever they stand, and releasing late or fetching early only
     * holds memory longer: vDNN's timing is then the best, the only option worth a column */
    if (!r->dev->overlap) window = 1;
    for (int L = r->first - 1; L < n->n; L++) {
        cand *cd = &in->cands[in->n_cand];
        *cd = (cand){.layer = L, .map0 = in->n_map, .n_free = window, .n_fetch = window};
        for (int i = 0; i < a.n_step; i++) {
            if (a.steps[i].op != SCHED_OFFLOAD || a.bufs[a.steps[i].buf].layer != L) continue;
            map *m = &in->maps[in->n_map++];
            map_init(in, &a, period, issue, i, pf_of[a.steps[i].buf], m);
            int nf, na;
            map_options(in, op, bwd, m, window, &nf, &na);
            if (nf < cd->n_free) cd->n_free = nf;
            if (na < cd->n_fetch) cd->n_fetch = na;
        }
        cd->n_map = in->n_map - cd->map0;
        if (cd->n_map) in->n_cand++;
    }
    free(period), free(issue), free(pf_of), free(op), free(bwd);
    sched_free(&a), sched_free(&b);
    return 0;
}

/* --- the MILP ----------------------------------------------------------------------------------- */

typedef struct {
    int n, cap;
    int *idx;
    double *val;
} row_buf;

static void row_add(row_buf *w, int col, double v)
{
    if (w->n + 2 > w->cap) {
        w->cap = w->cap * 2 + 64;
        w->idx = err_realloc(w->idx, (size_t)w->cap * sizeof(int));
        w->val = err_realloc(w->val, (size_t)w->cap * sizeof(double));
    }
    w->idx[++w->n] = col, w->val[w->n] = v; /* GLPK's arrays start at 1 */
}

static void row_put(glp_prob *lp, row_buf *w, int type, double lo, double hi)
{
    int i = glp_add_rows(lp, 1);
    glp_set_row_bnds(lp, i, type, lo, hi);
    glp_set_mat_row(lp, i, w->n, w->idx, w->val);
    w->n = 0;
}

static int cols(glp_prob *lp, int count, int kind, double lo, double hi, double cost)
{
    int j = glp_add_cols(lp, count);
    for (int k = 0; k < count; k++) {
        glp_set_col_bnds(lp, j + k, hi > lo ? GLP_DB : GLP_LO, lo, hi);
        glp_set_col_kind(lp, j + k, kind);
        glp_set_obj_coef(lp, j + k, cost);
    }
    return j;
}

/* Transfer columns of one kind of map m over periods [lo, hi] (none when empty): their first. */
static int transfers(glp_prob *lp, int lo, int hi)
{
    return hi >= lo ? cols(lp, hi - lo + 1, GLP_CV, 0, 1, 0) : 0;
}

static void inst_lp(inst *in)
{
    const offsel_req *r = in->r;
    glp_prob *lp = in->lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    bool ovl = r->dev->overlap;
    in->s0 = cols(lp, in->K, GLP_CV, 0, 0, 1); /* stalls: [0, inf) */
    row_buf w = {0};
    for (int c = 0; c < in->n_cand; c++) {
        cand *cd = &in->cands[c];
        cd->x = cols(lp, 1, GLP_BV, 0, 1, EPS_US);
        cd->y0 = glp_add_cols(lp, cd->n_free);
        cd->z0 = glp_add_cols(lp, cd->n_fetch);
        for (int d = 0; d < cd->n_free; d++)
            glp_set_col_kind(lp, cd->y0 + d, GLP_BV), glp_set_obj_coef(lp, cd->y0 + d, EPS_US * d);
        for (int a = 0; a < cd->n_fetch; a++)
            glp_set_col_kind(lp, cd->z0 + a, GLP_BV), glp_set_obj_coef(lp, cd->z0 + a, EPS_US * a);
        in->n_bin += 1 + cd->n_free + cd->n_fetch;
        row_add(&w, cd->x, -1);
        for (int d = 0; d < cd->n_free; d++) row_add(&w, cd->y0 + d, 1);
        row_put(lp, &w, GLP_FX, 0, 0);
        row_add(&w, cd->x, -1);
        for (int a = 0; a < cd->n_fetch; a++) row_add(&w, cd->z0 + a, 1);
        row_put(lp, &w, GLP_FX, 0, 0);
        for (int i = cd->map0; i < cd->map0 + cd->n_map; i++) {
            map *m = &in->maps[i];
            int rmax = m->r[cd->n_free - 1], qmin = m->q[cd->n_fetch - 1];
            /* an offload moves from its writer's end to its release: stalls of P+1..r, computes of P+1..r-1;
             * a prefetch from its issue to its first use: computes of q..V-1, stalls of q+1..V */
            m->os_lo = m->P + 1, m->os_hi = rmax, m->oc_lo = m->P + 1, m->oc_hi = ovl ? rmax - 1 : m->P;
            m->ps_lo = qmin + 1, m->ps_hi = m->V, m->pc_lo = qmin, m->pc_hi = ovl ? m->V - 1 : qmin - 1;
            if (m->os_hi >= in->K) m->os_hi = in->K - 1;
            if (m->ps_hi >= in->K) m->ps_hi = in->K - 1;
            m->os0 = transfers(lp, m->os_lo, m->os_hi), m->oc0 = transfers(lp, m->oc_lo, m->oc_hi);
            m->ps0 = transfers(lp, m->ps_lo, m->ps_hi), m->pc0 = transfers(lp, m->pc_lo, m->pc_hi);
            /* each direction moves the whole map once, when the layer is chosen */
            for (int dir = 0; dir < 2; dir++) {
                row_add(&w, cd->x, -1);
                int c0[2] = {dir ? m->ps0 : m->os0, dir ? m->pc0 : m->oc0};
                int lo[2] = {dir ? m->ps_lo : m->os_lo, dir ? m->pc_lo : m->oc_lo};
                int hi[2] = {dir ? m->ps_hi : m->os_hi, dir ? m->pc_hi : m->oc_hi};
                for (int part = 0; part < 2; part++)
                    for (int k = lo[part]; c0[part] && k <= hi[part]; k++) row_add(&w, c0[part] + k - lo[part], 1);
                row_put(lp, &w, GLP_FX, 0, 0);
            }
            /* a transfer column only where its timing option opens its period */
            for (int k = m->os_lo; m->os0 && k <= m->os_hi; k++) {
                row_add(&w, m->os0 + k - m->os_lo, 1);
                for (int d = 0; d < cd->n_free; d++)
                    if (m->r[d] >= k) row_add(&w, cd->y0 + d, -1);
                row_put(lp, &w, GLP_UP, 0, 0);
            }
            for (int k = m->oc_lo; m->oc0 && k <= m->oc_hi; k++) {
                row_add(&w, m->oc0 + k - m->oc_lo, 1);
                for (int d = 0; d < cd->n_free; d++)
                    if (m->r[d] > k) row_add(&w, cd->y0 + d, -1);
                row_put(lp, &w, GLP_UP, 0, 0);
            }
            for (int k = m->ps_lo; m->ps0 && k <= m->ps_hi; k++) {
                row_add(&w, m->ps0 + k - m->ps_lo, 1);
                for (int a = 0; a < cd->n_fetch; a++)
                    if (m->q[a] < k) row_add(&w, cd->z0 + a, -1);
                row_put(lp, &w, GLP_UP, 0, 0);
            }
            for (int k = m->pc_lo; m->pc0 && k <= m->pc_hi; k++) {
                row_add(&w, m->pc0 + k - m->pc_lo, 1);
                for (int a = 0; a < cd->n_fetch; a++)
                    if (m->q[a] <= k) row_add(&w, cd->z0 + a, -1);
                row_put(lp, &w, GLP_UP, 0, 0);
            }
        }
    }
    /* the link, per period: in the stall, and beside the compute */
    for (int k = 0; k < in->K; k++)
        for (int part = 0; part < 2; part++) {
            for (int i = 0; i < in->n_map; i++) {
                const map *m = &in->maps[i];
                int oc = part ? m->oc0 : m->os0, olo = part ? m->oc_lo : m->os_lo, ohi = part ? m->oc_hi : m->os_hi;
                int pc = part ? m->pc0 : m->ps0, plo = part ? m->pc_lo : m->ps_lo, phi = part ? m->pc_hi : m->ps_hi;
                if (oc && k >= olo && k <= ohi) row_add(&w, oc + k - olo, m->out_us);
                if (pc && k >= plo && k <= phi) row_add(&w, pc + k - plo, m->in_us);
            }
            if (!w.n) continue;
            if (part) row_put(lp, &w, GLP_UP, 0, in->c[k]);
            else row_add(&w, in->s0 + k, -1), row_put(lp, &w, GLP_UP, 0, 0);
        }
    /* memory, in periods over the budget */
    for (int k = 0; k < in->K; k++) {
        if (in->base[k] <= r->budget) continue;
        for (int c = 0; c < in->n_cand; c++) {
            const cand *cd = &in->cands[c];
            double *yv = err_calloc((size_t)cd->n_free + cd->n_fetch + 1, sizeof(double)), *zv = yv + cd->n_free;
            for (int i = cd->map0; i < cd->map0 + cd->n_map; i++) {
                const map *m = &in->maps[i];
                for (int d = 0; d < cd->n_free; d++) yv[d] += m->r[d] <= k ? (double)m->bytes / MIB : 0;
                for (int a = 0; a < cd->n_fetch; a++) zv[a] -= m->q[a] <= k && m->r[0] <= k ? (double)m->bytes / MIB : 0;
            }
            for (int d = 0; d < cd->n_free; d++)
                if (yv[d] != 0) row_add(&w, cd->y0 + d, yv[d]);
            for (int a = 0; a < cd->n_fetch; a++)
                if (zv[a] != 0) row_add(&w, cd->z0 + a, zv[a]);
            free(yv);
        }
        double need = (double)(in->base[k] - r->budget) / MIB;
        if (w.n) row_put(lp, &w, GLP_LO, need, 0);
        else row_add(&w, in->s0 + k, 0), row_put(lp, &w, GLP_LO, need, 0); /* nothing can help: infeasible */
    }
    free(w.idx), free(w.val);
    glp_scale_prob(lp, GLP_SF_AUTO); /* microseconds and MiB side by side */
}

static int lp_solve(glp_prob *lp, bool presolve);

/* --- solutions ---------------------------------------------------------------------------------- */

/* A choice per candidate: -1 not moved, else its release option d and prefetch option a (1-based). */
typedef struct {
    int *d, *a;
} choice;

/* The modelled peak of choice ch over the budget (0 when it fits): the most any period exceeds it. */
static int64_t model_excess(const inst *in, const choice *ch)
{
    int64_t worst = 0;
    for (int k = 0; k < in->K; k++) {
        if (in->base[k] <= in->r->budget) continue;
        int64_t away = 0;
        for (int c = 0; c < in->n_cand; c++) {
            const cand *cd = &in->cands[c];
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
static char *choice_text(const inst *in, const choice *ch)
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

static double col_val(const inst *in, int j, bool mip) { return mip ? glp_mip_col_val(in->lp, j) : glp_get_col_prim(in->lp, j); }

/* The option of the largest value among n columns from j0 (the first of equals). */
static int argmax(const inst *in, int j0, int n, bool mip)
{
    int best = 0;
    for (int k = 1; k < n; k++)
        if (col_val(in, j0 + k, mip) > col_val(in, j0 + best, mip) + 1e-9) best = k;
    return best;
}

/* The current LP or MIP solution as a choice: the layers at x >= 1/2, each at its likeliest timing. */
static void choice_read(const inst *in, choice *ch, bool mip)
{
    for (int c = 0; c < in->n_cand; c++) {
        const cand *cd = &in->cands[c];
        bool on = col_val(in, cd->x, mip) >= 0.5;
        ch->d[c] = on ? argmax(in, cd->y0, cd->n_free, mip) : -1;
        ch->a[c] = on ? argmax(in, cd->z0, cd->n_fetch, mip) + 1 : 0;
    }
}

/* ROUND's repair: while the memory model says the choice does not fit, the next layer by
 * decreasing relaxed x (then bytes) joins at its likeliest timing, or at vDNN's without one. */
static void choice_repair(const inst *in, choice *ch, const double *x)
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
        const cand *cd = &in->cands[order[i]];
        bool lp = x[order[i]] > 1e-9;
        ch->d[order[i]] = lp ? argmax(in, cd->y0, cd->n_free, false) : 0;
        ch->a[order[i]] = lp ? argmax(in, cd->z0, cd->n_fetch, false) + 1 : 1;
    }
    free(order);
}

/* The model's time of a choice: the LP over the transfers alone, every binary fixed to the choice. */
static double choice_time(inst *in, const choice *ch)
{
    for (int c = 0; c < in->n_cand; c++) {
        const cand *cd = &in->cands[c];
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
static void unfix(inst *in)
{
    for (int j = 1; j <= glp_get_num_cols(in->lp); j++)
        if (glp_get_col_kind(in->lp, j) == GLP_BV) glp_set_col_bnds(in->lp, j, GLP_DB, 0, 1);
}

/* The binary column among [lo, hi) of the candidates' x (xs) or y and z (!xs) whose relaxed value is
 * fractional and the smallest (smallest) or largest; 0 when none is. */
static int fractional(const inst *in, bool xs, bool smallest)
{
    int pick = 0;
    double best = smallest ? 2 : -1;
    for (int c = 0; c < in->n_cand; c++) {
        const cand *cd = &in->cands[c];
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
static int dive(inst *in)
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

int offsel_solve(const offsel_req *r, offsel_method m, offsel_result *out, err *e)
{
    double t0 = now_s();
    memset(out, 0, sizeof *out);
    out->model_us = out->bound_us = NAN;
    inst in;
    if (inst_build(&in, r, e)) return -1;
    glp_term_out(GLP_OFF);
    inst_lp(&in);
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
        out->bound_us = compute + glp_get_obj_val(in.lp);
        double *x = err_calloc((size_t)in.n_cand + 1, sizeof(double));
        for (int c = 0; c < in.n_cand; c++) x[c] = glp_get_col_prim(in.lp, in.cands[c].x);
        if (m == OFFSEL_EXACT) {
            glp_iocp io;
            glp_init_iocp(&io);
            io.msg_lev = GLP_MSG_OFF, io.presolve = GLP_ON;
            io.tm_lim = (int)(1000 * (r->time_limit_s > 0 ? r->time_limit_s : 60));
            int rc = glp_intopt(in.lp, &io), st = glp_mip_status(in.lp);
            have = (rc == 0 || rc == GLP_ETMLIM) && (st == GLP_OPT || st == GLP_FEAS);
            out->optimal = rc == 0 && st == GLP_OPT;
            if (have) choice_read(&in, &ch, true);
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
    inst_free(&in);
    out->seconds = now_s() - t0;
    return 0;
}

int offsel_model(const offsel_req *r, const char *text, double *us, int64_t *peak, err *e)
{
    inst in;
    if (inst_build(&in, r, e)) return -1;
    glp_term_out(GLP_OFF);
    inst_lp(&in);
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
    inst_free(&in);
    return rc;
}

void offsel_result_free(offsel_result *o)
{
    free(o->text);
    memset(o, 0, sizeof *o);
}
