/* dnn: see dnn.h. Pure arithmetic over rows, strides and offsets; tested on the CPU. */
#include "engine/cuda/dnn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/conv_split.h"

#define ALIGN_FLOATS 64 /* staged operands start 256-byte aligned */

static int64_t len_of(band_rows r) { return r.b > r.a ? r.b - r.a : 0; }

/* Rows [r0, r1) of images [i0, i0 + k) of a buffer of c channels, w columns, holding rows `hold`. */
static dnn_tensor view_t(int k, int c, int w, band_rows hold, int r0, int r1)
{
    int64_t h = len_of(hold);
    return (dnn_tensor){k, c, r1 - r0, w, c * h * w, h * w, w};
}

static dnn_ref view_r(dnn_base base, int c, int w, band_rows hold, int i0, int r0)
{
    return (dnn_ref){base, (int64_t)i0 * c * len_of(hold) * w + (int64_t)(r0 - hold.a) * w};
}

static dnn_tensor packed_t(int k, int c, int h, int w) { return (dnn_tensor){k, c, h, w, (int64_t)c * h * w, (int64_t)h * w, w}; }

bool dnn_packed(const dnn_tensor *t) { return t->hs == t->w && t->cs == (int64_t)t->h * t->w && t->ns == t->c * t->cs; }

static int64_t extent(const dnn_tensor *t)
{
    return (int64_t)(t->n - 1) * t->ns + (int64_t)(t->c - 1) * t->cs + (int64_t)(t->h - 1) * t->hs + t->w;
}

void dnn_tensor_str(const dnn_tensor *t, char *out, size_t len)
{
    snprintf(out, len, "%dx%dx%dx%d (strides %lld,%lld,%lld)", t->n, t->c, t->h, t->w, (long long)t->ns, (long long)t->cs,
             (long long)t->hs);
}

static dnn_call *push(dnn_plan *p, dnn_op op)
{
    if (p->n == p->cap) p->call = err_realloc(p->call, (size_t)(p->cap = p->cap * 2 + 16) * sizeof *p->call);
    dnn_call *c = &p->call[p->n++];
    memset(c, 0, sizeof *c);
    c->op = op;
    return c;
}

static void zero(dnn_plan *p, dnn_ref dst, int64_t planes, int64_t len, int64_t stride)
{
    dnn_call *c = push(p, DNN_ZERO);
    c->dst = dst, c->planes = planes, c->len = len, c->dst_stride = stride;
}

static void copy(dnn_plan *p, dnn_ref dst, int64_t ds, dnn_ref src, int64_t ss, int64_t planes, int64_t len, bool acc)
{
    dnn_call *c = push(p, DNN_COPY);
    c->dst = dst, c->dst_stride = ds, c->src = src, c->src_stride = ss, c->planes = planes, c->len = len, c->acc = acc;
}

static dnn_call *conv(dnn_plan *p, dnn_op op, dnn_tensor xt, dnn_ref xr, dnn_tensor yt, dnn_ref yr, int pad, bool acc)
{
    dnn_call *c = push(p, op);
    c->xt = xt, c->xr = xr, c->yt = yt, c->yr = yr, c->pad = pad, c->acc = acc;
    return c;
}

/* Staging slots of one piece, 256-byte aligned, from the start of the staging area. */
typedef struct {
    int64_t used, most;
} slots;

