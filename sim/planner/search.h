/* search: the planner — the plan with the least predicted iteration time whose predicted peak fits
 * a memory budget, over row stages × checkpoints × offload × encodings.
 *
 * Two parts:
 *   chain DP   over the net's clean cuts (the places one tensor crosses), each segment between two
 *              cuts runs as layer, ckpt or offload(all): a dynamic program over (cut, bytes kept so
 *              far) in the style of Rotor's, exact for its segment model — kept bytes add up over
 *              the segments before the one running backward, whose stash and gradient working set
 *              come on top; recomputation costs the segment's forward time, offload its bytes at
 *              the link's rate. It answers "the fastest checkpoint/offload split under B" directly.
 *   candidates every preset; the DP's plan for the whole net; the offload lists of sim/planner/offsel.h's
 *              two relaxation heuristics (which maps move, and when); and each row stage (2PS or OverL,
 *              R bands, over the rowwise layers from the input to each clean cut with enough rows)
 *              followed by the DP's plan for the rest; each with gist's lossless encodings when
 *              the space allows them; and, where a faster plan could fit by moving parameters,
 *              gradients or optimizer state off the device between uses, those plans +migrate.
 * Every candidate is then lowered and replayed (the same schedule the engine executes), and timed
 * by the device's model (sim/predict/timing.h): a plan is accepted only on its replayed peak, so the answer
 * fits whatever the DP's segment model got wrong; a DP plan that overshoots is searched again with
 * the budget lowered by the overshoot.
 * Not done here: I/O (cli/cli_plan.c) or measuring (the engine). */
#ifndef LRCNN_SEARCH_H
#define LRCNN_SEARCH_H

#include "sim/predict/sim.h"

enum {
    SEARCH_CKPT = 1u,     /* checkpointed segments */
    SEARCH_OFFLOAD = 2u,  /* offloaded segments (activations to host) */
    SEARCH_ROWS = 4u,     /* row stages */
    SEARCH_GIST = 8u,     /* gist's lossless encodings */
    SEARCH_PRESETS = 16u, /* the presets themselves */
    SEARCH_MIGRATE = 32u, /* migration of parameters, gradients and optimizer state (+migrate) */
    SEARCH_ALL = 63u,
};

typedef struct {
    const net *n;
    sched_cfg cfg;
    const sim_device *dev;
    int64_t budget;
    unsigned space;       /* SEARCH_* flags */
    const char *bn;       /* appended as " bn=..." to every candidate (NULL: the default) */
    const double *margin; /* how much faster (relative) a plan must be predicted than the fastest preset
                             that fits to be answered instead (NULL: the time model's, timing_margin;
                             0 without a model) */
} search_req;

typedef struct {
    char *text;           /* a plan any command accepts */
    int64_t peak;         /* replayed; or, for a plan over the budget without encodings, the closed
                             form's (equal to the replay: tests/test_closed.c), not lowered */
    int64_t footprint;    /* what it reserves, which "fits the budget" compares: its arena and the bytes
                             apart from it (sim/predict/arena.h); for a plan not placed (below), its
                             peak (no arena is smaller) */
    double time_us;       /* the device's model; NAN for a plan not lowered */
    const char *source;   /* "preset", "dp", "rows+dp", "offsel", "migrate" */
    int64_t floor;        /* below what no encoding of its kept maps takes its peak */
    bool staged;          /* a row segment gathers BatchNorm statistics in stages (bn=train) */
    bool placed;          /* footprint is its arena's (else its peak: it was over the budget, or slower
                             than a plan that fit, so no arena was planned) */
    bool basis;           /* one of the space's own plans, whatever the budget: a preset of its kinds, or a
                             plan the search for the smallest footprint tries (search_result.least) */
} search_point;

typedef struct {
    int best;             /* index into pts of the answer, -1 if none fits: the fastest plan that
                             fits, unless the fastest preset that fits is predicted within `margin`
                             of it: then that preset */
    int fastest;          /* the fastest that fits, preset or not (-1 if none) */
    int preset;           /* the fastest preset that fits (-1 if none) */
    int least;            /* index of the smallest footprint evaluated; when nothing fits, of the smallest
                             among the basis plans (search_point.basis), which the budget does not choose:
                             the smallest footprint of the space as far as the search knows it */
    search_point *pts;    /* every distinct candidate evaluated */
    int n_pts;
    double seconds;       /* the search's own wall time */
    double margin;        /* the margin the answer was chosen with (search_req) */
} search_result;

int search_run(const search_req *r, search_result *out, err *e);
void search_free(search_result *r);

/* The memory/time frontier of pts: the indices of the points no other beats on both footprint and
 * time, by increasing footprint (malloc'd; *count of them). */
int *search_frontier(const search_point *pts, int n, int *count);

/* The chain DP alone: the fastest split of layers [first, n-1] into layer, ckpt and (with
 * SEARCH_OFFLOAD) offload(all) segments whose modelled peak, on top of `extra` bytes kept from
 * before `first`, fits r->budget. Writes the plan's segments ("ckpt@a..b; offload(all)@c..d", or
 * "" when all layer) into buf; -1 when no split fits the model. */
int search_chain(const search_req *r, int first, int64_t extra, char *buf, size_t len);

#endif
