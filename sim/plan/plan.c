/* plan: presets, the custom syntax (sim/plan/PLANS.md) and validation against a net. Every rule that
 * can reject a plan lives here, so the scheduler and the engine may assume a valid plan. */
#include "sim/plan/plan.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/net/kind.h"

const char *const plan_presets[] = {"layer", "torch", "torch2", "ckpt-sqrt", "ckpt:K", "vdnn-all", "vdnn-conv", "2ps:R", "overl:R",
                                    "2ps-h[:R]", "overl-h[:R]", "authors-2ps", "authors-overl", "authors-2ps-h",
                                    "authors-overl-h", NULL};

static const char *bn_names[] = {"auto", "train", "frozen", "per-band"};
const char *plan_bn_name(plan_bn b) { return bn_names[b]; }

static const char *mode_names[] = {"layer", "ckpt", "offload", "rows"};
const char *plan_mode_name(plan_mode m) { return mode_names[m]; }

static int parse_custom(plan *p, const net *n, char *buf, err *e);

static plan_seg *seg_push(plan *p, plan_mode m, int first, int last)
{
    p->segs = err_realloc(p->segs, ((size_t)p->n_seg + 1) * sizeof(plan_seg));
    plan_seg *s = &p->segs[p->n_seg++];
    memset(s, 0, sizeof *s);
    s->mode = m, s->first = first, s->last = last;
    return s;
}

/* Last layer of the row-centric prefix used by the row presets: the deepest clean cut whose
 * output still has at least ceil(H/8) rows (VGG-16: relu4_3; ResNet-50: the end of layer2), i.e.
 * the high-resolution layers that hold most activation memory. */
static int rows_prefix_end(const net *n)
{
    int min_h = (n->layers[0].h + 7) / 8, end = -1;
    for (int i = 1; i + 1 < n->n && n->layers[i].rowwise; i++)
        if (n->layers[i + 1].cut_before && n->layers[i].h >= min_h) end = i;
    return end;
}

/* Cuts layers [first, n-1] into k segments at clean cuts, balancing forward activation values;
 * all but the last become ckpt (the last runs as layer, as torch.utils.checkpoint_sequential). */
/* Pushes k segments from layer first on (fewer where the net has fewer places to cut); returns
 * how many it pushed. */
static int push_ckpt(plan *p, const net *n, int first, int k)
{
    int made = 1;
    int last = n->n - 1;
    double total = 0, *prefix = err_calloc((size_t)n->n + 1, sizeof(double));
    for (int i = first; i <= last; i++) prefix[i + 1] = (total += (double)net_layer_values(&n->layers[i]));
    int start = first;
    for (int s = 1; s < k; s++) {
        double target = prefix[first] + total * s / k;
        int best = -1;
        for (int c = start + 1; c <= last; c++) /* cut before c */
            if (n->layers[c].cut_before && (best < 0 || fabs(prefix[c] - target) < fabs(prefix[best] - target))) best = c;
        if (best < 0) break;
        seg_push(p, PLAN_CKPT, start, best - 1);
        start = best, made++;
    }
    seg_push(p, PLAN_LAYER, start, last);
    free(prefix);
    return made;
}

static char *trim(char *t)
{
    size_t len = strlen(t);
    while (len && (t[len - 1] == ' ' || t[len - 1] == '\t')) t[--len] = 0;
    while (*t == ' ' || *t == '\t') memmove(t, t + 1, len--);
    return t;
}

static int parse_count(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > PLAN_MAX_BANDS) return -1;
    *out = (int)v;
    return 0;
}

/* The LR-CNN authors' configurations, as their prototype bands the nets they ran (GitHub
 * GreenMountain-XY/LRCNN; paper/peers.md): the first entry whose layers the net has. Their -H
 * variants add a second 2-band row stage over the later layers, not checkpointing. Band cuts are
 * ours (band_cuts_default reproduces their VGG-16 splits at 224), so the presets hold at any size. */
