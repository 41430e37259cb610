/* ops_cuda: see ops_cuda.h. Every call is enqueued on one compute stream; copies for offload run
 * on a second stream. A CUDA, cuDNN or cuBLAS error inside a step is fatal (message, exit 1): the
 * executor has no way to resume half an iteration. */
#include "engine/cuda/ops_cuda.h"
#include "engine/act.h"
#include "sim/kind.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "engine/cuda/conv_split.h"
#include "engine/cuda/cuprof.h"
#include "engine/cuda/kernels.h"

/* A move under way (cu_move): the device block, the pinned block of an offload (NULL: a prefetch),
 * and the event that marks the copy's end. */
typedef struct {
    void *dev, *host;
    cudaEvent_t done;
} cu_pending;

static struct {
    bool open, profile;
    cudaStream_t compute, copy;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    float *loss_dev;            /* the loss, on the device */
    float *loss_to;             /* where the next sync writes it (ops_call.loss) */
    double *scratch;            /* the loss of each block of places (k_loss_scratch); gnorm's gradient sums */
    int64_t scratch_cap;
    void **host_free;           /* pinned blocks to free at the next sync (a copy may still read them) */
    int n_host_free, cap_host_free;
    cu_pending *pending;        /* moves under way */
    int n_pending, cap_pending;
    bool deterministic;
    int64_t ws_limit;
    ops_device_layer *algo;     /* per layer: the convolution algorithms last chosen (kernel_us unused) */
    int n_algo;
    int64_t context_bytes;      /* device bytes in use before the first allocation (ops_device) */
    int64_t device_peak;        /* ... the most at a step's end since device_mark (profiling) */
    int64_t *codec_dev;         /* sparse encodings: each image's bytes, then offsets (device) */
    int codec_cap;
} g;

static void fatal(const char *what, const char *msg, const char *file, int line)
{
    fprintf(stderr, "lrcnn: %s failed at %s:%d: %s\n", what, file, line, msg);
    exit(1);
}

#define CU(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) fatal(#x, cudaGetErrorString(r_), __FILE__, __LINE__); } while (0)
#define DNN(x) do { cudnnStatus_t r_ = (x); if (r_ != CUDNN_STATUS_SUCCESS) fatal(#x, cudnnGetErrorString(r_), __FILE__, __LINE__); } while (0)
#define BLAS(x) do { cublasStatus_t r_ = (x); if (r_ != CUBLAS_STATUS_SUCCESS) fatal(#x, cublasGetStatusString(r_), __FILE__, __LINE__); } while (0)

/* Every layer step ends here: a kernel launch of the step that failed (kernels.h: LAUNCHED checks
 * each launch in debug builds) stops the program, naming the step. cudaGetLastError does not wait
 * for the device. */
static void step_checked(const ops_call *c, const char *what)
{
    cudaError_t r = cudaGetLastError();
    if (r == cudaSuccess) return;
    fprintf(stderr, "lrcnn: %s of layer '%s' (rows %d..%d): a kernel launch failed: %s\n", what, c->l->name, c->a, c->b,
            cudaGetErrorString(r));
    exit(1);
}

static const float one = 1.0f, zero = 0.0f;

/* --- memory ----------------------------------------------------------------------------------- */

static void *cu_get(int64_t bytes, bool host, bool z)
{
    void *p = NULL;
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    if (host) {
        if (cudaMallocHost(&p, n) != cudaSuccess) return NULL;
        if (z) memset(p, 0, n);
        return p;
    }
    if (cudaMallocAsync(&p, n, g.compute) != cudaSuccess) return NULL;
    if (z) CU(cudaMemsetAsync(p, 0, n, g.compute));
    return p;
}

static void defer_host_free(void *p)
{
    if (g.n_host_free == g.cap_host_free)
        g.host_free = err_realloc(g.host_free, (size_t)(g.cap_host_free = g.cap_host_free * 2 + 16) * sizeof(void *));
    g.host_free[g.n_host_free++] = p;
}

static void cu_put(void *p, bool host)
{
    if (host) defer_host_free(p);
    else CU(cudaFreeAsync(p, g.compute));
}

/* Moves follow sched_move_issue's protocol (sim/sched.h). An offload's copy is staged: the copy
 * stream waits for the compute work so far (the block's last writer), copies into pinned memory
 * and marks its end; the move later makes the compute stream wait for that mark and frees the
 * device block in compute order, where the schedule releases it, so the pool never holds less than
 * the accounting says. A prefetch takes device memory in compute order (the copy stream waits for
 * the compute work so far), copies, and marks the arrival; the first step that uses the block makes
 * the compute stream wait for it (cu_ready). The host side of a prefetch is freed at the next sync. */

static cudaEvent_t compute_mark(cudaStream_t wait_on)
{
    cudaEvent_t ev;
    CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CU(cudaEventRecord(ev, g.compute));
    CU(cudaStreamWaitEvent(wait_on, ev, 0));
    CU(cudaEventDestroy(ev)); /* released once the work it marks completes */
    CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return ev;
}

static void pending_push(void *dev, void *host, cudaEvent_t done)
{
    if (g.n_pending == g.cap_pending)
        g.pending = err_realloc(g.pending, (size_t)(g.cap_pending = g.cap_pending * 2 + 16) * sizeof *g.pending);
    g.pending[g.n_pending++] = (cu_pending){dev, host, done};
}

/* The move under way of device block dev, taken from the table; false with none. */
static bool pending_take(void *dev, cu_pending *out)
{
    for (int i = 0; i < g.n_pending; i++)
        if (g.pending[i].dev == dev) {
            *out = g.pending[i];
            g.pending[i] = g.pending[--g.n_pending];
            return true;
        }
    return false;
}

static void cu_stage(void *p, int64_t bytes)
{
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    void *q = NULL;
    CU(cudaMallocHost(&q, n));
    cudaEvent_t done = compute_mark(g.copy);
    CU(cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToHost, g.copy));
    CU(cudaEventRecord(done, g.copy));
    pending_push(p, q, done);
}

