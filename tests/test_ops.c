/* test_ops: the CPU kernels (engine/cpu) checked three ways.
 *
 *  1. Finite differences, per layer kind: for J = sum(y * r) with random r (the loss layer: J =
 *     the loss), central differences of J over every element of every input and parameter
 *     against backward with dy = r. Also: forward and backward run twice give bitwise the same
 *     results (determinism), and a backward overwrites a dx view full of garbage (!dx_acc).
 *  2. Bands (ops_band.c), for the kinds that run on rows (conv, pools, bn frozen, relu, add): output rows
 *     [a, b) computed from a view holding only the input rows they need equal the whole-map
 *     rows, rows of y outside [a, b) are untouched, and backward over a partition of the output
 *     rows sums to the whole-map dx and dw, both accumulating into one whole-map dx (dx_acc
 *     after the first band) and writing band views (whose rows the band does not reach must
 *     come back zero). The relu runs in place too (its backward leaves rows outside [a, b) alone).
 *  2b. Convolutions large enough that conv_cpu runs them a stretch of output rows at a time (and
 *     a band whose edges fall inside stretches) against a direct double-precision convolution:
 *     y, dx, dw and the bias gradient; and that each runs by the path it should (im2col, shifted
 *     products or depthwise loops; its data gradient by col2im or flipped).
 *  3. Batch-norm statistics (train: batch ones and the running update; frozen: running ones)
 *     against a double reference, and two SGD-momentum and two Adam steps against torch.optim
 *     (PyTorch 1.13).
 * Prints one line per tensor compared (max abs, max rel difference) and the first mismatches;
 * returns 1 if anything failed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas_cpu.h"
#include "engine/cpu/ops_cpu.h"
#include "engine/threads.h"
#include "engine/act.h"
#include "sim/net/kind.h"
#include "sim/net/load.h"
#include "tests/ops_case.h"

static void fd_case(const char *name, const char *text, ops_bn bn, int N)
{
    lcase k;
    char what[128];
    oc_init(&k, text, N, bn);
    oc_analytic(&k);
    /* determinism: the same call again gives the same bits */
    int64_t ny = oc_ten_len(&k.y), nx0 = oc_ten_len(&k.x[0]);
    float *y1 = malloc((size_t)ny * sizeof(float)), *dx1 = malloc((size_t)nx0 * sizeof(float));
    float *dw1 = malloc((size_t)(k.nw + 1) * sizeof(float));
    memcpy(y1, k.y.p, (size_t)ny * sizeof(float));
    memcpy(dx1, k.dx[0].p, (size_t)nx0 * sizeof(float));
    memcpy(dw1, k.dw, (size_t)k.nw * sizeof(float));
    oc_analytic(&k);
    snprintf(what, sizeof what, "%s: deterministic y, dx, dw", name);
    oc_expect(oc_same_bits(y1, k.y.p, ny) && oc_same_bits(dx1, k.dx[0].p, nx0) && oc_same_bits(dw1, k.dw, k.nw), what);
    free(y1), free(dx1), free(dw1);

    for (int j = 0; j < k.n_in; j++) {
        if (!k.dx[j].p) continue;
        int64_t n = oc_ten_len(&k.x[j]);
        float *fd = malloc((size_t)n * sizeof(float));
        oc_fd_grad(&k, k.x[j].p, n, fd);
        snprintf(what, sizeof what, "fd %s dx[%d]", name, j);
        oc_compare(&oc_w_fd, what, k.dx[j].p, fd, n, FD_ATOL, FD_RTOL);
        free(fd);
    }
    if (k.nw) {
        float *fd = malloc((size_t)k.nw * sizeof(float));
        oc_fd_grad(&k, k.w, k.nw, fd);
        snprintf(what, sizeof what, "fd %s dw (weights, then bias)", name);
        oc_compare(&oc_w_fd, what, k.dw, fd, k.nw, FD_ATOL, FD_RTOL);
        free(fd);
    }
    oc_free(&k);
}

/* --- relu in place ---------------------------------------------------------------------------- */

/* y, dx, dw (bias last) of conv layer k->l by direct loops in double, dy = k->r; output channel co
 * reads the input channels of its group, cg of them. */
