/* lower: see lower.h. Buffers are created in a fixed order per step (output, auxiliary, workspace;
 * gradients before the backward's workspace), so buffer numbering, and with it the order of
 * ALLOC and FREE within a step, depends only on the plan. */
#include "sim/lower/lower.h"

#include <string.h>

#include "sim/net/kind.h"

int lower_buf(lower *c, buf_kind k, mem_cat cat, int L, int band, band_rows r, int64_t bytes)
{
    sched *s = c->s;
    if (s->n_buf == c->cap_buf) s->bufs = err_realloc(s->bufs, (size_t)(c->cap_buf = c->cap_buf * 2 + 64) * sizeof(sched_buf));
    s->bufs[s->n_buf] = (sched_buf){.kind = k, .cat = cat, .layer = L, .band = band, .rows = r, .bytes = bytes};
    return s->n_buf++;
}

sched_step *lower_step(lower *c, sched_op op, int L, int band)
{
    sched *s = c->s;
    if (s->n_step == c->cap_step) s->steps = err_realloc(s->steps, (size_t)(c->cap_step = c->cap_step * 2 + 256) * sizeof(sched_step));
    /* a copy of a blank one, then its fields (wide stores, where a call to memset and ten narrow
     * stores of -1 were) */
    static const sched_step blank = {.y = -1, .aux = -1, .w = -1, .dw = -1, .ws = -1, .dy = -1, .src = -1, .dst = -1, .buf = -1, .sums = -1};
    sched_step *t = &s->steps[s->n_step++];
    memcpy(t, &blank, sizeof *t);
    t->op = op, t->layer = L, t->band = band, t->seg = c->seg, t->bwd_phase = c->bwd_phase;
    if (op == SCHED_FWD || op == SCHED_BWD || op == SCHED_STATS || op == SCHED_STATS_END) { /* a layer's kernels */
        const net_layer *l = &c->n->layers[L];
        sched_step_slots(s, t, l->n_in + kind_of(l)->labels);
    }
    return t;
}

int64_t lower_bytes(const lower *c, int L, band_rows r, int elem)
{
    const net_layer *l = &c->n->layers[L];
    return (int64_t)c->cfg->batch * l->c * band_rows_len(r) * l->w * elem;
}

band_rows lower_full(const net *n, int L) { return (band_rows){0, n->layers[L].h}; }

static double fwd_flops(const lower *c, int L, band_rows r)
{
    return kind_of(&c->n->layers[L])->flops(c->n, L, band_rows_len(r), c->cfg->batch);
}

/* The segment's whole-map statistics of layer L are in use (bn in train mode in a row segment). */
static bool map_stats(const lower *c, int L) { return c->stats[L] >= 0; }

/* Whether steps take the backend's scratch (im2col and the like). Predicting PyTorch, none: its
 * convolutions' own (oneDNN's reordered copies and buffers on the CPU, which its allocator does
 * count, freed before the op returns; cuDNN's workspaces, which depend on the algorithm it picks)
 * is not modelled. bench/torch_plan_gpu.py's `no scratch` peak on the CPU leaves it out too. */
static bool torch_scratch(const lower *c) { return !lower_predicts_torch(c); }

/* A torch plan predicting PyTorch (no engine): the padded copy of its input rows a band step of
 * layer L makes at the map's border for output rows r (kind_torch_pads_x), a scratch of the step,
 * forward and backward; 0 elsewhere. */
static int64_t torch_border_copy(const lower *c, int L, int band, band_rows r)
{
    const net_layer *l = &c->n->layers[L];
    if (!lower_predicts_torch(c) || band < 0 || !kind_torch_pads_x(l)) return 0;
    band_rows in;
    int top, bottom;
    band_input_rows(c->n, L, 0, r, &in, &top, &bottom);
    if (!top && !bottom) return 0;
    return lower_bytes(c, l->in[0], (band_rows){0, band_rows_len(in) + top + bottom}, 4);
}

