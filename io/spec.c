/* spec: parser for experiment specs (format: experiments/README.md). Lists are comma-separated;
 * integer lists accept ranges "A..B" and doubling ranges "A..B*2" (1, 2, 4, ... B). Plans keep
 * their own syntax (commas inside parentheses belong to the plan) and are expanded by
 * plan_list_expand. Every error names the file and, where one key is at fault, its line. */
#include "io/spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/units.h"
#include "sim/plan/plan.h"

/* The keys, in the order the unknown-key message lists them. */
enum {
    K_NAME, K_NETS, K_BATCH, K_IMAGE, K_PLANS, K_OPTIMIZER, K_BN, K_DEVICE, K_OUTPUT, K_RUN, K_MEASURE, K_SEED,
    K_SEARCH, K_BUDGETS, K_TIMELINE, K_FIGURES, K_REPRODUCE, K_CALIBRATE, K_PROFILE, K_BACKEND, K_N
};
static const char *key_names[K_N] = {"name", "nets", "batch", "image", "plans", "optimizer", "bn", "device", "output",
                                     "run", "measure", "seed", "search", "budgets", "timeline", "figures", "reproduce",
                                     "calibrate", "profile", "backend"};
static const char *run_names[] = {"sim", "validate", "train"};

/* The parse in progress: where each key was set (its line; 0 = not set) and the plan list text. */
typedef struct {
    int line[K_N];
    char plans[4096];
} parse_state;

const char *spec_run_name(spec_run r) { return run_names[r]; }

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int parse_count(const char *v, int *out, int hi)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 1 || x > hi) return -1;
    *out = (int)x;
    return 0;
}

/* Whether a comma-separated list has an empty item: two commas, or one at either end (strtok
 * would skip it silently). */
static bool empty_item(const char *v)
{
    for (const char *c = v;; c++) {
        const char *next = strchr(c, ',');
        size_t len = next ? (size_t)(next - c) : strlen(c);
        if (strspn(c, " \t") >= len) return true;
        if (!next) return false;
        c = next;
    }
}

static int int_list(const char *where, const char *key, char *v, int *out, int *n, int lo, err *e)
{
    *n = 0;
    if (empty_item(v)) return err_set(e, "%s: %s: an empty item in the list '%s'", where, key, v);
    char *save = NULL;
    for (char *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        t = trim(t);
        long a, b, mult = 0;
        char *end, *dots = strstr(t, "..");
        a = strtol(t, &end, 10);
        if (end == t || (dots ? end != dots : *end != 0)) return err_set(e, "%s: %s: '%s' is not an integer or range", where, key, t);
        b = a;
        if (dots) {
            b = strtol(dots + 2, &end, 10);
            if (end == dots + 2) return err_set(e, "%s: %s: bad range '%s'", where, key, t);
            if (*end == '*') {
                char *k = end + 1;
                mult = strtol(k, &end, 10);
                if (end == k || mult < 2) return err_set(e, "%s: %s: bad range '%s' (A..B*K doubles with K >= 2)", where, key, t);
            }
            if (*end || b < a || (mult && mult < 2)) return err_set(e, "%s: %s: bad range '%s' (A..B or A..B*K)", where, key, t);
        }
        if (a < lo || b > (1 << 20)) return err_set(e, "%s: %s: %ld is out of range (%d..%d)", where, key, a < lo ? a : b, lo, 1 << 20);
        for (long x = a; x <= b; x = mult ? x * mult : x + 1) {
            if (*n == SPEC_MAX) return err_set(e, "%s: %s: more than %d values", where, key, SPEC_MAX);
            out[(*n)++] = (int)x;
            if (mult && x == 0) break;
        }
    }
    if (!*n) return err_set(e, "%s: %s: empty list", where, key);
    return 0;
}

/* image = S, A..B, A..B*K (square sizes) or HxW items, comma-separated. */
static int image_list(const char *where, char *v, spec *s, err *e)
{
    s->n_images = 0;
    if (empty_item(v)) return err_set(e, "%s: image: an empty item in the list '%s'", where, v);
    char *save = NULL;
    for (char *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        t = trim(t);
        char *x = strchr(t, 'x'), *end;
        if (x && !strstr(t, "..")) {
            long h = strtol(t, &end, 10), w = end == x ? strtol(x + 1, &end, 10) : 0;
            if (end == t || *end || h < 1 || w < 1 || h > (1 << 16) || w > (1 << 16))
                return err_set(e, "%s: image: '%s' is not HxW with sides 1..%d", where, t, 1 << 16);
            if (s->n_images == SPEC_MAX) return err_set(e, "%s: image: more than %d values", where, SPEC_MAX);
            s->images[s->n_images] = (int)h, s->images_w[s->n_images++] = (int)w;
            continue;
        }
        int sq[SPEC_MAX], n;
        if (int_list(where, "image", t, sq, &n, 1, e)) return -1;
        for (int k = 0; k < n; k++) {
            if (s->n_images == SPEC_MAX) return err_set(e, "%s: image: more than %d values", where, SPEC_MAX);
            s->images[s->n_images] = sq[k], s->images_w[s->n_images++] = 0;
        }
    }
    if (!s->n_images) return err_set(e, "%s: image: empty list", where);
    return 0;
}

