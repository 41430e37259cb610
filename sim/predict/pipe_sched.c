/* pipe_sched: see pipe_sched.h. */
#include "sim/predict/pipe_sched.h"

#include <stdlib.h>
#include <string.h>

#include "sim/lower/liveness.h"
#include "sim/lower/lower.h"
#include "sim/predict/sim.h"

/* The whole-net lowering sorted out: each stage's steps of each pass (by index, in order), the
 * stage each buffer belongs to (home: the stage that writes it, or first uses it; -2: data the LOAD
 * brings), and the optimizer's step. */
typedef struct {
    int S;
    int *stage_of;      /* [n]: a layer's stage */
    int **list, *count; /* [2 * S]: stage s's forward steps (2s), backward steps (2s + 1) */
    int *home;          /* [n_buf] */
    bool *home_bwd;     /* [n_buf]: its home stage makes it in its backward */
    bool *leaves;       /* [n_buf]: a stage on another device uses it */
    int *reader;        /* [2 * n_buf]: the stages (at most two, else -1) whose backward reads a buffer */
    bool *local;        /* [n_buf]: made on every device that uses it (an encoded copy, a decoded map) */
    int update;         /* the optimizer's step over every layer, or -1 */
} sorted;

static void sorted_free(sorted *so)
{
    for (int k = 0; so->list && k < 2 * so->S; k++) free(so->list[k]);
    free(so->list), free(so->count), free(so->stage_of), free(so->home), free(so->home_bwd), free(so->leaves), free(so->reader), free(so->local);
}

/* Step i (a move or a codec step of buffer b) into the lists of the stages whose backward reads b:
 * their forward's (the offload, the encode) or, `bwd`, their backward's (the prefetch, the decode). */
static void to_readers(sorted *so, int b, bool bwd, int i)
{
    for (int k = 0; k < 2; k++)
        if (so->reader[2 * b + k] >= 0) {
            int list = 2 * so->reader[2 * b + k] + bwd;
            so->list[list][so->count[list]++] = i;
        }
}

