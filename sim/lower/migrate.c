/* migrate: Layrub-style migration of parameters, their gradients and optimizer state (lower.h).
 *
 * Activation strategies (checkpoints, rows, offload, encodings) cannot go below the persistent
 * bytes: every parameter, gradient and optimizer moment on the device for the whole iteration.
 * Migration keeps only the layer at work: the optimizer steps one layer at a time, right after the
 * layer's last backward use of its parameters (so a gradient need not outlive its update), and
 * parameters and optimizer state live on the host, coming to the device for each pass that reads
 * them; a large layer's state comes in chunks, one update step each (SCHED_OPT_CHUNK). Both
 * passes work on the finished step list, as the stash's moves do (stash.c): which buffer is where
 * is a consequence of the steps. */
#include "sim/lower/migrate.h"

static bool compute_step(const sched_step *t)
{
    return t->op == SCHED_FWD || t->op == SCHED_BWD || t->op == SCHED_STATS || t->op == SCHED_UPDATE;
}

void migrate_updates(lower *c)
{
    sched *s = c->s;
    const net *n = c->n;
    int *last = err_calloc((size_t)n->n, sizeof(int));
    int n_upd = 0;
    for (int L = 0; L < n->n; L++) last[L] = -1;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        bool reads = t->layer >= 0 && c->param[t->layer] >= 0 && (t->w == c->param[t->layer] || t->dw == c->pgrad[t->layer]);
        if (reads) last[t->layer] = i;
    }
    lower_ins *ins = err_calloc((size_t)s->n_buf + 1, sizeof(lower_ins));
    for (int L = 0; L < n->n; L++) {
        if (c->param[L] < 0) continue;
        CHECK(last[L] >= 0); /* every layer with parameters has a backward */
        const sched_step *at = &s->steps[last[L]];
        /* one step per chunk of state (consecutive buffers from opt[L]), in order */
        for (int b = c->opt[L]; b < s->n_buf && s->bufs[b].kind == BUF_OPT && s->bufs[b].layer == L; b++) {
            int64_t count = s->bufs[b].bytes / 4 / (c->cfg->optimizer == SCHED_ADAM ? 2 : 1);
            sched_step u = lower_buffer_step(s, SCHED_UPDATE, b, -1, at->seg);
            u.buf = -1, u.layer = L, u.bwd_phase = true;
            u.w = c->param[L], u.dw = c->pgrad[L], u.aux = b;
            u.flops = sched_update_flops(c->cfg, count);
            u.bytes_moved = sched_update_bytes(c->cfg, count);
            ins[n_upd++] = (lower_ins){last[L], true, u};
        }
    }
    lower_insert(c, ins, n_upd);
    free(ins), free(last);
}

typedef struct {
    int first, last, end_before; /* the open run of uses, and where the run before it ended (-1) */
} use_run;

/* The moves around run r of buffer b: PREFETCH one compute step ahead of its first use (not before
 * the run before it ended), OFFLOAD after its last. */
static void close_run(const sched *s, int b, use_run *r, lower_ins *ins, int *n_ins)
{
    int pf = r->first;
    for (int k = r->first - 1; k > r->end_before; k--)
        if (compute_step(&s->steps[k])) {
            pf = k;
            break;
        }
    ins[(*n_ins)++] = (lower_ins){pf, false, lower_buffer_step(s, SCHED_PREFETCH, b, -1, s->steps[pf].seg)};
    ins[(*n_ins)++] = (lower_ins){r->last, true, lower_buffer_step(s, SCHED_OFFLOAD, b, -1, s->steps[r->last].seg)};
    r->end_before = r->last, r->first = r->last = -1;
}

void migrate_place_moves(lower *c)
{
    sched *s = c->s;
    int nb = s->n_buf, cap = 64, n_ins = 0;
    lower_ins *ins = err_calloc((size_t)cap, sizeof(lower_ins));
    use_run *run = err_calloc((size_t)nb, sizeof(use_run));
    for (int b = 0; b < nb; b++) run[b] = (use_run){-1, -1, -1};
    /* a run of uses: consecutive uses of one buffer in the same pass and segment */
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
        for (int u = 0; u < nu; u++) {
            int b = uses[u];
            use_run *r = &run[b];
            if (!s->bufs[b].host_home || r->last == i) continue;
            if (n_ins + 2 > cap) ins = err_realloc(ins, (size_t)(cap *= 2) * sizeof(lower_ins));
            const sched_step *p = r->last >= 0 ? &s->steps[r->last] : NULL;
            if (p && (p->bwd_phase != t->bwd_phase || p->seg != t->seg)) close_run(s, b, r, ins, &n_ins);
            if (r->first < 0) r->first = i;
            r->last = i;
        }
    }
    for (int b = 0; b < nb; b++)
        if (run[b].first >= 0) {
            if (n_ins + 2 > cap) ins = err_realloc(ins, (size_t)(cap *= 2) * sizeof(lower_ins));
            close_run(s, b, &run[b], ins, &n_ins);
        }
    lower_insert(c, ins, n_ins);
    free(ins), free(run);
}
