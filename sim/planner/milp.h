/* milp: offload selection (Beaumont, Eyraud-Dubois and Shilova's problem) as a mixed-integer
 * program — the instance built from two lowerings of the request (the prefix alone, and with every
 * kept map from `first` on offloaded): its periods with their compute time and device bytes, the
 * candidate layers and their maps, each map's release and prefetch options; then its columns and
 * rows in GLPK (which layers move and with which timing; transfers on the link per period, in the
 * stall or beside the compute; the budget in every period over it). Below offsel.c, which solves it
 * (exactly, or by the LP relaxation rounded or dived) and reads the choice back. */
#ifndef LRCNN_MILP_H
#define LRCNN_MILP_H

#include <glpk.h>

#include "sim/planner/offsel.h"

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
} milp_map;

typedef struct {
    int layer, map0, n_map;
    int n_free, n_fetch;           /* options d = 0..n_free-1, a = 1..n_fetch */
    int x, y0, z0;                 /* columns */
} milp_cand;

typedef struct {
    const offsel_req *r;
    int K, F;                      /* periods; the first of the backward */
    double *c;                     /* [K] compute time */
    int64_t *base;                 /* [K] device bytes with nothing away */
    milp_cand *cands;
    milp_map *maps;
    int n_cand, n_map;
    int s0;                        /* stall columns s0 .. s0 + K - 1 */
    glp_prob *lp;
    int n_bin;
} milp_inst;

/* The instance of request r; -1 with e set when its plans do not lower. */
int milp_build(milp_inst *in, const offsel_req *r, err *e);
/* Its program, into in->lp. */
void milp_lp(milp_inst *in);
void milp_free(milp_inst *in);

#endif
