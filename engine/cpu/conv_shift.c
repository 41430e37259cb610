/* conv_shift: a stride-1 convolution's forward as kh*kw shifted products, without im2col
 * (conv_cpu.c).
 *
 * Lay the input rows a call reads out as rows of Wp = W_in + 2*pw places, pw zeros either side and
 * zero rows where the window hangs over the map's edge: xp (C_in, len_x), its row r input row
 * a - ph + r. Output (o, ow) of rows [a, b) is then flat place j = (o - a)*Wp + ow, and tap t =
 * (ki, kj) reads flat place j + s_t of xp, s_t = dh*ki*Wp + dw*kj, for every j at once:
 *   out (C_out, R*Wp) = sum over t of w_t (C_out, C_in) x xp shifted by s_t
 * The places ow >= W_out of a row read across its end: junk, dropped when out is copied into y
 * (with the bias). Each product reads xp in place, so the copy is C_in's rows where im2col writes
 * C_in*kh*kw of them, which its product then reads back from memory. w_t is a strided slice of w
 * (C_out, C_in, kh, kw), so each tap is packed (C_out, C_in) before its product: all of them once a
 * call where the workspace holds them, else each before its product (the same values either way).
 *
 * Against im2col on a 2-core Xeon (OpenBLAS's SkylakeX kernel; the median of 15 alternating pairs,
 * batch 2 and 8): VGG-16's conv1_2 1.19-1.29x as fast, conv2_x 1.04-1.07x, conv3_2 1.03-1.13x,
 * ResNet-50's 56-wide 3x3 1.08-1.17x. Not taken:
 *   - narrow maps: 28 wide, two junk places a row are 7% more work, and the forward lost up to 6%;
 *   - the data gradient (w_t^T x dy laid out the same way, then added into dx): 0.93-1.15x, no
 *     gain beyond the VM's noise; the filter gradient (9 products of output C_out x C_in): 0.90-1.03x.
 *
 * The choice is the layer's, never a call's: the two ways sum in different orders, and a row plan
 * should compute its rows as `layer` does. When a call's rows chose (VGG-16 2ps:7, whose small bands
 * fell back to im2col), last-bit differences in the activations moved conv1_1's gradient 1e-2 from
 * `layer`'s (tests/test_exact.c; 7e-7 with the choice the layer's). So a layer takes the shifted
 * products only if they fit in the workspace im2col has (sched_workspace_bytes) for every row count,
 * one row upwards; the memory the simulator predicts is the same either way. Not done here: channel
 * groups and strides (im2col). */
#include <string.h>

#include <cblas.h>

#include "engine/cpu/ops_cpu.h"

/* The narrowest map, in output places a row for each junk place, and the fewest input channels
 * (the products' inner length) that take the shifted products. */
enum { SHIFT_MIN_WIDTH_PER_JUNK = 16, SHIFT_MIN_C_IN = 16 };

typedef struct {
    int Wp, T;     /* places a padded row; taps */
    int rows_x;    /* rows of xp: R + dh*(kh - 1) */
    int64_t len_x; /* xp's floats a channel: rows_x*Wp, and the last tap's overrun of the last row */
    int64_t len_y; /* out's: R*Wp */
} shift_geom;

static shift_geom geom_of(const net_layer *l, int R)
{
    net_window win = l->win, ww = l->win_w;
    shift_geom g = {.Wp = l->w + ww.d * (ww.k - 1), .T = win.k * ww.k, .rows_x = R + win.d * (win.k - 1)};
    g.len_x = (int64_t)g.rows_x * g.Wp + ww.d * (ww.k - 1);
    g.len_y = (int64_t)R * g.Wp;
    return g;
}

static int64_t shift_of(const net_layer *l, const shift_geom *g, int t)
{
    return (int64_t)l->win.d * (t / l->win_w.k) * g->Wp + (int64_t)l->win_w.d * (t % l->win_w.k);
}

/* The workspace floats the shifted forward of R rows needs besides the packed taps: xp and out. */
static int64_t need_of(const net_layer *l, int c_in, int R)
{
    shift_geom g = geom_of(l, R);
    return c_in * g.len_x + l->u.conv.c_out * g.len_y;
}

