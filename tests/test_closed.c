/* Closed form against replay, as a property over random nets and on the shipped nets.
 *
 * Random: >= 2000 configurations, each a random net (tests/randnet.h: odd sizes, strides,
 * dilations, kernels 1-7, stride-2 convolutions with large kernels, padded pools, bn, relus,
 * residual blocks) x a random input height x a preset (every one, with a random band count) or a
 * random custom plan (segments at random clean cuts, each layer, ckpt, offload(all|conv) or rows
 * with 2PS or OverL, fp != bp, explicit cuts) x batch x SGD or Adam. Shipped: every preset on the
 * test nets (batch 16, every band count of the row presets) and on VGG-16 and ResNet-50 at
 * 224x224 (batch 1, 2, 8 and 32), SGD and Adam, plus a few custom plans.
 *
 * Train-mode BatchNorm inside row segments is checked as bn=train-recompute (statistics passes),
 * which the closed form models; bn=train's stages it does not (their replay is the prediction;
 * tests/test_sched.c and test_exact.c check them).
 *
 * The closed form (paper/model.md) must equal the replay, which the engine measures byte for byte
 * (test_exact): the peak, the breakdown at the peak and each category's maximum, to the byte, and
 * its breakdown must sum to its peak. The paper's acceptance bound is 2%, but the model is exact:
 * an error under 2% is still a lifetime rule the scheduler has and the model lacks (such errors
 * hid here while the bound was the test: up to 1.1% on VGG-16 at 224, 2.8% on vgg16-gap at 227),
 * so the test asserts equality and reports the worst relative error beside it.
 *
 * Shipped configurations print one line each; a random one prints only when it fails, with its
 * net text. A failure is explained: the categories the two disagree on (at their peaks, or in
 * their maxima) and the step at which replay peaks. The last line gives the configurations and
 * the worst |closed - replay| / replay. `test_closed NETS SEED` runs more random nets or another
 * sequence. The closed form never sees a schedule; this test lowers one only to explain a
 * failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/predict/sim.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "tests/randnet.h"

#define BOUND 0.02    /* the paper's acceptance bound, reported (the test asserts equality) */
#define MAX_SHOWN 20  /* failing random configurations printed in full */
#define NETS 300      /* random nets by default, each checked under RUNS random configurations */
#define RUNS 8

static int failures, configs;
static double worst_all;

typedef struct {
    double worst, sum;
    int count, exact, same; /* exact: equal peaks; same: and equal breakdowns and category maxima */
} stats;

/* Why closed and replay differ: categories at their peaks and in their maxima, and replay's
 * peak step. */
static void explain(const net *n, const plan *p, const sched_cfg *cfg, const sim_result *r)
{
    for (int k = 0; k < MEM_NCAT; k++) {
        if (r->closed.at_peak[k] != r->replay.at_peak[k])
            printf("       %-12s closed %12lld  replay %12lld at the peak\n", mem_cat_name((mem_cat)k),
                   (long long)r->closed.at_peak[k], (long long)r->replay.at_peak[k]);
        if (r->closed.max[k] != r->replay.max[k])
            printf("       %-12s closed %12lld  replay %12lld maximum\n", mem_cat_name((mem_cat)k),
                   (long long)r->closed.max[k], (long long)r->replay.max[k]);
    }
    sched s;
    err e;
    if (pipeline_lower(&s, n, p, cfg, &e)) return;
    sim_mem m;
    sim_replay(&s, &m, NULL);
    int i = m.peak_step;
    while (i < s.n_step && (s.steps[i].op == SCHED_ALLOC || s.steps[i].op == SCHED_FREE)) i++;
    if (i < s.n_step) {
        const sched_step *t = &s.steps[i];
        printf("       replay peaks at %s %s%s (segment %d, band %d): the closed form mis-models this phase\n",
               t->recompute ? "recompute" : sched_op_name(t->op), t->layer >= 0 ? n->layers[t->layer].name : "-",
               t->op == SCHED_COPY ? " (copy)" : "", t->seg, t->band);
    }
    sched_free(&s);
}

