/* search: the planner — the plan with the least predicted iteration time whose footprint fits a
 * memory budget, over row stages × checkpoints × offload × encodings × migration.
 *
 * It searches one set of plans that the budget does not choose (the budget only decides which fit),
 * so that a larger budget sees every plan a smaller one did:
 *   presets    every preset of the space's kinds;
 *   chain DP   over the net's clean cuts, each segment layer, ckpt, offload(all) or offload(conv):
 *              sim/planner/chain.h's table, which answers every memory at once; its splits where
 *              its time falls, and the least-keeping one;
 *   row stages 2PS or OverL, every band count, from the input to the first clean cut at each height
 *              (and the last), followed by the DP's splits of the rest;
 *   lists      on a device whose moves overlap compute, the offload lists sim/planner/offsel.h's two
 *              heuristics find at the peaks of vdnn-all and vdnn-conv;
 *   variants   of a plan that does not fit: bn=train-offload/-rebuild/-recompute (the first two with
 *              the fewest levels that fit; rebuilt, also one level in 2 or 3 kept; offloaded, also
 *              one level in 2, 3 or 4 offloaded and the rest rebuilt, bn=train:LETTERS), +gist
 *              (they only cost time); an answer with levels off the device then refined a letter
 *              at a time until no one-letter change that fits is faster;
 *   migration  +migrate of the plans that do not fit and could with it, fastest first, until none
 *              left could beat the best that fits.
 * Every candidate is lowered and replayed (the schedule the engine executes) and timed by the
 * device's model (sim/predict/timing.h); arenas are planned fastest first until one fits. Promised
 * (tests/test_search.c guarantees): the answer fits; its time never rises with the budget (by more
 * than the margin); never slower than a preset that fits, never refused while one does; a refusal
 * names the set's smallest footprint, the same at every budget.
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
    bool place_all;       /* plan the arena of every candidate whose peak fits (the memory/time frontier),
                             not only of those that may answer */
    const double *margin; /* how much faster (relative) a plan must be predicted than the fastest preset
                             that fits to be answered instead (NULL: the time model's, timing_margin;
                             0 without a model) */
    int threads;          /* threads that evaluate candidates ahead of the search's need (candidates.h:
                             cand_ahead); 0 or 1: none. The answer and every point are the same however
                             many: an evaluation does not depend on the search so far */
} search_req;

typedef struct {
    char *text;           /* a plan any command accepts */
    int64_t peak;         /* replayed; or, for a plan over the budget without encodings, the closed
                             form's (equal to the replay: tests/test_closed.c), not lowered */
    int64_t footprint;    /* what it reserves, which "fits the budget" compares: its arena and the bytes
                             apart from it (sim/predict/arena.h); for a plan not placed (below), its
                             peak (no arena is smaller) */
    double time_us;       /* the device's model; NAN for a plan not lowered */
    const char *source;   /* "preset", "dp", "rows", "rows+dp", "offsel", "migrate" */
    int64_t floor;        /* below what no encoding of its kept maps takes its peak */
    int64_t fwd_peak;     /* the forward's own peak (sim_mem.fwd_peak); 0 where not lowered */
    bool staged;          /* a row segment gathers BatchNorm statistics in stages (bn=train) */
    int levels;           /* then: the most levels of statistics in one of its row segments */
    bool placed;          /* footprint is its arena's (else its peak: it was over the budget, or slower
                             than a plan that fit, so no arena was planned) */
    bool variants;        /* its variants were tried, or it is one (search.c: eval_variants) */
} search_point;

typedef struct {
    int best;             /* index into pts of the answer, -1 if none fits: the fastest plan that
                             fits, unless the fastest preset that fits is predicted within `margin`
                             of it: then that preset */
    int fastest;          /* the fastest that fits, preset or not (-1 if none) */
    int preset;           /* the fastest preset that fits (-1 if none) */
    int least;            /* index of the smallest arena planned; when nothing fits, of the smallest
                             footprint of the whole set (each plan with every variant that could keep
                             less), the same at every budget refused */
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


#endif
