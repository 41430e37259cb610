/* Each iteration's parameter gradients are its own. Bands and micro-batches add into a gradient,
 * so the optimizer step zeroes each one it takes (engine/exec.c, update_layer) and the next
 * iteration's contributions add to zeros. Checked where nothing else changes between iterations:
 * SGD at learning rate 0 (the weights stay), the same batch every iteration, no dropout and
 * train-mode BatchNorm (whose running statistics move, but are not read): then the third
 * iteration's gradients must equal the first's bit for bit, for every kind with parameters
 * (convolutions plain, grouped, depthwise and transposed; fully connected; BatchNorm, group and
 * layer normalization, layer scale), under `layer`, a row plan whose bands add up each gradient,
 * and +migrate, which steps each layer as soon as its gradient is complete. A gradient left from
 * an earlier iteration adds in. (Before this test only the 5-minute convergence run would see
 * that.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run.h"
#include "io/data.h"
#include "sim/net/load.h"

static int failures;

/* The same batch every iteration: data d's first. */
static void same_batch(const void *ctx, int iter, int n, float *images, int64_t *labels)
{
    (void)iter;
    data_batch(ctx, 0, n, images, labels);
}

typedef struct {
    float *first, *now;
    int64_t count;
} capture;

/* Every parameter gradient, layer by layer, once an iteration's are complete (before the step). */
static void keep(exec *x, int iter, int layer, void *ctx)
{
    capture *k = ctx;
    int64_t at = 0;
    for (int L = 0; L < x->n->n; L++) {
        int64_t m = x->n->layers[L].params;
        float *g = m && (layer < 0 || layer == L) ? exec_param_copy(x, BUF_PGRAD, L, NULL) : NULL;
        if (g) memcpy((iter ? k->now : k->first) + at, g, (size_t)m * sizeof(float)), free(g);
        at += m;
    }
}

static void check(const net *n, const char *text, int batch)
{
    err e;
    plan p;
    if (plan_parse(&p, n, text, &e)) {
        printf("FAIL %s %s: %s\n", n->name, text, e.msg), failures++;
        return;
    }
    data d;
    data_synthetic_for(&d, n, 7);
    capture k = {.count = net_params(n)};
    k.first = err_calloc((size_t)k.count + 1, sizeof(float)), k.now = err_calloc((size_t)k.count + 1, sizeof(float));
    exec_hparams hp = exec_default_hparams(SCHED_SGD);
    hp.lr = 0;
    run_cfg c = {.n = n, .p = &p, .sched = {.batch = batch, .optimizer = SCHED_SGD, .ws = ops_cpu.ws}, .ops = &ops_cpu, .hp = hp,
                 .seed = 3, .iters = 3, .batches = {same_batch, &d}, .before_update = keep, .ctx = &k};
    run r;
    if (run_plan(&r, &c, &e)) {
        printf("FAIL %s %s: %s\n", n->name, text, e.msg), failures++;
    } else {
        int64_t differ = 0, zero = 0;
        for (int64_t i = 0; i < k.count; i++) differ += memcmp(&k.first[i], &k.now[i], sizeof(float)) != 0, zero += k.first[i] == 0;
        bool ok = differ == 0 && zero < k.count;
        printf("%s %-14s %-24s %lld parameters: %lld gradients differ from the first iteration's\n", ok ? "ok  " : "FAIL", n->name, text,
               (long long)k.count, (long long)differ);
        failures += !ok;
        run_free(&r);
    }
    free(k.first), free(k.now);
    data_free(&d);
    plan_free(&p);
}

int main(void)
{
    /* what the shipped nets without dropout lack: depthwise and grouped convolutions, layer scale */
    static const char grouped[] = "net grouped\n"
                                  "input data c=3 h=16 w=16\n"
                                  "conv  conv1 c=8 k=3 p=1\n"
                                  "conv  dw2 c=8 k=3 p=1 groups=8 bias=0\n"
                                  "conv  conv3 c=8 k=3 p=1 groups=2\n"
                                  "scale ls3\n"
                                  "relu  relu3\n"
                                  "gap   gap\n"
                                  "fc    fc c=4\n"
                                  "loss  loss\n";
    const char *files[] = {"vgg-small", "resnet-small", "norms", "upconv"};
    const char *plans[] = {"layer", "2ps:3", "layer+migrate"};
    for (int f = 0; f <= 4; f++) {
        net n;
        err e;
        if (f < 4 ? net_load_named(&n, files[f], &e) : net_parse(&n, grouped, "grouped.net", &e)) {
            printf("FAIL %s\n", e.msg), failures++;
            continue;
        }
        for (int q = 0; q < 3; q++) check(&n, plans[q], 2);
        net_free(&n);
    }
    printf(failures ? "FAILED\n" : "every iteration's gradients are its own\n");
    return failures != 0;
}