static void cu_ready(void *p)
{
    cu_pending c;
    if (!pending_take(p, &c)) return;
    CU(cudaStreamWaitEvent(g.compute, c.done, 0));
    CU(cudaEventDestroy(c.done));
}

static void *cu_move(void *p, int64_t bytes, bool to_host)
{
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    cu_pending c;
    if (to_host) {
        if (!pending_take(p, &c)) { /* not staged (calibrating, or the first iteration's migration): now */
            cu_stage(p, bytes);
            CHECK(pending_take(p, &c));
        }
        CU(cudaStreamWaitEvent(g.compute, c.done, 0));
        CU(cudaEventDestroy(c.done));
        CU(cudaFreeAsync(p, g.compute));
        return c.host;
    }
    void *q = NULL;
    cudaEvent_t done = compute_mark(g.copy);
    if (cudaMallocAsync(&q, n, g.copy) != cudaSuccess) {
        CU(cudaEventDestroy(done));
        return NULL;
    }
    CU(cudaMemcpyAsync(q, p, n, cudaMemcpyHostToDevice, g.copy));
    CU(cudaEventRecord(done, g.copy));
    pending_push(q, NULL, done);
    defer_host_free(p);
    return q;
}

static const alloc_mem cuda_mem = {.name = "device", .get = cu_get, .put = cu_put, .move = cu_move, .stage = cu_stage, .ready = cu_ready};

static void cu_upload(void *dst, const void *host, int64_t bytes)
{
    CU(cudaMemcpyAsync(dst, host, (size_t)bytes, cudaMemcpyHostToDevice, g.compute));
    CU(cudaStreamSynchronize(g.compute)); /* host may be reused at once */
}

static void cu_download(void *host, const void *src, int64_t bytes)
{
    CU(cudaMemcpyAsync(host, src, (size_t)bytes, cudaMemcpyDeviceToHost, g.compute));
    CU(cudaStreamSynchronize(g.compute));
}

static void cu_zero(void *p, int64_t bytes) { CU(cudaMemsetAsync(p, 0, (size_t)bytes, g.compute)); }

static void cu_copy2d(float *d, int64_t ds, const float *s, int64_t ss, int64_t planes, int64_t len, bool acc)
{
    k_copy2d(g.compute, d, ds, s, ss, planes, len, acc);
}

static void cu_sgd(float *p, const float *gr, float *state, int64_t n, double lr, double momentum)
{
    k_sgd(g.compute, p, gr, state, n, (float)lr, (float)momentum);
}

/* The CPU's arithmetic (ops_adam_step): constants formed in double, then rounded. */
static void cu_adam(float *p, const float *gr, float *state, int64_t n, double lr, double beta1, double beta2, double eps, int t)
{
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    k_adam(g.compute, p, gr, state, state + n, n, (float)(lr / bc1), (float)sqrt(bc2), (float)eps, (float)(1.0 - beta1), (float)beta2,
           (float)(1.0 - beta2));
}

static void cu_sync(void)
{
    CU(cudaDeviceSynchronize());
    if (g.loss_to) CU(cudaMemcpy(g.loss_to, g.loss_dev, sizeof(float), cudaMemcpyDeviceToHost));
    g.loss_to = NULL;
    for (int i = 0; i < g.n_host_free; i++) CU(cudaFreeHost(g.host_free[i]));
    g.n_host_free = 0;
    for (int i = 0; i < g.n_pending; i++) /* prefetches have arrived; staged offloads wait for their move */
        if (!g.pending[i].host) {
            CU(cudaEventDestroy(g.pending[i].done));
            g.pending[i--] = g.pending[--g.n_pending];
        }
}

static int64_t device_used(void)
{
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? (int64_t)(total - free_b) : -1;
}

/* tag(-1) ends a step: the device's memory is sampled there (as the host has enqueued the work:
 * the pool grows when an allocation is enqueued, not when it runs). */
static void cu_tag(int tag)
{
    if (!g.profile) return;
    if (tag >= 0) {
        cuprof_tag((uint64_t)tag);
        return;
    }
    cuprof_untag();
    int64_t used = device_used();
    if (used > g.device_peak) g.device_peak = used;
}

/* --- descriptors -------------------------------------------------------------------------------- */

static kview kv(const ten *t) { return (kview){t->p, t->n, t->c, t->h, t->w, t->row0}; }

static float *row_ptr(const ten *t, int row) { return t->p + (int64_t)(row - t->row0) * t->w; }

/* Rows [r0, r1) of a view, all images and channels: a strided window, no copy. */
static cudnnTensorDescriptor_t rows_desc(const ten *t, int r0, int r1)
{
    cudnnTensorDescriptor_t d;
    DNN(cudnnCreateTensorDescriptor(&d));
    DNN(cudnnSetTensor4dDescriptorEx(d, CUDNN_DATA_FLOAT, t->n, t->c, r1 - r0, t->w, t->c * t->h * t->w, t->h * t->w, t->w, 1));
    return d;
}

