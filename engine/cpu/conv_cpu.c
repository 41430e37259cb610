/* conv_cpu: convolution and fully connected layers on the CPU, as sgemm calls (OpenBLAS).
 *
 * Convolution on output rows [a, b) (R = b - a rows, cols = R*W_out, K = C_in*kh*kw: its window
 * along H, l->win, and along W, l->win_w, may differ), images in
 * groups of G side by side (G = sched_cpu_conv_group(): 1 for large maps, more when one image's
 * product would be too narrow for sgemm to run at speed, as on ResNet-50's 14x14 and 7x7 maps):
 *   forward          col (K, G*cols) = im2col(x rows of the group), in ws
 *                    out (C_out, G*cols) = w (C_out, K) x col; y[:, a:b] of each image = its columns
 *   backward filter  col = im2col(x rows); dw += dy (C_out, G*cols) x col^T
 *   backward data    col = w^T x dy; dx += col2im(col), image by image; or, at stride 1 with
 *                    few outputs beside the inputs, as a forward convolution of dy ("flipped")
 * With G = 1 the products read dy and write y straight in place (leading dimension of a whole
 * channel plane, h*w); with G > 1 the workspace also holds out, or dy gathered, (C_out, G*cols).
 * A 1x1 stride-1 unpadded convolution with G = 1 is a plain product with the input rows (no
 * workspace): its input row i is its output row i. Grouped, it takes the im2col path (a row copy).
 * The forward of a stride-1 convolution on a wide enough map is one product per tap instead
 * (conv_shift.c), in the same workspace; a depthwise convolution runs without products (conv_dw.c).
 * Channel groups (groups=, depthwise when it is C_in): im2col's rows are ordered by input channel,
 * so group q's are the block [q*K/groups, (q+1)*K/groups) of col, and each product above runs once
 * per group on its blocks of w (C_out/groups rows of K/groups), col and out; never direct.
 * Accumulation: dw and the bias gradient are +=; dx is zeroed first when !dx_acc (whole view),
 * then accumulated into, so bands add up; a direct product stores into dx when it may
 * (cpu_dx_store).
 * Deterministic: fixed loop orders, and sgemm with a fixed thread count. Not done here: any
 * allocation (the workspace comes from the caller, sized by sched_workspace_bytes()). */
#include <string.h>

#include <cblas.h>

#include "engine/cpu/ops_cpu.h"

/* Does this convolution, G images at a time, run as a direct product (no im2col, no workspace)?
 * The workspace model's own test (sched_workspace_bytes gives it none). */
static bool conv_direct(const net_layer *l, int G) { return G == 1 && sched_cpu_conv_pointwise(l); }

/* C (m, n) = beta C + A (m, k) op B, once per channel group: group q's A starts q*a_step floats
 * in, B q*b_step, C q*c_step (row-major sgemm with the given transposes and leading dimensions). */
static void grouped_sgemm(int groups, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float *A, int lda,
                          int64_t a_step, const float *B, int ldb, int64_t b_step, float beta, float *C, int ldc, int64_t c_step)
{
    for (int q = 0; q < groups; q++)
        cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, A + q * a_step, lda, B + q * b_step, ldb, beta, C + q * c_step, ldc);
}

/* The weight gradient of every convolution here, once per channel group: group q's dw (m, n) +=
 * its dy (m, cols) x its col^T (col: n rows of cols), each operand's group q_step floats after the
 * last (dw's m * n), ld_dy and ld_col floats between rows. Where the product's output is small
 * beside its inner length (VGG-16 conv1_1's 64 x 27 filter over 38,752 columns a stretch),
 * OpenBLAS runs it at one thread's speed: 52 GFLOP/s on 2 cores, against 75 with the columns cut
 * into DW_PARTS parts, a thread's product each into its own partial sum, the parts then added in
 * part order. The cut does not depend on the thread count, so neither does the result. */
enum { DW_PARTS = 4, DW_PART_MAX = 4096, DW_PART_MIN_COLS = 4096 };