/* Whether layer L keeps its auxiliary for backward. A torch plan predicting PyTorch (no engine)
 * keeps no statistics for a frozen BatchNorm: PyTorch's eval-mode batch norm saves none, its
 * backward reads the running ones. An engine's backward reads the statistics it normalized with. */
static bool keeps_aux(const lower *c, const net_layer *l, bool keep_aux)
{
    const kind_traits *k = kind_of(l);
    if (!k->aux || (!keep_aux && k->aux_optional)) return false;
    return !(lower_predicts_torch(c) && l->kind == NET_BN && c->p->bn == PLAN_BN_FROZEN);
}

int lower_fwd(lower *c, int L, int band, band_rows r, band_rows hold, int y, bool keep_aux)
{
    const net *n = c->n;
    const net_layer *l = &n->layers[L];
    sched_step *t = lower_step(c, SCHED_FWD, L, band);
    int sidx = (int)(t - c->s->steps);
    t->rows = r;
    t->recompute = c->bwd_phase || c->stats_pass;
    for (int j = 0; j < l->n_in; j++) t->x[j] = c->act[l->in[j]];
    int w_buf = c->param[L];
    /* buffers are created after the step pointer is final (lower_buf may not move steps) */
    if (y < 0) {
        if (l->inplace && !(c->p->torch && kind_torch_copies_x(l)) && c->s->bufs[t->x[0]].rows.a <= hold.a &&
            c->s->bufs[t->x[0]].rows.b >= hold.b)
            y = t->x[0];
        else
            y = lower_buf(c, BUF_ACT, MEM_ACT, L, band, hold, lower_bytes(c, L, hold, 4));
    }
    t = &c->s->steps[sidx];
    t->y = y;
    t->w = w_buf;
    const kind_traits *k = kind_of(l);
    if (map_stats(c, L)) {
        t->map_stats = true, t->aux = c->stats[L]; /* normalizes with the segment's statistics */
    } else if (keeps_aux(c, l, keep_aux)) {
        static const buf_kind aux_kind[] = {[KIND_AUX_ARGMAX] = BUF_IDX, [KIND_AUX_STATS] = BUF_STAT, [KIND_AUX_PROBS] = BUF_PROB,
                                            [KIND_AUX_MASK] = BUF_MASK, [KIND_AUX_PLACE] = BUF_STAT};
        band_rows ar = k->aux == KIND_AUX_STATS ? (band_rows){0, 0} : r;
        int64_t bytes = kind_aux_bytes(n, L, band_rows_len(r), c->cfg->batch);
        if (c->p->torch && k->aux == KIND_AUX_MASK && (l->u.dropout.sample || !c->cfg->gpu))
            bytes *= 4; /* PyTorch keeps fp32 noise: its CPU dropout, and torchvision's stochastic depth anywhere */
        t->aux = lower_buf(c, aux_kind[k->aux], MEM_ACT, L, band, ar, bytes);
    }
    if (k->labels) t->x[l->n_in] = c->label;
    /* the workspace for the views the step runs with: y may be a buffer that holds more rows (a
     * band's output written into the segment's map) */
    sched_ws_query q = {.layer = L, .batch = c->cfg->batch, .out = r, .held = true, .y = c->s->bufs[y].rows};
    if (l->n_in && t->x[0] >= 0) q.x = c->s->bufs[t->x[0]].rows;
    int64_t ws = (torch_scratch(c) ? sched_step_workspace(c->cfg, n, &q) : 0) + torch_border_copy(c, L, band, r);
    if (ws) t->ws = lower_buf(c, BUF_WS, MEM_WORKSPACE, L, band, r, ws);
    if (k->running && !t->map_stats) t->dw = c->run[L]; /* running statistics are updated (train) or read */
    t->flops = fwd_flops(c, L, r);
    t->bytes_moved = (double)lower_bytes(c, L, r, 4) * 2;
    c->act[L] = y;
    c->aux[L] = t->aux;
    return y;
}

