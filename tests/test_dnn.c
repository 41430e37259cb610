/* The CUDA backend's cuDNN calls, checked without a GPU (engine/cuda/dnn.h).
 *
 *   contract   every shipped net at its own input size, batch 8 (VGG-16 and ResNet-50 at 32 too, and
 *              VGG-16 at 920x920), under every preset and band count (2PS and OverL 2..8, the hybrids,
 *              the authors' configurations) and every BatchNorm mode where the net has one: the
 *              schedule is lowered with the staging model the CUDA backend adds to cuDNN's
 *              workspace, then every convolution step's calls are built from the buffers the
 *              executor will pass and checked against cuDNN 9's rules (backward-data, backward-filter
 *              and bias backward on packed tensors only; descriptors under 2^31 elements) and
 *              against themselves (operands inside their buffers, sizes agreeing with the
 *              convolution), and their staging must fit the step's workspace. VGG-16 at 920x920,
 *              batch 64, runs its steps in runs of images. Under the default policy no forward call
 *              may read or write a slice of a larger map (they go through staging: dnn.h's DNN_PACK_FWD).
 *   semantics  the calls executed on the CPU by a direct model of what each cuDNN routine computes
 *              (symmetric zero padding, strides, beta), on random data, against the CPU engine's
 *              own band convolution, for every convolution step of the small nets under several
 *              plans (1e-4 of the largest value); descriptors there are capped at a few thousand
 *              elements, so that steps split into runs of images too.
 *   forward-slices  semantics and part of the contract again with LRCNN_CUDNN_PACK_FWD=0, the
 *              forward on slices as cuDNN takes them.
 *   --no-pack  the negative control: with packing off the contract must break where the first GPU
 *              run aborted (VGG-16 bands; ResNet-50's stride-2 downsample under layer); exits 0 when
 *              it does, 1 when a plan it should break passes.
 * Usage: test_dnn [contract|semantics|forward-slices|--no-pack] [NET...] */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "engine/cuda/dnn.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "engine/cuda/fit.h"
#include "engine/ops.h"
#include "sim/net/kind.h"

static int failures;
static long slices_seen; /* forward calls on slices, in the contracts since it was zeroed */

/* A stand-in for cuDNN's algorithm workspaces that changes with every call's geometry (shapes,
 * strides, padding, direction), as an algorithm cuDNN picks for one descriptor may not be the one it
 * picks for another: its largest over the step's calls, plus the staging. A step run with other
 * views than the lowering asked about then needs another workspace than its schedule holds, which
 * is how the GPU found the first such mismatch (updown 2ps:4, c5's forward: 5648 bytes wanted, 1024
 * held). */
static int64_t fake_algo(const dnn_call *c)
{
    const dnn_tensor *t[2] = {&c->xt, &c->yt};
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)c->op ^ ((uint64_t)c->pad << 8);
    for (int j = 0; j < 2; j++) {
        int64_t v[] = {t[j]->n, t[j]->c, t[j]->h, t[j]->w, t[j]->ns, t[j]->cs, t[j]->hs};
        for (size_t i = 0; i < sizeof v / sizeof *v; i++) h = (h ^ (uint64_t)v[i]) * 1099511628211ULL;
    }
    return (int64_t)(h % 61 + 1) * 256;
}

static int64_t fake_step(const dnn_step *s, const dnn_plan *p)
{
    (void)s;
    int64_t most = 0;
    for (int i = 0; i < p->n; i++) {
        if (p->call[i].op < DNN_CONV_FWD || p->call[i].op > DNN_CONV_BWD_FILTER) continue;
        int64_t b = fake_algo(&p->call[i]);
        if (b > most) most = b;
    }
    return most + p->stage_bytes;
}

static int64_t fake_model(const sched_ws_model *m, const net *n, const sched_ws_query *q)
{
    (void)m;
    return dnn_query_most(n, q, fake_step);
}
static const sched_ws_model staging = {.bytes = fake_model};

