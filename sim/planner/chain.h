/* chain: the chain model of the planner — the net cut at its clean cuts (where one tensor crosses)
 * into segments, each `layer`, `ckpt`, `offload(all)` or `offload(conv)`, and a dynamic program over
 * (position, bytes kept so far in buckets, the mode of the segment ending there) for the fastest
 * split that fits (Rotor-style; exact for its segment model: equal to brute force over every split
 * on the test nets, tests/test_search.c). What the model reads of each layer (sizes, forward times)
 * comes from one lowering of `layer` a search, shared by every chain of it. Below search.c, which
 * turns the DP's splits into plans and checks each by lowering and replay.
 * Not here: candidates, row stages, migration (search.c). */
#ifndef LRCNN_CHAIN_H
#define LRCNN_CHAIN_H

#include "sim/planner/search.h"

enum { MODE_LAYER, MODE_CKPT, MODE_OFFLOAD, MODE_OFFLOAD_CONV, N_MODES };
#define DP_BUCKETS 2000

/* What the DP's segment model reads of each layer, wherever a chain starts: built once a search
 * (it lowers and times the `layer` schedule), shared by the chains of every row stage's rest. */
typedef struct {
    int64_t base;       /* persistent bytes (parameters, gradients, optimizer state, running
                           statistics) and the batch (image, labels) */
    int *tensor;        /* [n]: the layer whose buffer holds layer L's output (in-place relus share) */
    int64_t *bytes;     /* [n]: bytes of layer L's output for the batch */
    int64_t *aux;       /* [n]: bytes of its auxiliary (argmax, statistics, probabilities) */
    double *fwd_us;     /* [n]: its forward time on the device */
} chain_net;

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
    double *best;       /* the DP's tables (chain_dp), kept between its calls */
    int *from;
} chain;

/* What the model reads of each layer, for request r; -1 with e set if `layer` does not lower. */
int chain_net_init(chain_net *cn, const search_req *r, err *e);
void chain_net_free(chain_net *cn);
/* The chain of positions from layer `first` (a clean cut) to the end. */
void chain_init(chain *c, const search_req *r, const chain_net *cn, int first);
void chain_free(chain *c);
/* The fastest split of the chain whose modelled peak, on top of `extra` bytes kept from before it,
 * fits the budget, as plan segments into buf ("ckpt@a..b; offload(all)@c..d", or "" when all
 * layer); -1 when none fits the model (search_chain). */
int chain_dp(chain *c, int64_t extra, char *buf, size_t len);
/* The split that keeps the fewest bytes, whatever its time, into buf. */
void chain_min(const chain *c, char *buf, size_t len);

#endif