static void dw_product(int groups, int m, int n, int cols, const float *dy, int ld_dy, int64_t dy_step, const float *col, int ld_col,
                       int64_t col_step, float *dw)
{
    if (groups > 1 || (int64_t)m * n > DW_PART_MAX || cols < DW_PARTS * DW_PART_MIN_COLS) {
        grouped_sgemm(groups, CblasNoTrans, CblasTrans, m, n, cols, dy, ld_dy, dy_step, col, ld_col, col_step, 1.0f, dw, n,
                      (int64_t)m * n);
        return;
    }
    float part[DW_PARTS][DW_PART_MAX];
#pragma omp parallel for schedule(static)
    for (int q = 0; q < DW_PARTS; q++) {
        int j0 = (int)((int64_t)cols * q / DW_PARTS), j1 = (int)((int64_t)cols * (q + 1) / DW_PARTS);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, j1 - j0, 1.0f, dy + j0, ld_dy, col + j0, ld_col, 0.0f, part[q], n);
    }
    for (int i = 0; i < m * n; i++) {
        float s = part[0][i];
        for (int q = 1; q < DW_PARTS; q++) s += part[q][i];
        dw[i] += s;
    }
}

/* One tap's rows [a, b) of col at dst when the window moves by 1 along both axes and the map keeps
 * its width (w_out == w_in: a 3x3 convolution padded by 1, say): output row o reads input row
 * o + dh, column ow + off, so the tap's rows follow each other in x as they do in col, and the
 * rows that read inside the map are one copy; then the columns [0, lo) and [hi, w) that read
 * padding, which that copy filled from the rows beside them, are zeroed, as are the rows outside
 * [v0, v1). Against a copy a row (224 bytes on ResNet-50's 56-wide maps), im2col alone took 18%
 * less time on ResNet-50's layer1.0.conv2 and 32% less on layer3.1.conv2 (batch 2), and VGG-16's
 * conv1_1 forward 15% less in all. */
static void im2col_joined(float *dst, const ten *x, int n, int ci, int dh, int off, int lo, int hi, int v0, int v1, int a,
                          int b, int w)
{
    int oa = v0 - dh, ob = v1 - dh; /* the rows whose input row lies in [v0, v1) */
    oa = oa < a ? a : oa > b ? b : oa, ob = ob < oa ? oa : ob > b ? b : ob;
    memset(dst, 0, (size_t)(oa - a) * w * sizeof(float));
    memset(dst + (int64_t)(ob - a) * w, 0, (size_t)(b - ob) * w * sizeof(float));
    if (oa == ob) return;
    float *d = dst + (int64_t)(oa - a) * w;
    if (lo < hi) /* from row oa's column lo to row ob - 1's column hi */
        memcpy(d + lo, cpu_row(x, n, ci, oa + dh) + lo + off, ((size_t)(ob - oa - 1) * w + (size_t)(hi - lo)) * sizeof(float));
    for (int o = oa; o < ob; o++, d += w) {
        for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
        for (int ow = hi; ow < w; ow++) d[ow] = 0.0f;
    }
}

/* col (C_in*kh*kw, R*W_out), rows ld floats apart <- the input values each output position
 * [a, b) x [0, W_out) of image n reads through window win along H and ww along W; zero where the
 * window hangs over the padding, or over input rows outside [v0, v1) (a conv: the map, [0, in_h);
 * a transposed conv's backward: the rows of the gradient its band holds). Each tap (channel, ki,
 * kj) fills its own row of col: the taps are shared out among the threads (a first layer has
 * three channels but 27 taps). */
static void im2col(float *col, int64_t ld, const ten *x, int n, net_window win, net_window ww, int v0, int v1, int a, int b,
                   int w_out)
{
    int kh = win.k, kw = ww.k, w_in = x->w;
    bool joined = win.s == 1 && ww.s == 1 && w_in == w_out;
#pragma omp parallel for collapse(3) schedule(static) if (cpu_parallel((int64_t)x->c * kh * kw * (b - a) * w_out))
    for (int ci = 0; ci < x->c; ci++)
        for (int ki = 0; ki < kh; ki++)
            for (int kj = 0; kj < kw; kj++) {
                float *dst = col + ((int64_t)(ci * kh + ki) * kw + kj) * ld;
                int lo, hi, off = ww.d * kj - ww.p;
                cpu_valid_cols(ww, kj, w_in, w_out, &lo, &hi);
                if (joined) {
                    im2col_joined(dst, x, n, ci, win.d * ki - win.p, off, lo, hi, v0, v1, a, b, w_out);
                    continue;
                }
                for (int o = a; o < b; o++) {
                    float *drow = dst + (int64_t)(o - a) * w_out;
                    int ih = o * win.s - win.p + win.d * ki;
                    if (ih < v0 || ih >= v1) {
                        memset(drow, 0, (size_t)w_out * sizeof(float));
                        continue;
                    }
                    const float *xrow = cpu_row(x, n, ci, ih);
                    for (int ow = 0; ow < lo; ow++) drow[ow] = 0.0f;
                    if (ww.s == 1)
                        memcpy(drow + lo, xrow + lo + off, (size_t)(hi - lo) * sizeof(float));
                    else if (ww.s == 2) /* a constant stride, which the compiler vectorizes */
                        for (int ow = lo; ow < hi; ow++) drow[ow] = xrow[2 * ow + off];
                    else
                        for (int ow = lo; ow < hi; ow++) drow[ow] = xrow[ow * ww.s + off];
                    for (int ow = hi; ow < w_out; ow++) drow[ow] = 0.0f;
                }
            }
}