bool conv_shift_takes(const net_layer *l, int c_in)
{
    net_window win = l->win, ww = l->win_w;
    int c_out = l->u.conv.c_out, junk = ww.d * (ww.k - 1), T = win.k * ww.k;
    if (l->kind != NET_CONV || win.s != 1 || ww.s != 1 || l->u.conv.groups != 1 || T == 1 || c_in < SHIFT_MIN_C_IN) return false;
    if ((int64_t)junk * SHIFT_MIN_WIDTH_PER_JUNK > l->w) return false;
    /* the need (one packed tap too) and im2col's col (C_in*T, R*W_out) are both a + b*R: within it at
     * one row and growing no faster (xp and out each grow by a padded row a channel), within it at
     * every row count */
    int64_t col_row = (int64_t)c_in * T * l->w, Wp = l->w + junk;
    return need_of(l, c_in, 1) + (int64_t)c_out * c_in <= col_row && (int64_t)(c_in + c_out) * Wp <= col_row;
}

/* Tap t of w (C_out, C_in, T) into dst (C_out, C_in). */
static void pack_tap(float *dst, const float *w, int c_out, int c_in, int T, int t)
{
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)c_out * c_in))
    for (int co = 0; co < c_out; co++)
        for (int ci = 0; ci < c_in; ci++) dst[(int64_t)co * c_in + ci] = w[((int64_t)co * c_in + ci) * T + t];
}

/* The packed taps, in the workspace past `used` floats: all T packed at once where they fit (all),
 * else room for one (one), which tap_of packs each into before its product. */
typedef struct {
    float *all, *one;
    const float *w;
    int c_out, c_in, T;
} taps;

static taps taps_open(const ops_call *c, int c_in, int T, int64_t used)
{
    int c_out = c->l->u.conv.c_out;
    int64_t size = (int64_t)c_out * c_in, room = c->ws_bytes / (int64_t)sizeof(float) - used;
    CHECK(room >= size);
    taps k = {.w = c->w, .c_out = c_out, .c_in = c_in, .T = T};
    if (room < size * T) return k.one = c->ws + used, k;
    k.all = c->ws + used;
    for (int t = 0; t < T; t++) pack_tap(k.all + t * size, c->w, c_out, c_in, T, t);
    return k;
}

static const float *tap_of(const taps *k, int t)
{
    if (k->all) return k->all + (int64_t)t * k->c_out * k->c_in;
    pack_tap(k->one, k->w, k->c_out, k->c_in, k->T, t);
    return k->one;
}

/* xp (C_in, len_x) <- the rows of image n of x that output rows from `a` read, laid out as above:
 * row r is input row a - ph + r, zero outside [0, in_h). */
static void pad_rows(float *xp, const shift_geom *g, const ten *x, int n, const net_layer *l, int a, int in_h)
{
    int pw = l->win_w.p, w_in = x->w, r0 = a - l->win.p;
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)x->c * g->len_x))
    for (int ci = 0; ci < x->c; ci++) {
        float *d = xp + ci * g->len_x;
        for (int r = 0; r < g->rows_x; r++, d += g->Wp) {
            int ih = r0 + r;
            if (ih < 0 || ih >= in_h) {
                memset(d, 0, (size_t)g->Wp * sizeof(float));
                continue;
            }
            memset(d, 0, (size_t)pw * sizeof(float));
            memcpy(d + pw, cpu_row(x, n, ci, ih), (size_t)w_in * sizeof(float));
            memset(d + pw + w_in, 0, (size_t)(g->Wp - pw - w_in) * sizeof(float));
        }
        memset(d, 0, (size_t)(g->len_x - (int64_t)g->rows_x * g->Wp) * sizeof(float));
    }
}

void conv_shift_forward(const ops_call *c, const float *bias)
{
    const net_layer *l = c->l;
    const ten *x = &c->x[0], *y = &c->y;
    int a = c->a, R = c->b - a, c_in = x->c, c_out = l->u.conv.c_out, w_out = l->w;
    shift_geom g = geom_of(l, R);
    float *xp = c->ws, *out = xp + c_in * g.len_x;
    taps k = taps_open(c, c_in, g.T, need_of(l, c_in, R));
    for (int n = 0; n < x->n; n++) {
        pad_rows(xp, &g, x, n, l, a, c->in_h[0]);
        for (int t = 0; t < g.T; t++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, c_out, (int)g.len_y, c_in, 1.0f, tap_of(&k, t), c_in,
                        xp + shift_of(l, &g, t), (int)g.len_x, t ? 1.0f : 0.0f, out, (int)g.len_y);
#pragma omp parallel for schedule(static) if (cpu_parallel((int64_t)c_out * g.len_y))
        for (int co = 0; co < c_out; co++)
            for (int o = 0; o < R; o++) {
                const float *s = out + co * g.len_y + (int64_t)o * g.Wp;
                float *yr = cpu_row(y, n, co, a + o), v = bias ? bias[co] : 0.0f;
                for (int ow = 0; ow < w_out; ow++) yr[ow] = s[ow] + v;
            }
    }
}
