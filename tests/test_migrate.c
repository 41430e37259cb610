/* Migration (+migrate, sim/migrate.c) run by the engine, against the same plan without it.
 *
 * For every plan family and both optimizers, two iterations from the same weights and batches:
 * the losses, iteration 0's gradients and the final parameters equal the plain plan's bit for bit
 * (the optimizer steps layer by layer and its state makes round trips to the host, so any
 * misplaced move or step shows here), the measured peak equals the replay's byte for byte per
 * category, and migrating everything never raises the peak. Then, from the simulator alone, the
 * point of it: VGG-16 at 224x224, batch 8, Adam, under `+migrate` peaks below the persistent bytes
 * (parameters, gradients, optimizer state) that bound every plan without it.
 * Usage: test_migrate NET IMAGE BATCH [few]   (IMAGE 0: the net's own) | test_migrate floor */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/run.h"
#include "io/data.h"
#include "sim/sim.h"

static int failures;

typedef struct {
    plan p;
    run r;
    sim_result pred;
    float **params; /* [layer] the final parameters, NULL without */
} outcome;

static int run_one(const net *n, const char *text, sched_optimizer opt, int batch, outcome *o)
{
    err e;
    memset(o, 0, sizeof *o);
    sched_cfg cfg = {.batch = batch, .optimizer = opt, .ws = ops_cpu.ws};
    const net_layer *in = &n->layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n->layers[n->n - 1].c, 7);
    run_cfg c = {.n = n, .p = &o->p, .sched = cfg, .ops = &ops_cpu, .hp = exec_default_hparams(opt), .seed = 3, .iters = 2,
                 .batches = data_batches(&d), .grads = true};
    if (plan_parse(&o->p, n, text, &e) || sim_run(n, &o->p, &cfg, &sim_device_cpu, &o->pred, NULL, &e) || run_plan(&o->r, &c, &e)) {
        printf("FAIL %s: %s\n", text, e.msg);
        return -1;
    }
    o->params = err_calloc((size_t)n->n, sizeof(float *));
    for (int L = 0; L < n->n; L++) o->params[L] = exec_param_copy(&o->r.x, BUF_PARAM, L, NULL);
    return 0;
}

static void drop(const net *n, outcome *o)
{
    for (int L = 0; L < n->n; L++) free(o->params[L]);
    free(o->params);
    run_free(&o->r);
    plan_free(&o->p);
}

static bool mem_equal(const outcome *o)
{
    bool ok = o->r.sum.peak == o->pred.replay.peak;
    for (int k = 0; k < MEM_NCAT; k++)
        ok &= o->r.sum.at_peak[k] == o->pred.replay.at_peak[k] && o->r.sum.max[k] == o->pred.replay.max[k];
    return ok;
}

static bool same_training(const net *n, const outcome *a, const outcome *b)
{
    if (memcmp(a->r.loss, b->r.loss, 2 * sizeof(float)) || memcmp(a->r.grads, b->r.grads, (size_t)net_params(n) * sizeof(float)))
        return false;
    for (int L = 0; L < n->n; L++)
        if (n->layers[L].params && memcmp(a->params[L], b->params[L], (size_t)n->layers[L].params * sizeof(float))) return false;
    return true;
}

/* every plan family with every migration, both optimizers; `few`: +migrate on two plans, Adam */
static void engine(const net *n, int batch, bool few)
{
    const char *plans[] = {"layer", "2ps:3", "ckpt-sqrt", "vdnn-conv", "overl:3", "2ps:2+dpr:fp16"};
    const char *mods[] = {"migrate", "migrate:grads", "migrate:weights", "migrate:optim", "migrate:grads:optim"};
    size_t n_plans = few ? 2 : sizeof plans / sizeof *plans, n_mods = few ? 1 : sizeof mods / sizeof *mods;
    for (int o = few; o < 2; o++) {
        sched_optimizer opt = o ? SCHED_ADAM : SCHED_SGD;
        for (size_t i = 0; i < n_plans; i++) {
            outcome ref;
            if (run_one(n, plans[i], opt, batch, &ref)) {
                failures++;
                continue;
            }
            for (size_t m = 0; m < n_mods; m++) {
                char text[128];
                snprintf(text, sizeof text, "%s+%s", plans[i], mods[m]);
                outcome x;
                if (run_one(n, text, opt, batch, &x)) {
                    failures++;
                    continue;
                }
                bool same = same_training(n, &x, &ref), mem = mem_equal(&x);
                bool lower = m || x.r.sum.peak <= ref.r.sum.peak;
                printf("%s %-12s %-4s %-30s training %-9s peak %10lld (plain %10lld) = replay %-3s host %lld\n",
                       same && mem && lower ? "ok  " : "FAIL", n->name, o ? "adam" : "sgd", text, same ? "identical" : "DIFFERS",
                       (long long)x.r.sum.peak, (long long)ref.r.sum.peak, mem ? "yes" : "NO", (long long)x.r.sum.host_peak);
                failures += !(same && mem && lower);
                drop(n, &x);
            }
            drop(n, &ref);
        }
    }
}

/* VGG-16, 224x224, batch 8, Adam: +migrate with a plan that keeps few activations peaks below the
 * persistent floor of every plain plan (with `layer`'s activations it does not: printed). */
static void floor_check(void)
{
    net n;
    err e;
    if (net_load_named(&n, "vgg16", &e)) {
        printf("FAIL %s\n", e.msg), failures++;
        return;
    }
    sched_cfg cfg = {.batch = 8, .optimizer = SCHED_ADAM};
    int64_t floor = net_params(&n) * 4 * 4; /* parameters, gradients, Adam's two moments */
    const char *plans[] = {"2ps:4+migrate", "ckpt-sqrt+migrate", "layer+migrate"};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        plan p;
        sim_result r;
        if (plan_parse(&p, &n, plans[i], &e) || sim_run(&n, &p, &cfg, &sim_device_cpu, &r, NULL, &e)) {
            printf("FAIL %s: %s\n", plans[i], e.msg), failures++;
            continue;
        }
        bool below = r.replay.peak < floor;
        printf("%s vgg16 adam batch 8 %-18s peak %lld %s floor %lld (%.0f%% of it)\n", below ? "ok  " : i == 2 ? "info" : "FAIL",
               plans[i], (long long)r.replay.peak, below ? "<" : ">=", (long long)floor, 100.0 * (double)r.replay.peak / (double)floor);
        failures += !below && i < 2;
        plan_free(&p);
    }
    net_free(&n);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "floor")) {
        floor_check();
    } else if (argc == 4 || (argc == 5 && !strcmp(argv[4], "few"))) {
        net n;
        err e;
        int image = atoi(argv[2]);
        if (net_load_named(&n, argv[1], &e) || (image && net_set_input(&n, image, image, &e))) {
            fprintf(stderr, "FAIL %s\n", e.msg);
            return 1;
        }
        engine(&n, atoi(argv[3]), argc == 5);
        net_free(&n);
    } else {
        fprintf(stderr, "usage: test_migrate NET IMAGE BATCH [few] | test_migrate floor\n");
        return 2;
    }
    printf("%s\n", failures ? "FAILED" : "migration as required");
    return failures != 0;
}