/* dx of image n += col2im(col): the transpose of im2col (same ld); padding positions, and rows
 * outside [v0, v1), are dropped. A thread owns a stretch of one input channel's rows (several a
 * channel where channels are fewer than the threads need), so no two threads add into the same
 * element, and each element takes its terms in the same order however the rows are shared out. */
static void col2im(const float *col, int64_t ld, const ten *dx, int n, net_window win, net_window ww, int v0, int v1, int a, int b,
                   int w_out)
{
    int kh = win.k, kw = ww.k, w_in = dx->w, h = v1 - v0;
    int parts = dx->c >= 16 || h < 2 ? 1 : (16 + dx->c - 1) / dx->c; /* stretches a channel: 16 pieces or more in all */
    if (parts > h) parts = h;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel((int64_t)dx->c * kh * kw * (b - a) * w_out))
    for (int ci = 0; ci < dx->c; ci++)
        for (int part = 0; part < parts; part++) {
            int r0 = v0 + (int)((int64_t)h * part / parts), r1 = v0 + (int)((int64_t)h * (part + 1) / parts);
            for (int ki = 0; ki < kh; ki++)
                for (int kj = 0; kj < kw; kj++) {
                    const float *src = col + ((int64_t)(ci * kh + ki) * kw + kj) * ld;
                    int lo, hi, off = ww.d * kj - ww.p;
                    cpu_valid_cols(ww, kj, w_in, w_out, &lo, &hi);
                    for (int o = a; o < b; o++) {
                        int ih = o * win.s - win.p + win.d * ki;
                        if (ih < r0 || ih >= r1) continue;
                        const float *srow = src + (int64_t)(o - a) * w_out;
                        float *dxrow = cpu_row(dx, n, ci, ih);
                        for (int ow = lo; ow < hi; ow++) dxrow[ow * ww.s + off] += srow[ow];
                    }
                }
        }
}

/* Between a group's (C, g*cols) matrix m and rows [a, a + R) of images n0.. of view t (R*W = cols):
 * to_t copies m's columns of image i into image n0 + i, else gathers them into m. */
static void group_copy(float *m, const ten *t, int n0, int g, int a, int cols, bool to_t)
{
    for (int i = 0; i < g; i++)
        for (int ch = 0; ch < t->c; ch++) {
            float *mrow = m + (int64_t)ch * g * cols + (int64_t)i * cols, *trow = cpu_row(t, n0 + i, ch, a);
            if (to_t) memcpy(trow, mrow, (size_t)cols * sizeof(float));
            else memcpy(mrow, trow, (size_t)cols * sizeof(float));
        }
}

/* An image's product runs over stretches of output rows whose col (K rows) fits in about this many
 * bytes, written and read back from the cache instead of memory (the whole col of VGG-16's conv1_2
 * is 115 MB an image, and copying it cost the product a quarter of its time), but of no fewer
 * columns than the second constant (narrower products lose more in sgemm than the cache saves:
 * VGG-16's 28x28 layers). Tuned on a 2-core EPYC (1 MiB L2 a core, 32 MiB L3; ./lrcnn bench's
 * conv table). The workspace stays what sched_workspace_bytes() says, of which a stretch uses a part. */
enum { COL_STRETCH_BYTES = 4 << 20, COL_STRETCH_MIN_COLS = 2048 };

static int stretch_rows(int K, int w_out, int R)
{
    int64_t rows = COL_STRETCH_BYTES / ((int64_t)K * w_out * (int64_t)sizeof(float));
    if (rows * w_out < COL_STRETCH_MIN_COLS) rows = (COL_STRETCH_MIN_COLS + w_out - 1) / w_out;
    if (rows < 1) rows = 1;
    int64_t stretches = (R + rows - 1) / rows; /* as many as that takes, of equal rows: no narrow last one */
    return stretches < 1 ? 1 : (int)((R + stretches - 1) / stretches);
}