static const struct {
    const char *preset, *net, *plan;
} authors[] = {
    {"authors-2ps", "VGG-16", "rows(2ps,6)@conv1_1..pool3"},
    {"authors-2ps", "ResNet-50", "rows(2ps,4)@conv1..layer1.2.relu3"},
    {"authors-overl", "VGG-16", "rows(overl,4)@conv1_1..pool2"},
    {"authors-2ps-h", "VGG-16", "rows(2ps,6)@conv1_1..pool3; rows(2ps,2)@conv4_1..relu5_3"},
    {"authors-overl-h", "VGG-16", "rows(overl,4)@conv1_1..pool2; rows(overl,2)@conv3_1..relu5_3"},
};

/* Every FIRST..LAST layer of a custom plan text names a layer of n. */
static bool has_layers(const net *n, const char *text)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", text);
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char *at = strchr(t, '@'), *dots = at ? strstr(at, "..") : NULL;
        if (!dots) return false;
        *dots = 0;
        if (net_find(n, at + 1) < 0 || net_find(n, dots + 2) < 0) return false;
    }
    return true;
}

static int authors_preset(plan *p, const net *n, const char *t, err *e)
{
    char known[256] = "";
    for (size_t i = 0; i < sizeof authors / sizeof *authors; i++) {
        if (strcmp(authors[i].preset, t)) continue;
        if (has_layers(n, authors[i].plan)) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", authors[i].plan);
            int rc = parse_custom(p, n, buf, e);
            snprintf(p->preset, sizeof p->preset, "%s", t);
            return rc;
        }
        size_t at = strlen(known);
        snprintf(known + at, sizeof known - at, "%s%s (%s)", at ? " or " : "", authors[i].net, authors[i].plan);
    }
    if (!known[0]) return err_set(e, "unknown plan '%s' (the authors' presets: authors-2ps authors-overl authors-2ps-h authors-overl-h)", t);
    return err_set(e, "plan '%s': the LR-CNN authors' configuration of %s; net '%s' lacks those layers", t, known, n->name);
}

/* The hybrids take an optional count (R = 4 when not given). */
static bool is_hybrid(const char *t, size_t base)
{
    return (base == 5 && !strncmp(t, "2ps-h", 5)) || (base == 7 && !strncmp(t, "overl-h", 7));
}

