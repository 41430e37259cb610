/* ops_cpu: the CPU backend's table of layer kernels (ops.h), and the optimizers.
 *
 * Conventions: tensors are NCHW fp32 views of a band of rows (ten.row0, ten.h); a kernel on
 * output rows [a, b) reads input row i at i - x.row0 and CHECKs, once per call, that every input
 * row it reads outside the padding lies in the view. Accumulation rule: weight gradients are +=
 * (bands add up); an input gradient is zeroed over its whole view first unless dx_acc, then added
 * into, so the first writer defines it (except an in-place relu backward, which rewrites only
 * its rows [a, b): see ops.h). Plain fp32 loops in a fixed order, no -ffast-math;
 * reductions over a whole batch (bn statistics, global pools, softmax) accumulate in double so
 * that their error does not grow with the map size. Convolution and fc are in conv_cpu.c, batch
 * normalization in bn_cpu.c.
 * Threads: loops over independent (image, channel) planes or channels run under OpenMP with a
 * static schedule, each element computed by one thread in a fixed order (deterministic); OpenBLAS
 * is the OpenMP build, so both share one pool (CMakeLists.txt says why).
 * Not done here: allocation (every buffer, workspace included, comes from the caller), and layers
 * over bands for kinds that need whole maps (fc, gap, apool, loss CHECK that they get them). */
#include <math.h>
#include <string.h>

#include "engine/cpu/ops_cpu.h"
#include "engine/act.h"
#include "sim/net/kind.h"

/* --- views ------------------------------------------------------------------------------------ */

void cpu_check_rows(const ten *t, int lo, int hi, int full_h)
{
    if (lo < 0) lo = 0;
    if (hi > full_h) hi = full_h;
    if (lo >= hi) return;
    CHECK(t->p != NULL);
    CHECK(lo >= t->row0 && hi <= t->row0 + t->h);
}

void cpu_dx_begin(const ops_call *c, int j)
{
    const ten *dx = &c->dx[j];
    if (dx->p && !c->dx_acc[j]) memset(dx->p, 0, (size_t)dx->n * dx->c * dx->h * dx->w * sizeof(float));
}

bool cpu_dx_store(const ops_call *c, int j)
{
    const ten *dx = &c->dx[j];
    if (!c->dx_acc[j] && dx->row0 == c->a && dx->h == c->b - c->a) return true;
    cpu_dx_begin(c, j);
    return false;
}


/* Full maps only (fc, gap, apool, loss): the view holds every row. */
void cpu_check_full(const ten *t, int full_h)
{
    CHECK(t->p != NULL && t->row0 == 0 && t->h == full_h);
}

/* --- elementwise backward ------------------------------------------------------------------------ */

bool cpu_pointwise_dx_begin(const ops_call *c, const ten *m, int m_h)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    cpu_check_rows(m, c->a, c->b, m_h);
    cpu_check_rows(dy, c->a, c->b, c->l->h);
    cpu_check_rows(dx, c->a, c->b, c->in_h[0]);
    if (dx->p != dy->p) return cpu_dx_store(c, 0);
    CHECK(!c->dx_acc[0] && dx->row0 == dy->row0 && dx->h == dy->h);
    return true;
}

/* --- relu ------------------------------------------------------------------------------------- */

/* y = max(x, 0); y may be x itself (in place). NaN propagates, as in PyTorch. */
static void relu_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y; /* (N, C, H, W) both */
    cpu_check_rows(x, c->a, c->b, c->in_h[0]);
    cpu_check_rows(y, c->a, c->b, c->l->h);
    if (x->p == y->p) CHECK(x->row0 == y->row0 && x->h == y->h);
    int64_t len = cpu_plane_len(x, c->a, c->b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * len))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++) {
            const float *xr = cpu_row(x, n, ch, c->a);
            float *yr = cpu_row(y, n, ch, c->a);
            for (int64_t i = 0; i < len; i++) yr[i] = xr[i] < 0.0f ? 0.0f : xr[i];
        }
}

/* dx = dy where y > 0 (y > 0 exactly where x > 0, and y is what an in-place relu keeps).
 * In place (dx is dy): rows [a, b) are rewritten element by element and the other rows are left
 * alone (ops.h: the buffer may be a whole map's gradient whose other rows belong to other bands);
 * accumulating into the buffer being read is impossible and CHECKed against. */
