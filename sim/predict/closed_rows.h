/* closed_rows: the closed form's phase model and its row segments — internal to sim/, shared by
 * closed.c (whole-map buffers, the sweep) and closed_rows.c (row segments, pass by pass).
 *
 * A buffer lives on phases [lo, hi] (cf_span); cf_live adds its bytes to a difference array over
 * the phases, which closed.c sums. Row segments number their phases pass by pass (cf_pass: the
 * forward or backward proper, or a statistics pass before it), laid out like the forward (3 per
 * band and layer: CIN, F, COUT; a statistics pass adds one for its STATS_END) or the backward (5:
 * RCIN and RF per layer, then BGIN, BGOUT and B per layer in reverse). A statistics pass's STATS
 * step takes the slot of the layer it gathers for (F forward, B backward), which that pass never
 * computes. paper/model.md writes the rules out. */
#ifndef LRCNN_CLOSED_ROWS_H
#define LRCNN_CLOSED_ROWS_H

#include "sim/predict/closed.h"

enum { PH_CIN, PH_F, PH_COUT };   /* row forward, per band and layer */
enum { PH_RCIN, PH_RF };          /* row recompute */
enum { PH_BGIN, PH_BGOUT, PH_B }; /* row backward */

#define CF_NCAT (MEM_NCAT - MEM_ACT) /* categories that vary by phase: activations .. host */
_Static_assert(MEM_AGRAD == MEM_ACT + 1 && MEM_BOUNDARY == MEM_ACT + 2 && MEM_WORKSPACE == MEM_ACT + 3 &&
                   MEM_HOST == MEM_ACT + 4 && MEM_NCAT == MEM_ACT + 5,
               "the closed form's sweep names the phase categories in mem_cat order");

typedef struct {
    int lo, hi; /* phases [lo, hi]; empty when lo > hi */
} cf_span;

typedef struct {
    int base;                 /* first phase */
    bool final;               /* the forward or backward proper */
    bool *need;               /* [nl]: computed (forward) or recomputed (backward) */
    const bool *bwd;          /* [nl], backward: back-propagated (NULL: every layer) */
    const int *gather;        /* [nl]: gather[i] == pass: statistics gathered for layer i (NULL: none) */
    int pass;
    bool *emit, *stat, *has, *bgin; /* backward, [band * nl + i]: BWD runs / STATS runs / a gradient
                                       exists / a boundary gradient arrives */
} cf_pass;

typedef struct {
    const plan_seg *seg;      /* the plan's segment; the rest are shorthands for its parts */
    const band_seg *bs;
    const band_geom *gf, *gb; /* forward and backward geometry (gb is gf unless OverL with fp != bp) */
    int rf, rb, nl;           /* bands forward and backward; layers */
    const plan_passes *pp;    /* its statistics passes (none unless plan_seg_map_stats) */
    int nfp, nbp;             /* forward and backward passes, the proper one last */
    cf_pass *fp, *bp;
} cf_rows;

/* The forward and the backward proper of row segment w. */
#define CF_FWD(w) (&(w)->fp[(w)->nfp - 1])
#define CF_BWD(w) (&(w)->bp[(w)->nbp - 1])

typedef struct {
    const net *n;
    const plan *p;
    const sched_cfg *cfg;
    int64_t batch;
    int *seg;                 /* [layer] plan segment (-1: the input) */
    int *tid;                 /* [layer] tensor: the layer itself, or its input's tensor for an in-place relu */
    int *cs, *cl;             /* consumers of layer L: cl[cs[L] .. cs[L + 1]) */
    bool *need;               /* [layer] recomputed in its ckpt or row segment's backward */
    int *fph, *rph, *bph;     /* [layer] full-map phases: forward, recompute, backward (-1: none) */
    cf_rows *rows;            /* [segment] */
    cf_span *grad;            /* [tensor] life of its whole-map activation gradient */
    int n_ph;
    int64_t *d;               /* [(n_ph + 1) * CF_NCAT] bytes allocated at a phase, minus bytes freed before it */
} cf;

cf_span cf_span_none(void);
cf_span cf_sp(int lo, int hi);
void cf_span_add(cf_span *s, int ph);
/* Buffer of `bytes` in category cat alive on span s. */
void cf_live(cf *c, mem_cat cat, int64_t bytes, cf_span s);
int64_t cf_y(const cf *c, int L);   /* bytes of L's whole output */
int64_t cf_row(const cf *c, int L); /* bytes of one row of L's output */

int cf_ph_rf(const cf_rows *w, const cf_pass *P, int r, int L, int k);
int cf_ph_rr(const cf_rows *w, const cf_pass *P, int r, int L, int k);
int cf_ph_rb(const cf_rows *w, const cf_pass *P, int r, int L, int k);
int cf_out_len(const band_geom *g, int r, int i);

/* Row segment k: its passes and their steps (c->need of its layers set); their buffers' lives;
 * freeing. */
void cf_rows_init(cf *c, int k);
void cf_rows_lives(cf *c, int k, cf_span *gsp, int *owner);
void cf_rows_free(cf_rows *w);

#endif