/* rows [a, b) of images n0 .. n0 + g - 1 of y += the bias of their channel */
static void add_bias(const ten *y, const float *bias, int n0, int g, int a, int b)
{
    int64_t len = (int64_t)(b - a) * y->w;
#pragma omp parallel for collapse(2) schedule(static) if (cpu_parallel(g * y->c * len))
    for (int i = 0; i < g; i++)
        for (int co = 0; co < y->c; co++) {
            float *yr = cpu_row(y, n0 + i, co, a);
            for (int64_t j = 0; j < len; j++) yr[j] += bias[co];
        }
}

/* rows [a, b) of image n of y = the bias of their channel */
static void fill_bias(const ten *y, const float *bias, int n, int a, int b)
{
    int64_t len = (int64_t)(b - a) * y->w;
#pragma omp parallel for schedule(static) if (cpu_parallel(y->c * len))
    for (int co = 0; co < y->c; co++) {
        float *yr = cpu_row(y, n, co, a);
        for (int64_t j = 0; j < len; j++) yr[j] = bias[co];
    }
}

void conv_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->win, ww = l->win_w;
    const ten *x = &c->x[0], *y = &c->y; /* (N, C_in, H_in, W_in) -> (N, C_out, H_out, W_out) */
    int a = c->a, b = c->b, R = b - a, in_h = c->in_h[0];
    int c_out = l->u.conv.c_out, w_out = l->w, K = x->c * win.k * ww.k, cols = R * w_out;
    int Q = l->u.conv.groups, Kq = K / Q, cq = c_out / Q; /* channel groups: K and C_out per group */
    int G = sched_cpu_conv_group(l, x->c, cols, x->n);
    bool direct = conv_direct(l, G);
    int64_t y_plane = (int64_t)y->h * y->w, x_plane = (int64_t)x->h * x->w;
    int lo, hi;
    CHECK(y->c == c_out && y->w == w_out && y->n == x->n);
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(x, lo, hi, in_h);
    cpu_check_rows(y, a, b, l->h);
    if (!direct) CHECK(c->ws != NULL);
    const float *wt = c->w;                                           /* (C_out, C_in / Q, k, k) */
    const float *bias = l->u.conv.bias ? c->w + (int64_t)c_out * Kq : NULL; /* (C_out) */
    if (conv_dw_takes(l, x->c)) {
        conv_dw_forward(c, bias);
        return;
    }
    if (conv_shift_takes(l, x->c)) {
        conv_shift_forward(c, bias);
        return;
    }
    float *col = c->ws, *out = col ? col + (int64_t)K * G * cols : NULL; /* (K, g*cols), (C_out, g*cols) */

    for (int n0 = 0; n0 < x->n; n0 += G) {
        int g = x->n - n0 < G ? x->n - n0 : G, ld = g * cols;
        float *yn = cpu_row(y, n0, 0, a); /* (C_out, cols) with leading dimension y_plane */
        if (direct) {
            /* output row i reads input row i: multiply the input rows in place */
            const float *xn = cpu_row(x, n0, 0, a); /* (C_in, R*W_in), leading dimension x_plane */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, cols, K, 1.0f, wt, K, xn,
                        (int)x_plane, 0.0f, yn, (int)y_plane);
        } else {
            if (g == 1)
                for (int r0 = a, step = stretch_rows(K, w_out, R); r0 < b; r0 += step) {
                    int r1 = b - r0 < step ? b : r0 + step, cc = (r1 - r0) * w_out;
                    im2col(col, cc, x, n0, win, ww, 0, in_h, r0, r1, w_out);
                    if (bias) fill_bias(y, bias, n0, r0, r1); /* then added to: one pass less over y than adding it after */
                    grouped_sgemm(Q, CblasNoTrans, CblasNoTrans, cq, cc, Kq, wt, Kq, (int64_t)cq * Kq, col, cc, (int64_t)Kq * cc,
                                  bias ? 1.0f : 0.0f, cpu_row(y, n0, 0, r0), (int)y_plane, cq * y_plane);
                }
            else {
                for (int i = 0; i < g; i++) im2col(col + (int64_t)i * cols, ld, x, n0 + i, win, ww, 0, in_h, a, b, w_out);
                grouped_sgemm(Q, CblasNoTrans, CblasNoTrans, cq, ld, Kq, wt, Kq, (int64_t)cq * Kq, col, ld, (int64_t)Kq * ld, 0.0f,
                              out, ld, (int64_t)cq * ld);
                group_copy(out, y, n0, g, a, cols, true);
            }
        }
        if (bias && (direct || g > 1)) add_bias(y, bias, n0, g, a, b);
    }
}

