/* search: see search.h. */
#include "sim/planner/search.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/planner/ahead.h"
#include "sim/planner/candidates.h"
#include "sim/planner/chain.h"
#include "sim/planner/offsel.h"

/* Migrations, cheapest first (sim/plan/plan.h): gradients released at their layer's update (no moves);
 * optimizer state on the host too; parameters too. */
static const char *const migrations[] = {"migrate:grads", "migrate:grads:optim", "migrate"};

/* An int appended to a growing list. */
static void push_int(int **v, int *n, int *cap, int x)
{
    if (*n == *cap) *v = err_realloc(*v, (size_t)(*cap = 2 * *cap + 16) * sizeof(int));
    (*v)[(*n)++] = x;
}

/* The variants of base plan `text` (point i), each of which only ever costs time, so that a plan
 * that fits is never beaten by one of its own variants and they are tried only where it does not
 * fit: with BatchNorm's statistics gathered in stages (bn=train) and no mode named by the user,
 * cand_bn_modes (where offloading or rebuilding every level's maps fits, fewer levels may:
 * eval_levels); with gist in the space, text+gist, where the encodings could bring it under (its
 * floor). The rebuilt stages, the costliest to evaluate (no closed form; ResNet-50's 2ps:4 lowers
 * to 25k steps), wait for an answer to beat (eval_deferred). When nothing fits (c->least), every
 * variant that could be the smallest footprint, at once, +migrate ones too. */
static void eval_variants(search_ctx *c, const char *text, int i)
{
    const search_req *r = c->r;
    int64_t peak = c->out->pts[i].peak, floor = c->out->pts[i].floor;
    c->out->pts[i].variants = true;
    int first = c->out->n_pts;
    bool searched = !r->bn || !strcmp(r->bn, "auto"); /* a mode the user named is kept */
    int n_modes = c->out->pts[i].staged && searched ? N_BN_MODES : 0;
    const char *source = c->out->pts[i].source;
    int64_t peaks[N_BN_MODES + 1] = {peak, INT64_MAX, INT64_MAX, INT64_MAX}; /* text's, in each mode */
    int64_t below = 0; /* under the rebuilt stages' peak: the offloaded stages' forward peak (the same
                          forward, but for the rebuilt maps' 2PS boundaries; encodings aside) */
    for (int k = 0; k < n_modes; k++) {
        if (k == BN_REBUILD && (below > r->budget && !cand_may_be_least(c, below))) continue;
        if (k == BN_REBUILD && !c->least) { /* rebuilt: later, if this base is faster than the answer then */
            push_int(&c->defer, &c->n_defer, &c->cap_defer, i);
            continue;
        }
        int j = cand_eval_bn(c, text, cand_bn_modes[k], source);
        if (j >= 0) peaks[k + 1] = c->out->pts[j].peak;
        if (j >= 0 && k == BN_OFFLOAD && !strchr(text, '+')) below = c->out->pts[j].fwd_peak;
    }
    for (int k = 0; k < n_modes && k < N_BN_LEVELED; k++)
        if (peaks[k + 1] <= r->budget) /* every level's maps moved or rebuilt fits: fewer may (eval_levels) */
            push_int(&c->lev, &c->n_lev, &c->cap_lev, i), push_int(&c->lev, &c->n_lev, &c->cap_lev, k);
    char g[PLAN_TEXT_LEN], m[PLAN_TEXT_LEN];
    bool gist = (r->space & SEARCH_GIST) && (size_t)snprintf(g, sizeof g, "%s+gist", text) < sizeof g;
    /* no encoding takes a plan under its floor, no migration under its peak less all it moves */
    if (gist && (floor <= r->budget || cand_may_be_least(c, floor))) cand_eval(c, g, source);
    int64_t all = cand_migrate_savable(r, 2);
    if (c->least && (r->space & SEARCH_MIGRATE) && (size_t)snprintf(m, sizeof m, "%s+migrate", text) < sizeof m) {
        /* the migration pass's plans (eval_migrations) that keep least: each above with all moved */
        for (int k = 0; k <= n_modes; k++)
            if (cand_may_be_least(c, peaks[k] - all)) cand_eval_bn(c, m, k ? cand_bn_modes[k - 1] : r->bn, source);
        if (gist && cand_may_be_least(c, floor - all) && (size_t)snprintf(m, sizeof m, "%s+gist+migrate", text) < sizeof m) cand_eval(c, m, source);
    }
    for (int k = first; k < c->out->n_pts; k++) c->out->pts[k].variants = true; /* variants have none of their own */
}

