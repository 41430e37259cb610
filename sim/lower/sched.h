/* sched: a plan lowered to the ordered steps of one training iteration (forward, backward,
 * optimizer update), over named buffers. The simulator replays it; the engine executes it.
 *
 * Buffers hold rows [a, b) of one tensor (a layer's output, its gradient, or an auxiliary: pool
 * argmax, bn statistics, loss probabilities, a 2PS boundary) for the whole batch, NCHW, or a
 * persistent parameter-sized tensor, or a step's workspace. Lowering emits only compute, copy and
 * offload steps; the last pass (liveness.h) places ALLOC before each buffer's first use and FREE after its
 * last (a liveness allocator), so what lives when is a consequence of the steps, never of call
 * order. Accumulation rule: weight gradients are += across bands; an activation gradient is
 * written (=) by its first writer and += by later ones, and band buffers are zero-filled at
 * ALLOC (`zero`) because overlapping bands add into them.
 * Not done here: counting bytes over time (sim.h) or touching tensors (engine/). */
#ifndef LRCNN_SCHED_H
#define LRCNN_SCHED_H

#include <string.h>

#include "sim/plan/plan.h"

typedef enum {
    MEM_WEIGHTS,   /* parameters and bn running statistics */
    MEM_WGRAD,     /* parameter gradients */
    MEM_OPTIM,     /* optimizer state (momentum; Adam's two moments) */
    MEM_ACT,       /* activations: stashed for backward, or live in forward */
    MEM_AGRAD,     /* activation gradients */
    MEM_BOUNDARY,  /* 2PS boundary rows (and their gradients) kept between bands */
    MEM_WORKSPACE, /* per-step scratch (im2col / col2im) */
    MEM_HOST,      /* offloaded to host memory (not device) */
    MEM_NCAT
} mem_cat;

const char *mem_cat_name(mem_cat c);

typedef enum {
    BUF_INPUT, BUF_LABEL, BUF_ACT, BUF_GRAD, BUF_IDX, BUF_STAT, BUF_PROB, BUF_BOUND, BUF_BGRAD, BUF_WS,
    BUF_PARAM, BUF_PGRAD, BUF_OPT, BUF_RUNSTAT,
    BUF_SUMS, /* per-channel sums (fp64) gathered over a row segment's bands for whole-map statistics */
    BUF_ENC,  /* a kept map in its encoding (sim/plan/enc.h) between its last forward and first backward use */
    BUF_MASK, /* dropout's mask, a byte a value */
    BUF_NKIND
} buf_kind;

typedef struct {
    buf_kind kind;
    mem_cat cat;
    int layer;        /* whose tensor (-1: none) */
    int band;         /* -1: not a band buffer */
    band_rows rows;   /* rows of the layer's output held (activation-shaped kinds) */
    int64_t bytes;
    bool persistent;  /* lives the whole iteration (parameters, gradients, optimizer state) */
    bool zero;        /* zero-filled when allocated */
    bool offload;     /* moved to host between forward and backward */
    bool host_home;   /* persistent, but on the host between its uses (+migrate: sim/lower/migrate.c) */
    int64_t param0;   /* BUF_OPT: the first of its layer's parameters whose state it holds (under
                         +migrate:optim a large layer's state is in chunks of SCHED_OPT_CHUNK) */
    /* BUF_ENC: how it encodes which map (bytes: exact, or predicted where enc_data_sized), the plan
     * modifier that chose it (an index into plan.mods) and the map's shape per image; for a
     * data-sized encoding the density or ratio its bytes were predicted with (sim/plan/enc.h), and
     * whether that came from the configuration's calibration rather than the modifier */
    enc_kind enc;
    int mod;
    enc_shape shape;
    double factor;
    bool calibrated;
} sched_buf;

/* LOAD: the batch arrives (image into y, labels into aux).
 * ENCODE: src (a kept map, after its last forward use) into dst (a BUF_ENC) with scratch ws;
 * DECODE: dst (a fresh copy of the map, read by the backward in its place) from src (sim/lower/stash.c).
 * STATS: adds a band's rows to the sums of a layer with whole-map statistics (bn in train mode in a
 * row segment): forward (dy < 0) the sum and sum of squares of its input x[0] over rows; backward
 * the sum of its output gradient dy and of dy times the normalized input, from x[0] and the
 * statistics in aux. STATS_END turns the forward sums into the statistics (aux: mean and inverse
 * std) and updates the running ones (dw). */
