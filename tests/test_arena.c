/* The arena (sim/predict/arena.h): a static memory plan must be valid, and tight.
 *   check   every shipped net at its own input size, batch 8, under every preset with band counts
 *           2..8 and plans that offload, migrate and encode (data-sized encodings too); then random
 *           nets (tests/randnet.c) under row plans: an independent checker walks each schedule with
 *           the planned offsets and fails on two blocks live at once that overlap, a block outside
 *           its arena, or a live peak different from its own count;
 *   gaps    VGG-16, ResNet-50, MobileNetV2 and the U-Net at their shipped sizes, batch 8, every
 *           preset: the arena above the live peak by at most 3%, with the distribution printed;
 *   exact   small schedules: the heuristic against GLPK's integer program (arena_exact), which
 *           must never find an arena below the live peak or above the heuristic's.
 * Usage: test_arena check|gaps|exact */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "sim/plan/enc.h"
#include "sim/predict/arena.h"
#include "sim/predict/sim.h"
#include "tests/randnet.h"

static int failures;
#define FAIL(...) (fprintf(stderr, "FAIL " __VA_ARGS__), fputc('\n', stderr), failures++)

/* --- the independent checker -------------------------------------------------------------------- */

typedef struct {
    int64_t lo, hi;
    int buf, until; /* the block is live up to and including step `until` (-1: not known yet) */
} span;

typedef struct {
    span *v;
    int n, cap;
    int64_t bytes, most, limit;
} side;

static int64_t rounded(int64_t bytes) { return bytes > 0 ? (bytes + 255) / 256 * 256 : 256; }

/* A block of buf at [off, off + bytes) begins at step i on side sd: inside the arena, and apart from
 * every block live there. */
static void open_span(side *sd, const char *what, int buf, int64_t off, int64_t bytes, int i)
{
    int64_t lo = off, hi = off + rounded(bytes);
    if (off < 0 || hi > sd->limit)
        FAIL("%s: step %d places buffer %d at [%lld, %lld), outside the arena of %lld", what, i, buf, (long long)lo, (long long)hi,
             (long long)sd->limit);
    for (int k = 0; k < sd->n; k++)
        if (sd->v[k].lo < hi && lo < sd->v[k].hi) {
            FAIL("%s: step %d places buffer %d at [%lld, %lld) over buffer %d at [%lld, %lld)", what, i, buf, (long long)lo, (long long)hi,
                 sd->v[k].buf, (long long)sd->v[k].lo, (long long)sd->v[k].hi);
            break;
        }
    if (sd->n == sd->cap) sd->v = realloc(sd->v, (size_t)(sd->cap = sd->cap * 2 + 64) * sizeof *sd->v);
    sd->v[sd->n++] = (span){lo, hi, buf, -1};
    sd->bytes += hi - lo;
    if (sd->bytes > sd->most) sd->most = sd->bytes;
}

/* Buffer buf's block on side sd ends at step i (it is gone once step i is done). */
static void end_span(side *sd, int buf, int i)
{
    for (int k = 0; k < sd->n; k++)
        if (sd->v[k].buf == buf && sd->v[k].until < 0) {
            sd->v[k].until = i;
            return;
        }
}

/* Blocks whose last step was i leave. */
static void close_spans(side *sd, int i)
{
    for (int k = 0; k < sd->n; k++)
        if (sd->v[k].until == i) sd->bytes -= sd->v[k].hi - sd->v[k].lo, sd->v[k--] = sd->v[--sd->n];
}

/* Walks s as the engine does: a buffer is on the device from its ALLOC or PREFETCH to its OFFLOAD
 * or FREE, on the host from the step its offload's copy is issued (sched_move_issue) to its PREFETCH
 * or FREE (+migrate: at home there throughout); data-sized encodings are not in the arena. */
