/* ahead: see ahead.h. */
#include "sim/planner/ahead.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ahead_add(ahead_list *t, const char *text, const char *bn)
{
    char full[PLAN_TEXT_LEN];
    if (!cand_full_text(text, bn, full)) return;
    if (t->n == t->cap) t->full = err_realloc(t->full, (size_t)(t->cap = 2 * t->cap + 64) * sizeof *t->full);
    t->full[t->n++] = err_strdup(full);
}

void ahead_list_run(search_ctx *c, ahead_list *t)
{
    cand_ahead(c, t->full, t->n);
    for (int i = 0; i < t->n; i++) free(t->full[i]);
    t->n = 0;
}

void ahead_list_free(ahead_list *t)
{
    for (int i = 0; i < t->n; i++) free(t->full[i]);
    free(t->full);
    *t = (ahead_list){0};
}

void ahead_both(search_ctx *c, char *const *bases, int n)
{
    const search_req *r = c->r;
    if (r->threads < 2) return;
    ahead_list t = {0};
    for (int i = 0; i < n; i++) ahead_add(&t, bases[i], r->bn);
    ahead_list_run(c, &t);
    bool searched = !r->bn || !strcmp(r->bn, "auto"); /* a mode the user named is kept */
    for (int i = 0; i < n; i++) {
        cand_peek pk;
        if (!cand_ahead_peek(c, bases[i], r->bn, &pk) || pk.peak <= r->budget) continue;
        for (int k = 0; pk.staged && searched && !c->least && k < N_BN_MODES; k++)
            if (k != BN_REBUILD) ahead_add(&t, bases[i], cand_bn_modes[k]);
        char g[PLAN_TEXT_LEN];
        if ((r->space & SEARCH_GIST) && pk.floor <= r->budget && (size_t)snprintf(g, sizeof g, "%s+gist", bases[i]) < sizeof g)
            ahead_add(&t, g, r->bn);
    }
    ahead_list_run(c, &t);
    ahead_list_free(&t);
}

void ahead_run(search_ctx *c, const int *idx, int n, const char *suffix)
{
    if (c->r->threads < 2) return;
    ahead_list t = {0};
    const search_point *pts = c->out->pts;
    for (int j = 0; j < n; j++) {
        if (c->out->best >= 0 && !(pts[idx[j]].time_us < pts[c->out->best].time_us)) break;
        char base[PLAN_TEXT_LEN], text[PLAN_TEXT_LEN];
        const char *bn = cand_base_text(pts[idx[j]].text, base, sizeof base);
        if (!suffix) ahead_add(&t, base, cand_bn_modes[BN_REBUILD]);
        else if ((size_t)snprintf(text, sizeof text, "%s+%s", base, suffix) < sizeof text) ahead_add(&t, text, bn);
    }
    ahead_list_run(c, &t);
    ahead_list_free(&t);
}
