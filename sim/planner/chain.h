/* chain: the chain model of the planner — the net cut at its clean cuts (where one tensor crosses)
 * into segments, each `layer`, `ckpt`, `offload(all)` or `offload(conv)`, and a dynamic program for
 * the fastest split whose modelled peak fits, for every memory at once: Rotor's form, a table over
 * (position, memory left for the rest of the chain in buckets, whether the segment before kept the
 * tensor crossing the cut), filled from the end. Exact for its segment model (equal to brute force
 * over every split on the test nets, tests/test_search.c); one table answers every budget, so the
 * splits a search draws from it do not depend on the budget it was asked (its answer can only
 * improve when the budget grows). The buckets are of a fixed size for the net (DP_BUCKETS of what
 * `layer` holds above the persistent bytes), rounded up, so the table never accepts what the model
 * says does not fit. What the model reads of each layer (sizes, forward times) comes from one
 * lowering of `layer` a search, shared by every chain of it. Below search.c, which turns the splits
 * into plans and checks each by lowering and replay.
 * Not here: candidates, row stages, migration (search.c). */
#ifndef LRCNN_CHAIN_H
#define LRCNN_CHAIN_H

#include "sim/planner/search.h"

enum { MODE_LAYER, MODE_CKPT, MODE_OFFLOAD, MODE_OFFLOAD_CONV, N_MODES };
#define DP_BUCKETS 4096

/* What the DP's segment model reads of each layer, wherever a chain starts: built once a search
 * (it lowers and times the `layer` schedule), shared by the chains of every row stage's rest. */
typedef struct {
    int64_t base;       /* persistent bytes (parameters, gradients, optimizer state, running
                           statistics) and the batch (image, labels) */
    int *tensor;        /* [n]: the layer whose buffer holds layer L's output (in-place relus share) */
    int64_t *bytes;     /* [n]: bytes of layer L's output for the batch */
    int64_t *aux;       /* [n]: bytes of its auxiliary (argmax, statistics, probabilities) */
    double *fwd_us;     /* [n]: its forward time on the device */
    int64_t quantum;    /* the DP's bucket: DP_BUCKETS of them hold what `layer` peaks at above base */
} chain_net;

/* What the segment model knows of positions [a, b) run as one segment (chain.c: segment). */
typedef struct {
    int64_t stash, local;
    int64_t conv_in;     /* of the stash, what convolutions read (offload(conv) moves it) */
    double recompute;    /* its forward time */
    double move_all, move_conv; /* the link's time for its stash, and for what its convolutions read */
    bool reads_in, conv_reads_in;
} chain_seg;

/* The net as a chain of positions (clean cuts) from `first`, with what the DP's segment model reads. */
typedef struct {
    const search_req *r;
    const net *n;
    int m;              /* positions: segment k starts at layer pos[k]; pos[m] = n->n */
    int *pos;
    const chain_net *cn; /* the per-layer sizes and times, shared */
    bool *out_kept;     /* [m + 1]: a `layer` segment ending before position k keeps its output (the
                           tensor crossing that cut) for its own backward (a relu's mask) */
    int *stamp, *conv_stamp; /* [n]: scratch for segment() */
    int stamp_now;
    chain_seg *seg;     /* [m * (m + 1)]: segment [a, b) at a * (m + 1) + b */
    double *cost;       /* the table: [(k * 2 + had) * (DP_BUCKETS + 1) + M], the least extra time of
                           positions [k, m) with M buckets left and `had` (the segment before k keeps
                           the tensor crossing cut k); INFINITY where nothing fits */
    int *choice;        /* the same cells: the first segment's end * N_MODES + its mode */
} chain;

/* What the model reads of each layer, for request r; -1 with e set if `layer` does not lower. */
int chain_net_init(chain_net *cn, const search_req *r, err *e);
void chain_net_free(chain_net *cn);
/* The chain of positions from layer `first` (a clean cut) to the end, and its table. */
void chain_init(chain *c, const search_req *r, const chain_net *cn, int first);
void chain_free(chain *c);
/* The fastest split of the chain with M buckets of memory left above the persistent bytes, as
 * plan segments into buf ("ckpt@a..b; offload(all)@c..d", or "" when all layer); -1 when none fits
 * the model. */
int chain_at(const chain *c, int M, char *buf, size_t len);
/* The bucket counts where the table's time falls (each a different split, faster than every split
 * at fewer buckets), from the fewest, keeping only those faster than the last one kept by more
 * than `thin` of the chain's forward time (0: every one), into at[] (at most `most`); returns how
 * many. */
int chain_breaks(const chain *c, double thin, int *at, int most);
/* The split that keeps the fewest bytes, whatever its time, into buf. */
void chain_min(const chain *c, char *buf, size_t len);

#endif
