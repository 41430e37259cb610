/* kind: the table of layer-kind facts (kind.h) and the few functions that read it: shape
 * inference per kind, auxiliary bytes, FLOPs, parameter tensors. Shapes are per image (C, H, W);
 * sizes that reach bytes are int64. */
#include "sim/net/kind.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define OFF(field) offsetof(net_layer, field)

/* --- shapes ----------------------------------------------------------------------------------- */

static const net_layer *input_of(const net *n, int i, int j) { return &n->layers[n->layers[i].in[j]]; }

static void same_shape(net_layer *l, const net_layer *x) { l->c = x->c, l->h = x->h, l->w = x->w; }

static int infer_input(net *n, int i, const char *where, err *e)
{
    (void)where, (void)e;
    net_layer *l = &n->layers[i];
    l->c = l->u.input.c, l->h = l->u.input.h, l->w = l->u.input.w;
    return 0;
}

/* Conv and pools: a sliding window along H and W. */
/* "3" when both axes agree, else "1x7" (H, then W), into buf (24 bytes). */
static const char *pair(int h, int w, char *buf)
{
    if (h == w) snprintf(buf, 24, "%d", h);
    else snprintf(buf, 24, "%dx%d", h, w);
    return buf;
}

static int infer_window(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    net_window win = l->win;
    bool conv = l->kind == NET_CONV;
    if (!conv && win.p * 2 > win.k)
        return err_set(e, "%s: padding %d is more than half the kernel %d", where, win.p, win.k);
    if (!conv) l->win_w = win; /* pools are square */
    net_window ww = l->win_w;
    l->c = conv ? l->u.conv.c_out : x->c;
    l->h = net_window_out(win, x->h);
    l->w = net_window_out(ww, x->w);
    if (l->h < 1 || l->w < 1) {
        char k[24], s[24], p[24], d[24];
        return err_set(e, "%s: output would be empty for a %dx%d input (kernel %s, stride %s, padding %s, dilation %s); use a "
                          "larger --image", where, x->h, x->w, pair(win.k, ww.k, k), pair(win.s, ww.s, s), pair(win.p, ww.p, p),
                       pair(win.d, ww.d, d));
    }
    int G = conv ? l->u.conv.groups : 1;
    if (conv && (x->c % G || l->c % G))
        return err_set(e, "%s: groups=%d must divide the input's %d channels and the output's %d", where, G, x->c, l->c);
    if (conv) { /* sizes checked in floating point before they are counted exactly */
        double weights = (double)x->c / G * l->c * win.k * ww.k, macs = weights * l->h * l->w;
        if (weights > (double)NET_MAX_PARAMS || macs > (double)NET_MAX_MACS)
            return err_set(e, "%s: %s (%.3g) are more than 2^%d", where, weights > (double)NET_MAX_PARAMS ? "its weights" :
                           "its multiply-accumulates per image", weights > (double)NET_MAX_PARAMS ? weights : macs,
                           weights > (double)NET_MAX_PARAMS ? 36 : 52);
        l->params = (int64_t)(x->c / G) * l->c * win.k * ww.k + (l->u.conv.bias ? l->c : 0);
        l->macs = (int64_t)(x->c / G) * win.k * ww.k * l->c * l->h * l->w;
    }
    return 0;
}

/* Transposed convolution: its line's window (k, s, p, d: PyTorch's ConvTranspose2d's) is that of
 * the conv it is the adjoint of; l->win becomes, once, that window's mirror over the input with
 * s - 1 zero rows between its rows (and op more at the bottom): a stride-1 window of k taps, padding
 * d(k-1) - p, which is what the band geometry reads (net.h). Output: (in - 1)s - 2p + d(k-1) + op + 1. */