static int on_off(const char *where, const char *key, const char *val, bool *out, err *e)
{
    if (strcmp(val, "on") && strcmp(val, "off")) return err_set(e, "%s: %s = %s: expected on or off", where, key, val);
    *out = !strcmp(val, "on");
    return 0;
}

/* A figure is a script plots/<name>.py of this checkout; names are plain so they can go on a
 * command line unquoted. */
static int figure_list(spec *s, const char *where, char *val, err *e)
{
    s->n_figures = 0;
    if (empty_item(val)) return err_set(e, "%s: figures: an empty item in the list '%s'", where, val);
    char *save = NULL;
    for (char *x = strtok_r(val, ",", &save); x; x = strtok_r(NULL, ",", &save)) {
        x = trim(x);
        char script[512];
        if (s->n_figures == SPEC_FIGURES) return err_set(e, "%s: more than %d figures", where, SPEC_FIGURES);
        if (!*x || strlen(x) >= sizeof s->figures[0] || strspn(x, "abcdefghijklmnopqrstuvwxyz0123456789_-") != strlen(x))
            return err_set(e, "%s: figure '%s': expected the name of a plots/NAME.py (a-z, 0-9, _ and -)", where, x);
        snprintf(script, sizeof script, "%s/plots/%s.py", LRCNN_SOURCE_DIR, x);
        if (access(script, R_OK)) return err_set(e, "%s: figure '%s': there is no plots/%s.py", where, x, x);
        snprintf(s->figures[s->n_figures++], sizeof s->figures[0], "%s", x);
    }
    if (!s->n_figures) return err_set(e, "%s: figures: empty list", where);
    return 0;
}

static int names_list(char (*out)[64], int *n, const char *where, char *val, err *e)
{
    *n = 0;
    if (empty_item(val)) return err_set(e, "%s: nets: an empty name in the list '%s'", where, val);
    char *save = NULL;
    for (char *x = strtok_r(val, ",", &save); x; x = strtok_r(NULL, ",", &save)) {
        if (*n == SPEC_MAX) return err_set(e, "%s: too many nets", where);
        if (!*trim(x)) return err_set(e, "%s: nets: an empty name in the list", where);
        snprintf(out[(*n)++], sizeof out[0], "%s", trim(x));
    }
    if (!*n) return err_set(e, "%s: nets: empty list", where);
    return 0;
}

/* A text value into dst (size bytes), refused when it does not fit rather than cut short. */
static int set_text(char *dst, size_t size, const char *where, int k, const char *val, err *e)
{
    if (strlen(val) >= size)
        return err_set(e, "%s: %s = %s: longer than the %zu characters it may have", where, key_names[k], val, size - 1);
    memcpy(dst, val, strlen(val) + 1);
    return 0;
}

