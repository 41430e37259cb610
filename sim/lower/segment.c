/* segment: see segment.h. */
#include "sim/lower/segment.h"

#include <string.h>

#include "sim/net/kind.h"

static band_rows hold_full(const void *n, int P) { return lower_full(n, P); }

void segment_persistent(lower *c)
{
    const net *n = c->n;
    int opt_mult = c->cfg->optimizer == SCHED_ADAM ? 2 : 1;
    for (int L = 0; L < n->n; L++) {
        const net_layer *l = &n->layers[L];
        if (l->params) {
            c->param[L] = lower_buf(c, BUF_PARAM, MEM_WEIGHTS, L, -1, (band_rows){0, 0}, l->params * 4);
            c->pgrad[L] = lower_buf(c, BUF_PGRAD, MEM_WGRAD, L, -1, (band_rows){0, 0}, l->params * 4);
            /* migrating state comes and goes in chunks (sched.h); the chunks are consecutive buffers */
            int64_t chunk = c->p->migrate & PLAN_MIGRATE_OPTIM ? SCHED_OPT_CHUNK : l->params;
            for (int64_t a = 0; a < l->params; a += chunk) {
                int64_t count = l->params - a < chunk ? l->params - a : chunk;
                int b = lower_buf(c, BUF_OPT, MEM_OPTIM, L, -1, (band_rows){0, 0}, count * 4 * opt_mult);
                c->s->bufs[b].param0 = a;
                if (!a) c->opt[L] = b;
            }
        }
        /* PyTorch's BatchNorm also counts its batches (num_batches_tracked, an int64) */
        int64_t tracked = c->p->torch ? 8 : 0;
        if (kind_of(l)->running) c->run[L] = lower_buf(c, BUF_RUNSTAT, MEM_WEIGHTS, L, -1, (band_rows){0, 0}, kind_running_bytes(l) + tracked);
    }
    int mig = c->p->migrate;
    for (int b = 0; b < c->s->n_buf; b++) {
        sched_buf *sb = &c->s->bufs[b];
        sb->zero = sb->kind == BUF_PGRAD || sb->kind == BUF_OPT;
        /* +migrate (and torch2: PyTorch 2.x frees .grad at zero_grad): a gradient lives from its
         * first write to its layer's update; parameters and state stay persistent, at home on the
         * host */
        sb->persistent = !(sb->kind == BUF_PGRAD && ((mig & PLAN_MIGRATE_GRADS) || c->p->torch == PLAN_TORCH_2));
        sb->host_home = (sb->kind == BUF_PARAM && (mig & PLAN_MIGRATE_WEIGHTS)) || (sb->kind == BUF_OPT && (mig & PLAN_MIGRATE_OPTIM));
    }
}

/* PyTorch's Adam divides by a denominator it computes into temporaries: one parameter tensor at a
 * time in 1.13, whose single-tensor loop holds two at once (sqrt of the second moment, then that
 * divided by the bias correction: twice the largest tensor's bytes), every tensor at once in 2.x
 * (the foreach loop, its default on a GPU, takes the square roots of all and divides in place:
 * all parameters' bytes). */
static int64_t torch_adam_scratch(const net *n, plan_torch version)
{
    int64_t largest = 0;
    for (int L = 0; L < n->n; L++) {
        kind_tensor t[KIND_MAX_TENSORS];
        int k = kind_tensors(n, L, t);
        for (int i = 0; i < k; i++) {
            int64_t numel = 1;
            for (int d = 0; d < t[i].rank; d++) numel *= t[i].dims[d];
            if (!t[i].running && numel > largest) largest = numel;
        }
    }
    return 4 * (version == PLAN_TORCH_2 ? net_params(n) : 2 * largest);
}

void segment_forward(lower *c, const plan_seg *ps)
{
    const net *n = c->n;
    for (int L = ps->first; L <= ps->last; L++) lower_fwd(c, L, -1, lower_full(n, L), lower_full(n, L), -1, ps->mode != PLAN_CKPT);
}

void segment_backward(lower *c, const plan_seg *ps)
{
    const net *n = c->n;
    if (ps->mode == PLAN_CKPT) { /* the segment's forward again, from its kept input */
        bool *need = err_calloc((size_t)n->n, sizeof(bool));
        plan_need(n, ps->first, ps->last, NULL, NULL, NULL, false, need);
        /* PyTorch 1.13's checkpoint runs the whole segment again; 2.x's stops once it has what
         * backward reads; neither runs it, nor keeps its input, where backward reads nothing of it
         * (the recomputation starts when backward unpacks a saved tensor: LR-ASPP's last bilinear
         * upsampling alone in a segment kept none) */
        bool any = false;
        for (int L = ps->first; L <= ps->last; L++) any |= need[L];
        bool whole = any && lower_predicts_torch(c) && c->p->torch == PLAN_TORCH_1;
        for (int L = ps->first; L <= ps->last; L++)
            if (need[L] || whole) lower_fwd(c, L, -1, lower_full(n, L), lower_full(n, L), -1, true);
        free(need);
    }
    for (int L = ps->last; L >= ps->first; L--) lower_bwd(c, L, -1, lower_full(n, L), hold_full, n, false, NULL, true);
}

void segment_load(lower *c)
{
    const net *n = c->n;
    c->act[0] = lower_buf(c, BUF_INPUT, MEM_ACT, 0, -1, lower_full(n, 0), lower_bytes(c, 0, lower_full(n, 0), 4));
    c->label = lower_buf(c, BUF_LABEL, MEM_ACT, n->n - 1, -1, (band_rows){0, 0}, (int64_t)c->cfg->batch * net_labels_per_image(n) * 8);
    sched_step *t = lower_step(c, SCHED_LOAD, 0, -1); /* the batch arrives: image and labels */
    t->y = c->act[0], t->aux = c->label, t->rows = lower_full(n, 0);
}

void segment_update(lower *c)
{
    const net *n = c->n;
    const plan *p = c->p;
    const sched_cfg *cfg = c->cfg;
    int64_t adam = p->torch && cfg->optimizer == SCHED_ADAM ? torch_adam_scratch(n, p->torch) : 0;
    if (p->torch == PLAN_TORCH_2) { /* optimizer.step() at the end, each gradient alive until it */
        for (int L = 0, first = 1; L < n->n; L++) {
            if (c->param[L] < 0) continue;
            sched_step *t = lower_step(c, SCHED_UPDATE, L, -1);
            t->w = c->param[L], t->dw = c->pgrad[L], t->aux = c->opt[L], t->bwd_phase = true;
            t->flops = sched_update_flops(cfg, n->layers[L].params);
            t->bytes_moved = sched_update_bytes(cfg, n->layers[L].params);
            if (adam && first) t->ws = lower_buf(c, BUF_WS, MEM_WORKSPACE, L, -1, (band_rows){0, 0}, adam);
            first = 0;
        }
        return;
    }
    sched_step *t = lower_step(c, SCHED_UPDATE, -1, -1);
    t->flops = sched_update_flops(cfg, net_params(n));
    t->bytes_moved = sched_update_bytes(cfg, net_params(n));
    if (adam) t->ws = lower_buf(c, BUF_WS, MEM_WORKSPACE, -1, -1, (band_rows){0, 0}, adam);
}