static cudnnTensorDescriptor_t packed_desc(int n, int c, int h, int w)
{
    cudnnTensorDescriptor_t d;
    DNN(cudnnCreateTensorDescriptor(&d));
    DNN(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    return d;
}

/* Zeroes rows [r0, r1) of every plane of a view. */
static void zero_rows(const ten *t, int r0, int r1)
{
    if (r1 <= r0) return;
    CU(cudaMemset2DAsync(row_ptr(t, r0), (size_t)t->h * t->w * sizeof(float), 0, (size_t)(r1 - r0) * t->w * sizeof(float),
                         (size_t)t->n * t->c, g.compute));
}

/* Before a backward writes dx[j] (ops.h): the whole view is zeroed unless accumulating; kernels
 * then always add. */
static void dx_begin(const ops_call *c, int j)
{
    const ten *dx = &c->dx[j];
    if (dx->p && !c->dx_acc[j]) zero_rows(dx, dx->row0, dx->row0 + dx->h);
}

/* --- convolution -------------------------------------------------------------------------------- */

typedef enum { CONV_FWD, CONV_BWD_DATA, CONV_BWD_FILTER } conv_dir;

typedef struct {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
} conv_descs;

static void conv_descs_make(conv_descs *d, const net_layer *l, int c_in, int pad, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y)
{
    net_window w = l->win, ww = l->win_w; /* along H and W */
    d->x = x, d->y = y;
    DNN(cudnnCreateFilterDescriptor(&d->w));
    DNN(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, l->u.conv.c_out, c_in / l->u.conv.groups, w.k, ww.k));
    DNN(cudnnCreateConvolutionDescriptor(&d->conv));
    DNN(cudnnSetConvolution2dDescriptor(d->conv, pad, ww.p, w.s, ww.s, w.d, ww.d, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    DNN(cudnnSetConvolutionGroupCount(d->conv, l->u.conv.groups));
    DNN(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH));
}

static void conv_descs_free(conv_descs *d)
{
    cudnnDestroyTensorDescriptor(d->x);
    cudnnDestroyTensorDescriptor(d->y);
    cudnnDestroyFilterDescriptor(d->w);
    cudnnDestroyConvolutionDescriptor(d->conv);
}

/* The policy: cuDNN's heuristic ranking, first usable algorithm within `limit` bytes (and
 * deterministic when asked). Returns the algorithm, its workspace in *ws. */
static int conv_algo(const conv_descs *d, conv_dir dir, int64_t limit, int64_t *ws)
{
    enum { MAX = 16 };
    int n = 0;
    if (dir == CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX];
        DNN(cudnnGetConvolutionForwardAlgorithm_v7(g.dnn, d->x, d->w, d->conv, d->y, MAX, &n, p));
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && (int64_t)p[i].memory <= limit &&
                (!g.deterministic || p[i].determinism == CUDNN_DETERMINISTIC))
                return *ws = (int64_t)p[i].memory, (int)p[i].algo;
    } else if (dir == CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX];
        DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(g.dnn, d->w, d->y, d->conv, d->x, MAX, &n, p));
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && (int64_t)p[i].memory <= limit &&
                (!g.deterministic || p[i].determinism == CUDNN_DETERMINISTIC))
                return *ws = (int64_t)p[i].memory, (int)p[i].algo;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX];
        DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(g.dnn, d->x, d->y, d->conv, d->w, MAX, &n, p));
        for (int i = 0; i < n; i++)
            if (p[i].status == CUDNN_STATUS_SUCCESS && (int64_t)p[i].memory <= limit &&
                (!g.deterministic || p[i].determinism == CUDNN_DETERMINISTIC))
                return *ws = (int64_t)p[i].memory, (int)p[i].algo;
    }
    fatal("choosing a cuDNN convolution algorithm", "none fits the workspace", __FILE__, __LINE__);
    return -1;
}

static int64_t stage_bytes(const net_layer *l, int n, int rows)
{
    return (int64_t)n * l->u.conv.c_out * conv_split_stage_rows(l->win, rows) * l->w * (int64_t)sizeof(float);
}

static const ops_device_layer no_layer = {{-1, -1}, {-1, -1, -1}, {0, 0, 0}};

static void record(int L, conv_dir dir, int algo, int64_t ws)
{
    if (L >= g.n_algo) {
        g.algo = err_realloc(g.algo, (size_t)(L + 1) * sizeof *g.algo);
        for (int i = g.n_algo; i <= L; i++) g.algo[i] = no_layer;
        g.n_algo = L + 1;
    }
    g.algo[L].algo[dir] = algo, g.algo[L].ws[dir] = ws;
}

static void conv_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    conv_piece pc[3];
    int np = conv_split(l->win, c->in_h[0], c->a, c->b, pc);
    int64_t stage = stage_bytes(l, y->n, c->b - c->a), avail = c->ws_bytes - stage;
    float *stage_p = (float *)((char *)c->ws + (avail > 0 ? avail : 0));
    for (int i = 0; i < np; i++) {
        const conv_piece *q = &pc[i];
        if (q->v0 >= q->v1) { zero_rows(y, q->a, q->b); continue; }
        bool direct = conv_piece_direct(q);
        conv_descs d;
        conv_descs_make(&d, l, x->c, q->pad, rows_desc(x, q->v0, q->v1),
                        direct ? rows_desc(y, q->a, q->b) : packed_desc(y->n, y->c, q->out, y->w));
        int64_t ws = 0;
        int algo = conv_algo(&d, CONV_FWD, avail, &ws);
        record(c->layer, CONV_FWD, algo, ws);
        DNN(cudnnConvolutionForward(g.dnn, &one, d.x, row_ptr(x, q->v0), d.w, c->w, d.conv, (cudnnConvolutionFwdAlgo_t)algo, c->ws,
                                    (size_t)ws, &zero, d.y, direct ? row_ptr(y, q->a) : stage_p));
        if (!direct) /* rows [a, b) of the staged output into y */
            k_copy2d(g.compute, row_ptr(y, q->a), (int64_t)y->h * y->w, stage_p + (int64_t)(q->a - q->o0) * y->w,
                     (int64_t)q->out * y->w, (int64_t)y->n * y->c, (int64_t)(q->b - q->a) * y->w, false);
        conv_descs_free(&d);
    }
    if (l->u.conv.bias)
        k_bias(g.compute, kv(y), c->a, c->b, c->w + (int64_t)l->u.conv.c_out * (x->c / l->u.conv.groups) * l->win.k * l->win_w.k);
}

