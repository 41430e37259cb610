/* sched: lowering of plans to steps (see sched.h for the buffer and accumulation conventions).
 *
 * One lowering context (lower.h) walks the plan's segments forward, then backward in reverse:
 * full-map segments here, row segments in rows.c, each emitting FWD/BWD/COPY/STATS steps on the
 * context's "current buffer" maps (which buffer holds layer L's output and its gradient right
 * now). Offload steps and ALLOC/FREE are derived afterwards from the finished step list, so no
 * mode decides lifetimes by hand. */
#include "sim/sched.h"

#include <string.h>

#include "sim/kind.h"
#include "sim/lower.h"
#include "sim/rows.h"

static const char *cat_names[MEM_NCAT] = {"weights", "weight_grads", "optimizer", "activations",
                                          "act_grads", "boundaries", "workspace", "host"};
const char *mem_cat_name(mem_cat c) { return cat_names[c]; }

static const char *op_names[] = {"alloc", "free", "fwd", "bwd", "copy", "offload", "prefetch", "update", "load", "stats", "stats_end", "encode", "decode"};
const char *sched_op_name(sched_op op) { return op_names[op]; }

static const char *kind_tags[BUF_NKIND] = {"x", "label", "y", "dy", "argmax", "stats", "prob", "boundary",
                                           "dboundary", "ws", "w", "dw", "opt", "running", "sums", "enc", "mask"};

int sched_cpu_conv_group(int64_t cols, int batch)
{
    int64_t g = (128 + cols - 1) / cols;
    return g > batch ? batch : g < 1 ? 1 : (int)g;
}

int64_t sched_workspace_bytes(const net *n, int L, int rows, int batch)
{
    const net_layer *l = &n->layers[L];
    if (l->kind == NET_CONVT && rows > 0) { /* conv_cpu.c: the adjoint conv's col over the input rows read, an image at a time */
        net_window w = net_convt_window(l);
        const net_layer *x = &n->layers[l->in[0]];
        int64_t in_rows = (rows - 1 + (int64_t)w.d * (w.k - 1)) / w.s + 1;
        if (in_rows > x->h) in_rows = x->h;
        return (int64_t)l->c * w.k * w.k * in_rows * x->w * 4;
    }
    if (l->kind == NET_BILINEAR && rows > 0) return (int64_t)l->w * 16; /* ops_cpu.c: every output column's taps */
    if (l->kind != NET_CONV || rows <= 0) return 0;
    net_window w = l->win, ww = l->win_w;
    int64_t cols = (int64_t)rows * l->w, K = (int64_t)n->layers[l->in[0]].c * w.k * ww.k;
    int g = sched_cpu_conv_group(cols, batch);
    if (g == 1 && l->u.conv.groups == 1 && w.k == 1 && w.s == 1 && w.p == 0 && ww.k == 1 && ww.s == 1 && ww.p == 0)
        return 0; /* conv_cpu.c: a direct product */
    return (K + (g > 1 ? l->u.conv.c_out : 0)) * g * cols * 4;
}

static int64_t cpu_ws_bytes(const sched_ws_model *m, const net *n, const sched_ws_query *q)
{
    (void)m;
    return sched_workspace_bytes(n, q->layer, band_rows_len(q->out), q->batch);
}

const sched_ws_model sched_ws_cpu = {.bytes = cpu_ws_bytes};

int64_t sched_step_workspace(const sched_cfg *cfg, const net *n, const sched_ws_query *q)
{
    if (band_rows_len(q->out) <= 0) return 0;
    sched_ws_query k = *q;
    k.batch = cfg->batch;
    return (cfg->ws ? cfg->ws : &sched_ws_cpu)->bytes(cfg->ws ? cfg->ws : &sched_ws_cpu, n, &k);
}

int64_t sched_cfg_workspace(const sched_cfg *cfg, const net *n, int L, int rows, bool backward)
{
    sched_ws_query q = {.layer = L, .backward = backward, .out = {0, rows}};
    return sched_step_workspace(cfg, n, &q);
}

double sched_update_flops(const sched_cfg *cfg, int64_t params) { return (double)params * (cfg->optimizer == SCHED_ADAM ? 12 : 4); }

double sched_update_bytes(const sched_cfg *cfg, int64_t params)
{
    return (double)params * 4 * (cfg->optimizer == SCHED_ADAM ? 4 : 3);
}

/* --- whole iteration -------------------------------------------------------------------------- */

static band_rows hold_full(const void *n, int P) { return lower_full(n, P); }

