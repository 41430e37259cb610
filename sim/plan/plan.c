/* plan: a plan's text parsed (presets: preset.c; the custom syntax: syntax.c; modifiers and bn=
 * here) and validated against a net. Every rule that can reject a plan lives in this room, so the
 * lowering and the engine may assume a valid plan. */
#include "sim/plan/plan.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/net/kind.h"
#include "sim/plan/preset.h"
#include "sim/plan/syntax.h"

const char *const plan_presets[] = {"layer", "torch", "torch2", "ckpt-sqrt", "ckpt:K", "vdnn-all", "vdnn-conv", "2ps:R", "overl:R",
                                    "2ps-h[:R]", "overl-h[:R]", "authors-2ps", "authors-overl", "authors-2ps-h",
                                    "authors-overl-h", NULL};

static const char *bn_names[] = {"auto", "train", "frozen", "per-band", "train-recompute", "train-offload", "train-rebuild"};
const char *plan_bn_name(plan_bn b) { return bn_names[b]; }

const char *plan_bn_text(const plan *p, char *buf, size_t len)
{
    int at = snprintf(buf, len, "%s", bn_names[p->bn]);
    if (p->bn_pick[0] && at >= 0 && (size_t)at < len) at += snprintf(buf + at, len - (size_t)at, ":%s", p->bn_pick);
    if (p->bn_levels && at >= 0 && (size_t)at < len) at += snprintf(buf + at, len - (size_t)at, ":%d", p->bn_levels);
    if (p->bn_keep_every && at >= 0 && (size_t)at < len) snprintf(buf + at, len - (size_t)at, "/%d", p->bn_keep_every);
    return buf;
}

char plan_bn_level(const plan *p, int q)
{
    bool within = !p->bn_levels || q <= p->bn_levels;
    switch (p->bn) {
    case PLAN_BN_OFFLOAD: return within ? 'o' : 'k';
    case PLAN_BN_REBUILD: return within && !(p->bn_keep_every && q % p->bn_keep_every == 0) ? 'r' : 'k';
    case PLAN_BN_TRAIN: return q >= 1 && q <= (int)strlen(p->bn_pick) ? p->bn_pick[q - 1] : 'k';
    default: return 'k';
    }
}

const char *plan_mode_name(plan_mode m) { return syntax_mode_names[m]; }

/* Cuts layers [first, n-1] into k segments at clean cuts, balancing forward activation values;
 * all but the last become ckpt (the last runs as layer, as torch.utils.checkpoint_sequential). */

bool plan_modified(const plan *p)
{
    bool picks = false;
    for (int i = 0; i < p->n_seg; i++) picks |= p->segs[i].n_pick > 0 || p->segs[i].passes.staged; /* stages: not yet */
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

/* The band geometry of row segment s: forward from its cuts (explicit, or the policy's default),
 * backward the same unless its band count differs (then default cuts for it); OverL in stages
 * from its stages (band.h: band_stages). */
static int seg_geometry(plan_seg *s, const net *n, const band_seg *bs, err *e)
{
    int R = s->fp > s->bp ? s->fp : s->bp, nl = s->last - s->first + 1;
    int *cuts = err_calloc((size_t)R + 1, sizeof(int));
    const plan_passes *pp = &s->passes;
    bool *flags = err_calloc(2 * (size_t)nl, sizeof(bool));
    band_stages st = {pp->fst, pp->bst, flags, flags + nl}, *stages = pp->staged && s->policy == BAND_OVERL ? &st : NULL;
    for (int i = 0; stages && i < nl; i++)
        flags[i] = pp->keep_act[i] && !pp->rebuilt[i], flags[nl + i] = pp->keep_act[i] || pp->keep_grad[i];
    s->band = *bs;
    s->fwd = err_calloc(1, sizeof(band_geom));
    int rc = 0;
    if (s->cuts) memcpy(cuts, s->cuts, ((size_t)s->fp + 1) * sizeof(int));
    else rc = band_cuts_default(n, bs, s->policy, s->fp, cuts, e);
    if (!rc) rc = band_geom_init(s->fwd, n, bs, s->policy, cuts, s->fp, stages, e);
    s->bwd = s->fwd;
    if (!rc && s->bp != s->fp) {
        s->bwd = err_calloc(1, sizeof(band_geom));
        rc = band_cuts_default(n, bs, s->policy, s->bp, cuts, e);
        if (!rc) rc = band_geom_init(s->bwd, n, bs, s->policy, cuts, s->bp, stages, e);
    }
    free(cuts), free(flags);
    return rc;
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
        plan_need(n, s->first, s->last, bwd, extra, NULL, true, need);
        memcpy(ps->bwd_need + (size_t)q * nl, need + a, (size_t)nl * sizeof(bool));
    }
    free(bwd), free(extra), free(need);
}

