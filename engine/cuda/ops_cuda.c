/* ops_cuda: see ops_cuda.h. Every call is enqueued on one compute stream; copies for offload run
 * on a second stream. A CUDA, cuDNN or cuBLAS error inside a step is fatal (cucheck.h). Nothing
 * is allocated inside an iteration but the schedule's own buffers (from the pool) and a prefetch's
 * device block: the scratch, cuBLAS's workspace and the pinned host arena are set up by prepare,
 * the staged batch's room by the first stage, before the first iteration. */
#include "engine/cuda/ops_cuda.h"
#include "engine/act.h"
#include "sim/net/kind.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/bn_chunks.h"
#include "engine/cuda/conv_cuda.h"
#include "engine/cuda/cucheck.h"
#include "engine/cuda/dnn.h"
#include "engine/cuda/codec_cuda.h"
#include "engine/cuda/mem_cuda.h"
#include "engine/cuda/kernels.h"
#include "engine/cuda/watch_cuda.h"

/* cuBLAS's workspace: its documented recommendation for Hopper (smaller on older GPUs). */
#define BLAS_WS_BYTES (32 << 20)

static struct {
    bool open;
    cudaStream_t compute, copy;
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    float *loss_dev;            /* the loss, on the device */
    float *loss_to;             /* where the next sync writes it (ops_call.loss) */
    double *scratch;            /* the loss of each block of places (k_loss_scratch); gnorm's gradient
                                   sums; a band's bn sums (bn=per-band) */
    int64_t scratch_cap;        /* doubles, set by prepare */
    void *blas_ws;              /* cuBLAS's workspace (BLAS_WS_BYTES) */
    void *batch[2];             /* the staged batch: images, labels (ops_table.stage) */
    int64_t batch_cap[2];       /* their bytes, set by the first stage */
} g;


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

static void cu_zero(void *p, int64_t bytes) { CUDA_CHECK(cudaMemsetAsync(p, 0, (size_t)bytes, g.compute)); }

/* ops_table.stage: into the slot's room, made (or grown) by the first call, before any timed
 * iteration; on the compute stream and waited for (the last iteration's LOAD may still read the
 * room until then; pageable host memory is copied through a driver buffer anyway). */
static const void *cu_stage(int slot, const void *host, int64_t bytes)
{
    CHECK(slot >= 0 && slot < 2);
    if (bytes > g.batch_cap[slot]) {
        if (g.batch[slot]) CUDA_CHECK(cudaFree(g.batch[slot]));
        CUDA_CHECK(cudaMalloc(&g.batch[slot], (size_t)bytes));
        g.batch_cap[slot] = bytes;
    }
    mem_cuda_upload(g.batch[slot], host, bytes);
    return g.batch[slot];
}

static void cu_copy(void *dst, const void *src, int64_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, g.compute));
}

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
    CUDA_CHECK(cudaDeviceSynchronize());
    if (g.loss_to) CUDA_CHECK(cudaMemcpy(g.loss_to, g.loss_dev, sizeof(float), cudaMemcpyDeviceToHost));
    g.loss_to = NULL;
    mem_cuda_synced();
}

/* --- descriptors -------------------------------------------------------------------------------- */

static kview kv(const ten *t) { return (kview){t->p, t->n, t->c, t->h, t->w, t->row0}; }

static float *row_ptr(const ten *t, int row) { return t->p + (int64_t)(row - t->row0) * t->w; }

static cudnnTensorDescriptor_t packed_desc(int n, int c, int h, int w)
{
    cudnnTensorDescriptor_t d;
    CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
    CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
    return d;
}

/* Zeroes rows [r0, r1) of every plane of a view. */
static void zero_rows(const ten *t, int r0, int r1)
{
    if (r1 <= r0) return;
    CUDA_CHECK(cudaMemset2DAsync(row_ptr(t, r0), (size_t)t->h * t->w * sizeof(float), 0, (size_t)(r1 - r0) * t->w * sizeof(float),
                         (size_t)t->n * t->c, g.compute));
}