static int preset(plan *p, const net *n, const char *t, err *e)
{
    if (!strncmp(t, "authors-", 8)) return authors_preset(p, n, t, e);
    int last = n->n - 1, R = 4;
    const char *colon = strchr(t, ':');
    size_t base = colon ? (size_t)(colon - t) : strlen(t);
    if (colon && parse_count(colon + 1, &R))
        return err_set(e, "plan '%s': '%s' is not a count (1..%d)", t, colon + 1, PLAN_MAX_BANDS);
#define IS(name) (base == strlen(name) && !strncmp(t, name, base))
    if ((IS("layer") || IS("torch") || IS("torch2")) && !colon) {
        seg_push(p, PLAN_LAYER, 1, last);
        p->torch = IS("torch") ? PLAN_TORCH_1 : IS("torch2") ? PLAN_TORCH_2 : PLAN_TORCH_NONE;
    } else if (IS("ckpt-sqrt") && !colon) {
        int k = (int)lround(sqrt((double)(n->n - 1)));
        push_ckpt(p, n, 1, k < 2 ? 2 : k);
    } else if (IS("ckpt") && colon) {
        int made = push_ckpt(p, n, 1, R);
        if (made < R) return err_set(e, "plan '%s': %s has %d places to cut into segments, so at most ckpt:%d", t, n->name, made - 1, made);
    } else if ((IS("vdnn-all") || IS("vdnn-conv")) && !colon) {
        seg_push(p, PLAN_OFFLOAD, 1, last)->offload = IS("vdnn-all") ? PLAN_OFFLOAD_ALL : PLAN_OFFLOAD_CONV;
    } else if ((IS("2ps") || IS("overl")) && colon) {
        int end = rows_prefix_end(n);
        if (end < 0) return err_set(e, "plan '%s': net '%s' has no row-wise prefix to run in bands", t, n->name);
        plan_seg *s = seg_push(p, PLAN_ROWS, 1, end);
        s->policy = IS("2ps") ? BAND_2PS : BAND_OVERL, s->fp = s->bp = R;
        seg_push(p, PLAN_LAYER, end + 1, last);
    } else if (IS("2ps-h") || IS("overl-h")) {
        int end = rows_prefix_end(n);
        if (end < 0) return err_set(e, "plan '%s': net '%s' has no row-wise prefix to run in bands", t, n->name);
        plan_seg *s = seg_push(p, PLAN_ROWS, 1, end);
        s->policy = IS("2ps-h") ? BAND_2PS : BAND_OVERL, s->fp = s->bp = R;
        int k = (int)lround(sqrt((double)(last - end)));
        push_ckpt(p, n, end + 1, k < 2 ? 2 : k);
    } else {
        return err_set(e, "unknown plan '%s' (presets: layer ckpt-sqrt ckpt:K vdnn-all vdnn-conv 2ps:R overl:R 2ps-h[:R] "
                          "overl-h[:R] authors-2ps authors-overl authors-2ps-h authors-overl-h; or a custom plan, see "
                          "sim/plan/PLANS.md)", t);
    }
#undef IS
    snprintf(p->preset, sizeof p->preset, "%.*s", (int)base, t);
    bool counted = colon || is_hybrid(t, base);
    p->preset_count = counted ? R : 0;
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
        it = trim(it);
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
            if (strcmp(colon + 1, "0") && parse_count(colon + 1, &v))
                return err_set(e, "offload(%s:%s): the release delay is forward steps, 0..%d", it, colon + 1, PLAN_MAX_BANDS);
            k->free = strcmp(colon + 1, "0") ? v : 0;
        }
        if (colon2) {
            if (parse_count(colon2 + 1, &v))
                return err_set(e, "offload(%s:...:%s): the prefetch lead is backward steps, 1..%d", it, colon2 + 1, PLAN_MAX_BANDS);
            k->fetch = v;
        }
    }
    if (!s->n_pick) return err_set(e, "offload(...): an empty list");
    return 0;
}

bool plan_modified(const plan *p)
{
    bool picks = false;
    for (int i = 0; i < p->n_seg; i++) picks |= p->segs[i].n_pick > 0;
    return p->n_mod > 0 || p->migrate != 0 || p->torch || picks;
}