/* text, and its variants unless its peak fits (its arena may not: settle() tries them then). */
static int eval_both(search_ctx *c, const char *text, const char *source)
{
    int i = cand_eval(c, text, source);
    if (i >= 0 && (c->out->pts[i].peak > c->r->budget || (c->out->pts[i].placed && !cand_fits(c, i)))) eval_variants(c, text, i);
    return i;
}

/* eval_both of each of bases' texts (base plans, without a mode), in order, after evaluating them
 * ahead (ahead_both); empties bases. */
static void both_all(search_ctx *c, ahead_list *bases, const char *source)
{
    ahead_both(c, bases->full, bases->n);
    for (int i = 0; i < bases->n; i++) eval_both(c, bases->full[i], source);
    ahead_list_free(bases);
}

/* The answer among the points so far: the fastest whose arena fits, arenas planned fastest first
 * (no arena is smaller than its peak, so only plans whose peak fits and that are faster than the
 * best so far are placed); a base plan whose arena does not fit has its variants tried (they join
 * the race). With `presets`, among the presets, into out->preset; else into out->best. */
static void settle(search_ctx *c, bool presets)
{
    const search_req *r = c->r;
    int *best = presets ? &c->out->preset : &c->out->best;
    for (;;) {
        const search_point *pts = c->out->pts;
        int next = -1;
        for (int i = 0; i < c->out->n_pts; i++) {
            if (isnan(pts[i].time_us) || pts[i].peak > r->budget || (pts[i].placed && pts[i].footprint > r->budget)) continue;
            if (presets && strcmp(pts[i].source, "preset")) continue;
            if (*best >= 0 && !(pts[i].time_us < pts[*best].time_us)) continue;
            if (next < 0 || pts[i].time_us < pts[next].time_us) next = i; /* between equals the earlier: presets come first */
        }
        if (next < 0) return;
        if (!pts[next].placed) cand_place(c, next);
        if (cand_fits(c, next)) {
            *best = next;
            continue;
        }
        const search_point *pt = &c->out->pts[next];
        if (presets || pt->variants || !strcmp(pt->source, "migrate")) continue;
        char base[PLAN_TEXT_LEN]; /* without the mode every plan carries, when the user named one */
        if (r->bn) cand_base_text(pt->text, base, sizeof base);
        else snprintf(base, sizeof base, "%s", pt->text);
        eval_variants(c, base, next);
    }
}

static const char *const presets_ckpt[] = {"ckpt-sqrt", "ckpt:2", "ckpt:3", "ckpt:4", "ckpt:6", "ckpt:8"};
static const char *const presets_offload[] = {"vdnn-all", "vdnn-conv"};
static const char *const presets_rows[] = {"authors-2ps", "authors-overl", "authors-2ps-h", "authors-overl-h"};
static const char *const row_policies[] = {"2ps", "overl"};
static const int row_counts[] = {2, 3, 4, 6, 8};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A row stage from the input may end at layer `end` when a clean cut follows it, every layer up to
 * it is rowwise, and its output still has an eighth of the input's rows (as the row presets'
 * prefix: the high-resolution layers, where the activations are): the most bands it takes (at least
 * 2 rows a band, from row_counts), or 0 where it may not end. */