/* Before a backward writes dx[j] (ops.h): the whole view is zeroed unless accumulating; kernels
 * then always add. */
/* A channel selection's map from output to input channels (net_channel_src). */
static kchan kchan_of(const ops_call *c)
{
    const net_layer *l = c->l;
    return l->kind == NET_SHUFFLE ? (kchan){0, l->u.shuffle.groups, c->in_c[0]} : (kchan){l->u.slice.start, 0, c->in_c[0]};
}

static void dx_begin(const ops_call *c, int j)
{
    const ten *dx = &c->dx[j];
    if (dx->p && !c->dx_acc[j]) zero_rows(dx, dx->row0, dx->row0 + dx->h);
}

/* --- convolution (conv_cuda.h) ------------------------------------------------------------------ */

static int64_t ws_bytes(const sched_ws_model *m, const net *n, const sched_ws_query *q)
{
    (void)m;
    return conv_cuda_ws_bytes(n, q);
}

static const sched_ws_model cuda_ws = {.bytes = ws_bytes};
const sched_ws_model *ops_cuda_ws_model(void) { return &cuda_ws; }

/* --- batch norm, fully connected ---------------------------------------------------------------- */

/* Whether a view holds exactly rows [a, b): then it is a packed tensor cuDNN takes whole. */
static bool whole(const ten *t, int a, int b) { return !t->p || (t->row0 == a && t->h == b - a); }

/* Before a kernel that can store writes dx[j]: true where it may (the step defines dx[j], whose
 * buffer holds rows [a, b) alone: a copy, not a zero fill and an add), else dx_begin's zeros
 * where the step does not accumulate, and the kernel adds. */
static bool dx_begin_store(const ops_call *c, int j)
{
    if (c->dx[j].p && !c->dx_acc[j] && whole(&c->dx[j], c->a, c->b)) return true;
    dx_begin(c, j);
    return false;
}

/* The scratch, which prepare sized for every layer of the net: never grown inside an iteration. */
static double *scratch(int64_t doubles)
{
    if (doubles > g.scratch_cap) cu_fatal("taking scratch", "a step needs more than prepare reserved", __FILE__, __LINE__);
    return g.scratch;
}

/* A batch norm's scratch over rows [a, b) of v: its 2C sums, then its passes' partials (bn_chunks.h). */
static double *bn_scratch(const ten *v, int a, int b)
{
    return scratch(2 * (int64_t)v->c + bn_part_doubles(v->c, (int64_t)v->n * (b - a) * v->w));
}

/* Batch norm. Frozen: the running statistics, our kernels. Train on a packed map (outside row
 * segments): cuDNN. Train on a band's rows (bn=per-band), which cuDNN's batch norm is not trusted to
 * take as a strided view: the band's statistics through the kernels that gather whole-map ones
 * (sums over the rows, then the mean and inverse std), into the scratch. MAP: the whole map's,
 * gathered over the bands beforehand. */
static void bn_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int C = x->c;
    if (c->bn == OPS_BN_FROZEN) k_bn_frozen_stats(g.compute, c->running, c->stats, C, l->u.bn.eps);
    if (c->bn == OPS_BN_TRAIN && !(whole(x, c->a, c->b) && whole(y, c->a, c->b))) {
        double *sums = bn_scratch(x, c->a, c->b);
        ten none = {0};
        CUDA_CHECK(cudaMemsetAsync(sums, 0, 2 * (size_t)C * sizeof(double), g.compute));
        k_bn_sums(g.compute, kv(x), kv(&none), c->a, c->b, NULL, sums, sums + 2 * C);
        k_bn_sums_end(g.compute, sums, c->stats, c->running, C, (int64_t)x->n * (c->b - c->a) * x->w, l->u.bn.eps, l->u.bn.momentum,
                      c->update_running);
    } else if (c->bn == OPS_BN_TRAIN) {
        cudnnTensorDescriptor_t xd = packed_desc(x->n, C, x->h, x->w), pd = packed_desc(1, C, 1, 1);
        CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(g.dnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd, x->p, xd, y->p, pd, c->w,
                                                           c->w + C, l->u.bn.momentum, c->update_running ? c->running : NULL,
                                                           c->update_running ? c->running + C : NULL, l->u.bn.eps, c->stats,
                                                           c->stats + C));
        cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(pd);
        return;
    }
    k_bn_map_fwd(g.compute, kv(x), kv(y), c->a, c->b, c->w, c->stats); /* with the statistics in c->stats */
}