const plan_pick *plan_pick_of(const plan *p, int L)
{
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *s = &p->segs[i];
        for (int k = 0; s->mode == PLAN_OFFLOAD && s->offload == PLAN_OFFLOAD_PICK && k < s->n_pick; k++)
            if (s->picks[k].layer == L) return &s->picks[k];
    }
    return NULL;
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
        if (!strcmp(t, mode_names[m])) mode = m;
    if (mode < 0) return err_set(e, "plan segment mode '%s' is unknown (layer ckpt offload rows)", t);
    plan_seg *s = seg_push(p, (plan_mode)mode, first, last);
    if (mode == PLAN_LAYER || mode == PLAN_CKPT) {
        if (args && *args) return err_set(e, "plan segment %s takes no arguments", mode_names[mode]);
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
        else if (!strncmp(a, "fp=", 3) && !parse_count(a + 3, &v)) s->fp = v, what = FP;
        else if (!strncmp(a, "bp=", 3) && !parse_count(a + 3, &v)) s->bp = v, what = BP;
        else if (!parse_count(a, &v)) s->fp = s->bp = v, what = FP | BP;
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

/* The band geometry of row segment s: forward from its cuts (explicit, or the policy's default),
 * backward the same unless its band count differs (then default cuts for it). */
static int seg_geometry(plan_seg *s, const net *n, const band_seg *bs, err *e)
{
    int R = s->fp > s->bp ? s->fp : s->bp;
    int *cuts = err_calloc((size_t)R + 1, sizeof(int));
    s->band = *bs;
    s->fwd = err_calloc(1, sizeof(band_geom));
    int rc = 0;
    if (s->cuts) memcpy(cuts, s->cuts, ((size_t)s->fp + 1) * sizeof(int));
    else rc = band_cuts_default(n, bs, s->policy, s->fp, cuts, e);
    if (!rc) rc = band_geom_init(s->fwd, n, bs, s->policy, cuts, s->fp, e);
    s->bwd = s->fwd;
    if (!rc && s->bp != s->fp) {
        s->bwd = err_calloc(1, sizeof(band_geom));
        rc = band_cuts_default(n, bs, s->policy, s->bp, cuts, e);
        if (!rc) rc = band_geom_init(s->bwd, n, bs, s->policy, cuts, s->bp, e);
    }
    free(cuts);
    return rc;
}

/* Custom segments "MODE@FIRST..LAST; ..." (buf is cut up), in order, the gaps filled with layer
 * segments. Messages name p->text. */
static int parse_custom(plan *p, const net *n, char *buf, err *e)
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
        if (p->segs[i].first > next) seg_push(&filled, PLAN_LAYER, next, p->segs[i].first - 1);
        *seg_push(&filled, PLAN_LAYER, 0, 0) = p->segs[i];
        next = p->segs[i].last + 1;
    }
    if (next <= n->n - 1) seg_push(&filled, PLAN_LAYER, next, n->n - 1);
    free(p->segs);
    p->segs = filled.segs, p->n_seg = filled.n_seg;
    return 0;
}

/* A row segment holding a layer that normalizes with whole-map statistics (a bn). */
static bool seg_has_map_stats(const plan_seg *s, const net *n)
{
    for (int L = s->first; s->mode == PLAN_ROWS && L <= s->last; L++)
        if (kind_of(&n->layers[L])->map_stats) return true;
    return false;
}

bool plan_bn_approximate(const plan *p, const net *n)
{
    for (int i = 0; i < p->n_seg && p->bn == PLAN_BN_PERBAND; i++)
        if (seg_has_map_stats(&p->segs[i], n)) return true;
    return false;
}

