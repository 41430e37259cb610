/* pipe_split: see pipe_split.h. */
#include "sim/planner/pipe_split.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>


int pipe_split(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, const pipe_cfg *c, int64_t budget,
               int *first, err *e)
{
    if (c->kind == PIPE_INTERLEAVED) return err_set(e, "pipeline: --budget searches GPipe and 1F1B splits (a stage a device), not interleaved");
    int P = c->devices;
    int *pos = calloc((size_t)n->n + 2, sizeof *pos), m = 0;
    if (!pos) abort();
    pos[m++] = 1;
    for (int L = 2; L < n->n; L++)
        if (pipe_cut_ok(n, p, L)) pos[m++] = L;
    pos[m] = n->n;
    if (m < P) {
        free(pos);
        return err_set(e, "pipeline: %s has %d clean cuts outside the plan's segments, too few for %d stages", n->name, m - 1, P);
    }
    pipe_net pn;
    if (pipe_net_init(&pn, n, p, cfg, d, e)) return free(pos), -1;
    size_t W = (size_t)m + 1;
    pipe_stage *rc = calloc(W * W, sizeof *rc);
    int *flight = calloc((size_t)P + 1, sizeof *flight);
    if (!rc || !flight) abort();
    for (int k = 0; k < P; k++) flight[k] = pipe_in_flight(c, k, NULL, NULL, NULL);
    for (int i = 0; i < m; i++)
        for (int j = i + 1; j <= m; j++) {
            pipe_range(&pn, pos[i], pos[j], &rc[(size_t)i * W + (size_t)j]);
        }
    pipe_net_free(&pn);
    /* best[k][j]: the least slowest-stage time of k stages over positions [0, j) whose devices fit;
     * least[k][j]: the least largest peak of any such split (for the refusal) */
    double *best = malloc(sizeof(double) * (size_t)(P + 1) * W);
    int64_t *least = malloc(sizeof(int64_t) * (size_t)(P + 1) * W);
    int *from = calloc((size_t)(P + 1) * W, sizeof *from);
    if (!best || !least || !from) abort();
    for (size_t i = 0; i < (size_t)(P + 1) * W; i++) best[i] = INFINITY, least[i] = INT64_MAX;
    best[0] = 0, least[0] = 0;
    for (int k = 1; k <= P; k++)
        for (int j = k; j <= m - (P - k); j++)
            for (int i = k - 1; i < j; i++) {
                const pipe_stage *r = &rc[(size_t)i * W + (size_t)j];
                int64_t pk = pipe_stage_peak(r, flight[k - 1]), prev = least[(size_t)(k - 1) * W + (size_t)i];
                if (prev != INT64_MAX) {
                    int64_t most = pk > prev ? pk : prev;
                    if (most < least[(size_t)k * W + (size_t)j]) least[(size_t)k * W + (size_t)j] = most;
                }
                double t = fmax(best[(size_t)(k - 1) * W + (size_t)i], r->fwd_us + r->bwd_us);
                if (pk <= budget && t < best[(size_t)k * W + (size_t)j]) best[(size_t)k * W + (size_t)j] = t, from[(size_t)k * W + (size_t)j] = i;
            }
    int rc_out = 0;
    if (isinf(best[(size_t)P * W + (size_t)m])) {
        rc_out = 1;
        err_set(e, "pipeline: no split of %s into %d stages fits %.2f MiB a device; the least any needs is %.2f MiB", n->name, P,
                (double)budget / 1048576.0, (double)least[(size_t)P * W + (size_t)m] / 1048576.0);
    } else {
        first[P] = n->n;
        for (int k = P, j = m; k > 0; k--) j = from[(size_t)k * W + (size_t)j], first[k - 1] = pos[j];
    }
    free(pos), free(rc), free(flight), free(best), free(least), free(from);
    return rc_out;
}
