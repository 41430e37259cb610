/* Band geometry properties on random networks (chains and residual DAGs), every band count.
 *
 * For >= 1000 random nets with random input heights, and every band count R from 1 to the
 * segment's output height, for OverL and 2PS with default cuts and with random non-uniform cuts:
 *   P1  owned output rows partition the output: band r owns exactly [cuts[r], cuts[r+1]);
 *   P2  every row a band computes reads only rows that are padding (within the layer's padding),
 *       in the segment input rows the band reads, computed by the band, or (2PS) received as
 *       boundary from the previous band — which that band held;
 *   P3  2PS computes no row twice: per layer, bands' rows are disjoint and in order;
 *   P4  OverL's input rows equal receptive-field arithmetic (effective kernel, stride and padding
 *       composed along every path, hull over paths) wherever that field stays inside every map;
 *       at image borders ours is the clipped subset of it.
 * Also: the authors' VGG-16 splits (paper/peers.md, "The LR-CNN authors' prototype") are
 * reproduced by the default cuts.
 * Prints the first failing net (as text), band count and property. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/geometry/band.h"
#include "sim/net/load.h"
#include "tests/randnet.h"

static randnet_rng rng = {0x9E3779B97F4A7C15ull};
static int rnd(int n) { return randnet_below(&rng, n); }

static int failures;
#define FAIL(...)                                                      \
    do {                                                               \
        if (failures++ < 5) {                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                              \
            fputc('\n', stderr);                                       \
        }                                                              \
    } while (0)

/* Receptive field of output rows [a, b) of layer L at layer `src`, composed without clipping,
 * hull over all paths. clipped_inside: 0 if some intermediate interval leaves its map. */
static band_rows rf(const net *n, int L, int src, band_rows o, int *inside)
{
    if (L == src) return o;
    const net_layer *l = &n->layers[L];
    if (o.a < 0 || o.b > l->h) *inside = 0;
    net_window w = net_layer_window(l);
    int lo, hi;
    net_window_rows(w, o.a, o.b, &lo, &hi);
    band_rows acc = {0, 0};
    bool any = false;
    for (int j = 0; j < l->n_in; j++) {
        if (l->in[j] < src) continue;
        band_rows r = rf(n, l->in[j], src, (band_rows){lo, hi}, inside);
        if (!any) acc = r, any = true;
        else acc = (band_rows){r.a < acc.a ? r.a : acc.a, r.b > acc.b ? r.b : acc.b};
    }
    return acc;
}

static bool within(band_rows x, band_rows y) { return band_rows_len(x) == 0 || (x.a >= y.a && x.b <= y.b); }

static void check_geom(const net *n, const band_seg *s, const band_geom *g, const char *text, const char *what)
{
    int R = g->n_bands, L0 = s->first, NL = g->n_layers;
    for (int r = 0; r < R; r++) {
        band_rows own = g->out[r * NL + NL - 1];
        if (own.a != g->cuts[r] || own.b != g->cuts[r + 1]) FAIL("P1 %s R=%d band %d owns [%d,%d) not [%d,%d)\n%s", what, R, r, own.a, own.b, g->cuts[r], g->cuts[r + 1], text);
        for (int L = s->first; L <= s->last; L++) {
            const net_layer *l = &n->layers[L];
            band_rows out = g->out[r * NL + L - L0];
            if (!band_rows_len(out)) continue;
            for (int j = 0; j < l->n_in; j++) {
                int P = l->in[j], lo, hi;
                net_window w = net_layer_window(l);
                net_window_rows(w, out.a, out.b, &lo, &hi);
                if (lo < -w.p || hi > n->layers[P].h + w.p + w.s) FAIL("P2 %s R=%d layer %s reads [%d,%d) beyond its padding\n%s", what, R, l->name, lo, hi, text);
                band_rows need = {lo < 0 ? 0 : lo, hi > n->layers[P].h ? n->layers[P].h : hi};
                band_rows have = band_held(g, s, r, P);
                if (!within(need, have))
                    FAIL("P2 %s R=%d band %d layer %s needs rows [%d,%d) of %s, holds [%d,%d)\n%s", what, R, r, l->name, need.a, need.b, n->layers[P].name, have.a, have.b, text);
            }
            if (g->policy == BAND_2PS) {
                if (r > 0) {
                    band_rows prev = g->out[(r - 1) * NL + L - L0];
                    if (band_rows_len(prev) && out.a < prev.b) FAIL("P3 %s R=%d layer %s band %d recomputes rows from %d\n%s", what, R, l->name, r, out.a, text);
                }
            }
        }
        if (g->policy == BAND_2PS && r > 0)
            for (int L = s->first; L <= s->last; L++) {
                band_rows k = g->keep[(r - 1) * NL + L - L0];
                if (!within(k, band_held(g, s, r - 1, L))) FAIL("P2 %s R=%d boundary of %s from band %d not held by it\n%s", what, R, n->layers[L].name, r - 1, text);
            }
        if (g->policy == BAND_OVERL) {
            int inside = 1;
            band_rows f = rf(n, s->last, s->src, own, &inside);
            band_rows ours = g->src_rows[r];
            band_rows clip = {f.a < 0 ? 0 : f.a, f.b > n->layers[s->src].h ? n->layers[s->src].h : f.b};
            if (inside && f.a >= 0 && f.b <= n->layers[s->src].h ? (ours.a != f.a || ours.b != f.b) : !within(ours, clip))
                FAIL("P4 %s R=%d band %d reads [%d,%d), receptive field [%d,%d)\n%s", what, R, r, ours.a, ours.b, f.a, f.b, text);
        }
    }
    if (g->policy == BAND_2PS)
        for (int L = s->first; L <= s->last; L++) {
            int end = 0;
            for (int r = 0; r < R; r++) {
                band_rows out = g->out[r * NL + L - L0];
                if (band_rows_len(out) && out.a != end) FAIL("P3 %s R=%d layer %s band %d starts at %d, expected %d\n%s", what, R, n->layers[L].name, r, out.a, end, text);
                if (band_rows_len(out)) end = out.b;
            }
        }
}