/* Row segment s's statistics passes (plan_passes), none unless map_stats. */
static void passes_init(plan_passes *ps, const plan_seg *s, const net *n, bool map_stats)
{
    int a = s->first, nl = s->last - s->first + 1;
    memset(ps, 0, sizeof *ps);
    ps->nl = nl;
    ps->fwd = err_calloc((size_t)nl, sizeof(int)), ps->bwd = err_calloc((size_t)nl, sizeof(int));
    if (!map_stats) return;
    /* reach[k * nl + j]: layer a + j is a strict ancestor of layer a + k (inside the segment) */
    bool *reach = err_calloc((size_t)nl * nl, sizeof(bool));
    for (int k = 0; k < nl; k++)
        for (int L = a + k; L >= a; L--)
            if (L == a + k || reach[k * nl + L - a])
                for (int j = 0; j < n->layers[L].n_in; j++)
                    if (n->layers[L].in[j] >= a) reach[k * nl + n->layers[L].in[j] - a] = true;
    for (int k = 0; k < nl; k++) { /* after every statistics layer its input depends on */
        if (!kind_of(&n->layers[a + k])->map_stats) continue;
        ps->fwd[k] = 1;
        for (int q = 0; q < k; q++)
            if (ps->fwd[q] && reach[k * nl + q] && ps->fwd[q] + 1 > ps->fwd[k]) ps->fwd[k] = ps->fwd[q] + 1;
        if (ps->fwd[k] > ps->n_fwd) ps->n_fwd = ps->fwd[k];
    }
    for (int k = nl - 1; k >= 0; k--) { /* after every one whose gradient depends on it */
        if (!kind_of(&n->layers[a + k])->map_stats) continue;
        ps->bwd[k] = 1;
        for (int q = k + 1; q < nl; q++)
            if (ps->bwd[q] && reach[q * nl + k] && ps->bwd[q] + 1 > ps->bwd[k]) ps->bwd[k] = ps->bwd[q] + 1;
        if (ps->bwd[k] > ps->n_bwd) ps->n_bwd = ps->bwd[k];
    }
    ps->fwd_need = err_calloc((size_t)ps->n_fwd * nl + 1, sizeof(bool));
    ps->bwd_set = err_calloc((size_t)ps->n_bwd * nl + 1, sizeof(bool));
    for (int k = 0; k < nl; k++)
        for (int j = 0; j < nl; j++) {
            if (ps->fwd[k] && reach[k * nl + j]) ps->fwd_need[(ps->fwd[k] - 1) * nl + j] = true;
            if (ps->bwd[k] && reach[j * nl + k]) ps->bwd_set[(ps->bwd[k] - 1) * nl + j] = true;
        }
    free(reach);
    /* what each backward pass recomputes: what its steps keep, and the inputs of its targets */
    ps->bwd_need = err_calloc((size_t)ps->n_bwd * nl + 1, sizeof(bool));
    bool *bwd = err_calloc((size_t)n->n, sizeof(bool)), *extra = err_calloc((size_t)n->n, sizeof(bool));
    bool *need = err_calloc((size_t)n->n, sizeof(bool));
    for (int q = 0; q < ps->n_bwd; q++) {
        memset(extra, 0, (size_t)n->n * sizeof(bool));
        for (int k = 0; k < nl; k++) {
            bwd[a + k] = ps->bwd_set[q * nl + k];
            if (ps->bwd[k] == q + 1) extra[n->layers[a + k].in[0]] = true;
        }
        plan_need(n, s->first, s->last, bwd, extra, true, need);
        memcpy(ps->bwd_need + (size_t)q * nl, need + a, (size_t)nl * sizeof(bool));
    }
    free(bwd), free(extra), free(need);
}

static void passes_free(plan_passes *ps)
{
    free(ps->fwd), free(ps->bwd), free(ps->fwd_need), free(ps->bwd_set), free(ps->bwd_need);
}

static int validate(plan *p, const net *n, err *e)
{
    if (p->bn == PLAN_BN_AUTO) p->bn = PLAN_BN_TRAIN; /* exact everywhere; per-band only when asked */
    const enc_mod *lossy = plan_lossy(p);
    if (p->migrate && lossy && lossy->adapt > 0)
        return err_set(e, "plan '%s': zfp's adapt= sets its bounds at the whole-net optimizer step, which +migrate splits "
                          "layer by layer", p->text);
    for (int i = 0; i < p->n_seg; i++) {
        plan_seg *s = &p->segs[i];
        const char *where = p->text;
        const net_layer *f = &n->layers[s->first];
        if (s->first > 1 && f->inplace)
            return err_set(e, "plan '%s': a segment cannot start at '%s', which overwrites '%s' in place; start at '%s' or "
                              "after '%s'", where, f->name, n->layers[f->in[0]].name, n->layers[f->in[0]].name, f->name);
        if (s->first > 1 && !f->cut_before)
            return err_set(e, "plan '%s': a %s segment cannot start at '%s' (more than one tensor crosses there)", where,
                           mode_names[s->mode], f->name);
        if (s->mode != PLAN_ROWS) continue;
        band_seg bs;
        if (band_seg_init(&bs, n, s->first, s->last, e)) return err_wrap(e, "plan '%s'", where);
        bs.cover = p->bn == PLAN_BN_TRAIN; /* statistics gathered over the bands need every row */
        int h = n->layers[s->last].h;
        if (s->fp > h || s->bp > h)
            return err_set(e, "plan '%s': %d bands but '%s' has only %d rows at %dx%d input (at most %d bands)", where,
                           s->fp > s->bp ? s->fp : s->bp, n->layers[s->last].name, h, n->layers[0].h, n->layers[0].w, h);
        if (s->policy == BAND_2PS && s->fp != s->bp)
            return err_set(e, "plan '%s': 2PS keeps each forward band's boundaries for its backward, so fp (%d) and bp (%d) "
                              "must be equal; use overl for distinct granularity", where, s->fp, s->bp);
        if (seg_geometry(s, n, &bs, e)) return err_wrap(e, "plan '%s'", where);
        passes_init(&s->passes, s, n, p->bn == PLAN_BN_TRAIN && seg_has_map_stats(s, n));
    }
    return 0;
}

