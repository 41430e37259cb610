/* syntax: see syntax.h. */
#include "sim/plan/syntax.h"

#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sim/net/kind.h"

const char *const syntax_mode_names[] = {"layer", "ckpt", "offload", "rows"};

plan_seg *syntax_seg_push(plan *p, plan_mode m, int first, int last)
{
    p->segs = err_realloc(p->segs, ((size_t)p->n_seg + 1) * sizeof(plan_seg));
    plan_seg *s = &p->segs[p->n_seg++];
    memset(s, 0, sizeof *s);
    s->mode = m, s->first = first, s->last = last;
    return s;
}

char *syntax_trim(char *t)
{
    size_t len = strlen(t);
    while (len && (t[len - 1] == ' ' || t[len - 1] == '\t')) t[--len] = 0;
    while (*t == ' ' || *t == '\t') memmove(t, t + 1, len--);
    return t;
}

int syntax_count(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > PLAN_MAX_BANDS) return -1;
    *out = (int)v;
    return 0;
}

/* The layer a pick may name in segment s: one whose kept maps the segment's backward reads — its
 * own layers, and the one before it (the segment's input). */
static int pick_layer(const plan_seg *s, const net *n, const char *name, err *e)
{
    int L = net_find(n, name);
    if (L < 0) return err_set(e, "offload(...): no layer '%s' in net '%s'", name, n->name);
    if (L < s->first - 1 || L > s->last)
        return err_set(e, "offload(...): '%s' is outside the segment %s..%s (or its input)", name, n->layers[s->first].name,
                       n->layers[s->last].name);
    return L;
}

static plan_pick *pick_push(plan_seg *s, int L)
{
    for (int i = 0; i < s->n_pick; i++)
        if (s->picks[i].layer == L) return NULL;
    s->picks = err_realloc(s->picks, ((size_t)s->n_pick + 1) * sizeof *s->picks);
    plan_pick *k = &s->picks[s->n_pick++];
    *k = (plan_pick){.layer = L, .free = 0, .fetch = 1};
    return k;
}

/* offload(ITEM, ...): ITEM is NAME[:FREE[:FETCH]] (one layer's kept maps, released FREE forward
 * steps after their last forward use, prefetched FETCH backward steps ahead of the first backward
 * use: 0 and 1 by default, vDNN's) or FIRST..LAST (every layer of the range that keeps a map). */