static int infer_convt(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    if (!l->win.z) {
        net_window w = l->win;
        if (w.p > w.d * (w.k - 1))
            return err_set(e, "%s: padding %d is more than d*(k-1) = %d (it would crop more than the kernel adds)", where, w.p,
                           w.d * (w.k - 1));
        if (w.op >= w.s && w.op >= w.d)
            return err_set(e, "%s: output padding op=%d must be smaller than the stride %d or the dilation %d", where, w.op, w.s, w.d);
        l->win = (net_window){w.k, 1, w.d * (w.k - 1) - w.p, w.d, w.s, true, w.op};
    }
    net_window own = net_convt_window(l);
    int G = l->u.conv.groups;
    l->c = l->u.conv.c_out;
    if (x->c % G || l->c % G)
        return err_set(e, "%s: groups=%d must divide the input's %d channels and the output's %d", where, G, x->c, l->c);
    double up = ((double)x->h - 1) * own.s + own.d * (own.k - 1) + l->win.op + 1;
    if (up > INT_MAX / 4 || ((double)x->w - 1) * own.s + own.d * (own.k - 1) + l->win.op + 1 > INT_MAX / 4)
        return err_set(e, "%s: a %dx%d input upsampled %d times is more than %d rows or columns", where, x->h, x->w, own.s, INT_MAX / 4);
    l->h = net_window_out(l->win, x->h);
    l->w = net_window_out(l->win, x->w);
    if (l->h < 1 || l->w < 1) return err_set(e, "%s: output would be empty for a %dx%d input", where, x->h, x->w);
    double weights = (double)x->c * (l->c / G) * own.k * own.k, macs = weights * x->h * x->w;
    if (weights > (double)NET_MAX_PARAMS || macs > (double)NET_MAX_MACS)
        return err_set(e, "%s: %s (%.3g) are more than 2^%d", where, weights > (double)NET_MAX_PARAMS ? "its weights" :
                       "its multiply-accumulates per image", weights > (double)NET_MAX_PARAMS ? weights : macs,
                       weights > (double)NET_MAX_PARAMS ? 36 : 52);
    l->params = (int64_t)x->c * (l->c / G) * own.k * own.k + (l->u.conv.bias ? l->c : 0);
    l->macs = (int64_t)x->c * (l->c / G) * own.k * own.k * x->h * x->w; /* every input value times each tap it feeds */
    return 0;
}

static int infer_pointwise(net *n, int i, const char *where, err *e)
{
    (void)where, (void)e;
    same_shape(&n->layers[i], input_of(n, i, 0));
    return 0;
}

static int infer_dropout(net *n, int i, const char *where, err *e)
{
    if (!(n->layers[i].u.dropout.p < 1.0f)) return err_set(e, "%s: p=%g drops everything (p must be below 1)", where, n->layers[i].u.dropout.p);
    return infer_pointwise(n, i, where, e);
}

/* Upsampling by a whole number s, to in * s rows and columns whatever the window says.
 * Nearest: row v of the output is row floor(v / s) of the input (a window of one row over the input
 * repeated s times). Bilinear: output row o reads input rows i0 and i1 = i0 + 1 (engine/act.h:
 * lerp_taps), i0 within one row of floor(o / s): (o + 1/2) / s - 1/2 lies in (o/s - 1/2, o/s],
 * o (in - 1) / (out - 1) in (o/s - 1, o/s], and their float values may land a row lower at a whole
 * number; so its window holds rows floor(o / s) - 1 to floor(o / s) + 2 (clipped to the map): 4 taps
 * s apart from p = s over the input repeated s times, a row or two of margin a band, for reads that
 * are exact in float as PyTorch computes them. */
static int infer_upsample(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    int s = l->u.up.scale;
    if ((int64_t)x->h * s > INT_MAX / 4 || (int64_t)x->w * s > INT_MAX / 4)
        return err_set(e, "%s: a %dx%d input upsampled %d times is more than %d rows or columns", where, x->h, x->w, s, INT_MAX / 4);
    l->win = l->kind == NET_BILINEAR ? (net_window){4, 1, s, s, s} : (net_window){1, 1, 0, 1, s};
    l->c = x->c, l->h = x->h * s, l->w = x->w * s;
    return 0;
}

/* gnorm: groups must divide the channels; lnorm: any. Both: gamma and beta a channel. */
static int infer_norm(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    infer_pointwise(n, i, where, e);
    if (l->kind == NET_GNORM && l->c % l->u.norm.groups)
        return err_set(e, "%s: groups=%d must divide the %d channels", where, l->u.norm.groups, l->c);
    l->params = 2 * (int64_t)l->c;
    return 0;
}