int lower_grad(lower *c, int P, int band, band_rows hold, bool zero)
{
    if (c->grad[P] >= 0) return c->grad[P];
    bool whole = hold.a == 0 && hold.b == c->n->layers[P].h;
    int b = lower_buf(c, BUF_GRAD, MEM_AGRAD, P, whole ? -1 : band, hold, lower_bytes(c, P, hold, 4));
    c->s->bufs[b].zero = zero;
    return c->grad[P] = b;
}

static bool same_rows(band_rows x, band_rows y) { return x.a == y.a && x.b == y.b; }

/* Under PyTorch's rules (no engine), autograd hands a sum's inputs its output's gradient itself
 * (AddBackward), and a concatenation's views of it (CatBackward narrows it), which hold all of it
 * until the last is let go of: an input's gradient is then that layer's buffer, a buffer of another
 * layer. Where the layer read only some of the rows its input holds (a band's slice of a wider
 * map), the slice's backward copies it at once into a zero-filled gradient of the input's size. A
 * second gradient is added into the sum's gradient in place (autograd's own by then), but summed
 * with a concatenation's view into a new tensor (a view of a wider map is not its own to add
 * into), beside the op's own result unless that is a view too; the view is let go of after. With a
 * batch of one a channel slice is dense, and PyTorch may add into it. */
static bool torch_view(const lower *c, int P)
{
    if (!lower_predicts_torch(c)) return false;
    int owner = c->s->bufs[c->grad[P]].layer;
    return owner != P && c->n->layers[owner].kind == NET_CONCAT;
}

/* lower_bwd's input gradients: dx[j] the buffer input j's gradient goes to, acc[j] whether added
 * into it, view[j] a view it is summed with after (torch_view), or -1. */
static void input_grads(lower *c, const net_layer *l, int dy, int band, lower_hold_fn hold_of, const void *hctx, bool zero,
                        const bool *want, int *dx, bool *acc, int *view)
{
    const net *n = c->n;
    bool views = lower_predicts_torch(c) && (l->kind == NET_CONCAT || l->kind == NET_ADD);
    for (int j = 0; j < l->n_in; j++) {
        int P = l->in[j];
        dx[j] = -1, acc[j] = false, view[j] = -1;
        if (n->layers[P].kind == NET_INPUT || net_input_repeats(l, j) || (want && !want[P])) continue;
        if (c->grad[P] >= 0 && torch_view(c, P)) view[j] = c->grad[P], c->grad[P] = -1;
        if (c->grad[P] >= 0) {
            dx[j] = c->grad[P], acc[j] = true;
        } else if (views && view[j] < 0 && same_rows(c->s->bufs[dy].rows, hold_of(hctx, P))) {
            dx[j] = c->grad[P] = dy;
        } else if (l->inplace && !c->p->torch && same_rows(c->s->bufs[dy].rows, hold_of(hctx, P))) {
            dx[j] = c->grad[P] = dy; /* relu backward in place: its input has no other consumer */
        } else {
            dx[j] = lower_grad(c, P, band, hold_of(hctx, P), zero);
            acc[j] = zero;
        }
    }
}

/* The views lower_bwd's step met (input_grads) added into the new gradients it wrote: autograd's
 * out-of-place sum, beside the step's own result where that is not a view. */
static void add_views(lower *c, const net_layer *l, int band, const int *dx, const int *view)
{
    for (int j = 0; j < l->n_in; j++) {
        if (view[j] < 0) continue;
        const sched_buf *g = &c->s->bufs[dx[j]];
        int64_t bytes = g->bytes;
        band_rows rows = g->rows;
        sched_step *t = lower_copy(c, l->in[j], band, rows, view[j], dx[j], true);
        if (l->kind != NET_CONCAT) t->ws = lower_buf(c, BUF_WS, MEM_WORKSPACE, l->in[j], band, rows, bytes);
    }
}