static void relu_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    const ten *m = c->y.p ? &c->y : &c->x[0]; /* the mask's source */
    if (!dx->p) return;
    int a = c->a, b = c->b;
    bool store = cpu_pointwise_dx_begin(c, m, c->l->h);
    int64_t len = cpu_plane_len(dy, a, b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * len))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++) {
            const float *mr = cpu_row(m, n, ch, a), *dyr = cpu_row(dy, n, ch, a);
            float *dxr = cpu_row(dx, n, ch, a);
            /* dy read unconditionally, so the select vectorizes (a branch per element mispredicts
             * half the time on random signs: measured 3x slower) */
            for (int64_t i = 0; i < len; i++) {
                float g = dyr[i];
                g = mr[i] > 0.0f ? g : 0.0f;
                dxr[i] = store ? g : dxr[i] + g;
            }
        }
}

/* --- product (mul) --------------------------------------------------------------------------- */

/* Value i of an (n, c, plane) map, or of a per-channel (n, c, 1) one (a broadcast channel scale). */
static float mul_at(const ten *t, int n, int ch, int64_t i) { return t->h * t->w == 1 ? cpu_row(t, n, ch, 0)[0] : cpu_row(t, n, ch, 0)[i]; }

/* y = a * b, whole maps; a (C, 1, 1) input scales each channel of the other. */
static void mul_forward(const ops_call *c)
{
    const ten *a = &c->x[0], *b = &c->x[1], *y = &c->y;
    cpu_check_full(a, c->in_h[0]), cpu_check_full(b, c->in_h[1]), cpu_check_full(y, c->l->h);
    int64_t plane = (int64_t)y->h * y->w;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * plane))
    for (int n = 0; n < y->n; n++)
        for (int ch = 0; ch < y->c; ch++) {
            float *yr = cpu_row(y, n, ch, 0);
            for (int64_t i = 0; i < plane; i++) yr[i] = mul_at(a, n, ch, i) * mul_at(b, n, ch, i);
        }
}

/* da += dy * b and db += dy * a, summed over the plane for a per-channel input; a product of a
 * tensor with itself (no dx[1]) takes both into dx[0]. */
static void mul_backward(const ops_call *c)
{
    const ten *dy = &c->dy;
    bool twice = ops_reads_twice(c);
    cpu_check_full(dy, c->l->h);
    int64_t plane = (int64_t)dy->h * dy->w;
    for (int j = 0; j < 2; j++) {
        const ten *dx = &c->dx[j], *x = &c->x[j], *o = &c->x[1 - j];
        if (!dx->p) continue;
        cpu_dx_begin(c, j);
        cpu_check_full(dx, c->in_h[j]), cpu_check_full(o, c->in_h[1 - j]);
        bool scale = dx->h * dx->w == 1 && plane > 1;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * plane))
        for (int n = 0; n < dy->n; n++)
            for (int ch = 0; ch < dy->c; ch++) {
                const float *g = cpu_row(dy, n, ch, 0);
                float *d = cpu_row(dx, n, ch, 0);
                if (scale) {
                    double s = 0.0;
                    for (int64_t i = 0; i < plane; i++) s += (double)g[i] * mul_at(o, n, ch, i);
                    d[0] += (float)s;
                    continue;
                }
                for (int64_t i = 0; i < plane; i++) d[i] += g[i] * mul_at(o, n, ch, i);
                if (j == 0 && twice)
                    for (int64_t i = 0; i < plane; i++) d[i] += g[i] * mul_at(x, n, ch, i);
            }
    }
}

/* --- scale: y = x * w[c] ---------------------------------------------------------------------------- */

static void scale_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    cpu_check_rows(x, c->a, c->b, c->in_h[0]);
    cpu_check_rows(y, c->a, c->b, c->l->h);
    int64_t len = cpu_plane_len(y, c->a, c->b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)y->n * y->c * len))
    for (int n = 0; n < y->n; n++)
        for (int ch = 0; ch < y->c; ch++) {
            const float *xr = cpu_row(x, n, ch, c->a);
            float *yr = cpu_row(y, n, ch, c->a), s = c->w[ch];
            for (int64_t i = 0; i < len; i++) yr[i] = xr[i] * s;
        }
}

