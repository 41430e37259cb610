/* cli: see cli.h. */
#include "cli/cli.h"
#include "sim/net/load.h"

#include "engine/threads.h"
#include "io/profile.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "io/calib.h"

/* Length of the valid UTF-8 sequence of a printable character at s (0: none). */
static int utf8_len(const unsigned char *s)
{
    int n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 1) return s[0] >= 0x20 && s[0] != 0x7F;
    if (n == 2 && s[0] < 0xC2) return 0; /* overlong */
    for (int k = 1; k < n; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return n;
}

void cli_put_line(FILE *f, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        int n = utf8_len(s);
        if (n) fwrite(s, 1, (size_t)n, f), s += n;
        else if (*s == '\n' || *s == '\t' || *s == '\r') fputc(' ', f), s++; /* one line, whatever a library said */
        else fprintf(f, "\\x%02X", *s++); /* a control byte or invalid UTF-8 from an input, shown for what it is */
    }
    fputc('\n', f);
}

int cli_fail(const char *cmd, const char *fmt, ...)
{
    char msg[4096];
    va_list ap;
    int at = snprintf(msg, sizeof msg, "lrcnn %s: ", cmd);
    va_start(ap, fmt);
    vsnprintf(msg + at, sizeof msg - (size_t)at, fmt, ap);
    va_end(ap);
    cli_put_line(stderr, msg);
    return CLI_USAGE;
}

int cli_status(const char *cmd, int rc, const err *e)
{
    if (rc != CLI_OK) cli_fail(cmd, "%s", e->msg);
    return rc;
}

int cli_opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n)) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n]) return 0;
    if (*i + 1 >= argc) return -1;
    *val = argv[++*i];
    return 1;
}

int cli_parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    if (!*s || isspace((unsigned char)*s)) return -1; /* strtol would skip it: " 8" is not a count */
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int cli_common(int argc, char **argv, int *i, const char *cmd, cli_config *c)
{
    const char *v, *a = argv[*i];
    int got;
    if (!strcmp(a, "--force")) return c->force = true, 1;
    const struct { const char *name; const char **dst; } strs[] = {
        {"--net", &c->net}, {"--plan", &c->plan}, {"--bn", &c->bn}, {"-o", &c->out}, {"--host-budget", &c->host},
        {"--calibrate", &c->calibrate}, {"--profile", &c->profile},
    };
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
        if ((got = cli_opt(argc, argv, i, strs[k].name, &v))) {
            if (got < 0) return cli_fail(cmd, "%s needs a value (see lrcnn %s --help)", a, cmd), -1;
            *strs[k].dst = v;
            if (strs[k].dst == &c->host && units_parse_budget(v, &c->host_budget))
                return cli_fail(cmd, "--host-budget %s: expected bytes like 0, 8GiB, 500M (at most 1 EiB)", v), -1;
            return 1;
        }
    if ((got = cli_opt(argc, argv, i, "--image", &v))) {
        if (got < 0) return cli_fail(cmd, "--image needs a value (see lrcnn %s --help)", cmd), -1;
        if (cli_parse_image(v, &c->image, &c->image_w))
            return cli_fail(cmd, "--image %s: expected a size S or HxW, each 1..65536 pixels", v), -1;
        return 1;
    }
    const struct { const char *name; int *dst, lo, hi; } ints[] = {
        {"--batch", &c->batch, 1, 1 << 20}, {"--iters", &c->iters, 1, 1 << 24},
    };
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++)
        if ((got = cli_opt(argc, argv, i, ints[k].name, &v))) {
            if (got < 0) return cli_fail(cmd, "%s needs a value (see lrcnn %s --help)", a, cmd), -1;
            if (cli_parse_int(v, ints[k].lo, ints[k].hi, ints[k].dst))
                return cli_fail(cmd, "%s %s: expected an integer %d..%d", ints[k].name, v, ints[k].lo, ints[k].hi), -1;
            return 1;
        }
    if ((got = cli_opt(argc, argv, i, "--seed", &v))) {
        char *end;
        if (got < 0) return cli_fail(cmd, "--seed needs a value"), -1;
        errno = 0;
        c->seed = strtoll(v, &end, 10);
        if (errno || *end || end == v || c->seed < 0)
            return cli_fail(cmd, "--seed %s: expected a non-negative integer below 2^63", v), -1;
        return 1;
    }
    if ((got = cli_opt(argc, argv, i, "--alloc", &v))) {
        if (got < 0 || (strcmp(v, "arena") && strcmp(v, "pool")))
            return cli_fail(cmd, "--alloc %s: expected arena (one arena at the plan's offsets) or pool (allocate as the schedule asks)",
                            got < 0 ? "" : v), -1;
        c->pool = !strcmp(v, "pool");
        return 1;
    }
    if ((got = cli_opt(argc, argv, i, "--optimizer", &v))) {
        if (got < 0) return cli_fail(cmd, "--optimizer needs a value"), -1;
        if (cli_parse_optimizer(v, &c->optimizer)) return cli_fail(cmd, "--optimizer %s: expected sgd or adam", v), -1;
        return 1;
    }
    return 0;
}

