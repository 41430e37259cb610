/* pipe_split: see pipe_split.h. */
#include "sim/planner/pipe_split.h"

#include <glpk.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/predict/pipe_sched.h"

/* Where layers [pos[i], pos[j]) under candidate q sit in the table's st and ok. */
static size_t pair(const pipe_table *t, int i, int j, int q) { return ((size_t)i * (size_t)(t->m + 1) + (size_t)j) * (size_t)t->Q + (size_t)q; }

int pipe_table_build(pipe_table *t, const net *n, const plan *cand, int Q, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c,
                     err *e)
{
    memset(t, 0, sizeof *t);
    t->c = *c, t->cfg = *cfg;
    if (c->kind == PIPE_INTERLEAVED) return err_set(e, "pipeline: the split search covers GPipe and 1F1B (a stage a device), not interleaved");
    int P = c->devices;
    t->n = n, t->P = P, t->Q = Q;
    t->pos = err_calloc((size_t)n->n + 2, sizeof(int));
    t->pos[t->m++] = 1;
    for (int L = 2; L < n->n; L++)
        if (pipe_cut_ok(n, NULL, L)) t->pos[t->m++] = L;
    t->pos[t->m] = n->n;
    if (t->m < P) return err_set(e, "pipeline: %s has %d clean cuts, too few for %d stages", n->name, t->m - 1, P);
    size_t W = (size_t)t->m + 1;
    t->st = err_calloc(W * W * (size_t)Q, sizeof *t->st), t->ok = err_calloc(W * W * (size_t)Q, sizeof *t->ok);
    t->exact = err_calloc(W * W * (size_t)Q * (size_t)P, sizeof(int64_t));
    memset(t->exact, -1, W * W * (size_t)Q * (size_t)P * sizeof(int64_t));
    t->pn = err_calloc((size_t)Q, sizeof(pipe_net));
    for (int q = 0; q < Q; q++) {
        pipe_net *pn = &t->pn[q];
        if (pipe_net_init(pn, n, &cand[q], cfg, d, e)) return -1;
        for (int i = 0; i < t->m; i++) {
            if (i && !pipe_cut_ok(n, &cand[q], t->pos[i])) continue;
            for (int j = i + 1; j <= t->m; j++) {
                if (j < t->m && !pipe_cut_ok(n, &cand[q], t->pos[j])) continue;
                size_t at = pair(t, i, j, q);
                pipe_range(pn, t->pos[i], t->pos[j], &t->st[at]);
                t->ok[at] = true;
            }
        }
    }
    return 0;
}

int64_t pipe_table_peak(pipe_table *t, int i, int j, int q, int k)
{
    size_t at = pair(t, i, j, q) * (size_t)t->P + (size_t)k;
    if (t->exact[at] >= 0) return t->exact[at];
    err e;
    int64_t peak = pipe_stage_peak_exact(&t->pn[q].s, t->n, &t->cfg, &t->c, t->pos[i], t->pos[j], k, &e);
    return t->exact[at] = peak < 0 ? INT64_MAX : peak;
}

void pipe_table_free(pipe_table *t)
{
    for (int q = 0; t->pn && q < t->Q; q++)
        if (t->pn[q].n) pipe_net_free(&t->pn[q]);
    free(t->pn), free(t->exact);
    free(t->pos), free(t->st), free(t->ok);
    memset(t, 0, sizeof *t);
}

void pipe_answer_init(pipe_answer *a, int P)
{
    memset(a, 0, sizeof *a);
    a->first = err_calloc((size_t)P + 1, sizeof(int)), a->which = err_calloc((size_t)P, sizeof(int));
}

void pipe_answer_free(pipe_answer *a)
{
    free(a->first), free(a->which);
    memset(a, 0, sizeof *a);
}

static double stage_us(const pipe_stage *s) { return s->fwd_us + s->bwd_us; }

/* One pass of the dynamic program: best[k][j], the least slowest-stage time of k stages over
 * positions [0, j) whose devices fit (from, pick: its last stage); or, `least`, least[k][j], the least
 * largest device of any choice (every exact peak composed: for a refusal). */
