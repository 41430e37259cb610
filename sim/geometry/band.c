/* band: see band.h. Everything here is interval arithmetic on rows; layers are visited in reverse
 * topological order inside the segment so that every consumer is known before its producer. */
#include "sim/geometry/band.h"

#include <string.h>

#include "sim/net/kind.h"

static band_rows rows_clip(band_rows r, int h)
{
    if (r.a < 0) r.a = 0;
    if (r.b > h) r.b = h;
    if (r.b < r.a) r.b = r.a;
    return r;
}

static band_rows rows_hull(band_rows x, band_rows y)
{
    if (band_rows_len(x) == 0) return y;
    if (band_rows_len(y) == 0) return x;
    return (band_rows){x.a < y.a ? x.a : y.a, x.b > y.b ? x.b : y.b};
}

int band_seg_init(band_seg *s, const net *n, int first, int last, err *e)
{
    if (first < 1 || last >= n->n || first > last)
        return err_set(e, "row segment [%d, %d] is outside the network", first, last);
    const net_layer *f = &n->layers[first], *l = &n->layers[last];
    for (int i = first; i <= last; i++)
        if (!n->layers[i].rowwise)
            return err_set(e, "layer '%s' (%s) needs whole feature maps and cannot be in a row segment", n->layers[i].name,
                           kind_name(n->layers[i].kind));
    if (!f->cut_before)
        return err_set(e, "a row segment cannot start at '%s': %s", f->name,
                       f->inplace ? "it overwrites its input in place" : "more than one tensor crosses there (inside a residual block?)");
    if (last + 1 >= n->n || !n->layers[last + 1].cut_before)
        return err_set(e, "a row segment cannot end at '%s': %s", l->name,
                       n->layers[last + 1].inplace ? "the next layer overwrites its output in place"
                                                   : "more than one tensor crosses there (inside a residual block?)");
    s->first = first, s->last = last, s->src = -1, s->cover = false;
    for (int i = first; i <= last; i++)
        for (int j = 0; j < n->layers[i].n_in; j++)
            if (n->layers[i].in[j] < first) s->src = n->layers[i].in[j];
    CHECK(s->src >= 0);
    int64_t down = 1, up = 1; /* along the first-input path; upsampling divides the stride (at least 1) */
    for (int i = last; i > s->src; i = n->layers[i].in[0]) {
        net_window w = net_layer_window(&n->layers[i]);
        down *= w.s, up *= w.u > 1 ? w.u : 1;
        if (down % up == 0) down /= up, up = 1; /* keep both small: a U-Net's path goes down and back up */
    }
    s->stride = down > up ? (int)(down / up) : 1;
    return 0;
}

void band_input_rows(const net *n, int layer, int j, band_rows r, band_rows *in, int *pad_top, int *pad_bot)
{
    const net_layer *l = &n->layers[layer];
    int h_in = n->layers[l->in[j]].h, lo, hi;
    if (band_rows_len(r) == 0) {
        *in = (band_rows){0, 0};
        *pad_top = *pad_bot = 0;
        return;
    }
    net_window_rows(net_layer_window(l), r.a, r.b, &lo, &hi);
    *pad_top = lo < 0 ? -lo : 0;
    *pad_bot = hi > h_in ? hi - h_in : 0;
    *in = rows_clip((band_rows){lo, hi}, h_in);
}

/* Rows of `prod` read by `cons` for output rows r (clipped), or empty if cons does not read prod. */
static band_rows reads_of(const net *n, int cons, int prod, band_rows r)
{
    band_rows acc = {0, 0};
    for (int j = 0; j < n->layers[cons].n_in; j++)
        if (n->layers[cons].in[j] == prod) {
            band_rows in;
            int pt, pb;
            band_input_rows(n, cons, j, r, &in, &pt, &pb);
            acc = rows_hull(acc, in);
        }
    return acc;
}

/* Index into per-segment arrays: segment layers at [0, L), the segment input at L. */
static int slot(const band_seg *s, int layer) { return layer == s->src ? s->last - s->first + 1 : layer - s->first; }

static bool covered(const net *n, const band_seg *s, int layer)
{
    return s->cover && kind_of(&n->layers[layer])->map_stats;
}

/* 2PS prefixes: given pre[L-1] (rows of `last` finished), fills pre[] for every segment layer and
 * the input (slot L) with the rows consumers need, in one reverse pass (consumers push to their
 * producers). When first_read is given it receives, per slot, the first row a consumer that is
 * not finished will read next (rows a later band may still need). `all`: the last band, which
 * finishes every covered layer. */
