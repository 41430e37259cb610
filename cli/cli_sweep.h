/* cli_sweep: what lrcnn sweep's files share — a run's summary as its tables print it, and the
 * tables (cli_sweep_tables.c). */
#ifndef LRCNN_CLI_SWEEP_H
#define LRCNN_CLI_SWEEP_H

#include "io/spec.h"
#include "sim/predict/sim.h"

/* One run of the sweep, as the tables print it. */
typedef struct {
    int net, batch, image, plan, opt;
    bool infeasible;        /* recorded in /infeasible, not run */
    int max_value;          /* searches */
    int64_t measured;       /* measure = K: the engine's peak */
    double us;              /* measure = K: median iteration time after the first */
    sim_result r;
} cell;

/* One table per net: plans down, budgets across, the largest batch or input that fits. */
void sweep_print_capacity(const spec *s, const cell *cells, long count);
/* One table per (net, image, batch, optimizer): each plan's peaks, errors, arena, FLOPs and time. */
void sweep_print_tables(const spec *s, const sim_device *d, net *nets, const cell *cells, long count);

#endif
