/* spec: experiment specs, "key = value" text files (experiments/README.md). A spec names a grid:
 * nets x batches x images x plans x optimizers, evaluated on one device profile into one file. */
#ifndef LRCNN_SPEC_H
#define LRCNN_SPEC_H

#include <stdbool.h>

#include "sim/err.h"

#define SPEC_MAX 64

typedef struct {
    char path[256];
    char name[64];
    char output[256];
    char device[16];
    char bn[16];                 /* "" = auto */
    int n_nets, n_batches, n_images, n_optimizers;
    char nets[SPEC_MAX][64];
    int batches[SPEC_MAX];
    int images[SPEC_MAX];        /* 0 = the net file's own size */
    char optimizers[2][8];
    char **plans;                /* expanded plan texts */
    int n_plans;
    bool timeline;               /* store each run's memory timelines (large; for timeline figures) */
    int measure;                 /* > 0: also run each configuration on the CPU engine, this many iterations */
    char search[8];              /* "" = a grid; "batch" / "image": the largest that fits each budget */
    int n_budgets;
    int64_t budgets[SPEC_MAX];   /* bytes */
} spec;

int spec_load(spec *s, const char *path, err *e);
void spec_free(spec *s);
/* Number of runs in the grid (searches: one per budget instead of per batch or image). */
long spec_runs(const spec *s);

#endif