/* One "key = value" line into s. */
static int parse_key(spec *s, parse_state *ps, int k, char *val, const char *where, err *e)
{
    switch (k) {
    case K_NAME: return set_text(s->name, sizeof s->name, where, k, val, e);
    case K_OUTPUT: return set_text(s->output, sizeof s->output, where, k, val, e);
    case K_CALIBRATE: return set_text(s->calibrate, sizeof s->calibrate, where, k, val, e);
    case K_PROFILE: return set_text(s->profile, sizeof s->profile, where, k, val, e);
    case K_DEVICE: return set_text(s->device, sizeof s->device, where, k, val, e);
    case K_BACKEND:
        if (strcmp(val, "cpu") && strcmp(val, "cuda")) return err_set(e, "%s: backend = %s: expected cpu or cuda", where, val);
        snprintf(s->backend, sizeof s->backend, "%s", val);
        return 0;
    case K_BN: return set_text(s->bn, sizeof s->bn, where, k, val, e);
    case K_PLANS: return set_text(ps->plans, sizeof ps->plans, where, k, val, e);
    case K_NETS: return names_list(s->nets, &s->n_nets, where, val, e);
    case K_BATCH: return int_list(where, "batch", val, s->batches, &s->n_batches, 1, e);
    case K_IMAGE:
        if (!strcmp(val, "native")) return s->n_images = 1, s->images[0] = s->images_w[0] = 0, 0;
        return image_list(where, val, s, e);
    case K_RUN:
        for (int r = 0; r < 3; r++)
            if (!strcmp(val, run_names[r])) return s->run = (spec_run)r, 0;
        return err_set(e, "%s: run = %s: expected sim, validate or train", where, val);
    case K_MEASURE:
        if (!strcmp(val, "off")) return s->measure = 0, 0;
        if (parse_count(val, &s->measure, 1000000))
            return err_set(e, "%s: measure = %s: expected off or an iteration count 1..1000000", where, val);
        return 0;
    case K_SEED: {
        char *end;
        errno = 0;
        s->seed = strtoll(val, &end, 10);
        if (errno || end == val || *end || s->seed < 0) return err_set(e, "%s: seed = %s: expected a non-negative integer", where, val);
        return 0;
    }
    case K_TIMELINE: return on_off(where, "timeline", val, &s->timeline, e);
    case K_REPRODUCE: return on_off(where, "reproduce", val, &s->reproduce, e);
    case K_FIGURES: return figure_list(s, where, val, e);
    case K_SEARCH:
        if (strcmp(val, "batch") && strcmp(val, "image")) return err_set(e, "%s: search = %s: expected batch or image", where, val);
        snprintf(s->search, sizeof s->search, "%s", val);
        return 0;
    case K_BUDGETS: {
        s->n_budgets = 0;
        if (empty_item(val)) return err_set(e, "%s: budgets: an empty item in the list '%s'", where, val);
        char *save = NULL;
        for (char *x = strtok_r(val, ",", &save); x; x = strtok_r(NULL, ",", &save)) {
            x = trim(x);
            if (s->n_budgets == SPEC_MAX) return err_set(e, "%s: too many budgets", where);
            if (units_parse_bytes(x, &s->budgets[s->n_budgets])) return err_set(e, "%s: budget '%s': expected bytes like 16GiB (at most 1 EiB)", where, x);
            s->n_budgets++;
        }
        return 0;
    }
    case K_OPTIMIZER: {
        s->n_optimizers = 0;
        if (empty_item(val)) return err_set(e, "%s: optimizer: an empty item in the list '%s'", where, val);
        char *save = NULL;
        for (char *x = strtok_r(val, ",", &save); x; x = strtok_r(NULL, ",", &save)) {
            x = trim(x);
            if ((strcmp(x, "sgd") && strcmp(x, "adam")) || s->n_optimizers == 2)
                return err_set(e, "%s: optimizer '%s': expected sgd and/or adam", where, x);
            snprintf(s->optimizers[s->n_optimizers++], sizeof s->optimizers[0], "%s", x);
        }
        return 0;
    }
    }
    return 0;
}

/* What no single line can say: keys that need or exclude each other. Each error cites the line of
 * the key that does not fit. */
static int check_combinations(spec *s, const parse_state *ps, err *e)
{
    const char *p = s->path;
    const int *at = ps->line;
    if (!at[K_NETS]) return err_set(e, "%s: no 'nets =' line", p);
    if (!at[K_PLANS]) return err_set(e, "%s: no 'plans =' line", p);
    if (s->search[0] && !s->n_budgets) return err_set(e, "%s:%d: search = %s needs 'budgets = ...'", p, at[K_SEARCH], s->search);
    if (!s->search[0] && s->n_budgets) return err_set(e, "%s:%d: budgets without 'search = batch|image'", p, at[K_BUDGETS]);
    if (s->run != SPEC_SIM && s->search[0])
        return err_set(e, "%s:%d: search applies to run = sim, not run = %s", p, at[K_SEARCH], run_names[s->run]);
    if (s->run != SPEC_SIM && s->timeline)
        return err_set(e, "%s:%d: timeline = on applies to run = sim (train runs record their measured timeline)", p,
                       at[K_TIMELINE]);
    if (s->run != SPEC_SIM && strcmp(s->device, "cpu"))
        return err_set(e, "%s:%d: device = %s: run = %s times its plans on the engine (device applies to run = sim)", p, at[K_DEVICE],
                       s->device, run_names[s->run]);
    if (s->search[0] && s->measure) return err_set(e, "%s:%d: measure applies to grids, not to searches", p, at[K_MEASURE]);
    if (s->run == SPEC_SIM && !strcmp(s->backend, "cuda"))
        return err_set(e, "%s:%d: backend = cuda applies to run = validate or train (run = sim measures on the CPU engine)", p,
                       at[K_BACKEND]);
    if (s->run != SPEC_SIM && at[K_MEASURE] && !s->measure)
        return err_set(e, "%s:%d: run = %s needs an iteration count (measure = K)", p, at[K_MEASURE], run_names[s->run]);
    return 0;
}