static void conv_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int c_in = dx->p ? dx->c : x->c;
    int64_t wcount = (int64_t)l->u.conv.c_out * (c_in / l->u.conv.groups) * l->win.k * l->win_w.k;
    conv_piece pc[3];
    int np = conv_split(l->win, c->in_h[0], c->a, c->b, pc);
    int64_t stage = stage_bytes(l, dy->n, c->b - c->a), avail = c->ws_bytes - stage;
    float *stage_p = (float *)((char *)c->ws + (avail > 0 ? avail : 0));
    if (c->dw && l->u.conv.bias) {
        cudnnTensorDescriptor_t dyd = rows_desc(dy, c->a, c->b), bd = packed_desc(1, l->u.conv.c_out, 1, 1);
        DNN(cudnnConvolutionBackwardBias(g.dnn, &one, dyd, row_ptr(dy, c->a), &one, bd, c->dw + wcount));
        cudnnDestroyTensorDescriptor(dyd), cudnnDestroyTensorDescriptor(bd);
    }
    dx_begin(c, 0);
    for (int i = 0; i < np; i++) {
        const conv_piece *q = &pc[i];
        if (q->v0 >= q->v1) continue; /* reads only padding: no weight or input gradient */
        bool direct = conv_piece_direct(q);
        const float *dyp = row_ptr(dy, q->a);
        if (!direct) { /* dy rows at their place among the `out` rows cuDNN computes, zeros elsewhere */
            CU(cudaMemsetAsync(stage_p, 0, (size_t)dy->n * dy->c * q->out * dy->w * sizeof(float), g.compute));
            k_copy2d(g.compute, stage_p + (int64_t)(q->a - q->o0) * dy->w, (int64_t)q->out * dy->w, dyp, (int64_t)dy->h * dy->w,
                     (int64_t)dy->n * dy->c, (int64_t)(q->b - q->a) * dy->w, false);
            dyp = stage_p;
        }
        const ten *xs = dx->p ? dx : x; /* either gives the input's geometry */
        conv_descs d;
        conv_descs_make(&d, l, c_in, q->pad, rows_desc(xs, q->v0, q->v1),
                        direct ? rows_desc(dy, q->a, q->b) : packed_desc(dy->n, dy->c, q->out, dy->w));
        int64_t ws = 0;
        if (c->dw) {
            int algo = conv_algo(&d, CONV_BWD_FILTER, avail, &ws);
            record(c->layer, CONV_BWD_FILTER, algo, ws);
            DNN(cudnnConvolutionBackwardFilter(g.dnn, &one, d.x, row_ptr(x, q->v0), d.y, dyp, d.conv,
                                               (cudnnConvolutionBwdFilterAlgo_t)algo, c->ws, (size_t)ws, &one, d.w, c->dw));
        }
        if (dx->p) {
            int algo = conv_algo(&d, CONV_BWD_DATA, avail, &ws);
            record(c->layer, CONV_BWD_DATA, algo, ws);
            DNN(cudnnConvolutionBackwardData(g.dnn, &one, d.w, c->w, d.y, dyp, d.conv, (cudnnConvolutionBwdDataAlgo_t)algo, c->ws,
                                             (size_t)ws, &one, d.x, row_ptr(dx, q->v0)));
        }
        conv_descs_free(&d);
    }
}

/* The workspace model: the algorithm the policy picks for a band of `rows` rows (the unpadded
 * middle piece's shape, padding p) within LRCNN_CUDNN_WS_MB, rounded up to 256 bytes, plus the
 * staging buffer (a step puts it at the end of its workspace). */
static int64_t ws_bytes(const sched_ws_model *m, const net *n, int L, int rows, int batch, bool backward)
{
    (void)m;
    const net_layer *l = &n->layers[L];
    if (l->kind != NET_CONV) return 0;
    const net_layer *in = &n->layers[l->in[0]];
    net_window w = l->win;
    int in_rows = (rows - 1) * w.s + w.d * (w.k - 1) + 1 - 2 * w.p;
    if (in_rows < 1) in_rows = 1;
    if (in_rows > in->h) in_rows = in->h;
    conv_descs d;
    conv_descs_make(&d, l, in->c, w.p, packed_desc(batch, in->c, in_rows, in->w), NULL);
    int oh, ow, on, oc;
    DNN(cudnnGetConvolution2dForwardOutputDim(d.conv, d.x, d.w, &on, &oc, &oh, &ow));
    d.y = packed_desc(on, oc, oh, ow);
    int64_t a = 0, b = 0;
    if (backward) {
        conv_algo(&d, CONV_BWD_DATA, g.ws_limit, &a);
        conv_algo(&d, CONV_BWD_FILTER, g.ws_limit, &b);
    } else {
        conv_algo(&d, CONV_FWD, g.ws_limit, &a);
    }
    conv_descs_free(&d);
    int64_t dnn = ((a > b ? a : b) + 255) / 256 * 256; /* so that the staging buffer after it starts 256-byte aligned */
    return dnn + stage_bytes(l, batch, rows);
}

static const sched_ws_model cuda_ws = {.bytes = ws_bytes};
const sched_ws_model *ops_cuda_ws_model(void) { return &cuda_ws; }

/* --- activation, batch norm, fully connected ----------------------------------------------------- */

static cudnnActivationDescriptor_t relu_desc(void)
{
    cudnnActivationDescriptor_t a;
    DNN(cudnnCreateActivationDescriptor(&a));
    DNN(cudnnSetActivationDescriptor(a, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    return a;
}

static void relu_forward(const ops_call *c)
{
    cudnnActivationDescriptor_t a = relu_desc();
    cudnnTensorDescriptor_t xd = rows_desc(&c->x[0], c->a, c->b), yd = rows_desc(&c->y, c->a, c->b);
    DNN(cudnnActivationForward(g.dnn, a, &one, xd, row_ptr(&c->x[0], c->a), &zero, yd, row_ptr(&c->y, c->a)));
    cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(yd), cudnnDestroyActivationDescriptor(a);
}

/* dx = dy where y > 0; in place (dx is dy) only rows [a, b) are rewritten (ops.h). */
static void relu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy, *m = c->y.p ? &c->y : &c->x[0];
    if (!dx->p) return;
    bool inplace = dx->p == dy->p;
    if (!inplace) dx_begin(c, 0);
    cudnnActivationDescriptor_t a = relu_desc();
    cudnnTensorDescriptor_t md = rows_desc(m, c->a, c->b), dyd = rows_desc(dy, c->a, c->b), dxd = rows_desc(dx, c->a, c->b);
    DNN(cudnnActivationBackward(g.dnn, a, &one, md, row_ptr(m, c->a), dyd, row_ptr(dy, c->a), md, row_ptr(m, c->a),
                                inplace ? &zero : &one, dxd, row_ptr(dx, c->a)));
    cudnnDestroyTensorDescriptor(md), cudnnDestroyTensorDescriptor(dyd), cudnnDestroyTensorDescriptor(dxd);
    cudnnDestroyActivationDescriptor(a);
}

static void bn_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int C = x->c;
    if (c->bn == OPS_BN_MAP) { /* the whole map's statistics, gathered over the bands */
        k_bn_map_fwd(g.compute, kv(x), kv(y), c->a, c->b, c->w, c->stats);
        return;
    }
    cudnnTensorDescriptor_t xd = rows_desc(x, c->a, c->b), yd = rows_desc(y, c->a, c->b), pd = packed_desc(1, C, 1, 1);
    if (c->bn == OPS_BN_TRAIN) {
        DNN(cudnnBatchNormalizationForwardTraining(g.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, row_ptr(x, c->a), yd, row_ptr(y, c->a),
                                                   pd, c->w, c->w + C, l->u.bn.momentum, c->update_running ? c->running : NULL,
                                                   c->update_running ? c->running + C : NULL, l->u.bn.eps, c->stats, c->stats + C));
    } else {
        DNN(cudnnBatchNormalizationForwardInference(g.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, row_ptr(x, c->a), yd, row_ptr(y, c->a),
                                                    pd, c->w, c->w + C, c->running, c->running + C, l->u.bn.eps));
        k_bn_frozen_stats(g.compute, c->running, c->stats, C, l->u.bn.eps);
    }
    cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(yd), cudnnDestroyTensorDescriptor(pd);
}