static void persistent_buffers(lower *c)
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

/* A chunk of the steps' input slots. */
struct sched_pool {
    struct sched_pool *next;
    size_t used, cap;
    _Alignas(8) unsigned char v[];
};

static void *pool_take(sched *s, size_t bytes)
{
    bytes = (bytes + 7) & ~(size_t)7;
    struct sched_pool *p = s->pool;
    if (!p || p->used + bytes > p->cap) {
        size_t cap = bytes > (1u << 16) ? bytes : (1u << 16);
        p = err_calloc(1, sizeof *p + cap);
        p->cap = cap, p->next = s->pool, s->pool = p;
    }
    void *v = p->v + p->used;
    p->used += bytes;
    return v;
}

void sched_step_slots(sched *s, sched_step *t, int n)
{
    CHECK(n >= 0 && n <= NET_MAX_IN + 1);
    t->n_x = n;
    t->x = pool_take(s, (size_t)n * 2 * sizeof(int) + (size_t)n * sizeof(bool));
    t->dx = t->x + n;
    t->dx_acc = (bool *)(t->dx + n);
    for (int j = 0; j < n; j++) t->x[j] = t->dx[j] = -1, t->dx_acc[j] = false;
}

int sched_step_uses(const sched_step *t, int *out)
{
    int mid[] = {t->y, t->aux, t->w, t->dw, t->ws, t->dy}, end[] = {t->src, t->dst, t->sums};
    _Static_assert(sizeof mid / sizeof *mid + sizeof end / sizeof *end + 2 * (NET_MAX_IN + 1) <= SCHED_MAX_USES,
                   "SCHED_MAX_USES");
    int n = 0;
    for (int j = 0; j < t->n_x; j++)
        if (t->x[j] >= 0) out[n++] = t->x[j];
    for (size_t u = 0; u < sizeof mid / sizeof *mid; u++)
        if (mid[u] >= 0) out[n++] = mid[u];
    for (int j = 0; j < t->n_x; j++)
        if (t->dx[j] >= 0) out[n++] = t->dx[j];
    for (size_t u = 0; u < sizeof end / sizeof *end; u++)
        if (end[u] >= 0) out[n++] = end[u];
    return n;
}

int sched_step_writes(const sched_step *t, int *out)
{
    int n = 0;
    switch (t->op) {
    case SCHED_FWD: out[n++] = t->y; out[n++] = t->map_stats ? -1 : t->aux; out[n++] = t->dw; break;
    case SCHED_BWD:
        for (int j = 0; j < t->n_x; j++) out[n++] = t->dx[j];
        out[n++] = t->dw;
        break;
    case SCHED_COPY: case SCHED_ENCODE: case SCHED_DECODE: out[n++] = t->dst; break;
    case SCHED_STATS: out[n++] = t->sums; break;
    case SCHED_STATS_END: case SCHED_UPDATE: case SCHED_LOAD: out[n++] = t->w; out[n++] = t->y; out[n++] = t->aux; out[n++] = t->dw; break;
    case SCHED_PREFETCH: out[n++] = t->buf; break;
    default: break;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (out[i] >= 0) out[k++] = out[i];
    return k;
}

void sched_move_issue(const sched *s, int *issue)
{
    int *last = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    for (int b = 0; b < s->n_buf; b++) last[b] = -1;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        issue[i] = t->op == SCHED_OFFLOAD ? last[t->buf] : -1;
        int w[SCHED_MAX_USES], nw = sched_step_writes(t, w);
        for (int k = 0; k < nw; k++) last[w[k]] = i;
    }
    free(last);
}

/* Liveness: ALLOC before first use, FREE after last use; persistent buffers around everything. */
static void place_allocs(sched *s)
{
    int nb = s->n_buf, ns = s->n_step;
    int *first = err_calloc((size_t)nb, sizeof(int)), *last = err_calloc((size_t)nb, sizeof(int));
    for (int b = 0; b < nb; b++) first[b] = -1, last[b] = -1;
    for (int i = 0; i < ns; i++) {
        sched_step *t = &s->steps[i];
        int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
        for (int u = 0; u < nu; u++) {
            if (first[uses[u]] < 0) first[uses[u]] = i;
            last[uses[u]] = i;
        }
        if (t->buf >= 0) last[t->buf] = i > last[t->buf] ? i : last[t->buf];
    }
    /* ALLOCs bucketed by first use and FREEs by last use; persistent buffers are placed apart */
    int n_persist = 0;
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) first[b] = last[b] = -1, n_persist++;
    lower_buckets al = lower_bucket(first, nb, ns), fr = lower_bucket(last, nb, ns);
    int n_temp = al.start[ns];
    int total = ns + 2 * n_temp + 2 * n_persist;
    sched_step *steps = err_calloc((size_t)total, sizeof(sched_step)), *o = steps;
