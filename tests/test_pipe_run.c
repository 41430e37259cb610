/* A pipeline run by the engine (engine/pipe_run.h): P CPU engines in one process, one a device,
 * each running its schedule composed from the net's lowering at the micro-batch size
 * (sim/predict/pipe_sched.h), exchanging the activations and gradients at the cuts.
 *
 * For VGG-16 and ResNet-50 (batch 8, 32x32: the shapes are the nets', the maps small enough for a
 * test), P = 2 and 4, m = 4 and 8, GPipe and 1F1B at balanced cuts, VGG-16 interleaved too (P = 2,
 * v = 2), a 2PS row segment on the first stage of each, and over two devices checkpointed stages
 * (ckpt-sqrt), offloaded maps (vdnn-conv) and encoded ones (+gist, +dpr:fp16):
 *   - every device's measured peak (the engine's accounting allocator) = the replay of its schedule
 *     (a data-sized encoding, gist's sparse maps, at the bytes the engine stored);
 *   - pipe_device_peak (what `lrcnn pipe` and the split search count: per-stage sums) against that
 *     replay: never under it; its largest excess printed;
 *   - the weight gradients, summed over the micro-batches, equal bit for bit to one device running
 *     the same micro-batches (P = 1): the cut and the order move no value; and, on VGG-16 (no batch
 *     norm), their mean over the micro-batches equal to one device's `layer` plan on the whole
 *     batch within fp32 (with batch norm in train mode a micro-batch's statistics are its own, so
 *     ResNet-50 is held to the first comparison only).
 * Usage: test_pipe_run [NET ...] (default vgg16 resnet50). */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "engine/pipe_run.h"
#include "io/data.h"
#include "sim/net/kind.h"
#include "sim/net/load.h"
#include "tests/expect.h"

enum { BATCH = 8, SIZE = 32 };

/* EXPECT as an expression: whether cond held. */
static bool ok(bool cond, const char *fmt, ...)
{
    va_list a;
    va_start(a, fmt);
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, a);
    va_end(a);
    EXPECT(cond, "%s", msg);
    return cond;
}

typedef struct {
    const net *n;
    float *images;
    int64_t *labels;
    int runs;
    double excess; /* the model's largest excess over the replay, relative */
} bench;

/* One run; its gradients into *out (the caller frees), or NULL on failure (counted). */
static bool run_one(bench *b, const char *text, pipe_kind k, int P, int m, int v, const int *cuts, pipe_run_result *out)
{
    plan p;
    err e;
    pipe_cfg c = {k, P, m, v};
    int S = pipe_stages(&c), first[64];
    if (plan_parse(&p, b->n, text, &e)) return ok(false, "%s: %s", text, e.msg);
    if (cuts) memcpy(first, cuts, sizeof(int) * (size_t)(S + 1));
    else {
        sched_cfg cfg = {.batch = BATCH / m, .optimizer = SCHED_SGD};
        if (pipe_balanced_cuts(b->n, &p, &cfg, &sim_device_cpu, S, first, &e)) return plan_free(&p), ok(false, "%s", e.msg);
    }
    int rc = pipe_run(b->n, &p, SCHED_SGD, BATCH, &c, first, &ops_cpu, b->images, b->labels, 3, out, &e);
    plan_free(&p);
    if (!ok(rc == 0, "%s %s P=%d m=%d: %s", b->n->name, text, P, m, e.msg)) return false;
    b->runs++;
    for (int d = 0; d < P; d++) {
        const pipe_run_dev *dv = &out->dev[d];
        EXPECT(dv->measured == dv->stored, "%s %s %s P=%d m=%d device %d: measured %lld, replay %lld (at the stored sizes)", b->n->name, text,
               pipe_kind_name(k), P, m, d, (long long)dv->measured, (long long)dv->stored);
        EXPECT(dv->model >= dv->replay, "%s %s %s P=%d m=%d device %d: per-stage sums %lld under the replay %lld", b->n->name, text,
               pipe_kind_name(k), P, m, d, (long long)dv->model, (long long)dv->replay);
        double x = (double)(dv->model - dv->replay) / (double)dv->replay;
        if (x > b->excess) b->excess = x;
    }
    return true;
}

/* Gradients a and b: bit for bit (scale 1), or a / scale within tol of b relative to b's largest. */
static void same_grads(const pipe_run_result *a, const pipe_run_result *b, double scale, double tol, const char *what)
{
    for (int L = 0; L < a->n; L++) {
        if (!ok((a->grad[L] == NULL) == (b->grad[L] == NULL), "%s: layer %d's gradient on one side only", what, L) || !a->grad[L]) continue;
        if (tol == 0) {
            EXPECT(!memcmp(a->grad[L], b->grad[L], sizeof(float) * (size_t)a->count[L]), "%s: layer %d's gradient differs", what, L);
            continue;
        }
        double big = 0, diff = 0;
        for (int64_t i = 0; i < a->count[L]; i++)
            big = fmax(big, fabs(b->grad[L][i])), diff = fmax(diff, fabs(a->grad[L][i] / scale - b->grad[L][i]));
        EXPECT(diff <= tol * big, "%s: layer %d's gradient %.3g off (largest %.3g)", what, L, diff, big);
    }
}