/* The data gradient of a stride-1 convolution as a forward convolution of dy ("flipped"): input
 * row ih reads output rows ih - p' + d*ki' for ki' in [0, k), the window flipped (along both axes:
 * padding p' = d*(k - 1) - p, stride 1, dilation d), with weights w' (C_in, C_out, kh, kw),
 * w'[ci][co][t] = w[co][ci][T - 1 - t]. For dx rows [r0, r1) of the rows [lo, hi) the call's dy
 * rows [a, b) reach, a stretch at a time:
 *   col' (C_out*T, cc) = im2col(dy through the flipped window; rows outside [a, b) read as zero)
 *   dx (C_in, cc) += w' (C_in, C_out*T) x col'
 * The sums of w^T x dy and col2im in another order, without the scatter. Where C_out is small
 * beside C_in, w^T x dy is a product of inner length C_out that writes C_in*T rows (DenseNet-121's
 * 128 -> 32 3x3 convolutions: 36 floats written a multiply-add of its input), read back by col2im;
 * this one's inner length is C_out*T and it writes C_in rows. Its backward against col2im's on a
 * 2-core Xeon (OpenBLAS's SkylakeX kernel, batch 2, best of 11 alternating): 128 -> 32 at 56x56
 * 21% less time, 28x28 13%, 14x14 23%; 64 -> 32 at 112x112 29%, 128 -> 64 9%, 256 -> 64 at 28x28
 * 16%, 256 -> 128 at 56x56 9%; but 64 -> 64 at 56x56 8% more, 512 -> 256 at 28x28 8%, 512 -> 128
 * at 14x14 13%, 1024 -> 256 20%. Hence C_out < C_in and C_out <= DXF_MAX_C_OUT. DenseNet-121's
 * iteration at batch 2: 0.300 -> 0.282 s.
 * The workspace holds w' and col' of a row or more. The layer takes this path where those fit into
 * what sched_workspace_bytes gives it at every row count of this batch (so no prediction moves),
 * and then for every call, so that a row plan sums its gradients as `layer` does (conv_shift.c says
 * why). */
enum { DXF_MAX_C_OUT = 64 };

static int64_t dxf_need(const net_layer *l, int c_in, int w_in)
{
    int64_t KD = (int64_t)l->u.conv.c_out * l->win.k * l->win_w.k;
    return c_in * KD + KD * w_in;
}

bool conv_dxf_takes(const net_layer *l, int c_in, int w_in, int batch)
{
    net_window w = l->win, ww = l->win_w;
    int c_out = l->u.conv.c_out;
    if (l->kind != NET_CONV || w.s != 1 || ww.s != 1 || w.u > 1 || ww.u > 1 || w.z || ww.z || l->u.conv.groups != 1) return false;
    if (w.k * ww.k == 1 || c_out >= c_in || c_out > DXF_MAX_C_OUT) return false;
    int64_t need = dxf_need(l, c_in, w_in);
    for (int R = 1; R <= l->h; R++)
        if (sched_cpu_conv_ws_bytes(l, c_in, R, batch) / (int64_t)sizeof(float) < need) return false;
    return true;
}