typedef struct {
    long steps, calls, staged, runs, slices; /* slices: forward calls whose x or y is a slice of a larger map */
    int64_t stage_most;
    char first[800];   /* the first broken rule */
    long broken;
} tally;

/* Lowers `text` on n at `batch` and checks every convolution step's calls. */
static int contract_plan(const net *n, const char *text, int batch, bool pack, tally *t)
{
    plan p;
    sched s;
    err e;
    sched_cfg cfg = {.batch = batch, .ws = &staging};
    if (plan_parse(&p, n, text, &e)) return 1; /* a preset this net does not take (authors-*): not a case */
    if (pipeline_lower(&s, n, &p, &cfg, &e)) {
        plan_free(&p);
        return 1;
    }
    for (int i = 0; i < s.n_step; i++) {
        const sched_step *st = &s.steps[i];
        if ((st->op != SCHED_FWD && st->op != SCHED_BWD) || n->layers[st->layer].kind != NET_CONV) continue;
        dnn_step d = dnn_step_of(n, &s, st);
        dnn_plan dp;
        char why[300];
        int64_t ws = st->ws >= 0 ? s.bufs[st->ws].bytes : 0;
        bool planned = !dnn_conv_plan(&d, pack ? dnn_pack_policy() : 0, &dp, why, sizeof why);
        int bad = !planned || dnn_check(&dp, &d, why, sizeof why);
        if (!bad && dp.stage_bytes > ws)
            snprintf(why, sizeof why, "staging needs %lld bytes, the workspace has %lld", (long long)dp.stage_bytes, (long long)ws), bad = 1;
        int64_t as_run = !bad && pack ? fake_step(&d, &dp) : ws;
        if (as_run != ws) /* the lowering asked about the views the step runs with */
            snprintf(why, sizeof why, "its views as run need a workspace of %lld bytes, the schedule's has %lld (lowered for other views)",
                     (long long)as_run, (long long)ws), bad = 1;
        if (bad && !t->broken++)
            snprintf(t->first, sizeof t->first, "%s %s batch %d: %s %s rows [%d, %d): %s", n->name, text, batch,
                     st->op == SCHED_FWD ? "forward" : "backward", d.l->name, d.out.a, d.out.b, why);
        if (!bad) {
            for (int k = 0; k < dp.n; k++)
                t->slices += dp.call[k].op == DNN_CONV_FWD && !(dnn_packed(&dp.call[k].xt) && dnn_packed(&dp.call[k].yt));
            t->steps++, t->calls += dp.n, t->staged += dp.stage_bytes > 0, t->runs += dp.images < batch;
            if (dp.stage_bytes > t->stage_most) t->stage_most = dp.stage_bytes;
        }
        if (planned) dnn_plan_free(&dp);
    }
    sched_free(&s);
    plan_free(&p);
    return 0;
}

static bool has_bn(const net *n)
{
    for (int i = 0; i < n->n; i++)
        if (n->layers[i].kind == NET_BN) return true;
    return false;
}

static const char *plans[] = {"layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "2ps:2", "2ps:3", "2ps:4", "2ps:5", "2ps:6", "2ps:7",
                              "2ps:8", "overl:2", "overl:3", "overl:4", "overl:5", "overl:6", "overl:7", "overl:8", "2ps-h", "overl-h",
                              "authors-2ps", "authors-overl", "authors-2ps-h", "authors-overl-h", NULL};