static void conv_reference(const lcase *k, float *y, float *dx, float *dw)
{
    const net_layer *l = k->l;
    const ten *x = &k->x[0];
    int co_n = l->u.conv.c_out, ci_n = x->c, kh = l->win.k, kw = l->win_w.k, s = l->win.s, p = l->win.p, d = l->win.d;
    int cg = ci_n / l->u.conv.groups, H = l->h, W = l->w, K = cg * kh * kw;
    int64_t nx = oc_ten_len(x);
    double *dxd = calloc((size_t)nx, sizeof(double)), *dwd = calloc((size_t)co_n * (K + 1), sizeof(double));
    for (int n = 0; n < x->n; n++)
        for (int co = 0; co < co_n; co++)
            for (int oh = 0; oh < H; oh++)
                for (int ow = 0; ow < W; ow++) {
                    int64_t at = (((int64_t)n * co_n + co) * H + oh) * W + ow;
                    double acc = l->u.conv.bias ? k->w[(int64_t)co_n * K + co] : 0.0, g = k->r[at];
                    for (int ci = co / (co_n / l->u.conv.groups) * cg, c0 = ci; ci < c0 + cg; ci++)
                        for (int ki = 0; ki < kh; ki++)
                            for (int kj = 0; kj < kw; kj++) {
                                int ih = oh * s - p + d * ki, iw = ow * l->win_w.s - l->win_w.p + l->win_w.d * kj;
                                if (ih < 0 || ih >= x->h || iw < 0 || iw >= x->w) continue;
                                int64_t xi = (((int64_t)n * ci_n + ci) * x->h + ih) * x->w + iw, wi = ((int64_t)co * cg + ci - c0) * kh * kw + ki * kw + kj;
                                acc += (double)k->w[wi] * x->p[xi];
                                dxd[xi] += (double)k->w[wi] * g;
                                dwd[wi] += g * x->p[xi];
                            }
                    y[at] = (float)acc;
                    if (l->u.conv.bias) dwd[(int64_t)co_n * K + co] += g;
                }
    for (int64_t i = 0; i < nx; i++) dx[i] = (float)dxd[i];
    for (int64_t i = 0; i < k->nw; i++) dw[i] = (float)dwd[i];
    free(dxd), free(dwd);
}

/* Convolutions on larger maps (products in several stretches of rows; wide rows): whole maps
 * against the direct reference, then bands against the whole map (band edges inside stretches);
 * and that the layer takes the path `via` names: im2col's products, the forward's shifted products
 * (engine/cpu/conv_shift.c) or the depthwise loops (engine/cpu/conv_dw.c), and its data gradient
 * by col2im or, `flipped`, as a forward convolution of dy (conv_cpu.c). */
typedef enum { VIA_IM2COL, VIA_SHIFT, VIA_DW } conv_via;

static void stretch_case(const char *name, const char *text, conv_via via, bool flipped, int n, int G)
{
    static const char *const names[] = {"im2col", "shifted products", "depthwise loops"};
    lcase k;
    char what[240];
    oc_init(&k, text, n, OPS_BN_TRAIN);
    int c_in = k.x[0].c, got_G = sched_cpu_conv_group(k.l, c_in, (int64_t)k.l->h * k.l->w, n);
    conv_via got = conv_dw_takes(k.l, c_in) ? VIA_DW : conv_shift_takes(k.l, c_in) ? VIA_SHIFT : VIA_IM2COL;
    bool got_flipped = conv_dxf_takes(k.l, c_in, k.x[0].w, k.x[0].n);
    snprintf(what, sizeof what, "%s: runs by %s, dx %s, %d image(s) a product (wanted: %s, dx %s, %d)", name, names[got],
             got_flipped ? "flipped" : "by col2im", got_G, names[via], flipped ? "flipped" : "by col2im", G);
    oc_expect(got == via && got_flipped == flipped && got_G == G, what);
    oc_analytic(&k);
    int64_t ny = oc_ten_len(&k.y), nx = oc_ten_len(&k.x[0]);
    float *y = malloc((size_t)ny * sizeof(float)), *dx = malloc((size_t)nx * sizeof(float)), *dw = malloc((size_t)k.nw * sizeof(float));
    conv_reference(&k, y, dx, dw);
    snprintf(what, sizeof what, "%s: y against a direct convolution", name);
    oc_compare(&oc_w_ref, what, k.y.p, y, ny, REF_TOL, REF_TOL);
    snprintf(what, sizeof what, "%s: dx against a direct convolution", name);
    oc_compare(&oc_w_ref, what, k.dx[0].p, dx, nx, REF_TOL, REF_TOL);
    snprintf(what, sizeof what, "%s: dw and bias gradient against a direct convolution", name);
    oc_compare(&oc_w_ref, what, k.dw, dw, k.nw, REF_TOL, REF_TOL);
    free(y), free(dx), free(dw);
    oc_free(&k);
    oc_band_case(name, text, OPS_BN_TRAIN, n);
}