static int parse_picks(plan_seg *s, const net *n, char *args, err *e)
{
    s->offload = PLAN_OFFLOAD_PICK;
    char *save = NULL;
    for (char *it = strtok_r(args, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        it = syntax_trim(it);
        char *dots = strstr(it, "..");
        if (dots) {
            *dots = 0;
            int a = pick_layer(s, n, it, e), b = a < 0 ? -1 : pick_layer(s, n, dots + 2, e);
            if (a < 0 || b < 0) return -1;
            if (b < a) return err_set(e, "offload(...): '%s..%s' is empty", it, dots + 2);
            for (int L = a; L <= b; L++)
                if (!pick_push(s, L)) return err_set(e, "offload(...): '%s' is named twice", n->layers[L].name);
            continue;
        }
        char *colon = strchr(it, ':'), *colon2 = colon ? strchr(colon + 1, ':') : NULL;
        if (colon) *colon = 0;
        if (colon2) *colon2 = 0;
        int L = pick_layer(s, n, it, e), v;
        if (L < 0) return -1;
        plan_pick *k = pick_push(s, L);
        if (!k) return err_set(e, "offload(...): '%s' is named twice", it);
        k->named = true;
        if (colon) {
            if (strcmp(colon + 1, "0") && syntax_count(colon + 1, &v))
                return err_set(e, "offload(%s:%s): the release delay is forward steps, 0..%d", it, colon + 1, PLAN_MAX_BANDS);
            k->free = strcmp(colon + 1, "0") ? v : 0;
        }
        if (colon2) {
            if (syntax_count(colon2 + 1, &v))
                return err_set(e, "offload(%s:...:%s): the prefetch lead is backward steps, 1..%d", it, colon2 + 1, PLAN_MAX_BANDS);
            k->fetch = v;
        }
    }
    if (!s->n_pick) return err_set(e, "offload(...): an empty list");
    return 0;
}

/* One custom segment "MODE[(ARGS)]@A..B". */
static int custom_seg(plan *p, const net *n, char *t, err *e)
{
    char *at = strchr(t, '@');
    if (!at) return err_set(e, "plan segment '%s': expected MODE@FIRST..LAST", t);
    *at = 0;
    char *range = at + 1, *dots = strstr(range, "..");
    if (!dots) return err_set(e, "plan segment '%s@%s': expected FIRST..LAST layer names", t, range);
    *dots = 0;
    int first = net_find(n, range), last = net_find(n, dots + 2);
    if (first < 0) return err_set(e, "plan segment '%s': no layer '%s' in net '%s'", t, range, n->name);
    if (last < 0) return err_set(e, "plan segment '%s': no layer '%s' in net '%s'", t, dots + 2, n->name);
    if (first < 1 || last < first) return err_set(e, "plan segment '%s': '%s'..'%s' is empty or starts at the input", t, range, dots + 2);
    char *args = strchr(t, '(');
    if (args) {
        char *close = strrchr(args, ')');
        if (!close || close[1]) return err_set(e, "plan segment '%s': unbalanced parentheses", t);
        *args++ = 0, *close = 0;
    }
    int mode = -1;
    for (int m = 0; m < 4; m++)
        if (!strcmp(t, syntax_mode_names[m])) mode = m;
    if (mode < 0) return err_set(e, "plan segment mode '%s' is unknown (layer ckpt offload rows)", t);
    plan_seg *s = syntax_seg_push(p, (plan_mode)mode, first, last);
    if (mode == PLAN_LAYER || mode == PLAN_CKPT) {
        if (args && *args) return err_set(e, "plan segment %s takes no arguments", syntax_mode_names[mode]);
        return 0;
    }
    if (mode == PLAN_OFFLOAD) {
        if (!args || !*args || !strcmp(args, "all")) s->offload = PLAN_OFFLOAD_ALL;
        else if (!strcmp(args, "conv")) s->offload = PLAN_OFFLOAD_CONV;
        else return parse_picks(s, n, args, e);
        return 0;
    }
    s->policy = BAND_OVERL, s->fp = s->bp = 0;
    enum { POLICY = 1, FP = 2, BP = 4, CUTS = 8 };
    int seen = 0;
    char *save = NULL, *cuts = NULL;
    for (char *a = strtok_r(args ? args : (char[]){0}, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        int v, what;
        if (!strcmp(a, "2ps") || !strcmp(a, "overl")) s->policy = a[0] == '2' ? BAND_2PS : BAND_OVERL, what = POLICY;
        else if (!strncmp(a, "fp=", 3) && !syntax_count(a + 3, &v)) s->fp = v, what = FP;
        else if (!strncmp(a, "bp=", 3) && !syntax_count(a + 3, &v)) s->bp = v, what = BP;
        else if (!syntax_count(a, &v)) s->fp = s->bp = v, what = FP | BP;
        else if (!strncmp(a, "cuts=", 5)) cuts = a + 5, what = CUTS;
        else return err_set(e, "rows(...): unknown or bad argument '%s' (2ps|overl, R, fp=R, bp=R, cuts=a/b/c)", a);
        if (seen & what) /* the last would win silently */
            return err_set(e, "rows(...): '%s' says again what an earlier argument said (policy, band counts, cuts: once each)", a);
        seen |= what;
    }
    if (!(seen & POLICY)) return err_set(e, "rows(...) needs a policy: rows(2ps,R) or rows(overl,R)");
    if (!s->fp && !s->bp) return err_set(e, "rows(...) needs a band count: rows(%s,R)", band_policy_name(s->policy));
    if (!s->fp) s->fp = s->bp;
    if (!s->bp) s->bp = s->fp;
    if (cuts) {
        s->cuts = err_calloc((size_t)s->fp + 1, sizeof(int));
        int k = 1;
        for (char *c = strtok_r(cuts, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
            char *end;
            long v = strtol(c, &end, 10);
            if (*end || end == c || k >= s->fp || v < 0 || v > INT_MAX)
                return err_set(e, "cuts=%s: expected %d interior cuts a/b/... (output rows)", cuts, s->fp - 1);
            s->cuts[k++] = (int)v;
        }
        if (k != s->fp) return err_set(e, "cuts: expected %d interior cuts for %d bands, got %d", s->fp - 1, s->fp, k - 1);
        s->cuts[s->fp] = n->layers[last].h;
    }
    return 0;
}

/* Custom segments "MODE@FIRST..LAST; ..." (buf is cut up), in order, the gaps filled with layer
 * segments. Messages name p->text. */
int syntax_custom(plan *p, const net *n, char *buf, err *e)
{
    int rc = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t && !rc; t = strtok_r(NULL, ";", &save)) {
        while (isspace((unsigned char)*t)) t++;
        char *end = t + strlen(t);
        while (end > t && isspace((unsigned char)end[-1])) *--end = 0;
        if (*t) rc = custom_seg(p, n, t, e);
    }
    for (int i = 0; !rc && i + 1 < p->n_seg; i++)
        if (p->segs[i + 1].first <= p->segs[i].last)
            rc = err_set(e, "plan '%s': segments overlap or are out of order at '%s'", p->text, n->layers[p->segs[i + 1].first].name);
    if (rc) return rc;
    plan filled = {0};
    int next = 1;
    for (int i = 0; i < p->n_seg; i++) {
        if (p->segs[i].first > next) syntax_seg_push(&filled, PLAN_LAYER, next, p->segs[i].first - 1);
        *syntax_seg_push(&filled, PLAN_LAYER, 0, 0) = p->segs[i];
        next = p->segs[i].last + 1;
    }
    if (next <= n->n - 1) syntax_seg_push(&filled, PLAN_LAYER, next, n->n - 1);
    free(p->segs);
    p->segs = filled.segs, p->n_seg = filled.n_seg;
    return 0;
}