/* dx of every image += the data gradient of dy's rows [a, b), as above. */
static void dxf_backward(const ops_call *c, int in_h)
{
    const net_layer *l = c->l;
    const ten *dx = &c->dx[0], *dy = &c->dy;
    net_window fw = l->win, fww = l->win_w;
    fw.p = fw.d * (fw.k - 1) - fw.p, fww.p = fww.d * (fww.k - 1) - fww.p;
    int c_in = dx->c, c_out = dy->c, T = fw.k * fww.k, KD = c_out * T, w_in = dx->w, lo, hi;
    net_window_rows(l->win, c->a, c->b, &lo, &hi);
    lo = lo < 0 ? 0 : lo, hi = hi > in_h ? in_h : hi;
    if (lo >= hi) return;
    float *wf = c->ws, *col = c->ws + (int64_t)c_in * KD;
    const float *wt = c->w;
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)c_in * KD))
    for (int ci = 0; ci < c_in; ci++)
        for (int co = 0; co < c_out; co++)
            for (int t = 0; t < T; t++) wf[(int64_t)ci * KD + co * T + t] = wt[((int64_t)co * c_in + ci) * T + (T - 1 - t)];
    int64_t room = sched_cpu_conv_ws_bytes(l, c_in, c->b - c->a, dy->n) / (int64_t)sizeof(float) - (int64_t)c_in * KD;
    int step = stretch_rows(KD, w_in, hi - lo), most = (int)(room / ((int64_t)KD * w_in));
    if (step > most) step = most;
    CHECK(step >= 1 && c->ws_bytes >= (int64_t)sizeof(float) * ((int64_t)c_in * KD + (int64_t)KD * step * w_in));
    int64_t dx_plane = (int64_t)dx->h * w_in;
    for (int n = 0; n < dy->n; n++)
        for (int r0 = lo; r0 < hi; r0 += step) {
            int r1 = hi - r0 < step ? hi : r0 + step, cc = (r1 - r0) * w_in;
            im2col(col, cc, dy, n, fw, fww, c->a, c->b, r0, r1, w_in);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_in, cc, KD, 1.0f, wf, KD, col, cc, 1.0f, cpu_row(dx, n, 0, r0),
                        (int)dx_plane);
        }
}

void conv_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window win = l->win, ww = l->win_w;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy; /* dx like x; dy (N, C_out, H_out, W_out) */
    int a = c->a, b = c->b, R = b - a, in_h = c->in_h[0];
    int c_out = l->u.conv.c_out, w_out = l->w, c_in = dx->p ? dx->c : x->c, K = c_in * win.k * ww.k;
    int cols = R * w_out, G = sched_cpu_conv_group(l, c_in, cols, dy->n);
    int Q = l->u.conv.groups, Kq = K / Q, cq = c_out / Q; /* channel groups */
    bool direct = conv_direct(l, G);
    int64_t dy_plane = (int64_t)dy->h * dy->w;
    int lo, hi;
    net_window_rows(win, a, b, &lo, &hi);
    cpu_check_rows(dy, a, b, l->h);
    if (!direct) CHECK(c->ws != NULL);
    const float *wt = c->w; /* (C_out, C_in / Q, k, k) */
    float *dwt = c->dw;     /* like wt, then the bias gradient (C_out) */
    float *col = c->ws, *dyg = col ? col + (int64_t)K * G * cols : NULL; /* (K, g*cols), (C_out, g*cols) */
    if (dwt) cpu_check_rows(x, lo, hi, in_h);
    bool store = false; /* a direct product writes each element of rows [a, b) once: it may store (beta 0) */
    if (dx->p) {
        store = direct ? cpu_dx_store(c, 0) : (cpu_dx_begin(c, 0), false);
        cpu_check_rows(dx, lo, hi, in_h);
    }
    if (conv_dw_takes(l, c_in)) {
        conv_dw_backward(c);
        return;
    }
    bool flipped = dx->p && conv_dxf_takes(l, c_in, dx->w, dy->n); /* dx after the loop, by dxf_backward */

    for (int n0 = 0; n0 < dy->n; n0 += G) {
        int g = dy->n - n0 < G ? dy->n - n0 : G, ld = g * cols;
        /* the group's dy (C_out, g*cols): in place for one image, else gathered for the products */
        const float *dyn = cpu_row(dy, n0, 0, a);
        int dy_ld = (int)dy_plane;
        if (g > 1 && (dwt || (dx->p && !flipped))) {
            group_copy(dyg, dy, n0, g, a, cols, false);
            dyn = dyg, dy_ld = ld;
        }
        if (dwt && l->u.conv.bias) { /* a thread a channel: each channel's sum in the same order as on one */
            float *db = dwt + (int64_t)c_out * Kq;
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)g * c_out * cols))
            for (int co = 0; co < c_out; co++)
                for (int i = 0; i < g; i++) db[co] += cpu_sum(cpu_row(dy, n0 + i, co, a), cols);
        }
        if (direct) {
            /* dw (C_out, K) += dy (C_out, cols) x x^T; dx (K, cols) += w^T (K, C_out) x dy: the rows in place */
            if (dwt)
                dw_product(1, c_out, K, cols, dyn, dy_ld, 0, cpu_row(x, n0, 0, a), (int)((int64_t)x->h * x->w), 0, dwt);
            if (dx->p)
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, cols, c_out, 1.0f, wt, K, dyn, dy_ld,
                            store ? 0.0f : 1.0f, cpu_row(dx, n0, 0, a), (int)((int64_t)dx->h * dx->w));
        } else if (g == 1) /* an image, a stretch of rows at a time */
            for (int r0 = a, step = stretch_rows(K, w_out, R); r0 < b; r0 += step) {
                int r1 = b - r0 < step ? b : r0 + step, cc = (r1 - r0) * w_out;
                const float *dyc = cpu_row(dy, n0, 0, r0);
                if (dwt) { /* dw (C_out, K) += dy (C_out, cc) x col^T (cc, K) */
                    im2col(col, cc, x, n0, win, ww, 0, in_h, r0, r1, w_out);
                    dw_product(Q, cq, Kq, cc, dyc, dy_ld, (int64_t)cq * dy_ld, col, cc, (int64_t)Kq * cc, dwt);
                }
                if (dx->p && !flipped) { /* col (K, cc) = w^T (K, C_out) x dy (C_out, cc), scattered back onto the rows it reads */
                    int v0, v1;
                    net_window_rows(win, r0, r1, &v0, &v1);
                    grouped_sgemm(Q, CblasTrans, CblasNoTrans, Kq, cc, cq, wt, Kq, (int64_t)cq * Kq, dyc, dy_ld,
                                  (int64_t)cq * dy_ld, 0.0f, col, cc, (int64_t)Kq * cc);
                    col2im(col, cc, dx, n0, win, ww, v0 > 0 ? v0 : 0, v1 < in_h ? v1 : in_h, r0, r1, w_out);
                }
            }
        else { /* g images gathered side by side */
            if (dwt) {
                for (int i = 0; i < g; i++) im2col(col + (int64_t)i * cols, ld, x, n0 + i, win, ww, 0, in_h, a, b, w_out);
                dw_product(Q, cq, Kq, ld, dyn, dy_ld, (int64_t)cq * dy_ld, col, ld, (int64_t)Kq * ld, dwt);
            }
            if (dx->p && !flipped) {
                grouped_sgemm(Q, CblasTrans, CblasNoTrans, Kq, ld, cq, wt, Kq, (int64_t)cq * Kq, dyn, dy_ld, (int64_t)cq * dy_ld,
                              0.0f, col, ld, (int64_t)Kq * ld);
                for (int i = 0; i < g; i++) col2im(col + (int64_t)i * cols, ld, dx, n0 + i, win, ww, 0, in_h, a, b, w_out);
            }
        }
    }
    if (flipped) dxf_backward(c, in_h);
}

