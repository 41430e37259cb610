/* ops_cpu: what the files of the CPU backend share. ops_cpu.c holds the table, the pointwise
 * (relu, mul, scale), loss and dropout kernels and the optimizers; act_cpu.c the other
 * activations; pool_cpu.c pooling and resampling; conv_cpu.c the two kernels that are matrix
 * products (convolution and fully connected), through CBLAS sgemm, with conv_shift.c (a stride-1
 * forward without im2col) and conv_dw.c (depthwise, no products); bn_cpu.c the normalizations;
 * join_cpu.c add, concat and the channel selections.
 *
 * Conventions (those of ops.h): rows are full-map indices; a tensor view holds rows
 * [row0, row0 + h). Weight gradients are += across bands; an input gradient is = for its first
 * writer (the whole view zeroed first) and += after.
 * Not here: anything a caller outside engine/cpu should use (that is ops.h). */
#ifndef LRCNN_OPS_CPU_H
#define LRCNN_OPS_CPU_H

#include "engine/ops.h"

/* Whether a loop touching `values` floats is worth an OpenMP parallel region (its `if` clause):
 * below 64 Ki values, waking the team costs more than the work, and a 32x32 net is nearly all such
 * loops. Every parallel loop here gives each thread whole channels or elements, so the split (or
 * none) never changes a result. */
static inline bool cpu_parallel(int64_t values) { return values >= 65536; }

/* The sum of p[0, n) in float, over CPU_SUM_LANES running sums that the compiler keeps in vector
 * registers, added in lane order at the end: a fixed order, so the same on every run and thread
 * count. One running sum would be a chain of dependent adds, each waiting out the adder's latency:
 * it made a bias gradient (VGG-16 conv1_1's 64 channels of 50,176 values an image) cost twice its
 * filter product. */
enum { CPU_SUM_LANES = 16 };

static inline float cpu_sum(const float *p, int64_t n)
{
    float lane[CPU_SUM_LANES] = {0}, s = 0.0f;
    int64_t i = 0;
    for (; i + CPU_SUM_LANES <= n; i += CPU_SUM_LANES)
        for (int j = 0; j < CPU_SUM_LANES; j++) lane[j] += p[i + j];
    for (int j = 0; j < CPU_SUM_LANES; j++) s += lane[j];
    for (; i < n; i++) s += p[i];
    return s;
}

/* Row `row` (a full-map index) of channel c of image n in view t. Inline: the kernels ask it in
 * their inner loops (a call per window row was a sixth of the max pool's time). */
static inline float *cpu_row(const ten *t, int n, int c, int row)
{
    return t->p + (((int64_t)n * t->c + c) * t->h + (row - t->row0)) * t->w;
}

/* CHECKs that the rows of [lo, hi) that are not padding (inside [0, full_h)) lie in view t. */
void cpu_check_rows(const ten *t, int lo, int hi, int full_h);

/* Before a backward writes dx[j]: zeroes the whole view unless the call accumulates into it. */
void cpu_dx_begin(const ops_call *c, int j);

/* The same for a backward that writes every element of dx[j]'s rows [a, b) exactly once (the
 * pointwise kernels, a 1x1 stride-1 convolution): true when it may store (=) there instead, i.e.
 * the call does not accumulate and the view is exactly those rows, which saves zeroing the view
 * and reading it back; false when it must add (+=), the view zeroed first unless it accumulates. */
bool cpu_dx_store(const ops_call *c, int j);

/* Elements of one channel plane of view t in rows [a, b). */
static inline int64_t cpu_plane_len(const ten *t, int a, int b) { return (int64_t)(b - a) * t->w; }

/* Output columns [*lo, *hi) of kernel column kj (window ww along W) whose input column lies inside
 * the map (w_in wide); the others read padding. Computed once per tap, so the loops over a row
 * carry no bounds test. */