static int row_stage_bands(const net *n, int end)
{
    if (end + 1 >= n->n || !n->layers[end + 1].cut_before || n->layers[end].h < (n->layers[0].h + 7) / 8) return 0;
    for (int L = 1; L <= end; L++)
        if (!n->layers[L].rowwise) return 0;
    int most = 0;
    for (size_t k = 0; k < sizeof row_counts / sizeof *row_counts; k++)
        if (n->layers[end].h >= 2 * row_counts[k]) most = row_counts[k];
    return most;
}

/* The presets of every kind the space has (a checkpointing preset is a plan of the ckpt space, so
 * the search never refuses a budget one of them meets; `presets` alone: every preset), `layer` first. */
static void eval_presets(search_ctx *c)
{
    const search_req *r = c->r;
    char text[PLAN_TEXT_LEN];
    unsigned kinds = r->space == SEARCH_PRESETS ? SEARCH_ALL : r->space; /* `presets` alone: all of them */
    ahead_list t = {0};
    ahead_add(&t, "layer", NULL);
    for (size_t i = 0; (kinds & SEARCH_CKPT) && i < sizeof presets_ckpt / sizeof *presets_ckpt; i++) ahead_add(&t, presets_ckpt[i], NULL);
    for (size_t i = 0; (kinds & SEARCH_OFFLOAD) && i < sizeof presets_offload / sizeof *presets_offload; i++)
        ahead_add(&t, presets_offload[i], NULL);
    for (size_t k = 0; (kinds & SEARCH_ROWS) && k < sizeof row_counts / sizeof *row_counts; k++)
        for (int pol = 0; pol < 2; pol++) {
            snprintf(text, sizeof text, "%s:%d", row_policies[pol], row_counts[k]);
            ahead_add(&t, text, NULL);
            if (!(kinds & SEARCH_CKPT)) continue;
            snprintf(text, sizeof text, "%s-h:%d", row_policies[pol], row_counts[k]);
            ahead_add(&t, text, NULL);
        }
    for (size_t i = 0; (kinds & SEARCH_ROWS) && i < sizeof presets_rows / sizeof *presets_rows; i++) ahead_add(&t, presets_rows[i], NULL);
    both_all(c, &t, "preset");
}

/* The chain DP's splits: one per bucket count where the table's time falls by more than `thin` of
 * the chain's forward time (DP_THIN for the whole net, ROW_THIN behind a row stage), and the
 * least-keeping split, into texts[] (at most `most`, each PLAN_TEXT_LEN / 2); returns how many. */
#define DP_THIN 0.001
#define ROW_THIN 0.02
static int chain_splits(const search_ctx *c, int first, double thin, char (*texts)[PLAN_TEXT_LEN / 2], int most)
{
    chain ch;
    chain_init(&ch, c->r, c->cn, first);
    int *at = err_calloc(DP_BUCKETS + 1, sizeof *at), k = chain_breaks(&ch, thin, at, DP_BUCKETS + 1), n = 0;
    for (int i = 0; i < k && n < most; i++)
        if (!chain_at(&ch, at[i], texts[n], sizeof texts[n])) n++;
    if (n < most) chain_min(&ch, texts[n], sizeof texts[n]), n++;
    free(at);
    chain_free(&ch);
    return n;
}

/* The clean cuts a row stage from the input may end at (row_stage_bands), each the first at its
 * height (the stage takes in the layer that brought the rows down, so what crosses the cut is
 * small), and the last of them (the longest stage), into ends[]; returns how many. */
static int row_stage_ends(const net *n, int *ends)
{
    int k = 0, last = -1;
    for (int end = 1; end < n->n; end++) {
        if (!row_stage_bands(n, end)) continue;
        if (last < 0 || n->layers[end].h != n->layers[last].h) ends[k++] = end;
        last = end;
    }
    if (last >= 0 && ends[k - 1] != last) ends[k++] = last;
    return k;
}