#define MARK(opv, b) (*o++ = lower_buffer_step(s, (opv), (b), s->bufs[b].band, 0))
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_ALLOC, b);
    for (int i = 0; i < ns; i++) {
        for (int k = al.start[i]; k < al.start[i + 1]; k++) MARK(SCHED_ALLOC, al.list[k]);
        *o++ = s->steps[i];
        for (int k = fr.start[i]; k < fr.start[i + 1]; k++) MARK(SCHED_FREE, fr.list[k]);
    }
    for (int b = 0; b < nb; b++)
        if (s->bufs[b].persistent) MARK(SCHED_FREE, b);
#undef MARK
    CHECK(o - steps == total);
    free(s->steps);
    s->steps = steps, s->n_step = total;
    lower_buckets_free(&al), lower_buckets_free(&fr);
    free(first), free(last);
}

int sched_lower(sched *s, const net *n, const plan *p, const sched_cfg *cfg, err *e)
{
    memset(s, 0, sizeof *s);
    if (cfg->batch < 1) return err_set(e, "batch must be at least 1 (got %d)", cfg->batch);
    s->batch = cfg->batch;
    lower c = {.s = s, .n = n, .p = p, .cfg = cfg};
    int **maps[] = {&c.act, &c.aux, &c.grad, &c.param, &c.pgrad, &c.opt, &c.run, &c.stats, &c.sums};
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) {
        *maps[m] = err_calloc((size_t)n->n, sizeof(int));
        memset(*maps[m], -1, (size_t)n->n * sizeof(int));
    }
    persistent_buffers(&c);
    int **bound = err_calloc((size_t)p->n_seg, sizeof(int *)); /* 2PS boundaries, [segment][layer * R + band] */
    for (int i = 0; i < p->n_seg; i++)
        if (p->segs[i].mode == PLAN_ROWS) {
            bound[i] = err_calloc((size_t)n->n * p->segs[i].fp, sizeof(int));
            memset(bound[i], -1, (size_t)n->n * p->segs[i].fp * sizeof(int));
        }

    /* forward */
    c.act[0] = lower_buf(&c, BUF_INPUT, MEM_ACT, 0, -1, lower_full(n, 0), lower_bytes(&c, 0, lower_full(n, 0), 4));
    c.label = lower_buf(&c, BUF_LABEL, MEM_ACT, n->n - 1, -1, (band_rows){0, 0}, (int64_t)cfg->batch * net_labels_per_image(n) * 8);
    {
        sched_step *t = lower_step(&c, SCHED_LOAD, 0, -1); /* the batch arrives: image and labels */
        t->y = c.act[0], t->aux = c.label, t->rows = lower_full(n, 0);
    }
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *ps = &p->segs[i];
        c.seg = i;
        if (ps->mode == PLAN_ROWS) {
            rows_forward(&c, ps, bound[i]);
            continue;
        }
        for (int L = ps->first; L <= ps->last; L++)
            lower_fwd(&c, L, -1, lower_full(n, L), lower_full(n, L), -1, ps->mode != PLAN_CKPT);
    }
    /* backward */
    c.bwd_phase = true;
    for (int i = p->n_seg - 1; i >= 0; i--) {
        const plan_seg *ps = &p->segs[i];
        c.seg = i;
        if (ps->mode == PLAN_ROWS) {
            rows_backward(&c, ps, bound[i]);
            continue;
        }
        if (ps->mode == PLAN_CKPT) {
            bool *need = err_calloc((size_t)n->n, sizeof(bool));
            plan_need(n, ps->first, ps->last, NULL, NULL, false, need);
            for (int L = ps->first; L <= ps->last; L++)
                if (need[L]) lower_fwd(&c, L, -1, lower_full(n, L), lower_full(n, L), -1, true);
            free(need);
        }
        for (int L = ps->last; L >= ps->first; L--) lower_bwd(&c, L, -1, lower_full(n, L), hold_full, n, false, NULL, true);
    }
    int64_t adam = p->torch && cfg->optimizer == SCHED_ADAM ? torch_adam_scratch(n, p->torch) : 0;
    if (p->migrate) {
        migrate_updates(&c);
    } else if (p->torch == PLAN_TORCH_2) { /* optimizer.step() at the end, each gradient alive until it */
        for (int L = 0, first = 1; L < n->n; L++) {
            if (c.param[L] < 0) continue;
            sched_step *t = lower_step(&c, SCHED_UPDATE, L, -1);
            t->w = c.param[L], t->dw = c.pgrad[L], t->aux = c.opt[L], t->bwd_phase = true;
            t->flops = sched_update_flops(cfg, n->layers[L].params);
            t->bytes_moved = sched_update_bytes(cfg, n->layers[L].params);
            if (adam && first) t->ws = lower_buf(&c, BUF_WS, MEM_WORKSPACE, L, -1, (band_rows){0, 0}, adam);
            first = 0;
        }
    } else {
        sched_step *t = lower_step(&c, SCHED_UPDATE, -1, -1);
        t->flops = sched_update_flops(cfg, net_params(n));
        t->bytes_moved = sched_update_bytes(cfg, net_params(n));
        if (adam) t->ws = lower_buf(&c, BUF_WS, MEM_WORKSPACE, -1, -1, (band_rows){0, 0}, adam);
    }
    for (int i = 0; i < s->n_step; i++) /* compute: the passes' FLOPs, not the optimizer's */
        if (s->steps[i].op == SCHED_FWD || s->steps[i].op == SCHED_BWD || s->steps[i].op == SCHED_STATS) s->flops += s->steps[i].flops;
    stash_mark_offloads(&c);
    int rc = stash_encode(&c, e);
    if (!rc) rc = stash_place_moves(&c, e);
    if (!rc) {
        if (p->migrate) migrate_place_moves(&c);
        place_allocs(s);
    }
    for (int i = 0; i < p->n_seg; i++) free(bound[i]);
    free(bound);
    for (size_t m = 0; m < sizeof maps / sizeof *maps; m++) free(*maps[m]);
    if (rc) sched_free(s);
    return rc;
}

