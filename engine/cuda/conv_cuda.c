/* conv_cuda: see conv_cuda.h. Every cuDNN call of a convolution step comes from its dnn.h plan;
 * descriptors live in the policy's cache, so a step creates none. */
#include "engine/cuda/conv_cuda.h"

#include <stdio.h>
#include <string.h>

#include "engine/cuda/cucheck.h"
#include "engine/cuda/dnn.h"
#include "engine/cuda/kernels.h"

static const float one = 1.0f, zero_f = 0.0f;

/* --- the policy and its cache ------------------------------------------------------------------- */

/* A call's key: its words, in this order, are the key format CONV_KEY_FORMAT (engine/algo_book.h);
 * any change to them is a new format, so that no stored choice is read in another's words. */
#define CONV_KEY_FORMAT "cudnn-conv 1"

typedef struct {
    int64_t k[ALGO_KEY_WORDS];
} conv_key;

typedef struct {
    bool used;
    conv_key key;
    cudnnTensorDescriptor_t x, y;     /* the call's tensors (bias backward: y and the bias) */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    int algo;                         /* -1: bias backward */
    int64_t ws;
} conv_choice;

static struct {
    cudnnHandle_t dnn;
    cudaStream_t stream;
    int64_t limit;
    bool deterministic, find;
    int pack;                         /* dnn_pack_policy(), read once: the run's calls, as the model's */
    conv_choice *table;               /* open addressing, cap a power of two */
    int64_t cap, count;
    int (*algo)[3];                   /* per layer: what each direction last ran */
    int64_t (*ws)[3];
    int n_layers;
    algo_book made, given;          /* measured (or taken) in this process; taken from a profile */
} g;

void conv_cuda_init(cudnnHandle_t dnn, cudaStream_t stream, int64_t ws_limit, bool deterministic, bool find, const char *device)
{
    g.dnn = dnn, g.stream = stream, g.limit = ws_limit, g.deterministic = deterministic, g.find = find, g.pack = dnn_pack_policy();
    snprintf(g.made.format, sizeof g.made.format, "%s", CONV_KEY_FORMAT);
    snprintf(g.made.device, sizeof g.made.device, "%s", device);
}

void conv_cuda_policy(char *out, size_t len)
{
    snprintf(out, len, "%s within %lld MiB%s, forward %s", g.find ? "measured (find)" : "heuristic", (long long)(g.limit >> 20),
             g.deterministic ? ", deterministic only" : "", g.pack & DNN_PACK_FWD ? "slices staged" : "on slices");
}

const algo_book *conv_cuda_made(void) { return g.made.n ? &g.made : NULL; }

int conv_cuda_take(const algo_book *b, err *e)
{
    if (!g.find) return err_set(e, "this run ranks by cuDNN's heuristic; LRCNN_CUDNN_FIND=1 takes them");
    if (strcmp(b->format, CONV_KEY_FORMAT))
        return err_set(e, "its choices are keyed as '%s', this build's as '%s'", b->format, CONV_KEY_FORMAT);
    if (strcmp(b->device, g.made.device)) return err_set(e, "its choices were measured on %s, this is %s", b->device, g.made.device);
    algo_book_free(&g.given);
    algo_book_copy(&g.given, b);
    return 0;
}

void conv_cuda_close(void)
{
    for (int64_t i = 0; i < g.cap; i++) {
        conv_choice *e = &g.table[i];
        if (!e->used) continue;
        if (e->x) CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->x));
        if (e->y) CUDNN_CHECK(cudnnDestroyTensorDescriptor(e->y));
        if (e->w) CUDNN_CHECK(cudnnDestroyFilterDescriptor(e->w));
        if (e->conv) CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(e->conv));
    }
    free(g.table), free(g.algo), free(g.ws);
    algo_book_free(&g.made), algo_book_free(&g.given);
    memset(&g, 0, sizeof g);
}