static void bn_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int C = dy->c;
    dx_begin(c, 0);
    if (c->bn == OPS_BN_MAP) {
        ten none = {0};
        k_bn_map_bwd(g.compute, kv(x), kv(dx->p ? dx : &none), kv(dy), c->a, c->b, c->own_a, c->own_b, c->w, c->stats, c->sums,
                     c->count, c->dw);
        return;
    }
    if (c->bn == OPS_BN_FROZEN || !dx->p) {
        ten none = {0};
        k_bn_frozen_bwd(g.compute, kv(x), kv(dx->p ? dx : &none), kv(dy), c->a, c->b, c->w, c->stats, c->dw);
        CHECK(c->bn == OPS_BN_FROZEN); /* train-mode statistics need cuDNN's dx path */
        return;
    }
    cudnnTensorDescriptor_t xd = rows_desc(x, c->a, c->b), dyd = rows_desc(dy, c->a, c->b), dxd = rows_desc(dx, c->a, c->b),
                            pd = packed_desc(1, C, 1, 1);
    float *dw = c->dw;
    CHECK(dw != NULL);
    DNN(cudnnBatchNormalizationBackward(g.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &one, &one, &one, xd, row_ptr(x, c->a), dyd, row_ptr(dy, c->a),
                                        dxd, row_ptr(dx, c->a), pd, c->w, dw, dw + C, l->u.bn.eps, c->stats, c->stats + C));
    cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(dyd), cudnnDestroyTensorDescriptor(dxd);
    cudnnDestroyTensorDescriptor(pd);
}

/* Row-major (N, in) x (out, in)^T through column-major cuBLAS: y^T = W^T' x^T (see ops_cuda.h). */
static void fc_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int N = x->n, in = x->c * x->h * x->w, out = l->u.fc.c_out;
    BLAS(cublasSgemm(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, &one, c->w, in, x->p, in, &zero, y->p, out));
    if (l->u.fc.bias) k_bias(g.compute, (kview){y->p, N, out, 1, 1, 0}, 0, 1, c->w + (int64_t)out * in);
}

static void fc_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int N = dy->n, out = l->u.fc.c_out;
    if (c->dw) {
        int in = x->c * x->h * x->w;
        BLAS(cublasSgemm(g.blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, &one, x->p, in, dy->p, out, &one, c->dw, in));
        if (l->u.fc.bias) k_fc_bias_grad(g.compute, dy->p, N, out, c->dw + (int64_t)out * in);
    }
    if (dx->p) {
        int in = dx->c * dx->h * dx->w;
        BLAS(cublasSgemm(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, &one, c->w, in, dy->p, out, c->dx_acc[0] ? &one : &zero, dx->p, in));
    }
}

/* --- the rest: our kernels -------------------------------------------------------------------------- */

static kwin kw(net_window w) { return (kwin){w.k, w.s, w.p, w.d}; }

static void ensure_scratch(int64_t n)
{
    if (n <= g.scratch_cap) return;
    if (g.scratch) CU(cudaFree(g.scratch));
    CU(cudaMalloc((void **)&g.scratch, (size_t)n * sizeof(double)));
    g.scratch_cap = n;
}