/* One configuration. quiet: print only a failure (with `text_of_net`, when given). */
static void check(const net *n, const char *text, int batch, sched_optimizer opt, stats *st, bool quiet,
                  const char *text_of_net)
{
    plan p;
    err e;
    sim_result r;
    sched_cfg cfg = {.batch = batch, .optimizer = opt};
    char full[PLAN_TEXT_LEN]; /* train-mode BatchNorm as the closed form models it: passes, not stages */
    snprintf(full, sizeof full, "%s%s", text, strstr(text, " bn=") ? "" : " bn=train-recompute");
    if (plan_parse(&p, n, full, &e) || sim_run(n, &p, &cfg, &sim_device_cpu, &r, NULL, &e)) {
        printf("FAIL %s %s batch %d: %s\n", n->name, text, batch, e.msg);
        failures++;
        return;
    }
    if (!strstr(text, " bn=")) { /* bn=train's stages lower and replay too (their own checks: test_sched, test_exact) */
        plan q;
        sim_result rq;
        if (plan_parse(&q, n, text, &e) || sim_run(n, &q, &cfg, &sim_device_cpu, &rq, NULL, &e) || rq.replay.peak <= 0) {
            printf("FAIL %s %s batch %d (bn=train): %s\n%s\n", n->name, text, batch, e.msg, text_of_net ? text_of_net : "");
            failures++;
        }
        plan_free(&q);
    }
    double rel = (double)(r.closed.peak - r.replay.peak) / (double)r.replay.peak;
    int64_t sum = 0;
    for (int k = 0; k < MEM_NCAT; k++) sum += k == MEM_HOST ? 0 : r.closed.at_peak[k];
    bool same = r.closed.peak == r.replay.peak;
    for (int k = 0; k < MEM_NCAT; k++)
        same &= r.closed.at_peak[k] == r.replay.at_peak[k] && r.closed.max[k] == r.replay.max[k];
    bool ok = same && sum == r.closed.peak;
    if (!quiet || (!ok && failures < MAX_SHOWN)) {
        printf("%s %-13s batch %2d %-4s %-34s replay %12lld closed %12lld  %+7.3f%%\n", ok ? "ok  " : "FAIL", n->name, batch,
               opt == SCHED_ADAM ? "adam" : "sgd", text, (long long)r.replay.peak, (long long)r.closed.peak, 100.0 * rel);
        if (sum != r.closed.peak) printf("       closed categories sum to %lld, not the peak\n", (long long)sum);
        if (!ok) explain(n, &p, &cfg, &r);
        if (!ok && text_of_net) printf("%s\n", text_of_net);
    }
    failures += !ok;
    configs++;
    if (fabs(rel) > st->worst) st->worst = fabs(rel);
    if (fabs(rel) > worst_all) worst_all = fabs(rel);
    st->sum += fabs(rel), st->count++;
    st->exact += r.closed.peak == r.replay.peak;
    st->same += same;
    plan_free(&p);
}

static void summary(const char *what, const stats *st)
{
    printf("== %s: %d configurations, closed vs replay max |error| %.4f%%, mean %.4f%%; %d equal to the byte (%d with "
           "equal breakdowns and category maxima)\n\n", what, st->count, 100.0 * st->worst,
           st->count ? 100.0 * st->sum / st->count : 0.0, st->exact, st->same);
}

/* Height of the row prefix's output: the largest band count of 2ps:R / overl:R. */
static int prefix_rows(const net *n)
{
    plan p;
    err e;
    if (plan_parse(&p, n, "2ps:1", &e)) return 0;
    int h = n->layers[p.segs[0].last].h;
    plan_free(&p);
    return h;
}