static int infer_bn(net *n, int i, const char *where, err *e)
{
    infer_pointwise(n, i, where, e);
    n->layers[i].params = 2 * (int64_t)n->layers[i].c;
    return 0;
}

static int infer_add(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    for (int j = 1; j < l->n_in; j++) {
        const net_layer *y = input_of(n, i, j);
        if (x->c != y->c || x->h != y->h || x->w != y->w)
            return err_set(e, "%s: inputs '%s' (%dx%dx%d) and '%s' (%dx%dx%d) differ in shape", where, x->name, x->c, x->h,
                           x->w, y->name, y->c, y->h, y->w);
    }
    same_shape(l, x);
    return 0;
}

static int infer_concat(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    int64_t c = 0;
    for (int j = 0; j < l->n_in; j++) {
        const net_layer *y = input_of(n, i, j);
        if (x->h != y->h || x->w != y->w)
            return err_set(e, "%s: inputs '%s' (%dx%d) and '%s' (%dx%d) differ in height or width", where, x->name, x->h, x->w,
                           y->name, y->h, y->w);
        c += y->c;
    }
    if (c > INT_MAX / 4) return err_set(e, "%s: %lld channels is more than %d", where, (long long)c, INT_MAX / 4);
    l->c = (int)c, l->h = x->h, l->w = x->w;
    return 0;
}

/* slice: c channels of its input from `start`; shuffle: all of them, in groups that divide them. */
static int infer_channels(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0);
    same_shape(l, x);
    if (l->kind == NET_SHUFFLE) {
        if (x->c % l->u.shuffle.groups)
            return err_set(e, "%s: groups=%d must divide the input's %d channels", where, l->u.shuffle.groups, x->c);
        return 0;
    }
    if ((int64_t)l->u.slice.start + l->u.slice.c > x->c)
        return err_set(e, "%s: channels %d to %lld are past the input's %d (start=%d c=%d)", where, l->u.slice.start,
                       (long long)l->u.slice.start + l->u.slice.c - 1, x->c, l->u.slice.start, l->u.slice.c);
    l->c = l->u.slice.c;
    return 0;
}

/* Elementwise product of two maps of one shape, or of a map and one value a channel (C, 1, 1) in
 * either place, which scales each channel of the other (squeeze-and-excitation). */
static int infer_mul(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    const net_layer *x = input_of(n, i, 0), *y = input_of(n, i, 1);
    bool xs = x->h == 1 && x->w == 1, ys = y->h == 1 && y->w == 1;
    if (x->c != y->c || (!(x->h == y->h && x->w == y->w) && !xs && !ys))
        return err_set(e, "%s: inputs '%s' (%dx%dx%d) and '%s' (%dx%dx%d): a product takes two maps of one shape, or a map and "
                          "one value a channel (Cx1x1) of as many channels", where, x->name, x->c, x->h, x->w, y->name, y->c, y->h,
                       y->w);
    same_shape(l, ys ? x : y);
    return 0;
}

static int infer_fc(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    int64_t in = net_layer_values(input_of(n, i, 0));
    l->c = l->u.fc.c_out, l->h = 1, l->w = 1;
    if ((double)in * l->c > (double)NET_MAX_PARAMS)
        return err_set(e, "%s: its weights (%lld inputs x %d outputs) are more than 2^36", where, (long long)in, l->c);
    l->params = in * l->c + (l->u.fc.bias ? l->c : 0);
    l->macs = in * l->c;
    return 0;
}

static int infer_gap(net *n, int i, const char *where, err *e)
{
    (void)where, (void)e;
    n->layers[i].c = input_of(n, i, 0)->c, n->layers[i].h = n->layers[i].w = 1;
    return 0;
}

static int infer_apool(net *n, int i, const char *where, err *e)
{
    (void)where, (void)e;
    net_layer *l = &n->layers[i];
    l->c = input_of(n, i, 0)->c, l->h = l->w = l->u.apool.o;
    return 0;
}

/* Softmax + cross-entropy over the input's C*H*W logits of each image: (classes, 1, 1); or, per
 * pixel, over its C channels at each place: (C, H, W), a label a place. */
