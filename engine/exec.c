/* exec: see exec.h. Each step becomes one ops call (FWD/BWD), a row copy (COPY), a move between
 * device and host pools (OFFLOAD/PREFETCH), the optimizer (UPDATE) or an allocator event. Views
 * into buffers carry the rows they hold, so a band's kernels find their rows by offset. */
#include "engine/exec.h"

#include "engine/act.h"
#include "engine/threads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim/lower/lower.h"
#include "sim/net/kind.h"
#include "sim/plan/enc.h"

exec_hparams exec_default_hparams(sched_optimizer o)
{
    if (o == SCHED_ADAM) return (exec_hparams){.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    return (exec_hparams){.lr = 0.01, .momentum = 0.9};
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* splitmix64: the engine's only random numbers (weight initialization). */
static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float uniform(uint64_t *s, float bound) { return bound * (2.0f * (float)((mix(s) >> 40) * 0x1.0p-24) - 1.0f); }

/* PyTorch's defaults, per tensor (kind_tensors): conv and fc weights and biases
 * U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (what kaiming_uniform_(a=sqrt(5)) amounts to), drawn in
 * tensor order from one stream per layer; bn gamma 1, beta 0; running mean 0, variance 1. */
static void init_buffer(exec *x, int b, float *dev)
{
    const sched_buf *sb = &x->s->bufs[b];
    if (sb->kind != BUF_PARAM && sb->kind != BUF_RUNSTAT) return; /* gradients and state: zero */
    float *p = err_calloc((size_t)sb->bytes / 4 + 1, sizeof(float));
    uint64_t s = x->seed * 1000003u + (uint64_t)sb->layer;
    kind_tensor t[KIND_MAX_TENSORS];
    int nt = kind_tensors(x->n, sb->layer, t);
    for (int k = 0; k < nt; k++) {
        if (t[k].running != (sb->kind == BUF_RUNSTAT)) continue;
        int64_t count = 1;
        for (int d = 0; d < t[k].rank; d++) count *= t[k].dims[d];
        float *q = p + t[k].offset, bound = t[k].fan_in ? 1.0f / sqrtf((float)t[k].fan_in) : 0.0f;
        for (int64_t i = 0; i < count; i++)
            q[i] = t[k].init == KIND_INIT_FAN_IN ? uniform(&s, bound) : t[k].init == KIND_INIT_ONE ? 1.0f : 0.0f;
    }
    x->ops->upload(dev, p, sb->bytes);
    free(p);
}

void exec_init(exec *x, const net *n, const plan *p, const sched *s, const ops_table *ops, sched_optimizer o,
               exec_hparams hp, uint64_t seed)
{
    engine_threads(); /* before the first parallel region */
    memset(x, 0, sizeof *x);
    x->n = n, x->p = p, x->s = s, x->ops = ops, x->opt = o, x->hp = hp, x->seed = seed;
    alloc_init(&x->mem, ops->mem);
    x->ptr = err_calloc((size_t)s->n_buf, sizeof(void *));
    x->on_host = err_calloc((size_t)s->n_buf, sizeof(bool));
    x->arriving = err_calloc((size_t)s->n_buf, sizeof(bool));
    int *issue = err_calloc((size_t)s->n_step + 1, sizeof(int));
    sched_move_issue(s, issue);
    lower_buckets k = lower_bucket(issue, s->n_step, s->n_step);
    x->stage_start = k.start, x->stage_list = k.list;
    free(issue);
    x->bytes = err_calloc((size_t)s->n_buf, sizeof(int64_t));
    for (int b = 0; b < s->n_buf; b++) x->bytes[b] = s->bufs[b].bytes;
    x->layer_us = err_calloc((size_t)n->n * 2, sizeof(double));
    x->step_us = err_calloc((size_t)s->n_step + 1, sizeof(double));
    adapt_init(&x->adapt, n, p, s);
}

static ten view(const exec *x, int b)
{
    if (b < 0) return (ten){0};
    const sched_buf *sb = &x->s->bufs[b];
    const net_layer *l = &x->n->layers[sb->layer];
    CHECK(x->ptr[b] && !x->on_host[b]);
    return (ten){.p = x->ptr[b], .n = x->s->batch, .c = l->c, .h = sb->rows.b - sb->rows.a, .w = l->w, .row0 = sb->rows.a};
}

static float *fptr(const exec *x, int b)
{
    if (b < 0) return NULL;
    CHECK(x->ptr[b] && !x->on_host[b]);
    return x->ptr[b];
}

static ops_call call_of(const exec *x, const sched_step *t)
{
    const net_layer *l = &x->n->layers[t->layer];
    ops_call c = {.l = l, .layer = t->layer, .a = t->rows.a, .b = t->rows.b, .y = view(x, t->y), .dy = view(x, t->dy), .w = fptr(x, t->w),
                  .ws = fptr(x, t->ws), .ws_bytes = t->ws >= 0 ? x->s->bufs[t->ws].bytes : 0};
    for (int j = 0; j < l->n_in; j++) {
        c.in_h[j] = x->n->layers[l->in[j]].h, c.in_c[j] = x->n->layers[l->in[j]].c;
        c.x[j] = view(x, t->x[j]);
        c.dx[j] = view(x, t->dx[j]);
        c.dx_acc[j] = t->dx_acc[j];
    }
    c.bn = t->map_stats ? OPS_BN_MAP : x->p->bn == PLAN_BN_FROZEN ? OPS_BN_FROZEN : OPS_BN_TRAIN;
    if (t->map_stats) {
        c.sums = t->sums >= 0 ? x->ptr[t->sums] : NULL;
        c.own_a = t->own.a, c.own_b = t->own.b;
        c.count = (int64_t)x->s->batch * l->h * l->w;
    }
    const kind_traits *k = kind_of(l);
    switch (k->aux) {
    case KIND_AUX_ARGMAX: c.argmax = (int64_t *)(t->aux >= 0 ? x->ptr[t->aux] : NULL); break;
    case KIND_AUX_STATS:
    case KIND_AUX_PLACE: c.stats = fptr(x, t->aux); break;
    case KIND_AUX_PROBS: c.probs = fptr(x, t->aux); break;
    case KIND_AUX_MASK:
        c.mask = (uint8_t *)(t->aux >= 0 ? x->ptr[t->aux] : NULL);
        c.key = drop_key(x->seed, x->iter, t->layer);
        break;
    default: break;
    }
    if (k->labels) c.labels = (const int64_t *)fptr(x, t->x[l->n_in]);
    return c;
}

static void copy_rows(exec *x, const sched_step *t)
{
    const sched_buf *src = &x->s->bufs[t->src], *dst = &x->s->bufs[t->dst];
    const net_layer *l = &x->n->layers[src->layer];
    int64_t sh = src->rows.b - src->rows.a, dh = dst->rows.b - dst->rows.a, rows = t->rows.b - t->rows.a;
    CHECK(t->rows.a >= src->rows.a && t->rows.b <= src->rows.b && t->rows.a >= dst->rows.a && t->rows.b <= dst->rows.b);
    const float *s = fptr(x, t->src) + (t->rows.a - src->rows.a) * l->w;
    float *d = fptr(x, t->dst) + (t->rows.a - dst->rows.a) * l->w;
    x->ops->copy2d(d, dh * l->w, s, sh * l->w, (int64_t)x->s->batch * l->c, rows * l->w, t->acc);
}

/* The codec's view of encoded buffer b (sim/plan/enc.h). */
static ops_codec codec_of(const exec *x, int b)
{
    const sched_buf *sb = &x->s->bufs[b];
    const net_layer *l = &x->n->layers[sb->layer];
    ops_codec m = {.kind = sb->enc, .mod = &x->p->mods[sb->mod], .shape = sb->shape, .row0 = sb->rows.a, .c = l->c, .w = l->w,
                   .win = l->win};
    if (l->n_in) m.in_w = x->n->layers[l->in[0]].w;
    return m;
}

/* ENCODE into a buffer allocated here when its size depends on the values, or DECODE. */
static void code(exec *x, const sched_step *t)
{
    const sched_buf *eb = &x->s->bufs[t->op == SCHED_ENCODE ? t->dst : t->src];
    ops_codec m = codec_of(x, t->op == SCHED_ENCODE ? t->dst : t->src);
    double t0 = now_us();
    if (t->op == SCHED_DECODE) {
        x->ops->decode(&m, fptr(x, t->src), fptr(x, t->dst));
    } else {
        void *scratch = t->ws >= 0 ? fptr(x, t->ws) : NULL, *src = fptr(x, t->src);
        adapt *a = &x->adapt;
        if (a->target && eb->enc == ENC_ZFP_ACC) m.bound = a->bound[eb->layer];
        if (enc_data_sized(eb->enc)) {
            x->bytes[t->dst] = x->ops->encode(&m, src, NULL, scratch);
            x->ptr[t->dst] = alloc_get(&x->mem, eb->cat, x->bytes[t->dst], false);
        }
        CHECK(x->ops->encode(&m, src, fptr(x, t->dst), scratch) == x->bytes[t->dst]);
        if (a->target && eb->enc == ENC_ZFP_ACC) { /* the bound it used opens its header */
            double used;
            x->ops->download(&used, x->ptr[t->dst], sizeof used);
            if (used > a->used[eb->layer]) a->used[eb->layer] = used;
        }
    }
    x->codec_us += now_us() - t0;
}

/* The optimizer step of `count` parameters of buffer w from `first` on, from their gradient in g
 * and their state, all of buffer st (buffers); a persistent gradient is zeroed for the next
 * iteration (gradients are += across bands). The step is elementwise, so chunks of it give the
 * whole step's values bit for bit. */
static void update_layer(exec *x, int w, int g, int st, int64_t first, int64_t count)
{
    float *p = fptr(x, w) + first, *dp = fptr(x, g) + first, *state = fptr(x, st);
    if (x->opt == SCHED_ADAM) x->ops->adam(p, dp, state, count, x->hp.lr, x->hp.beta1, x->hp.beta2, x->hp.eps, x->steps_done);
    else x->ops->sgd(p, dp, state, count, x->hp.lr, x->hp.momentum);
    if (x->s->bufs[g].persistent) x->ops->zero(dp, count * (int64_t)sizeof(float));
}

/* UPDATE: every layer's parameters (layer -1; the iteration's one optimizer step), or one layer's
 * (+migrate: the step's w, dw and aux). */
static void update(exec *x, const sched_step *t)
{
    if (t->layer >= 0) {
        const sched_buf *st = &x->s->bufs[t->aux];
        if (x->before_update && st->param0 == 0) x->before_update(x, t->layer, x->before_update_ctx);
        update_layer(x, t->w, t->dw, t->aux, st->param0, st->bytes / 4 / (x->opt == SCHED_ADAM ? 2 : 1));
        return;
    }
    if (x->before_update) x->before_update(x, -1, x->before_update_ctx);
    adapt_update(&x->adapt, x->ops, x->n, x->ptr); /* COMET's bounds, if the plan adapts them */
    for (int b = 0; b < x->s->n_buf; b++) {
        const sched_buf *sb = &x->s->bufs[b];
        if (sb->kind != BUF_PARAM) continue;
        int g = -1, st = -1;
        for (int k = b + 1; k < x->s->n_buf && (g < 0 || st < 0); k++) /* created together, in this order */
            if (x->s->bufs[k].layer == sb->layer) {
                if (x->s->bufs[k].kind == BUF_PGRAD) g = k;
                if (x->s->bufs[k].kind == BUF_OPT) st = k;
            }
        CHECK(g >= 0 && st >= 0);
        update_layer(x, b, g, st, 0, sb->bytes / 4);
    }
}

/* Arena mode, and this buffer is in the arena (a data-sized encoding is not: sim/predict/arena.h). */
static bool placed(const exec *x, const sched_buf *sb) { return x->arena_on && !arena_outside(sb); }

int exec_use_arena(exec *x, err *e)
{
    arena_plan(x->s, &x->plan);
    if (alloc_arena_open(&x->mem, x->plan.size, x->plan.host_size, e)) return -1;
    x->arena_on = true;
    x->staged = err_calloc((size_t)x->s->n_buf + 1, sizeof(bool));
    return 0;
}

/* A new block for buffer b at step i (its ALLOC): placed at the plan's offset, or from the pool. */
static void *new_block(exec *x, int b, int i)
{
    const sched_buf *sb = &x->s->bufs[b];
    if (!placed(x, sb)) return alloc_get(&x->mem, sb->cat, sb->bytes, sb->zero);
    void *p = alloc_place(&x->mem, sb->cat, x->plan.at[i], sb->bytes);
    if (sb->zero) x->ops->zero(p, sb->bytes);
    return p;
}

void exec_start(exec *x)
{
    if (x->started) return;
    for (int i = 0; i < x->s->n_step; i++) {
        const sched_step *t = &x->s->steps[i];
        if (t->op != SCHED_ALLOC || !x->s->bufs[t->buf].persistent) continue;
        const sched_buf *sb = &x->s->bufs[t->buf];
        int b = t->buf;
        if (sb->host_home && placed(x, sb)) { /* +migrate, planned: made on the device, copied to its home */
            void *dev = alloc_get(&x->mem, sb->cat, sb->bytes, sb->zero);
            init_buffer(x, b, dev);
            x->ptr[b] = alloc_move_to(&x->mem, dev, sb->cat, MEM_HOST, sb->bytes, x->plan.at[i], ALLOC_SRC_STAYS);
            x->ops->sync();
            x->mem.mem->put(dev, false); /* accounted by the move */
            x->on_host[b] = true;
            continue;
        }
        x->ptr[b] = new_block(x, b, i);
        init_buffer(x, b, x->ptr[b]);
        if (sb->host_home) { /* +migrate: at home on the host between its uses */
            x->ptr[b] = alloc_move(&x->mem, x->ptr[b], sb->cat, MEM_HOST, sb->bytes);
            x->on_host[b] = true;
        }
    }
    x->started = true;
}

/* ALLOC, FREE, OFFLOAD or PREFETCH (step i): a block placed or taken, released, or moved. */
static void memory_step(exec *x, const sched_step *t, int i)
{
    const sched_buf *sb = &x->s->bufs[t->buf];
    const alloc_mem *mem = x->ops->mem;
    switch (t->op) {
    case SCHED_ALLOC:
        if (sb->persistent || (sb->kind == BUF_ENC && enc_data_sized(sb->enc))) break; /* exec_start; ENCODE */
        x->ptr[t->buf] = new_block(x, t->buf, i);
        break;
    case SCHED_FREE:
        if (sb->persistent) break; /* kept for the next iteration; exec_free releases them */
        if (placed(x, sb)) alloc_unplace(&x->mem, x->ptr[t->buf], x->on_host[t->buf] ? MEM_HOST : sb->cat, x->bytes[t->buf]);
        else alloc_put(&x->mem, x->ptr[t->buf], x->on_host[t->buf] ? MEM_HOST : sb->cat, x->bytes[t->buf]);
        x->ptr[t->buf] = NULL, x->on_host[t->buf] = false;
        break;
    case SCHED_OFFLOAD:
        if (placed(x, sb)) /* into the host block the plan gives it: its home, or one a staged copy filled */
            x->ptr[t->buf] = alloc_move_to(&x->mem, x->ptr[t->buf], sb->cat, MEM_HOST, x->bytes[t->buf], x->plan.at[i],
                                           sb->host_home || x->staged[t->buf] ? ALLOC_DST_PLACED : 0);
        else x->ptr[t->buf] = alloc_move(&x->mem, x->ptr[t->buf], sb->cat, MEM_HOST, x->bytes[t->buf]);
        x->on_host[t->buf] = true;
        if (x->staged) x->staged[t->buf] = false;
        break;
    case SCHED_PREFETCH:
        if (placed(x, sb)) /* a +migrate map's home stays */
            x->ptr[t->buf] = alloc_move_to(&x->mem, x->ptr[t->buf], MEM_HOST, sb->cat, x->bytes[t->buf], x->plan.at[i],
                                           sb->host_home ? ALLOC_SRC_STAYS : 0);
        else x->ptr[t->buf] = alloc_move(&x->mem, x->ptr[t->buf], MEM_HOST, sb->cat, x->bytes[t->buf]);
        x->on_host[t->buf] = false, x->arriving[t->buf] = mem->ready != NULL;
        break;
    default: break;
    }
}

void exec_begin(exec *x)
{
    memset(x->layer_us, 0, (size_t)x->n->n * 2 * sizeof(double));
    x->codec_us = 0;
    x->iter++;
    exec_start(x);
    alloc_reset_peaks(&x->mem);
    x->mem.record = true;
}

void exec_run(exec *x, int from, int to, const float *images, const int64_t *labels)
{
    const sched *s = x->s;
    const net *n = x->n;
    double step_t0 = now_us();
    const alloc_mem *mem = x->ops->mem;
    bool overlap = mem->stage && !x->sync_steps; /* calibrating: each move is timed whole, in line */
    for (int i = from; i < to; i++) {
        const sched_step *t = &s->steps[i];
        if (mem->ready && t->op != SCHED_ALLOC && t->op != SCHED_OFFLOAD && t->op != SCHED_PREFETCH) {
            int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
            if (t->buf >= 0) uses[nu++] = t->buf;
            for (int u = 0; u < nu; u++)
                if (x->arriving[uses[u]]) mem->ready(x->ptr[uses[u]]), x->arriving[uses[u]] = false;
        }
        switch (t->op) {
        case SCHED_ALLOC:
        case SCHED_FREE:
        case SCHED_OFFLOAD:
        case SCHED_PREFETCH:
            if (t->op == SCHED_FREE && x->depart) x->depart(x, t->buf, x->hook_ctx);
            memory_step(x, t, i);
            break;
        case SCHED_ENCODE:
        case SCHED_DECODE: code(x, t); break;
        case SCHED_LOAD:
            if (x->arrive) {
                x->arrive(x, i, x->hook_ctx);
                break;
            }
            if (x->batch[0]) { /* staged: one copy on the backend each, and the next iteration stages again */
                x->ops->copy(fptr(x, t->y), x->batch[0], s->bufs[t->y].bytes);
                x->ops->copy(x->ptr[t->aux], x->batch[1], s->bufs[t->aux].bytes);
                x->batch[0] = x->batch[1] = NULL;
                break;
            }
            x->ops->upload(fptr(x, t->y), images, s->bufs[t->y].bytes);
            x->ops->upload(x->ptr[t->aux], labels, s->bufs[t->aux].bytes);
            break;
        case SCHED_COPY: copy_rows(x, t); break;
        case SCHED_FWD:
        case SCHED_BWD: {
            ops_call c = call_of(x, t);
            if (t->op == SCHED_FWD) {
                const kind_traits *k = kind_of(&n->layers[t->layer]);
                if (k->running) c.running = fptr(x, t->dw), c.update_running = !t->recompute;
                if (k->labels && !t->recompute) c.loss = &x->loss; /* there by the iteration's last sync */
                c.dw = NULL;
            } else {
                c.dw = fptr(x, t->dw);
            }
            double t0 = now_us();
            if (x->ops->tag) x->ops->tag(t->layer * 2 + (t->op == SCHED_BWD));
            (t->op == SCHED_FWD ? x->ops->forward : x->ops->backward)(&c);
            if (t->op == SCHED_BWD) adapt_backward(&x->adapt, x->ops, n, s, t, fptr(x, t->dy));
            if (x->ops->tag) x->ops->tag(-1);
            x->layer_us[t->layer * 2 + (t->op == SCHED_BWD)] += now_us() - t0; /* launch time on an asynchronous backend */
            break;
        }
        case SCHED_STATS:
        case SCHED_STATS_END: {
            ops_call c = call_of(x, t);
            ops_stats what = t->op == SCHED_STATS_END ? OPS_STATS_END : t->dy >= 0 ? OPS_STATS_DY : OPS_STATS_X;
            if (what == OPS_STATS_END) c.running = fptr(x, t->dw), c.update_running = true;
            double t0 = now_us();
            if (x->ops->tag) x->ops->tag(t->layer * 2 + (what == OPS_STATS_DY));
            x->ops->stats(&c, what);
            if (x->ops->tag) x->ops->tag(-1);
            x->layer_us[t->layer * 2 + (what == OPS_STATS_DY)] += now_us() - t0;
            break;
        }
        case SCHED_UPDATE:
            if (t->layer < 0 || !x->updating) x->steps_done++, x->updating = t->layer >= 0;
            update(x, t);
            break;
        }
        for (int k = x->stage_start[i]; overlap && k < x->stage_start[i + 1]; k++) { /* copies that may begin now */
            int o = x->stage_list[k], b = s->steps[o].buf;
            if (placed(x, &s->bufs[b]) && !s->bufs[b].host_home) alloc_stage_to(&x->mem, x->ptr[b], x->bytes[b], x->plan.at[o]), x->staged[b] = true;
            else mem->stage(x->ptr[b], x->bytes[b], placed(x, &s->bufs[b]) ? x->mem.base[1] + x->plan.at[o] : NULL);
        }
        if (x->sync_steps) x->ops->sync();
        double step_t1 = now_us();
        x->step_us[i] = step_t1 - step_t0, step_t0 = step_t1;
    }
}

void exec_end(exec *x)
{
    x->ops->sync();
    memset(x->arriving, 0, (size_t)x->s->n_buf * sizeof(bool)); /* everything has arrived */
    x->mem.record = false;
    x->updating = false;
}

void exec_stage(exec *x, const float *images, const int64_t *labels)
{
    if (!x->ops->stage) return;
    for (int i = 0; i < x->s->n_step; i++) {
        const sched_step *t = &x->s->steps[i];
        if (t->op != SCHED_LOAD) continue;
        x->batch[0] = x->ops->stage(0, images, x->s->bufs[t->y].bytes);
        x->batch[1] = x->ops->stage(1, labels, x->s->bufs[t->aux].bytes);
        return;
    }
}

void exec_iteration(exec *x, const float *images, const int64_t *labels)
{
    exec_begin(x);
    exec_run(x, 0, x->s->n_step, images, labels);
    exec_end(x);
}

static int param_buf(const exec *x, buf_kind kind, int L)
{
    for (int b = 0; b < x->s->n_buf; b++)
        if (x->s->bufs[b].kind == kind && x->s->bufs[b].layer == L && x->ptr[b]) return b;
    return -1;
}

float *exec_param_copy(const exec *x, buf_kind kind, int L, int64_t *count)
{
    int b = param_buf(x, kind, L);
    if (b < 0) return NULL;
    int64_t bytes = x->s->bufs[b].bytes;
    float *p = err_calloc((size_t)bytes / 4 + 1, sizeof(float));
    x->ops->sync();
    if (x->on_host[b]) memcpy(p, x->ptr[b], (size_t)bytes); /* +migrate: at home on the host */
    else x->ops->download(p, x->ptr[b], bytes);
    if (count) *count = bytes / 4;
    return p;
}

void exec_param_write(exec *x, buf_kind kind, int L, const float *src)
{
    int b = param_buf(x, kind, L);
    CHECK(b >= 0);
    if (x->on_host[b]) { /* +migrate: at home on the host; a move there may still be under way */
        x->ops->sync();
        memcpy(x->ptr[b], src, (size_t)x->s->bufs[b].bytes);
    } else {
        x->ops->upload(x->ptr[b], src, x->s->bufs[b].bytes);
    }
}

void exec_free(exec *x)
{
    x->ops->sync(); /* nothing in flight into memory about to go */
    for (int b = 0; b < x->s->n_buf; b++)
        if (x->ptr[b] && !placed(x, &x->s->bufs[b])) alloc_put(&x->mem, x->ptr[b], x->on_host[b] ? MEM_HOST : x->s->bufs[b].cat, x->bytes[b]);
    free(x->ptr);
    free(x->bytes);
    free(x->on_host), free(x->arriving), free(x->stage_start), free(x->stage_list), free(x->staged);
    arena_free(&x->plan);
    free(x->layer_us);
    free(x->step_us);
    adapt_free(&x->adapt);
    alloc_free_stats(&x->mem);
    memset(x, 0, sizeof *x);
}