static dnn_ref slot(slots *s, int64_t floats)
{
    dnn_ref r = {DNN_STAGE, s->used};
    s->used += (floats + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS;
    if (s->used > s->most) s->most = s->used;
    return r;
}

/* Whether an input-side operand holding rows `hold` can be read (or written) as rows [v0, hold.b)
 * packed: it starts at v0, and its rows below v1 (if any) change no output of the piece: the
 * piece computes the same rows, and none of its windows reaches the virtual zero rows past v1. */
static bool widens(const conv_piece *q, net_window w, band_rows hold, bool pack)
{
    if (!pack) return false;
    if (hold.a != q->v0 || hold.b < q->v1) return false;
    if (hold.b == q->v1) return true;
    int dk = w.d * (w.k - 1) + 1;
    return (hold.b - q->v0 + 2 * q->pad - dk) / w.s + 1 == q->out && (q->out - 1) * w.s - q->pad + dk <= q->v1 - q->v0;
}

/* The input side (x, or dx: base) of piece q, for images [i0, i0 + k) of a buffer holding rows
 * `hold`: its view, widened to the rows the buffer holds where that changes nothing; *r its place. */
static dnn_tensor input_side(const dnn_step *s, const conv_piece *q, band_rows hold, dnn_base base, int i0, int k, bool pack, dnn_ref *r)
{
    int r1 = widens(q, s->l->win, hold, pack) ? hold.b : q->v1;
    *r = view_r(base, s->c_in, s->in_w, hold, i0, q->v0);
    return view_t(k, s->c_in, s->in_w, hold, q->v0, r1);
}

/* The calls of images [i0, i0 + k): forward. */
static void forward_run(const dnn_step *s, int i0, int k, int pack, dnn_plan *p)
{
    const net_layer *l = s->l;
    int co = l->u.conv.c_out, w = l->w, ci = s->c_in, iw = s->in_w;
    bool fwd = pack & DNN_PACK_FWD;
    conv_piece pc[3];
    int np = conv_split(l->win, s->in_h, s->out.a, s->out.b, pc);
    for (int i = 0; i < np; i++) {
        const conv_piece *q = &pc[i];
        slots st = {0, 0};
        if (q->v0 >= q->v1) { /* reads only padding: the bias alone, added later */
            zero(p, view_r(DNN_Y, co, w, s->y, i0, q->a), (int64_t)k * co, (int64_t)(q->b - q->a) * w, len_of(s->y) * w);
            continue;
        }
        int rows = q->v1 - q->v0;
        dnn_tensor xt = view_t(k, ci, iw, s->x, q->v0, q->v1), yt = view_t(k, co, w, s->y, q->a, q->b);
        dnn_ref xr = view_r(DNN_X, ci, iw, s->x, i0, q->v0);
        if (fwd && !dnn_packed(&xt)) { /* x's rows copied into staging, packed */
            dnn_ref r = slot(&st, (int64_t)k * ci * rows * iw);
            copy(p, r, (int64_t)rows * iw, xr, len_of(s->x) * iw, (int64_t)k * ci, (int64_t)rows * iw, false);
            xt = packed_t(k, ci, rows, iw), xr = r;
        }
        bool stage_y = !conv_piece_direct(q) || (fwd && !dnn_packed(&yt));
        if (!stage_y) {
            conv(p, DNN_CONV_FWD, xt, xr, yt, view_r(DNN_Y, co, w, s->y, i0, q->a), q->pad, false);
        } else { /* cuDNN computes `out` rows into staging; rows [a, b) go to y */
            dnn_ref yr = slot(&st, (int64_t)k * co * q->out * w);
            conv(p, DNN_CONV_FWD, xt, xr, packed_t(k, co, q->out, w), yr, q->pad, false);
            copy(p, view_r(DNN_Y, co, w, s->y, i0, q->a), len_of(s->y) * w, (dnn_ref){DNN_STAGE, yr.at + (int64_t)(q->a - q->o0) * w},
                 (int64_t)q->out * w, (int64_t)k * co, (int64_t)(q->b - q->a) * w, false);
        }
        if (st.most * 4 > p->stage_bytes) p->stage_bytes = st.most * 4;
    }
}

/* The calls of images [i0, i0 + k): backward. */
static void backward_run(const dnn_step *s, int i0, int k, int flags, dnn_plan *p)
{
    bool pack = flags & DNN_PACK;
    const net_layer *l = s->l;
    int co = l->u.conv.c_out, ci = s->c_in, w = l->w, iw = s->in_w;
    bool bias = s->dw && l->u.conv.bias, dx = len_of(s->dx) > 0;
    conv_piece pc[3];
    int np = conv_split(l->win, s->in_h, s->out.a, s->out.b, pc);
    for (int i = 0; i < np; i++) {
        const conv_piece *q = &pc[i];
        slots st = {0, 0};
        bool direct = conv_piece_direct(q), inputs = q->v0 < q->v1;
        if (!inputs && !bias) continue; /* reads only padding: no weight or input gradient */
        /* dy: its rows [a, b) among the `out` rows cuDNN takes, packed */
        dnn_tensor yt = view_t(k, co, w, s->y, q->a, q->b);
        dnn_ref yr = view_r(DNN_DY, co, w, s->y, i0, q->a);
        int out = inputs ? q->out : q->b - q->a;
        if (!direct && inputs) {
            yt = packed_t(k, co, out, w), yr = slot(&st, (int64_t)k * co * out * w);
            zero(p, yr, 1, (int64_t)k * co * out * w, 0);
            copy(p, (dnn_ref){DNN_STAGE, yr.at + (int64_t)(q->a - q->o0) * w}, (int64_t)out * w, view_r(DNN_DY, co, w, s->y, i0, q->a),
                 len_of(s->y) * w, (int64_t)k * co, (int64_t)(q->b - q->a) * w, false);
        } else if (pack && !dnn_packed(&yt)) {
            dnn_ref r = slot(&st, (int64_t)k * co * out * w);
            copy(p, r, (int64_t)out * w, yr, len_of(s->y) * w, (int64_t)k * co, (int64_t)out * w, false);
            yt = packed_t(k, co, out, w), yr = r;
        }
        if (bias) conv(p, DNN_CONV_BWD_BIAS, (dnn_tensor){0}, (dnn_ref){0}, yt, yr, q->pad, true);
        if (!inputs) {
            if (st.most * 4 > p->stage_bytes) p->stage_bytes = st.most * 4;
            continue;
        }
        int rows = q->v1 - q->v0;
        if (s->dw) { /* x: widened to the rows its buffer holds, or packed into staging */
            dnn_ref xr;
            dnn_tensor xt = input_side(s, q, s->x, DNN_X, i0, k, pack, &xr);
            if (pack && !dnn_packed(&xt)) {
                dnn_ref r = slot(&st, (int64_t)k * ci * rows * iw);
                copy(p, r, (int64_t)rows * iw, xr, len_of(s->x) * iw, (int64_t)k * ci, (int64_t)rows * iw, false);
                xt = packed_t(k, ci, rows, iw), xr = r;
            }
            conv(p, DNN_CONV_BWD_FILTER, xt, xr, yt, yr, q->pad, true);
        }
        if (dx) { /* dx: straight into its rows where they are packed, else through staging (beta 0) and added */
            dnn_ref xr;
            dnn_tensor xt = input_side(s, q, s->dx, DNN_DX, i0, k, pack, &xr);
            if (pack && !dnn_packed(&xt)) {
                dnn_ref r = slot(&st, (int64_t)k * ci * rows * iw);
                conv(p, DNN_CONV_BWD_DATA, packed_t(k, ci, rows, iw), r, yt, yr, q->pad, false);
                copy(p, xr, len_of(s->dx) * iw, r, (int64_t)rows * iw, (int64_t)k * ci, (int64_t)rows * iw, true);
            } else {
                conv(p, DNN_CONV_BWD_DATA, xt, xr, yt, yr, q->pad, true);
            }
        }
        if (st.most * 4 > p->stage_bytes) p->stage_bytes = st.most * 4;
    }
}

/* A step that defines dx (it does not add to it) by one backward-data call writing the whole buffer
 * in place (a whole map's `layer` step, most bands' middles): that call takes beta 0 and the zero
 * fill before it goes, two passes over dx fewer. cuDNN's backward data defines every element of
 * its dx, a row or column no window reads as 0. */
static void define_dx_in_place(const dnn_step *s, dnn_plan *p)
{
    if (!s->backward || s->dx_acc || !p->n || p->call[0].op != DNN_ZERO || p->call[0].dst.base != DNN_DX) return;
    int writer = -1;
    for (int i = 1; i < p->n; i++) {
        const dnn_call *c = &p->call[i];
        bool writes = c->op == DNN_CONV_BWD_DATA ? c->xr.base == DNN_DX : (c->op == DNN_ZERO || c->op == DNN_COPY) && c->dst.base == DNN_DX;
        if (!writes) continue;
        if (writer >= 0 || c->op != DNN_CONV_BWD_DATA) return; /* several writers add up: the zeros stay */
        writer = i;
    }
    if (writer < 0) return;
    dnn_call *c = &p->call[writer];
    const dnn_tensor *t = &c->xt;
    if (c->xr.at != 0 || !dnn_packed(t) || (int64_t)t->n * t->ns != (int64_t)s->batch * s->c_in * len_of(s->dx) * s->in_w) return;
    c->acc = false;
    memmove(p->call, p->call + 1, (size_t)(p->n - 1) * sizeof *p->call);
    p->n--;
}

static int64_t limit_of(const dnn_step *s) { return s->limit > 0 ? s->limit : DNN_MAX_ELEMS; }

/* How far past the step's limit the largest descriptor of p is (<= 1: within). */
static double over(const dnn_plan *p, int64_t limit)
{
    double worst = 0;
    for (int i = 0; i < p->n; i++) {
        const dnn_call *c = &p->call[i];
        if (c->op == DNN_ZERO || c->op == DNN_COPY) continue;
        const dnn_tensor *t[2] = {&c->xt, &c->yt};
        for (int j = 0; j < 2; j++) {
            if (!t[j]->n) continue;
            double e = (double)extent(t[j]) / (double)limit;
            double m = (double)t[j]->n * t[j]->c * t[j]->h * t[j]->w / (double)limit;
            if (e > worst) worst = e;
            if (m > worst) worst = m;
        }
    }
    return worst;
}

int dnn_pack_policy(void)
{
    const char *fwd = getenv("LRCNN_CUDNN_PACK_FWD"); /* each time: a lowering may ask from several threads */
    return DNN_PACK | (fwd && !strcmp(fwd, "0") ? 0 : DNN_PACK_FWD);
}

int dnn_conv_plan(const dnn_step *s, int pack, dnn_plan *p, char *why, size_t len)
{
    memset(p, 0, sizeof *p);
    for (int k = s->batch;;) {
        p->n = 0, p->stage_bytes = 0, p->images = k;
        int64_t dx = (int64_t)s->batch * s->c_in * len_of(s->dx) * s->in_w;
        if (s->backward && dx && !s->dx_acc) zero(p, (dnn_ref){DNN_DX, 0}, 1, dx, 0); /* the first writer defines it */
        for (int i0 = 0; i0 < s->batch; i0 += k) {
            int run = s->batch - i0 < k ? s->batch - i0 : k;
            if (s->backward) backward_run(s, i0, run, pack, p);
            else forward_run(s, i0, run, pack, p);
        }
        double r = over(p, limit_of(s));
        if (r <= 1) {
            define_dx_in_place(s, p);
            return 0;
        }
        if (k == 1) {
            snprintf(why, len, "layer '%s': one image's %s tensors are past cuDNN's descriptors (%lld elements at most)",
                     s->l->name, s->backward ? "backward" : "forward", (long long)limit_of(s));
            dnn_plan_free(p);
            return -1;
        }
        int next = (int)((double)k / r);
        k = next < 1 ? 1 : next >= k ? k - 1 : next;
    }
}

void dnn_plan_free(dnn_plan *p)
{
    free(p->call);
    memset(p, 0, sizeof *p);
}

int dnn_query_steps(const net *n, const sched_ws_query *q, dnn_step out[3])
{
    const net_layer *l = &n->layers[q->layer], *in = &n->layers[l->in[0]];
    if (l->kind != NET_CONV || len_of(q->out) <= 0) return 0;
    dnn_step s = {.l = l, .c_in = in->c, .in_h = in->h, .in_w = in->w, .batch = q->batch, .backward = q->backward, .out = q->out,
                  .x = q->x, .y = q->y, .dx = q->dx, .dw = q->backward && q->dw};
    if (q->held) {
        out[0] = s;
        return 1;
    }
    int rows = (int)len_of(q->out), at[3] = {0, (l->h - rows) / 2, l->h - rows}, count = 0;
    for (int i = 0; i < 3; i++) {
        if (at[i] < 0 || (count && at[i] == out[count - 1].out.a)) continue;
        int lo, hi;
        s.out = (band_rows){at[i], at[i] + rows};
        net_window_rows(l->win, s.out.a, s.out.b, &lo, &hi);
        s.x = (band_rows){lo < 0 ? 0 : lo, hi > in->h ? in->h : hi};
        s.y = s.out;
        s.dx = q->backward && in->kind != NET_INPUT ? s.x : (band_rows){0, 0};
        s.dw = q->backward;
        out[count++] = s;
    }
    return count;
}

dnn_step dnn_step_of(const net *n, const sched *s, const sched_step *t)
{
    const net_layer *l = &n->layers[t->layer], *in = &n->layers[l->in[0]];
    bool bwd = t->op == SCHED_BWD;
    band_rows none = {0, 0};
    return (dnn_step){.l = l, .c_in = in->c, .in_h = in->h, .in_w = in->w, .batch = s->batch, .backward = bwd, .out = t->rows,
                      .x = t->x[0] >= 0 ? s->bufs[t->x[0]].rows : none, .y = bwd ? s->bufs[t->dy].rows : s->bufs[t->y].rows,
                      .dx = bwd && t->dx[0] >= 0 ? s->bufs[t->dx[0]].rows : none, .dw = bwd && t->dw >= 0,
                      .dx_acc = bwd && t->dx[0] >= 0 && t->dx_acc[0]};
}

int64_t dnn_query_most(const net *n, const sched_ws_query *q, int64_t (*bytes)(const dnn_step *s, const dnn_plan *p))
{
    dnn_step s[3];
    int64_t most = 0;
    char why[300];
    for (int i = 0, k = dnn_query_steps(n, q, s); i < k; i++) {
        dnn_plan p;
        if (dnn_conv_plan(&s[i], dnn_pack_policy(), &p, why, sizeof why)) continue; /* refused before a run (ops_table.prepare) */
        int64_t b = bytes(&s[i], &p);
        if (b > most) most = b;
        dnn_plan_free(&p);
    }
    return most;
}

static int64_t staging(const dnn_step *s, const dnn_plan *p)
{
    (void)s;
    return p->stage_bytes;
}

int64_t dnn_query_stage_bytes(const net *n, const sched_ws_query *q) { return dnn_query_most(n, q, staging); }

/* --- the contract ------------------------------------------------------------------------------ */

static const char *op_name(dnn_op op)
{
    static const char *names[] = {"zero", "copy", "forward", "backward-data", "backward-filter", "bias backward"};
    return names[op];
}

/* Elements of each base: the step's buffers, and the staging area. */
static void base_sizes(const dnn_plan *p, const dnn_step *s, int64_t size[DNN_NBASE])
{
    const net_layer *l = s->l;
    int co = l->u.conv.c_out;
    size[DNN_X] = (int64_t)s->batch * s->c_in * len_of(s->x) * s->in_w;
    size[DNN_DX] = (int64_t)s->batch * s->c_in * len_of(s->dx) * s->in_w;
    size[DNN_Y] = s->backward ? 0 : (int64_t)s->batch * co * len_of(s->y) * l->w;
    size[DNN_DY] = s->backward ? (int64_t)s->batch * co * len_of(s->y) * l->w : 0;
    size[DNN_STAGE] = p->stage_bytes / 4;
}

static bool inside(const int64_t size[DNN_NBASE], dnn_ref r, int64_t n) { return r.at >= 0 && n >= 0 && r.at + n <= size[r.base]; }

#define BROKEN(...) (snprintf(why, len, __VA_ARGS__), -1)

int dnn_check(const dnn_plan *p, const dnn_step *s, char *why, size_t len)
{
    const net_layer *l = s->l;
    net_window wh = l->win, ww = l->win_w;
    int64_t size[DNN_NBASE];
    base_sizes(p, s, size);
    char a[96], b[96];
    if (p->stage_bytes % 256) return BROKEN("staging of %lld bytes is not a multiple of 256", (long long)p->stage_bytes);
    for (int i = 0; i < p->n; i++) {
        const dnn_call *c = &p->call[i];
        if (c->op == DNN_ZERO || c->op == DNN_COPY) {
            int64_t d = (c->planes - 1) * c->dst_stride + c->len, sr = (c->planes - 1) * c->src_stride + c->len;
            if (!inside(size, c->dst, d) || (c->op == DNN_COPY && !inside(size, c->src, sr)))
                return BROKEN("call %d (%s) reaches outside its buffer", i, op_name(c->op));
            continue;
        }
        const dnn_tensor *t[2] = {&c->xt, &c->yt};
        const dnn_ref *r[2] = {&c->xr, &c->yr};
        for (int j = c->op == DNN_CONV_BWD_BIAS; j < 2; j++) {
            dnn_tensor_str(t[j], a, sizeof a);
            if ((int64_t)t[j]->n * t[j]->c * t[j]->h * t[j]->w > limit_of(s) || extent(t[j]) > limit_of(s))
                return BROKEN("call %d (%s): %s %s is past the descriptors' %lld elements", i, op_name(c->op), j ? "y" : "x", a,
                              (long long)limit_of(s));
            if (c->op != DNN_CONV_FWD && !dnn_packed(t[j]))
                return BROKEN("call %d (%s): %s %s is not packed per image, which cuDNN 9 refuses", i, op_name(c->op),
                              j ? "dy" : c->op == DNN_CONV_BWD_DATA ? "dx" : "x", a);
            if (!inside(size, *r[j], extent(t[j])))
                return BROKEN("call %d (%s): %s %s at %lld reaches outside its buffer", i, op_name(c->op), j ? "y" : "x", a,
                              (long long)r[j]->at);
        }
        if (c->op == DNN_CONV_BWD_BIAS) continue;
        int dk = wh.d * (wh.k - 1) + 1, dkw = ww.d * (ww.k - 1) + 1;
        dnn_tensor_str(&c->yt, b, sizeof b);
        if (c->xt.n != c->yt.n || c->xt.c != s->c_in || c->yt.c != l->u.conv.c_out ||
            c->yt.h != (c->xt.h + 2 * c->pad - dk) / wh.s + 1 || c->yt.w != (c->xt.w + 2 * ww.p - dkw) / ww.s + 1)
            return BROKEN("call %d (%s): x %s and y %s do not agree with the convolution (pad %d)", i, op_name(c->op), a, b, c->pad);
        if (c->xr.base == DNN_STAGE && c->yr.base == DNN_STAGE && c->xr.at < c->yr.at + extent(&c->yt) &&
            c->yr.at < c->xr.at + extent(&c->xt))
            return BROKEN("call %d (%s): its two staged operands overlap", i, op_name(c->op));
        dnn_base want_x = c->op == DNN_CONV_BWD_DATA ? DNN_DX : DNN_X, want_y = c->op == DNN_CONV_FWD ? DNN_Y : DNN_DY;
        if ((c->xr.base != want_x && c->xr.base != DNN_STAGE) || (c->yr.base != want_y && c->yr.base != DNN_STAGE))
            return BROKEN("call %d (%s) reads or writes the wrong buffer", i, op_name(c->op));
    }
    return 0;
}