int cli_load_calib(const char *path, enc_calib *c, sched_cfg *cfg, err *e)
{
    memset(c, 0, sizeof *c);
    if (!path) return 0;
    if (calib_read(path, c, e)) return err_wrap(e, "--calibrate"), -1;
    cfg->calib = c;
    return 0;
}

int cli_load_device(const char *name, const char *profile, sim_device *d, timing_model *m, err *e)
{
    memset(m, 0, sizeof *m);
    const sim_device *base = sim_device_find(name ? name : "cpu");
    if (!base && name && strchr(name, '/') == NULL && access(name, F_OK) != 0)
        return err_set(e, "--device %s: not a built-in device (%s) nor a device profile file", name, sim_device_names());
    if (!base) { /* a device profile (lrcnn calibrate) named as the device: it is --profile FILE */
        if (profile) return err_set(e, "--device %s and --profile %s: give the profile once", name, profile);
        if (profile_device(name, &sim_device_cpu, d, m, e)) return err_wrap(e, "--device"), -1;
        if (!strcmp(m->backend, "cuda")) { /* a GPU's profile: the H100's host link where the profile has no copies */
            *d = sim_device_h100;
            d->name = m->source, d->model = m;
        }
        return 0;
    }
    *d = *base;
    if (profile && profile_device(profile, base, d, m, e)) return err_wrap(e, "--profile"), -1;
    return 0;
}

const char *cli_engine_device(const char *backend) { return strcmp(backend, "cuda") ? "cpu" : "h100"; }

int cli_inputs_load(cli_inputs *in, const cli_config *c, const char *device, sched_cfg *cfg, err *e)
{
    memset(in, 0, sizeof *in);
    if (cli_load_device(device, c->profile, &in->dev, &in->tm, e)) return -1;
    cfg->gpu = in->dev.overlap; /* a copy engine beside compute: a GPU */
    if (cli_load_calib(c->calibrate, &in->cal, cfg, e)) {
        timing_free(&in->tm);
        return -1;
    }
    if (cli_load_net(&in->n, c->net, c->image, c->image_w, e)) {
        enc_calib_free(&in->cal);
        timing_free(&in->tm);
        return -1;
    }
    return 0;
}

void cli_inputs_free(cli_inputs *in)
{
    net_free(&in->n);
    enc_calib_free(&in->cal);
    timing_free(&in->tm);
}

const char *cli_time_source(const sim_device *d, char *buf, size_t len)
{
    if (d->model) snprintf(buf, len, "calibrated on the %s backend (%s)", d->model->backend, d->model->source);
    else snprintf(buf, len, "%s roofline (uncalibrated: --profile FILE from lrcnn calibrate)", d->name);
    return buf;
}

double cli_arena_gap(const sim_arena *a) { return a->live ? 100.0 * (double)(a->size - a->live) / (double)a->live : 0.0; }

void cli_print_arena(const sim_arena *a)
{
    char x[32], y[32], z[32];
    printf("  %-14s %14s   = live peak %s (blocks rounded to 256 B) + gap %s (%.2f%%; order: %s)\n", "arena (device)",
           units_fmt_bytes(a->size, x, sizeof x), units_fmt_bytes(a->live, y, sizeof y), units_fmt_bytes(a->size - a->live, z, sizeof z),
           cli_arena_gap(a), a->how);
    if (a->host_size)
        printf("  %-14s %14s   = live peak %s + gap %s (pinned, for the moved maps)\n", "arena (host)", units_fmt_bytes(a->host_size, x, sizeof x),
               units_fmt_bytes(a->host_live, y, sizeof y), units_fmt_bytes(a->host_size - a->host_live, z, sizeof z));
    if (a->apart)
        printf("  %-14s %14s   data-sized encodings, allocated outside the arena as they are made (at their predicted sizes)\n",
               "apart (device)", units_fmt_bytes(a->apart, x, sizeof x));
}

