/* conv_split: how the CUDA backend runs a convolution on a band of output rows with cuDNN, whose
 * convolutions take one symmetric padding per axis, while a band has its own: true zero rows at
 * an image border, none at an interior edge, and often different above and below (a stride-2
 * layer's last window ends before the bottom padding).
 *
 * cuDNN sees a view of real input rows [v0, v1) (a strided window into the band buffer, no copy)
 * with `pad` virtual zero rows on each side, and computes `out` output rows, which are global rows
 * [o0, o0 + out). A virtual zero row stands for a padding row, or for a real row that only rows
 * outside [a, b) read. So any pad >= the band's own top and bottom padding works, as long as the
 * windows line up ((v0 - pad + p) divisible by the stride); when cuDNN then computes exactly
 * [a, b) the call writes straight into y, otherwise into a staging buffer from which rows [a, b)
 * are copied (and backward stages dy with zeros in the extra rows). To keep staging small, a band
 * that is not one direct call is split into its top border rows, an unpadded middle (always
 * direct) and its bottom border rows.
 * Not here: cuDNN itself (ops_cuda.c). Pure arithmetic, tested on the CPU (tests/test_conv_split.c). */
#ifndef LRCNN_CONV_SPLIT_H
#define LRCNN_CONV_SPLIT_H

#include <stdbool.h>

#include "sim/net/net.h"

typedef struct {
    int a, b;     /* output rows this piece delivers */
    int o0, out;  /* rows cuDNN computes: [o0, o0 + out) */
    int pad;      /* symmetric row padding given to cuDNN */
    int v0, v1;   /* real input rows it reads; v0 >= v1: none (the rows read only padding: a
                     1x1 padded convolution's border, whose output is the bias alone) */
} conv_piece;

/* Pieces (1 to 3, in row order, covering [a, b) once) for output rows [a, b) of a convolution
 * with window w over an input of in_h rows. */
int conv_split(net_window w, int in_h, int a, int b, conv_piece piece[3]);

static inline bool conv_piece_direct(const conv_piece *c) { return c->o0 == c->a && c->out == c->b - c->a; }

/* The most output rows a staged piece of a band of `rows` rows can compute (staging buffer size). */
int conv_split_stage_rows(net_window w, int rows);

#endif