void plan_need(const net *n, int first, int last, const bool *bwd, const bool *extra, bool map_stats, bool *need)
{
    for (int L = last; L >= first; L--) {
        const kind_traits *k = kind_of(&n->layers[L]);
        bool rebuilt = k->aux_rebuilt && !(map_stats && k->map_stats);
        bool nd = (extra && extra[L]) || ((!bwd || bwd[L]) && (k->keeps_y || rebuilt));
        for (int c = L + 1; c <= last && !nd; c++)
            for (int j = 0; j < n->layers[c].n_in; j++)
                if (n->layers[c].in[j] == L && (need[c] || ((!bwd || bwd[c]) && kind_of(&n->layers[c])->keeps_x))) nd = true;
        need[L] = nd;
    }
}

static const char *const migrate_names[] = {"weights", "grads", "optim"};

/* "migrate", "migrate:grads:optim": which persistent tensors migrate (plan.h). */
static int parse_migrate(plan *p, char *m, err *e)
{
    if (p->migrate) return err_set(e, "+migrate given twice");
    if (!m[7]) {
        p->migrate = PLAN_MIGRATE_ALL;
        return 0;
    }
    for (char *a = m + 8, *next; a; a = next) {
        next = strchr(a, ':');
        if (next) *next++ = 0;
        int bit = 0;
        for (int k = 0; k < 3; k++)
            if (!strcmp(a, migrate_names[k])) bit = 1 << k;
        if (!bit) return err_set(e, "+migrate:%s: expected weights, grads or optim (':' between them)", a);
        if (p->migrate & bit) return err_set(e, "+migrate names %s twice", a);
        p->migrate |= bit;
    }
    return 0;
}

/* "+migrate" or "+migrate:grads:optim", canonical (all three: bare). */
static size_t describe_migrate(int migrate, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, " +migrate");
    if (migrate == PLAN_MIGRATE_ALL) return at;
    for (int k = 0; k < 3 && at < len; k++)
        if (migrate & (1 << k)) at += (size_t)snprintf(buf + at, len - at, ":%s", migrate_names[k]);
    return at;
}

/* "gist+dpr:fp16+migrate": the modifiers after the plan's first '+' (sim/plan/enc.h; migrate: plan.h). */
static int parse_mods(plan *p, char *list, err *e)
{
    for (char *m = list, *next; m; m = next) {
        next = strchr(m, '+');
        if (next) *next++ = 0;
        trim(m);
        if (!*m) return err_set(e, "an empty modifier (a '+' with nothing after it)");
        if (!strncmp(m, "migrate", 7) && (!m[7] || m[7] == ':')) {
            if (parse_migrate(p, m, e)) return -1;
            continue;
        }
        if (p->n_mod == ENC_MAX_MODS) return err_set(e, "more than %d modifiers", ENC_MAX_MODS);
        enc_mod *d = &p->mods[p->n_mod];
        if (enc_mod_parse(d, m, e)) return -1;
        bool gist = d->kind == ENC_MOD_GIST;
        if (gist ? plan_gist(p) != NULL : plan_lossy(p) != NULL)
            return err_set(e, gist ? "+gist given twice"
                                   : "+%s: a plan takes one lossy encoding (dpr or zfp), which stores every kept map gist leaves",
                           m);
        p->n_mod++;
    }
    return 0;
}

