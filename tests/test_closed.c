/* Closed form against replay: for every preset on the test nets (batch 16, every band count of the
 * row presets) and on VGG-16 and ResNet-50 at 224x224 (batch 1, 2, 8 and 32), with SGD and Adam,
 * plus a few custom plans, the closed-form peak (paper/model.md) must be within TOL of the replay
 * peak, which the engine measures byte for byte (test_exact). One line per configuration with the
 * error; a configuration over TOL is named with why: the categories the two disagree on at their
 * peaks and the step at which replay peaks. The closed form never sees a schedule; this test
 * lowers one only to explain a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

#define TOL 0.02 /* the project's acceptance bound for the closed form (paper/model.md) */

static int failures, configs;
static double worst_all;

typedef struct {
    double worst, sum;
    int count;
} stats;

/* Why closed and replay differ: categories at their peaks and replay's peak step. */
static void explain(const net *n, const plan *p, const sched_cfg *cfg, const sim_result *r)
{
    for (int k = 0; k < MEM_NCAT; k++)
        if (r->closed.at_peak[k] != r->replay.at_peak[k])
            printf("       %-12s closed %12lld  replay %12lld at the peak\n", mem_cat_name((mem_cat)k),
                   (long long)r->closed.at_peak[k], (long long)r->replay.at_peak[k]);
    sched s;
    err e;
    if (sched_lower(&s, n, p, cfg, &e)) return;
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

static void check(const net *n, const char *text, int batch, sched_optimizer opt, stats *st)
{
    plan p;
    err e;
    sim_result r;
    sched_cfg cfg = {.batch = batch, .optimizer = opt};
    if (plan_parse(&p, n, text, &e) || sim_run(n, &p, &cfg, &sim_device_cpu, &r, NULL, &e)) {
        printf("FAIL %s %s batch %d: %s\n", n->name, text, batch, e.msg);
        failures++;
        return;
    }
    double rel = (double)(r.closed.peak - r.replay.peak) / (double)r.replay.peak;
    int64_t sum = 0;
    for (int k = 0; k < MEM_NCAT; k++) sum += k == MEM_HOST ? 0 : r.closed.at_peak[k];
    bool ok = fabs(rel) <= TOL && sum == r.closed.peak;
    printf("%s %-13s batch %2d %-4s %-34s replay %12lld closed %12lld  %+7.3f%%\n", ok ? "ok  " : "FAIL", n->name, batch,
           opt == SCHED_ADAM ? "adam" : "sgd", text, (long long)r.replay.peak, (long long)r.closed.peak, 100.0 * rel);
    if (sum != r.closed.peak) printf("       closed categories sum to %lld, not the peak\n", (long long)sum);
    if (!ok) explain(n, &p, &cfg, &r);
    failures += !ok;
    configs++;
    if (fabs(rel) > st->worst) st->worst = fabs(rel);
    if (fabs(rel) > worst_all) worst_all = fabs(rel);
    st->sum += fabs(rel), st->count++;
    plan_free(&p);
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
            for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) check(&n, fixed[i], batches[b], opt, &st);
            for (int r = 1; r <= h; r++) {
                char text[32];
                snprintf(text, sizeof text, "2ps:%d", r);
                check(&n, text, batches[b], opt, &st);
                snprintf(text, sizeof text, "overl:%d", r);
                check(&n, text, batches[b], opt, &st);
            }
            for (int i = 0; extra && extra[i]; i++) check(&n, extra[i], batches[b], opt, &st);
        }
    printf("== %s: %d configurations, closed vs replay max |error| %.3f%%, mean %.3f%%\n\n", name, st.count,
           100.0 * st.worst, st.count ? 100.0 * st.sum / st.count : 0.0);
    net_free(&n);
}

int main(void)
{
    const int small[] = {16}, full[] = {1, 2, 8, 32};
    const char *vgg_small[] = {"rows(overl,fp=2,bp=4)@conv1_1..pool2; ckpt@conv3_1..pool3",
                               "rows(2ps,3,cuts=3/5)@conv1_1..pool2",
                               "offload(conv)@conv1_1..pool2; ckpt@conv3_1..relu4", NULL};
    const char *resnet_small[] = {"rows(overl,fp=4,bp=2)@conv1..layer1.0.relu3; offload(all)@layer2.0.conv1..loss",
                                  "ckpt@conv1..layer1.0.relu3; rows(2ps,3)@layer2.0.conv1..layer2.1.relu3", NULL};
    const char *vgg16[] = {"rows(overl,fp=2,bp=8)@conv1_1..pool2; ckpt@conv3_1..pool3",
                           "offload(conv)@conv1_1..pool5", NULL};
    check_net("vgg-small", 0, small, 1, 0, vgg_small);
    check_net("resnet-small", 0, small, 1, 0, resnet_small);
    check_net("kernels", 0, small, 1, 0, NULL);
    check_net("vgg16", 224, full, 4, 8, vgg16);
    check_net("resnet50", 224, full, 4, 8, NULL);
    printf("%d configurations, worst |closed - replay| / replay %.3f%% (tolerance %.0f%%): %s\n", configs, 100.0 * worst_all,
           100.0 * TOL, failures ? "FAILED" : "all within");
    return failures != 0;
}