static void bn_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int C = dy->c;
    ten none = {0};
    bool dnn = c->bn == OPS_BN_TRAIN && dx->p && whole(x, c->a, c->b) && whole(dy, c->a, c->b) && whole(dx, c->a, c->b);
    if (!dnn) dx_begin(c, 0); /* cuDNN's pass writes dx whole: it adds only where dx accumulates (beta) */
    if (c->bn == OPS_BN_FROZEN) {
        k_bn_frozen_bwd(g.compute, kv(x), kv(dx->p ? dx : &none), kv(dy), c->a, c->b, c->w, c->stats, c->dw,
                        bn_scratch(dy, c->a, c->b) + 2 * C);
        return;
    }
    if (c->bn == OPS_BN_MAP) {
        k_bn_map_bwd(g.compute, kv(x), kv(dx->p ? dx : &none), kv(dy), c->a, c->b, c->own_a, c->own_b, c->w, c->stats, c->sums,
                     c->count, c->dw, bn_scratch(dy, c->a, c->b) + 2 * C);
        return;
    }
    CHECK(c->dw != NULL);
    if (!dnn) { /* a band's own statistics */
        double *sums = bn_scratch(dy, c->a, c->b);
        CUDA_CHECK(cudaMemsetAsync(sums, 0, 2 * (size_t)C * sizeof(double), g.compute));
        k_bn_sums(g.compute, kv(x), kv(dy), c->a, c->b, c->stats, sums, sums + 2 * C);
        k_bn_map_bwd(g.compute, kv(x), kv(dx->p ? dx : &none), kv(dy), c->a, c->b, c->a, c->b, c->w, c->stats, sums,
                     (int64_t)dy->n * (c->b - c->a) * dy->w, c->dw, sums + 2 * C);
        return;
    }
    cudnnTensorDescriptor_t xd = packed_desc(x->n, C, x->h, x->w), pd = packed_desc(1, C, 1, 1);
    CUDNN_CHECK(cudnnBatchNormalizationBackward(g.dnn, CUDNN_BATCHNORM_SPATIAL, &one, c->dx_acc[0] ? &one : &zero, &one, &one, xd, x->p,
                                                xd, dy->p, xd, dx->p, pd,
                                                c->w, c->dw, c->dw + C, l->u.bn.eps, c->stats, c->stats + C));
    cudnnDestroyTensorDescriptor(xd), cudnnDestroyTensorDescriptor(pd);
}

/* Row-major (N, in) x (out, in)^T through column-major cuBLAS: y^T = W^T' x^T (see ops_cuda.h). */
static void fc_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int N = x->n, in = x->c * x->h * x->w, out = l->u.fc.c_out;
    CUBLAS_CHECK(cublasSgemm(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, out, N, in, &one, c->w, in, x->p, in, &zero, y->p, out));
    if (l->u.fc.bias) k_bias(g.compute, (kview){y->p, N, out, 1, 1, 0}, 0, 1, c->w + (int64_t)out * in);
}