/* The stages of bn=train (plan_passes): a layer is computed by the first forward pass that needs
 * it and back-propagated by the first backward pass that does; a map one stage makes and a later
 * one reads is kept whole, as is a gradient an earlier backward stage adds to. */
static void passes_stage(plan_passes *ps, const plan_seg *s, const net *n)
{
    int a = s->first, nl = ps->nl;
    ps->staged = true;
    ps->fst = err_calloc((size_t)nl, sizeof(int)), ps->bst = err_calloc((size_t)nl, sizeof(int));
    ps->keep_act = err_calloc((size_t)nl, sizeof(bool)), ps->keep_grad = err_calloc((size_t)nl, sizeof(bool));
    ps->rebuilt = err_calloc((size_t)nl, sizeof(bool)), ps->offloaded = err_calloc((size_t)nl, sizeof(bool));
    for (int i = 0; i < nl; i++) {
        ps->fst[i] = ps->n_fwd + 1, ps->bst[i] = ps->n_bwd + 1;
        for (int q = ps->n_fwd; q >= 1; q--)
            if (ps->fwd_need[(q - 1) * nl + i]) ps->fst[i] = q;
        for (int q = ps->n_bwd; q >= 1; q--)
            if (ps->bwd_set[(q - 1) * nl + i]) ps->bst[i] = q;
    }
    for (int i = 0; i < nl; i++) {
        const net_layer *l = &n->layers[a + i];
        for (int j = 0; j < l->n_in; j++) {
            int p = l->in[j] - a;
            if (p < 0) continue;
            if (ps->fst[i] > ps->fst[p]) ps->keep_act[p] = true;
            if (ps->bst[i] < ps->bst[p]) ps->keep_grad[p] = true;
        }
    }
}

static void passes_free(plan_passes *ps)
{
    free(ps->fwd), free(ps->bwd), free(ps->fwd_need), free(ps->bwd_set), free(ps->bwd_need);
    free(ps->fst), free(ps->bst), free(ps->keep_act), free(ps->keep_grad), free(ps->rebuilt), free(ps->offloaded);
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
                           syntax_mode_names[s->mode], f->name);
        if (s->mode != PLAN_ROWS) continue;
        band_seg bs;
        if (band_seg_init(&bs, n, s->first, s->last, e)) return err_wrap(e, "plan '%s'", where);
        bs.cover = plan_bn_batch(p->bn); /* statistics gathered over the bands need every row */
        int h = n->layers[s->last].h;
        if (s->fp > h || s->bp > h)
            return err_set(e, "plan '%s': %d bands but '%s' has only %d rows at %dx%d input (at most %d bands)", where,
                           s->fp > s->bp ? s->fp : s->bp, n->layers[s->last].name, h, n->layers[0].h, n->layers[0].w, h);
        if (s->policy == BAND_2PS && s->fp != s->bp)
            return err_set(e, "plan '%s': 2PS keeps each forward band's boundaries for its backward, so fp (%d) and bp (%d) "
                              "must be equal; use overl for distinct granularity", where, s->fp, s->bp);
        passes_init(&s->passes, s, n, plan_bn_batch(p->bn) && seg_has_map_stats(s, n));
        if (plan_bn_staged(p->bn) && plan_seg_map_stats(s)) passes_stage(&s->passes, s, n);
        for (int i = 0; s->passes.staged && i < s->passes.nl; i++) { /* a kept map's level: the stage computing it */
            char how = s->passes.keep_act[i] ? plan_bn_level(p, s->passes.fst[i]) : 'k';
            s->passes.rebuilt[i] = how == 'r', s->passes.offloaded[i] = how == 'o';
        }
        if (seg_geometry(s, n, &bs, e)) return err_wrap(e, "plan '%s'", where); /* after the stages it may follow */
    }
    return 0;
}