static void prefixes(const net *n, const band_seg *s, int *pre, int *first_read, bool all)
{
    int L = s->last - s->first + 1;
    for (int i = 0; i < L; i++) pre[i] = i == L - 1 ? pre[i] : 0;
    pre[L] = 0;
    if (first_read)
        for (int i = s->first; i <= s->last; i++) first_read[i - s->first] = n->layers[i].h;
    for (int c = s->last; c >= s->first; c--) {
        const net_layer *l = &n->layers[c];
        if (all && covered(n, s, c)) pre[c - s->first] = l->h;
        int m = pre[c - s->first];
        for (int j = 0; j < l->n_in; j++) {
            int k = slot(s, l->in[j]);
            band_rows r = reads_of(n, c, l->in[j], (band_rows){0, m});
            if (band_rows_len(r) && r.b > pre[k]) pre[k] = r.b;
            if (first_read && k < L && m < l->h) {
                int lo, hi;
                net_window_rows(net_layer_window(l), m, m + 1, &lo, &hi);
                if (lo < 0) lo = 0;
                if (lo < first_read[k]) first_read[k] = lo;
            }
        }
    }
}

/* OverL: rows every band must compute at each segment layer and at the input (slot L), in one
 * reverse pass over the layers: rows[r * (L + 1) + slot], the segment output's set from the cuts,
 * the others the hull of what their consumers read. A covered layer's rows are widened, before its
 * producers read them, so the bands leave no row out: each reaches the next band's first row, the
 * first starts at 0 and the last ends at the map's end. */
static void halos(const net *n, const band_seg *s, const int *cuts, int R, band_rows *rows)
{
    int L = s->last - s->first + 1, W = L + 1;
    for (int r = 0; r < R; r++) {
        for (int i = 0; i <= L; i++) rows[r * W + i] = (band_rows){0, 0};
        rows[r * W + L - 1] = (band_rows){cuts[r], cuts[r + 1]};
    }
    for (int c = s->last; c >= s->first; c--) {
        int ci = c - s->first;
        if (covered(n, s, c)) {
            for (int r = 0; r + 1 < R; r++) {
                band_rows *x = &rows[r * W + ci], next = rows[(r + 1) * W + ci];
                if (x->b < next.a) x->b = next.a;
            }
            rows[ci].a = 0, rows[(R - 1) * W + ci].b = n->layers[c].h;
        }
        for (int r = 0; r < R; r++)
            for (int j = 0; j < n->layers[c].n_in; j++) {
                int k = slot(s, n->layers[c].in[j]);
                rows[r * W + k] = rows_hull(rows[r * W + k], reads_of(n, c, n->layers[c].in[j], rows[r * W + ci]));
            }
    }
}

/* Band r's share of the rows of a layer h rows high: the cuts of the segment output, scaled to h. */
static band_rows share(const int *cuts, int r, int h, int h_out)
{
    return (band_rows){(int)((int64_t)cuts[r] * h / h_out), (int)((int64_t)cuts[r + 1] * h / h_out)};
}

/* OverL in stages (band_geom_init), in two reverse passes over the layers, as halos() pushes the
 * rows a consumer reads to its producers. First the rows each band back-propagates (grad[]): the
 * output's own, each kept gradient's or statistics layer's share (own[]), and what a consumer of
 * the same backward stage adds to (a consumer in an earlier one adds to a kept whole gradient).
 * Then the rows it computes (rows[], slot order): those, and what a consumer reads through the
 * band: one of the same forward stage, or any where the map is not whole (the backward recomputes
 * it). */
static void stage_halos(const net *n, const band_seg *s, const int *cuts, int R, const band_stages *st, band_rows *rows,
                        band_rows *own, band_rows *grad)
{
    int L = s->last - s->first + 1, W = L + 1, h_out = n->layers[s->last].h;
    for (int i = 0; i < R * W; i++) rows[i] = (band_rows){0, 0};
    for (int i = 0; i < R * L; i++) grad[i] = (band_rows){0, 0};
    for (int c = s->last; c >= s->first; c--) {
        int ci = c - s->first;
        const net_layer *l = &n->layers[c];
        bool shared = c == s->last || st->kept[ci] || covered(n, s, c);
        for (int r = 0; r < R; r++) {
            band_rows *g = &grad[r * L + ci];
            own[r * L + ci] = share(cuts, r, l->h, h_out);
            if (shared) *g = rows_hull(*g, own[r * L + ci]);
            for (int j = 0; j < l->n_in; j++) {
                int p = l->in[j] - s->first;
                if (p >= 0 && st->bst[p] == st->bst[ci]) grad[r * L + p] = rows_hull(grad[r * L + p], reads_of(n, c, l->in[j], *g));
            }
        }
    }
    for (int c = s->last; c >= s->first; c--) {
        int ci = c - s->first;
        const net_layer *l = &n->layers[c];
        for (int r = 0; r < R; r++) {
            band_rows *x = &rows[r * W + ci];
            *x = rows_hull(*x, grad[r * L + ci]); /* a shared layer's own rows among them */
            for (int j = 0; j < l->n_in; j++) {
                int p = l->in[j], k = slot(s, p);
                if (p == s->src || st->fst[k] == st->fst[ci] || !st->whole[k])
                    rows[r * W + k] = rows_hull(rows[r * W + k], reads_of(n, c, p, *x));
            }
        }
    }
}