/* Every plan (and bn mode) on net `name` at an h x h input (0: its own) and `batch`. */
static void contract_net(const char *name, int h, int batch, bool pack)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (h && net_set_input(&n, h, h, &e))) {
        printf("FAIL %s\n", e.msg);
        failures++;
        return;
    }
    static const char *bns[] = {"", " bn=frozen", " bn=per-band"};
    tally t = {0};
    int cases = 0;
    for (int b = 0; b < (has_bn(&n) ? 3 : 1); b++)
        for (int i = 0; plans[i]; i++) {
            char text[64];
            snprintf(text, sizeof text, "%s%s", plans[i], bns[b]);
            cases += !contract_plan(&n, text, batch, pack, &t);
        }
    /* with forward packing on, no forward call may read or write a slice: that is all it is for */
    bool sliced = (dnn_pack_policy() & DNN_PACK_FWD) && t.slices;
    slices_seen += t.slices;
    printf("%s %-16s %4dx%-4d batch %2d: %3d plans, %6ld convolution steps, %7ld calls, %5ld staged (most %.1f MiB), %ld in runs of "
           "images, %ld forward calls on slices\n", t.broken || sliced ? "FAIL" : "ok  ", n.name, n.layers[0].h, n.layers[0].w, batch,
           cases, t.steps, t.calls, t.staged, (double)t.stage_most / (1 << 20), t.runs, t.slices);
    if (t.broken) printf("     %ld steps broke a rule; the first: %s\n", t.broken, t.first);
    failures += t.broken > 0 || sliced;
    net_free(&n);
}

static void contract(int argc, char **argv)
{
    if (argc) {
        for (int i = 0; i < argc; i++) contract_net(argv[i], 0, 8, true);
        return;
    }
    DIR *d = opendir(LRCNN_SOURCE_DIR "/nets");
    CHECK(d != NULL);
    char names[64][64];
    int count = 0;
    for (struct dirent *f; (f = readdir(d)) && count < 64;) {
        size_t k = strlen(f->d_name);
        if (k > 4 && !strcmp(f->d_name + k - 4, ".net")) snprintf(names[count++], sizeof names[0], "%.*s", (int)(k - 4), f->d_name);
    }
    closedir(d);
    qsort(names, (size_t)count, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < count; i++) contract_net(names[i], 0, 8, true);
    contract_net("vgg16", 0, 32, true);
    contract_net("resnet50", 0, 32, true);
    contract_net("vgg16", 920, 8, true);
    /* 8 x 64 x 920 x 920 values per map: past 2^31 at batch 64, so steps run in runs of images */
    net n;
    err e;
    if (net_load_named(&n, "vgg16", &e) || net_set_input(&n, 920, 920, &e)) {
        printf("FAIL %s\n", e.msg), failures++;
        return;
    }
    tally t = {0};
    contract_plan(&n, "layer", 64, true, &t);
    contract_plan(&n, "2ps:8", 64, true, &t);
    bool ok = !t.broken && t.runs > 0;
    printf("%s vgg16 920x920 batch 64 (layer, 2ps:8): %ld steps, %ld in runs of images%s%s\n", ok ? "ok  " : "FAIL", t.steps, t.runs,
           t.broken ? "; " : "", t.broken ? t.first : "");
    failures += !ok;
    net_free(&n);
}

/* --- semantics: the calls run on the CPU ---------------------------------------------------------- */

typedef struct {
    float *p[DNN_NBASE];
    const float *w;
    float *dw, *db;
} model_mem;

static float *at4(float *base, const dnn_tensor *t, int n, int c, int h, int w)
{
    return base + (int64_t)n * t->ns + (int64_t)c * t->cs + (int64_t)h * t->hs + w;
}

/* What cuDNN computes for call c: cross-correlation with the piece's row padding and the layer's
 * column padding, groups, dilation; beta as c->acc. */