static conv_key key_of(const net_layer *l, int c_in, const dnn_call *c)
{
    conv_key k;
    memset(&k, 0, sizeof k);
    const dnn_tensor *t[2] = {&c->xt, &c->yt};
    int at = 0;
    k.k[at++] = c->op;
    for (int j = 0; j < 2; j++) {
        k.k[at++] = t[j]->n, k.k[at++] = t[j]->c, k.k[at++] = t[j]->h, k.k[at++] = t[j]->w;
        k.k[at++] = t[j]->ns, k.k[at++] = t[j]->cs, k.k[at++] = t[j]->hs;
    }
    net_window h = l->win, w = l->win_w;
    int64_t rest[] = {l->u.conv.c_out, c_in, l->u.conv.groups, h.k, w.k, c->pad, w.p, h.s, w.s, h.d, w.d, CUDNN_FMA_MATH, g.deterministic,
                      g.limit, g.find};
    for (size_t i = 0; i < sizeof rest / sizeof *rest; i++) k.k[at++] = rest[i];
    return k;
}

static uint64_t hash(const conv_key *k)
{
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < ALGO_KEY_WORDS; i++) h = (h ^ (uint64_t)k->k[i]) * 1099511628211ULL;
    return h;
}

static conv_choice *slot_for(const conv_key *k)
{
    if (2 * (g.count + 1) > g.cap) { /* grow: rehash */
        conv_choice *old = g.table;
        int64_t n = g.cap;
        g.cap = g.cap ? 2 * g.cap : 256;
        g.table = err_calloc((size_t)g.cap, sizeof *g.table);
        for (int64_t i = 0; i < n; i++)
            if (old[i].used) {
                int64_t j = (int64_t)(hash(&old[i].key) & (uint64_t)(g.cap - 1));
                while (g.table[j].used) j = (j + 1) & (g.cap - 1);
                g.table[j] = old[i];
            }
        free(old);
    }
    int64_t j = (int64_t)(hash(k) & (uint64_t)(g.cap - 1));
    while (g.table[j].used && memcmp(&g.table[j].key, k, sizeof *k)) j = (j + 1) & (g.cap - 1);
    return &g.table[j];
}

static cudnnTensorDescriptor_t tensor_desc(const dnn_tensor *t)
{
    cudnnTensorDescriptor_t d;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, t->n, t->c, t->h, t->w, (int)t->ns, (int)t->cs, (int)t->hs, 1));
    return d;
}

static void descs_make(conv_choice *e, const net_layer *l, int c_in, const dnn_call *c)
{
    net_window h = l->win, w = l->win_w;
    e->y = tensor_desc(&c->yt);
    if (c->op == DNN_CONV_BWD_BIAS) { /* the bias: one value a channel */
        CUDNN_CHECK(cudnnCreateTensorDescriptor(&e->x));
        CUDNN_CHECK(cudnnSetTensor4dDescriptor(e->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, l->u.conv.c_out, 1, 1));
        return;
    }
    e->x = tensor_desc(&c->xt);
    CUDNN_CHECK(cudnnCreateFilterDescriptor(&e->w));
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, l->u.conv.c_out, c_in / l->u.conv.groups, h.k, w.k));
    CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&e->conv));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(e->conv, c->pad, w.p, h.s, w.s, h.d, w.d, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(e->conv, l->u.conv.groups));
    CUDNN_CHECK(cudnnSetConvolutionMathType(e->conv, CUDNN_FMA_MATH));
}

/* Algorithms of a direction that are not deterministic (cuDNN's documentation; the heuristic
 * ranking says so too, but tier 3 probes algorithms it did not rank). */
static bool nondeterministic(dnn_op op, int a)
{
    if (op == DNN_CONV_BWD_DATA) return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    if (op == DNN_CONV_BWD_FILTER) return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
    return false;
}

typedef struct {
    int algo;
    cudnnStatus_t status;
    int64_t memory;
    bool deterministic;
    double ms;                        /* measured: its time; the heuristic's: -1 */
} ranked;

