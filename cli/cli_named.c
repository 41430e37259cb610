/* cli_named: plan items as the commands take them (cli.h: cli_plan_text, cli_plan_parse,
 * cli_plan_check), and the plans a search names among them. `ckpt-opt[:B]` is optimal
 * checkpointing for budget B: what `lrcnn plan --space ckpt --budget B` answers — the chain's
 * dynamic program (Rotor's, over the net's clean cuts) and the checkpoint presets, every candidate
 * lowered and replayed — so the plan found fits B (its footprint: what its arena reserves) and is
 * the fastest of them by the device's time model. B is bytes (`1.5GiB`), a share of `layer`'s
 * footprint (`60%`), or another plan, whose footprint it is (`ckpt-opt:ckpt-sqrt`: optimal
 * checkpointing at sqrt(n)'s memory); without B, the smallest footprint the space reaches. Modifiers and bn= apply
 * to the plan found (the budget to it without them). Every other plan passes through unchanged. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/units.h"
#include "sim/planner/search.h"

#define NAMED "ckpt-opt"

/* text = BASE[+MODS][ bn=X]: base's length, and whether it names a search. */
static bool is_named(const char *text, size_t *base)
{
    size_t k = strlen(NAMED);
    *base = strcspn(text, "+ ");
    return !strncmp(text, NAMED, k) && (*base == k || text[k] == ':');
}

/* B of ckpt-opt:B (text's base its first `base` characters): bytes; or a share in percent of the
 * footprint of plan `ref` (64 bytes: `layer`, or the plan B names, at 100%); all 0 when absent. */
static int parse_budget(const char *text, size_t base, int64_t *bytes, double *share, char *ref, err *e)
{
    size_t k = strlen(NAMED);
    *bytes = 0, *share = 0;
    snprintf(ref, 64, "layer");
    if (base == k) return 0;
    char arg[64], *end;
    snprintf(arg, sizeof arg, "%.*s", (int)(base - k - 1), text + k + 1);
    size_t len = strlen(arg);
    if (len && arg[len - 1] == '%') {
        arg[len - 1] = 0;
        *share = strtod(arg, &end);
        if (end != arg && !*end && *share > 0 && *share <= 1000) return 0;
    } else if (len && !units_parse_bytes(arg, bytes) && *bytes > 0) {
        return 0;
    } else if (len && strncmp(arg, NAMED, k)) { /* not bytes: a plan (unknown, it says so) */
        snprintf(ref, 64, "%s", arg), *share = 100; /* another plan's footprint */
        return 0;
    }
    return err_set(e, "plan '%s': %s:B takes bytes (1.5GiB), a share of layer's footprint above 0 and at most 1000%%, or "
                      "another plan (ckpt-opt:ckpt-sqrt)", text, NAMED);
}

/* The budget of a named plan in bytes: B, or its share of a plan's footprint; 0 without B. */
static int named_budget(const net *n, const char *text, size_t base, const char *bn, const sched_cfg *cfg,
                        const sim_device *d, int64_t *budget, err *e)
{
    double share;
    char ref[64], full[160];
    if (parse_budget(text, base, budget, &share, ref, e)) return -1;
    if (!share) return 0;
    snprintf(full, sizeof full, "%s%s%s", ref, bn ? " bn=" : "", bn ? bn : "");
    sim_result r;
    plan p;
    if (plan_parse(&p, n, full, e)) return err_wrap(e, "plan '%s'", text);
    int rc = sim_run(n, &p, cfg, d, &r, NULL, e);
    plan_free(&p);
    if (rc) return -1;
    *budget = (int64_t)floor((double)(r.arena.size + r.arena.apart) * share / 100);
    return 0;
}

/* The plan text a named plan stands for, into out (PLAN_TEXT_LEN + 64 bytes): 0, or 1 when no plan
 * of its space fits its budget, -1 on bad text (e says which). Any other text is copied. */