static band_rows buffer_rows(const net *n, const band_geom *g, const band_seg *s, int r, int layer);

/* g->buffer, once the rows each band computes and keeps are known. */
static void buffers(band_geom *g, const net *n, const band_seg *s)
{
    g->buffer = err_calloc((size_t)g->n_bands * g->n_layers, sizeof(band_rows));
    for (int r = 0; r < g->n_bands; r++)
        for (int i = 0; i < g->n_layers; i++) g->buffer[r * g->n_layers + i] = buffer_rows(n, g, s, r, s->first + i);
}

/* g->own where the bands' computed rows define it (band_own): [out_r.a, out_{r+1}.a). */
static void owned_from_out(band_geom *g, const net *n, const band_seg *s)
{
    int R = g->n_bands, L = g->n_layers;
    for (int r = 0; r < R; r++)
        for (int i = 0; i < L; i++) {
            int a = r ? g->out[r * L + i].a : 0, b = r + 1 < R ? g->out[(r + 1) * L + i].a : n->layers[s->first + i].h;
            g->own[r * L + i] = (band_rows){a, b > a ? b : a};
        }
}

int band_geom_init(band_geom *g, const net *n, const band_seg *s, band_policy p, const int *cuts, int R, const band_stages *st,
                   err *e)
{
    memset(g, 0, sizeof *g);
    int h_out = n->layers[s->last].h, L = s->last - s->first + 1;
    if (R < 1) return err_set(e, "the number of bands must be at least 1 (got %d)", R);
    if (R > h_out)
        return err_set(e, "%d bands but segment output '%s' has only %d rows (at most %d bands)", R, n->layers[s->last].name,
                       h_out, h_out);
    if (cuts[0] != 0 || cuts[R] != h_out)
        return err_set(e, "band cuts must start at 0 and end at %d (the rows of '%s')", h_out, n->layers[s->last].name);
    for (int r = 0; r < R; r++)
        if (cuts[r + 1] <= cuts[r]) return err_set(e, "band %d owns no rows (cuts must increase strictly)", r);
    g->policy = p, g->n_bands = R, g->n_layers = L;
    g->cuts = err_calloc((size_t)R + 1, sizeof(int));
    memcpy(g->cuts, cuts, ((size_t)R + 1) * sizeof(int));
    g->out = err_calloc((size_t)R * L, sizeof(band_rows));
    g->keep = err_calloc((size_t)R * L, sizeof(band_rows));
    g->src_rows = err_calloc((size_t)R, sizeof(band_rows));
    g->own = err_calloc((size_t)R * L, sizeof(band_rows));
    bool staged = p == BAND_OVERL && st; /* its own rows back-propagated; elsewhere the computed ones */
    g->grad = staged ? err_calloc((size_t)R * L, sizeof(band_rows)) : g->out;
    if (p == BAND_OVERL) {
        band_rows *rows = err_calloc((size_t)R * (L + 1), sizeof(band_rows));
        if (staged) stage_halos(n, s, cuts, R, st, rows, g->own, g->grad);
        else halos(n, s, cuts, R, rows);
        for (int r = 0; r < R; r++) {
            memcpy(&g->out[r * L], &rows[r * (L + 1)], (size_t)L * sizeof(band_rows));
            g->src_rows[r] = rows[r * (L + 1) + L];
        }
        free(rows);
        if (!staged) owned_from_out(g, n, s);
        buffers(g, n, s);
        return 0;
    }
    int *pre = err_calloc((size_t)L + 1, sizeof(int)), *prev = err_calloc((size_t)L + 1, sizeof(int));
    int *first = err_calloc((size_t)L, sizeof(int));
    for (int r = 0; r < R; r++) {
        band_rows *out = &g->out[r * L];
        /* 2PS: cumulative prefixes; this band computes the difference from the last band's */
        pre[L - 1] = cuts[r + 1];
        prefixes(n, s, pre, first, r == R - 1);
        for (int i = 0; i < L; i++) {
            out[i] = (band_rows){prev[i], pre[i] > prev[i] ? pre[i] : prev[i]};
            int lo = r + 1 < R ? first[i] : pre[i];
            g->keep[r * L + i] = (band_rows){lo, lo < pre[i] ? pre[i] : lo};
        }
        /* the input rows this band reads: what its own computations need */
        band_rows acc = {0, 0};
        for (int c = s->first; c <= s->last; c++) acc = rows_hull(acc, reads_of(n, c, s->src, out[c - s->first]));
        g->src_rows[r] = acc;
        memcpy(prev, pre, ((size_t)L + 1) * sizeof(int));
    }
    free(pre);
    free(prev);
    free(first);
    owned_from_out(g, n, s);
    buffers(g, n, s);
    return 0;
}