/* A backward reads a row-indexed auxiliary (a max-pool's argmax, a dropout's mask, a layer norm's
 * per-place statistics) laid out by the rows of the forward that wrote it, as the kernels index it
 * by their own: where the last recompute of layer L wrote it for other rows than the backward's r
 * (bn=train-rebuild under OverL: a band rebuilds a map over the forward's overlapping rows, then
 * back-propagates the backward's partition of them), L's forward runs again over r alone, into an
 * output of its own (the band's output stays the one its consumers read), writing the auxiliary
 * those rows read. */
static void rows_aux(lower *c, int L, int band, band_rows r)
{
    int aux = c->aux[L], kind = kind_of(&c->n->layers[L])->aux;
    if (kind != KIND_AUX_ARGMAX && kind != KIND_AUX_MASK && kind != KIND_AUX_PLACE) return;
    if (map_stats(c, L) || aux < 0 || same_rows(c->s->bufs[aux].rows, r)) return;
    int act = c->act[L];
    int y = lower_buf(c, BUF_ACT, MEM_ACT, L, band, r, lower_bytes(c, L, r, 4));
    lower_fwd(c, L, band, r, r, y, true);
    c->act[L] = act;
}

sched_step *lower_bwd(lower *c, int L, int band, band_rows r, lower_hold_fn hold_of, const void *hctx, bool zero,
                      const bool *want, bool weights)
{
    const net *n = c->n;
    const net_layer *l = &n->layers[L];
    rows_aux(c, L, band, r);
    int dy = l->kind == NET_LOSS ? -1 : c->grad[L];
    CHECK(l->kind == NET_LOSS || dy >= 0);
    int dx[NET_MAX_IN], view[NET_MAX_IN];
    bool acc[NET_MAX_IN];
    input_grads(c, l, dy, band, hold_of, hctx, zero, want, dx, acc, view);
    int xb = l->n_in ? c->act[l->in[0]] : -1;
    sched_ws_query q = {.layer = L, .batch = c->cfg->batch, .backward = true, .out = r, .held = true, .x = xb >= 0 ? c->s->bufs[xb].rows : (band_rows){0, 0},
                        .y = dy >= 0 ? c->s->bufs[dy].rows : r, .dx = l->n_in && dx[0] >= 0 ? c->s->bufs[dx[0]].rows : (band_rows){0, 0},
                        .dw = weights && l->params};
    int64_t ws = (torch_scratch(c) ? sched_step_workspace(c->cfg, n, &q) : 0) + torch_border_copy(c, L, band, r);
    int dw = weights ? c->pgrad[L] : -1;
    if (band >= 0 && lower_predicts_torch(c) && weights && l->params) {
        /* PyTorch sums a parameter's gradients from a segment's bands in one buffer of autograd's
         * until the last band's: the first band's gradient is that sum, each later one a temporary
         * added into it (2.x in place; 1.13 into a new sum, the old one freed after). Under 2.x the
         * sum becomes .grad; under 1.13 .grad is there already (zero-filled), the sum added into it
         * after the last band. */
        bool v1 = c->p->torch == PLAN_TORCH_1;
        if (c->wsum[L] < 0)
            c->wsum[L] = v1 ? lower_buf(c, BUF_WS, MEM_WGRAD, L, -1, (band_rows){0, 0}, l->params * 4) : c->pgrad[L];
        else
            ws += l->params * 4 * (v1 ? 2 : 1);
        dw = c->wsum[L];
    } else if (c->p->torch == PLAN_TORCH_1 && weights && l->params) {
        /* PyTorch 1.13 keeps .grad between iterations (zero_grad fills it with zeros): a backward
         * computes the weight gradient into a temporary and adds it to .grad */
        ws += l->params * 4;
    }
    int wsb = ws ? lower_buf(c, BUF_WS, MEM_WORKSPACE, L, band, r, ws) : -1;
    sched_step *t = lower_step(c, SCHED_BWD, L, band);
    t->rows = r;
    t->dy = dy;
    const kind_traits *k = kind_of(l);
    for (int j = 0; j < l->n_in; j++) {
        t->dx[j] = dx[j], t->dx_acc[j] = acc[j];
        if (k->keeps_x || (c->p->torch && kind_torch_keeps_x(l, c->p->torch == PLAN_TORCH_2))) t->x[j] = c->act[l->in[j]];
    }
    /* under PyTorch's rules an in-place relu6's backward reads the copy of its input it keeps
     * (kind_torch_copies_x), not its output: that lives only as long as another reader keeps it */
    if (k->keeps_y && !(c->p->torch && kind_torch_copies_x(l))) t->y = c->act[L];
    if (k->aux) t->aux = c->aux[L];
    if (map_stats(c, L)) t->map_stats = true, t->aux = c->stats[L], t->sums = c->sums[L];
    if (k->labels) t->x[l->n_in] = c->label;
    t->w = c->param[L], t->dw = dw;
    t->ws = wsb;
    /* a product's backward is one product per gradient it computes: input and weights */
    int products = (dx[0] >= 0) + (t->dw >= 0);
    t->flops = fwd_flops(c, L, r) * (k->product && products ? products : 1);
    t->bytes_moved = (double)lower_bytes(c, L, r, 4) * 3;
    int at = (int)(t - c->s->steps);
    add_views(c, l, band, dx, view);
    return &c->s->steps[at];
}