static void cuda_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    CHECK(c->a >= 0 && c->a < c->b && c->b <= l->h);
    switch (l->kind) {
    case NET_CONV: conv_forward(c); break;
    case NET_CONVT: {
        int64_t nw = (int64_t)c->x[0].c * (l->c / l->u.conv.groups) * l->win.k * l->win.k;
        k_convt_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->w, l->u.conv.bias ? c->w + nw : NULL, kw(net_convt_window(l)),
                    l->u.conv.groups, c->in_h[0], c->a, c->b);
        break;
    }
    case NET_RELU: relu_forward(c); break;
    case NET_BN: bn_forward(c); break;
    case NET_FC: fc_forward(c); break;
    case NET_ADD: /* left to right, as PyTorch's chain of adds */
        k_add_fwd(g.compute, kv(&c->x[0]), kv(&c->x[1]), kv(&c->y), c->a, c->b);
        for (int j = 2; j < l->n_in; j++) k_acc_rows(g.compute, kv(&c->y), kv(&c->x[j]), 0, c->a, c->b);
        break;
    case NET_MAXPOOL: k_maxpool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->argmax, kw(l->win), c->in_h[0], c->a, c->b); break;
    case NET_AVGPOOL: k_avgpool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), kw(l->win), c->in_h[0], c->a, c->b); break;
    case NET_GAP: k_apool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), 1); break;
    case NET_MUL: k_mul_fwd(g.compute, kv(&c->x[0]), kv(&c->x[1]), kv(&c->y)); break;
    case NET_CONCAT:
        for (int j = 0, off = 0; j < l->n_in; off += c->in_c[j], j++) k_concat_fwd(g.compute, kv(&c->x[j]), kv(&c->y), off, c->a, c->b);
        break;
    case NET_UPSAMPLE: k_upsample_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.up.scale, c->a, c->b); break;
    case NET_GNORM: k_gnorm_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->stats, c->w, l->u.norm.groups, l->u.norm.eps); break;
    case NET_LNORM: k_lnorm_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->stats, c->w, l->u.norm.eps, c->a, c->b); break;
    case NET_SCALE: k_scale_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->w, c->a, c->b); break;
    case NET_BILINEAR:
        k_bilinear_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.up.scale, l->u.up.align, c->in_h[0], l->h, c->a, c->b);
        break;
    case NET_APOOL: k_apool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.apool.o); break;
    case NET_SIGMOID:
    case NET_RELU6:
    case NET_LEAKY:
    case NET_SILU:
    case NET_GELU:
    case NET_HSWISH:
    case NET_HSIGMOID: k_act_fwd(g.compute, (int)l->kind, ACT_SLOPE(l), kv(&c->x[0]), kv(&c->y), c->a, c->b); break;
    case NET_DROPOUT: k_dropout_fwd(g.compute, c->key, l->u.dropout.p, l->u.dropout.sample, kv(&c->x[0]), kv(&c->y), c->mask, c->a, c->b, l->h); break;
    case NET_LOSS:
        ensure_scratch(k_loss_scratch((int64_t)c->x[0].n * l->h * l->w));
        k_loss_fwd(g.compute, kv(&c->x[0]), l->c, (int64_t)l->h * l->w, c->labels, c->probs, g.loss_dev, g.scratch);
        if (c->loss) g.loss_to = c->loss; /* read back at the next sync, not here: no wait mid-iteration */
        break;
    default: CHECK(!"layer kind without a CUDA kernel");
    }
    step_checked(c, "forward");
}

static void cuda_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    CHECK(c->a >= 0 && c->a < c->b && c->b <= l->h);
    switch (l->kind) {
    case NET_CONV: conv_backward(c); break;
    case NET_CONVT: { /* the input rows the band's output rows read (net_window_rows of the mirrored window) */
        int lo, hi, c_in = c->dx[0].p ? c->dx[0].c : c->x[0].c;
        ops_in_rows(c, &lo, &hi);
        kwin w = kw(net_convt_window(l));
        int64_t nw = (int64_t)c_in * (l->c / l->u.conv.groups) * w.k * w.k;
        if (c->dx[0].p)
            dx_begin(c, 0), k_convt_bwd_data(g.compute, kv(&c->dx[0]), kv(&c->dy), c->w, w, l->u.conv.groups, lo, hi, c->a, c->b);
        if (c->dw)
            k_convt_bwd_filter(g.compute, kv(&c->x[0]), kv(&c->dy), c->dw, l->u.conv.bias ? c->dw + nw : NULL, w, l->u.conv.groups,
                               lo, hi, c->a, c->b);
        break;
    }
    case NET_RELU: relu_backward(c); break;
    case NET_BN: bn_backward(c); break;
    case NET_FC: fc_backward(c); break;
    case NET_ADD:
    case NET_CONCAT: /* input j's channels of dy; a tensor read at several places gets one gradient (net_input_first) */
        for (int j = 0, off = 0; j < l->n_in; off += l->kind == NET_CONCAT ? c->in_c[j] : 0, j++) {
            int i = net_input_first(l, j);
            if (!c->dx[i].p) continue;
            if (i == j) dx_begin(c, j);
            k_acc_rows(g.compute, kv(&c->dx[i]), kv(&c->dy), off, c->a, c->b);
        }
        break;
    case NET_MAXPOOL:
        if (c->dx[0].p) dx_begin(c, 0), k_maxpool_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), c->argmax, kw(l->win), c->in_h[0], c->a, c->b);
        break;
    case NET_AVGPOOL:
        if (c->dx[0].p) dx_begin(c, 0), k_avgpool_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), kw(l->win), c->in_h[0], c->a, c->b);
        break;
    case NET_GAP:
        if (c->dx[0].p) dx_begin(c, 0), k_apool_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), 1);
        break;
    case NET_MUL: { /* of itself (no dx[1]): dx[0] takes both products */
        bool twice = ops_reads_twice(c);
        for (int j = 0; j < 2; j++)
            if (c->dx[j].p)
                dx_begin(c, j), k_mul_bwd(g.compute, kv(&c->dx[j]), kv(&c->dy), kv(&c->x[1 - j]), j == 0 && twice ? kv(&c->x[0]) : (kview){0});
        break;
    }
    case NET_UPSAMPLE:
        if (c->dx[0].p) dx_begin(c, 0), k_upsample_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), l->u.up.scale, c->a, c->b);
        break;
    case NET_GNORM: /* its gradient sums in the scratch (2 doubles an image and group) */
        if (c->dx[0].p) dx_begin(c, 0);
        ensure_scratch(2 * (int64_t)c->dy.n * l->u.norm.groups);
        k_gnorm_bwd(g.compute, kv(&c->x[0]), kv(&c->dy), kv(&c->dx[0]), c->stats, c->w, c->dw, l->u.norm.groups, g.scratch);
        break;
    case NET_SCALE:
        if (c->dx[0].p) dx_begin(c, 0);
        k_scale_bwd(g.compute, kv(&c->x[0]), kv(&c->dy), kv(&c->dx[0]), c->w, c->dw, c->a, c->b);
        break;
    case NET_LNORM:
        if (c->dx[0].p) dx_begin(c, 0);
        k_lnorm_bwd(g.compute, kv(&c->x[0]), kv(&c->dy), kv(&c->dx[0]), c->stats, c->w, c->dw, c->a, c->b, false);
        break;
    case NET_BILINEAR: {
        int lo, hi;
        ops_in_rows(c, &lo, &hi);
        if (c->dx[0].p)
            dx_begin(c, 0), k_bilinear_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), l->u.up.scale, l->u.up.align, c->in_h[0], l->h, lo,
                                           hi, c->a, c->b);
        break;
    }
    case NET_APOOL:
        if (c->dx[0].p) dx_begin(c, 0), k_apool_bwd(g.compute, kv(&c->dx[0]), kv(&c->dy), l->u.apool.o);
        break;
    case NET_SIGMOID:
    case NET_RELU6:
    case NET_LEAKY:
    case NET_SILU:
    case NET_GELU:
    case NET_HSWISH:
    case NET_HSIGMOID: {
        const ten *dx = &c->dx[0], *m = kind_of(l)->keeps_y ? &c->y : &c->x[0];
        if (!dx->p) break;
        bool inplace = dx->p == c->dy.p; /* dx over dy, rows [a, b) only (ops.h) */
        if (!inplace) dx_begin(c, 0);
        k_act_bwd(g.compute, (int)l->kind, ACT_SLOPE(l), kv(m), kv(&c->dy), kv(dx), c->a, c->b, inplace);
        break;
    }
    case NET_DROPOUT:
        CHECK(c->mask != NULL);
        if (c->dx[0].p) dx_begin(c, 0), k_dropout_bwd(g.compute, l->u.dropout.p, l->u.dropout.sample, c->mask, kv(&c->dy), kv(&c->dx[0]), c->a, c->b, false);
        break;
    case NET_LOSS:
        if (c->dx[0].p) dx_begin(c, 0), k_loss_bwd(g.compute, kv(&c->dx[0]), l->c, (int64_t)l->h * l->w, c->probs, c->labels, c->dy.p);
        break;
    default: CHECK(!"layer kind without a CUDA kernel");
    }
    step_checked(c, "backward");
}