static void check_plan(const sched *s, const arena *a, const char *what)
{
    side dev = {.limit = a->size}, host = {.limit = a->host_size};
    int *issue = calloc((size_t)s->n_step + 1, sizeof(int)), *first = calloc((size_t)s->n_step + 2, sizeof(int));
    int *next = calloc((size_t)s->n_step + 1, sizeof(int)); /* offloads by the step their copy begins: a list per step */
    bool *there = calloc((size_t)s->n_buf + 1, sizeof(bool)); /* on the host */
    sched_move_issue(s, issue);
    for (int i = 0; i <= s->n_step; i++) first[i] = -1;
    for (int o = s->n_step - 1; o >= 0; o--)
        if (s->steps[o].op == SCHED_OFFLOAD) {
            int from = issue[o] >= 0 && issue[o] < o ? issue[o] : o;
            next[o] = first[from], first[from] = o;
        }
    for (int i = 0; i < s->n_step; i++) {
        for (int o = first[i]; o >= 0; o = next[o]) { /* offloads whose copy begins now */
            const sched_buf *b = &s->bufs[s->steps[o].buf];
            if (!b->host_home && !(b->kind == BUF_ENC && enc_data_sized(b->enc))) open_span(&host, what, s->steps[o].buf, a->at[o], b->bytes, i);
        }
        const sched_step *t = &s->steps[i];
        const sched_buf *b = t->buf >= 0 ? &s->bufs[t->buf] : NULL;
        bool apart = b && b->kind == BUF_ENC && enc_data_sized(b->enc);
        switch (t->op) {
        case SCHED_ALLOC:
            if (apart) break;
            if (b->host_home) open_span(&host, what, t->buf, a->at[i], b->bytes, i), there[t->buf] = true;
            else open_span(&dev, what, t->buf, a->at[i], b->bytes, i);
            break;
        case SCHED_OFFLOAD:
            if (!apart) end_span(&dev, t->buf, i);
            there[t->buf] = true;
            break;
        case SCHED_PREFETCH:
            if (apart) break;
            if (!b->host_home) end_span(&host, t->buf, i);
            open_span(&dev, what, t->buf, a->at[i], b->bytes, i), there[t->buf] = false;
            break;
        case SCHED_FREE:
            if (apart) break;
            end_span(there[t->buf] ? &host : &dev, t->buf, i);
            if (b->host_home) end_span(&host, t->buf, i);
            there[t->buf] = false;
            break;
        default: break;
        }
        close_spans(&dev, i), close_spans(&host, i);
        if (failures > 20) break;
    }
    if (dev.most != a->live || host.most != a->host_live)
        FAIL("%s: live peaks %lld / %lld on device / host, the arena says %lld / %lld", what, (long long)dev.most, (long long)host.most,
             (long long)a->live, (long long)a->host_live);
    if (a->size < a->live || a->host_size < a->host_live) FAIL("%s: an arena below its live peak", what);
    free(dev.v), free(host.v), free(issue), free(first), free(next), free(there);
}

/* --- the suites ------------------------------------------------------------------------------------ */

/* Lowers `text` on n at batch and plans its arena; 1 when the plan does not apply to the net (too
 * many bands, a modifier with nothing to act on), -1 on any other failure (reported). */
static int planned(const net *n, const char *text, int batch, sched *s, arena *a)
{
    plan p;
    err e;
    sched_cfg cfg = {.batch = batch, .optimizer = SCHED_SGD};
    if (plan_parse(&p, n, text, &e)) return 1;
    int rc = pipeline_lower(s, n, &p, &cfg, &e);
    plan_free(&p);
    if (rc && strchr(text, '+')) return 1; /* a modifier with nothing to act on in this net */
    if (rc) return FAIL("%s on %s: %s", text, n->name, e.msg), -1;
    arena_plan(s, a);
    return 0;
}

/* Every preset with band counts 2..8, and plans that move or encode, into list (returns count). */
static int plan_texts(char list[][48], bool movers)
{
    static const char *fixed[] = {"layer", "ckpt-sqrt", "ckpt:3", "vdnn-all", "vdnn-conv", "2ps-h", "overl-h"};
    static const char *moving[] = {"2ps:4+migrate", "layer+gist", "overl:4+dpr:fp16", "2ps:4+zfp:acc=1e-3", "vdnn-all+zfp:rate=8",
                                   "2ps-h:4+migrate:grads"};
    int k = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) snprintf(list[k++], 48, "%s", fixed[i]);
    for (int R = 2; R <= 8; R++) {
        static const char *pol[] = {"2ps", "overl", "2ps-h", "overl-h"};
        for (int j = 0; j < 4; j++) snprintf(list[k++], 48, "%s:%d", pol[j], R);
    }
    for (size_t i = 0; movers && i < sizeof moving / sizeof *moving; i++) snprintf(list[k++], 48, "%s", moving[i]);
    return k;
}