sched_step *lower_copy(lower *c, int L, int band, band_rows r, int src, int dst, bool acc)
{
    sched_step *t = lower_step(c, SCHED_COPY, L, band);
    t->rows = r, t->src = src, t->dst = dst, t->acc = acc;
    t->bytes_moved = (double)lower_bytes(c, L, r, 4) * 2;
    return t;
}

lower_buckets lower_bucket(const int *key, int n_items, int ns)
{
    /* counts at start[key + 2], their sums make start[j + 1] the start of bucket j; filling moves it
     * to the start of bucket j + 1, so that start[j] ends as bucket j's (no second array of ends) */
    lower_buckets k = {err_calloc((size_t)ns + 2, sizeof(int)), NULL};
    for (int b = 0; b < n_items; b++)
        if (key[b] >= 0) k.start[key[b] + 2]++;
    for (int i = 1; i <= ns + 1; i++) k.start[i] += k.start[i - 1];
    k.list = err_calloc((size_t)k.start[ns + 1] + 1, sizeof(int));
    for (int b = 0; b < n_items; b++)
        if (key[b] >= 0) k.list[k.start[key[b] + 1]++] = b;
    return k;
}

void lower_buckets_free(lower_buckets *k)
{
    free(k->start), free(k->list);
}

void lower_insert(lower *c, const lower_ins *ins, int n)
{
    if (!n) return;
    sched *s = c->s;
    int ns = s->n_step, cap = ns + n, out = 0;
    int *before = err_calloc((size_t)n, sizeof(int)), *after = err_calloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        CHECK(ins[i].at >= 0 && ins[i].at < ns);
        before[i] = ins[i].after ? -1 : ins[i].at;
        after[i] = ins[i].after ? ins[i].at : -1;
    }
    lower_buckets pre = lower_bucket(before, n, ns), post = lower_bucket(after, n, ns);
    sched_step *steps = err_realloc(NULL, (size_t)cap * sizeof(sched_step)); /* every one written below */
    for (int i = 0; i < ns; i++) {
        for (int k = pre.start[i]; k < pre.start[i + 1]; k++) steps[out++] = ins[pre.list[k]].step;
        steps[out++] = s->steps[i];
        for (int k = post.start[i]; k < post.start[i + 1]; k++) steps[out++] = ins[post.list[k]].step;
    }
    CHECK(out == cap);
    free(s->steps);
    s->steps = steps, s->n_step = out, c->cap_step = cap;
    lower_buckets_free(&pre), lower_buckets_free(&post);
    free(before), free(after);
}