/* Whole-map statistics gathered band by band (ops.h: ops_stats); bn only. */
static void cuda_stats(const ops_call *c, ops_stats what)
{
    const net_layer *l = c->l;
    CHECK(kind_of(l)->map_stats && c->sums && c->stats);
    ten none = {0};
    if (what == OPS_STATS_END)
        k_bn_sums_end(g.compute, c->sums, c->stats, c->running, l->c, c->count, l->u.bn.eps, l->u.bn.momentum, c->update_running);
    else
        k_bn_sums(g.compute, kv(&c->x[0]), kv(what == OPS_STATS_DY ? &c->dy : &none), c->a, c->b, c->stats, c->sums);
    step_checked(c, "statistics");
}

/* --- encodings of kept maps (codec.cu) ------------------------------------------------------------ */

static bool cuda_encodes(enc_kind k) { return k != ENC_ZFP_RATE && k != ENC_ZFP_ACC; }

static kcodec kc_of(const ops_codec *m)
{
    static const int kinds[ENC_NKIND] = {[ENC_SIGN] = KC_SIGN, [ENC_ARGMAX] = KC_ARGMAX, [ENC_SPARSE] = KC_SPARSE,
                                         [ENC_FP16] = KC_FP16, [ENC_BF16] = KC_BF16, [ENC_FP8] = KC_FP8};
    CHECK(cuda_encodes(m->kind) && m->kind != ENC_NONE);
    return (kcodec){.kind = kinds[m->kind], .images = m->shape.images, .bits = m->shape.bits, .mask = m->shape.mask,
                    .n = m->shape.nx * m->shape.ny, .row0 = m->row0, .c = m->c, .w = m->w, .in_w = m->in_w, .win = kw(m->win)};
}

/* Sparse images' offsets in the encoding (host, images + 1 values) from their sizes on the device
 * (the header, or the codec's own buffer for a size call); the header comes first. */
static int64_t *sparse_offsets(int images, const int64_t *sizes)
{
    int64_t *at = err_calloc((size_t)images + 1, sizeof(int64_t));
    cu_download(at + 1, sizes, (int64_t)images * 8);
    at[0] = 8 * (int64_t)images;
    for (int i = 0; i < images; i++) at[i + 1] += at[i];
    return at;
}

static void codec_room(int images)
{
    if (2 * images + 1 <= g.codec_cap) return;
    if (g.codec_dev) CU(cudaFree(g.codec_dev));
    g.codec_cap = 2 * images + 1;
    CU(cudaMalloc((void **)&g.codec_dev, (size_t)g.codec_cap * sizeof(int64_t)));
}

static int64_t cuda_encode(const ops_codec *m, const void *x, void *out, void *scratch)
{
    (void)scratch;
    kcodec k = kc_of(m);
    int64_t masks = m->shape.mask ? (int64_t)k.images * ((k.n + 7) / 8) : 0;
    if (m->kind != ENC_SPARSE) {
        int64_t bytes = enc_bytes(m->kind, m->mod, m->shape); /* exact for the fixed-size kinds */
        if (out) k_codec_encode(g.compute, &k, x, out, NULL, bytes - masks);
        return bytes;
    }
    codec_room(k.images);
    int64_t *sizes = out ? (int64_t *)out : g.codec_dev;
    k_codec_sparse_sizes(g.compute, &k, x, sizes);
    int64_t *at = sparse_offsets(k.images, sizes), end = at[k.images];
    if (out) {
        cu_upload(g.codec_dev + k.images, at, ((int64_t)k.images + 1) * 8);
        k_codec_encode(g.compute, &k, x, out, g.codec_dev + k.images, end);
    }
    free(at);
    return end + masks;
}

static void cuda_decode(const ops_codec *m, const void *in, void *x)
{
    kcodec k = kc_of(m);
    int64_t *at = NULL, masks_at = 0;
    if (m->kind == ENC_SPARSE) {
        codec_room(k.images);
        at = sparse_offsets(k.images, in);
        cu_upload(g.codec_dev + k.images, at, ((int64_t)k.images + 1) * 8);
        masks_at = at[k.images];
    } else {
        masks_at = enc_bytes(m->kind, m->mod, m->shape) - (m->shape.mask ? (int64_t)k.images * ((k.n + 7) / 8) : 0);
    }
    k_codec_decode(g.compute, &k, in, x, at ? g.codec_dev + k.images : NULL, masks_at);
    free(at);
}

/* --- the device itself (ops_table.device_mark, device_report) ----------------------------------- */