static void inplace_case(const char *kind, const char *keys)
{
    lcase k;
    char text[200], what[120];
    snprintf(text, sizeof text, "input x c=3 h=9 w=8\nconv c c=3 k=1\n%s t %s\nloss end\n", kind, keys);
    oc_init(&k, text, 2, OPS_BN_TRAIN);
    if (!k.l->inplace) printf("FAIL %s: not run in place\n", kind), oc_failures++;
    oc_analytic(&k);
    int64_t n = oc_ten_len(&k.y);
    ops_call c = oc_call(&k);
    /* forward: y is x */
    ten io = oc_ten_new(2, 3, 9, 8, 0);
    memcpy(io.p, k.x[0].p, (size_t)n * sizeof(float));
    c.x[0] = c.y = io;
    ops_cpu.forward(&c);
    snprintf(what, sizeof what, "%s in place: y", kind);
    oc_compare(&oc_w_fd, what, io.p, k.y.p, n, 0.0, 0.0);
    /* backward: dx is dy, rows 2..4 of a view holding rows 1..5; rows 1 and 5 are left alone
     * (ops.h: an in-place relu's buffer may be shared with bands that own the other rows) */
    ten d = oc_band_view(&k.y, k.r, 1, 6, 0.0f), yv = oc_band_view(&k.y, k.y.p, 1, 6, 0.0f);
    c = (ops_call){.l = k.l, .in_h = {9}, .a = 2, .b = 5, .y = yv, .dy = d, .dx = {d}, .dx_acc = {false}};
    ops_cpu.backward(&c);
    ten ref = oc_band_view(&k.dx[0], k.dx[0].p, 1, 6, 0.0f);
    for (int im = 0; im < 2; im++)
        for (int ch = 0; ch < 3; ch++)
            for (int i = 0; i < 8; i++) { /* the reference's rows 1 and 5: dy as it was */
                int64_t p = ((int64_t)im * 3 + ch) * 5 * 8;
                ref.p[p + i] = k.r[((int64_t)im * 3 + ch) * 9 * 8 + 1 * 8 + i];
                ref.p[p + 4 * 8 + i] = k.r[((int64_t)im * 3 + ch) * 9 * 8 + 5 * 8 + i];
            }
    snprintf(what, sizeof what, "%s in place: dx rows 2..4 of a view of rows 1..5 (others kept)", kind);
    oc_compare(&oc_w_fd, what, d.p, ref.p, oc_ten_len(&d), 0.0, 0.0);
    free(io.p), free(d.p), free(yv.p), free(ref.p);
    oc_free(&k);
}

/* --- dropout's mask: its rate, and independence between keys ------------------------------------ */

static void dropout_masks(void)
{
    const int64_t M = 1 << 20;
    const float ps[] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        int64_t kept = 0, both = 0;
        uint64_t a = drop_key(1, 1, 5), b = drop_key(1, 2, 5); /* two iterations of one layer */
        for (int64_t i = 0; i < M; i++) {
            int x = drop_keep(a, i, ps[k]), y = drop_keep(b, i, ps[k]);
            kept += x, both += x && y;
        }
        double rate = (double)kept / M, q = 1.0 - ps[k], joint = (double)both / M;
        char what[160];
        /* 2^20 draws: the standard error of a rate is below 0.05%; 0.3% is six of them */
        snprintf(what, sizeof what, "dropout p=%.1f: kept %.4f (want %.1f), both iterations %.4f (want %.2f)", ps[k], rate, q, joint,
                 q * q);
        bool ok = fabs(rate - q) < 0.003 && fabs(joint - q * q) < 0.003;
        if (ok) printf("ok     %s\n", what);
        oc_expect(ok, what);
    }
}

/* --- batch-norm statistics ------------------------------------------------------------------------ */

/* Train: stats = batch mean and 1/sqrt(biased var + eps); running = (1 - m) running + m batch, with
 * the unbiased variance (PyTorch). Frozen: stats from the running ones, which stay unchanged. */