static void fc_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int N = dy->n, out = l->u.fc.c_out;
    if (c->dw) {
        int in = x->c * x->h * x->w;
        CUBLAS_CHECK(cublasSgemm(g.blas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, N, &one, x->p, in, dy->p, out, &one, c->dw, in));
        if (l->u.fc.bias) k_fc_bias_grad(g.compute, dy->p, N, out, c->dw + (int64_t)out * in);
    }
    if (dx->p) {
        int in = dx->c * dx->h * dx->w;
        CUBLAS_CHECK(cublasSgemm(g.blas, CUBLAS_OP_N, CUBLAS_OP_N, in, N, out, &one, c->w, in, dy->p, out, c->dx_acc[0] ? &one : &zero, dx->p, in));
    }
}

/* --- the rest: our kernels -------------------------------------------------------------------------- */

static kwin kw(net_window w) { return (kwin){w.k, w.s, w.p, w.d}; }

static void cuda_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    CHECK(c->a >= 0 && c->a < c->b && c->b <= l->h);
    switch (l->kind) {
    case NET_CONV:
        conv_cuda_forward(c);
        if (l->u.conv.bias) k_bias(g.compute, kv(&c->y), c->a, c->b, c->w + (int64_t)l->u.conv.c_out * (c->x[0].c / l->u.conv.groups) * l->win.k * l->win_w.k);
        break;
    case NET_CONVT: {
        int64_t nw = (int64_t)c->x[0].c * (l->c / l->u.conv.groups) * l->win.k * l->win.k;
        k_convt_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->w, l->u.conv.bias ? c->w + nw : NULL, kw(net_convt_window(l)),
                    l->u.conv.groups, c->in_h[0], c->a, c->b);
        break;
    }
    case NET_BN: bn_forward(c); break;
    case NET_FC: fc_forward(c); break;
    case NET_ADD: /* left to right, as PyTorch's chain of adds */
        k_add_fwd(g.compute, kv(&c->x[0]), kv(&c->x[1]), kv(&c->y), c->a, c->b);
        for (int j = 2; j < l->n_in; j++) k_acc_rows(g.compute, kv(&c->y), kv(&c->x[j]), 0, c->a, c->b, false);
        break;
    case NET_MAXPOOL: k_maxpool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->argmax, kw(l->win), c->in_h[0], c->a, c->b); break;
    case NET_AVGPOOL: k_avgpool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), kw(l->win), c->in_h[0], c->a, c->b); break;
    case NET_GAP: k_apool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), 1); break;
    case NET_MUL: k_mul_fwd(g.compute, kv(&c->x[0]), kv(&c->x[1]), kv(&c->y)); break;
    case NET_CONCAT:
        for (int j = 0, off = 0; j < l->n_in; off += c->in_c[j], j++) k_concat_fwd(g.compute, kv(&c->x[j]), kv(&c->y), off, c->a, c->b);
        break;
    case NET_SLICE:
    case NET_SHUFFLE: k_channels(g.compute, kv(&c->x[0]), kv(&c->y), kchan_of(c), c->a, c->b, true); break;
    case NET_UPSAMPLE: k_upsample_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.up.scale, c->a, c->b); break;
    case NET_GNORM: k_gnorm_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->stats, c->w, l->u.norm.groups, l->u.norm.eps); break;
    case NET_LNORM: k_lnorm_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->stats, c->w, l->u.norm.eps, c->a, c->b); break;
    case NET_SCALE: k_scale_fwd(g.compute, kv(&c->x[0]), kv(&c->y), c->w, c->a, c->b); break;
    case NET_BILINEAR:
        k_bilinear_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.up.scale, l->u.up.align, c->in_h[0], l->h, c->a, c->b);
        break;
    case NET_APOOL: k_apool_fwd(g.compute, kv(&c->x[0]), kv(&c->y), l->u.apool.o); break;
    case NET_RELU: /* our kernel: cuDNN's activation backward refuses a band's rows */
    case NET_SIGMOID:
    case NET_RELU6:
    case NET_LEAKY:
    case NET_SILU:
    case NET_GELU:
    case NET_HSWISH:
    case NET_HSIGMOID: k_act_fwd(g.compute, (int)l->kind, ACT_SLOPE(l), kv(&c->x[0]), kv(&c->y), c->a, c->b); break;
    case NET_DROPOUT: k_dropout_fwd(g.compute, c->key, l->u.dropout.p, l->u.dropout.sample, kv(&c->x[0]), kv(&c->y), c->mask, c->a, c->b, l->h); break;
    case NET_LOSS:
        k_loss_fwd(g.compute, kv(&c->x[0]), l->c, (int64_t)l->h * l->w, c->labels, c->probs, g.loss_dev,
                   scratch(k_loss_scratch((int64_t)c->x[0].n * l->h * l->w)));
        if (c->loss) g.loss_to = c->loss; /* read back at the next sync, not here: no wait mid-iteration */
        break;
    default: CHECK(!"layer kind without a CUDA kernel");
    }
    step_checked(c, "forward");
}