static int infer_loss(net *n, int i, const char *where, err *e)
{
    net_layer *l = &n->layers[i];
    if (i != n->n - 1 || l->n_out) return err_set(e, "%s: the loss must be the last layer, with no consumer", where);
    if (l->u.loss.pixel) {
        const net_layer *x = input_of(n, i, 0);
        l->c = x->c, l->h = x->h, l->w = x->w;
        return 0;
    }
    int64_t classes = net_layer_values(input_of(n, i, 0));
    if (classes > INT_MAX / 4) return err_set(e, "%s: %lld classes (its input's values per image) is more than %d", where, (long long)classes, INT_MAX / 4);
    l->c = (int)classes, l->h = 1, l->w = 1;
    return 0;
}

/* --- FLOPs ------------------------------------------------------------------------------------ */

static double out_values(const net *n, int i, int rows, int batch)
{
    const net_layer *l = &n->layers[i];
    return (double)batch * l->c * rows * l->w;
}

static double flops_conv(const net *n, int i, int rows, int batch)
{
    net_window w = n->layers[i].win;
    return 2.0 * out_values(n, i, rows, batch) * (input_of(n, i, 0)->c / n->layers[i].u.conv.groups) * w.k * n->layers[i].win_w.k;
}

/* A transposed convolution: 2 FLOPs per multiply-accumulate, its MACs spread evenly over its output rows. */
static double flops_convt(const net *n, int i, int rows, int batch)
{
    const net_layer *l = &n->layers[i];
    return 2.0 * (double)l->macs * batch * rows / l->h;
}

static double flops_fc(const net *n, int i, int rows, int batch)
{
    (void)rows;
    return 2.0 * (double)n->layers[i].macs * batch;
}

static double flops_pool(const net *n, int i, int rows, int batch)
{
    net_window w = n->layers[i].win;
    return out_values(n, i, rows, batch) * w.k * w.k;
}

static double flops_one(const net *n, int i, int rows, int batch) { return out_values(n, i, rows, batch); }
/* n inputs: n - 1 adds a value */
static double flops_add(const net *n, int i, int rows, int batch) { return (n->layers[i].n_in - 1) * out_values(n, i, rows, batch); }
/* bilinear: four products and three sums a value */
static double flops_lerp(const net *n, int i, int rows, int batch) { return 7.0 * out_values(n, i, rows, batch); }
static double flops_bn(const net *n, int i, int rows, int batch) { return 4.0 * out_values(n, i, rows, batch); }
static double flops_loss(const net *n, int i, int rows, int batch) { return 5.0 * out_values(n, i, rows, batch); }

/* Global pools read every input value once. */
static double flops_gpool(const net *n, int i, int rows, int batch)
{
    (void)rows;
    return (double)batch * net_layer_values(input_of(n, i, 0));
}

/* --- parameter tensors (PyTorch's names, shapes and initialization) ---------------------------- */

/* conv: weight (C_out, C_in / groups, k, k) then bias (C_out); fc: weight (out, in) then bias (out). */
static int tensors_product(const net *n, int L, kind_tensor *out)
{
    const net_layer *l = &n->layers[L];
    bool conv = l->kind == NET_CONV, bias = conv ? l->u.conv.bias : l->u.fc.bias;
    int64_t cin = input_of(n, L, 0)->c / (conv ? l->u.conv.groups : 1), kh = l->win.k, kw = l->win_w.k;
    int64_t fan = conv ? cin * kh * kw : net_layer_values(input_of(n, L, 0));
    out[0] = conv ? (kind_tensor){"weight", 4, {l->c, cin, kh, kw}, 0, false, KIND_INIT_FAN_IN, fan}
                  : (kind_tensor){"weight", 2, {l->c, fan}, 0, false, KIND_INIT_FAN_IN, fan};
    if (!bias) return 1;
    out[1] = (kind_tensor){"bias", 1, {l->c}, l->c * fan, false, KIND_INIT_FAN_IN, fan};
    return 2;
}

/* convt: weight (C_in, C_out / groups, k, k) then bias (C_out), PyTorch's ConvTranspose2d (whose
 * fan-in, for both, is the weight's second dimension times k*k). */