/* The whole lowering sorted for stage_of (taken: freed with so), a stage a layer, 0..S-1. */
static int sort_steps(sorted *so, const sched *w, const net *n, const pipe_cfg *c, int *stage_of, err *e)
{
    int S = pipe_stages(c);
    *so = (sorted){.S = S, .update = -1, .stage_of = stage_of};
    so->list = err_calloc((size_t)2 * S, sizeof(int *)), so->count = err_calloc((size_t)2 * S, sizeof(int));
    for (int k = 0; k < 2 * S; k++) so->list[k] = err_calloc((size_t)w->n_step + 1, sizeof(int));
    so->home = err_calloc((size_t)w->n_buf + 1, sizeof(int)), so->leaves = err_calloc((size_t)w->n_buf + 1, sizeof(bool));
    so->home_bwd = err_calloc((size_t)w->n_buf + 1, sizeof(bool)), so->local = err_calloc((size_t)w->n_buf + 1, sizeof(bool));
    for (int b = 0; b < w->n_buf; b++) so->home[b] = w->bufs[b].persistent ? so->stage_of[w->bufs[b].layer] : -1;
    int *reader = so->reader = err_calloc((size_t)w->n_buf * 2 + 2, sizeof(int)); /* the (at most two) stages whose backward reads a buffer */
    memset(reader, -1, ((size_t)w->n_buf * 2 + 2) * sizeof(int));
    for (int i = 0; i < w->n_step; i++) {
        const sched_step *t = &w->steps[i];
        bool real = t->op != SCHED_OFFLOAD && t->op != SCHED_PREFETCH && t->op != SCHED_ENCODE && t->op != SCHED_DECODE;
        int us[SCHED_MAX_USES], nu = t->bwd_phase && t->layer >= 1 && real ? sched_step_uses(t, us) : 0;
        for (int q = 0, st = nu ? so->stage_of[t->layer] : 0; q < nu; q++) {
            int *r = &reader[2 * us[q]];
            if (r[0] < 0) r[0] = st;
            else if (r[0] != st && r[1] < 0) r[1] = st;
        }
    }
    for (int i = 0; i < w->n_step; i++) { /* an encoded copy is read where its decoded map is */
        const sched_step *t = &w->steps[i];
        if (t->op == SCHED_DECODE) reader[2 * t->src] = reader[2 * t->dst], reader[2 * t->src + 1] = reader[2 * t->dst + 1];
    }
    for (int i = 0; i < w->n_step; i++) {
        const sched_step *t = &w->steps[i];
        if (t->op == SCHED_ALLOC || t->op == SCHED_FREE) continue;
        if (t->op == SCHED_ENCODE || t->op == SCHED_DECODE) { /* on each device whose backward reads the map */
            int enc = t->op == SCHED_ENCODE ? t->dst : t->src;
            so->local[enc] = true; /* each device encodes and decodes its own copy */
            if (t->op == SCHED_DECODE) so->local[t->dst] = true;
            to_readers(so, enc, t->op == SCHED_DECODE, i);
            continue;
        }
        if (t->op == SCHED_OFFLOAD || t->op == SCHED_PREFETCH) { /* a kept map's move: on each device that keeps it for its backward */
            if (w->bufs[t->buf].host_home)
                return err_set(e, "pipeline: +migrate keeps parameters, gradients or state on the host, which a device's schedule does not compose yet");
            to_readers(so, t->buf, t->op == SCHED_PREFETCH, i);
            continue;
        }
        if (t->op == SCHED_LOAD) {
            if (t->y >= 0) so->home[t->y] = -2;
            if (t->aux >= 0) so->home[t->aux] = -2;
            continue;
        }
        if (t->op == SCHED_UPDATE) {
            if (t->layer >= 0) return err_set(e, "pipeline: +migrate's layer-by-layer updates are not composed yet");
            so->update = i;
            continue;
        }
        if (t->layer < 1) return err_set(e, "pipeline: a %s step of no layer", sched_op_name(t->op));
        int s = so->stage_of[t->layer], k = 2 * s + t->bwd_phase;
        so->list[k][so->count[k]++] = i;
        int wr[SCHED_MAX_USES], nw = sched_step_writes(t, wr), us[SCHED_MAX_USES], nu = sched_step_uses(t, us);
        for (int q = 0; q < nw; q++) /* home: the first writer (a later one, as an in-place backward, works on what arrived) */
            if (so->home[wr[q]] == -1) so->home[wr[q]] = s, so->home_bwd[wr[q]] = t->bwd_phase;
        for (int q = 0; q < nu; q++) {
            int b = us[q], h = so->home[b];
            if (so->local[b]) continue;
            if (h == -1) so->home[b] = s, so->home_bwd[b] = t->bwd_phase; /* scratch: its first user's */
            /* what another stage made must flow as a pipeline carries it: activations on, gradients back */
            else if (h >= 0 && h != s && !((h < s && !so->home_bwd[b]) || (h > s && t->bwd_phase && so->home_bwd[b]))) {
                char name[128];
                sched_buf_name(w, n, b, name, sizeof name);
                return err_set(e, "pipeline: stage %d's %s uses %s, which stage %d makes in its %s: a cut falls inside one of the plan's segments (put the cuts between them)",
                               s, t->bwd_phase ? "backward" : "forward", name, h, so->home_bwd[b] ? "backward" : "forward");
            }
        }
    }
    for (int i = 0; i < w->n_step; i++) { /* who leaves: a buffer another device's stage uses */
        const sched_step *t = &w->steps[i];
        if (t->op == SCHED_ALLOC || t->op == SCHED_FREE || t->op == SCHED_LOAD || t->op == SCHED_UPDATE || t->op == SCHED_OFFLOAD ||
            t->op == SCHED_PREFETCH || t->op == SCHED_ENCODE || t->op == SCHED_DECODE)
            continue;
        int us[SCHED_MAX_USES], nu = sched_step_uses(t, us), dev = pipe_device_of(c, so->stage_of[t->layer]);
        for (int q = 0; q < nu; q++)
            if (!so->local[us[q]] && so->home[us[q]] >= 0 && pipe_device_of(c, so->home[us[q]]) != dev) {
                if (w->bufs[us[q]].persistent) return err_set(e, "pipeline: a layer's parameters are used in another stage");
                so->leaves[us[q]] = true;
            }
    }
    return 0;
}

/* The device's schedule being built. */
typedef struct {
    sched *out;
    pipe_dev *pd;
    const sched *w;
    const sorted *so;
    const pipe_cfg *c;
    int d, cap_buf, cap_step, *copy; /* copy[b * m + mb] (persistent: mb 0): b's copy here, or -1 */
    int *tag;                        /* [cap_step]: the op each step belongs to */
} build;

