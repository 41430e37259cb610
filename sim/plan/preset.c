/* preset: see preset.h. */
#include "sim/plan/preset.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/plan/syntax.h"

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
        syntax_seg_push(p, PLAN_CKPT, start, best - 1);
        start = best, made++;
    }
    syntax_seg_push(p, PLAN_LAYER, start, last);
    free(prefix);
    return made;
}

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
            int rc = syntax_custom(p, n, buf, e);
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

int preset_parse(plan *p, const net *n, const char *t, err *e)
{
    if (!strncmp(t, "authors-", 8)) return authors_preset(p, n, t, e);
    int last = n->n - 1, R = 4;
    const char *colon = strchr(t, ':');
    size_t base = colon ? (size_t)(colon - t) : strlen(t);
    if (colon && syntax_count(colon + 1, &R))
        return err_set(e, "plan '%s': '%s' is not a count (1..%d)", t, colon + 1, PLAN_MAX_BANDS);
#define IS(name) (base == strlen(name) && !strncmp(t, name, base))
    if ((IS("layer") || IS("torch") || IS("torch2")) && !colon) {
        syntax_seg_push(p, PLAN_LAYER, 1, last);
        if (!IS("layer")) p->torch = IS("torch") ? PLAN_TORCH_1 : PLAN_TORCH_2;
    } else if (IS("ckpt-sqrt") && !colon) {
        int k = (int)lround(sqrt((double)(n->n - 1)));
        push_ckpt(p, n, 1, k < 2 ? 2 : k);
    } else if (IS("ckpt") && colon) {
        int made = push_ckpt(p, n, 1, R);
        if (made < R) return err_set(e, "plan '%s': %s has %d places to cut into segments, so at most ckpt:%d", t, n->name, made - 1, made);
    } else if ((IS("vdnn-all") || IS("vdnn-conv")) && !colon) {
        syntax_seg_push(p, PLAN_OFFLOAD, 1, last)->offload = IS("vdnn-all") ? PLAN_OFFLOAD_ALL : PLAN_OFFLOAD_CONV;
    } else if ((IS("2ps") || IS("overl")) && colon) {
        int end = rows_prefix_end(n);
        if (end < 0) return err_set(e, "plan '%s': net '%s' has no row-wise prefix to run in bands", t, n->name);
        plan_seg *s = syntax_seg_push(p, PLAN_ROWS, 1, end);
        s->policy = IS("2ps") ? BAND_2PS : BAND_OVERL, s->fp = s->bp = R;
        syntax_seg_push(p, PLAN_LAYER, end + 1, last);
    } else if (IS("2ps-h") || IS("overl-h")) {
        int end = rows_prefix_end(n);
        if (end < 0) return err_set(e, "plan '%s': net '%s' has no row-wise prefix to run in bands", t, n->name);
        plan_seg *s = syntax_seg_push(p, PLAN_ROWS, 1, end);
        s->policy = IS("2ps-h") ? BAND_2PS : BAND_OVERL, s->fp = s->bp = R;
        int k = (int)lround(sqrt((double)(last - end)));
        push_ckpt(p, n, end + 1, k < 2 ? 2 : k);
    } else {
        return err_set(e, "unknown plan '%s' (presets: layer ckpt-sqrt ckpt:K ckpt-opt[:B] vdnn-all vdnn-conv 2ps:R overl:R 2ps-h[:R] "
                          "overl-h[:R] authors-2ps authors-overl authors-2ps-h authors-overl-h; or a custom plan, see "
                          "docs/plans.md)", t);
    }
#undef IS
    snprintf(p->preset, sizeof p->preset, "%.*s", (int)base, t);
    bool counted = colon || is_hybrid(t, base);
    p->preset_count = counted ? R : 0;
    return 0;
}