static void run_conv(const net_layer *l, int c_in, const dnn_call *c, model_mem *m)
{
    net_window wh = l->win, ww = l->win_w;
    int g = l->u.conv.groups, co = l->u.conv.c_out, cig = c_in / g, cog = co / g;
    const dnn_tensor *xt = &c->xt, *yt = &c->yt;
    float *xb = c->op == DNN_CONV_BWD_BIAS ? NULL : m->p[c->xr.base] + c->xr.at, *yb = m->p[c->yr.base] + c->yr.at;
    if (c->op == DNN_CONV_BWD_BIAS) {
        for (int o = 0; o < co; o++) {
            double s = 0;
            for (int n = 0; n < yt->n; n++)
                for (int h = 0; h < yt->h; h++)
                    for (int w = 0; w < yt->w; w++) s += *at4(yb, yt, n, o, h, w);
            m->db[o] += (float)s;
        }
        return;
    }
    int64_t xcount = (int64_t)xt->n * xt->c * xt->h * xt->w;
    double *acc = calloc((size_t)(c->op == DNN_CONV_BWD_DATA ? xcount : c->op == DNN_CONV_BWD_FILTER ? (int64_t)co * cig * wh.k * ww.k : 1),
                         sizeof(double));
    for (int n = 0; n < yt->n; n++)
        for (int o = 0; o < co; o++)
            for (int oh = 0; oh < yt->h; oh++)
                for (int ow = 0; ow < yt->w; ow++) {
                    double s = 0;
                    float dy = c->op == DNN_CONV_FWD ? 0 : *at4(yb, yt, n, o, oh, ow);
                    for (int i = 0; i < cig; i++)
                        for (int kh = 0; kh < wh.k; kh++)
                            for (int kw = 0; kw < ww.k; kw++) {
                                int ih = oh * wh.s - c->pad + kh * wh.d, iw = ow * ww.s - ww.p + kw * ww.d, ch = o / cog * cig + i;
                                if (ih < 0 || ih >= xt->h || iw < 0 || iw >= xt->w) continue;
                                int64_t wi = (((int64_t)o * cig + i) * wh.k + kh) * ww.k + kw;
                                if (c->op == DNN_CONV_FWD) s += (double)*at4(xb, xt, n, ch, ih, iw) * m->w[wi];
                                else if (c->op == DNN_CONV_BWD_FILTER) acc[wi] += (double)*at4(xb, xt, n, ch, ih, iw) * dy;
                                else acc[(((int64_t)n * xt->c + ch) * xt->h + ih) * xt->w + iw] += (double)m->w[wi] * dy;
                            }
                    if (c->op == DNN_CONV_FWD) *at4(yb, yt, n, o, oh, ow) = (float)(s + (c->acc ? *at4(yb, yt, n, o, oh, ow) : 0));
                }
    if (c->op == DNN_CONV_BWD_FILTER)
        for (int64_t i = 0; i < (int64_t)co * cig * wh.k * ww.k; i++) m->dw[i] += (float)acc[i];
    if (c->op == DNN_CONV_BWD_DATA)
        for (int n = 0; n < xt->n; n++)
            for (int ch = 0; ch < xt->c; ch++)
                for (int h = 0; h < xt->h; h++)
                    for (int w = 0; w < xt->w; w++) {
                        float *d = at4(xb, xt, n, ch, h, w);
                        *d = (float)(acc[(((int64_t)n * xt->c + ch) * xt->h + h) * xt->w + w] + (c->acc ? *d : 0));
                    }
    free(acc);
}

/* Executes plan p the way ops_cuda.c does, with the CPU model of each routine. */
static void run_plan(const dnn_plan *p, const net_layer *l, int c_in, model_mem *m)
{
    for (int i = 0; i < p->n; i++) {
        const dnn_call *c = &p->call[i];
        if (c->op == DNN_ZERO) {
            for (int64_t k = 0; k < c->planes; k++) memset(m->p[c->dst.base] + c->dst.at + k * c->dst_stride, 0, (size_t)c->len * 4);
        } else if (c->op == DNN_COPY) {
            for (int64_t k = 0; k < c->planes; k++)
                for (int64_t j = 0; j < c->len; j++) {
                    float *d = m->p[c->dst.base] + c->dst.at + k * c->dst_stride + j;
                    float v = m->p[c->src.base][c->src.at + k * c->src_stride + j];
                    *d = c->acc ? *d + v : v;
                }
        } else {
            run_conv(l, c_in, c, m);
        }
    }
}