static void dp_pass(pipe_table *t, int64_t budget, bool least, double *best, int64_t *most, int *from, int *pick)
{
    int P = t->P, m = t->m, Q = t->Q;
    size_t W = (size_t)m + 1;
    for (size_t i = 0; i < (size_t)(P + 1) * W; i++) best[i] = INFINITY, most[i] = INT64_MAX;
    best[0] = 0, most[0] = 0;
    for (int k = 1; k <= P; k++)
        for (int j = k; j <= m - (P - k); j++)
            for (int i = k - 1; i < j; i++)
                for (int q = 0; q < Q; q++) {
                    if (!t->ok[pair(t, i, j, q)]) continue;
                    size_t here = (size_t)k * W + (size_t)j, prev = (size_t)(k - 1) * W + (size_t)i;
                    if (least) {
                        int64_t pk = most[prev] == INT64_MAX ? INT64_MAX : pipe_table_peak(t, i, j, q, k - 1);
                        if (pk != INT64_MAX && (pk > most[prev] ? pk : most[prev]) < most[here]) most[here] = pk > most[prev] ? pk : most[prev];
                        continue;
                    }
                    double us = fmax(best[prev], stage_us(pipe_table_at(t, i, j, q)));
                    if (us < best[here] && pipe_table_peak(t, i, j, q, k - 1) <= budget) best[here] = us, from[here] = i, pick[here] = q;
                }
}

int pipe_split_dp(pipe_table *t, int64_t budget, pipe_answer *a)
{
    int P = t->P, m = t->m;
    size_t W = (size_t)m + 1, end = (size_t)P * W + (size_t)m;
    double *best = err_calloc((size_t)(P + 1) * W, sizeof(double));
    int64_t *most = err_calloc((size_t)(P + 1) * W, sizeof(int64_t));
    int *from = err_calloc((size_t)(P + 1) * W, sizeof(int)), *pick = err_calloc((size_t)(P + 1) * W, sizeof(int));
    dp_pass(t, budget, false, best, most, from, pick);
    int rc = isinf(best[end]) ? 1 : 0;
    a->slowest = best[end];
    if (!rc) {
        a->first[P] = t->n->n;
        for (int k = P, j = m; k > 0; k--) {
            size_t here = (size_t)k * W + (size_t)j;
            a->which[k - 1] = pick[here], j = from[here], a->first[k - 1] = t->pos[j];
        }
    } else {
        dp_pass(t, budget, true, best, most, from, pick);
        a->least = most[end];
    }
    free(best), free(most), free(from), free(pick);
    return rc;
}

/* The columns of the integer program: x[k][i][j][q] for every stage k, range and candidate that
 * fits the budget there (col[...] its GLPK column, 0 where none), then T. */
typedef struct {
    int *col;
    int n_col, T;
} ilp_cols;

static size_t col_at(const pipe_table *t, int k, int i, int j, int q)
{
    size_t W = (size_t)t->m + 1;
    return (((size_t)k * W + (size_t)i) * W + (size_t)j) * (size_t)t->Q + (size_t)q;
}

static void ilp_columns(glp_prob *lp, pipe_table *t, int64_t budget, ilp_cols *c)
{
    int P = t->P, m = t->m, Q = t->Q;
    size_t W = (size_t)m + 1;
    c->col = err_calloc((size_t)P * W * W * (size_t)Q, sizeof(int)), c->n_col = 0;
    for (int k = 0; k < P; k++)
        for (int i = k; i <= m - (P - k); i++)       /* stage k starts at i >= k and leaves a position for each after it */
            for (int j = i + 1; j <= m - (P - k - 1); j++)
                for (int q = 0; q < Q; q++)
                    if (t->ok[pair(t, i, j, q)] && pipe_table_peak(t, i, j, q, k) <= budget)
                        c->col[col_at(t, k, i, j, q)] = ++c->n_col;
    glp_add_cols(lp, c->n_col + 1);
    for (int j = 1; j <= c->n_col; j++) glp_set_col_kind(lp, j, GLP_BV);
    c->T = c->n_col + 1;
    glp_set_col_bnds(lp, c->T, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, c->T, 1.0);
}

/* Rows: stage 0 leaves position 0 once; stage k ends where stage k + 1 begins; the last ends at m;
 * T at least each stage's time. */