static inline void cpu_valid_cols(net_window ww, int kj, int w_in, int w_out, int *lo, int *hi)
{
    int off = ww.d * kj - ww.p; /* iw = ow * s + off */
    int l = off >= 0 ? 0 : (-off + ww.s - 1) / ww.s;
    int h = w_in - 1 - off < 0 ? 0 : (w_in - 1 - off) / ww.s + 1;
    *lo = l < w_out ? l : w_out;
    *hi = h < *lo ? *lo : h > w_out ? w_out : h;
}

/* The checks an elementwise backward (relu, engine/act.h's kinds) makes of rows [a, b) of m (what it
 * reads, m_h rows in all), dy and dx, and whether it stores into dx rather than adds: in place (dx
 * is dy) it stores, never accumulating into the buffer it reads; else as cpu_dx_store says. */
bool cpu_pointwise_dx_begin(const ops_call *c, const ten *m, int m_h);

/* CHECKs that view t holds its whole map (fc, gap, apool, loss, mul). */
void cpu_check_full(const ten *t, int full_h);

void act_cpu_forward(const ops_call *c);
void act_cpu_backward(const ops_call *c);
void conv_cpu_forward(const ops_call *c);
void conv_cpu_backward(const ops_call *c);
/* A stride-1 convolution's forward as shifted products (conv_shift.c): whether layer l (c_in input
 * channels) takes them, whatever rows a call computes; a call's forward (y = conv + bias, bias NULL:
 * none). */
bool conv_shift_takes(const net_layer *l, int c_in);
void conv_shift_forward(const ops_call *c, const float *bias);
/* Whether convolution l (c_in input channels w_in wide) takes its data gradient as a forward
 * convolution of dy through the flipped window, for every call at this batch (conv_cpu.c). */
bool conv_dxf_takes(const net_layer *l, int c_in, int w_in, int batch);
/* A depthwise convolution directly (conv_dw.c): whether layer l takes that path (groups = C_in =
 * C_out), its forward, and its backward once conv_cpu_backward has checked the rows and begun dx. */
bool conv_dw_takes(const net_layer *l, int c_in);
void conv_dw_forward(const ops_call *c, const float *bias);
void conv_dw_backward(const ops_call *c);
void convt_cpu_forward(const ops_call *c);
void convt_cpu_backward(const ops_call *c);
void fc_cpu_forward(const ops_call *c);
void fc_cpu_backward(const ops_call *c);
void bn_cpu_forward(const ops_call *c);
void bn_cpu_backward(const ops_call *c);
void bn_cpu_stats(const ops_call *c, ops_stats what);
void gnorm_cpu_forward(const ops_call *c);
void gnorm_cpu_backward(const ops_call *c);
void lnorm_cpu_forward(const ops_call *c);
void lnorm_cpu_backward(const ops_call *c);
void maxpool_cpu_forward(const ops_call *c);
void maxpool_cpu_backward(const ops_call *c);
void avgpool_cpu_forward(const ops_call *c);
void avgpool_cpu_backward(const ops_call *c);
void gap_cpu_forward(const ops_call *c);
void gap_cpu_backward(const ops_call *c);
void apool_cpu_forward(const ops_call *c);
void apool_cpu_backward(const ops_call *c);
void upsample_cpu_forward(const ops_call *c);
void upsample_cpu_backward(const ops_call *c);
void bilinear_cpu_forward(const ops_call *c);
void bilinear_cpu_backward(const ops_call *c);
void add_cpu_forward(const ops_call *c);
void add_cpu_backward(const ops_call *c);
void concat_cpu_forward(const ops_call *c);
void concat_cpu_backward(const ops_call *c);
void channels_cpu_forward(const ops_call *c);  /* slice and shuffle */
void channels_cpu_backward(const ops_call *c);

/* The encodings of kept maps (codec_cpu.c; ops.h: encode, decode). */
int64_t cpu_codec_encode(const ops_codec *m, const void *x, void *out, void *scratch);
void cpu_codec_decode(const ops_codec *m, const void *in, void *x);

#endif