static void check_net(const char *name, int image, const int *batches, int nb, int max_bands, const char *const *extra)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (image && net_set_input(&n, image, image, &e))) {
        printf("FAIL %s\n", e.msg);
        failures++;
        return;
    }
    int h = prefix_rows(&n);
    if (max_bands && h > max_bands) h = max_bands;
    const char *fixed[] = {"layer", "ckpt-sqrt", "ckpt:2",  "ckpt:3",  "vdnn-all",
                           "vdnn-conv", "2ps-h", "overl-h", "2ps-h:2", "overl-h:3"};
    stats st = {0};
    for (int b = 0; b < nb; b++)
        for (int o = 0; o < 2; o++) {
            sched_optimizer opt = o ? SCHED_ADAM : SCHED_SGD;
            for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) check(&n, fixed[i], batches[b], opt, &st, false, NULL);
            for (int r = 1; r <= h; r++) {
                char text[32];
                snprintf(text, sizeof text, "2ps:%d", r);
                check(&n, text, batches[b], opt, &st, false, NULL);
                snprintf(text, sizeof text, "overl:%d", r);
                check(&n, text, batches[b], opt, &st, false, NULL);
            }
            for (int i = 0; extra && extra[i]; i++) check(&n, extra[i], batches[b], opt, &st, false, NULL);
        }
    summary(name, &st);
    net_free(&n);
}

/* R - 1 distinct interior cuts of h rows, "/"-separated, into buf. */
static void random_cuts(randnet_rng *g, int h, int R, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = 0;
    for (int x = 1, c = 0; x < h && c < R - 1; x++)
        if (randnet_below(g, h - x) < R - 1 - c) {
            at += (size_t)snprintf(buf + at, len - at, "%s%d", c++ ? "/" : "", x);
            if (at >= len) at = len - 1; /* truncated: the plan is then rejected, not overrun */
        }
}

/* A random custom plan: up to four segments starting at random clean cuts, each layer, ckpt,
 * offload(all|conv) or (when every layer is row-wise) rows: 2PS or OverL, R bands, OverL with
 * fp != bp, explicit cuts. */