static int by_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The nets of nets/, by name (malloc'd; the caller frees each and the list). */
static int shipped_nets(char ***names)
{
    DIR *d = opendir(LRCNN_SOURCE_DIR "/nets");
    int n = 0;
    *names = NULL;
    if (!d) return FAIL("cannot list %s/nets", LRCNN_SOURCE_DIR), 0;
    for (struct dirent *f; (f = readdir(d));) {
        size_t len = strlen(f->d_name);
        if (len < 5 || strcmp(f->d_name + len - 4, ".net")) continue;
        *names = realloc(*names, (size_t)(n + 1) * sizeof **names);
        (*names)[n++] = strndup(f->d_name, len - 4);
    }
    closedir(d);
    qsort(*names, (size_t)n, sizeof **names, by_name);
    return n;
}

static void check_shipped(void)
{
    char **names, list[64][48], what[200];
    int n_nets = shipped_nets(&names), n_plans = plan_texts(list, true), checked = 0, skipped = 0, with_host = 0, with_apart = 0;
    for (int k = 0; k < n_nets; k++) {
        net m;
        err e;
        if (net_load_named(&m, names[k], &e)) {
            FAIL("%s", e.msg);
            continue;
        }
        for (int p = 0; p < n_plans; p++) {
            sched s;
            arena a;
            int rc = planned(&m, list[p], 8, &s, &a);
            if (rc) {
                skipped += rc > 0;
                continue;
            }
            snprintf(what, sizeof what, "%.47s on %.120s", list[p], names[k]);
            check_plan(&s, &a, what);
            checked++, with_host += a.host_size > 0, with_apart += a.apart > 0;
            arena_free(&a), sched_free(&s);
        }
        net_free(&m);
        free(names[k]);
    }
    free(names);
    printf("%s %d schedules of %d shipped nets (batch 8, %d with host arenas, %d with data-sized encodings apart): no two live "
           "blocks overlap, all inside their arenas, live peaks as counted (%d plans the nets refuse skipped)\n",
           failures ? "FAIL" : "ok  ", checked, n_nets, with_host, with_apart, skipped);
}

/* The negative control: the checker must see a block moved onto another that is live beside it. */
static void check_checker(void)
{
    net m;
    err e;
    sched s;
    arena a;
    if (net_load_named(&m, "vgg-small", &e) || planned(&m, "2ps:3", 2, &s, &a)) {
        FAIL("vgg-small 2ps:3: does not lower");
        return;
    }
    int moved = 0, before = failures;
    for (int i = 0; i + 1 < s.n_step && !moved; i++) /* two device blocks opened back to back: both live then */
        if (s.steps[i].op == SCHED_ALLOC && s.steps[i + 1].op == SCHED_ALLOC && a.at[i] >= 0 && a.at[i + 1] >= 0 &&
            !s.bufs[s.steps[i].buf].host_home && !s.bufs[s.steps[i + 1].buf].host_home)
            a.at[i + 1] = a.at[i], moved = 1;
    fprintf(stderr, "(the negative control: one FAIL line expected)\n");
    check_plan(&s, &a, "vgg-small 2ps:3 with one block moved");
    int seen = failures - before;
    failures = before;
    if (!moved || !seen) FAIL("the checker missed a block placed over another");
    else printf("ok   the checker reports a block moved onto a live one\n");
    arena_free(&a), sched_free(&s), net_free(&m);
}

static void check_random(int n_nets)
{
    randnet_rng g = {0xA2E4Aull};
    char text[8192], pl[64], what[128];
    int done = 0, checked = 0;
    static const char *pol[] = {"2ps", "overl", "2ps-h", "overl-h"};
    while (done < n_nets && failures < 5) {
        net m;
        err e;
        randnet_text(&g, RANDNET_WIDE, text, sizeof text, 5 + randnet_below(&g, 60));
        if (net_parse(&m, text, "random.net", &e)) continue;
        done++;
        for (int k = 0; k < 4; k++) {
            snprintf(pl, sizeof pl, "%s:%d", pol[randnet_below(&g, 4)], 2 + randnet_below(&g, 7));
            if (k == 3) snprintf(pl, sizeof pl, "%s", randnet_below(&g, 2) ? "vdnn-all" : "ckpt-sqrt");
            sched s;
            arena a;
            if (planned(&m, pl, 1 + randnet_below(&g, 4), &s, &a)) continue;
            snprintf(what, sizeof what, "%s on random net %d", pl, done);
            check_plan(&s, &a, what);
            if (failures) fprintf(stderr, "%s\n", text);
            checked++;
            arena_free(&a), sched_free(&s);
        }
        net_free(&m);
    }
    printf("%s %d schedules of %d random nets: valid arenas\n", failures ? "FAIL" : "ok  ", checked, done);
}

static int by_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void check_gaps(void)
{
    static const char *nets[] = {"vgg16", "resnet50", "mobilenetv2", "unet"};
    char list[64][48];
    int n_plans = plan_texts(list, false);
    double all[4 * 64];
    int n_all = 0;
    for (int k = 0; k < 4; k++) {
        net m;
        err e;
        if (net_load_named(&m, nets[k], &e)) {
            FAIL("%s", e.msg);
            continue;
        }
        double worst = 0;
        int zero = 0, count = 0;
        const char *worst_plan = "";
        for (int p = 0; p < n_plans; p++) {
            sched s;
            arena a;
            if (planned(&m, list[p], 8, &s, &a)) continue;
            double gap = 100.0 * (double)(a.size - a.live) / (double)a.live;
            if (gap > 3.0) FAIL("%s on %s: the arena %lld is %.2f%% above the live peak %lld", list[p], nets[k], (long long)a.size, gap,
                                (long long)a.live);
            if (gap > worst) worst = gap, worst_plan = list[p];
            zero += a.size == a.live, count++;
            all[n_all++] = gap;
            arena_free(&a), sched_free(&s);
        }
        printf("     %-12s %dx%d: %2d plans, %2d at the live peak exactly, largest gap %.3f%% (%s)\n", nets[k], m.layers[0].h, m.layers[0].w,
               count, zero, worst, worst_plan);
        net_free(&m);
    }
    qsort(all, (size_t)n_all, sizeof *all, by_double);
    if (n_all)
        printf("%s gaps above the live peak over %d plans: median %.3f%%, 90th percentile %.3f%%, largest %.3f%% (at most 3%% asked)\n",
               failures ? "FAIL" : "ok  ", n_all, all[n_all / 2], all[n_all * 9 / 10], all[n_all - 1]);
}

static void check_exact(void)
{
    static const struct { const char *net, *plan; int batch; } cases[] = {
        {"bn-cover", "layer", 2}, {"bn-cover", "ckpt-sqrt", 2}, {"upconv", "2ps:2", 2}, {"vgg-small", "2ps:2", 2},
        {"kinds", "2ps:2", 2}, {"kernels", "2ps:3", 2}, {"vgg16", "layer", 8}, {"resnet50", "2ps:4", 8},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        net m;
        err e;
        sched s;
        arena a;
        if (net_load_named(&m, cases[k].net, &e)) {
            FAIL("%s", e.msg);
            continue;
        }
        if (planned(&m, cases[k].plan, cases[k].batch, &s, &a)) {
            FAIL("%s on %s: does not lower", cases[k].plan, cases[k].net);
            net_free(&m);
            continue;
        }
        arena_exact_result r;
        int rc = arena_exact(&a, 200, 5.0, &r);
        double heur = 100.0 * (double)(a.size - a.live) / (double)a.live, best = 100.0 * (double)(r.best - r.lower) / (double)r.lower;
        if (rc == 0 && (r.best > a.size || r.best < r.lower)) FAIL("%s on %s: the program's arena %lld is outside [%lld, %lld]", cases[k].plan,
                                                                   cases[k].net, (long long)r.best, (long long)r.lower, (long long)a.size);
        if (rc < 0) printf("     %-9s %-10s %5d blocks: heuristic +%.2f%% over the live peak; too many blocks for the program\n",
                           cases[k].net, cases[k].plan, a.n_blocks, heur);
        else printf("     %-9s %-10s %4d blocks %5d pairs: heuristic +%.2f%%, program +%.2f%% %s\n", cases[k].net, cases[k].plan, r.blocks,
                    r.pairs, heur, best, r.proved ? "(optimal)" : "(5 s: best found, not proved)");
        arena_free(&a), sched_free(&s), net_free(&m);
    }
    printf("%s the heuristic against GLPK's integer program (percentages above the live peak)\n", failures ? "FAIL" : "ok  ");
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "check";
    if (!strcmp(what, "check")) check_checker(), check_shipped(), check_random(300);
    else if (!strcmp(what, "gaps")) check_gaps();
    else if (!strcmp(what, "exact")) check_exact();
    else return fprintf(stderr, "usage: test_arena check|gaps|exact\n"), 2;
    printf("%s\n", failures ? "FAILED" : "all arena checks passed");
    return failures != 0;
}