typedef enum {
    SCHED_ALLOC, SCHED_FREE, SCHED_FWD, SCHED_BWD, SCHED_COPY, SCHED_OFFLOAD, SCHED_PREFETCH, SCHED_UPDATE, SCHED_LOAD,
    SCHED_STATS, SCHED_STATS_END, SCHED_ENCODE, SCHED_DECODE
} sched_op;

const char *sched_op_name(sched_op op);

typedef struct {
    sched_op op;
    int layer, band;     /* -1 where not applicable */
    int seg;             /* plan segment */
    band_rows rows;      /* FWD: output rows computed; BWD: output-gradient rows used; COPY: rows copied */
    bool recompute;      /* FWD whose output is not the forward pass's own: recomputation in backward
                            (ckpt, rows) or a statistics pass */
    /* FWD and BWD: n_x slots (the layer's inputs, then a loss's labels) in the schedule's pool;
     * x: input activations (BWD: only those autograd keeps; else -1); dx: input gradients (-1:
     * none needed, e.g. for the image); dx_acc: += rather than =. STATS and STATS_END have them
     * too (x[0]: the input); other steps: n_x = 0. */
    int n_x;
    int *x, *dx;
    bool *dx_acc;
    int y;               /* FWD: output (== x[0] for an in-place relu); BWD: kept output (relu) */
    int aux;             /* pool argmax, bn statistics, loss probabilities; UPDATE of one layer: its
                            optimizer state */
    int w, dw;           /* parameters and their gradient (+=); UPDATE: layer -1 steps every layer's
                            parameters, else only this layer's (w, dw, aux: +migrate) */
    int ws;              /* workspace */
    int dy;              /* BWD: output gradient */
    bool bwd_phase;      /* lowered in the backward pass (its recomputations and statistics passes too) */
    int src, dst;        /* COPY: rows from src to dst; ENCODE, DECODE: from src to dst; BWD under
                            PyTorch's rules: src, a buffer held while it runs and not read (the
                            encoded form of a map it reads decoded, sim/lower/stash.c), or -1 */
    bool acc;            /* COPY: add instead of overwrite */
    /* Whole-map statistics in a row segment (bn, train mode): FWD normalizes with the statistics in
     * aux rather than its rows' own; BWD takes the whole map's gradient sums from `sums` and
     * subtracts their mean terms on rows `own` only (the rows this band owns of a partition of the
     * map: where bands overlap each adds its share once); STATS adds to `sums`. */
    bool map_stats;
    int sums;
    band_rows own;
    int buf;             /* ALLOC, FREE, OFFLOAD, PREFETCH */
    double flops;
    double bytes_moved;  /* memory traffic estimate (time model) */
} sched_step;

typedef enum { SCHED_SGD, SCHED_ADAM } sched_optimizer;

/* Parameters per chunk of optimizer state when it migrates: a layer's update then holds its
 * parameters, their gradient and two chunks of state on the device (the next one arriving), not
 * all its state (VGG-16's fc6: 784 MiB of Adam moments, 25 chunks of 32 MiB). */
#define SCHED_OPT_CHUNK (4 << 20)

/* Workspace sizes are the backend's: bytes of scratch for layer L's forward (backward = false)
 * or backward on output rows `out` of the whole batch. The CPU backend's is a formula of the row
 * count (sched_workspace_bytes); cuDNN's depends on the algorithm it picks at run time, and on
 * whether an operand must first be copied into a packed buffer (cuDNN's backward convolutions
 * refuse a slice of a larger map: engine/cuda/dnn.h), so a backend hands the lowering its own
 * model and the schedule (and every prediction) uses its numbers.
 * Where the lowering asks, `held` is true and x, y and dx are the rows the step's buffers hold:
 * input 0's, the output's (forward) or its gradient's (backward), and input 0's gradient's ({0, 0}:
 * none wanted); dw says whether it computes the weight gradient. Estimates (the closed form, the
 * planner's dynamic program) ask with `held` false: the model then takes every operand to hold
 * exactly the rows the step reads or writes, at any place a band of those rows can take. So on
 * CUDA the closed form may differ from the replay by a step's staging; on the CPU they agree. */
typedef struct {
    int layer, batch;
    bool backward;
    band_rows out;
    bool held;
    band_rows x, y, dx;
    bool dw;          /* held, backward: the weight gradient is wanted too */
} sched_ws_query;

typedef struct sched_ws_model {
    int64_t (*bytes)(const struct sched_ws_model *m, const net *n, const sched_ws_query *q);
    void *ctx;
} sched_ws_model;