static float *randoms(int64_t n, uint64_t *r)
{
    float *v = err_calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
        v[i] = (float)((double)(*r >> 11) / 9007199254740992.0 - 0.5);
    }
    return v;
}

/* The largest |a - b| over n values, against the largest |b|. */
static double rel_diff(const float *a, const float *b, int64_t n, int64_t *where)
{
    double most = 0, scale = 1e-30;
    *where = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(b[i]) > scale) scale = fabs(b[i]);
        if (fabs((double)a[i] - b[i]) > most) most = fabs((double)a[i] - b[i]), *where = i;
    }
    return most / scale;
}

/* One convolution step d of layer L: the CPU engine's kernel and the modelled cuDNN calls on the
 * same data. */
static bool semantics_step(const net *n, int L, dnn_step d, uint64_t *r, char *why, size_t len)
{
    const net_layer *l = d.l;
    int co = l->u.conv.c_out, B = d.batch;
    int64_t nw = (int64_t)co * (d.c_in / l->u.conv.groups) * l->win.k * l->win_w.k, np = nw + (l->u.conv.bias ? co : 0);
    int64_t xs = (int64_t)B * d.c_in * (d.x.b - d.x.a) * d.in_w, ys = (int64_t)B * co * (d.y.b - d.y.a) * l->w;
    int64_t dxs = (int64_t)B * d.c_in * (d.dx.b - d.dx.a) * d.in_w;
    dnn_plan p;
    while (dnn_conv_plan(&d, dnn_pack_policy(), &p, why, len)) /* one image past the cap: a larger one */
        if (!d.limit || (d.limit *= 4) > DNN_MAX_ELEMS) return false;
    float *x = randoms(xs, r), *w = randoms(np, r), *y = randoms(ys, r), *ws = NULL;
    float *y2 = err_calloc((size_t)ys + 1, 4), *dx = randoms(dxs, r), *dx2 = err_calloc((size_t)dxs + 1, 4);
    float *dw = randoms(np, r), *dw2 = err_calloc((size_t)np, 4), *stage = err_calloc((size_t)p.stage_bytes / 4 + 1, 4);
    memcpy(y2, y, (size_t)ys * 4), memcpy(dx2, dx, (size_t)dxs * 4), memcpy(dw2, dw, (size_t)np * 4);
    ops_call c = {.l = l, .layer = L, .a = d.out.a, .b = d.out.b, .w = w};
    c.in_h[0] = d.in_h, c.in_c[0] = d.c_in;
    c.x[0] = (ten){x, B, d.c_in, d.x.b - d.x.a, d.in_w, d.x.a};
    ten yv = {y, B, co, d.y.b - d.y.a, l->w, d.y.a};
    int64_t wsb = sched_workspace_bytes(n, L, d.out.b - d.out.a, B);
    ws = err_calloc((size_t)wsb / 4 + 1, 4);
    c.ws = ws, c.ws_bytes = wsb;
    bool acc = d.dx_acc && d.backward && d.dx.b > d.dx.a;
    if (d.backward) {
        c.dy = yv, c.dw = d.dw ? dw : NULL, c.dx_acc[0] = acc;
        if (d.dx.b > d.dx.a) c.dx[0] = (ten){dx, B, d.c_in, d.dx.b - d.dx.a, d.in_w, d.dx.a};
        ops_cpu.backward(&c);
    } else {
        c.y = yv;
        ops_cpu.forward(&c);
    }
    /* the model: the calls, then the bias of the forward (a kernel of ours) */
    model_mem m = {.p = {[DNN_X] = x, [DNN_Y] = y2, [DNN_DX] = dx2, [DNN_DY] = y, [DNN_STAGE] = stage}, .w = w, .dw = dw2,
                   .db = dw2 + nw};
    run_plan(&p, l, d.c_in, &m);
    if (!d.backward && l->u.conv.bias)
        for (int b = 0; b < B; b++)
            for (int o = 0; o < co; o++)
                for (int h = d.out.a; h < d.out.b; h++)
                    for (int k = 0; k < l->w; k++) y2[(((int64_t)b * co + o) * (d.y.b - d.y.a) + h - d.y.a) * l->w + k] += w[nw + o];
    int64_t where = 0;
    double e = 0;
    const char *what = "";
    if (!d.backward) { /* rows [a, b) of y; other rows are not the step's */
        for (int b = 0; b < B; b++)
            for (int o = 0; o < co; o++) {
                int64_t at = (((int64_t)b * co + o) * (d.y.b - d.y.a) + d.out.a - d.y.a) * l->w, k;
                double q = rel_diff(y2 + at, y + at, (int64_t)(d.out.b - d.out.a) * l->w, &k);
                if (q > e) e = q, where = at + k, what = "y";
            }
    } else {
        double q;
        if (dxs && (q = rel_diff(dx2, dx, dxs, &where)) > e) e = q, what = "dx";
        int64_t k;
        if (d.dw && (q = rel_diff(dw2, dw, np, &k)) > e) e = q, where = k, what = "dw";
    }
    bool ok = e <= 1e-4;
    if (!ok) snprintf(why, len, "%s differs by %.2e of its largest value (element %lld)", what, e, (long long)where);
    dnn_plan_free(&p);
    free(x), free(w), free(y), free(y2), free(dx), free(dx2), free(dw), free(dw2), free(stage), free(ws);
    return ok;
}