/* Offload lists (sim/planner/offsel.h: which maps move, and when), on a device whose moves overlap
 * compute (elsewhere a move costs the same wherever it stands): the two relaxation heuristics'
 * answers (ROUND with two timings a layer, DIVE with one: ResNet-50 b32 in about a second) at the
 * peaks of vDNN's two policies, budgets the net fixes, not the request. */
static void eval_lists(search_ctx *c)
{
    const search_req *r = c->r;
    if (!(r->space & SEARCH_OFFLOAD) || !r->dev->overlap) return;
    if (!c->listed) {
        c->listed = true;
        static const char *const vdnn[] = {"vdnn-all", "vdnn-conv"};
        for (int v = 0; v < 2; v++) {
            int i = cand_eval(c, vdnn[v], "preset");
            if (i < 0) continue;
            for (int m = OFFSEL_ROUND; m <= OFFSEL_DIVE; m++) {
                offsel_req oq = {.n = r->n, .cfg = r->cfg, .dev = r->dev, .prefix = "", .first = 1, .bn = r->bn,
                                 .budget = c->out->pts[i].peak, .window = m == OFFSEL_ROUND ? 2 : 1};
                offsel_result o;
                err e;
                if (!offsel_solve(&oq, (offsel_method)m, &o, &e) && o.found && o.chosen) c->lists[2 * v + m] = o.text, o.text = NULL;
                offsel_result_free(&o);
            }
        }
    }
    for (int k = 0; k < 4; k++)
        if (c->lists[k]) eval_both(c, c->lists[k], "offsel");
}

/* The space's plans, none chosen by the budget (so that a larger budget sees every plan a smaller
 * one did, and the answer's time can only fall): the presets; the offload lists of eval_lists;
 * the chain DP's splits of the whole net; and each row stage (2PS or OverL, every band count, over the rowwise layers from the input
 * to each of row_stage_ends) followed by each of the DP's splits of the rest — each plan with its
 * variants where it does not fit (eval_both). */
#define MOST_SPLITS 512
static void eval_space(search_ctx *c)
{
    const search_req *r = c->r;
    const net *n = r->n;
    char text[PLAN_TEXT_LEN], (*rest)[PLAN_TEXT_LEN / 2] = err_calloc(MOST_SPLITS, sizeof *rest);
    int *ends = err_calloc((size_t)n->n + 1, sizeof *ends), n_ends = (r->space & SEARCH_ROWS) ? row_stage_ends(n, ends) : 0;
    eval_presets(c);
    eval_lists(c);
    ahead_list t = {0};
    int k = c->cn ? chain_splits(c, 1, DP_THIN, rest, MOST_SPLITS) : 0;
    for (int i = 0; i < k; i++) ahead_add(&t, *rest[i] ? rest[i] : "layer", NULL);
    both_all(c, &t, "dp");
    for (int e = 0; e < n_ends; e++) {
        int end = ends[e], most = row_stage_bands(n, end);
        k = c->cn ? chain_splits(c, end + 1, ROW_THIN, rest, MOST_SPLITS) : (*rest[0] = 0, 1);
        for (int i = 0; i < k; i++)
            for (int pol = 0; pol < 2; pol++)
                for (size_t b = 0; b < sizeof row_counts / sizeof *row_counts && row_counts[b] <= most; b++) {
                    snprintf(text, sizeof text, "rows(%s,%d)@%s..%s%s%s", row_policies[pol], row_counts[b], n->layers[1].name,
                             n->layers[end].name, *rest[i] ? "; " : "", rest[i]);
                    ahead_add(&t, text, NULL);
                }
    }
    both_all(c, &t, c->cn ? "rows+dp" : "rows");
    free(rest), free(ends);
}

