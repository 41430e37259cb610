/* candidates: the planner's table of the plans it has evaluated (search.h's points), for search.c.
 * A text is lowered, replayed and timed once (a text seen again returns its point), a plan over the
 * budget without encodings or migration judged by its closed form alone, and a point's arena
 * planned only where it may answer (settle, in search.c) or be the smallest footprint. Not done
 * here: which plans to try, or which answers (search.c). */
#ifndef LRCNN_CANDIDATES_H
#define LRCNN_CANDIDATES_H

#include "sim/planner/chain.h"
#include "sim/planner/search.h"

/* A search under way: its request, its points so far, and what its passes keep between them. */
typedef struct {
    const search_req *r;
    search_result *out;
    int cap;
    bool least;           /* nothing fits: looking for the smallest footprint (every variant tried) */
    int least_at;         /* the point of the smallest footprint placed so far, -1 none */
    int *slots;           /* texts seen: an open-addressed table of point indices (-1 free) */
    int n_slots;
    const chain_net *cn;  /* NULL: the space has neither checkpoints nor offload (no DP) */
    char *lists[4];       /* the offload lists eval_lists found (NULL: none), kept for a second pass */
    bool listed;
    int *lev, n_lev, cap_lev;    /* base plans (even entries) whose variant in mode odd entry (an index into
                                    bn_modes) with every level offloaded or rebuilt fits (eval_variants) */
    int *defer, n_defer, cap_defer; /* base plans whose bn=train-rebuild variant waits for an answer to
                                    beat (eval_deferred) */
    err *e;
} search_ctx;

/* The most migration m (an index into search.c's migrations) can take off the device at a plan's
 * peak: all it moves. */
int64_t cand_migrate_savable(const search_req *r, int m);
/* A plan of this peak may have the smallest footprint: nothing fits, and no arena planned so far is
 * below its peak. */
bool cand_may_be_least(const search_ctx *c, int64_t peak);
/* Point i's arena is planned and fits the budget. */
bool cand_fits(const search_ctx *c, int i);
/* Point i's arena, from its schedule lowered again (and its time, if it had none). */
void cand_place(search_ctx *c, int i);
/* `text` with BatchNorm mode `bn` (NULL: the default) evaluated once; the index of its point, -1 if
 * it is not a plan for this net. cand_eval: with the request's mode. */
int cand_eval_bn(search_ctx *c, const char *text, const char *bn, const char *source);
int cand_eval(search_ctx *c, const char *text, const char *source);

#endif
