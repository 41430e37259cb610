/* offsel: which kept maps to offload, and when — the problem of Beaumont, Eyraud-Dubois and Shilova
 * ("Optimal GPU-CPU Offloading Strategies for Deep Neural Network Training", Euro-Par 2020): NP-hard
 * in the strong sense, so they solve relaxations. Here it is posed on a lowered schedule and solved
 * with GLPK (Debian's libglpk), exactly or by two relaxation heuristics.
 *
 * The instance. The plan `prefix; offload(ITEMS)@FIRST..LAST` (LAST: the net's last layer) runs the
 * same compute steps as `prefix` alone; each step is a *period*. A candidate is a layer whose kept
 * maps the offload segment may move (those offload(all) moves); it is chosen or not, with a release
 * delay d (forward steps after each map's last forward use, 0..window-1) and a prefetch lead a
 * (backward steps ahead of its first backward use, 1..window): the plan's `NAME:d:a`. Device memory
 * in period k is the prefix's replay there minus every map that is away (released at or before k,
 * prefetched after k): exact for the schedule the plan lowers to. Time follows sched_move_issue's
 * protocol: one link, beside compute where the device overlaps (sim_device.overlap); a map's offload
 * may run from the end of its last writer to its release, its prefetch from its issue to its first
 * use, and where the link cannot finish in the compute time there the iteration stalls. Per period
 * k a stall s_k >= 0 comes before its compute c_k; the link moves in the stall and (overlap) during
 * the compute; transfers are fluid across periods (a time-indexed model, not a FIFO queue).
 *
 *   minimize   sum_k s_k                              (the iteration is sum_k c_k + s_k)
 *   subject to sum_d y[L,d] = sum_a z[L,a] = x[L]      a chosen layer has one release and one prefetch
 *              each map's offload and prefetch transfers sum to x[L], in the periods its release and
 *              prefetch allow (a transfer column is bounded by the y or z that opens its period)
 *              per period: stall transfers <= s_k, compute transfers <= c_k (0 without overlap)
 *              per period: base_k - sum of away maps' bytes <= budget
 *              x, y, z binary; transfers in [0, 1]; s >= 0
 * (plus 1e-3 us per chosen layer and per step of delay or lead, so that ties go to moving less, as
 * vDNN times it).
 *
 * Methods: EXACT is GLPK's branch and bound on that MILP, started from ROUND's answer as its first
 * incumbent (optimal for the model when it finishes in the time limit; else its incumbent, with the
 * tree's best bound: the gap between them is proven); ROUND solves the LP relaxation (fractional offloads) once,
 * keeps the layers at x >= 1/2 at their likeliest timing, and adds more by decreasing x until the
 * memory model fits; DIVE fixes the relaxation's largest fractional binary to 1 (0 when that is
 * infeasible) and solves again until every binary is whole. Beaumont et al.'s own two heuristics are
 * relaxation-based too; these are ours, written from the problem, not from their text.
 * Every answer is a plan string: callers lower and replay it (sim_run), which judges peak and time.
 * Not done here: searching prefixes (sim/planner/search.c), I/O. */
#ifndef LRCNN_OFFSEL_H
#define LRCNN_OFFSEL_H

#include "sim/predict/sim.h"

typedef enum { OFFSEL_ROUND, OFFSEL_DIVE, OFFSEL_EXACT } offsel_method;

#define OFFSEL_WINDOW 8 /* most release delays and prefetch leads tried per layer */
#define OFFSEL_LIMIT_S 10.0 /* EXACT's default time limit */

typedef struct {
    const net *n;
    sched_cfg cfg;
    const sim_device *dev;
    const char *prefix;   /* plan segments before the offload segment ("": none) */
    int first;            /* the offload segment's first layer; it ends at the net's last */
    const char *bn;       /* " bn=..." for every plan (NULL: the default) */
    int64_t budget;
    int window;           /* 1..OFFSEL_WINDOW (0: all of it); 1 on a device without overlap, where
                             vDNN's timing (release at once, fetch one step ahead) is never beaten */
    double time_limit_s;  /* EXACT: the limit of the whole solve (0: OFFSEL_LIMIT_S) */
} offsel_req;

typedef struct {
    bool found;           /* a plan whose modelled peak fits */
    char *text;           /* the plan (malloc'd; NULL when none) */
    double model_us;      /* its modelled iteration time: compute plus stalls */
    double bound_us;      /* no plan of the model is faster: the LP relaxation's, or (EXACT) the branch
                             and bound's best bound when it stopped, the optimum itself when proven */
    bool optimal;         /* EXACT: proven optimal for the model */
    int candidates, chosen, binaries, rows;
    double seconds;
} offsel_result;

const char *offsel_method_name(offsel_method m);

/* Solves r with method m. Returns -1 (e) only when the prefix or the segment is not a plan for the
 * net; a budget nothing fits gives found = false. */
int offsel_solve(const offsel_req *r, offsel_method m, offsel_result *out, err *e);
void offsel_result_free(offsel_result *o);

/* The model's view of an offload-list plan of this instance (r's prefix, then offload(...) from
 * r->first; every pick within the options): its iteration time (the transfers' LP with the choice
 * fixed; NAN when the link cannot move it in the model) and its peak. -1 (e) if it is not such a
 * plan. For tests: the model's peak must equal the replay's. */
int offsel_model(const offsel_req *r, const char *text, double *us, int64_t *peak, err *e);

#endif
