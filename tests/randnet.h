/* randnet: random network texts for property tests (test_band, test_closed, test_sched).
 *
 * A net is a chain of convolutions (kernels 1-7, strides 1-3, dilation, padding), max- and
 * average-pools with padding, relus (in place where they can be), bns and residual blocks
 * (identity, or strided with a 1x1 shortcut), from an input of a given odd or even height, then
 * gap, fc and loss, so that every layer before gap is row-wise and the presets can band a
 * prefix. Draws come from a caller-owned generator, so a seed names a sequence of nets. A drawn
 * net may be invalid (a map shrinks to nothing): net_parse rejects it and the caller draws again.
 * Not done here: parsing or checking the nets. */
#ifndef LRCNN_RANDNET_H
#define LRCNN_RANDNET_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    unsigned long long state; /* 64-bit LCG state: the seed */
} randnet_rng;

/* A uniform integer in [0, n), n >= 1. */
int randnet_below(randnet_rng *g, int n);

/* What kind of net to draw. RANDNET_SMALL: 2 channels, width 3, 2-8 ops (test_band's nets, its
 * sequence of draws unchanged). RANDNET_WIDE: 1-4 channels per layer, odd and even widths, 2-12
 * ops, stride-2 convolutions with large kernels, padded pools up to 5x5, relus after blocks. */
typedef enum { RANDNET_SMALL, RANDNET_WIDE } randnet_kind;

/* Writes a random net with input height h into buf (len bytes; 8 KiB is enough). */
void randnet_text(randnet_rng *g, randnet_kind kind, char *buf, size_t len, int h);

#endif