static int tensors_convt(const net *n, int L, kind_tensor *out)
{
    const net_layer *l = &n->layers[L];
    int64_t cin = input_of(n, L, 0)->c, cq = l->c / l->u.conv.groups, kk = l->win.k, fan = cq * kk * kk;
    out[0] = (kind_tensor){"weight", 4, {cin, cq, kk, kk}, 0, false, KIND_INIT_FAN_IN, fan};
    if (!l->u.conv.bias) return 1;
    out[1] = (kind_tensor){"bias", 1, {l->c}, cin * fan, false, KIND_INIT_FAN_IN, fan};
    return 2;
}

/* scale: a factor a channel, (C, 1, 1) as ConvNeXt's layer_scale (starting at 1 here; ConvNeXt
 * sets 1e-6). */
static int tensors_scale(const net *n, int L, kind_tensor *out)
{
    out[0] = (kind_tensor){"weight", 3, {n->layers[L].c, 1, 1}, 0, false, KIND_INIT_ONE, 0};
    return 1;
}

static int infer_scale(net *n, int i, const char *where, err *e)
{
    infer_pointwise(n, i, where, e);
    n->layers[i].params = n->layers[i].c;
    return 0;
}

/* gnorm, lnorm: gamma then beta (PyTorch's GroupNorm and LayerNorm: weight ones, bias zeros). */
static int tensors_norm(const net *n, int L, kind_tensor *out)
{
    int64_t c = n->layers[L].c;
    out[0] = (kind_tensor){"weight", 1, {c}, 0, false, KIND_INIT_ONE, 0};
    out[1] = (kind_tensor){"bias", 1, {c}, c, false, KIND_INIT_ZERO, 0};
    return 2;
}

/* bn: gamma then beta; running mean then variance in the running-statistics buffer. */
static int tensors_bn(const net *n, int L, kind_tensor *out)
{
    int64_t c = n->layers[L].c;
    out[0] = (kind_tensor){"weight", 1, {c}, 0, false, KIND_INIT_ONE, 0};
    out[1] = (kind_tensor){"bias", 1, {c}, c, false, KIND_INIT_ZERO, 0};
    out[2] = (kind_tensor){"running_mean", 1, {c}, 0, true, KIND_INIT_ZERO, 0};
    out[3] = (kind_tensor){"running_var", 1, {c}, c, true, KIND_INIT_ONE, 0};
    return 4;
}

/* --- the table -------------------------------------------------------------------------------- */