static void ilp_rows(glp_prob *lp, const pipe_table *t, const ilp_cols *c)
{
    int P = t->P, m = t->m, Q = t->Q, cap = c->n_col + 2, *ind = err_calloc((size_t)cap, sizeof(int));
    double *val = err_calloc((size_t)cap, sizeof(double));
    for (int k = 0; k <= P; k++)        /* boundary k at position p: stage k-1 ends there = stage k begins there */
        for (int p = 0; p <= m; p++) {
            int n = 0;
            for (int x = 0; x <= m; x++)
                for (int q = 0; q < Q; q++) {
                    int in = k > 0 && x < p ? c->col[col_at(t, k - 1, x, p, q)] : 0, out = k < P && x > p ? c->col[col_at(t, k, p, x, q)] : 0;
                    if (in) ind[++n] = in, val[n] = 1;
                    if (out) ind[++n] = out, val[n] = -1;
                }
            double rhs = k == 0 && p == 0 ? -1 : k == P && p == m ? 1 : 0; /* in - out */
            if (!n && rhs == 0) continue;
            int r = glp_add_rows(lp, 1);
            glp_set_row_bnds(lp, r, GLP_FX, rhs, rhs);
            glp_set_mat_row(lp, r, n, ind, val);
        }
    for (int k = 0; k < P; k++) {
        int n = 0;
        for (int i = 0; i <= m; i++)
            for (int j = i + 1; j <= m; j++)
                for (int q = 0; q < Q; q++)
                    if (c->col[col_at(t, k, i, j, q)]) ind[++n] = c->col[col_at(t, k, i, j, q)], val[n] = stage_us(pipe_table_at(t, i, j, q));
        ind[++n] = c->T, val[n] = -1;
        int r = glp_add_rows(lp, 1);
        glp_set_row_bnds(lp, r, GLP_UP, 0, 0); /* sum t x - T <= 0 */
        glp_set_mat_row(lp, r, n, ind, val);
    }
    free(ind), free(val);
}

int pipe_split_ilp(pipe_table *t, int64_t budget, double limit_s, pipe_answer *a, err *e)
{
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    ilp_cols c;
    ilp_columns(lp, t, budget, &c);
    ilp_rows(lp, t, &c);
    glp_iocp io;
    glp_init_iocp(&io);
    io.presolve = GLP_ON, io.msg_lev = GLP_MSG_OFF, io.tm_lim = (int)(limit_s * 1000);
    int rc = glp_intopt(lp, &io), st = glp_mip_status(lp);
    if (rc == GLP_ENOPFS || rc == GLP_ENODFS || st == GLP_NOFEAS) rc = 1;
    else if (rc || st != GLP_OPT) rc = err_set(e, "pipeline: GLPK stopped before proving its answer (status %d, code %d)", st, rc);
    else {
        a->slowest = 0, a->first[t->P] = t->n->n;
        for (int k = 0; k < t->P; k++)
            for (int i = 0; i <= t->m; i++)
                for (int j = i + 1; j <= t->m; j++)
                    for (int q = 0; q < t->Q; q++) {
                        int col = c.col[col_at(t, k, i, j, q)];
                        if (col && glp_mip_col_val(lp, col) > 0.5)
                            a->first[k] = t->pos[i], a->which[k] = q, a->slowest = fmax(a->slowest, stage_us(pipe_table_at(t, i, j, q)));
                    }
    }
    free(c.col);
    glp_delete_prob(lp);
    return rc;
}

int pipe_split(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c, int64_t budget,
               int *first, err *e)
{
    pipe_table t;
    pipe_answer a;
    if (pipe_table_build(&t, n, p, 1, cfg, d, c, e)) return pipe_table_free(&t), -1;
    pipe_answer_init(&a, c->devices);
    int rc = pipe_split_dp(&t, budget, &a);
    if (rc) err_set(e, "pipeline: no split of %s into %d stages fits %.2f MiB a device; the least any needs is %.2f MiB", n->name, c->devices,
                    (double)budget / 1048576.0, (double)a.least / 1048576.0);
    else memcpy(first, a.first, sizeof(int) * (size_t)(c->devices + 1));
    pipe_answer_free(&a);
    pipe_table_free(&t);
    return rc;
}