/* The backward of a join (add, concat: input j's channels of dy; a tensor read at several places
 * gets one gradient, net_input_first) or a channel selection (slice, shuffle). */
static void joins_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    if (l->kind == NET_SLICE || l->kind == NET_SHUFFLE) {
        if (c->dx[0].p) dx_begin(c, 0), k_channels(g.compute, kv(&c->dx[0]), kv(&c->dy), kchan_of(c), c->a, c->b, false);
        return;
    }
    for (int j = 0, off = 0; j < l->n_in; off += l->kind == NET_CONCAT ? c->in_c[j] : 0, j++) {
        int i = net_input_first(l, j);
        const ten *dx = &c->dx[i];
        if (!dx->p) continue;
        bool store = i == j && dx_begin_store(c, j); /* a later read of the same tensor adds */
        k_acc_rows(g.compute, kv(dx), kv(&c->dy), off, c->a, c->b, store);
    }
}

static void cuda_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    CHECK(c->a >= 0 && c->a < c->b && c->b <= l->h);
    switch (l->kind) {
    case NET_CONV: conv_cuda_backward(c); break;
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
    case NET_BN: bn_backward(c); break;
    case NET_FC: fc_backward(c); break;
    case NET_ADD:
    case NET_CONCAT:
    case NET_SLICE:
    case NET_SHUFFLE: joins_backward(c); break;
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
        k_gnorm_bwd(g.compute, kv(&c->x[0]), kv(&c->dy), kv(&c->dx[0]), c->stats, c->w, c->dw, l->u.norm.groups,
                    scratch(2 * (int64_t)c->dy.n * l->u.norm.groups));
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
    case NET_RELU: /* our kernel: cuDNN's activation backward refuses a band's rows */
    case NET_SIGMOID:
    case NET_RELU6:
    case NET_LEAKY:
    case NET_SILU:
    case NET_GELU:
    case NET_HSWISH:
    case NET_HSIGMOID: {
        /* a torch plan's relu6 keeps its input instead of its output (sim/lower/lower.c) */
        const ten *dx = &c->dx[0], *m = kind_of(l)->keeps_y && c->y.p ? &c->y : &c->x[0];
        if (!dx->p) break;
        bool store = dx->p == c->dy.p || dx_begin_store(c, 0); /* dx over dy: rows [a, b) only (ops.h) */
        k_act_bwd(g.compute, (int)l->kind, ACT_SLOPE(l), kv(m), kv(&c->dy), kv(dx), c->a, c->b, store);
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
        k_bn_sums(g.compute, kv(&c->x[0]), kv(what == OPS_STATS_DY ? &c->dy : &none), c->a, c->b, c->stats, c->sums,
                  bn_scratch(&c->x[0], c->a, c->b) + 2 * (int64_t)l->c);
    step_checked(c, "statistics");
}

/* --- the device itself (ops_table.device_mark, device_report) ----------------------------------- */

/* CUDNN_VERSION and CUBLAS_VERSION are both major * 10000 + minor * 100 + patch. */
static void cu_device_report(ops_device *d, ops_device_layer *layers, int n_layers)
{
    int64_t beside = (int64_t)sizeof(float) + g.scratch_cap * (int64_t)sizeof(double) + codec_cuda_bytes() + (g.blas_ws ? BLAS_WS_BYTES : 0) +
                     g.batch_cap[0] + g.batch_cap[1];
    watch_report(d, layers, n_layers, beside);
    conv_cuda_policy(d->conv_policy, sizeof d->conv_policy);
}

/* --- before a run (ops_table.prepare) ------------------------------------------------------------ */

/* Refuses what cuDNN's descriptors cannot hold (a convolution step dnn.h cannot plan, a fully
 * connected layer's input past an int), then sizes the scratch, the codec offsets and the pinned
 * arena for this schedule. Between runs: nothing is in flight. */
static int cu_prepare(const net *n, const sched *s, err *e)
{
    int64_t doubles = 1;
    for (int L = 0; L < n->n; L++) {
        const net_layer *l = &n->layers[L];
        int64_t need = 0;
        if (l->kind == NET_LOSS) need = k_loss_scratch((int64_t)s->batch * l->h * l->w);
        if (l->kind == NET_GNORM) need = 2 * (int64_t)s->batch * l->u.norm.groups;
        if (l->kind == NET_BN) need = 2 * (int64_t)l->c + bn_part_doubles(l->c, (int64_t)s->batch * l->h * l->w);
        if (l->kind == NET_FC && (int64_t)n->layers[l->in[0]].c * n->layers[l->in[0]].h * n->layers[l->in[0]].w > INT32_MAX)
            return err_set(e, "layer '%s': a fully connected input of more than 2^31 values is past cuBLAS's int sizes", l->name);
        if (need > doubles) doubles = need;
    }
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        if ((t->op != SCHED_FWD && t->op != SCHED_BWD) || n->layers[t->layer].kind != NET_CONV) continue;
        dnn_step d = dnn_step_of(n, s, t);
        dnn_plan p;
        char why[300];
        if (dnn_conv_plan(&d, dnn_pack_policy(), &p, why, sizeof why)) return err_set(e, "%s", why);
        dnn_plan_free(&p);
    }
    if (doubles > g.scratch_cap) {
        if (g.scratch) CUDA_CHECK(cudaFree(g.scratch));
        CUDA_CHECK(cudaMalloc((void **)&g.scratch, (size_t)doubles * sizeof(double)));
        g.scratch_cap = doubles;
    }
    codec_cuda_reserve(s->batch);
    return mem_cuda_prepare(s, e);
}

