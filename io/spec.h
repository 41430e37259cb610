/* spec: experiment specs, "key = value" text files (experiments/README.md has the format, every key
 * and its default). A spec names a grid — nets x images x batches x optimizers x plans — and what
 * to do with each point: simulate it (run = sim, optionally measuring it on the engine too),
 * validate each configuration's plans against `layer` (run = validate), or train each plan
 * (run = train); all of it goes into one result file. It also names the figures drawn from that
 * file and whether `lrcnn reproduce` runs it.
 * Not done here: running anything (cli/cli_sweep.c), drawing figures (plots/). */
#ifndef LRCNN_SPEC_H
#define LRCNN_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sim/base/err.h"
#include "sim/plan/plan.h"

#define SPEC_MAX 64
#define SPEC_FIGURES 16

/* Iterations of an engine run, by default: lrcnn validate's and lrcnn train's (and run = validate
 * or train specs', which default to their commands'). */
#define SPEC_VALIDATE_ITERS 2
#define SPEC_TRAIN_ITERS 10

typedef enum { SPEC_SIM, SPEC_VALIDATE, SPEC_TRAIN } spec_run;

typedef struct {
    char path[256];
    char name[64];
    char output[256];            /* "" = results/<name>.h5 */
    char calibrate[256];         /* "" = none; a result file whose measured encodings calibrate predictions */
    char profile[256];           /* "" = none; a device profile (lrcnn calibrate) for the time predictions */
    char device[16];
    char backend[8];             /* the engine of run = validate and train: "cpu" or "cuda" (lrcnn
                                    reproduce runs the cuda specs only with --backend cuda) */
    char bn[PLAN_BN_TEXT_LEN];   /* "" = auto; a plan item's own " bn=" wins */
    spec_run run;
    int n_nets, n_batches, n_images, n_optimizers;
    char nets[SPEC_MAX][64];
    int batches[SPEC_MAX];
    int images[SPEC_MAX];        /* 0 = the net file's own size; else the height */
    int images_w[SPEC_MAX];      /* the width of an HxW item; 0: square (images[k] x images[k]) */
    char optimizers[2][8];
    char **plans;                /* expanded plan texts, as written */
    int n_plans;
    int plans_line;              /* where (for errors about a plan on some net) */
    bool timeline;               /* store each run's memory timelines (large; for timeline figures) */
    int measure;                 /* engine iterations: sim 0 = off; validate and train: per plan */
    long long seed;              /* engine runs: weights and synthetic data */
    char search[8];              /* "" = a grid; "batch" / "image": the largest that fits each budget */
    int n_budgets;
    int64_t budgets[SPEC_MAX];   /* bytes */
    int n_figures;
    char figures[SPEC_FIGURES][32]; /* plots/<name>.py, each checked to exist */
    bool reproduce;              /* lrcnn reproduce runs this spec (default on) */
} spec;

int spec_load(spec *s, const char *path, err *e);
/* The same from an open stream (path names it in messages and gives the default name); f stays open. */
int spec_read(spec *s, FILE *f, const char *path, err *e);
void spec_free(spec *s);
/* Number of runs the spec writes (searches: one per budget instead of per batch or image;
 * validate: `layer` added to each configuration where the plans lack it). */
long long spec_runs(const spec *s);
/* The most runs a spec may have (spec_load refuses more before anything is allocated for them):
 * what a result file holds, its runs being named by five digits (io/h5.c). */
#define SPEC_MAX_RUNS 100000
const char *spec_run_name(spec_run r);

#endif
