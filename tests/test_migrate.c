/* Migration (+migrate, sim/lower/migrate.c) run by the engine, against the same plan without it.
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

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "tests/harness.h"
#include "sim/net/load.h"

static int failures;

/* Two iterations of `text` (tests/harness.h) and the final parameters of every layer ([layer],
 * NULL where it has none); -1 after printing why not. */
static int run_one(const net *n, const char *text, sched_optimizer opt, int batch, outcome *o, float ***params)
{
    err e;
    if (harness_run_iters(n, text, batch, &ops_cpu, opt, 2, o, &e)) {
        printf("FAIL %s: %s\n", text, e.msg);
        return -1;
    }
    *params = err_calloc((size_t)n->n, sizeof(float *));
    for (int L = 0; L < n->n; L++) (*params)[L] = exec_param_copy(&o->r.x, BUF_PARAM, L, NULL);
    return 0;
}

static void drop(const net *n, outcome *o, float **params)
{
    for (int L = 0; L < n->n; L++) free(params[L]);
    free(params);
    harness_drop(o);
}

static bool same_training(const net *n, const outcome *a, float **pa, const outcome *b, float **pb)
{
    if (memcmp(a->r.loss, b->r.loss, 2 * sizeof(float)) || memcmp(a->r.grads, b->r.grads, (size_t)net_params(n) * sizeof(float)))
        return false;
    for (int L = 0; L < n->n; L++)
        if (n->layers[L].params && memcmp(pa[L], pb[L], (size_t)n->layers[L].params * sizeof(float))) return false;
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
            float **ref_params;
            if (run_one(n, plans[i], opt, batch, &ref, &ref_params)) {
                failures++;
                continue;
            }
            for (size_t m = 0; m < n_mods; m++) {
                char text[128];
                snprintf(text, sizeof text, "%s+%s", plans[i], mods[m]);
                outcome x;
                float **x_params;
                if (run_one(n, text, opt, batch, &x, &x_params)) {
                    failures++;
                    continue;
                }
                bool same = same_training(n, &x, x_params, &ref, ref_params), mem = harness_mem_equal(&x);
                bool lower = m || x.r.sum.peak <= ref.r.sum.peak;
                printf("%s %-12s %-4s %-30s training %-9s peak %10lld (plain %10lld) = replay %-3s host %lld\n",
                       same && mem && lower ? "ok  " : "FAIL", n->name, o ? "adam" : "sgd", text, same ? "identical" : "DIFFERS",
                       (long long)x.r.sum.peak, (long long)ref.r.sum.peak, mem ? "yes" : "NO", (long long)x.r.sum.host_peak);
                failures += !(same && mem && lower);
                drop(n, &x, x_params);
            }
            drop(n, &ref, ref_params);
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
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
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