void band_geom_free(band_geom *g)
{
    free(g->cuts);
    if (g->grad != g->out) free(g->grad);
    free(g->out);
    free(g->keep);
    free(g->src_rows);
    free(g->buffer);
    free(g->own);
    memset(g, 0, sizeof *g);
}

band_rows band_held(const band_geom *g, const band_seg *s, int r, int layer)
{
    if (layer == s->src) return g->src_rows[r];
    int i = layer - s->first;
    band_rows out = g->out[r * g->n_layers + i];
    if (g->policy == BAND_OVERL || r == 0) return out;
    band_rows k = g->keep[(r - 1) * g->n_layers + i];
    return band_rows_len(k) ? (band_rows){k.a, out.b > k.b ? out.b : k.b} : out;
}

static band_rows buffer_rows(const net *n, const band_geom *g, const band_seg *s, int r, int layer)
{
    band_rows h = band_held(g, s, r, layer);
    for (int q = n->layers[layer].inplace_by; q >= 0 && q <= s->last; q = n->layers[q].inplace_by) {
        band_rows k = band_held(g, s, r, q);
        if (band_rows_len(k)) h = rows_hull(h, k);
    }
    return h;
}

band_rows band_buffer_rows(const net *n, const band_geom *g, const band_seg *s, int r, int layer)
{
    if (layer < s->first || layer > s->last) return buffer_rows(n, g, s, r, layer);
    return g->buffer[r * g->n_layers + layer - s->first];
}

/* Prefix of src rows needed for the first o rows of `last` (2PS arithmetic). */
static int src_prefix(const net *n, const band_seg *s, int o, int *pre)
{
    int L = s->last - s->first + 1;
    pre[L - 1] = o;
    prefixes(n, s, pre, NULL, false);
    return pre[L];
}

int band_cuts_default(const net *n, const band_seg *s, band_policy p, int R, int *cuts, err *e)
{
    int h_out = n->layers[s->last].h, h_in = n->layers[s->src].h;
    if (R < 1) return err_set(e, "the number of bands must be at least 1 (got %d)", R);
    if (R > h_out)
        return err_set(e, "%d bands but segment output '%s' has only %d rows (at most %d bands)", R, n->layers[s->last].name,
                       h_out, h_out);
    cuts[0] = 0, cuts[R] = h_out;
    if (p == BAND_OVERL) {
        for (int r = 1; r < R; r++) cuts[r] = (int)((int64_t)r * h_out / R);
        return 0;
    }
    int core = (h_in + R - 1) / R;
    core = (core + s->stride - 1) / s->stride * s->stride;
    int boundary = 0; /* rows the first layers read past their output rows: d(k-1)+1-s */
    for (int c = s->first; c <= s->last; c++)
        for (int j = 0; j < n->layers[c].n_in; j++)
            if (n->layers[c].in[j] == s->src) {
                net_window w = net_layer_window(&n->layers[c]);
                int b = w.d * (w.k - 1) + 1 - w.s;
                if (b > boundary) boundary = b;
            }
    int *pre = err_calloc((size_t)(s->last - s->first + 2), sizeof(int));
    for (int r = 1; r < R; r++) {
        int avail = (int)((int64_t)r * core + boundary), lo = 0, hi = h_out;
        /* largest o with src_prefix(o) <= avail (src_prefix is monotone in o) */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (src_prefix(n, s, mid, pre) <= avail) lo = mid; else hi = mid - 1;
        }
        int min = cuts[r - 1] + 1, max = h_out - (R - r);
        cuts[r] = lo < min ? min : lo > max ? max : lo;
    }
    free(pre);
    return 0;
}