/* dx = dy * w[c]; dw[c] += the sum of dy * x over the images and rows [a, b), in order. */
static void scale_backward(const ops_call *c)
{
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int64_t len = cpu_plane_len(dy, c->a, c->b);
    cpu_check_rows(dy, c->a, c->b, c->l->h);
    if (c->dw) {
        cpu_check_rows(x, c->a, c->b, c->in_h[0]);
        for (int ch = 0; ch < dy->c; ch++) {
            double s = 0.0;
            for (int n = 0; n < dy->n; n++) {
                const float *g = cpu_row(dy, n, ch, c->a), *xr = cpu_row(x, n, ch, c->a);
                for (int64_t i = 0; i < len; i++) s += (double)g[i] * xr[i];
            }
            c->dw[ch] += (float)s;
        }
    }
    if (!dx->p) return;
    bool store = cpu_dx_store(c, 0);
    cpu_check_rows(dx, c->a, c->b, c->in_h[0]);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * len))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++) {
            const float *g = cpu_row(dy, n, ch, c->a);
            float *d = cpu_row(dx, n, ch, c->a), s = c->w[ch];
            for (int64_t i = 0; i < len; i++) d[i] = store ? g[i] * s : d[i] + g[i] * s;
        }
}

/* --- loss ------------------------------------------------------------------------------------- */

/* The loss's logits: K classes at each of P places per image, class k of place q of image n at
 * (n * K + k) * P + q — the C*H*W values as K classes at P = 1 place, or per pixel the C channels
 * at each of the H*W places (sim/net/kind.c: the loss layer is (K, 1, 1) or (C, H, W)). */
static void loss_shape(const ops_call *c, int64_t *K, int64_t *P)
{
    *K = c->l->c, *P = (int64_t)c->l->h * c->l->w;
}

/* probs = softmax(logits) over the K classes of each place; loss = mean over the batch's places
 * of -log probs[label], computed as logsumexp - logit[label] (no log of a rounded probability). */
static void loss_forward(const ops_call *c)
{
    const ten *x = &c->x[0];
    int64_t K, P;
    loss_shape(c, &K, &P);
    double total = 0.0;
    cpu_check_full(x, c->in_h[0]);
    CHECK(c->probs != NULL && c->labels != NULL && K * P == (int64_t)x->c * x->h * x->w);
    for (int n = 0; n < x->n; n++)
        for (int64_t q = 0; q < P; q++) {
            const float *z = x->p + n * K * P + q;
            float *p = c->probs + n * K * P + q;
            int64_t label = c->labels[n * P + q];
            CHECK(label >= 0 && label < K);
            float zmax = z[0];
            for (int64_t k = 1; k < K; k++) zmax = z[k * P] > zmax ? z[k * P] : zmax;
            double s = 0.0;
            for (int64_t k = 0; k < K; k++) s += exp((double)z[k * P] - zmax);
            for (int64_t k = 0; k < K; k++) p[k * P] = (float)(exp((double)z[k * P] - zmax) / s);
            total += log(s) + zmax - z[label * P];
        }
    if (c->loss) *c->loss = (float)(total / ((double)x->n * P));
}

/* dlogits = (probs - onehot(label)) / (N * P), times the upstream gradient if one is given (the
 * loss is the last layer: dy.p is NULL and stands for 1). */
static void loss_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0];
    if (!dx->p) return;
    int64_t K, P;
    loss_shape(c, &K, &P);
    float g = (c->dy.p ? c->dy.p[0] : 1.0f) / (float)(dx->n * P);
    cpu_check_full(dx, c->in_h[0]);
    CHECK(c->probs != NULL && c->labels != NULL);
    cpu_dx_begin(c, 0);
    for (int n = 0; n < dx->n; n++)
        for (int64_t k = 0; k < K; k++) {
            const float *p = c->probs + (n * K + k) * P;
            float *d = dx->p + (n * K + k) * P;
            const int64_t *label = c->labels + n * P;
            for (int64_t q = 0; q < P; q++) d[q] += (p[q] - (k == label[q] ? 1.0f : 0.0f)) * g;
        }
}

/* --- dropout (engine/act.h: the mask) ------------------------------------------------------------ */

/* y = x * mask * scale on rows [a, b), the mask drawn from c->key and kept in c->mask when given:
 * a byte a value of the rows, or (sample) a byte an image, drawn at the image's index. */