static void bn_statistics(void)
{
    lcase k;
    oc_init(&k, IN "bn t\n" END, 2, OPS_BN_TRAIN);
    int C = k.l->c, M = 2 * 9 * 8;
    double eps = k.l->u.bn.eps, mom = k.l->u.bn.momentum;
    float run0[2 * 3], want_stats[2 * 3] = {0}, want_run[2 * 3] = {0};
    memcpy(run0, k.running, sizeof run0);
    for (int ch = 0; ch < C; ch++) {
        double s = 0.0, ss = 0.0;
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 9 * 8; i++) s += k.x[0].p[((int64_t)n * C + ch) * 72 + i];
        double mean = s / M;
        for (int n = 0; n < 2; n++)
            for (int i = 0; i < 9 * 8; i++) ss += pow(k.x[0].p[((int64_t)n * C + ch) * 72 + i] - mean, 2);
        want_stats[ch] = (float)mean, want_stats[C + ch] = (float)(1.0 / sqrt(ss / M + eps));
        want_run[ch] = (float)((1 - mom) * run0[ch] + mom * mean);
        want_run[C + ch] = (float)((1 - mom) * run0[C + ch] + mom * ss / (M - 1));
    }
    ops_call c = oc_call(&k);
    c.update_running = true;
    ops_cpu.forward(&c);
    oc_compare(&oc_w_opt, "bn train: stats (mean, invstd)", k.stats, want_stats, 2 * C, 0.0, STAT_TOL);
    oc_compare(&oc_w_opt, "bn train: running (mean, unbiased var)", k.running, want_run, 2 * C, 0.0, STAT_TOL);
    memcpy(run0, k.running, sizeof run0);
    for (int ch = 0; ch < C; ch++)
        want_stats[ch] = run0[ch], want_stats[C + ch] = (float)(1.0 / sqrt((double)run0[C + ch] + eps));
    c.bn = OPS_BN_FROZEN;
    ops_cpu.forward(&c);
    oc_compare(&oc_w_opt, "bn frozen: stats (running mean, invstd)", k.stats, want_stats, 2 * C, 0.0, STAT_TOL);
    oc_compare(&oc_w_opt, "bn frozen: running unchanged", k.running, run0, 2 * C, 0.0, 0.0);
    oc_free(&k);
}

/* --- optimizers ---------------------------------------------------------------------------------- */

/* Expected values: torch.optim.SGD(lr=0.1, momentum=0.9) and torch.optim.Adam(lr=0.01, betas=(0.9,
 * 0.999), eps=1e-8) from these parameters and gradients, PyTorch 1.13 CPU, fp32. By hand: SGD step 1
 * is p - lr g (the buffer starts at g), step 2 uses the buffer 0.9 g1 + g2. Adam step 1 moves each
 * element by lr * g / (|g| + eps / sqrt(1 - beta2)), i.e. by lr for the first two, and by
 * 0.01 * 1e-6 / (1e-6 + 3.16e-7) = 0.0076 for the third, whose gradient is comparable to eps. */
static void optimizers(void)
{
    float p[3] = {1.0f, -2.0f, 0.5f}, s[3] = {0}, g1[3] = {0.1f, -0.2f, 0.3f}, g2[3] = {-0.3f, 0.05f, 0.2f};
    ops_sgd_step(p, g1, s, 3, 0.1f, 0.9f);
    const float sgd1[3] = {0.9900000095367432f, -1.9800000190734863f, 0.4699999988079071f};
    oc_compare(&oc_w_opt, "sgd momentum step 1: p", p, sgd1, 3, 0.0, OPT_TOL);
    ops_sgd_step(p, g2, s, 3, 0.1f, 0.9f);
    const float sgd2[3] = {1.0110000371932983f, -1.9670000076293945f, 0.4230000078678131f};
    const float buf2[3] = {-0.21000000834465027f, -0.12999999523162842f, 0.4700000286102295f};
    oc_compare(&oc_w_opt, "sgd momentum step 2: p", p, sgd2, 3, 0.0, OPT_TOL);
    oc_compare(&oc_w_opt, "sgd momentum step 2: momentum buffer", s, buf2, 3, 0.0, OPT_TOL);

    float q[3] = {1.0f, -0.5f, 0.003f}, st[6] = {0}, h1[3] = {0.2f, -0.4f, 1e-6f}, h2[3] = {-0.1f, 0.3f, -2e-6f};
    ops_adam_step(q, h1, st, 3, 0.01f, 0.9f, 0.999f, 1e-8f, 1);
    const float adam1[3] = {0.9900000095367432f, -0.49000000953674316f, -0.006900988984853029f};
    oc_compare(&oc_w_opt, "adam step 1: p", q, adam1, 3, 0.0, OPT_TOL);
    ops_adam_step(q, h2, st, 3, 0.01f, 0.9f, 0.999f, 1e-8f, 2);
    const float adam2[3] = {0.9873366355895996f, -0.48910677433013916f, -0.0032629589550197124f};
    const float m2[3] = {0.00800000037997961f, -0.0060000005178153515f, -1.1000000199601345e-07f};
    const float v2[3] = {4.996000279788859e-05f, 0.00024984002811834216f, 4.99900041338059e-15f};
    oc_compare(&oc_w_opt, "adam step 2: p", q, adam2, 3, 0.0, OPT_TOL);
    oc_compare(&oc_w_opt, "adam step 2: first moment", st, m2, 3, 0.0, OPT_MOMENT_TOL);
    oc_compare(&oc_w_opt, "adam step 2: second moment", st + 3, v2, 3, 0.0, OPT_MOMENT_TOL);
}