static const ops_table cuda_table = {.backend = "cuda", .forward = cuda_forward, .backward = cuda_backward, .stats = cuda_stats,
                                     .mem = &mem_cuda, .ws = &cuda_ws,
                                     .upload = mem_cuda_upload, .download = mem_cuda_download,
                                     .stage = cu_stage, .copy = cu_copy, .zero = cu_zero, .copy2d = cu_copy2d,
                                     .sgd = cu_sgd, .adam = cu_adam, .sync = cu_sync, .tag = watch_tag,
                                     .encode = codec_cuda_encode, .decode = codec_cuda_decode, .encodes = codec_cuda_encodes,
                                     .prepare = cu_prepare, .device_mark = watch_mark, .device_report = cu_device_report,
                                     .algos_made = conv_cuda_made, .algos_take = conv_cuda_take};

const ops_table *ops_cuda_open(bool profile, err *e)
{
    if (g.open) return &cuda_table;
    int n = 0;
    cudaError_t r = cudaGetDeviceCount(&n); /* initializes the driver, creates no context */
    if (r != cudaSuccess || n == 0) {
        err_set(e, "no CUDA device: %s", r != cudaSuccess ? cudaGetErrorString(r) : "none found");
        return NULL;
    }
    if (watch_open(profile, e)) return NULL; /* before the context: its allocations are recorded */
    CUDA_CHECK(cudaSetDevice(0));
    /* a GPU this build cannot serve is said so before anything runs, not at a kernel's first launch */
    struct cudaDeviceProp prop;
    int pools = 0;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    CUDA_CHECK(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, 0));
    cudaError_t image = k_image();
    if (image != cudaSuccess) {
        err_set(e, "this build has no kernels for the %s (compute capability %d.%d): %s; configure with "
                "-DLRCNN_CUDA_ARCHITECTURES=%d%d (docs/gpu.md)", prop.name, prop.major, prop.minor, cudaGetErrorString(image), prop.major,
                prop.minor);
        return NULL;
    }
    if (!pools) {
        err_set(e, "the %s (compute capability %d.%d) has no stream-ordered memory pools (cudaMallocAsync), which the CUDA "
                "backend allocates from", prop.name, prop.major, prop.minor);
        return NULL;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&g.copy, cudaStreamNonBlocking));
    mem_cuda_init(g.compute, g.copy);
    codec_cuda_init(g.compute);
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    uint64_t keep = UINT64_MAX; /* freed blocks stay reserved: reuse without cudaMalloc */
    CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CUDNN_CHECK(cudnnCreate(&g.dnn));
    CUDNN_CHECK(cudnnSetStream(g.dnn, g.compute));
    CUBLAS_CHECK(cublasCreate(&g.blas));
    CUBLAS_CHECK(cublasSetStream(g.blas, g.compute));
    CUBLAS_CHECK(cublasSetMathMode(g.blas, CUBLAS_DEFAULT_MATH));
    if (watch_ready(g.blas, e)) return NULL; /* the context's bytes, before our first */
    CUDA_CHECK(cudaMalloc((void **)&g.loss_dev, sizeof(float)));
    CUDA_CHECK(cudaMalloc(&g.blas_ws, BLAS_WS_BYTES)); /* cuBLAS's own, counted apart (ops_device.outside_pool) */
    CUBLAS_CHECK(cublasSetWorkspace(g.blas, g.blas_ws, BLAS_WS_BYTES));
    const char *det = getenv("LRCNN_CUDNN_DETERMINISTIC"), *mb = getenv("LRCNN_CUDNN_WS_MB"), *find = getenv("LRCNN_CUDNN_FIND");
    ops_device d = {0};
    char device[ALGO_TEXT];
    watch_describe(&d);
    snprintf(device, sizeof device, "%s (compute capability %s), cuDNN %s", d.name, d.capability, d.dnn);
    conv_cuda_init(g.dnn, g.compute, (int64_t)(mb && atol(mb) > 0 ? atol(mb) : 256) << 20, det && *det == '1', find && *find == '1',
                   device);
    g.open = true;
    return &cuda_table;
}