/* The call's algorithms ranked, best first: cuDNN's heuristic (cudnnGet*Algorithm_v7), or when
 * `measured` its measurement (cudnnFind*Algorithm: it allocates scratch of the call's shapes, runs
 * every algorithm of the direction on it and returns them fastest first), less any it timed with
 * another math type than the descriptor's FMA (a TF32 variant: the run would not use it). Returns
 * how many, or -1 where the measurement itself failed (its scratch did not fit, say). */
static int rank_by(const conv_choice *e, dnn_op op, bool measured, ranked *out, int max)
{
    int got = 0, n = 0;
    cudnnStatus_t st;
    if (op == DNN_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        st = measured ? cudnnFindConvolutionForwardAlgorithm(g.dnn, e->x, e->w, e->conv, e->y, max, &got, p)
                      : cudnnGetConvolutionForwardAlgorithm_v7(g.dnn, e->x, e->w, e->conv, e->y, max, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            if (!measured || p[i].mathType == CUDNN_FMA_MATH)
                out[n++] = (ranked){p[i].algo, p[i].status, (int64_t)p[i].memory, p[i].determinism == CUDNN_DETERMINISTIC,
                                    measured ? p[i].time : -1};
    } else if (op == DNN_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        st = measured ? cudnnFindConvolutionBackwardDataAlgorithm(g.dnn, e->w, e->y, e->conv, e->x, max, &got, p)
                      : cudnnGetConvolutionBackwardDataAlgorithm_v7(g.dnn, e->w, e->y, e->conv, e->x, max, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            if (!measured || p[i].mathType == CUDNN_FMA_MATH)
                out[n++] = (ranked){p[i].algo, p[i].status, (int64_t)p[i].memory, p[i].determinism == CUDNN_DETERMINISTIC,
                                    measured ? p[i].time : -1};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        st = measured ? cudnnFindConvolutionBackwardFilterAlgorithm(g.dnn, e->x, e->y, e->conv, e->w, max, &got, p)
                      : cudnnGetConvolutionBackwardFilterAlgorithm_v7(g.dnn, e->x, e->y, e->conv, e->w, max, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            if (!measured || p[i].mathType == CUDNN_FMA_MATH)
                out[n++] = (ranked){p[i].algo, p[i].status, (int64_t)p[i].memory, p[i].determinism == CUDNN_DETERMINISTIC,
                                    measured ? p[i].time : -1};
    }
    if (st == CUDNN_STATUS_SUCCESS) return n;
    if (measured) return -1;
    cu_fatal("cuDNN's heuristic ranking of convolution algorithms (cudnnGet*Algorithm_v7)", cudnnGetErrorString(st), __FILE__,
             __LINE__);
}

/* The ranking the policy reads: measured in find mode, unless the measurement failed; else (and
 * then) the heuristic's. *measured: which. */
static int rank(const conv_choice *e, dnn_op op, ranked *out, int max, bool *measured)
{
    int n = g.find ? rank_by(e, op, true, out, max) : -1;
    *measured = n >= 0;
    return n >= 0 ? n : rank_by(e, op, false, out, max);
}

/* Algorithm a's workspace asked directly, with its status. */
static cudnnStatus_t probe(const conv_choice *e, dnn_op op, int a, int64_t *bytes)
{
    size_t s = 0;
    cudnnStatus_t r;
    if (op == DNN_CONV_FWD) r = cudnnGetConvolutionForwardWorkspaceSize(g.dnn, e->x, e->w, e->conv, e->y, (cudnnConvolutionFwdAlgo_t)a, &s);
    else if (op == DNN_CONV_BWD_DATA)
        r = cudnnGetConvolutionBackwardDataWorkspaceSize(g.dnn, e->w, e->y, e->conv, e->x, (cudnnConvolutionBwdDataAlgo_t)a, &s);
    else r = cudnnGetConvolutionBackwardFilterWorkspaceSize(g.dnn, e->x, e->y, e->conv, e->w, (cudnnConvolutionBwdFilterAlgo_t)a, &s);
    *bytes = (int64_t)s;
    return r;
}

static const char *op_name(dnn_op op)
{
    return op == DNN_CONV_FWD ? "forward" : op == DNN_CONV_BWD_DATA ? "backward-data" : "backward-filter";
}

/* Call c of layer l in words: "layer 'conv1', forward convolution of x 8x3x224x224 ..., pad 1". */
static void call_words(const net_layer *l, const dnn_call *c, char *out, size_t len)
{
    char x[96], y[96];
    dnn_tensor_str(&c->xt, x, sizeof x), dnn_tensor_str(&c->yt, y, sizeof y);
    snprintf(out, len, "layer '%s', %s convolution of x %s, y %s, pad %d", l->name, op_name(c->op), x, y, c->pad);
}

/* The choice stored for e's call (conv_cuda_take), where cuDNN still runs it within the limit: its
 * workspace asked again (a stored one is not trusted). */
static bool take_stored(conv_choice *e, dnn_op op)
{
    const algo_choice *s = g.given.n ? algo_book_find(&g.given, e->key.k) : NULL;
    int64_t bytes = 0;
    if (!s || probe(e, op, s->algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > g.limit || (g.deterministic && nondeterministic(op, s->algo)))
        return false;
    algo_choice kept = *s;
    kept.ws = bytes;
    algo_book_put(&g.made, &kept);
    e->algo = s->algo, e->ws = bytes;
    return true;
}

/* The two tiers of conv_cuda.h, after a stored choice; fatal when neither leaves an algorithm. */
static void choose(conv_choice *e, const net_layer *l, const dnn_call *c)
{
    enum { MAX = 8 };
    dnn_op op = c->op;
    if (take_stored(e, op)) return;
    int count = op == DNN_CONV_FWD ? CUDNN_CONVOLUTION_FWD_ALGO_COUNT
              : op == DNN_CONV_BWD_DATA ? CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT : CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    ranked r[MAX];
    bool measured;
    int n = rank(e, op, r, count < MAX ? count : MAX, &measured);
    for (int i = 0; i < n; i++) /* 1: the ranking's first within the limit */
        if (r[i].status == CUDNN_STATUS_SUCCESS && r[i].memory <= g.limit && (!g.deterministic || r[i].deterministic)) {
            e->algo = r[i].algo, e->ws = r[i].memory;
            if (measured) { /* kept for the profile (algo_book.h) */
                algo_choice m = {.algo = e->algo, .ws = e->ws, .ms = r[i].ms};
                memcpy(m.key, e->key.k, sizeof m.key);
                call_words(l, c, m.what, sizeof m.what);
                algo_book_put(&g.made, &m);
            }
            return;
        }
    e->algo = -1;
    char seen[1024] = "";
    size_t at = 0;
    for (int i = 0; i < n && at < sizeof seen; i++)
        at += (size_t)snprintf(seen + at, sizeof seen - at, "%s%d: %s, %lld bytes", i ? "; ranked " : "ranked ", r[i].algo,
                               cudnnGetErrorString(r[i].status), (long long)r[i].memory);
    for (int a = 0; a < count; a++) { /* 2: every algorithm, asked directly: the smallest workspace */
        int64_t bytes = 0;
        cudnnStatus_t s = probe(e, op, a, &bytes);
        bool fits = s == CUDNN_STATUS_SUCCESS && bytes <= g.limit && !(g.deterministic && nondeterministic(op, a));
        if (fits && (e->algo < 0 || bytes < e->ws)) e->algo = a, e->ws = bytes;
        if (at < sizeof seen)
            at += (size_t)snprintf(seen + at, sizeof seen - at, "; asked %d: %s%s", a, cudnnGetErrorString(s),
                                   s == CUDNN_STATUS_SUCCESS && !fits ? " (past the limit or not deterministic)" : "");
    }
    if (e->algo >= 0) return;
    char call[ALGO_TEXT], msg[1600];
    call_words(l, c, call, sizeof call);
    snprintf(msg, sizeof msg, "%s: no algorithm within %lld bytes%s (%s)", call, (long long)g.limit,
             g.deterministic ? " and deterministic" : "", seen);
    cu_fatal("choosing a cuDNN convolution algorithm", msg, __FILE__, __LINE__);
}

/* The policy's answer for call c (of layer l with c_in input channels), with its descriptors. */
static const conv_choice *choice(const net_layer *l, int c_in, const dnn_call *c)
{
    conv_key k = key_of(l, c_in, c);
    conv_choice *e = slot_for(&k);
    if (e->used) return e;
    memset(e, 0, sizeof *e);
    e->key = k;
    descs_make(e, l, c_in, c);
    e->algo = -1;
    if (c->op != DNN_CONV_BWD_BIAS) choose(e, l, c);
    e->used = true, g.count++;
    return e;
}

/* --- the workspace model ------------------------------------------------------------------------- */

static int64_t up256(int64_t b) { return (b + 255) / 256 * 256; }

/* The workspace step s needs: its calls' largest algorithm workspace, then its staging. */
static int64_t step_ws(const dnn_step *s, const dnn_plan *p)
{
    int64_t most = 0;
    for (int i = 0; i < p->n; i++) {
        const dnn_call *c = &p->call[i];
        if (c->op == DNN_CONV_FWD || c->op == DNN_CONV_BWD_DATA || c->op == DNN_CONV_BWD_FILTER) {
            const conv_choice *e = choice(s->l, s->c_in, c);
            if (e->ws > most) most = e->ws;
        }
    }
    return up256(most) + p->stage_bytes;
}

int64_t conv_cuda_ws_bytes(const net *n, const sched_ws_query *q) { return dnn_query_most(n, q, step_ws); }

/* --- running a plan ------------------------------------------------------------------------------ */

static void record(int L, dnn_op op, const conv_choice *e)
{
    if (L >= g.n_layers) {
        g.algo = err_realloc(g.algo, (size_t)(L + 1) * sizeof *g.algo);
        g.ws = err_realloc(g.ws, (size_t)(L + 1) * sizeof *g.ws);
        for (int i = g.n_layers; i <= L; i++)
            for (int d = 0; d < 3; d++) g.algo[i][d] = -1, g.ws[i][d] = 0;
        g.n_layers = L + 1;
    }
    int d = op == DNN_CONV_FWD ? 0 : op == DNN_CONV_BWD_DATA ? 1 : 2;
    g.algo[L][d] = e->algo, g.ws[L][d] = e->ws;
}

void conv_cuda_layer(int L, int algo[3], int64_t ws[3])
{
    for (int d = 0; d < 3; d++) algo[d] = L < g.n_layers ? g.algo[L][d] : -1, ws[d] = L < g.n_layers ? g.ws[L][d] : 0;
}

void conv_cuda_restart(void)
{
    for (int L = 0; L < g.n_layers; L++)
        for (int d = 0; d < 3; d++) g.algo[L][d] = -1, g.ws[L][d] = 0;
}

static band_rows held(const ten *t) { return t->p ? (band_rows){t->row0, t->row0 + t->h} : (band_rows){0, 0}; }

static void run(const ops_call *c, bool backward)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *y = backward ? &c->dy : &c->y;
    const ten *in = x->p ? x : dx; /* either gives the input's geometry */
    dnn_step s = {.l = l, .c_in = in->c, .in_h = c->in_h[0], .in_w = in->w, .batch = y->n, .backward = backward, .out = {c->a, c->b},
                  .x = held(x), .y = held(y), .dx = backward ? held(dx) : (band_rows){0, 0}, .dw = backward && c->dw,
                  .dx_acc = c->dx_acc[0]};
    dnn_plan p;
    char why[300];
    if (dnn_conv_plan(&s, g.pack, &p, why, sizeof why)) cu_fatal("planning a convolution's cuDNN calls", why, __FILE__, __LINE__);
    int64_t room = c->ws_bytes - p.stage_bytes; /* the algorithms' share: staging sits at the workspace's end */
    if (room < 0 || room % 256) {
        snprintf(why, sizeof why, "layer '%s' rows %d..%d: its calls stage %lld bytes in a workspace of %lld (a schedule lowered "
                 "without the CUDA workspace model?)", l->name, c->a, c->b, (long long)p.stage_bytes, (long long)c->ws_bytes);
        cu_fatal("running a convolution", why, __FILE__, __LINE__);
    }
    float *base[DNN_NBASE] = {[DNN_X] = x->p, [DNN_Y] = c->y.p, [DNN_DX] = dx->p, [DNN_DY] = c->dy.p,
                              [DNN_STAGE] = (float *)((char *)c->ws + room)};
    for (int i = 0; i < p.n; i++) {
        const dnn_call *k = &p.call[i];
        float *d = base[k->dst.base] + k->dst.at;
        if (k->op == DNN_ZERO) {
            if (k->planes == 1 || k->dst_stride == k->len) CUDA_CHECK(cudaMemsetAsync(d, 0, (size_t)(k->planes * k->len) * 4, g.stream));
            else CUDA_CHECK(cudaMemset2DAsync(d, (size_t)k->dst_stride * 4, 0, (size_t)k->len * 4, (size_t)k->planes, g.stream));
            continue;
        }
        if (k->op == DNN_COPY) {
            k_copy2d(g.stream, d, k->dst_stride, base[k->src.base] + k->src.at, k->src_stride, k->planes, k->len, k->acc);
            continue;
        }
        const conv_choice *e = choice(l, s.c_in, k);
        float *xp = k->op == DNN_CONV_BWD_BIAS ? NULL : base[k->xr.base] + k->xr.at, *yp = base[k->yr.base] + k->yr.at;
        int64_t nw = (int64_t)l->u.conv.c_out * (s.c_in / l->u.conv.groups) * l->win.k * l->win_w.k;
        if (k->op != DNN_CONV_BWD_BIAS && e->ws > room) {
            snprintf(why, sizeof why, "layer '%s' rows %d..%d: %s algorithm %d needs %lld bytes, the step has %lld", l->name, c->a, c->b,
                     op_name(k->op), e->algo, (long long)e->ws, (long long)room);
            cu_fatal("running a convolution", why, __FILE__, __LINE__);
        }
        if (k->op != DNN_CONV_BWD_BIAS) record(c->layer, k->op, e);
        switch (k->op) {
        case DNN_CONV_FWD:
            CUDNN_CHECK(cudnnConvolutionForward(g.dnn, &one, e->x, xp, e->w, c->w, e->conv, (cudnnConvolutionFwdAlgo_t)e->algo, c->ws,
                                                (size_t)e->ws, &zero_f, e->y, yp));
            break;
        case DNN_CONV_BWD_DATA:
            CUDNN_CHECK(cudnnConvolutionBackwardData(g.dnn, &one, e->w, c->w, e->y, yp, e->conv, (cudnnConvolutionBwdDataAlgo_t)e->algo,
                                                     c->ws, (size_t)e->ws, k->acc ? &one : &zero_f, e->x, xp));
            break;
        case DNN_CONV_BWD_FILTER:
            CUDNN_CHECK(cudnnConvolutionBackwardFilter(g.dnn, &one, e->x, xp, e->y, yp, e->conv, (cudnnConvolutionBwdFilterAlgo_t)e->algo,
                                                       c->ws, (size_t)e->ws, &one, e->w, c->dw));
            break;
        case DNN_CONV_BWD_BIAS: CUDNN_CHECK(cudnnConvolutionBackwardBias(g.dnn, &one, e->y, yp, &one, e->x, c->dw + nw)); break;
        default: break;
        }
    }
    dnn_plan_free(&p);
}

void conv_cuda_forward(const ops_call *c) { run(c, false); }
void conv_cuda_backward(const ops_call *c) { run(c, true); }