/* --- the cases ------------------------------------------------------------------------------------ */

static const struct {
    const char *name, *text;
    ops_bn bn;
    bool band; /* also run the band equivalence test */
    int n;     /* batch; 0: 2 */
} cases[] = {
    {"conv k3 s1 p1", IN "conv t c=4 k=3 p=1\n" END, 0, true},
    {"conv k1 direct", IN "conv t c=4 k=1\n" END, 0, true},
    {"conv k1 s2", IN "conv t c=4 k=1 s=2\n" END, 0, true},
    {"conv k3 s1 p0", IN "conv t c=4 k=3\n" END, 0, true},
    {"conv k5 p2", IN "conv t c=4 k=5 p=2\n" END, 0, true},
    {"conv k7 s2 p3 no bias", IN "conv t c=4 k=7 s=2 p=3 bias=0\n" END, 0, true},
    {"conv k7 p0", IN "conv t c=2 k=7\n" END, 0, true},
    {"conv k3 s2 p0", IN "conv t c=4 k=3 s=2\n" END, 0, true},
    {"conv k3 d2 p2", IN "conv t c=4 k=3 p=2 d=2\n" END, 0, true},
    {"conv k3 s2 p1 d2", IN "conv t c=4 k=3 s=2 p=1 d=2\n" END, 0, true},
    /* conv_cpu puts images side by side until a product has 128 columns (K < 512): the maps above run
     * grouped; these one image per product (bands: grouped again), and a batch of 3 in 2 + 1 */
    {"conv k3 p1, 140 columns an image", "input x c=2 h=2 w=70\nconv t c=3 k=3 p=1\n" END, 0, true},
    {"conv k1 direct, 140 columns an image", "input x c=2 h=2 w=70\nconv t c=3 k=1\n" END, 0, true},
    {"conv k3 p1, batch 3 in groups of 2", "input x c=2 h=2 w=40\nconv t c=3 k=3 p=1\n" END, 0, true, 3},
    {"conv k3 p1 depthwise (groups=3)", IN "conv t c=3 k=3 p=1 groups=3\n" END, 0, true},
    {"conv k3 s2 groups=3, two outputs a group", IN "conv t c=6 k=3 s=2 p=1 groups=3\n" END, 0, true},
    {"conv k1 groups=3 (not direct)", IN "conv t c=6 k=1 groups=3\n" END, 0, true},
    {"conv k3 groups=2 of 4 channels, 140 columns an image", "input x c=4 h=2 w=70\nconv t c=6 k=3 p=1 groups=2\n" END, 0, true},
    {"conv k1x7 p0x3 (Inception's)", IN "conv t c=4 k=1x7 p=0x3\n" END, 0, true},
    {"conv k7x1 p3x0", IN "conv t c=4 k=7x1 p=3x0\n" END, 0, true},
    {"conv k3x5 s2x1 p1x2 d1x2 groups=3", IN "conv t c=6 k=3x5 s=2x1 p=1x2 d=1x2 groups=3\n" END, 0, true},
    {"conv k1 s1x2 (direct along H only)", IN "conv t c=4 k=1 s=1x2\n" END, 0, true},
    {"convt k2 s2 (a U-Net's up-convolution)", IN "convt t c=2 k=2 s=2\n" END, 0, true},
    {"convt k3 s2 p1 op1", IN "convt t c=4 k=3 s=2 p=1 op=1\n" END, 0, true},
    {"convt k4 s2 p1 groups=3", IN "convt t c=6 k=4 s=2 p=1 groups=3\n" END, 0, true},
    {"convt k3 s1 p1 d2 op1, no bias", IN "convt t c=2 k=3 p=1 d=2 op=1 bias=0\n" END, 0, true},
    {"convt k3 s3 p2, a strided conv first", IN "conv a c=3 k=3 s=2\nconvt t c=2 k=3 s=3 p=2\n" END, 0, true},
    {"bilinear (default scale 2)", IN "bilinear t\n" END, 0, true},
    {"bilinear scale=3 after a strided conv", IN "conv a c=2 k=3 s=2\nbilinear t scale=3\n" END, 0, true},
    {"bilinear scale=2 align=1", IN "bilinear t align=1\n" END, 0, true},
    {"bilinear scale=5 align=1", IN "bilinear t scale=5 align=1\n" END, 0, true},
    {"gnorm groups=3 (a channel a group)", IN "gnorm t groups=3\n" END, 0, false},
    {"gnorm groups=2 of 6 channels after a strided conv", IN "conv a c=6 k=3 s=2 p=1\ngnorm t groups=2 eps=1e-3\n" END, 0, false},
    {"gnorm groups=1", IN "gnorm t groups=1\n" END, 0, false},
    {"lnorm", IN "lnorm t\n" END, 0, true},
    {"scale (ConvNeXt's layer scale)", IN "scale t\n" END, 0, true},
    {"lnorm of 6 channels eps=1e-6", IN "conv a c=6 k=3 p=1\nlnorm t eps=1e-6\n" END, 0, true},
    {"relu", IN "relu t\n" END, 0, true},
    {"sigmoid", IN "sigmoid t\n" END, 0, true},
    {"relu6", IN "relu6 t\n" END, 0, true},
    {"leakyrelu slope=0.1", IN "leakyrelu t slope=0.1\n" END, 0, true},
    {"leakyrelu (default slope)", IN "leakyrelu t\n" END, 0, true},
    {"silu", IN "silu t\n" END, 0, true},
    {"gelu", IN "gelu t\n" END, 0, true},
    {"hardswish", IN "hardswish t\n" END, 0, true},
    {"hardsigmoid", IN "hardsigmoid t\n" END, 0, true},
    {"mul of two maps", IN "conv a c=3 k=1 in=x\nmul t in=x,a\n" END, 0, false},
    {"mul by a channel scale (SE)", IN "gap s in=x\nmul t in=x,s\n" END, 0, false},
    {"mul, the scale first", IN "conv a c=3 k=1 in=x\ngap s in=x\nmul t in=s,a\n" END, 0, false},
    {"mul of itself", IN "conv a c=3 k=1\nmul t in=a,a\n" END, 0, false},
    {"dropout p=0.3", IN "dropout t p=0.3\n" END, 0, true},
    {"dropout p=0", IN "dropout t p=0\n" END, 0, true},
    {"dropout p=0.5 sample=1 (stochastic depth)", IN "dropout t p=0.5 sample=1\n" END, 0, true},
    {"maxpool k3 s2 p1", IN "maxpool t k=3 s=2 p=1\n" END, 0, true},
    {"maxpool k2", IN "maxpool t k=2\n" END, 0, true},
    {"avgpool k3 s1 p1", IN "avgpool t k=3 s=1 p=1\n" END, 0, true},
    {"avgpool k3 s2 p1", IN "avgpool t k=3 s=2 p=1\n" END, 0, true},
    {"upsample (default scale 2)", IN "upsample t\n" END, 0, true},
    {"upsample scale=3 (bands splitting a row's copies)", IN "upsample t scale=3\n" END, 0, true},
    {"upsample scale=1", IN "upsample t scale=1\n" END, 0, true},
    {"bn train", IN "bn t\n" END, OPS_BN_TRAIN, false},
    {"bn frozen", IN "bn t\n" END, OPS_BN_FROZEN, true},
    {"fc", IN "fc t c=5\n" END, 0, false},
    {"fc no bias", IN "fc t c=5 bias=0\n" END, 0, false},
    {"add", IN "conv a c=2 k=1 in=x\nconv b c=2 k=1 in=x\nadd t in=a,b\n" END, 0, true},
    {"add of itself", IN "conv a c=2 k=1\nadd t in=a,a\n" END, 0, true},
    {"concat (2 + 3 channels)", IN "conv a c=2 k=1 in=x\nconv b c=3 k=1 in=x\nconcat t in=a,b\n" END, 0, true},
    {"concat of itself", IN "conv a c=2 k=1\nconcat t in=a,a\n" END, 0, true},
    {"concat with the image", IN "conv a c=2 k=1\nconcat t in=x,a\n" END, 0, true},
    {"add of four, one twice", IN "conv a c=2 k=1 in=x\nconv b c=2 k=1 in=x\nconv d c=2 k=1 in=x\nadd t in=a,b,a,d\n" END, 0, true},
    {"concat of four (2 + 3 + 2 + 1), one twice", IN "conv a c=2 k=1 in=x\nconv b c=3 k=1 in=x\nconv d c=1 k=1 in=x\nconcat t in=a,b,a,d\n" END, 0, true},
    {"slice (channels 1 and 2 of 4)", IN "conv a c=4 k=1\nslice t start=1 c=2\n" END, 0, true},
    {"slice (all channels)", IN "conv a c=4 k=1\nslice t c=4\n" END, 0, true},
    {"shuffle groups=2 (6 channels)", IN "conv a c=6 k=1\nshuffle t groups=2\n" END, 0, true},
    {"shuffle groups=3 (6 channels)", IN "conv a c=6 k=1\nshuffle t groups=3\n" END, 0, true},
    {"gap", IN "gap t\n" END, 0, false},
    {"apool o=3 (7x8, overlapping)", "input x c=3 h=7 w=8\napool t o=3\n" END, 0, false},
    {"apool o=2 (9x8)", IN "apool t o=2\n" END, 0, false},
    {"loss (5x2x1 logits)", "input x c=5 h=2 w=1\nloss t\n", 0, false},
    {"loss per pixel (4 classes at 3x5 places)", "input x c=4 h=3 w=5\nloss t pixel=1\n", 0, false, 3},
    {"loss per pixel of one class", "input x c=1 h=2 w=3\nloss t pixel=1\n", 0, false},
};