/* Transposed convolution (ConvTranspose2d) on output rows [a, b): the adjoint of the conv C of its
 * own window (net_convt_window: k, s, p, d), which maps this layer's output space to its input
 * space, and whose weight layout (C_out_C = C_in, C_in_C / Q = C_out / Q, k, k) is this layer's.
 * [lo, hi) are the input rows that rows [a, b) read (net_window_rows of the mirrored window l->win,
 * clipped: ops_in_rows), cols = (hi - lo) * W_in, an image at a time, K = C_out * k * k:
 *   forward          col (K, cols) = w^T x x[lo, hi); y[a, b) = col2im(col) kept to rows [a, b)
 *   backward filter  col = im2col(dy) over C's output rows [lo, hi), dy's rows outside [a, b) read
 *                    as zero (they are other bands', which add their own share); dw += x x col^T
 *   backward data    dx[lo, hi) += w x col
 * so bands, which overlap in the input rows they read, add up to the whole map's gradients. */
void convt_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window own = net_convt_window(l);
    const ten *x = &c->x[0], *y = &c->y;
    int a = c->a, b = c->b, lo, hi;
    ops_in_rows(c, &lo, &hi);
    cpu_check_rows(x, lo, hi, c->in_h[0]);
    cpu_check_rows(y, a, b, l->h);
    int Q = l->u.conv.groups, cq = x->c / Q, Kq = l->c * own.k * own.k / Q;
    int cols = (hi - lo) * x->w;
    int64_t x_plane = (int64_t)x->h * x->w, len = (int64_t)(b - a) * y->w;
    const float *bias = l->u.conv.bias ? c->w + (int64_t)x->c * Kq : NULL;
    if (cols) CHECK(c->ws != NULL);
    for (int n = 0; n < x->n; n++) {
        for (int co = 0; co < y->c; co++) {
            float *yr = cpu_row(y, n, co, a), v = bias ? bias[co] : 0.0f;
            for (int64_t i = 0; i < len; i++) yr[i] = v;
        }
        if (!cols) continue;
        grouped_sgemm(Q, CblasTrans, CblasNoTrans, Kq, cols, cq, c->w, Kq, (int64_t)cq * Kq, cpu_row(x, n, 0, lo), (int)x_plane,
                      cq * x_plane, 0.0f, c->ws, cols, (int64_t)Kq * cols);
        col2im(c->ws, cols, y, n, own, own, a, b, lo, hi, x->w);
    }
}