void plan_need(const net *n, int first, int last, const bool *bwd, const bool *extra, const bool *avail, bool map_stats,
               bool *need)
{
    /* wanted[L - first]: a consumer of L in the range, decided before L (consumers come after their
     * producers), needs it or keeps its input */
    bool *wanted = err_calloc((size_t)(last - first + 2), sizeof(bool));
    for (int L = last; L >= first; L--) {
        const kind_traits *k = kind_of(&n->layers[L]);
        bool rebuilt = k->aux_rebuilt && !(map_stats && k->map_stats), whole = avail && avail[L];
        bool nd = (extra && extra[L]) || ((!bwd || bwd[L]) && ((k->keeps_y && !whole) || rebuilt));
        need[L] = nd || (!whole && wanted[L - first]);
        if (need[L] || ((!bwd || bwd[L]) && k->keeps_x))
            for (int j = 0; j < n->layers[L].n_in; j++)
                if (n->layers[L].in[j] >= first) wanted[n->layers[L].in[j] - first] = true;
    }
    free(wanted);
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
        syntax_trim(m);
        if (!*m) return err_set(e, "an empty modifier (a '+' with nothing after it)");
        if (!strncmp(m, "migrate", 7) && (!m[7] || m[7] == ':')) {
            if (parse_migrate(p, m, e)) return -1;
            continue;
        }
        if (!strcmp(m, "torch") || !strcmp(m, "torch2")) { /* the plan as lrcnn_torch runs it in PyTorch */
            if (p->torch) return err_set(e, "+torch or +torch2 given twice");
            p->torch = m[5] ? PLAN_TORCH_2 : PLAN_TORCH_1;
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

/* Where a plan may hold a space: one, after a ',' or ';' (lists and segments), or before " bn=".
 * Anywhere else ("2ps: 4", "layer  bn=frozen", a tab, a space at either end) it is refused with its
 * column, not read past: a number or name with a space in it is a typo. */
static int check_spaces(const char *text, err *e)
{
    for (size_t i = 0; text[i]; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c != ' ' && !isspace(c) && c >= 0x20) continue;
        if (c != ' ') return err_set(e, "plan '%s': a control character or tab at column %zu", text, i + 1);
        bool after_sep = i > 0 && (text[i - 1] == ',' || text[i - 1] == ';');
        bool before_bn = !strncmp(text + i + 1, "bn=", 3) && i > 0 && text[i - 1] != ' ';
        if (!(after_sep || before_bn) || !text[i + 1] || text[i + 1] == ' ')
            return err_set(e, "plan '%s': a space at column %zu (spaces go only after ',' or ';' and before bn=)", text, i + 1);
    }
    return 0;
}

/* A whole number from 1 to PLAN_MAX_BANDS, or -1. */
static long count_of(const char *s)
{
    char *end;
    long k = strtol(s, &end, 10);
    return *s && !*end && k >= 1 && k <= PLAN_MAX_BANDS ? k : -1;
}

/* bn=MODE[:K][/M] of plan text (mode: what follows "bn=", cut in place) into p. */
static int parse_bn(plan *p, const char *text, char *mode, err *e)
{
    char given[PLAN_BN_TEXT_LEN];
    snprintf(given, sizeof given, "%s", mode); /* for the messages */
    char *every = strchr(mode, '/'); /* train-rebuild:K/M: the count of levels before the stride */
    if (every) *every++ = 0;
    char *levels = strchr(mode, ':');
    if (levels) *levels++ = 0;
    int found = strcmp(mode, "exact") ? -1 : PLAN_BN_TRAIN; /* exact: a synonym of train */
    for (int b = 0; b < (int)(sizeof bn_names / sizeof *bn_names); b++)
        if (!strcmp(mode, bn_names[b])) found = b;
    if (found < 0)
        return err_set(e, "plan '%s': bn=%s is not one of auto train exact train-offload train-rebuild train-recompute frozen "
                          "per-band", text, mode);
    p->bn = (plan_bn)found;
    if (every && p->bn != PLAN_BN_REBUILD)
        return err_set(e, "plan '%s': bn=%s: only bn=train-rebuild keeps one level in M (bn=train-rebuild/M)", text, given);
    if (levels && p->bn == PLAN_BN_TRAIN) { /* train:LETTERS, a choice a level */
        size_t k = strlen(levels), good = strspn(levels, "kor");
        if (!k)
            return err_set(e, "plan '%s': bn=%s: no letters after ':' (bn=train:oork: a letter a level of statistics, k kept, o "
                              "offloaded, r rebuilt)", text, given);
        if (good < k)
            return err_set(e, "plan '%s': bn=%s: '%c' is not a level's choice: k (kept), o (offloaded) or r (rebuilt), a letter "
                              "a level of statistics, as in bn=train:oork", text, given, levels[good]);
        if (k > PLAN_BN_PICKS)
            return err_set(e, "plan '%s': bn=train: %zu letters, at most %d (one a level of statistics)", text, k, PLAN_BN_PICKS);
        memcpy(p->bn_pick, levels, k + 1);
        return 0;
    }
    if (levels && !plan_bn_per_level(p->bn))
        return err_set(e, "plan '%s': bn=%s: only bn=train-offload and bn=train-rebuild take a count of levels "
                          "(bn=train-offload:K), and bn=train letters (bn=train:oork)", text, given);
    if (levels && (p->bn_levels = (int)count_of(levels)) < 0)
        return err_set(e, "plan '%s': bn=%s: K, the levels of statistics %s, is a whole number from 1 to %d (bn=train %s none)",
                       text, given, p->bn == PLAN_BN_OFFLOAD ? "offloaded" : "rebuilt", PLAN_MAX_BANDS,
                       p->bn == PLAN_BN_OFFLOAD ? "offloads" : "rebuilds");
    if (every && ((p->bn_keep_every = (int)count_of(every)) < 2))
        return err_set(e, "plan '%s': bn=%s: M, one level kept in every M rebuilt, is a whole number from 2 to %d (bn=train keeps "
                          "every level)", text, given, PLAN_MAX_BANDS);
    return 0;
}

int plan_parse(plan *p, const net *n, const char *text, err *e)
{
    memset(p, 0, sizeof *p);
    if (strlen(text) >= sizeof p->text) return err_set(e, "plan text too long (%zu chars)", strlen(text));
    if (check_spaces(text, e)) return -1;
    snprintf(p->text, sizeof p->text, "%s", text);
    char buf[PLAN_TEXT_LEN]; /* all of it: the planner's plans can be long */
    snprintf(buf, sizeof buf, "%s", text);
    char *bn = strstr(buf, " bn=");
    if (bn) {
        *bn = 0;
        if (parse_bn(p, text, bn + 4, e)) return -1;
    }
    char *plus = strchr(buf, '+');
    if (plus) {
        *plus = 0;
        if (parse_mods(p, plus + 1, e)) return err_wrap(e, "plan '%s'", text);
    }
    syntax_trim(buf);
    if (p->torch && (!strcmp(buf, "torch") || !strcmp(buf, "torch2")))
        return err_set(e, "plan '%s': +torch or +torch2 given to a torch preset (which is layer+torch)", text);
    int rc = strchr(buf, '@') ? syntax_custom(p, n, buf, e) : preset_parse(p, n, buf, e);
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
    if (p->torch && p->n_seg == 1 && p->segs[0].mode == PLAN_LAYER) return "torch";
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

/* Segment s over layers [a, b] of it, in the custom syntax, appended at buf + at; the new length. */
static size_t describe_seg(const plan_seg *s, const net *n, int a, int b, char *buf, size_t at, size_t len)
{
    if (at >= len) return at;
    if (s->mode == PLAN_ROWS)
        at += (size_t)snprintf(buf + at, len - at, "rows(%s,fp=%d,bp=%d)", band_policy_name(s->policy), s->fp, s->bp);
    else if (s->mode == PLAN_OFFLOAD && s->offload != PLAN_OFFLOAD_PICK)
        at += (size_t)snprintf(buf + at, len - at, "offload(%s)", s->offload == PLAN_OFFLOAD_ALL ? "all" : "conv");
    else if (s->mode == PLAN_OFFLOAD) /* every pick with its timing */
        for (int k = 0; k < s->n_pick && at < len; k++)
            at += (size_t)snprintf(buf + at, len - at, "%s%s:%d:%d%s", k ? ", " : "offload(", n->layers[s->picks[k].layer].name,
                                   s->picks[k].free, s->picks[k].fetch, k + 1 == s->n_pick ? ")" : "");
    else
        at += (size_t)snprintf(buf + at, len - at, "%s", syntax_mode_names[s->mode]);
    if (at < len) at += (size_t)snprintf(buf + at, len - at, "@%s..%s", n->layers[a].name, n->layers[b].name);
    return at;
}

void plan_describe(const plan *p, const net *n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_seg && at < len; i++) {
        if (i) at += (size_t)snprintf(buf + at, len - at, "; ");
        at = describe_seg(&p->segs[i], n, p->segs[i].first, p->segs[i].last, buf, at, len);
    }
    for (int i = 0; i < p->n_mod && at < len; i++) {
        char m[64];
        enc_mod_describe(&p->mods[i], m, sizeof m);
        at += (size_t)snprintf(buf + at, len - at, " +%s", m);
    }
    if (p->migrate && at < len) at += describe_migrate(p->migrate, buf + at, len - at);
    if (p->torch && at < len) at += (size_t)snprintf(buf + at, len - at, " +%s", p->torch == PLAN_TORCH_2 ? "torch2" : "torch");
    char bn[PLAN_BN_TEXT_LEN];
    if (at < len) snprintf(buf + at, len - at, " bn=%s", plan_bn_text(p, bn, sizeof bn));
}

void plan_describe_range(const plan *p, const net *n, int a, int b, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < p->n_seg && at < len; i++) {
        const plan_seg *s = &p->segs[i];
        int lo = s->first > a ? s->first : a, hi = s->last < b ? s->last : b;
        if (lo > hi) continue;
        if (at) at += (size_t)snprintf(buf + at, len - at, "; ");
        at = describe_seg(s, n, lo, hi, buf, at, len);
    }
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
                if (syntax_count(colon + 1, &lo) || syntax_count(dots + 2, &hi) || hi < lo) {
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