static void semantics_net(const char *name, int h, int batch, const char *const *plist)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (h && net_set_input(&n, h, h, &e))) {
        printf("FAIL %s\n", e.msg), failures++;
        return;
    }
    uint64_t r = 99;
    for (int i = 0; plist[i]; i++) {
        plan p;
        sched s;
        sched_cfg cfg = {.batch = batch, .ws = &staging};
        if (plan_parse(&p, &n, plist[i], &e) || pipeline_lower(&s, &n, &p, &cfg, &e)) {
            printf("FAIL %s %s: %s\n", n.name, plist[i], e.msg), failures++;
            continue;
        }
        long steps = 0, bad = 0;
        char first[800] = "";
        for (int k = 0; k < s.n_step; k++) {
            const sched_step *st = &s.steps[k];
            if ((st->op != SCHED_FWD && st->op != SCHED_BWD) || n.layers[st->layer].kind != NET_CONV) continue;
            char why[300];
            dnn_step d = dnn_step_of(&n, &s, st);
            d.limit = steps % 3 == 2 ? 3000 : 0; /* every third step in runs of images */
            if (!semantics_step(&n, st->layer, d, &r, why, sizeof why) && !bad++)
                snprintf(first, sizeof first, "%s %s rows [%d, %d): %s", st->op == SCHED_FWD ? "forward" : "backward",
                         n.layers[st->layer].name, st->rows.a, st->rows.b, why);
            steps++;
        }
        printf("%s %-14s %4dx%-4d batch %d %-10s %4ld convolution steps as cuDNN computes them = the CPU engine's\n", bad ? "FAIL" : "ok  ",
               n.name, n.layers[0].h, n.layers[0].w, batch, plist[i], steps);
        if (bad) printf("     %ld differ; the first: %s\n", bad, first);
        failures += bad > 0;
        sched_free(&s);
        plan_free(&p);
    }
    net_free(&n);
}

static int pick(uint64_t *r, int lo, int hi) /* in [lo, hi] */
{
    *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
    return lo + (int)((*r >> 33) % (uint64_t)(hi - lo + 1));
}

/* Random convolutions (window, stride, padding, dilation, groups, bias, odd sizes), random bands and
 * random buffers around what each reads and writes: the calls against the CPU engine. */
