/* arena_exact: see arena.h. The integer program of dynamic storage allocation: an offset o_k for
 * every block, the arena's size H, and for every two blocks live at once a binary z saying which
 * lies below the other:
 *     minimize H
 *     o_k + size_k <= H                              every block
 *     o_j + size_j <= o_k + M (1 - z_jk)             j below k ...
 *     o_k + size_k <= o_j + M z_jk                   ... or k below j
 * with M the heuristic's arena (no better plan needs more), H at least the live peak, offsets in
 * units of ARENA_ALIGN. Persistent blocks stay packed at the bottom, as the heuristic puts them
 * (they are live at every step, so they only lift everything else by their bytes). GLPK's branch
 * and bound starts from the heuristic's plan, so the answer is never worse than it. */
#include "sim/predict/arena.h"

#include <glpk.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const arena_block *v;
    const int *idx;
    int n, *z_of; /* z_of[j * n + k]: the column of pair (j, k), j < k, or 0 */
    double base;
} program;

/* The heuristic's plan as GLPK's first incumbent. */
static void offer_heuristic(glp_tree *tree, void *info)
{
    const program *pg = info;
    if (glp_ios_reason(tree) != GLP_IHEUR || glp_ios_curr_node(tree) != 1) return;
    glp_prob *lp = glp_ios_get_prob(tree);
    double *x = err_calloc((size_t)glp_get_num_cols(lp) + 1, sizeof(double)), top = pg->base;
    for (int j = 0; j < pg->n; j++) {
        const arena_block *b = &pg->v[pg->idx[j]];
        x[j + 1] = (double)(b->off / ARENA_ALIGN);
        if ((double)((b->off + b->size) / ARENA_ALIGN) > top) top = (double)((b->off + b->size) / ARENA_ALIGN);
        for (int k = j + 1; k < pg->n; k++)
            if (pg->z_of[j * pg->n + k]) x[pg->z_of[j * pg->n + k]] = b->off < pg->v[pg->idx[k]].off;
    }
    x[pg->n + 1] = top;
    glp_ios_heur_sol(tree, x);
    free(x);
}

static void row(glp_prob *lp, int n, const int *ind, const double *val, double hi)
{
    int r = glp_add_rows(lp, 1);
    glp_set_mat_row(lp, r, n, ind, val);
    glp_set_row_bnds(lp, r, GLP_UP, 0, hi);
}

int arena_exact(const arena *a, int max_blocks, double seconds, arena_exact_result *r)
{
    memset(r, 0, sizeof *r);
    int n = 0, *idx = err_calloc((size_t)a->n_blocks + 1, sizeof(int));
    int64_t base = 0;
    for (int k = 0; k < a->n_blocks; k++)
        if (!a->blocks[k].host) {
            if (a->blocks[k].persistent) base += a->blocks[k].size;
            else idx[n++] = k;
        }
    r->blocks = n, r->lower = a->live, r->best = a->size;
    if (a->size <= a->live) { /* the heuristic met the bound: optimal without a search */
        free(idx);
        return r->proved = true, 0;
    }
    if (n > max_blocks) {
        free(idx);
        return -1;
    }
    program pg = {.v = a->blocks, .idx = idx, .n = n, .z_of = err_calloc((size_t)n * n + 1, sizeof(int)), .base = (double)(base / ARENA_ALIGN)};
    double M = (double)(a->size / ARENA_ALIGN), low = (double)(a->live / ARENA_ALIGN);
    glp_prob *lp = glp_create_prob();
    glp_set_obj_dir(lp, GLP_MIN);
    glp_add_cols(lp, n + 1);
    for (int j = 0; j < n; j++) {
        double sz = (double)(a->blocks[idx[j]].size / ARENA_ALIGN);
        glp_set_col_bnds(lp, j + 1, GLP_DB, pg.base, M - sz);
    }
    glp_set_col_bnds(lp, n + 1, GLP_DB, low, M);
    glp_set_obj_coef(lp, n + 1, 1.0);
    int ind[4];
    double val[4];
    for (int j = 0; j < n; j++) {
        const arena_block *bj = &a->blocks[idx[j]];
        ind[1] = j + 1, ind[2] = n + 1, val[1] = 1, val[2] = -1;
        row(lp, 2, ind, val, -(double)(bj->size / ARENA_ALIGN));
        for (int k = j + 1; k < n; k++) {
            const arena_block *bk = &a->blocks[idx[k]];
            if (bj->t0 > bk->t1 || bk->t0 > bj->t1) continue;
            int z = glp_add_cols(lp, 1);
            glp_set_col_kind(lp, z, GLP_BV);
            pg.z_of[j * n + k] = z, r->pairs++;
            ind[1] = j + 1, ind[2] = k + 1, ind[3] = z;
            val[1] = 1, val[2] = -1, val[3] = M;
            row(lp, 3, ind, val, M - (double)(bj->size / ARENA_ALIGN));
            val[1] = -1, val[2] = 1, val[3] = -M;
            row(lp, 3, ind, val, -(double)(bk->size / ARENA_ALIGN));
        }
    }
    glp_smcp lpp; /* the relaxation first: branch and bound starts from its basis */
    glp_init_smcp(&lpp);
    lpp.msg_lev = GLP_MSG_OFF;
    glp_iocp p;
    glp_init_iocp(&p);
    p.presolve = GLP_OFF; /* the heuristic's columns are offered as they are */
    p.msg_lev = GLP_MSG_OFF;
    p.tm_lim = (int)(seconds * 1000);
    p.cb_func = offer_heuristic, p.cb_info = &pg;
    int rc = glp_simplex(lp, &lpp);
    if (!rc) rc = glp_intopt(lp, &p);
    int st = glp_mip_status(lp);
    if ((rc == 0 || rc == GLP_ETMLIM) && (st == GLP_OPT || st == GLP_FEAS)) {
        r->best = (int64_t)(glp_mip_obj_val(lp) + 0.5) * ARENA_ALIGN;
        r->proved = rc == 0 && st == GLP_OPT;
    }
    glp_delete_prob(lp);
    glp_free_env();
    free(pg.z_of), free(idx);
    return 0;
}