static int authors_splits(void)
{
    net n;
    err e;
    band_seg s;
    band_geom g;
    int cuts[8];
    if (net_load_named(&n, "vgg16", &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    int bad = 0;
    const int twops[6][2] = {{0, 42}, {40, 82}, {80, 122}, {120, 162}, {160, 202}, {200, 224}};
    const int overl[4][2] = {{0, 62}, {50, 118}, {106, 174}, {162, 224}};
    const char *ends[] = {"pool2", "pool3"};
    for (int k = 0; k < 2; k++) {
        CHECK(!band_seg_init(&s, &n, 1, net_find(&n, ends[k]), &e));
        CHECK(!band_cuts_default(&n, &s, BAND_2PS, 6, cuts, &e));
        CHECK(!band_geom_init(&g, &n, &s, BAND_2PS, cuts, 6, NULL, &e));
        for (int r = 0; r < 6; r++)
            if (g.src_rows[r].a != twops[r][0] || g.src_rows[r].b != twops[r][1]) {
                fprintf(stderr, "FAIL 2PS 6 bands to %s: band %d reads [%d,%d), authors [%d,%d)\n", ends[k], r, g.src_rows[r].a, g.src_rows[r].b, twops[r][0], twops[r][1]);
                bad = 1;
            }
        band_geom_free(&g);
    }
    CHECK(!band_seg_init(&s, &n, 1, net_find(&n, "pool2"), &e));
    CHECK(!band_cuts_default(&n, &s, BAND_OVERL, 4, cuts, &e));
    CHECK(!band_geom_init(&g, &n, &s, BAND_OVERL, cuts, 4, NULL, &e));
    for (int r = 0; r < 4; r++)
        if (g.src_rows[r].a != overl[r][0] || g.src_rows[r].b != overl[r][1]) {
            fprintf(stderr, "FAIL OverL 4 bands: band %d reads [%d,%d), authors [%d,%d)\n", r, g.src_rows[r].a, g.src_rows[r].b, overl[r][0], overl[r][1]);
            bad = 1;
        }
    band_geom_free(&g);
    net_free(&n);
    if (!bad) printf("authors' VGG-16 splits: 2PS 6 bands (to pool2 and to pool3) and OverL 4 bands reproduced\n");
    return bad;
}

int main(void)
{
    int nets = 0, geoms = 0, dags = 0, odd = 0;
    char text[8192];
    while (nets < 1200) {
        int h = 5 + rnd(110);
        randnet_text(&rng, RANDNET_SMALL, text, sizeof text, h);
        net n;
        err e;
        if (net_parse(&n, text, "random.net", &e)) continue; /* a shape became empty: draw again */
        band_seg s;
        int last = n.n - 4; /* the layer before gap */
        CHECK(!band_seg_init(&s, &n, 1, last, &e));
        nets++, dags += strstr(text, "add ") != NULL, odd += h % 2;
        int hout = n.layers[last].h;
        int *cuts = calloc((size_t)hout + 1, sizeof(int));
        for (int R = 1; R <= hout; R++) {
            for (int pol = 0; pol < 2; pol++) {
                band_policy p = pol ? BAND_OVERL : BAND_2PS;
                band_geom g;
                if (band_cuts_default(&n, &s, p, R, cuts, &e) || band_geom_init(&g, &n, &s, p, cuts, R, NULL, &e)) {
                    FAIL("R=%d %s: %s\n%s", R, pol ? "overl" : "2ps", e.msg, text);
                    continue;
                }
                check_geom(&n, &s, &g, text, pol ? "overl default" : "2ps default");
                band_geom_free(&g);
                /* random non-uniform cuts: R-1 distinct interior rows */
                int c = 0;
                cuts[0] = 0;
                for (int x = 1; x < hout && c < R - 1; x++)
                    if (rnd(hout - x) < R - 1 - c) cuts[++c] = x;
                cuts[R] = hout;
                if (band_geom_init(&g, &n, &s, p, cuts, R, NULL, &e)) {
                    FAIL("R=%d random cuts: %s\n%s", R, e.msg, text);
                    continue;
                }
                check_geom(&n, &s, &g, text, pol ? "overl random cuts" : "2ps random cuts");
                band_geom_free(&g);
                geoms += 2;
            }
        }
        free(cuts);
        net_free(&n);
    }
    int bad = authors_splits();
    printf("%d random nets (%d with residual blocks, %d odd heights), %d geometries checked, %d failures\n", nets, dags, odd, geoms, failures);
    return failures || bad;
}
