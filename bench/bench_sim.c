/* Simulator speed: time per plan evaluation (lower + replay + closed form) for VGG-16 and
 * ResNet-50 at 224x224, and a 10,000-configuration sweep (batch x plans x image sizes, nets
 * re-inferred per image), on this machine. Figures, not assertions: targets are < 100 us per
 * VGG-16 evaluation and < 2 s per 10,000 configurations. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim/heap.h"
#include "sim/sim.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double per_eval_us(const net *n, const char *text, int reps)
{
    plan p;
    err e;
    sched_cfg cfg = {.batch = 8, .optimizer = SCHED_ADAM};
    sim_result r;
    if (plan_parse(&p, n, text, &e)) { fprintf(stderr, "%s\n", e.msg); return -1; }
    double t0 = now();
    for (int i = 0; i < reps; i++) sim_run(n, &p, &cfg, &sim_device_cpu, &r, NULL, &e);
    double us = (now() - t0) / reps * 1e6;
    plan_free(&p);
    return us;
}

int main(void)
{
    const char *plans[] = {"layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "2ps:4", "overl:4", "2ps:8", "overl:8", "2ps-h", "overl-h"};
    const int np = sizeof plans / sizeof *plans;
    const char *nets[] = {"vgg16", "resnet50"};
    err e;
    heap_tune(HEAP_SWEEP); /* as lrcnn sweep does */
    printf("simulator: one evaluation = parse-free lower + replay + closed form, batch 8, 224x224\n\n");
    printf("  %-10s", "plan");
    for (int k = 0; k < 2; k++) printf(" %14s", nets[k]);
    printf("\n");
    net n[2];
    for (int k = 0; k < 2; k++)
        if (net_load_named(&n[k], nets[k], &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    double vgg_total = 0;
    for (int p = 0; p < np; p++) {
        printf("  %-10s", plans[p]);
        for (int k = 0; k < 2; k++) {
            double us = per_eval_us(&n[k], plans[p], k ? 50 : 200);
            if (!k) vgg_total += us;
            printf(" %11.1f us", us);
        }
        printf("\n");
    }
    printf("  VGG-16 mean over presets: %.1f us per evaluation (target < 100 us)\n\n", vgg_total / np);

    /* 10,000 configurations: 2 nets x 10 plans x 25 batches x 20 image sizes */
    int batches = 25, images = 20, count = 0;
    double t0 = now();
    for (int k = 0; k < 2; k++)
        for (int im = 0; im < images; im++) {
            if (net_set_input(&n[k], 128 + 16 * im, 128 + 16 * im, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
            for (int p = 0; p < np; p++) {
                plan pl;
                if (plan_parse(&pl, &n[k], plans[p], &e)) return fprintf(stderr, "%s\n", e.msg), 1;
                for (int b = 0; b < batches; b++) {
                    sched_cfg cfg = {.batch = 1 + 4 * b, .optimizer = SCHED_ADAM};
                    sim_result r;
                    if (sim_run(&n[k], &pl, &cfg, &sim_device_cpu, &r, NULL, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
                    count++;
                }
                plan_free(&pl);
            }
        }
    double secs = now() - t0;
    printf("sweep: %d configurations (VGG-16 and ResNet-50, 10 presets, 25 batches, 20 sizes 128..432) in %.3f s "
           "(target < 2 s), %.1f us each\n", count, secs, secs / count * 1e6);
    net_free(&n[0]);
    net_free(&n[1]);
    return 0;
}