const kind_traits kind_table[NET_NKIND] = {
    [NET_INPUT] = {.name = "input", .min_in = 0, .max_in = 0, .rowwise = true, .fwd_value = true, .infer = infer_input,
                   .flops = flops_one,
                   .keys = {{"c", KIND_KEY_COUNT, OFF(u.input.c), true}, {"h", KIND_KEY_COUNT, OFF(u.input.h), true},
                            {"w", KIND_KEY_COUNT, OFF(u.input.w), true}}},
    [NET_CONV] = {.name = "conv", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true,
                  .fwd_value = true, .product = true, .infer = infer_window, .flops = flops_conv,
                  .tensors = tensors_product,
                  .keys = {{"c", KIND_KEY_COUNT, OFF(u.conv.c_out), true}, {"k", KIND_KEY_COUNT, OFF(win.k), true, 0, NULL, OFF(win_w.k)},
                           {"s", KIND_KEY_COUNT, OFF(win.s), false, 1, NULL, OFF(win_w.s)},
                           {"p", KIND_KEY_SIZE, OFF(win.p), false, 0, NULL, OFF(win_w.p)},
                           {"d", KIND_KEY_COUNT, OFF(win.d), false, 1, NULL, OFF(win_w.d)},
                           {"bias", KIND_KEY_BOOL, OFF(u.conv.bias), false, 1, NULL},
                           {"groups", KIND_KEY_COUNT, OFF(u.conv.groups), false, 1, NULL}}},
    [NET_RELU] = {.name = "relu", .min_in = 1, .max_in = 1, .rowwise = true, .inplace = true, .keeps_y = true, .reads = KIND_READS_SIGN,
                  .infer = infer_pointwise, .flops = flops_one},
    [NET_MAXPOOL] = {.name = "maxpool", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .reads = KIND_READS_SHAPE,
                     .aux = KIND_AUX_ARGMAX, .aux_optional = true, .aux_rebuilt = true, .fwd_value = true,
                     .infer = infer_window, .flops = flops_pool,
                     .keys = {{"k", KIND_KEY_COUNT, OFF(win.k), true}, {"s", KIND_KEY_COUNT, OFF(win.s), false, 0, "k"},
                              {"p", KIND_KEY_SIZE, OFF(win.p), false, 0, NULL}, {"ceil", KIND_KEY_BOOL, OFF(win.ceil), false, 0, NULL}}},
    [NET_AVGPOOL] = {.name = "avgpool", .min_in = 1, .max_in = 1, .rowwise = true, .fwd_value = true,
                     .infer = infer_window, .flops = flops_pool,
                     .keys = {{"k", KIND_KEY_COUNT, OFF(win.k), true}, {"s", KIND_KEY_COUNT, OFF(win.s), false, 0, "k"},
                              {"p", KIND_KEY_SIZE, OFF(win.p), false, 0, NULL}}},
    [NET_BN] = {.name = "bn", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .aux = KIND_AUX_STATS,
                .aux_rebuilt = true, .running = true, .map_stats = true, .infer = infer_bn, .flops = flops_bn, .tensors = tensors_bn,
                .keys = {{"eps", KIND_KEY_FLOAT, OFF(u.bn.eps), false, 1e-5, NULL},
                         {"momentum", KIND_KEY_FLOAT, OFF(u.bn.momentum), false, 0.1, NULL}}},
    [NET_FC] = {.name = "fc", .min_in = 1, .max_in = 1, .keeps_x = true, .fwd_value = true, .product = true,
                .infer = infer_fc, .flops = flops_fc, .tensors = tensors_product,
                .keys = {{"c", KIND_KEY_COUNT, OFF(u.fc.c_out), true}, {"bias", KIND_KEY_BOOL, OFF(u.fc.bias), false, 1, NULL}}},
    [NET_ADD] = {.name = "add", .min_in = 2, .max_in = NET_MAX_IN, .rowwise = true, .infer = infer_add, .flops = flops_add},
    [NET_GAP] = {.name = "gap", .min_in = 1, .max_in = 1, .infer = infer_gap, .flops = flops_gpool},
    [NET_APOOL] = {.name = "apool", .min_in = 1, .max_in = 1, .infer = infer_apool, .flops = flops_gpool,
                   .keys = {{"o", KIND_KEY_COUNT, OFF(u.apool.o), true}}},
    [NET_LOSS] = {.name = "loss", .min_in = 1, .max_in = 1, .aux = KIND_AUX_PROBS, .labels = true, .infer = infer_loss,
                  .flops = flops_loss, .keys = {{"pixel", KIND_KEY_BOOL, OFF(u.loss.pixel), false, 0, NULL}}},
    /* What each activation's backward keeps is what PyTorch's autograd saves (so the torch plan
     * follows): the result for sigmoid, and for relu6 and leakyrelu, which torchvision runs in
     * place (Hardtanh and LeakyReLU backward read the result then); the input for the others. */
    [NET_SIGMOID] = {.name = "sigmoid", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_y = true, .infer = infer_pointwise,
                     .flops = flops_one},
    [NET_RELU6] = {.name = "relu6", .min_in = 1, .max_in = 1, .rowwise = true, .inplace = true, .keeps_y = true,
                   .infer = infer_pointwise, .flops = flops_one},
    [NET_LEAKY] = {.name = "leakyrelu", .min_in = 1, .max_in = 1, .rowwise = true, .inplace = true, .keeps_y = true,
                   .reads = KIND_READS_SIGN, .infer = infer_pointwise, .flops = flops_one,
                   .keys = {{"slope", KIND_KEY_FLOAT, OFF(u.leaky.slope), false, 0.01, NULL}}},
    [NET_SILU] = {.name = "silu", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .infer = infer_pointwise,
                  .flops = flops_one},
    [NET_GELU] = {.name = "gelu", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .infer = infer_pointwise,
                  .flops = flops_one},
    [NET_HSWISH] = {.name = "hardswish", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .infer = infer_pointwise,
                    .flops = flops_one},
    /* keeps only its mask, as PyTorch's native_dropout (a bool a value); the mask is a function of
     * the run's seed, the iteration, the layer and the element's place in the whole map (engine/act.h),
     * so every band and every recomputation draws the same one. sample=1: one draw an image, which
     * keeps or drops the whole sample (torchvision's StochasticDepth, mode "row"; its mask a byte an image) */
    [NET_DROPOUT] = {.name = "dropout", .min_in = 1, .max_in = 1, .rowwise = true, .aux = KIND_AUX_MASK, .aux_optional = true,
                     .aux_rebuilt = true, .infer = infer_dropout, .flops = flops_one,
                     .keys = {{"p", KIND_KEY_FLOAT, OFF(u.dropout.p), false, 0.5, NULL},
                              {"sample", KIND_KEY_BOOL, OFF(u.dropout.sample), false, 0, NULL}}},
    /* its backward sums each input value's scale x scale copies' gradients: it keeps nothing */
    /* copies its inputs' channels into one map; its backward hands each input its channels of the
     * gradient, reading nothing kept */
    [NET_CONCAT] = {.name = "concat", .min_in = 2, .max_in = NET_MAX_IN, .rowwise = true, .infer = infer_concat, .flops = flops_one},
    /* channel selections copy each output channel from one input channel (net_channel_src); their
     * backward hands each its gradient back (zero to the channels a slice leaves), reading nothing kept */
    [NET_SLICE] = {.name = "slice", .min_in = 1, .max_in = 1, .rowwise = true, .infer = infer_channels, .flops = flops_one,
                   .keys = {{"start", KIND_KEY_SIZE, OFF(u.slice.start), false, 0, NULL},
                            {"c", KIND_KEY_COUNT, OFF(u.slice.c), true}}},
    [NET_SHUFFLE] = {.name = "shuffle", .min_in = 1, .max_in = 1, .rowwise = true, .infer = infer_channels, .flops = flops_one,
                     .keys = {{"groups", KIND_KEY_COUNT, OFF(u.shuffle.groups), true}}},
    [NET_HSIGMOID] = {.name = "hardsigmoid", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .infer = infer_pointwise,
                      .flops = flops_one},
    /* keeps both inputs (each one's gradient is the other times dy); whole maps: a channel scale
     * is a pooled summary of the whole map (SE), so a row segment ends before it */
    [NET_MUL] = {.name = "mul", .min_in = 2, .max_in = 2, .keeps_x = true, .infer = infer_mul, .flops = flops_one},
    /* keeps its input for the weight gradient, as a conv */
    [NET_CONVT] = {.name = "convt", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .fwd_value = true, .product = true,
                   .infer = infer_convt, .flops = flops_convt, .tensors = tensors_convt,
                   .keys = {{"c", KIND_KEY_COUNT, OFF(u.conv.c_out), true}, {"k", KIND_KEY_COUNT, OFF(win.k), true},
                            {"s", KIND_KEY_COUNT, OFF(win.s), false, 1, NULL}, {"p", KIND_KEY_SIZE, OFF(win.p), false, 0, NULL},
                            {"op", KIND_KEY_SIZE, OFF(win.op), false, 0, NULL}, {"d", KIND_KEY_COUNT, OFF(win.d), false, 1, NULL},
                            {"bias", KIND_KEY_BOOL, OFF(u.conv.bias), false, 1, NULL},
                            {"groups", KIND_KEY_COUNT, OFF(u.conv.groups), false, 1, NULL}}},
    /* Normalizations that keep, as PyTorch's native_group_norm and native_layer_norm, the input and
     * the mean and inverse std they used. gnorm's statistics are each image's over whole maps: a row
     * segment ends before it (not gathered over bands as bn's are). lnorm's are each place's over
     * its channels: rowwise, and exact under any band. */
    [NET_GNORM] = {.name = "gnorm", .min_in = 1, .max_in = 1, .keeps_x = true, .aux = KIND_AUX_STATS, .aux_rebuilt = true,
                   .infer = infer_norm, .flops = flops_bn, .tensors = tensors_norm,
                   .keys = {{"groups", KIND_KEY_COUNT, OFF(u.norm.groups), true},
                            {"eps", KIND_KEY_FLOAT, OFF(u.norm.eps), false, 1e-5, NULL}}},
    [NET_LNORM] = {.name = "lnorm", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .aux = KIND_AUX_PLACE,
                   .aux_rebuilt = true, .infer = infer_norm, .flops = flops_bn, .tensors = tensors_norm,
                   .keys = {{"eps", KIND_KEY_FLOAT, OFF(u.norm.eps), false, 1e-5, NULL}}},
    /* y = x * w[c]: keeps its input for dw; a product by a parameter, counted as no MAC (as PyTorch's
     * hooks count a mul) */
    [NET_SCALE] = {.name = "scale", .min_in = 1, .max_in = 1, .rowwise = true, .keeps_x = true, .infer = infer_scale,
                   .flops = flops_one, .tensors = tensors_scale},
    /* keeps nothing: its weights follow from the sizes */
    [NET_BILINEAR] = {.name = "bilinear", .min_in = 1, .max_in = 1, .rowwise = true, .infer = infer_upsample, .flops = flops_lerp,
                      .keys = {{"scale", KIND_KEY_COUNT, OFF(u.up.scale), false, 2, NULL},
                               {"align", KIND_KEY_BOOL, OFF(u.up.align), false, 0, NULL}}},
    [NET_UPSAMPLE] = {.name = "upsample", .min_in = 1, .max_in = 1, .rowwise = true, .infer = infer_upsample, .flops = flops_one,
                      .keys = {{"scale", KIND_KEY_COUNT, OFF(u.up.scale), false, 2, NULL}}},
};

