/* milp: see milp.h. Periods are compute steps (every step but ALLOC, FREE, OFFLOAD and PREFETCH),
 * numbered in schedule order; "boundary k" is the moment just before period k's compute. Memory is
 * in MiB inside the LP, to keep its coefficients near 1. */
#include "sim/planner/milp.h"

#include <math.h>
#include <string.h>

#include "sim/lower/pipeline.h"
#include "sim/predict/sim.h"

#define MIB 1048576.0
#define EPS_US 1e-3 /* per chosen layer and per step of delay or lead: ties go to moving less */

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
        if (!sched_op_is_event(s->steps[i].op)) period[i] = K++;
    for (int i = s->n_step - 1, next = K - 1; i >= 0; i--) {
        if (!sched_op_is_event(s->steps[i].op)) next = period[i];
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

static void base_visit(void *ctx, int step, int up, int64_t dev, const int64_t cur[MEM_NCAT])
{
    (void)up, (void)cur;
    walk_ctx *w = ctx;
    int k = w->period[step];
    w->seen[k] = true, w->last[k] = dev;
}

/* Periods and their compute times and memory, from the prefix's schedule b. */
static void inst_periods(milp_inst *in, const sched *b)
{
    int *period = err_calloc((size_t)b->n_step + 1, sizeof(int));
    in->K = periods(b, period);
    in->c = err_calloc((size_t)in->K, sizeof(double));
    in->base = err_calloc((size_t)in->K, sizeof(int64_t));
    in->F = in->K;
    for (int i = 0; i < b->n_step; i++) {
        timing_how how;
        in->c[period[i]] += sim_step_us(in->r->n, b, i, in->r->dev, &how);
        if (!sched_op_is_event(b->steps[i].op) && b->steps[i].bwd_phase && period[i] < in->F) in->F = period[i];
    }
    walk_ctx w = {period, err_calloc((size_t)in->K, sizeof(int64_t)), err_calloc((size_t)in->K, sizeof(bool))};
    sched_walk(b, base_visit, &w);
    for (int k = 0; k < in->K; k++) in->base[k] = w.last[k] = w.seen[k] || !k ? w.last[k] : w.last[k - 1];
    free(period), free(w.last), free(w.seen);
}

/* The map of buffer b of schedule a (offload(all)), its OFFLOAD at step o: its periods and options. */
static void map_init(milp_inst *in, const sched *a, const int *period, const int *issue, int o, int pf, milp_map *m)
{
    int b = a->steps[o].buf;
    memset(m, 0, sizeof *m);
    m->bytes = a->bufs[b].bytes;
    m->U = -1, m->V = in->K;
    for (int i = 0; i < a->n_step; i++) {
        const sched_step *t = &a->steps[i];
        if (sched_op_is_event(t->op)) continue;
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
static void map_options(const milp_inst *in, const sched_op *op, const bool *bwd, milp_map *m, int window, int *nf, int *na)
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

void milp_free(milp_inst *in)
{
    free(in->c), free(in->base), free(in->cands), free(in->maps);
    if (in->lp) glp_delete_prob(in->lp);
    glp_free_env(); /* GLPK's own state: nothing of it outlives a solve */
    memset(in, 0, sizeof *in);
}

/* Candidates: the layers of [first - 1, last] whose maps offload(all) moves, grouped, with the
 * options every map of the layer has. */
int milp_build(milp_inst *in, const offsel_req *r, err *e)
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
        if (!sched_op_is_event(a.steps[i].op)) op[period[i]] = a.steps[i].op, bwd[period[i]] = a.steps[i].bwd_phase;
        if (a.steps[i].op == SCHED_PREFETCH) pf_of[a.steps[i].buf] = i;
    }
    in->maps = err_calloc((size_t)a.n_step + 1, sizeof(milp_map));
    in->cands = err_calloc((size_t)n->n + 1, sizeof(milp_cand));
    int window = r->window > 0 && r->window < OFFSEL_WINDOW ? r->window : OFFSEL_WINDOW;
    /* moves in line cost the same wherever they stand, and releasing late or fetching early only
     * holds memory longer: vDNN's timing is then the best, the only option worth a column */
    if (!r->dev->overlap) window = 1;
    for (int L = r->first - 1; L < n->n; L++) {
        milp_cand *cd = &in->cands[in->n_cand];
        *cd = (milp_cand){.layer = L, .map0 = in->n_map, .n_free = window, .n_fetch = window};
        for (int i = 0; i < a.n_step; i++) {
            if (a.steps[i].op != SCHED_OFFLOAD || a.bufs[a.steps[i].buf].layer != L) continue;
            milp_map *m = &in->maps[in->n_map++];
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

/* Map m of candidate cd: its transfer columns — an offload moves from its writer's end to its
 * release (stalls of P+1..r, computes of P+1..r-1), a prefetch from its issue to its first use
 * (computes of q..V-1, stalls of q+1..V) — each direction moving the whole map once when the layer
 * is chosen, and a transfer column only where its timing option opens its period. */
static void mapping_rows(milp_inst *in, const milp_cand *cd, milp_map *m, row_buf *w)
{
    glp_prob *lp = in->lp;
    bool ovl = in->r->dev->overlap;
    int rmax = m->r[cd->n_free - 1], qmin = m->q[cd->n_fetch - 1];
    m->os_lo = m->P + 1, m->os_hi = rmax, m->oc_lo = m->P + 1, m->oc_hi = ovl ? rmax - 1 : m->P;
    m->ps_lo = qmin + 1, m->ps_hi = m->V, m->pc_lo = qmin, m->pc_hi = ovl ? m->V - 1 : qmin - 1;
    if (m->os_hi >= in->K) m->os_hi = in->K - 1;
    if (m->ps_hi >= in->K) m->ps_hi = in->K - 1;
    m->os0 = transfers(lp, m->os_lo, m->os_hi), m->oc0 = transfers(lp, m->oc_lo, m->oc_hi);
    m->ps0 = transfers(lp, m->ps_lo, m->ps_hi), m->pc0 = transfers(lp, m->pc_lo, m->pc_hi);
    for (int dir = 0; dir < 2; dir++) {
        row_add(w, cd->x, -1);
        int c0[2] = {dir ? m->ps0 : m->os0, dir ? m->pc0 : m->oc0};
        int lo[2] = {dir ? m->ps_lo : m->os_lo, dir ? m->pc_lo : m->oc_lo};
        int hi[2] = {dir ? m->ps_hi : m->os_hi, dir ? m->pc_hi : m->oc_hi};
        for (int part = 0; part < 2; part++)
            for (int k = lo[part]; c0[part] && k <= hi[part]; k++) row_add(w, c0[part] + k - lo[part], 1);
        row_put(lp, w, GLP_FX, 0, 0);
    }
    for (int k = m->os_lo; m->os0 && k <= m->os_hi; k++) {
        row_add(w, m->os0 + k - m->os_lo, 1);
        for (int d = 0; d < cd->n_free; d++)
            if (m->r[d] >= k) row_add(w, cd->y0 + d, -1);
        row_put(lp, w, GLP_UP, 0, 0);
    }
    for (int k = m->oc_lo; m->oc0 && k <= m->oc_hi; k++) {
        row_add(w, m->oc0 + k - m->oc_lo, 1);
        for (int d = 0; d < cd->n_free; d++)
            if (m->r[d] > k) row_add(w, cd->y0 + d, -1);
        row_put(lp, w, GLP_UP, 0, 0);
    }
    for (int k = m->ps_lo; m->ps0 && k <= m->ps_hi; k++) {
        row_add(w, m->ps0 + k - m->ps_lo, 1);
        for (int a = 0; a < cd->n_fetch; a++)
            if (m->q[a] < k) row_add(w, cd->z0 + a, -1);
        row_put(lp, w, GLP_UP, 0, 0);
    }
    for (int k = m->pc_lo; m->pc0 && k <= m->pc_hi; k++) {
        row_add(w, m->pc0 + k - m->pc_lo, 1);
        for (int a = 0; a < cd->n_fetch; a++)
            if (m->q[a] <= k) row_add(w, cd->z0 + a, -1);
        row_put(lp, w, GLP_UP, 0, 0);
    }
}

/* The choice columns of candidate cd (moved x, release option y_d, prefetch option z_a; each
 * option taken exactly when x is) and, per map, its transfer columns and rows. */
static void candidate_rows(milp_inst *in, milp_cand *cd, row_buf *w)
{
    glp_prob *lp = in->lp;
    cd->x = cols(lp, 1, GLP_BV, 0, 1, EPS_US);
    cd->y0 = glp_add_cols(lp, cd->n_free);
    cd->z0 = glp_add_cols(lp, cd->n_fetch);
    for (int d = 0; d < cd->n_free; d++)
        glp_set_col_kind(lp, cd->y0 + d, GLP_BV), glp_set_obj_coef(lp, cd->y0 + d, EPS_US * d);
    for (int a = 0; a < cd->n_fetch; a++)
        glp_set_col_kind(lp, cd->z0 + a, GLP_BV), glp_set_obj_coef(lp, cd->z0 + a, EPS_US * a);
    in->n_bin += 1 + cd->n_free + cd->n_fetch;
    row_add(w, cd->x, -1);
    for (int d = 0; d < cd->n_free; d++) row_add(w, cd->y0 + d, 1);
    row_put(lp, w, GLP_FX, 0, 0);
    row_add(w, cd->x, -1);
    for (int a = 0; a < cd->n_fetch; a++) row_add(w, cd->z0 + a, 1);
    row_put(lp, w, GLP_FX, 0, 0);
    for (int i = cd->map0; i < cd->map0 + cd->n_map; i++) mapping_rows(in, cd, &in->maps[i], w);
}

/* The link, per period: in the stall, and beside the compute. */
static void link_rows(milp_inst *in, row_buf *w)
{
    for (int k = 0; k < in->K; k++)
        for (int part = 0; part < 2; part++) {
            for (int i = 0; i < in->n_map; i++) {
                const milp_map *m = &in->maps[i];
                int oc = part ? m->oc0 : m->os0, olo = part ? m->oc_lo : m->os_lo, ohi = part ? m->oc_hi : m->os_hi;
                int pc = part ? m->pc0 : m->ps0, plo = part ? m->pc_lo : m->ps_lo, phi = part ? m->pc_hi : m->ps_hi;
                if (oc && k >= olo && k <= ohi) row_add(w, oc + k - olo, m->out_us);
                if (pc && k >= plo && k <= phi) row_add(w, pc + k - plo, m->in_us);
            }
            if (!w->n) continue;
            if (part) row_put(in->lp, w, GLP_UP, 0, in->c[k]);
            else row_add(w, in->s0 + k, -1), row_put(in->lp, w, GLP_UP, 0, 0);
        }
}

/* Memory, in the periods over the budget: what the chosen moves take away covers the excess. */
static void memory_rows(milp_inst *in, row_buf *w)
{
    for (int k = 0; k < in->K; k++) {
        if (in->base[k] <= in->r->budget) continue;
        for (int c = 0; c < in->n_cand; c++) {
            const milp_cand *cd = &in->cands[c];
            double *yv = err_calloc((size_t)cd->n_free + cd->n_fetch + 1, sizeof(double)), *zv = yv + cd->n_free;
            for (int i = cd->map0; i < cd->map0 + cd->n_map; i++) {
                const milp_map *m = &in->maps[i];
                for (int d = 0; d < cd->n_free; d++) yv[d] += m->r[d] <= k ? (double)m->bytes / MIB : 0;
                for (int a = 0; a < cd->n_fetch; a++) zv[a] -= m->q[a] <= k && m->r[0] <= k ? (double)m->bytes / MIB : 0;
            }
            for (int d = 0; d < cd->n_free; d++)
                if (yv[d] != 0) row_add(w, cd->y0 + d, yv[d]);
            for (int a = 0; a < cd->n_fetch; a++)
                if (zv[a] != 0) row_add(w, cd->z0 + a, zv[a]);
            free(yv);
        }
        double need = (double)(in->base[k] - in->r->budget) / MIB;
        if (w->n) row_put(in->lp, w, GLP_LO, need, 0);
        else row_add(w, in->s0 + k, 0), row_put(in->lp, w, GLP_LO, need, 0); /* nothing can help: infeasible */
    }
}

void milp_lp(milp_inst *in)
{
    glp_prob *lp = in->lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    in->s0 = cols(lp, in->K, GLP_CV, 0, 0, 1); /* stalls: [0, inf) */
    row_buf w = {0};
    for (int c = 0; c < in->n_cand; c++) candidate_rows(in, &in->cands[c], &w);
    link_rows(in, &w);
    memory_rows(in, &w);
    free(w.idx), free(w.val);
    glp_scale_prob(lp, GLP_SF_AUTO); /* microseconds and MiB side by side */
}