static int resolve(const net *n, const char *text, const sched_cfg *cfg, const sim_device *d, char *out, size_t len, err *e)
{
    size_t base;
    if (!is_named(text, &base)) return snprintf(out, len, "%s", text), 0;
    const char *bn = strstr(text, " bn=");
    char mods[PLAN_TEXT_LEN] = "";
    size_t m = (bn ? (size_t)(bn - text) : strlen(text)) - base;
    if (m >= sizeof mods) return err_set(e, "plan '%s': too long", text);
    memcpy(mods, text + base, m), mods[m] = 0;
    int64_t budget;
    if (named_budget(n, text, base, bn ? bn + 4 : NULL, cfg, d, &budget, e)) return -1;
    search_req rq = {.n = n, .cfg = *cfg, .dev = d, .budget = budget, .space = SEARCH_CKPT, .bn = bn ? bn + 4 : NULL};
    search_result r;
    if (search_run(&rq, &r, e)) return err_wrap(e, "plan '%s'", text);
    int i = budget ? r.best : r.least, rc = 0;
    if (i < 0) {
        char b[32], f[32] = "none";
        rc = 1;
        units_fmt_bytes(budget, b, sizeof b);
        if (r.least >= 0) units_fmt_bytes(r.pts[r.least].footprint, f, sizeof f);
        if (!strcmp(b, f)) /* too close to tell apart rounded */
            snprintf(b, sizeof b, "%lld B", (long long)budget), snprintf(f, sizeof f, "%lld B", (long long)r.pts[r.least].footprint);
        err_set(e, "plan '%s': no checkpointing plan fits %s on %s at batch %d; the smallest footprint found is %s (%s)", text,
                b, n->name, cfg->batch, f, NAMED);
    } else { /* the answer's text, its own bn= (the one asked for) after the modifiers */
        const char *found = r.pts[i].text, *fbn = strstr(found, " bn=");
        int flen = fbn ? (int)(fbn - found) : (int)strlen(found);
        snprintf(out, len, "%.*s%s%s", flen, found, mods, bn ? bn : "");
    }
    search_free(&r);
    return rc;
}

void cli_plan_text(const char *item, const char *bn, char *buf, size_t len)
{
    bool add = bn && bn[0] && !strstr(item, " bn=");
    snprintf(buf, len, "%s%s%s", item, add ? " bn=" : "", add ? bn : "");
}

int cli_plan_parse(plan *p, const net *n, const char *item, const char *bn, const sched_cfg *cfg, const sim_device *d, err *e)
{
    char text[PLAN_TEXT_LEN + 64], found[PLAN_TEXT_LEN + 64];
    cli_plan_text(item, bn, text, sizeof text);
    int rc = resolve(n, text, cfg, d, found, sizeof found, e);
    if (rc) return rc;
    if (plan_parse(p, n, found, e)) return -1;
    if (strcmp(found, text)) { /* named as written; plan_describe says what was found */
        snprintf(p->text, sizeof p->text, "%s", text);
        snprintf(p->preset, sizeof p->preset, "%s", NAMED), p->preset_count = 0;
    }
    return 0;
}

bool cli_plan_named(const char *item)
{
    size_t base;
    return is_named(item, &base);
}

int cli_plan_check(const net *n, const char *item, const char *bn, err *e)
{
    char text[PLAN_TEXT_LEN + 64], sub[PLAN_TEXT_LEN + 64];
    cli_plan_text(item, bn, text, sizeof text);
    size_t base;
    bool named = is_named(text, &base);
    if (named) { /* its budget's syntax, and its modifiers and bn= on `layer` */
        int64_t bytes;
        double share;
        char ref[64];
        if (parse_budget(text, base, &bytes, &share, ref, e)) return -1;
        plan r;
        if (plan_parse(&r, n, ref, e)) return err_wrap(e, "plan '%s'", text);
        plan_free(&r);
        snprintf(sub, sizeof sub, "layer%s", text + base);
    }
    plan p;
    if (plan_parse(&p, n, named ? sub : text, e)) {
        if (!named) return -1;
        snprintf(sub, sizeof sub, "%s", e->msg);
        return err_set(e, "plan '%s': %s", text, sub);
    }
    plan_free(&p);
    return 0;
}