/* Reads the file line by line into s and ps; returns on the first error. */
static int parse_lines(spec *s, parse_state *ps, FILE *f, err *e)
{
    char line[4096], where[300];
    for (int lineno = 1; fgets(line, sizeof line, f); lineno++) {
        snprintf(where, sizeof where, "%s:%d", s->path, lineno);
        if (!strchr(line, '\n') && !feof(f)) return err_set(e, "%s: line too long", where);
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *t = trim(line);
        if (!*t) continue;
        char *eq = strchr(t, '=');
        if (!eq) return err_set(e, "%s: expected 'key = value'", where);
        *eq = 0;
        char *key = trim(t), *val = trim(eq + 1);
        int k = 0;
        while (k < K_N && strcmp(key, key_names[k])) k++;
        if (k == K_N) {
            char keys[256] = "";
            for (int i = 0; i < K_N; i++) snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? " " : "", key_names[i]);
            return err_set(e, "%s: unknown key '%s' (keys: %s)", where, key, keys);
        }
        if (!*val) return err_set(e, "%s: '%s' has no value", where, key);
        if (ps->line[k]) return err_set(e, "%s: '%s' is already set on line %d", where, key, ps->line[k]);
        ps->line[k] = lineno;
        if (parse_key(s, ps, k, val, where, e)) return -1;
    }
    return 0;
}

int spec_load(spec *s, const char *path, err *e)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        memset(s, 0, sizeof *s);
        snprintf(s->path, sizeof s->path, "%s", path);
        return err_set(e, "%s: cannot open spec (%s)", path, strerror(errno));
    }
    int rc = spec_read(s, f, path, e);
    fclose(f);
    return rc;
}

int spec_read(spec *s, FILE *f, const char *path, err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->device, sizeof s->device, "cpu");
    snprintf(s->backend, sizeof s->backend, "cpu");
    snprintf(s->optimizers[0], sizeof s->optimizers[0], "sgd");
    s->n_optimizers = 1, s->n_batches = 1, s->batches[0] = 8, s->n_images = 1, s->seed = 1, s->reproduce = true;
    parse_state *ps = err_calloc(1, sizeof *ps);
    int rc = parse_lines(s, ps, f, e);
    if (!rc) rc = check_combinations(s, ps, e);
    s->plans_line = ps->line[K_PLANS];
    if (!rc && plan_list_expand(ps->plans, &s->plans, &s->n_plans, e))
        rc = err_wrap(e, "%s:%d: plans", path, ps->line[K_PLANS]);
    long long runs = rc ? 0 : spec_runs(s);
    if (runs > SPEC_MAX_RUNS)
        rc = err_set(e, "%s: %lld runs (nets x images x batches x optimizers x plans%s), more than %d: split the spec", path,
                     runs, s->search[0] ? " x budgets" : "", SPEC_MAX_RUNS);
    /* the engine runs' iteration counts default to their commands' (lrcnn validate, lrcnn train) */
    if (!rc && !ps->line[K_MEASURE]) s->measure = s->run == SPEC_VALIDATE ? SPEC_VALIDATE_ITERS : s->run == SPEC_TRAIN ? SPEC_TRAIN_ITERS : 0;
    if (!rc && !s->name[0]) {
        const char *base = strrchr(path, '/');
        snprintf(s->name, sizeof s->name, "%.*s", (int)strcspn(base ? base + 1 : path, "."), base ? base + 1 : path);
    }
    free(ps);
    if (rc) spec_free(s);
    return rc;
}

void spec_free(spec *s)
{
    plan_list_free(s->plans, s->n_plans);
    s->plans = NULL;
    s->n_plans = 0;
}

long long spec_runs(const spec *s)
{
    long long plans = s->n_plans;
    if (s->run == SPEC_VALIDATE) {
        bool has_layer = false;
        for (int p = 0; p < s->n_plans; p++) has_layer |= !strcmp(s->plans[p], "layer");
        plans += !has_layer;
    }
    long long grid = (long long)s->n_nets * plans * s->n_optimizers;
    if (!s->search[0]) return grid * s->n_batches * s->n_images;
    return grid * s->n_budgets * (!strcmp(s->search, "batch") ? s->n_images : s->n_batches);
}