static const search_point *order_pts;
static int by_time(const void *a, const void *b)
{
    double x = order_pts[*(const int *)a].time_us, y = order_pts[*(const int *)b].time_us;
    if (isnan(x) || isnan(y)) return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

/* Migration, for each migration (sim/plan/plan.h: the gradients' release at their layer's update,
 * which moves nothing; optimizer state on the host too; parameters too): every plan evaluated that
 * does not fit, carries no migration and could fit with it (peak minus all it moves), fastest
 * first, until the next is no faster than the best that fits: a migration only adds moves, so a
 * plan no faster than that best is no faster with one. */
static void eval_migrations(search_ctx *c)
{
    const search_req *r = c->r;
    int n = c->out->n_pts;
    int *idx = err_calloc((size_t)n + 1, sizeof(int));
    char text[PLAN_TEXT_LEN];
    for (int m = 0; m < (int)(sizeof migrations / sizeof *migrations); m++) {
        int64_t savable = cand_migrate_savable(r, m), k = 0;
        const search_point *pts = c->out->pts;
        for (int i = 0; i < n; i++)
            if (!cand_fits(c, i) && pts[i].peak - savable <= r->budget && !strstr(pts[i].text, "+migrate") && !isnan(pts[i].time_us))
                idx[k++] = i;
        order_pts = pts;
        qsort(idx, (size_t)k, sizeof *idx, by_time);
        for (int j = 0; j < k; j++) {
            if (j % AHEAD_RUN == 0) ahead_run(c, idx + j, k - j < AHEAD_RUN ? k - j : AHEAD_RUN, migrations[m]);
            const search_point *p = &c->out->pts[idx[j]];
            if (c->out->best >= 0 && p->time_us >= c->out->pts[c->out->best].time_us) break;
            char base[PLAN_TEXT_LEN];
            const char *bn = cand_base_text(p->text, base, sizeof base);
            if ((size_t)snprintf(text, sizeof text, "%s+%s", base, migrations[m]) >= sizeof text) continue;
            int i = cand_eval_bn(c, text, bn, "migrate");
            const search_point *q = i >= 0 ? &c->out->pts[i] : NULL;
            if (q && q->peak <= r->budget && (c->out->best < 0 || q->time_us < c->out->pts[c->out->best].time_us)) {
                cand_place(c, i);
                if (cand_fits(c, i)) c->out->best = i;
            }
        }
    }
    free(idx);
}

/* The rebuilt stages (bn=train-rebuild) of the base plans eval_variants left for later, fastest
 * base first, until the next base is no faster than the answer so far (rebuilding only adds
 * computation); where every level rebuilt fits, fewer levels may (eval_levels). The list is
 * consumed: settle() may add to it again. */
static void eval_deferred(search_ctx *c)
{
    int n = c->n_defer, *base = c->defer;
    c->defer = NULL, c->n_defer = c->cap_defer = 0;
    order_pts = c->out->pts;
    qsort(base, (size_t)n, sizeof *base, by_time);
    for (int q = 0; q < n; q++) {
        if (q % AHEAD_RUN == 0) ahead_run(c, base + q, n - q < AHEAD_RUN ? n - q : AHEAD_RUN, NULL);
        const search_point *b = &c->out->pts[base[q]];
        if (c->out->best >= 0 && b->time_us >= c->out->pts[c->out->best].time_us) break;
        char text[PLAN_TEXT_LEN];
        cand_base_text(b->text, text, sizeof text);
        int j = cand_eval_bn(c, text, cand_bn_modes[BN_REBUILD], b->source);
        if (j < 0) continue;
        c->out->pts[j].variants = true; /* a variant: none of its own */
        if (c->out->pts[j].peak <= c->r->budget) /* fewer levels may fit (eval_levels) */
            push_int(&c->lev, &c->n_lev, &c->cap_lev, base[q]), push_int(&c->lev, &c->n_lev, &c->cap_lev, BN_REBUILD);
    }
    free(base);
}

/* settle(), then the variants it and eval_variants left for later, until none is left. */
static void settle_deferred(search_ctx *c)
{
    settle(c, false);
    while (c->n_defer) eval_deferred(c), settle(c, false);
}

/* The mode bn=train:pick names, its trailing k's (kept, as every level past the last letter is)
 * dropped, in mix: "train" where none is left. */
static const char *letters_mode(const char *pick, char mix[PLAN_BN_PICKS + 8])
{
    int n = snprintf(mix, PLAN_BN_PICKS + 8, "train:%s", pick);
    while (n > 6 && mix[n - 1] == 'k') mix[--n] = 0;
    return n > 6 ? mix : "train";
}

/* Base plan `base` with bn=train:pick, the levels past the last letter not k kept (sim/plan/plan.h). */
static int eval_letters(search_ctx *c, const char *base, const char *pick, const char *source)
{
    char mix[PLAN_BN_PICKS + 8];
    int i = cand_eval_bn(c, base, letters_mode(pick, mix), source);
    if (i >= 0) c->out->pts[i].variants = true; /* a variant: none of its own */
    return i;
}

/* Offloaded or rebuilt stages with fewer levels (bn=train-offload:K, bn=train-rebuild:K): for each
 * base plan whose every level offloaded or rebuilt fits (eval_variants), fastest base first, until
 * the next base is no faster than the best that fits (offloading only adds moves to the base's
 * time, rebuilding only computation): the smallest K that fits, by bisection (the device's peak
 * falls as K grows, by a level's kept maps at most), each level fewer moving or recomputing less;
 * rebuilt, also every level but one in 2 or 3 (bn=train-rebuild/M: each rebuilt from at most M - 1
 * levels below, where the first K are rebuilt from the segment input); offloaded, also the levels
 * mixed, one in M offloaded and the M - 1 between rebuilt from it (bn=train:LETTERS, M = 2..4). */
static void eval_levels(search_ctx *c)
{
    const search_req *r = c->r;
    order_pts = c->out->pts;
    qsort(c->lev, (size_t)c->n_lev / 2, 2 * sizeof *c->lev, by_time); /* by the base: the pair's first */
    for (int j = 0; j < c->n_lev; j += 2) {
        const search_point *b = &c->out->pts[c->lev[j]];
        if (c->out->best >= 0 && b->time_us >= c->out->pts[c->out->best].time_us) break;
        char base[PLAN_TEXT_LEN], k[32];
        cand_base_text(b->text, base, sizeof base);
        const char *source = b->source;
        int levels = b->levels, lo = 1, hi = levels; /* b is not read again: evaluating may move the points */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            snprintf(k, sizeof k, "%s:%d", cand_bn_modes[c->lev[j + 1]], mid);
            int i = cand_eval_bn(c, base, k, source);
            if (i >= 0) c->out->pts[i].variants = true; /* a variant: none of its own */
            if (i >= 0 && c->out->pts[i].peak <= r->budget) hi = mid;
            else lo = mid + 1;
        }
        for (int m = 2; m <= 3 && c->lev[j + 1] == BN_REBUILD; m++) { /* rebuilt: one level kept in 2 or 3, each chain short */
            snprintf(k, sizeof k, "%s/%d", cand_bn_modes[BN_REBUILD], m);
            int i = cand_eval_bn(c, base, k, source);
            if (i >= 0) c->out->pts[i].variants = true;
        }
        /* offloaded: levels mixed, one in 2, 3 or 4 offloaded and the others rebuilt from it (bn=train:ro...,
         * rro..., rrro...): about every level's memory off the device for a part of the moves and a short chain */
        for (int m = 2; m <= 4 && c->lev[j + 1] == BN_OFFLOAD && levels <= PLAN_BN_PICKS; m++) {
            char pick[PLAN_BN_PICKS + 1];
            for (int q = 1; q <= levels; q++) pick[q - 1] = q % m ? 'r' : 'o';
            pick[levels] = 0;
            eval_letters(c, base, pick, source);
        }
    }
}