/* The convolutions stretch_case runs: the path each takes, and how many images a product on the
 * whole map (sched_cpu_conv_group) at its batch. */
static const struct {
    const char *name, *text;
    conv_via via;
    bool flipped;
    int n, G; /* batch (0: 2); images a product */
} stretches[] = {
    /* K = 576 over 48x48 (stretches of 43 and 5 rows); K = 288 over 100x100, dilated (36, 36, 28
     * rows); K = 576 over 100x28, too narrow for the shifted forward, so its im2col in stretches too.
     * Fewer outputs than inputs: their data gradient flipped */
    {"conv k3 p1, 64 channels in, 48x48", "input x c=64 h=48 w=48\nconv t c=8 k=3 p=1\n" END, VIA_SHIFT, true, 0, 1},
    {"conv k3 p2 d2, 32 channels in, 100x100", "input x c=32 h=100 w=100\nconv t c=4 k=3 p=2 d=2\n" END, VIA_SHIFT, true, 0, 1},
    {"conv k3 p1, 64 channels in, 100x28", "input x c=64 h=100 w=28\nconv t c=8 k=3 p=1\n" END, VIA_IM2COL, true, 0, 1},
    /* the shifted forward with kernels, padding and dilation that differ by axis; a k x 1 kernel
     * never takes it (its padded rows alone are im2col's col at one row) */
    {"conv k1x7 p0x3, 32 channels in, 12x120", "input x c=32 h=12 w=120\nconv t c=4 k=1x7 p=0x3\n" END, VIA_SHIFT, true, 0, 1},
    {"conv k7x1 p3x0, 16 channels in, 30x20", "input x c=16 h=30 w=20\nconv t c=4 k=7x1 p=3x0\n" END, VIA_IM2COL, true, 0, 1},
    {"conv k3x5 p1x4 d1x2, 24 channels in, 20x140", "input x c=24 h=20 w=140\nconv t c=6 k=3x5 p=1x4 d=1x2\n" END, VIA_SHIFT, true, 0, 1},
    /* the data gradient by col2im in stretches: as many outputs as inputs, more, and fewer where
     * the flipped way's weights and one row do not fit into the workspace at one row (8 wide) */
    {"conv k3 p1, 16 channels in and out, 48x48", "input x c=16 h=48 w=48\nconv t c=16 k=3 p=1\n" END, VIA_SHIFT, false, 0, 1},
    {"conv k3 p2 d2, 8 channels in, 16 out, 30x100", "input x c=8 h=30 w=100\nconv t c=16 k=3 p=2 d=2\n" END, VIA_IM2COL, false, 0, 1},
    {"conv k3 p1, 64 channels in, 32 out, 12x8", "input x c=64 h=12 w=8\nconv t c=32 k=3 p=1\n" END, VIA_IM2COL, false, 0, 2},
    /* flipped on small maps: dilation without padding, padding that grows the map (p' = 0), an
     * even kernel that differs by axis; a stride never */
    {"conv k3 p1, 8 in 4 out, 9x8", "input x c=8 h=9 w=8\nconv t c=4 k=3 p=1\n" END, VIA_IM2COL, true, 0, 2},
    {"conv k3 d2 p0, 6 in 2 out, 11x9", "input x c=6 h=11 w=9\nconv t c=2 k=3 d=2 bias=0\n" END, VIA_IM2COL, true, 0, 2},
    {"conv k3 p2, 6 in 3 out, 7x9", "input x c=6 h=7 w=9\nconv t c=3 k=3 p=2\n" END, VIA_IM2COL, true, 0, 2},
    {"conv k2x3 p1x0, 5 in 2 out, 8x8", "input x c=5 h=8 w=8\nconv t c=2 k=2x3 p=1x0\n" END, VIA_IM2COL, true, 0, 2},
    {"conv k3 s2 p1, 8 in 4 out, 9x8", "input x c=8 h=9 w=8\nconv t c=4 k=3 s=2 p=1\n" END, VIA_IM2COL, false, 0, 2},
    /* depthwise: rows wide enough for the filter gradient's lanes, strides, dilation, a 7x7 with
     * its bias (ConvNeXt's), windows that differ by axis; two outputs a channel is not depthwise */
    {"depthwise k3 p1, 32 channels, 20x70", "input x c=32 h=20 w=70\nconv t c=32 k=3 p=1 groups=32 bias=0\n" END, VIA_DW, false, 0, 1},
    {"depthwise k3 s2 p1, 16 channels, 21x45", "input x c=16 h=21 w=45\nconv t c=16 k=3 s=2 p=1 groups=16\n" END, VIA_DW, false, 0, 1},
    {"depthwise k7 p3, 8 channels, 14x40", "input x c=8 h=14 w=40\nconv t c=8 k=7 p=3 groups=8\n" END, VIA_DW, false, 0, 1},
    {"depthwise k3x5 s2x1 p1x4 d1x2, 6 channels, 15x50", "input x c=6 h=15 w=50\nconv t c=6 k=3x5 s=2x1 p=1x4 d=1x2 groups=6\n" END, VIA_DW, false, 0, 1},
    {"groups=C_in, two outputs a channel, 10x40", "input x c=4 h=10 w=40\nconv t c=8 k=3 p=1 groups=4\n" END, VIA_IM2COL, false, 0, 1},
    /* images side by side where K >= 512: until a product has 512 columns (batch 5 in 3 + 2), or
     * the group's workspace 3 MiB (K = 2304 over 13x13, 1.6 MB an image: batch 3 in 2 + 1); a 1x1
     * convolution on 49 columns grouped (its im2col a row copy), on 196 an image at a time in place
     * (VIA_IM2COL: neither shifted nor depthwise) */
    {"conv k3 p1, 64 in 8 out, 14x14, batch 5", "input x c=64 h=14 w=14\nconv t c=8 k=3 p=1\n" END, VIA_IM2COL, true, 5, 3},
    {"conv k3 p1, 256 in 4 out, 13x13, batch 3", "input x c=256 h=13 w=13\nconv t c=4 k=3 p=1\n" END, VIA_IM2COL, true, 3, 2},
    {"conv k1, 512 in 8 out, 7x7, batch 3", "input x c=512 h=7 w=7\nconv t c=8 k=1\n" END, VIA_IM2COL, false, 3, 3},
    {"conv k1, 512 in 8 out, 14x14, batch 3", "input x c=512 h=14 w=14\nconv t c=8 k=1\n" END, VIA_IM2COL, false, 3, 1},
};