static void dropout_forward(const ops_call *c)
{
    const ten *x = &c->x[0], *y = &c->y;
    cpu_check_rows(x, c->a, c->b, c->in_h[0]);
    cpu_check_rows(y, c->a, c->b, c->l->h);
    int a = c->a, b = c->b, H = c->l->h, W = x->w;
    float p = c->l->u.dropout.p, scale = drop_scale(p);
    bool sample = c->l->u.dropout.sample;
    if (sample && c->mask)
        for (int n = 0; n < x->n; n++) c->mask[n] = (uint8_t)drop_keep(c->key, n, p);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)x->n * x->c * cpu_plane_len(x, a, b)))
    for (int n = 0; n < x->n; n++)
        for (int ch = 0; ch < x->c; ch++) {
            const float *xr = cpu_row(x, n, ch, a);
            float *yr = cpu_row(y, n, ch, a);
            uint8_t *mr = c->mask && !sample ? c->mask + ((int64_t)n * x->c + ch) * (b - a) * W : NULL;
            int whole = sample ? drop_keep(c->key, n, p) : 0;
            for (int r = a; r < b; r++)
                for (int col = 0; col < W; col++) {
                    int64_t i = (((int64_t)n * x->c + ch) * H + r) * W + col, k = (int64_t)(r - a) * W + col;
                    int keep = sample ? whole : drop_keep(c->key, i, p);
                    yr[k] = xr[k] * (float)keep * scale;
                    if (mr) mr[k] = (uint8_t)keep;
                }
        }
}

/* dx (+)= dy * mask * scale, with the mask the forward kept. */
static void dropout_backward(const ops_call *c)
{
    const ten *dx = &c->dx[0], *dy = &c->dy;
    if (!dx->p) return;
    int a = c->a, b = c->b, W = dy->w;
    CHECK(c->mask != NULL);
    cpu_check_rows(dy, a, b, c->l->h);
    cpu_check_rows(dx, a, b, c->in_h[0]);
    bool store = cpu_dx_store(c, 0);
    float scale = drop_scale(c->l->u.dropout.p);
    int64_t len = cpu_plane_len(dy, a, b);
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dy->n * dy->c * len))
    for (int n = 0; n < dy->n; n++)
        for (int ch = 0; ch < dy->c; ch++) {
            const float *dyr = cpu_row(dy, n, ch, a);
            float *dxr = cpu_row(dx, n, ch, a);
            bool sample = c->l->u.dropout.sample;
            const uint8_t *mr = sample ? c->mask + n : c->mask + ((int64_t)n * dy->c + ch) * (b - a) * W;
            for (int64_t k = 0; k < len; k++) {
                float g = dyr[k] * (float)mr[sample ? 0 : k] * scale;
                dxr[k] = store ? g : dxr[k] + g;
            }
        }
}

/* --- the table -------------------------------------------------------------------------------- */

typedef void (*kernel)(const ops_call *c);

/* Forward and backward kernel of each layer kind (the input has neither), and the statistics
 * kernel of the kinds that normalize with whole-map statistics (sim/net/kind.h: map_stats). */
static const struct {
    kernel forward, backward;
    void (*stats)(const ops_call *c, ops_stats what);
} kernels[NET_NKIND] = {
    [NET_CONV] = {conv_cpu_forward, conv_cpu_backward},  [NET_CONVT] = {convt_cpu_forward, convt_cpu_backward},  [NET_RELU] = {relu_forward, relu_backward},
    [NET_MAXPOOL] = {maxpool_cpu_forward, maxpool_cpu_backward}, [NET_AVGPOOL] = {avgpool_cpu_forward, avgpool_cpu_backward},
    [NET_BN] = {bn_cpu_forward, bn_cpu_backward, bn_cpu_stats},  [NET_FC] = {fc_cpu_forward, fc_cpu_backward},
    [NET_ADD] = {add_cpu_forward, add_cpu_backward},             [NET_GAP] = {gap_cpu_forward, gap_cpu_backward},
    [NET_APOOL] = {apool_cpu_forward, apool_cpu_backward},       [NET_LOSS] = {loss_forward, loss_backward},
    [NET_SIGMOID] = {act_cpu_forward, act_cpu_backward},         [NET_RELU6] = {act_cpu_forward, act_cpu_backward},
    [NET_LEAKY] = {act_cpu_forward, act_cpu_backward},           [NET_SILU] = {act_cpu_forward, act_cpu_backward},
    [NET_GELU] = {act_cpu_forward, act_cpu_backward},            [NET_HSWISH] = {act_cpu_forward, act_cpu_backward},
    [NET_DROPOUT] = {dropout_forward, dropout_backward}, [NET_UPSAMPLE] = {upsample_cpu_forward, upsample_cpu_backward},
    [NET_BILINEAR] = {bilinear_cpu_forward, bilinear_cpu_backward}, [NET_GNORM] = {gnorm_cpu_forward, gnorm_cpu_backward},
    [NET_LNORM] = {lnorm_cpu_forward, lnorm_cpu_backward}, [NET_SCALE] = {scale_forward, scale_backward},
    [NET_CONCAT] = {concat_cpu_forward, concat_cpu_backward}, [NET_HSIGMOID] = {act_cpu_forward, act_cpu_backward},
    [NET_MUL] = {mul_forward, mul_backward}, [NET_SLICE] = {channels_cpu_forward, channels_cpu_backward},
    [NET_SHUFFLE] = {channels_cpu_forward, channels_cpu_backward},
};