static void random_plan(randnet_rng *g, const net *n, char *buf, size_t len)
{
    int starts[5] = {1}, ns = 1, nc = 0;
    for (int L = 2; L < n->n; L++) nc += n->layers[L].cut_before;
    for (int L = 2; L < n->n && ns < 4; L++)
        if (n->layers[L].cut_before && randnet_below(g, nc) < 3) starts[ns++] = L;
    starts[ns] = n->n;
    size_t at = 0;
    for (int k = 0; k < ns; k++) {
        int f = starts[k], l = starts[k + 1] - 1, h = n->layers[l].h;
        bool rw = true;
        for (int L = f; L <= l; L++) rw &= n->layers[L].rowwise;
        int m = randnet_below(g, rw ? 8 : 4), R = 1 + randnet_below(g, h < 12 ? h : 12);
        char mode[160], cuts[128];
        const char *plain[] = {"layer", "ckpt", "offload(all)", "offload(conv)"};
        if (m < 4) {
            snprintf(mode, sizeof mode, "%s", plain[m]);
        } else if (m == 7) { /* OverL, distinct band counts forward and backward */
            snprintf(mode, sizeof mode, "rows(overl,fp=%d,bp=%d)", R, 1 + randnet_below(g, h < 12 ? h : 12));
        } else if (R > 1 && randnet_below(g, 3) == 0) {
            random_cuts(g, h, R, cuts, sizeof cuts);
            snprintf(mode, sizeof mode, "rows(%s,%d,cuts=%s)", m == 4 ? "2ps" : "overl", R, cuts);
        } else {
            snprintf(mode, sizeof mode, "rows(%s,%d)", m == 4 ? "2ps" : "overl", R);
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%s@%s..%s", k ? "; " : "", mode, n->layers[f].name, n->layers[l].name);
        if (at >= len) at = len - 1; /* truncated: the plan is then rejected, not overrun */
    }
}

/* A random preset; the row presets (when the net has a row prefix of h rows) with a random count. */
static void random_preset(randnet_rng *g, int h, char *buf, size_t len)
{
    const char *plain[] = {"layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "ckpt:%d", "2ps:%d",
                           "overl:%d", "2ps-h:%d", "overl-h:%d", "2ps-h", "overl-h"};
    int k = randnet_below(g, h ? 11 : 5);
    if (h && h < 4 && k >= 9) k -= 2; /* the hybrids' default of 4 bands needs 4 rows */
    snprintf(buf, len, plain[k], k == 4 ? 2 + randnet_below(g, 4) : 1 + randnet_below(g, h ? h : 1));
}

/* ckpt:K lowered to the most segments the net's clean cuts give (the parser refuses more). */
static void fit_ckpt(const net *n, char *pl, size_t len)
{
    int k;
    plan p;
    err e;
    if (sscanf(pl, "ckpt:%d", &k) != 1) return;
    for (; k > 2 && plan_parse(&p, n, pl, &e); k--) snprintf(pl, len, "ckpt:%d", k - 1);
    if (k > 2 || !plan_parse(&p, n, pl, &e)) plan_free(&p);
}

/* The property: `count` random nets from `seed` (redrawn when a map becomes empty), RUNS
 * configurations each. */
static void random_configs(int count, unsigned long long seed)
{
    randnet_rng g = {seed};
    const int batches[] = {1, 2, 3, 4, 8, 16};
    int nets = 0, odd = 0, dags = 0, custom = 0;
    stats st = {0};
    char text[8192], pl[256];
    while (nets < count) {
        int h = 5 + randnet_below(&g, randnet_below(&g, 4) ? 76 : 220); /* a quarter up to 224 rows */
        randnet_text(&g, RANDNET_WIDE, text, sizeof text, h);
        net n;
        err e;
        if (net_parse(&n, text, "random.net", &e)) continue;
        nets++, odd += h % 2, dags += strstr(text, "add ") != NULL;
        int rows = prefix_rows(&n);
        for (int i = 0; i < RUNS; i++) {
            bool own = randnet_below(&g, 3) == 0;
            if (own) random_plan(&g, &n, pl, sizeof pl);
            else random_preset(&g, rows, pl, sizeof pl);
            fit_ckpt(&n, pl, sizeof pl);
            custom += own;
            int batch = batches[randnet_below(&g, 6)];
            check(&n, pl, batch, randnet_below(&g, 2) ? SCHED_ADAM : SCHED_SGD, &st, true, text);
        }
        net_free(&n);
    }
    printf("== random: %d nets (%d odd heights, %d with residual blocks); %d configurations, %d of them custom plans\n",
           nets, odd, dags, st.count, custom);
    summary("random", &st);
}

/* test_closed [NETS [SEED]]: more random nets, or another sequence of them, than the default. */
int main(int argc, char **argv)
{
    const int small[] = {16}, full[] = {1, 2, 8, 32};
    const char *vgg_small[] = {"rows(overl,fp=2,bp=4)@conv1_1..pool2; ckpt@conv3_1..pool3",
                               "rows(2ps,3,cuts=3/5)@conv1_1..pool2",
                               "offload(conv)@conv1_1..pool2; ckpt@conv3_1..relu4", NULL};
    const char *resnet_small[] = {"rows(overl,fp=4,bp=2)@conv1..layer1.0.relu3; offload(all)@layer2.0.conv1..loss",
                                  "ckpt@conv1..layer1.0.relu3; rows(2ps,3)@layer2.0.conv1..layer2.1.relu3", NULL};
    const char *vgg16[] = {"rows(overl,fp=2,bp=8)@conv1_1..pool2; ckpt@conv3_1..pool3",
                           "offload(conv)@conv1_1..pool5", NULL};
    random_configs(argc > 1 ? atoi(argv[1]) : NETS, argc > 2 ? strtoull(argv[2], NULL, 0) : 0x2545F4914F6CDD1Dull);
    check_net("vgg-small", 0, small, 1, 0, vgg_small);
    check_net("resnet-small", 0, small, 1, 0, resnet_small);
    check_net("kernels", 0, small, 1, 0, NULL);
    check_net("vgg16", 224, full, 4, 8, vgg16);
    check_net("resnet50", 224, full, 4, 8, NULL);
    printf("%d configurations, worst |closed - replay| / replay %.4f%% (acceptance bound %.0f%%; asserted: equal to the "
           "byte): %s\n", configs, 100.0 * worst_all, 100.0 * BOUND, failures ? "FAILED" : "all equal");
    return failures != 0;
}