void cli_print_calib(const sim_result *r, const sched_cfg *cfg)
{
    if (!r->enc_sized) return;
    if (r->enc_calibrated)
        printf("  data-sized encodings: %d of %d maps at densities/ratios measured in %s%s\n", r->enc_calibrated, r->enc_sized,
               cfg->calib->source, r->enc_calibrated < r->enc_sized ? ", the rest at the modifier's" : "");
    else
        printf("  data-sized encodings: %d maps at the modifier's stated density/ratio (--calibrate FILE measures them)\n",
               r->enc_sized);
}

void cli_print_encoded(const run_summary *m)
{
    int64_t pred = 0, meas = 0;
    double values[ENC_NKIND] = {0}, stated[ENC_NKIND] = {0}, stored[ENC_NKIND] = {0};
    int maps = 0, calibrated = 0, adapted = 0;
    double worst = -1, lo = INFINITY, hi = 0;
    for (int i = 0; i < m->n_encoded; i++) {
        const run_encoded *x = &m->encoded[i];
        if (!enc_data_sized(x->kind)) continue;
        if (x->model_err > worst) worst = x->model_err;
        if (x->bound > 0) adapted++, lo = fmin(lo, x->bound), hi = fmax(hi, x->bound);
        double v = (double)x->shape.images * (double)(x->shape.nx * x->shape.ny), f = enc_measured_factor(x->kind, x->shape, x->measured);
        maps++, calibrated += x->calibrated, pred += x->predicted, meas += x->measured;
        values[x->kind] += v, stated[x->kind] += x->kind == ENC_SPARSE ? v * x->factor : v / x->factor;
        stored[x->kind] += x->kind == ENC_SPARSE ? v * f : f > 0 ? v / f : 0;
    }
    if (!maps) return;
    char a[32], b[32];
    printf("  data-sized encodings, %d maps%s: predicted %s, stored %s (%+.1f%%)", maps, calibrated ? " (calibrated)" : "",
           units_fmt_bytes(pred, a, sizeof a), units_fmt_bytes(meas, b, sizeof b), 100.0 * (double)(pred - meas) / (double)meas);
    if (values[ENC_SPARSE] > 0)
        printf("; density %.3f predicted, %.3f measured", stated[ENC_SPARSE] / values[ENC_SPARSE], stored[ENC_SPARSE] / values[ENC_SPARSE]);
    if (values[ENC_ZFP_ACC] > 0 && stored[ENC_ZFP_ACC] > 0)
        printf("; zfp ratio %.2f predicted, %.2f measured", values[ENC_ZFP_ACC] / stated[ENC_ZFP_ACC],
               values[ENC_ZFP_ACC] / stored[ENC_ZFP_ACC]);
    if (adapted) printf("; adapted bounds %.3g..%.3g on %d maps", lo, hi, adapted);
    if (worst >= 0) printf("; modelled weight-gradient error <= %.3g", worst);
    printf("\n");
}

int cli_unknown(const char *cmd, int argc, char **argv, int i, int got)
{
    (void)argc;
    if (got < 0) return cli_fail(cmd, "%s needs a value (see lrcnn %s --help)", argv[i], cmd);
    return cli_fail(cmd, "unknown argument '%s' (see lrcnn %s --help)", argv[i], cmd);
}

int cli_check_memory(const sim_result *r, int64_t budget, bool ram_device, const char *plan_text, err *e)
{
    char a[32], b[32];
    if (budget >= 0 && r->replay.max[MEM_HOST] > budget)
        return err_set(e, "plan '%s' offloads %s to host memory but --host-budget is %s", plan_text,
                       units_fmt_bytes(r->replay.max[MEM_HOST], a, sizeof a), units_fmt_bytes(budget, b, sizeof b));
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return 0; /* unknown: the allocator's own refusal remains */
    int64_t ram = (int64_t)pages * page, need = r->replay.max[MEM_HOST] + (ram_device ? r->replay.peak : 0);
    if (need <= ram) return 0;
    return err_set(e, "plan '%s' needs %s of this machine's memory (%s) but it has %s", plan_text,
                   units_fmt_bytes(need, a, sizeof a), ram_device ? "its device peak plus host bytes" : "host bytes",
                   units_fmt_bytes(ram, b, sizeof b));
}