static int new_buf(build *bd, int b, int mb)
{
    sched *o = bd->out;
    pipe_dev *pd = bd->pd;
    if (o->n_buf == bd->cap_buf) {
        bd->cap_buf = bd->cap_buf * 2 + 64;
        o->bufs = err_realloc(o->bufs, (size_t)bd->cap_buf * sizeof *o->bufs);
        pd->orig = err_realloc(pd->orig, (size_t)bd->cap_buf * sizeof(int)), pd->mb = err_realloc(pd->mb, (size_t)bd->cap_buf * sizeof(int));
        pd->leaves = err_realloc(pd->leaves, (size_t)bd->cap_buf * sizeof(bool));
    }
    int k = o->n_buf++;
    o->bufs[k] = bd->w->bufs[b];
    pd->orig[k] = b, pd->mb[k] = bd->w->bufs[b].persistent ? -1 : mb;
    pd->leaves[k] = bd->so->leaves[b] && bd->so->home[b] >= 0 && pipe_device_of(bd->c, bd->so->home[b]) == bd->d;
    bd->copy[(int64_t)b * bd->c->micro + (mb < 0 ? 0 : mb)] = k;
    return k;
}

static sched_step *add_step(build *bd, const sched_step *t, int op)
{
    sched *o = bd->out;
    if (o->n_step == bd->cap_step) {
        bd->cap_step = bd->cap_step * 2 + 256;
        o->steps = err_realloc(o->steps, (size_t)bd->cap_step * sizeof *o->steps);
        bd->tag = err_realloc(bd->tag, (size_t)bd->cap_step * sizeof(int));
    }
    bd->tag[o->n_step] = op;
    o->steps[o->n_step] = *t;
    return &o->steps[o->n_step++];
}

/* Buffer b of micro-batch mb here; its first use from outside this device arrives by a LOAD (op k). */
static int here(build *bd, int b, int mb, int k)
{
    if (b < 0) return -1;
    bool persistent = bd->w->bufs[b].persistent;
    int at = bd->copy[(int64_t)b * bd->c->micro + (persistent ? 0 : mb)];
    if (at >= 0) return at;
    int home = bd->so->home[b];
    at = new_buf(bd, b, mb);
    if (!persistent && !bd->so->local[b] && (home == -2 || pipe_device_of(bd->c, home) != bd->d)) {
        sched_step t = lower_buffer_step(bd->out, SCHED_LOAD, at, -1, 0);
        t.buf = -1, t.y = at, t.rows = bd->w->bufs[b].rows;
        add_step(bd, &t, k);
    }
    return at;
}

/* Step t of the whole lowering, on micro-batch mb's buffers, for op k. */
static void add_copy(build *bd, const sched_step *t, int mb, int k)
{
    sched_step nt = *t;
    int *f[] = {&nt.y, &nt.aux, &nt.w, &nt.dw, &nt.ws, &nt.dy, &nt.src, &nt.dst, &nt.sums, &nt.buf};
    for (size_t q = 0; q < sizeof f / sizeof *f; q++) *f[q] = here(bd, *f[q], mb, k);
    if (t->n_x) {
        sched_step_slots(bd->out, &nt, t->n_x);
        for (int j = 0; j < t->n_x; j++)
            nt.x[j] = here(bd, t->x[j], mb, k), nt.dx[j] = here(bd, t->dx[j], mb, k), nt.dx_acc[j] = t->dx_acc[j];
    }
    add_step(bd, &nt, k);
}

/* Each op's first step once ALLOC and FREE are placed: an ALLOC goes with the step after it, a FREE
 * with the step before it. */
static void op_starts(const build *bd, pipe_dev *pd)
{
    const sched *o = bd->out;
    int *owner = err_calloc((size_t)o->n_step + 1, sizeof(int)), q = 0, last = 0;
    for (int i = 0; i < o->n_step; i++) {
        sched_op op = o->steps[i].op;
        owner[i] = op == SCHED_ALLOC ? -1 : op == SCHED_FREE ? last : (last = bd->tag[q++]);
    }
    for (int i = o->n_step - 1, next = pd->n_op; i >= 0; i--)
        if (owner[i] < 0) owner[i] = next;
        else if (o->steps[i].op != SCHED_FREE) next = owner[i];
    for (int k = 0, i = 0; k <= pd->n_op; k++) {
        while (i < o->n_step && owner[i] < k) i++;
        pd->op_start[k] = i;
    }
    free(owner);
}