static cudaMemPool_t default_pool(void)
{
    cudaMemPool_t pool;
    CU(cudaDeviceGetDefaultMemPool(&pool, 0));
    return pool;
}

static int64_t pool_attr(enum cudaMemPoolAttr what)
{
    uint64_t v = 0;
    CU(cudaMemPoolGetAttribute(default_pool(), what, &v));
    return (int64_t)v;
}

/* CUDNN_VERSION and CUBLAS_VERSION are both major * 10000 + minor * 100 + patch. */
static void version(char out[16], int v) { snprintf(out, 16, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100); }

/* The device and the libraries' versions. */
static void describe(ops_device *d)
{
    struct cudaDeviceProp p;
    int drv = 0, rt = 0, blas = 0;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) snprintf(p.name, sizeof p.name, "unknown"), p.major = p.minor = 0;
    snprintf(d->name, sizeof d->name, "%.95s", p.name);
    snprintf(d->capability, sizeof d->capability, "%d.%d", p.major % 100, p.minor % 100);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(d->driver, sizeof d->driver, "%d.%d", drv / 1000, drv % 1000 / 10);
    snprintf(d->runtime, sizeof d->runtime, "%d.%d", rt / 1000, rt % 1000 / 10);
    version(d->dnn, (int)cudnnGetVersion());
    if (g.blas && cublasGetVersion(g.blas, &blas) == CUBLAS_STATUS_SUCCESS) version(d->blas, blas);
}

static void cu_device_mark(void)
{
    CU(cudaDeviceSynchronize());
    uint64_t zero = 0; /* a high-water mark can only be reset to zero: it restarts from what is held now */
    CU(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrReservedMemHigh, &zero));
    CU(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrUsedMemHigh, &zero));
    g.device_peak = device_used();
    for (int L = 0; L < g.n_algo; L++) g.algo[L] = no_layer; /* a net run before: every convolution records again */
    err e;
    if (g.profile && cuprof_mark(&e)) fprintf(stderr, "lrcnn: CUPTI: %s\n", e.msg); /* the report says it too */
}

static void cu_device_report(ops_device *d, ops_device_layer *layers, int n_layers)
{
    CU(cudaDeviceSynchronize());
    memset(d, 0, sizeof *d);
    describe(d);
    d->context_bytes = g.context_bytes;
    d->device_peak = g.profile ? g.device_peak : -1;
    d->pool_reserved_peak = pool_attr(cudaMemPoolAttrReservedMemHigh);
    d->pool_used_peak = pool_attr(cudaMemPoolAttrUsedMemHigh);
    d->cupti_reserved_peak = d->cupti_suballoc_peak = d->dropped = -1, d->kernel_us = -1;
    for (int L = 0; L < n_layers; L++) layers[L] = L < g.n_algo ? g.algo[L] : no_layer;
    cuprof_report r;
    err e;
    if (!g.profile) return;
    if (cuprof_report_get(&r, &e)) {
        fprintf(stderr, "lrcnn: CUPTI: %s (the run's CUPTI figures are left out)\n", e.msg);
        return;
    }
    d->profiled = true;
    d->cupti_reserved_peak = r.reserved_peak, d->cupti_suballoc_peak = r.suballoc_peak;
    d->dropped = (int64_t)r.dropped, d->kernel_us = r.kernel_us;
    for (int L = 0; L < n_layers; L++) {
        layers[L].kernel_us[0] = 2 * L < r.n_tags ? r.tag_us[2 * L] : 0;
        layers[L].kernel_us[1] = 2 * L + 1 < r.n_tags ? r.tag_us[2 * L + 1] : 0;
    }
}

static const ops_table cuda_table = {.backend = "cuda", .forward = cuda_forward, .backward = cuda_backward, .stats = cuda_stats,
                                     .mem = &cuda_mem, .ws = &cuda_ws,
                                     .upload = cu_upload, .download = cu_download, .zero = cu_zero, .copy2d = cu_copy2d,
                                     .sgd = cu_sgd, .adam = cu_adam, .sync = cu_sync, .tag = cu_tag,
                                     .encode = cuda_encode, .decode = cuda_decode, .encodes = cuda_encodes,
                                     .device_mark = cu_device_mark, .device_report = cu_device_report};

const ops_table *ops_cuda_open(bool profile, err *e)
{
    if (g.open) return &cuda_table;
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n); /* initializes the driver, creates no context */
    if (r != cudaSuccess || n == 0) {
        err_set(e, "no CUDA device: %s", r != cudaSuccess ? cudaGetErrorString(r) : "none found");
        return NULL;
    }
    if (profile && cuprof_start(8192, e)) return NULL; /* before the context: its allocations are recorded */
    CU(cudaSetDevice(0));
    CU(cudaStreamCreateWithFlags(&g.compute, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&g.copy, cudaStreamNonBlocking));
    cudaMemPool_t pool;
    CU(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX; /* freed blocks stay reserved: reuse without cudaMalloc */
    CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    DNN(cudnnCreate(&g.dnn));
    DNN(cudnnSetStream(g.dnn, g.compute));
    BLAS(cublasCreate(&g.blas));
    BLAS(cublasSetStream(g.blas, g.compute));
    BLAS(cublasSetMathMode(g.blas, CUBLAS_DEFAULT_MATH));
    g.context_bytes = device_used(); /* the context, cuDNN's and cuBLAS's handles: before our first byte */
    CU(cudaMalloc((void **)&g.loss_dev, sizeof(float)));
    const char *det = getenv("LRCNN_CUDNN_DETERMINISTIC"), *mb = getenv("LRCNN_CUDNN_WS_MB");
    g.deterministic = det && *det == '1';
    g.ws_limit = (mb && atol(mb) > 0 ? atol(mb) : 256) << 20;
    g.profile = profile;
    g.open = true;
    return &cuda_table;
}

void ops_cuda_describe(char *out, size_t len)
{
    ops_device d = {0};
    describe(&d);
    snprintf(out, len, "%s (compute capability %s), driver %s, CUDA runtime %s, cuDNN %s, cuBLAS %s", d.name, d.capability,
             d.driver, d.runtime, d.dnn, d.blas);
}