const enc_mod *plan_gist(const plan *p)
{
    for (int i = 0; i < p->n_mod; i++)
        if (p->mods[i].kind == ENC_MOD_GIST) return &p->mods[i];
    return NULL;
}

const enc_mod *plan_lossy(const plan *p)
{
    for (int i = 0; i < p->n_mod; i++)
        if (p->mods[i].kind != ENC_MOD_GIST) return &p->mods[i];
    return NULL;
}

int plan_parse(plan *p, const net *n, const char *text, err *e)
{
    memset(p, 0, sizeof *p);
    if (strlen(text) >= sizeof p->text) return err_set(e, "plan text too long (%zu chars)", strlen(text));
    snprintf(p->text, sizeof p->text, "%s", text);
    char buf[PLAN_TEXT_LEN]; /* all of it: the planner's plans can be long */
    snprintf(buf, sizeof buf, "%s", text);
    char *bn = strstr(buf, " bn=");
    if (bn) {
        *bn = 0;
        int found = strcmp(bn + 4, "exact") ? -1 : PLAN_BN_TRAIN; /* exact: a synonym of train */
        for (int b = 0; b < 4; b++)
            if (!strcmp(bn + 4, bn_names[b])) found = b;
        if (found < 0) return err_set(e, "plan '%s': bn=%s is not one of auto train exact frozen per-band", text, bn + 4);
        p->bn = (plan_bn)found;
    }
    char *plus = strchr(buf, '+');
    if (plus) {
        *plus = 0;
        if (parse_mods(p, plus + 1, e)) return err_wrap(e, "plan '%s'", text);
    }
    trim(buf);
    int rc = strchr(buf, '@') ? parse_custom(p, n, buf, e) : preset(p, n, buf, e);
    if (!rc) rc = validate(p, n, e);
    if (rc) plan_free(p);
    return rc;
}

void plan_free(plan *p)
{
    for (int i = 0; i < p->n_seg; i++) {
        plan_seg *s = &p->segs[i];
        if (s->bwd && s->bwd != s->fwd) band_geom_free(s->bwd), free(s->bwd);
        if (s->fwd) band_geom_free(s->fwd), free(s->fwd);
        passes_free(&s->passes);
        free(s->cuts), free(s->picks);
    }
    free(p->segs);
    p->segs = NULL;
    p->n_seg = 0;
}

const char *plan_family(const plan *p)
{
    if (p->torch) return "torch";
    int rows = 0, ckpt = 0, offload = 0;
    const char *policy = "2ps";
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *s = &p->segs[i];
        rows += s->mode == PLAN_ROWS, ckpt += s->mode == PLAN_CKPT, offload += s->mode == PLAN_OFFLOAD;
        if (s->mode == PLAN_ROWS && s->policy == BAND_OVERL) policy = "overl";
    }
    if (rows && (rows > 1 || ckpt || offload)) return "hybrid";
    if (rows) return policy;
    return offload ? "vdnn" : ckpt ? "ckpt" : "layer";
}