static void semantics_random(int trials)
{
    uint64_t r = 2024;
    int bad = 0, done = 0;
    char first[800] = "";
    for (int t = 0; t < trials; t++) {
        int k = pick(&r, 1, 7), s = pick(&r, 1, 3), d = pick(&r, 1, 2), p = pick(&r, 0, d * (k - 1) / 2 + 1), g = pick(&r, 1, 2);
        int dk = d * (k - 1) + 1, in_h = pick(&r, dk > 2 * p ? dk - 2 * p : 1, 40), in_w = pick(&r, 1 + 2, 9), kw = pick(&r, 1, 3);
        char text[256];
        snprintf(text, sizeof text, "net r\ninput data c=%d h=%d w=%d\nconv c c=%d k=%dx%d s=%d p=%dx%d d=%d groups=%d bias=%d\ngap g\nloss l\n", 2 * g,
                 in_h, in_w, 2 * g, k, kw, s, p, kw / 2, d, g, pick(&r, 0, 1));
        net n;
        err e;
        if (net_parse(&n, text, "random", &e)) continue; /* an empty output */
        const net_layer *l = &n.layers[1];
        int a = pick(&r, 0, l->h - 1), b = pick(&r, a + 1, l->h), lo, hi;
        net_window_rows(l->win, a, b, &lo, &hi);
        lo = lo < 0 ? 0 : lo, hi = hi > in_h ? in_h : hi;
        band_rows x = {lo - pick(&r, 0, lo), hi + pick(&r, 0, in_h - hi)}, dx = {lo - pick(&r, 0, lo), hi + pick(&r, 0, in_h - hi)};
        if (pick(&r, 0, 1)) x = (band_rows){lo, hi}; /* often exactly what is read */
        if (pick(&r, 0, 1)) dx = x;
        dnn_step st = {.l = l, .c_in = n.layers[0].c, .in_h = in_h, .in_w = in_w, .batch = pick(&r, 1, 3), .out = {a, b}, .x = x,
                       .y = {a - pick(&r, 0, a), b + pick(&r, 0, l->h - b)}, .limit = pick(&r, 0, 2) ? 0 : 400};
        char why[300];
        for (int bwd = 0; bwd < 2; bwd++) {
            st.backward = bwd, st.dw = bwd && pick(&r, 0, 3);
            st.dx = bwd && pick(&r, 0, 3) ? dx : (band_rows){0, 0};
            if (!st.dw && !(st.dx.b > st.dx.a)) st.dw = bwd;
            st.dx_acc = pick(&r, 0, 1);
            done++;
            if (!semantics_step(&n, 1, st, &r, why, sizeof why) && !bad++)
                snprintf(first, sizeof first, "%s of %s rows [%d, %d), x [%d, %d), y [%d, %d), dx [%d, %d): %s", bwd ? "backward" : "forward",
                         text, a, b, st.x.a, st.x.b, st.y.a, st.y.b, st.dx.a, st.dx.b, why);
        }
        net_free(&n);
    }
    printf("%s %d random convolution steps (windows, strides, dilation, groups, bands, buffers) = the CPU engine's\n",
           bad ? "FAIL" : "ok  ", done);
    if (bad) printf("     %d differ; the first: %s\n", bad, first);
    failures += bad > 0;
}

static void semantics(void)
{
    semantics_random(3000);
    const char *const plist[] = {"layer", "2ps:3", "overl:3", "2ps-h", "overl-h:2", "ckpt-sqrt", NULL};
    semantics_net("kernels", 0, 3, plist);
    semantics_net("vgg-small", 0, 3, plist);
    semantics_net("resnet-small", 0, 2, plist);
    semantics_net("resnet-small", 35, 2, plist); /* odd rows: the stride-2 downsample reads 17 of 18 */
    semantics_net("kinds", 0, 2, plist);
    semantics_net("factorized", 0, 2, plist);
    semantics_net("updown", 0, 2, plist);
}