/* Device d's schedule, each layer in stage stage_of[L] (taken). */
static int compose(sched *out, pipe_dev *pd, const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, int *stage_of,
                   int d, err *e)
{
    memset(out, 0, sizeof *out);
    memset(pd, 0, sizeof *pd);
    sorted so;
    if (sort_steps(&so, whole, n, c, stage_of, e)) return sorted_free(&so), -1;
    int per = 2 * c->micro * (so.S / c->devices);
    pd->ops = err_calloc((size_t)per + 1, sizeof(pipe_op)), pd->op_start = err_calloc((size_t)per + 2, sizeof(int));
    pd->n_op = pipe_order(c, d, pd->ops);
    build bd = {.out = out, .pd = pd, .w = whole, .so = &so, .c = c, .d = d};
    bd.copy = err_calloc((size_t)whole->n_buf * c->micro + 1, sizeof(int));
    memset(bd.copy, -1, (size_t)whole->n_buf * c->micro * sizeof(int));
    out->batch = whole->batch;
    int64_t params = 0;
    for (int b = 0; b < whole->n_buf; b++) /* the device's persistent buffers, in their order (exec pairs them by it) */
        if (whole->bufs[b].persistent && pipe_device_of(c, so.home[b]) == d) {
            new_buf(&bd, b, -1);
            if (whole->bufs[b].kind == BUF_PARAM) params += whole->bufs[b].bytes / 4;
        }
    for (int k = 0; k < pd->n_op; k++) {
        const pipe_op *op = &pd->ops[k];
        int list = 2 * op->stage + op->bwd;
        for (int q = 0; q < so.count[list]; q++) add_copy(&bd, &whole->steps[so.list[list][q]], op->mb, k);
    }
    if (so.update >= 0) {
        sched_step u = whole->steps[so.update];
        u.flops = sched_update_flops(cfg, params), u.bytes_moved = sched_update_bytes(cfg, params);
        add_step(&bd, &u, pd->n_op);
    }
    out->flops = sched_compute_flops(out);
    liveness_place(out, false);
    op_starts(&bd, pd);
    free(bd.copy), free(bd.tag);
    sorted_free(&so);
    return 0;
}

int pipe_sched_device(sched *out, pipe_dev *pd, const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c,
                      const int *first, int d, err *e)
{
    memset(out, 0, sizeof *out);
    memset(pd, 0, sizeof *pd);
    int S = pipe_stages(c);
    if (pipe_check(c, e)) return -1;
    if (first[0] != 1 || first[S] != n->n) return err_set(e, "pipeline: the stages must cover layers 1 .. %d", n->n - 1);
    for (int s = 0; s < S; s++)
        if (first[s + 1] <= first[s]) return err_set(e, "pipeline: stage %d has no layer", s);
    int *stage_of = err_calloc((size_t)n->n, sizeof(int));
    for (int s = 0; s < S; s++)
        for (int L = first[s]; L < first[s + 1]; L++) stage_of[L] = s;
    return compose(out, pd, whole, n, cfg, c, stage_of, d, e);
}

int pipe_sched_stage(sched *out, pipe_dev *pd, const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, int a, int z,
                     int k, err *e)
{
    memset(out, 0, sizeof *out);
    memset(pd, 0, sizeof *pd);
    if (pipe_check(c, e)) return -1;
    if (c->kind == PIPE_INTERLEAVED) return err_set(e, "pipeline: a stage alone is composed for GPipe and 1F1B (a stage a device)");
    if (a < 1 || z > n->n || a >= z || (k == 0) != (a == 1) || (k == c->devices - 1) != (z == n->n))
        return err_set(e, "pipeline: layers %d..%d cannot be stage %d of %d", a, z - 1, k, c->devices);
    int *stage_of = err_calloc((size_t)n->n, sizeof(int));
    for (int L = 1; L < n->n; L++) stage_of[L] = L < a ? k - 1 : L < z ? k : k + 1; /* the stages around it, lumped */
    stage_of[0] = k ? k - 1 : 0;
    return compose(out, pd, whole, n, cfg, c, stage_of, k, e);
}

void pipe_dev_free(pipe_dev *pd)
{
    free(pd->ops), free(pd->op_start), free(pd->orig), free(pd->mb), free(pd->leaves);
    memset(pd, 0, sizeof *pd);
}

static int64_t replayed(sched *s, pipe_dev *pd)
{
    sim_mem m;
    sim_replay(s, &m, NULL);
    sched_free(s), pipe_dev_free(pd);
    return m.peak;
}

int64_t pipe_device_peak_exact(const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, const int *first, int d,
                               err *e)
{
    sched s;
    pipe_dev pd;
    return pipe_sched_device(&s, &pd, whole, n, cfg, c, first, d, e) ? -1 : replayed(&s, &pd);
}

int64_t pipe_stage_peak_exact(const sched *whole, const net *n, const sched_cfg *cfg, const pipe_cfg *c, int a, int z, int k,
                              err *e)
{
    sched s;
    pipe_dev pd;
    return pipe_sched_stage(&s, &pd, whole, n, cfg, c, a, z, k, e) ? -1 : replayed(&s, &pd);
}
