/* ahead: the plans the planner's passes (search.c) will ask for, guessed before they ask and
 * evaluated at once on the request's threads (candidates.h: cand_ahead), so that the passes, which
 * decide one plan at a time in their own order, take the evaluations instead of making them. A guess
 * the search does not ask for costs time, never a different answer: an evaluation depends on the
 * plan's text and the request alone. Not done here: any decision of the search's. */
#ifndef LRCNN_AHEAD_H
#define LRCNN_AHEAD_H

#include "sim/planner/candidates.h"

/* Full texts to evaluate ahead, each malloc'd. */
typedef struct {
    char **full;
    int n, cap;
} ahead_list;

/* `text` with mode `bn` (NULL: none) appended to t (dropped if too long: no plan either). */
void ahead_add(ahead_list *t, const char *text, const char *bn);
/* t's texts evaluated ahead, and t emptied (its room kept). */
void ahead_list_run(search_ctx *c, ahead_list *t);
void ahead_list_free(ahead_list *t);

/* The base plans `bases` (texts without a mode) as eval_both will ask for them (the request's
 * mode), then the variants eval_variants will try at once of those whose peak is over the budget:
 * the modes of staged statistics but the rebuilt (which waits for an answer to beat), and +gist
 * where its floor fits. */
void ahead_both(search_ctx *c, char *const *bases, int n);

/* A pass that runs through points fastest first until one is no faster than the answer
 * (eval_migrations, eval_deferred) asks for the next AHEAD_RUN at a time: those of idx[0, n) faster
 * than the answer now, each point's base text with "+" suffix in its own mode, or, with no suffix,
 * in bn=train-rebuild. A run at a time, so that few are evaluated past the point where the pass
 * stops (none in ResNet-50's searches at the bench's budgets). */
enum { AHEAD_RUN = 16 };
void ahead_run(search_ctx *c, const int *idx, int n, const char *suffix);

#endif
