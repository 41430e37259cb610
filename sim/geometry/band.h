/* band: row geometry of a segment executed band by band.
 *
 * A segment is layers [first, last] (topological indices) with one input tensor (the output of
 * layer `src`, the only tensor crossing the cut before `first`) and one output (layer `last`).
 * Bands own contiguous output rows of `last`, given as cuts: band r owns [cuts[r], cuts[r+1]).
 * From the owned rows, interval arithmetic through each layer's window gives:
 *   OverL: the rows each band computes at every layer (its own rows plus the receptive-field
 *          halo, union over consumers), and the rows of the segment input it reads;
 *   2PS:   the rows each band computes (a prefix difference: no row is computed twice) and the
 *          boundary it keeps for the next band (rows already computed that a later band reads).
 * Borders: a band's window may run past row 0 or past the last row; those rows are the layer's
 * true zero padding. Interior band edges are never padded. Rows are [a, b); empty when a >= b.
 * Cover (band_seg.cover): at a layer with whole-map statistics every row is computed by some band
 * — 2PS: the last band finishes the map; OverL: a band's rows reach the next band's first row and
 * the last band's the map's end — and the layers before it compute what that takes.
 * Not done here: bytes, steps or time (see sched.h). */
#ifndef LRCNN_BAND_H
#define LRCNN_BAND_H

#include "sim/net/net.h"

typedef struct {
    int a, b;
} band_rows;

typedef enum { BAND_2PS, BAND_OVERL } band_policy;
static inline const char *band_policy_name(band_policy p) { return p == BAND_2PS ? "2ps" : "overl"; }

typedef struct {
    int first, last; /* layers, inclusive */
    int src;         /* producer of the segment input */
    int stride;      /* rows of src per row of last, along the first-input path */
    bool cover;      /* every row of a layer that normalizes with whole-map statistics (kind_table:
                        map_stats, i.e. bn in train mode) is computed by some band, read downstream
                        or not, so the bands can gather its statistics (set by the plan) */
} band_seg;

typedef struct {
    band_policy policy;
    int n_bands, n_layers; /* n_layers = last - first + 1 */
    int *cuts;             /* [n_bands + 1] owned output rows of `last` */
    band_rows *out;        /* [band * n_layers + (layer - first)]: rows the band computes */
    band_rows *keep;       /* same indexing; 2PS: rows handed to the next band (boundary) */
    band_rows *src_rows;   /* [band]: rows of the segment input the band reads */
    band_rows *buffer;     /* as out: band_buffer_rows, made with the rest (the lowering asks it of
                              every band of every layer in every pass) */
    band_rows *own;        /* as out: band_own */
    band_rows *grad;       /* as out: the rows a band back-propagates, out itself but for OverL in
                              stages (band_geom_init), where it may be fewer */
} band_geom;

/* The stages of a row segment that keeps whole maps between them (train-mode BatchNorm in stages:
 * sim/plan/plan.h, plan_passes.staged), as OverL's geometry needs them, by segment layer (layer -
 * first): the forward stage computing it and the backward stage back-propagating it; `whole`: its
 * output is kept whole for the stages after its own and for the backward, which read it there;
 * `kept`: its output or its gradient is kept whole, so that the bands each compute a share of its
 * rows (with `whole`, or rebuilt in the backward from the maps below it). */
typedef struct {
    const int *fst, *bst;
    const bool *whole, *kept;
} band_stages;

/* Validates [first, last] as a row segment: clean cuts on both sides, every layer row-wise. */
int band_seg_init(band_seg *s, const net *n, int first, int last, err *e);

/* Geometry for explicit cuts (cuts[0] = 0, cuts[R] = height of `last`, strictly increasing).
 * OverL in stages (st, else NULL): a band computes, at each layer, its share of the rows of a map
 * kept whole (the layer's rows in proportion to the cuts: band_own) and of the layers with
 * whole-map statistics, widened only by what the layers of the same stage read of it through the
 * band (the consumers in its forward or backward stage, any consumer where the map is not whole); a
 * consumer in a later stage reads the whole map. So a convolution between two kept maps runs once
 * each way, as under 2PS; the halos are what a stage reads of the bands' own layers. */
int band_geom_init(band_geom *g, const net *n, const band_seg *s, band_policy p, const int *cuts, int n_bands,
                   const band_stages *st, err *e);
void band_geom_free(band_geom *g);

/* Default cuts for R bands: OverL splits the output evenly; 2PS splits the segment input in
 * cores of ceil(H/R) rows rounded up to the segment stride, each band reading past its core by the
 * first layer's boundary (the authors' VGG-16 splits), owning what that input lets it finish. */
int band_cuts_default(const net *n, const band_seg *s, band_policy p, int n_bands, int *cuts, err *e);

/* Rows of input j of `layer` that output rows r read, clipped to the producer's height, and the
 * zero padding needed above and below (non-zero only at image borders). */
void band_input_rows(const net *n, int layer, int j, band_rows r, band_rows *in, int *pad_top, int *pad_bot);

/* Rows of layer L's output that band r holds while computing: 2PS: received boundary + computed;
 * OverL: computed. For L == src: the rows read from the segment input. */
band_rows band_held(const band_geom *g, const band_seg *s, int band, int layer);

/* The rows of layer L that band r owns for statistics and kept gradients: a partition of L's rows
 * over the bands (all of them with cover), each inside what the band computes: [out_r.a,
 * out_{r+1}.a), from row 0 for the first band and to the map's end for the last; OverL in stages:
 * its share (band_geom_init). */
static inline band_rows band_own(const band_geom *g, const band_seg *s, int band, int layer)
{
    return g->own[band * g->n_layers + layer - s->first];
}

/* Rows of the band buffer holding layer L's output in band r: the hull of the rows band r holds of
 * L and of every in-place relu chained on L inside the segment, which overwrite L's buffer (a 2PS
 * relu may receive boundary rows that L itself does not hold). The lowering sizes its band
 * buffers by it and the closed form its band activations and gradients. */
band_rows band_buffer_rows(const net *n, const band_geom *g, const band_seg *s, int band, int layer);

/* Rows in r (0 when empty). Inline: the lowering asks it of every band of every layer. */
static inline int band_rows_len(band_rows r) { return r.b > r.a ? r.b - r.a : 0; }

#endif
