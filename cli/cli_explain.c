/* explain: a plan layer by layer (lrcnn plan --explain) — how each layer runs (its segment: layer,
 * ckpt, offload, rows with its band count), what it keeps on the device from its forward to its
 * backward, what it moves to the host there, how its kept maps are encoded, what of its parameters,
 * gradients and optimizer state waits on the host between uses (+migrate), and the time of its
 * steps on the device's model, of which recomputation. From the plan's own lowering: the schedule
 * the engine runs. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "sim/lower/pipeline.h"
#include "sim/plan/enc.h"

typedef struct {
    int64_t kept, moved, migrated;
    double us, recompute_us;
    const char *enc;
} layer_row;

/* How layer L runs: its segment's mode. */
static void how(const net *n, const plan *p, int L, char *buf, size_t len)
{
    snprintf(buf, len, "layer");
    for (int k = 0; k < p->n_seg; k++) {
        const plan_seg *s = &p->segs[k];
        if (L < s->first || L > s->last) continue;
        if (s->mode == PLAN_ROWS) snprintf(buf, len, "rows(%s,%d)", band_policy_name(s->policy), s->fp);
        else if (s->mode == PLAN_OFFLOAD)
            snprintf(buf, len, "offload(%s)", s->offload == PLAN_OFFLOAD_ALL ? "all" : s->offload == PLAN_OFFLOAD_CONV ? "conv" : "list");
        else snprintf(buf, len, "%s", plan_mode_name(s->mode));
    }
    (void)n;
}

int cli_explain(const net *n, const char *text, const sched_cfg *cfg, const sim_device *d, err *e)
{
    plan p;
    sched s;
    if (plan_parse(&p, n, text, e)) return -1;
    if (pipeline_lower(&s, n, &p, cfg, e)) {
        plan_free(&p);
        return -1;
    }
    int t_b = s.n_step; /* the first step of the backward pass */
    for (int i = 0; i < s.n_step; i++)
        if (s.steps[i].bwd_phase) {
            t_b = i;
            break;
        }
    int *alloc = calloc((size_t)s.n_buf + 1, sizeof *alloc), *freed = calloc((size_t)s.n_buf + 1, sizeof *freed);
    layer_row *row = calloc((size_t)n->n + 1, sizeof *row);
    if (!alloc || !freed || !row) abort();
    for (int b = 0; b < s.n_buf; b++) alloc[b] = -1, freed[b] = s.n_step;
    double other = 0;
    for (int i = 0; i < s.n_step; i++) {
        const sched_step *st = &s.steps[i];
        if (st->op == SCHED_ALLOC && alloc[st->buf] < 0) alloc[st->buf] = i;
        if (st->op == SCHED_FREE) freed[st->buf] = i;
        timing_how th;
        double us = sim_step_us(n, &s, i, d, &th);
        if (st->layer < 0) {
            other += us;
            continue;
        }
        row[st->layer].us += us;
        if (st->recompute) row[st->layer].recompute_us += us;
    }
    for (int b = 0; b < s.n_buf; b++) {
        const sched_buf *bf = &s.bufs[b];
        if (bf->layer < 0) continue;
        layer_row *r = &row[bf->layer];
        if (bf->persistent) {
            if (bf->host_home) r->migrated += bf->bytes;
            continue;
        }
        if (!(alloc[b] >= 0 && alloc[b] < t_b && freed[b] > t_b)) continue; /* not held from forward to backward */
        if (bf->offload) r->moved += bf->bytes;
        else r->kept += bf->bytes;
        if (bf->kind == BUF_ENC) r->enc = enc_name(bf->enc);
    }
    char a[32], b[32], c[32], h[48];
    int64_t kept = 0, moved = 0, migrated = 0;
    double us = other, re = 0;
    printf("\n  the plan layer by layer (kept: its tensors — output, statistics, indices, encodings — on the device\n"
           "  from its forward to its backward; to host: moved there meanwhile; migrated: its parameters,\n"
           "  gradients and optimizer state on the host between uses; time: its steps on the device's model, in\n"
           "  line, of which recomputation)\n\n");
    printf("  %-24s %-16s %12s %12s %-9s %12s %11s %11s\n", "layer", "runs as", "kept", "to host", "encoding", "migrated", "time (ms)",
           "recompute");
    for (int L = 1; L < n->n; L++) {
        const layer_row *r = &row[L];
        how(n, &p, L, h, sizeof h);
        printf("  %-24.24s %-16s %12s %12s %-9s %12s %11.2f %11.2f\n", n->layers[L].name, h, units_fmt_bytes(r->kept, a, sizeof a),
               r->moved ? units_fmt_bytes(r->moved, b, sizeof b) : "-", r->enc ? r->enc : "-",
               r->migrated ? units_fmt_bytes(r->migrated, c, sizeof c) : "-", r->us / 1e3, r->recompute_us / 1e3);
        kept += r->kept, moved += r->moved, migrated += r->migrated, us += r->us, re += r->recompute_us;
    }
    printf("  %-24s %-16s %12s %12s %-9s %12s %11.2f %11.2f\n", "all (+ load, update)", "", units_fmt_bytes(kept, a, sizeof a),
           units_fmt_bytes(moved, b, sizeof b), "", units_fmt_bytes(migrated, c, sizeof c), us / 1e3, re / 1e3);
    free(alloc), free(freed), free(row);
    sched_free(&s);
    plan_free(&p);
    return 0;
}