void plan_describe(const plan *p, const net *n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_seg && at < len; i++) {
        const plan_seg *s = &p->segs[i];
        at += (size_t)snprintf(buf + at, len - at, "%s", i ? "; " : "");
        if (at >= len) break;
        if (s->mode == PLAN_ROWS)
            at += (size_t)snprintf(buf + at, len - at, "rows(%s,fp=%d,bp=%d)", band_policy_name(s->policy), s->fp, s->bp);
        else if (s->mode == PLAN_OFFLOAD && s->offload != PLAN_OFFLOAD_PICK)
            at += (size_t)snprintf(buf + at, len - at, "offload(%s)", s->offload == PLAN_OFFLOAD_ALL ? "all" : "conv");
        else if (s->mode == PLAN_OFFLOAD) /* every pick with its timing */
            for (int k = 0; k < s->n_pick && at < len; k++)
                at += (size_t)snprintf(buf + at, len - at, "%s%s:%d:%d%s", k ? ", " : "offload(", n->layers[s->picks[k].layer].name,
                                       s->picks[k].free, s->picks[k].fetch, k + 1 == s->n_pick ? ")" : "");
        else
            at += (size_t)snprintf(buf + at, len - at, "%s", mode_names[s->mode]);
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "@%s..%s", n->layers[s->first].name, n->layers[s->last].name);
    }
    for (int i = 0; i < p->n_mod && at < len; i++) {
        char m[64];
        enc_mod_describe(&p->mods[i], m, sizeof m);
        at += (size_t)snprintf(buf + at, len - at, " +%s", m);
    }
    if (p->migrate && at < len) at += describe_migrate(p->migrate, buf + at, len - at);
    if (at < len) snprintf(buf + at, len - at, " bn=%s", bn_names[p->bn]);
}

int plan_list_expand(const char *list, char ***out, int *count, err *e)
{
    *out = NULL, *count = 0;
    int depth = 0, cap = 0, rc = 0;
    const char *start = list;
    if (!list[strspn(list, " \t")]) return err_set(e, "empty plan list");
    for (const char *c = list;; c++) {
        if (*c == '(') depth++;
        if (*c == ')') depth--;
        if (*c && (*c != ',' || depth > 0)) continue;
        int len = (int)(c - start);
        while (len && isspace((unsigned char)*start)) start++, len--;
        while (len && isspace((unsigned char)start[len - 1])) len--;
        if (!len) {
            rc = err_set(e, "an empty item in the plan list '%.60s' (two commas, or one at an end)", list);
            break;
        }
        {
            char item[PLAN_TEXT_LEN];
            if (len >= (int)sizeof item) {
                rc = err_set(e, "plan list item too long (%d characters, at most %d)", len, PLAN_TEXT_LEN - 1);
                break;
            }
            memcpy(item, start, (size_t)len);
            item[len] = 0;
            char *colon = strrchr(item, ':'), *dots = colon ? strstr(colon, "..") : NULL;
            int lo = 0, hi = -1;
            if (colon && dots && !strchr(item, '@')) {
                *dots = 0;
                if (parse_count(colon + 1, &lo) || parse_count(dots + 2, &hi) || hi < lo) {
                    rc = err_set(e, "plan range '%.*s': expected NAME:LO..HI with 1 <= LO <= HI", len, start);
                    break;
                }
                colon[1] = 0;
            }
            if (*count + (hi < 0 ? 1 : hi - lo + 1) > PLAN_LIST_MAX) {
                rc = err_set(e, "plan list of more than %d plans", PLAN_LIST_MAX);
                break;
            }
            for (int v = lo; v <= (hi < 0 ? lo : hi); v++) {
                if (*count == cap) *out = err_realloc(*out, (size_t)(cap = cap * 2 + 16) * sizeof(char *));
                size_t size = strlen(item) + 16;
                char *s = err_calloc(size, 1);
                if (hi < 0) snprintf(s, size, "%s", item);
                else snprintf(s, size, "%s%d", item, v);
                (*out)[(*count)++] = s;
            }
        }
        if (!*c) break;
        start = c + 1;
    }
    if (!rc && !*count) rc = err_set(e, "empty plan list");
    if (rc) { /* nothing half-made */
        plan_list_free(*out, *count);
        *out = NULL, *count = 0;
    }
    return rc;
}

void plan_list_free(char **items, int count)
{
    for (int i = 0; i < count; i++) free(items[i]);
    free(items);
}