/* The answer's levels refined one letter at a time (bn=train:LETTERS): where the answer gathers
 * BatchNorm's statistics in stages with levels off the device (offloaded, rebuilt, or letters), each
 * level's two other choices (k kept, o offloaded, r rebuilt) are tried and the fastest that fits
 * becomes the answer (settle); then the round's other changes that were faster on their own and
 * within the budget are added to it one at a time, each kept where the answer it makes is faster
 * and fits. Rounds until one finds nothing faster, at most REFINE_ROUNDS: a local search from the
 * answer the families (eval_variants, eval_levels) found, where the best set is one of 3^levels. */
enum { REFINE_ROUNDS = 8 };
static void refine_levels(search_ctx *c)
{
    const search_req *r = c->r;
    for (int round = 0; round < REFINE_ROUNDS && c->out->best >= 0; round++) {
        int was = c->out->best, L = c->out->pts[was].levels;
        const char *source = c->out->pts[was].source;
        double t_was = c->out->pts[was].time_us;
        char base[PLAN_TEXT_LEN], pick[PLAN_BN_PICKS + 1];
        const char *bn = cand_base_text(c->out->pts[was].text, base, sizeof base);
        plan p;
        err e;
        if (!c->out->pts[was].staged || !bn || L < 1 || L > PLAN_BN_PICKS || plan_parse(&p, r->n, c->out->pts[was].text, &e)) return;
        bool off = plan_bn_staged(p.bn) && (p.bn != PLAN_BN_TRAIN || p.bn_pick[0]); /* bn=train keeps every level: the fastest */
        for (int q = 1; q <= L; q++) pick[q - 1] = plan_bn_level(&p, q);
        pick[L] = 0;
        plan_free(&p);
        if (!off) return;
        int pt[2 * PLAN_BN_PICKS], n = 0, m = 0; /* the changes (level at[j] to letter to[j]), then each one's point */
        char to[2 * PLAN_BN_PICKS], next[PLAN_BN_PICKS + 1], mix[PLAN_BN_PICKS + 8];
        short at[2 * PLAN_BN_PICKS];
        ahead_list t = {0};
        for (int q = 0; q < L; q++)
            for (const char *ch = "kor"; *ch; ch++)
                if (*ch != pick[q]) {
                    memcpy(next, pick, (size_t)L + 1), next[q] = *ch;
                    at[m] = (short)q, to[m] = *ch, m++;
                    ahead_add(&t, base, letters_mode(next, mix));
                }
        ahead_list_run(c, &t);
        ahead_list_free(&t);
        for (int j = 0; j < m; j++) { /* in the same order; n <= j, so the kept changes move down in place */
            memcpy(next, pick, (size_t)L + 1), next[at[j]] = to[j];
            int i = eval_letters(c, base, next, source);
            if (i >= 0) pt[n] = i, at[n] = at[j], to[n] = to[j], n++;
        }
        settle(c, false);
        if (c->out->best == was) return;
        /* the changes faster alone and within the budget, fastest first, added to the answer's */
        int k = 0, order[2 * PLAN_BN_PICKS];
        for (int j = 0; j < n; j++) {
            const search_point *x = &c->out->pts[pt[j]];
            if (pt[j] == c->out->best) pick[at[j]] = to[j];
            else if (x->time_us < t_was && x->peak <= r->budget) order[k++] = j;
        }
        for (int a = 1; a < k; a++) /* by time: insertion, a few dozen at most */
            for (int b = a; b > 0 && c->out->pts[pt[order[b]]].time_us < c->out->pts[pt[order[b - 1]]].time_us; b--) {
                int t = order[b];
                order[b] = order[b - 1], order[b - 1] = t;
            }
        for (int j = 0; j < k; j++) {
            int q = at[order[j]];
            char next[PLAN_BN_PICKS + 1];
            memcpy(next, pick, (size_t)L + 1);
            if (next[q] == to[order[j]]) continue; /* the answer's own change */
            next[q] = to[order[j]];
            int before = c->out->best, i = eval_letters(c, base, next, source);
            if (i < 0) continue;
            settle(c, false);
            if (c->out->best == i) memcpy(pick, next, (size_t)L + 1);
            else if (c->out->best != before) break; /* another point won: the next round starts from it */
        }
    }
}