void cli_warn_plan(const plan *p, const net *n)
{
    static bool said;
    if (said || !plan_bn_approximate(p, n)) return;
    said = true;
    fprintf(stderr, "lrcnn: warning: bn=per-band normalizes each band with its own rows' statistics (the LR-CNN "
                    "prototype's approximation): gradients differ from layer's; bn=train is exact\n");
}

int cli_parse_optimizer(const char *s, sched_optimizer *o)
{
    if (!strcmp(s, "sgd")) *o = SCHED_SGD;
    else if (!strcmp(s, "adam")) *o = SCHED_ADAM;
    else return -1;
    return 0;
}

const char *cli_optimizer_name(sched_optimizer o) { return o == SCHED_ADAM ? "adam" : "sgd"; }

const char *cli_fmt_closed(const sim_result *r, int cat, char *buf, size_t len)
{
    if (!r->closed_ok) return "n/a";
    return units_fmt_bytes(cat < 0 ? r->closed.peak : r->closed.at_peak[cat], buf, len);
}

const char *cli_fmt_closed_err(const sim_result *r, int64_t ref, const char *fmt, char *buf, size_t len)
{
    if (!r->closed_ok || !ref) return "n/a";
    snprintf(buf, len, fmt, 100.0 * (double)(r->closed.peak - ref) / (double)ref);
    return buf;
}

const char *cli_threads_text(void)
{
    static char buf[200];
    int n = engine_threads();
    snprintf(buf, sizeof buf, "%d thread%s (%s)", n, n == 1 ? "" : "s", engine_threads_why());
    return buf;
}

void cli_warn_load(void)
{
    double load;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f) return;
    int got = fscanf(f, "%lf", &load);
    fclose(f);
    /* this run's own threads count as about one per core; another busy process adds to that */
    if (got == 1 && cores > 0 && load > (double)cores + 0.5)
        fprintf(stderr, "warning: load average %.1f on %ld cores while timing: other processes shared the CPUs, so these times are "
                        "slower and noisier than this machine's own\n", load, cores);
}