void sched_free(sched *s)
{
    free(s->bufs);
    free(s->steps);
    while (s->pool) {
        struct sched_pool *next = s->pool->next;
        free(s->pool);
        s->pool = next;
    }
    memset(s, 0, sizeof *s);
}

void sched_buf_name(const sched *s, const net *n, int b, char *out, size_t len)
{
    const sched_buf *x = &s->bufs[b];
    const char *layer = x->layer >= 0 ? n->layers[x->layer].name : "-";
    if (x->band >= 0)
        snprintf(out, len, "%s.%s[b%d %d:%d]", layer, kind_tags[x->kind], x->band, x->rows.a, x->rows.b);
    else
        snprintf(out, len, "%s.%s", layer, kind_tags[x->kind]);
}

void sched_walk(const sched *s, sched_visit visit, void *ctx)
{
    int64_t cur[MEM_NCAT] = {0};
    bool *host = err_calloc((size_t)s->n_buf, sizeof(bool));
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (t->op != SCHED_ALLOC && t->op != SCHED_FREE && t->op != SCHED_OFFLOAD && t->op != SCHED_PREFETCH) continue;
        const sched_buf *b = &s->bufs[t->buf];
        if (t->op == SCHED_ALLOC && b->host_home) cur[MEM_HOST] += b->bytes, host[t->buf] = true;
        else if (t->op == SCHED_ALLOC) cur[b->cat] += b->bytes;
        else if (t->op == SCHED_FREE) cur[host[t->buf] ? MEM_HOST : b->cat] -= b->bytes;
        else if (t->op == SCHED_OFFLOAD) cur[b->cat] -= b->bytes, cur[MEM_HOST] += b->bytes, host[t->buf] = true;
        else cur[MEM_HOST] -= b->bytes, cur[b->cat] += b->bytes, host[t->buf] = false;
        visit(ctx, i, cur);
    }
    free(host);
}

typedef struct {
    int64_t *out, last[MEM_NCAT];
    int next;
} by_category;

static void fill_rows(void *ctx, int step, const int64_t cur[MEM_NCAT])
{
    by_category *c = ctx;
    for (; c->next < step; c->next++) memcpy(c->out + (int64_t)c->next * MEM_NCAT, c->last, sizeof c->last);
    memcpy(c->last, cur, sizeof c->last);
}

void sched_bytes_by_category(const sched *s, int64_t *out)
{
    by_category c = {.out = out};
    sched_walk(s, fill_rows, &c);
    fill_rows(&c, s->n_step, c.last); /* steps after the last event keep its values */
}