typedef struct {
    int batch;
    sched_optimizer optimizer;
    const sched_ws_model *ws;   /* NULL: the CPU backend's (sched_workspace_bytes) */
    const enc_calib *calib;     /* measured densities and ratios of data-sized encodings, or NULL */
    bool gpu;                   /* the device is a GPU: the torch plans keep a dropout's mask as
                                   PyTorch's CUDA kernel does (bool), not as its CPU kernel (fp32) */
} sched_cfg;

/* A memory event: an ALLOC, FREE, OFFLOAD or PREFETCH step, and its buffer. */
typedef struct {
    int step, buf;
    sched_op op;
} sched_event;

typedef struct {
    int n_buf, n_step;
    sched_buf *bufs;
    sched_step *steps;
    int batch;
    double flops;               /* all FWD and BWD steps, recomputation included */
    struct sched_pool *pool;    /* the steps' input slots (x, dx, dx_acc), in chunks that never move */
    /* The memory events in step order and the first BWD step (n_step: none), as the liveness pass
     * leaves them (mem NULL: not indexed, as in a schedule built by hand; sched_events_open then
     * makes them). A walk over what is held reads 12 bytes an event here rather than the 128-byte
     * steps: on ResNet-50 2ps:8 the events are 3,892 of 6,362 steps. */
    sched_event *mem;
    int n_mem, first_bwd;
    /* A lean schedule (at != NULL; pipeline_lower_lean): steps holds only its n_list steps that are
     * not ALLOC or FREE, steps[i] at place at[i] of the whole order; its ALLOCs and FREEs are only
     * events (mem), and n_step, first_bwd and the events' places count every step, as in the whole
     * schedule, which sched_materialize makes of it. The predictions take either (sim.h, arena.h:
     * what walks the steps in order walks them with sched_next). Writing the ALLOC and FREE steps
     * was a fifth of ResNet-50 2ps:8's lowering (3,892 of its 6,362 steps). */
    int n_list, *at;
} sched;

/* A step about buffer b alone made so from another: its op, buffer, and the buffer's layer and band. */
static inline void sched_buffer_step_own(sched_step *t, const sched *s, sched_op op, int b)
{
    t->op = op, t->buf = b, t->layer = s->bufs[b].layer, t->band = s->bufs[b].band;
}

/* The ALLOC or FREE step of buffer b, as the liveness pass writes it (sim/lower/liveness.h): no
 * other buffer slot used, nothing computed or moved (lower.h's lower_buffer_step makes the other
 * steps about one buffer from it). */
static inline sched_step sched_buffer_step(const sched *s, sched_op op, int b)
{
    sched_step t = {.y = -1, .aux = -1, .w = -1, .dw = -1, .ws = -1, .dy = -1, .src = -1, .dst = -1, .sums = -1};
    sched_buffer_step_own(&t, s, op, b);
    return t;
}

/* A walk over the steps of a schedule, whole or lean, in order: sched_next returns the next step
 * (an ALLOC or FREE of a lean schedule made in `made`, as the whole schedule holds it) and sets
 * `place` to its index in the whole order; NULL after the last. With `listed`, it skips a lean
 * schedule's ALLOCs and FREEs (for a walk that would skip them anyway: they compute and move
 * nothing). */
typedef struct {
    const sched *s;
    bool listed;
    int i, k, place;
    sched_step made;
} sched_iter;

static inline sched_iter sched_iter_open(const sched *s, bool listed)
{
    sched_iter it = {.s = s, .listed = listed, .place = -1};
    if (s->at && s->n_buf) it.made = sched_buffer_step(s, SCHED_ALLOC, 0); /* then only its own fields change */
    return it;
}

static inline const sched_step *sched_next(sched_iter *it)
{
    const sched *s = it->s;
    if (!s->at) return it->i < s->n_step ? (it->place = it->i, &s->steps[it->i++]) : NULL;
    if (it->listed) return it->i < s->n_list ? (it->place = s->at[it->i], &s->steps[it->i++]) : NULL;
    int place = it->place + 1;
    if (place >= s->n_step) return NULL;
    it->place = place;
    if (it->i < s->n_list && s->at[it->i] == place) return &s->steps[it->i++];
    while (s->mem[it->k].op != SCHED_ALLOC && s->mem[it->k].op != SCHED_FREE) it->k++; /* moves are listed */
    const sched_event *v = &s->mem[it->k++];
    sched_buffer_step_own(&it->made, s, v->op, v->buf);
    return &it->made;
}

