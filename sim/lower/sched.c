/* sched: the schedule's core — buffers, steps and their input slots, what a step uses and writes,
 * when a move's copy can begin, the walk of what is held when, and the workspace and optimizer
 * sizes every pass reads (sched.h). It knows nothing of rows, checkpoints, offload or encodings:
 * the passes above it (lower.h and the files beside it) build schedules, pipeline.c orders them. */
#include "sim/lower/sched.h"

#include <string.h>

static const char *cat_names[MEM_NCAT] = {"weights", "weight_grads", "optimizer", "activations",
                                          "act_grads", "boundaries", "workspace", "host"};
const char *mem_cat_name(mem_cat c) { return cat_names[c]; }

static const char *op_names[] = {"alloc", "free", "fwd", "bwd", "copy", "offload", "prefetch", "update", "load", "stats", "stats_end", "encode", "decode"};
const char *sched_op_name(sched_op op) { return op_names[op]; }

static const char *kind_tags[BUF_NKIND] = {"x", "label", "y", "dy", "argmax", "stats", "prob", "boundary",
                                           "dboundary", "ws", "w", "dw", "opt", "running", "sums", "enc", "mask"};

/* sched_cpu_conv_group's columns a product reaches, for inner lengths below and from WIDE_K; and
 * the most workspace bytes a group takes (unless one image takes more): sched.h says why 3 MiB */
enum { GROUP_COLS = 128, GROUP_COLS_WIDE = 512, WIDE_K = 512, GROUP_BYTES = 3 << 20 };

bool sched_cpu_conv_pointwise(const net_layer *l)
{
    net_window w = l->win, ww = l->win_w;
    return l->u.conv.groups == 1 && w.k == 1 && w.s == 1 && w.p == 0 && ww.k == 1 && ww.s == 1 && ww.p == 0;
}

int sched_cpu_conv_group(const net_layer *l, int c_in, int64_t cols, int batch)
{
    int64_t K = (int64_t)c_in * l->win.k * l->win_w.k, want = K >= WIDE_K ? GROUP_COLS_WIDE : GROUP_COLS;
    if (cols >= want || (sched_cpu_conv_pointwise(l) && cols >= GROUP_COLS)) return 1;
    int64_t g = (want + cols - 1) / cols, image = (K + l->u.conv.c_out) * cols * 4;
    if (g > batch) g = batch;
    if (g * image > GROUP_BYTES) g = GROUP_BYTES / image;
    return g < 1 ? 1 : (int)g;
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
    return sched_cpu_conv_ws_bytes(l, n->layers[l->in[0]].c, rows, batch);
}

int64_t sched_cpu_conv_ws_bytes(const net_layer *l, int c_in, int rows, int batch)
{
    int64_t cols = (int64_t)rows * l->w, K = (int64_t)c_in * l->win.k * l->win_w.k;
    int g = sched_cpu_conv_group(l, c_in, cols, batch);
    if (g == 1 && sched_cpu_conv_pointwise(l)) return 0; /* conv_cpu.c: a direct product */
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
    const sched_ws_model *m = cfg->ws ? cfg->ws : &sched_ws_cpu;
    if (q->batch == cfg->batch) return m->bytes(m, n, q); /* the callers' own: no copy (a copy of a
                                                             query just built stalled on its narrow stores) */
    sched_ws_query k = *q;
    k.batch = cfg->batch;
    return m->bytes(m, n, &k);
}

int64_t sched_cfg_workspace(const sched_cfg *cfg, const net *n, int L, int rows, bool backward)
{
    sched_ws_query q = {.layer = L, .batch = cfg->batch, .backward = backward, .out = {0, rows}};
    return sched_step_workspace(cfg, n, &q);
}

double sched_update_flops(const sched_cfg *cfg, int64_t params) { return (double)params * (cfg->optimizer == SCHED_ADAM ? 12 : 4); }

double sched_update_bytes(const sched_cfg *cfg, int64_t params)
{
    return (double)params * 4 * (cfg->optimizer == SCHED_ADAM ? 4 : 3);
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
        p = err_realloc(NULL, sizeof *p + cap); /* not zeroed: a slot is set when taken */
        p->used = 0, p->cap = cap, p->next = s->pool, s->pool = p;
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

void sched_move_issue(const sched *s, int *issue)
{
    int *last = err_calloc((size_t)s->n_buf + 1, sizeof(int));
    for (int b = 0; b < s->n_buf; b++) last[b] = -1;
    for (int i = 0; i < s->n_step; i++) issue[i] = -1;
    sched_iter it = sched_iter_open(s, true); /* an ALLOC or FREE is no OFFLOAD and writes nothing */
    for (const sched_step *t; (t = sched_next(&it));) {
        if (t->op == SCHED_OFFLOAD) issue[it.place] = last[t->buf];
        int w[SCHED_MAX_USES], nw = sched_step_writes(t, w);
        for (int k = 0; k < nw; k++) last[w[k]] = it.place;
    }
    free(last);
}

void sched_events_open(const sched *s, sched_events *x)
{
    *x = (sched_events){s->mem, s->n_mem, s->first_bwd, NULL};
    if (s->mem) return;
    int m = 0;
    for (int i = 0; i < s->n_step; i++) m += sched_op_is_event(s->steps[i].op);
    sched_event *ev = x->own = err_realloc(NULL, ((size_t)m + 1) * sizeof *ev);
    x->ev = ev, x->n = m, x->first_bwd = s->n_step;
    for (int i = 0, k = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if (sched_op_is_event(t->op)) ev[k++] = (sched_event){i, t->buf, t->op};
        if (t->op == SCHED_BWD && x->first_bwd == s->n_step) x->first_bwd = i;
    }
}

void sched_free(sched *s)
{
    free(s->bufs);
    free(s->steps);
    free(s->at);
    free(s->mem);
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

typedef struct {
    int64_t *out, last[MEM_NCAT];
    int next;
} by_category;

static void fill_rows(void *ctx, int step, int up, int64_t device, const int64_t cur[MEM_NCAT])
{
    (void)up, (void)device;
    by_category *c = ctx;
    for (; c->next < step; c->next++) memcpy(c->out + (int64_t)c->next * MEM_NCAT, c->last, sizeof c->last);
    memcpy(c->last, cur, sizeof c->last);
}

void sched_bytes_by_category(const sched *s, int64_t *out)
{
    by_category c = {.out = out};
    sched_walk(s, fill_rows, &c);
    fill_rows(&c, s->n_step, -1, 0, c.last); /* steps after the last event keep its values */
}

double sched_compute_flops(const sched *s)
{
    double f = 0;
    sched_iter it = sched_iter_open(s, true);
    for (const sched_step *t; (t = sched_next(&it));)
        if (t->op == SCHED_FWD || t->op == SCHED_BWD || t->op == SCHED_STATS) f += t->flops;
    return f;
}

void sched_materialize(sched *s)
{
    if (!s->at) return;
    sched_step *steps = err_realloc(NULL, ((size_t)s->n_step + 1) * sizeof(sched_step));
    sched_iter it = sched_iter_open(s, false);
    for (const sched_step *t; (t = sched_next(&it));) steps[it.place] = *t;
    free(s->steps), free(s->at);
    s->steps = steps, s->at = NULL, s->n_list = 0;
}