int search_run(const search_req *r, search_result *out, err *e)
{
    double t0 = now_s();
    memset(out, 0, sizeof *out);
    out->best = out->least = out->preset = -1;
    search_ctx c = {.r = r, .out = out, .e = e, .least_at = -1};
    int rc = 0;
    chain_net cn;
    if (cand_eval(&c, "layer", "preset") < 0) rc = err_set(e, "plan 'layer' does not lower for %s", r->n->name);
    else if ((r->space & (SEARCH_CKPT | SEARCH_OFFLOAD)) && !(rc = chain_net_init(&cn, r, e))) c.cn = &cn;
    if (!rc) {
        eval_space(&c);
        settle_deferred(&c);
        if (c.n_lev) eval_levels(&c), settle_deferred(&c);
        if (!r->bn || !strcmp(r->bn, "auto")) refine_levels(&c); /* a mode the user named is kept */
        if (r->space & SEARCH_MIGRATE) eval_migrations(&c), settle_deferred(&c);
        if (out->best < 0) {
            /* nothing fits: the space again, each plan with every variant that could keep less, so
             * that the smallest footprint reported is the space's, not that of what this budget tried */
            c.least = true;
            for (int i = 0; i < out->n_pts; i++) /* the arenas planned so far */
                if (out->pts[i].placed && (c.least_at < 0 || out->pts[i].footprint < out->pts[c.least_at].footprint)) c.least_at = i;
            eval_space(&c);
        }
        settle(&c, true);
    }
    if (c.cn) chain_net_free(&cn);
    cand_ahead_free(&c);
    free(c.slots), free(c.lev), free(c.defer);
    for (int k = 0; k < 4; k++) free(c.lists[k]);
    if (rc) return search_free(out), -1;
    out->least = c.least_at;
    for (int i = 0; i < out->n_pts && !c.least; i++) /* else the smallest arena planned */
        if (out->pts[i].placed && (out->least < 0 || out->pts[i].footprint < out->pts[out->least].footprint)) out->least = i;
    /* a preset is kept unless the plan found is faster by more than the model can tell apart */
    out->fastest = out->best;
    out->margin = r->margin ? *r->margin : r->dev->model ? timing_margin(r->dev->model) : 0;
    if (out->preset >= 0 && out->best >= 0 && out->pts[out->preset].time_us <= out->pts[out->best].time_us * (1 + out->margin))
        out->best = out->preset;
    out->seconds = now_s() - t0;
    return 0;
}

void search_free(search_result *r)
{
    for (int i = 0; i < r->n_pts; i++) free(r->pts[i].text);
    free(r->pts);
    memset(r, 0, sizeof *r);
}

static const search_point *sort_pts;
static int by_footprint(const void *a, const void *b)
{
    const search_point *x = &sort_pts[*(const int *)a], *y = &sort_pts[*(const int *)b];
    if (x->footprint != y->footprint) return x->footprint < y->footprint ? -1 : 1;
    return (x->time_us > y->time_us) - (x->time_us < y->time_us);
}

int *search_frontier(const search_point *pts, int n, int *count)
{
    int *idx = err_calloc((size_t)n + 1, sizeof(int)), k = 0;
    for (int i = 0; i < n; i++) idx[i] = i;
    sort_pts = pts;
    qsort(idx, (size_t)n, sizeof *idx, by_footprint);
    double fastest = INFINITY;
    for (int i = 0; i < n; i++)
        if (pts[idx[i]].time_us < fastest) fastest = pts[idx[i]].time_us, idx[k++] = idx[i];
    *count = k;
    return idx;
}
