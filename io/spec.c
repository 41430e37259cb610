/* spec: parser for experiment specs. Lists are comma-separated; integer lists accept ranges
 * "A..B" and doubling ranges "A..B*2" (1, 2, 4, ... B). Plans keep their own syntax (commas inside
 * parentheses belong to the plan) and are expanded by plan_list_expand. */
#include "io/spec.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io/units.h"
#include "sim/plan.h"

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int parse_count(const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v || *end || x < 1 || x > 1 << 20) return -1;
    *out = (int)x;
    return 0;
}

static int int_list(const char *where, const char *key, char *v, int *out, int *n, int lo, err *e)
{
    *n = 0;
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
            if (*end == '*') mult = strtol(end + 1, &end, 10);
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

int spec_load(spec *s, const char *path, err *e)
{
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->device, sizeof s->device, "cpu");
    snprintf(s->optimizers[0], sizeof s->optimizers[0], "adam");
    s->n_optimizers = 1, s->n_batches = 1, s->batches[0] = 8, s->n_images = 1;
    FILE *f = fopen(path, "r");
    if (!f) return err_set(e, "%s: cannot open spec (%s)", path, strerror(errno));
    char line[4096], where[300];
    int lineno = 0, rc = 0;
    bool have_nets = false;
    char plans[4096] = "";
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        snprintf(where, sizeof where, "%s:%d", path, lineno);
        if (!strchr(line, '\n') && !feof(f)) { rc = err_set(e, "%s: line too long", where); break; }
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        char *t = trim(line);
        if (!*t) continue;
        char *eq = strchr(t, '=');
        if (!eq) { rc = err_set(e, "%s: expected 'key = value'", where); break; }
        *eq = 0;
        char *key = trim(t), *val = trim(eq + 1);
        if (!*val) { rc = err_set(e, "%s: '%s' has no value", where, key); break; }
        if (!strcmp(key, "name")) snprintf(s->name, sizeof s->name, "%s", val);
        else if (!strcmp(key, "output")) snprintf(s->output, sizeof s->output, "%s", val);
        else if (!strcmp(key, "device")) snprintf(s->device, sizeof s->device, "%s", val);
        else if (!strcmp(key, "bn")) snprintf(s->bn, sizeof s->bn, "%s", val);
        else if (!strcmp(key, "plans")) snprintf(plans, sizeof plans, "%s", val);
        else if (!strcmp(key, "measure")) {
            if (strcmp(val, "off") && (parse_count(val, &s->measure) || s->measure > 100))
                rc = err_set(e, "%s: measure = %s: expected off or an iteration count 1..100", where, val);
        } else if (!strcmp(key, "timeline")) {
            if (strcmp(val, "on") && strcmp(val, "off")) rc = err_set(e, "%s: timeline = %s: expected on or off", where, val);
            s->timeline = !strcmp(val, "on");
        } else if (!strcmp(key, "search")) {
            if (strcmp(val, "batch") && strcmp(val, "image")) rc = err_set(e, "%s: search = %s: expected batch or image", where, val);
            else snprintf(s->search, sizeof s->search, "%s", val);
        } else if (!strcmp(key, "budgets")) {
            s->n_budgets = 0;
            char *save = NULL;
            for (char *x = strtok_r(val, ",", &save); x && !rc; x = strtok_r(NULL, ",", &save)) {
                x = trim(x);
                if (s->n_budgets == SPEC_MAX) rc = err_set(e, "%s: too many budgets", where);
                else if (units_parse_bytes(x, &s->budgets[s->n_budgets])) rc = err_set(e, "%s: budget '%s': expected bytes like 16GiB", where, x);
                else s->n_budgets++;
            }
        }
        else if (!strcmp(key, "batch")) rc = int_list(where, key, val, s->batches, &s->n_batches, 1, e);
        else if (!strcmp(key, "image")) {
            if (!strcmp(val, "native")) s->n_images = 1, s->images[0] = 0;
            else rc = int_list(where, key, val, s->images, &s->n_images, 1, e);
        } else if (!strcmp(key, "nets")) {
            s->n_nets = 0, have_nets = true;
            char *save = NULL;
            for (char *x = strtok_r(val, ",", &save); x && !rc; x = strtok_r(NULL, ",", &save)) {
                if (s->n_nets == SPEC_MAX) rc = err_set(e, "%s: too many nets", where);
                else snprintf(s->nets[s->n_nets++], sizeof s->nets[0], "%s", trim(x));
            }
        } else if (!strcmp(key, "optimizer")) {
            s->n_optimizers = 0;
            char *save = NULL;
            for (char *x = strtok_r(val, ",", &save); x && !rc; x = strtok_r(NULL, ",", &save)) {
                x = trim(x);
                if ((strcmp(x, "sgd") && strcmp(x, "adam")) || s->n_optimizers == 2)
                    rc = err_set(e, "%s: optimizer '%s': expected sgd and/or adam", where, x);
                else snprintf(s->optimizers[s->n_optimizers++], sizeof s->optimizers[0], "%s", x);
            }
        } else {
            rc = err_set(e, "%s: unknown key '%s' (keys: name nets batch image plans optimizer bn device output search budgets timeline measure)",
                         where, key);
        }
    }
    fclose(f);
    if (!rc && !have_nets) rc = err_set(e, "%s: no 'nets =' line", path);
    if (!rc && !plans[0]) rc = err_set(e, "%s: no 'plans =' line", path);
    if (!rc && plan_list_expand(plans, &s->plans, &s->n_plans, e)) rc = err_wrap(e, "%s: plans", path);
    if (!rc && s->search[0] && !s->n_budgets) rc = err_set(e, "%s: search = %s needs 'budgets = ...'", path, s->search);
    if (!rc && !s->search[0] && s->n_budgets) rc = err_set(e, "%s: budgets without 'search = batch|image'", path);
    if (!rc && s->search[0] && s->measure) rc = err_set(e, "%s: measure applies to grids, not to searches", path);
    if (!rc && !s->name[0]) {
        const char *base = strrchr(path, '/');
        snprintf(s->name, sizeof s->name, "%.*s", (int)strcspn(base ? base + 1 : path, "."), base ? base + 1 : path);
    }
    if (rc) spec_free(s);
    return rc;
}

void spec_free(spec *s)
{
    plan_list_free(s->plans, s->n_plans);
    s->plans = NULL;
    s->n_plans = 0;
}

long spec_runs(const spec *s)
{
    long grid = (long)s->n_nets * s->n_plans * s->n_optimizers;
    if (!s->search[0]) return grid * s->n_batches * s->n_images;
    return grid * s->n_budgets * (!strcmp(s->search, "batch") ? s->n_images : s->n_batches);
}