int main(int argc, char **argv)
{
    (void)argc;
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
    int nc = (int)(sizeof cases / sizeof cases[0]);
    for (int i = 0; i < nc; i++) fd_case(cases[i].name, cases[i].text, cases[i].bn, cases[i].n ? cases[i].n : 2);
    inplace_case("relu", "");
    inplace_case("relu6", "");
    inplace_case("leakyrelu", "slope=0.2");
    for (int i = 0; i < nc; i++)
        if (cases[i].band) oc_band_case(cases[i].name, cases[i].text, cases[i].bn, cases[i].n ? cases[i].n : 2);
    for (size_t i = 0; i < sizeof stretches / sizeof *stretches; i++)
        stretch_case(stretches[i].name, stretches[i].text, stretches[i].via, stretches[i].flipped, stretches[i].n ? stretches[i].n : 2,
                     stretches[i].G);
    bn_statistics();
    dropout_masks();
    optimizers();
    printf("\nworst differences: fd abs %.2e rel %.2e | band forward abs %.2e rel %.2e | band backward abs %.2e "
           "rel %.2e | conv against direct abs %.2e rel %.2e | bn statistics and optimizers abs %.2e rel %.2e\n",
           oc_w_fd.abs, oc_w_fd.rel, oc_w_band_fwd.abs, oc_w_band_fwd.rel, oc_w_band_bwd.abs, oc_w_band_bwd.rel, oc_w_ref.abs, oc_w_ref.rel,
           oc_w_opt.abs, oc_w_opt.rel);
    if (oc_failures) {
        printf("test_ops: %d check(s) FAILED\n", oc_failures);
        return 1;
    }
    printf("test_ops: all checks passed\n");
    return 0;
}