void cli_progress(const char *what, int k, int n)
{
    static const char *current;
    static struct timespec start;
    static int base, prev = -1; /* the clock started when base steps were done (0 or 1); the last k */
    static double last;         /* a pipe: when its last line was printed (s since start) */
    static bool printed;        /* a pipe: a line of this count printed */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* a new count: announced at k = 0 (the clock runs from the start) or not (from the first step's end) */
    if (!current || strcmp(what, current) || k == 0 || (k == 1 && prev != 0)) current = what, start = now, base = k, last = 0, printed = false;
    prev = k;
    if (k == 0) return;
    bool tty = isatty(STDERR_FILENO);
    double s = (double)(now.tv_sec - start.tv_sec) + 1e-9 * (double)(now.tv_nsec - start.tv_nsec);
    if (tty && k >= n) { /* done: the line goes, so what prints next starts at column 0 */
        fputs("\r\033[K", stderr);
        fflush(stderr);
        return;
    }
    if (!tty && !(k >= n ? printed : s - last >= 2)) return;
    char eta[48] = "";
    if (k >= n) snprintf(eta, sizeof eta, ", done in %.0f s", ceil(s));
    else if (k > base) { /* from the pace so far: s / (k - base) per step, n - k to go */
        double left = s / (k - base) * (n - k);
        if (left >= 60) snprintf(eta, sizeof eta, ", about %.0f min %02.0f s left", floor(left / 60), fmod(left, 60));
        else snprintf(eta, sizeof eta, ", about %.0f s left", ceil(left));
    }
    if (tty) fprintf(stderr, "\r\033[K  %s %d/%d%s", what, k, n, eta);
    else fprintf(stderr, "  %s %d/%d%s\n", what, k, n, eta), last = s, printed = true;
    fflush(stderr);
}

int cli_parse_image(const char *s, int *h, int *w)
{
    const char *x = strchr(s, 'x');
    char hs[16];
    if (!x) return *w = 0, cli_parse_int(s, 1, 1 << 16, h);
    if (x - s >= (ptrdiff_t)sizeof hs) return -1;
    memcpy(hs, s, (size_t)(x - s)), hs[x - s] = 0;
    return cli_parse_int(hs, 1, 1 << 16, h) || cli_parse_int(x + 1, 1, 1 << 16, w) ? -1 : 0;
}

int cli_load_net(net *n, const char *name, int h, int w, err *e)
{
    if (net_load_named(n, name, e)) return -1;
    if (h > 0 && net_set_input(n, h, w > 0 ? w : h, e)) {
        net_free(n);
        return -1;
    }
    return 0;
}

int cli_simulate(const net *n, const char *plan_text, const sched_cfg *cfg, const sim_device *d, sim_result *r, err *e)
{
    plan p;
    if (cli_plan_parse(&p, n, plan_text, NULL, cfg, d, e)) return -1;
    int rc = sim_run(n, &p, cfg, d, r, NULL, e);
    plan_free(&p);
    return rc;
}

/* --- largest batch or input under a budget (lrcnn plan, sweep search=) ------------------------ */

/* 1: the configuration at x (a square input of x at pr->batch when by_image, else batch x at
 * pr->image) fits, 0: it does not, -1: it is invalid (e.g. too few rows for the bands). */
static int fits(cli_probe *pr, bool by_image, int x)
{
    err e;
    net n;
    if (cli_load_net(&n, pr->net_name, by_image ? x : pr->image, by_image ? 0 : pr->image_w, &e)) return -1;
    sched_cfg cfg = pr->cfg;
    cfg.batch = by_image ? pr->batch : x;
    sim_result r;
    int rc = cli_simulate(&n, pr->plan_text, &cfg, &sim_device_cpu, &r, &e);
    net_free(&n);
    if (rc) return -1;
    int64_t foot = r.arena.size + r.arena.apart; /* what it reserves */
    if (foot > pr->budget) {
        if (!pr->least || foot < pr->least) pr->least = foot, pr->least_at = x;
        return 0;
    }
    pr->peak = foot;
    return 1;
}

/* Largest x in [lo, cap] with fits(x) == 1, assuming fits is monotone (invalid counts as "not yet"
 * below the first valid x and as "no" above it). Returns 0 if none. */
static int search(cli_probe *pr, bool by_image, int cap)
{
    int x = 1, last_ok = 0, first_bad = cap + 1;
    bool seen_valid = false;
    while (x <= cap) {
        int f = fits(pr, by_image, x);
        if (f == 1) last_ok = x, seen_valid = true;
        else if (f == 0 || seen_valid) { first_bad = x; break; }
        if (x == cap) break;
        x = x * 2 > cap ? cap : x * 2;
    }
    if (!last_ok) {
        if (!by_image || first_bad > cap) return 0;
        /* inputs below first_bad were invalid (too few rows for the bands): bisect for the first
         * valid one in the gap (validity is monotone in the input size), the only one that can fit */
        int lo = first_bad / 2, hi = first_bad; /* lo invalid (or 0), hi valid */
        while (hi - lo > 1) {
            int mid = lo + (hi - lo) / 2;
            if (fits(pr, true, mid) < 0) lo = mid;
            else hi = mid;
        }
        if (hi == first_bad || fits(pr, true, hi) != 1) return 0;
        last_ok = hi;
    }
    int lo = last_ok, hi = first_bad; /* lo fits, hi does not */
    while (hi - lo > 1) {
        int mid = lo + (hi - lo) / 2;
        if (fits(pr, by_image, mid) == 1) lo = mid;
        else hi = mid;
    }
    fits(pr, by_image, lo);
    return lo;
}

int cli_max_fit(cli_probe *pr, bool by_image)
{
    pr->least = 0, pr->least_at = 0;
    return search(pr, by_image, by_image ? 1 << 15 : 1 << 20);
}

double cli_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int cli_plan_width(const char *const *plans, int n, int least)
{
    int w = least;
    for (int k = 0; k < n; k++) w = (int)strlen(plans[k]) > w ? (int)strlen(plans[k]) : w;
    return w;
}
