/* candidates: the planner's table of the plans it has evaluated (search.h's points), for search.c.
 * A text is lowered, replayed and timed once (a text seen again returns its point), a plan over the
 * budget without encodings or migration judged by its closed form alone, and a point's arena
 * planned only where it may answer (settle, in search.c) or be the smallest footprint. Plans the
 * search will ask for may be evaluated ahead, several at once on threads (cand_ahead). Not done
 * here: which plans to try, or which answers (search.c). */
#ifndef LRCNN_CANDIDATES_H
#define LRCNN_CANDIDATES_H

#include "sim/planner/chain.h"
#include "sim/planner/search.h"

/* BatchNorm's modes a base plan in stages (bn=train) is tried in where it does not fit, each with
 * less memory and more time: the stages' kept maps on the host, rebuilt in the backward, and the
 * passes; the first two take a count of levels (search.c: eval_levels). */
enum { BN_OFFLOAD, BN_REBUILD, BN_PASSES, N_BN_MODES, N_BN_LEVELED = BN_PASSES };
extern const char *const cand_bn_modes[N_BN_MODES];

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
                                    cand_bn_modes) with every level offloaded or rebuilt fits (eval_variants) */
    int *defer, n_defer, cap_defer; /* base plans whose bn=train-rebuild variant waits for an answer to
                                    beat (eval_deferred) */
    struct cand_judged *ahead; /* evaluations made ahead (cand_ahead), an open-addressed table by text */
    int n_ahead, cap_ahead;
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
/* A point's text without its " bn=MODE" into buf; returns the mode (NULL: none). */
const char *cand_base_text(const char *text, char *buf, size_t len);
/* The full text of `text` with mode `bn` (NULL: none) into full (PLAN_TEXT_LEN); false if too long. */
bool cand_full_text(const char *text, const char *bn, char *full);
/* Evaluates the n plans `full` (full texts) on c->r->threads threads, ahead of the cand_eval_bn
 * calls that will ask for them, which then take the result instead of evaluating: the same result,
 * since an evaluation depends on the text and the request alone (whether to lower a plan whose
 * closed form is over the budget, which depends on the search, is decided when it is asked for).
 * Texts already evaluated or ahead are skipped. Fewer than two threads: nothing. */
void cand_ahead(search_ctx *c, char *const *full, int n);
/* What a plan judged ahead showed (cand_ahead_peek): its peak, the floor under which no encoding
 * takes it, and whether it gathers BatchNorm statistics in stages. */
typedef struct {
    int64_t peak, floor;
    bool staged;
} cand_peek;
/* `text` with mode `bn`, if judged ahead and a plan for this net: true, and what it showed in *pk. */
bool cand_ahead_peek(const search_ctx *c, const char *text, const char *bn, cand_peek *pk);
/* Frees what cand_ahead kept. */
void cand_ahead_free(search_ctx *c);

#endif