/* The negative control: without packing, the plans the first GPU run aborted on must break. */
static void no_pack(void)
{
    static const struct { const char *net, *plan; } bad[] = {{"resnet50", "layer"}, {"vgg16", "2ps:4"}, {"vgg16", "overl:4"},
                                                              {"resnet-small", "2ps:4"}, {"vgg-small", "2ps:3"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        net n;
        err e;
        if (net_load_named(&n, bad[i].net, &e)) {
            printf("FAIL %s\n", e.msg), failures++;
            continue;
        }
        tally t = {0};
        contract_plan(&n, bad[i].plan, 8, false, &t);
        printf("%s %s %s without packing: %ld steps break a rule%s%s\n", t.broken ? "ok  " : "FAIL", bad[i].net, bad[i].plan, t.broken,
               t.broken ? "; the first: " : "", t.first);
        failures += !t.broken;
        net_free(&n);
    }
}

/* The pinned arena's placement (fit.h) against a byte map: random gets and puts never overlap,
 * stay inside, keep their accounting, and once all is released one block spans the region again. */
static void fit_check(void)
{
    enum { SIZE = 1 << 16, N = 64 };
    uint64_t r = 5;
    fit f;
    fit_init(&f, SIZE, 256);
    unsigned char owner[SIZE] = {0};
    int64_t at[N], len[N];
    int bad = 0, placed = 0;
    for (int i = 0; i < N; i++) at[i] = -1;
    for (int t = 0; t < 20000 && !bad; t++) {
        int i = pick(&r, 0, N - 1);
        if (at[i] < 0) {
            len[i] = pick(&r, 1, 4000);
            if ((at[i] = fit_get(&f, len[i])) < 0) continue;
            placed++;
            bad |= at[i] % 256 != 0 || at[i] + len[i] > SIZE;
            for (int64_t k = at[i]; !bad && k < at[i] + len[i]; k++) bad |= owner[k] != 0, owner[k] = (unsigned char)(i + 1);
        } else {
            for (int64_t k = at[i]; k < at[i] + len[i]; k++) owner[k] = 0;
            bad |= !fit_put(&f, at[i]);
            at[i] = -1;
        }
    }
    for (int i = 0; i < N; i++)
        if (at[i] >= 0) bad |= !fit_put(&f, at[i]);
    bad |= f.used != 0 || fit_get(&f, SIZE) != 0 || fit_put(&f, 12345);
    printf("%s pinned arena placement: %d blocks placed, none overlapping, all released into one region\n", bad ? "FAIL" : "ok  ", placed);
    failures += bad;
    fit_free(&f);
}

/* LRCNN_CUDNN_PACK_FWD=0 (dnn.h): the forward on slices, as before. The lowering's model and the
 * calls take the policy from the environment alike; the semantics on the small nets and random
 * steps, and the contract on nets whose bands read and write slices, again under it (where the
 * default's contract allows no forward call on a slice, this one must find some). */
static void forward_slices(void)
{
    setenv("LRCNN_CUDNN_PACK_FWD", "0", 1);
    printf("-- LRCNN_CUDNN_PACK_FWD=0\n");
    semantics();
    slices_seen = 0;
    contract_net("vgg16", 0, 8, true);
    contract_net("resnet50", 0, 8, true);
    contract_net("unet", 0, 2, true);
    unsetenv("LRCNN_CUDNN_PACK_FWD");
    if (!slices_seen) printf("FAIL no forward call on a slice with LRCNN_CUDNN_PACK_FWD=0\n"), failures++;
}

int main(int argc, char **argv)
{
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
    const char *what = argc > 1 ? argv[1] : "all";
    if (!strcmp(what, "--no-pack")) {
        no_pack();
        printf("%s\n", failures ? "FAILED: a plan that breaks cuDNN's rules without packing passed" : "without packing the contract breaks, as it must");
        return failures != 0;
    }
    else if (!strcmp(what, "contract")) contract(argc - 2, argv + 2);
    else if (!strcmp(what, "semantics")) semantics(), fit_check();
    else if (!strcmp(what, "forward-slices")) forward_slices();
    else contract(0, NULL), semantics(), fit_check(), forward_slices();
    printf("%s\n", failures ? "FAILED" : "every cuDNN call as cuDNN 9 takes it");
    return failures != 0;
}