/* A lean schedule made whole; a whole one is left as it is. */
void sched_materialize(sched *s);

/* n slots for step t's inputs from s's pool, x and dx -1, dx_acc false. */
void sched_step_slots(sched *s, sched_step *t, int n);

void sched_free(sched *s);

/* Walks the schedule's memory events (ALLOC, FREE, OFFLOAD, PREFETCH), calling visit after each
 * such step with the bytes held per category (MEM_HOST: on the host), their sum on the device
 * (every category but MEM_HOST) and the category the event raised (-1: none; a FREE only lowers):
 * the one place that says what a schedule holds when. The replay (sim.h) and the timelines are
 * built on it. Inline, so that a caller's visit is inlined into its walk; a visit that keeps
 * maxima looks only at `up` (a loop over every category at every event was half the replay; a
 * copy of cur at every event stalls on the walk's narrow stores into it, so the replay takes what
 * is held before the backward from a walk in two parts, below). */
typedef void (*sched_visit)(void *ctx, int step, int up, int64_t device, const int64_t cur[MEM_NCAT]);

static inline bool sched_op_is_event(sched_op op)
{
    return op == SCHED_ALLOC || op == SCHED_FREE || op == SCHED_OFFLOAD || op == SCHED_PREFETCH;
}

/* A schedule's memory events and first BWD step: its own (s->mem), or made from its steps where
 * it has none (then held in own until sched_events_close). */
typedef struct {
    const sched_event *ev;
    int n, first_bwd;
    sched_event *own;
} sched_events;
void sched_events_open(const sched *s, sched_events *x);
static inline void sched_events_close(sched_events *x) { free(x->own), x->own = NULL; }

/* A walk in parts: sched_walk_to runs it up to (not including) step `end`, so a caller can read
 * what is held at a step of its choice in w->cur rather than copy it at every event. */
typedef struct {
    int64_t cur[MEM_NCAT], device;
    bool *host; /* per buffer: on the host now */
    sched_events ev;
    int next; /* the first event not yet walked */
} sched_walker;

static inline void sched_walk_open(const sched *s, sched_walker *w)
{
    memset(w, 0, sizeof *w);
    w->host = err_calloc((size_t)s->n_buf + 1, sizeof(bool));
    sched_events_open(s, &w->ev);
}

static inline void sched_walk_to(const sched *s, sched_walker *w, int end, sched_visit visit, void *ctx)
{
    int64_t *cur = w->cur, device = w->device;
    int k = w->next;
    for (; k < w->ev.n && w->ev.ev[k].step < end; k++) {
        const sched_event *v = &w->ev.ev[k];
        sched_op op = v->op;
        const sched_buf *b = &s->bufs[v->buf];
        int up = -1, down = -1;
        if (op == SCHED_ALLOC) up = b->host_home ? MEM_HOST : (int)b->cat, w->host[v->buf] = b->host_home;
        else if (op == SCHED_FREE) down = w->host[v->buf] ? MEM_HOST : (int)b->cat;
        else if (op == SCHED_OFFLOAD) down = b->cat, up = MEM_HOST, w->host[v->buf] = true;
        else down = MEM_HOST, up = b->cat, w->host[v->buf] = false;
        if (down >= 0) cur[down] -= b->bytes, device -= down != MEM_HOST ? b->bytes : 0;
        if (up >= 0) cur[up] += b->bytes, device += up != MEM_HOST ? b->bytes : 0;
        visit(ctx, v->step, up, device, cur);
    }
    w->device = device, w->next = k;
}

static inline void sched_walk_close(sched_walker *w) { free(w->host), w->host = NULL, sched_events_close(&w->ev); }

static inline void sched_walk(const sched *s, sched_visit visit, void *ctx)
{
    sched_walker w;
    sched_walk_open(s, &w);
    sched_walk_to(s, &w, s->n_step, visit, ctx);
    sched_walk_close(&w);
}

/* Device bytes per category after each step: out[step * MEM_NCAT + cat] (MEM_HOST: bytes on the
 * host), for memory-timeline figures. */
void sched_bytes_by_category(const sched *s, int64_t *out);

/* The optimizer step's FLOPs and memory traffic over `params` parameters (time model). */
/* The passes' FLOPs: every FWD, BWD and STATS step's, recomputation included, not the optimizer's. */
double sched_compute_flops(const sched *s);
double sched_update_flops(const sched_cfg *cfg, int64_t params);
double sched_update_bytes(const sched_cfg *cfg, int64_t params);