static void cpu_forward(const ops_call *c)
{
    CHECK(c->a >= 0 && c->a < c->b && c->b <= c->l->h && kernels[c->l->kind].forward);
    kernels[c->l->kind].forward(c);
}

static void cpu_backward(const ops_call *c)
{
    CHECK(c->a >= 0 && c->a < c->b && c->b <= c->l->h && kernels[c->l->kind].backward);
    kernels[c->l->kind].backward(c);
}

static void cpu_copy(void *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }
static void cpu_zero(void *p, int64_t bytes) { memset(p, 0, (size_t)bytes); }
static void cpu_sync(void) {}

static void cpu_copy2d(float *d, int64_t d_stride, const float *s, int64_t s_stride, int64_t planes, int64_t len, bool acc)
{
    for (int64_t i = 0; i < planes; i++) {
        float *dp = d + i * d_stride;
        const float *sp = s + i * s_stride;
        if (acc)
            for (int64_t j = 0; j < len; j++) dp[j] += sp[j];
        else
            memcpy(dp, sp, (size_t)len * sizeof(float));
    }
}

static double cpu_sumsq(const float *p, int64_t stride, int64_t planes, int64_t len)
{
    double sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static) if (cpu_parallel(planes * len))
    for (int64_t i = 0; i < planes; i++)
        for (int64_t j = 0; j < len; j++) sum += (double)p[i * stride + j] * p[i * stride + j];
    return sum;
}

static void cpu_stats(const ops_call *c, ops_stats what)
{
    CHECK(kernels[c->l->kind].stats);
    kernels[c->l->kind].stats(c, what);
}

const ops_table ops_cpu = {.backend = "cpu", .forward = cpu_forward, .backward = cpu_backward, .stats = cpu_stats, .mem = &alloc_mem_host,
                           .ws = &sched_ws_cpu,
                           .upload = cpu_copy, .download = cpu_copy, .zero = cpu_zero, .copy2d = cpu_copy2d,
                           .sgd = ops_sgd_step, .adam = ops_adam_step, .sync = cpu_sync, .encode = cpu_codec_encode,
                           .decode = cpu_codec_decode, .sumsq = cpu_sumsq};

/* --- optimizers ------------------------------------------------------------------------------- */

/* torch.optim.SGD (dampening 0, no nesterov): buf = momentum * buf + g; p -= lr * buf. With the
 * buffer zero at step 1 this is PyTorch's buf = g. */
void ops_sgd_step(float *p, const float *g, float *state, int64_t n, double lr, double momentum)
{
    float flr = (float)lr, fm = (float)momentum; /* PyTorch casts scalars to the tensor's fp32 */
#pragma omp parallel for schedule(static) if (cpu_parallel(n))
    for (int64_t i = 0; i < n; i++) {
        state[i] = fm * state[i] + g[i];
        p[i] -= flr * state[i];
    }
}

/* torch.optim.Adam (single-tensor path): m = lerp(m, g, 1 - beta1); v = beta2 * v + (1 - beta2) g^2;
 * p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps), with bc = 1 - beta^t in double as PyTorch. */
void ops_adam_step(float *p, const float *g, float *state, int64_t n, double lr, double beta1, double beta2, double eps,
                   int t)
{
    float *m = state, *v = state + n;
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    float step = (float)(lr / bc1), bc2_sqrt = (float)sqrt(bc2), feps = (float)eps;
    float omb1 = (float)(1.0 - beta1), b2 = (float)beta2, omb2 = (float)(1.0 - beta2);
#pragma omp parallel for schedule(static) if (cpu_parallel(n))
    for (int64_t i = 0; i < n; i++) {
        m[i] += omb1 * (g[i] - m[i]);
        v[i] = b2 * v[i] + omb2 * g[i] * g[i];
        p[i] -= step * m[i] / (sqrtf(v[i]) / bc2_sqrt + feps);
    }
}