const char *kind_name(net_kind k) { return (k >= 0 && k < NET_NKIND) ? kind_table[k].name : "?"; }

bool kind_torch_copies_x(const net_layer *l) { return l->kind == NET_RELU6 && l->inplace; }

bool kind_torch_pads_x(const net_layer *l) { return l->kind == NET_CONV || l->kind == NET_MAXPOOL || l->kind == NET_AVGPOOL; }

bool kind_torch_keeps_x(const net_layer *l, bool torch2)
{
    bool mean = l->kind == NET_GAP || (l->kind == NET_APOOL && l->h == 1 && l->w == 1);
    if (torch2 && mean) return false;
    return l->kind == NET_AVGPOOL || l->kind == NET_APOOL || l->kind == NET_GAP || kind_torch_copies_x(l);
}

int kind_find(const char *name)
{
    for (int k = 0; k < NET_NKIND; k++)
        if (!strcmp(kind_table[k].name, name)) return k;
    return -1;
}

const char *kind_names(void)
{
    static char names[256];
    if (!names[0])
        for (int k = 0; k < NET_NKIND; k++) {
            size_t at = strlen(names);
            snprintf(names + at, sizeof names - at, "%s%s", k ? " " : "", kind_table[k].name);
        }
    return names;
}

int64_t kind_aux_bytes(const net *n, int L, int rows, int batch)
{
    const net_layer *l = &n->layers[L];
    switch (kind_of(l)->aux) {
    case KIND_AUX_ARGMAX: return (int64_t)batch * l->c * rows * l->w * 8;
    case KIND_AUX_STATS: return 2 * (l->kind == NET_GNORM ? (int64_t)batch * l->u.norm.groups : l->c) * 4;
    case KIND_AUX_PLACE: return 2 * (int64_t)batch * rows * l->w * 4;
    case KIND_AUX_PROBS: return (int64_t)batch * l->c * l->h * l->w * 4; /* per pixel: h x w places */
    case KIND_AUX_MASK: return l->u.dropout.sample ? batch : (int64_t)batch * l->c * rows * l->w;
    default: return 0;
    }
}

int64_t kind_running_bytes(const net_layer *l) { return 2 * (int64_t)l->c * 4; }
int64_t kind_sums_bytes(const net_layer *l) { return 2 * (int64_t)l->c * 8; }

int kind_tensors(const net *n, int L, kind_tensor out[KIND_MAX_TENSORS])
{
    const kind_traits *t = kind_of(&n->layers[L]);
    return t->tensors ? t->tensors(n, L, out) : 0;
}