/* The buffers step t uses, into out (at most SCHED_MAX_USES); returns how many. Inline, as is
 * sched_step_writes: every pass over a schedule asks them of each step. */
#define SCHED_MAX_USES (2 * (NET_MAX_IN + 1) + 11)
static inline int sched_step_uses(const sched_step *t, int *out)
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

/* The buffers step t writes (PREFETCH: brings back to the device), into out (at most
 * SCHED_MAX_USES); returns how many. */
static inline int sched_step_writes(const sched_step *t, int *out)
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

/* How a schedule's moves overlap compute on a backend with a copy engine (the protocol the CUDA
 * engine follows, engine/alloc.h, and the time model's, sim.h): the copy of an offloaded buffer
 * begins once its contents are final — after the last step before its OFFLOAD that writes or
 * prefetches it — and runs beside the steps that follow; the OFFLOAD waits for it, then releases
 * the device memory (so the accounting, which moves the bytes at the OFFLOAD, is what the device
 * holds). A PREFETCH takes the device memory and begins its copy where it stands; the first later
 * step that uses the buffer waits for it. issue[i] (n_step values): for OFFLOAD step i, the step
 * after which its copy begins (-1: none writes it in this iteration; it begins at the OFFLOAD);
 * -1 for every other step. */
void sched_move_issue(const sched *s, int *issue);

/* "conv1_1.y[b2 0:42]" style name of a buffer. */
void sched_buf_name(const sched *s, const net *n, int buf, char *out, size_t len);

/* Workspace bytes of the CPU backend for layer L computing `rows` output rows of a batch: its
 * convolutions multiply sched_cpu_conv_group() images at a time; a group's im2col (C_in*k*k,
 * g*cols), plus its (C_out, g*cols) output or gathered gradient when g > 1. A single image's 1x1
 * stride-1 unpadded convolution needs none; nor does any other kind. */
int64_t sched_workspace_bytes(const net *n, int layer, int rows, int batch);
/* That model as the CPU engine's (ops_cpu.ws): schedules an engine executes name their backend's
 * model, which a torch plan needs (without one it predicts PyTorch's scratch-free steps). */
extern const sched_ws_model sched_ws_cpu;
/* Images per product in the CPU backend's convolution l (c_in input channels) for `cols` output
 * columns an image (rows * W_out): the fewest whose columns reach 128, or 512 where the product's
 * inner length K = C_in*kh*kw is 512 or more; at most the batch, and no more than keep the group's
 * workspace within 3 MiB (unless one image alone needs more). A 1x1 stride-1 unpadded convolution
 * of 128 columns or more runs an image at a time, in place. OpenBLAS's sgemm (SkylakeX kernel, 2
 * threads) multiplies 512 x 4608 by 4608 x N at 212 GFLOP/s with N = 147 (three of ResNet-50's 7x7
 * maps), 303 with 392, and 256 x 2304 by N at 234 with N = 196 (a 14x14 map), 283 with 392: where
 * K is large, wider products pay for the gathering; where it is small (VGG-small's 8-channel
 * layers) they do not. ResNet-50 at batch 8 (median of 4 alternating runs): 1.15 s an iteration
 * with one image a product, 1.10 with groups within 3 MiB, 1.07 within 4 MiB; but 4 MB blocks
 * against its 3.2 MB maps left the arena's walk from the live peak short of it (arena.c), and every
 * ResNet-50 evaluation then ran the best-fit orders: 2ps:4 140 -> 550 us. */
int sched_cpu_conv_group(const net_layer *l, int c_in, int64_t cols, int batch);
/* Whether convolution l is 1x1, stride 1, unpadded, of one channel group: one image a product, it
 * multiplies its input rows in place, with no workspace (conv_cpu.c's direct product). */
bool sched_cpu_conv_pointwise(const net_layer *l);
/* sched_workspace_bytes of convolution l (c_in input channels) on `rows` output rows; the engine's
 * kernels ask it too, to fit what they lay out into the workspace at every row count. */
int64_t sched_cpu_conv_ws_bytes(const net_layer *l, int c_in, int rows, int batch);
/* The workspace of cfg's backend (cfg->ws, or the CPU's) for layer L's forward or backward on
 * `rows` output rows, as an estimate (held false, rows [0, rows)). */
int64_t sched_cfg_workspace(const sched_cfg *cfg, const net *n, int layer, int rows, bool backward);
/* ... and for a step whose buffers are known (q->batch is taken from cfg). */
int64_t sched_step_workspace(const sched_cfg *cfg, const net *n, const sched_ws_query *q);

#endif