void convt_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    net_window own = net_convt_window(l);
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy;
    int a = c->a, b = c->b, lo, hi;
    ops_in_rows(c, &lo, &hi);
    cpu_check_rows(dy, a, b, l->h);
    int c_in = dx->p ? dx->c : x->c, Q = l->u.conv.groups, cq = c_in / Q, Kq = l->c * own.k * own.k / Q;
    int cols = (hi - lo) * (dx->p ? dx->w : x->w);
    float *dwt = c->dw;
    if (dwt) cpu_check_rows(x, lo, hi, c->in_h[0]);
    if (dx->p) cpu_dx_begin(c, 0), cpu_check_rows(dx, lo, hi, c->in_h[0]);
    if (cols) CHECK(c->ws != NULL);
    int64_t len = (int64_t)(b - a) * dy->w;
    for (int n = 0; n < dy->n; n++) {
        if (dwt && l->u.conv.bias) {
            float *db = dwt + (int64_t)c_in * Kq;
            for (int co = 0; co < dy->c; co++) db[co] += cpu_sum(cpu_row(dy, n, co, a), len);
        }
        if (!cols) continue;
        im2col(c->ws, cols, dy, n, own, own, a, b, lo, hi, cols / (hi - lo));
        if (dwt)
            dw_product(Q, cq, Kq, cols, cpu_row(x, n, 0, lo), (int)((int64_t)x->h * x->w), cq * (int64_t)x->h * x->w, c->ws, cols,
                       (int64_t)Kq * cols, dwt);
        if (dx->p)
            grouped_sgemm(Q, CblasNoTrans, CblasNoTrans, cq, cols, Kq, c->w, Kq, (int64_t)cq * Kq, c->ws, cols, (int64_t)Kq * cols,
                          1.0f, cpu_row(dx, n, 0, lo), (int)((int64_t)dx->h * dx->w), cq * (int64_t)dx->h * dx->w);
    }
}

/* Fully connected: y (N, out) = x (N, in) w^T + bias, in = C*H*W of whole maps. */
void fc_cpu_forward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int N = x->n, in = x->c * x->h * x->w, out = l->u.fc.c_out;
    CHECK(x->row0 == 0 && x->h == c->in_h[0] && c->a == 0 && c->b == 1);
    CHECK(y->n == N && y->c * y->h * y->w == out);
    const float *wt = c->w;                                              /* (out, in) */
    const float *bias = l->u.fc.bias ? c->w + (int64_t)out * in : NULL; /* (out) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x->p, in, wt, in, 0.0f, y->p, out);
    if (bias)
        for (int n = 0; n < N; n++)
            for (int o = 0; o < out; o++) y->p[(int64_t)n * out + o] += bias[o];
}

void fc_cpu_backward(const ops_call *c)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *dx = &c->dx[0], *dy = &c->dy; /* dy (N, out); dx like x */
    int N = dy->n, out = l->u.fc.c_out;
    CHECK(c->a == 0 && c->b == 1 && dy->c * dy->h * dy->w == out);
    if (c->dw) {
        int in = x->c * x->h * x->w;
        CHECK(x->row0 == 0 && x->h == c->in_h[0]);
        /* dw (out, in) += dy^T (out, N) x x (N, in); dbias += column sums of dy */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy->p, out, x->p, in, 1.0f, c->dw, in);
        if (l->u.fc.bias) {
            float *db = c->dw + (int64_t)out * in;
            for (int o = 0; o < out; o++) {
                float s = 0.0f;
                for (int n = 0; n < N; n++) s += dy->p[(int64_t)n * out + o];
                db[o] += s;
            }
        }
    }
    if (dx->p) {
        int in = dx->c * dx->h * dx->w;
        CHECK(dx->row0 == 0 && dx->h == c->in_h[0]);
        /* dx (N, in) (+)= dy (N, out) x w (out, in) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy->p, out, c->w, in,
                    c->dx_acc[0] ? 1.0f : 0.0f, dx->p, in);
    }
}