static void check_net(const char *name)
{
    net n;
    err e;
    if (!ok(!net_load_named(&n, name, &e) && !net_set_input(&n, SIZE, SIZE, &e), "%s: %s", name, e.msg)) return;
    data dt;
    data_synthetic_for(&dt, &n, 7);
    bench b = {.n = &n, .images = err_calloc((size_t)BATCH * n.layers[0].c * SIZE * SIZE, sizeof(float)),
               .labels = err_calloc((size_t)BATCH * net_labels_per_image(&n), sizeof(int64_t))};
    data_batch(&dt, 0, BATCH, b.images, b.labels);
    bool bn = false;
    for (int L = 0; L < n.n; L++) bn |= kind_of(&n.layers[L])->running;
    pipe_run_result whole;
    bool have_whole = run_one(&b, "layer", PIPE_GPIPE, 1, 1, 1, NULL, &whole);
    for (int m = 4; m <= 8; m *= 2)
        for (int k = PIPE_GPIPE; k <= PIPE_1F1B; k++) {
            pipe_run_result one, many;
            if (!run_one(&b, "layer", (pipe_kind)k, 1, m, 1, NULL, &one)) continue;
            if (have_whole && !bn) same_grads(&one, &whole, m, 1e-5, "m micro-batches vs the whole batch");
            for (int P = 2; P <= 4; P += 2)
                if (run_one(&b, "layer", (pipe_kind)k, P, m, 1, NULL, &many)) same_grads(&many, &one, 1, 0, "P devices vs one"), pipe_run_free(&many);
            if (!strcmp(name, "vgg16") && k == PIPE_1F1B && run_one(&b, "layer", PIPE_INTERLEAVED, 2, m, 2, NULL, &many))
                same_grads(&many, &one, 1, 0, "interleaved vs one device"), pipe_run_free(&many);
            pipe_run_free(&one);
        }
    /* the first stage's own row plan: 2PS over its first layers, the cut after them */
    const char *last = !strcmp(name, "vgg16") ? "pool2" : "layer1.2.relu3";
    char text[128];
    snprintf(text, sizeof text, "rows(2ps,4)@%s..%s", n.layers[1].name, last);
    int cuts[3] = {1, net_find(&n, last) + 1, n.n};
    for (int k = PIPE_GPIPE; k <= PIPE_1F1B; k++) {
        pipe_run_result one, rows;
        if (run_one(&b, text, (pipe_kind)k, 1, 4, 1, NULL, &one)) {
            if (run_one(&b, text, (pipe_kind)k, 2, 4, 1, cuts, &rows)) same_grads(&rows, &one, 1, 0, "rows on stage 0 vs one device"), pipe_run_free(&rows);
            if (have_whole) same_grads(&one, &whole, 4, bn ? 1e30 : 1e-5, "rows in micro-batches vs the whole batch");
            pipe_run_free(&one);
        }
    }
    /* checkpointed stages (sqrt(n) segments, the cuts between them), offloaded maps (each device moves
     * the maps its backward reads) and encoded ones (each device encodes its own copy) */
    static const char *const others[] = {"ckpt-sqrt", "vdnn-conv", "layer+gist", "layer+dpr:fp16"};
    for (size_t o = 0; o < sizeof others / sizeof *others; o++)
        for (int k = PIPE_GPIPE; k <= PIPE_1F1B; k++) {
            pipe_run_result one, many;
            if (run_one(&b, others[o], (pipe_kind)k, 1, 4, 1, NULL, &one)) {
                if (run_one(&b, others[o], (pipe_kind)k, 2, 4, 1, NULL, &many)) same_grads(&many, &one, 1, 0, others[o]), pipe_run_free(&many);
                pipe_run_free(&one);
            }
        }
    printf("%s %s: %d pipeline runs, every device's measured peak = its schedule's replay; per-stage sums at most %.4f%% over it\n",
           failures ? "FAIL" : "ok  ", name, b.runs, 100 * b.excess);
    if (have_whole) pipe_run_free(&whole);
    free(b.images), free(b.labels);
    data_free(&dt);
    net_free(&n);
}

int main(int argc, char **argv)
{
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
    static const char *const nets[] = {"vgg16", "resnet50"};
    if (argc > 1)
        for (int i = 1; i < argc; i++) check_net(argv[i]);
    else
        for (size_t i = 0; i < sizeof nets / sizeof *nets; i++) check_net(nets[i]);
    printf("%s pipelines on the engine (%d checks)\n", failures ? "FAIL" : "ok  ", checks);
    return failures != 0;
}