void ops_cuda_close(void)
{
    if (!g.open) return;
    CUDA_CHECK(cudaDeviceSynchronize());
    conv_cuda_close(), codec_cuda_close(), mem_cuda_close();
    CUDNN_CHECK(cudnnDestroy(g.dnn));
    CUBLAS_CHECK(cublasDestroy(g.blas));
    CUDA_CHECK(cudaFree(g.loss_dev));
    CUDA_CHECK(cudaFree(g.blas_ws));
    if (g.scratch) CUDA_CHECK(cudaFree(g.scratch));
    for (int k = 0; k < 2; k++)
        if (g.batch[k]) CUDA_CHECK(cudaFree(g.batch[k]));
    CUDA_CHECK(cudaStreamDestroy(g.compute));
    CUDA_CHECK(cudaStreamDestroy(g.copy));
    cudaMemPool_t pool; /* the blocks the pool kept (release threshold: never) go back */
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    watch_close();
    memset(&g, 0, sizeof g);
}

void ops_cuda_describe(char *out, size_t len)
{
    ops_device d = {0};
    watch_describe(&d);
    snprintf(out, len, "%s (compute capability %s), driver %s, CUDA runtime %s, cuDNN %s, cuBLAS %s", d.name, d.capability,
             d.driver, d.runtime, d.dnn, d.blas);
}
