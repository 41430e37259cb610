/* adapt: COMET's adaptive error bound, for the maps a plan stores with ZFP fixed accuracy
 * (`+zfp:acc=E:adapt=T:every=W`, docs/plans.md; paper/model.md says where it follows COMET).
 *
 * The model. A convolution (or fc) computes its weight gradient dW = sum over images and places of
 * dy x. If its kept input x comes back with independent errors of RMS s, each weight's gradient
 * gets an error of variance s^2 times the sum of dy^2 over that weight's output channel, so
 *     |error of dW| / |dW| = s * sqrt(K * sum dy^2) / |dW|,   K the layer's fan-in (C_in k^2).
 * The executor measures sum dy^2 at the layer's backward (its bands' rows, decoded copies of the
 * map only) and |dW| once the gradients are complete, and sets the bound of the map's producer
 * so that this relative error is T, taking errors uniform within the bound (s = bound / sqrt 3;
 * ZFP's are smaller, so the model is conservative: paper/model.md): the bound's target per
 * iteration is sqrt(3) T |dW| / sqrt(K sum dy^2),
 * the least over the map's readers; every W iterations the map's bound becomes the mean of the
 * window's targets. Until the first window ends, the bound is acc x the map's range.
 * Maps that no convolution or fc reads (a BatchNorm's input) keep acc x range.
 * Not done here: the codec (the bound reaches it through ops_codec.bound). */
#ifndef LRCNN_ADAPT_H
#define LRCNN_ADAPT_H

#include "engine/ops.h"

typedef struct {
    double target;     /* T */
    int every;         /* W */
    int iters;         /* iterations in the current window */
    int *src;          /* [n_buf] the producer layer whose adaptive map buffer b is the decoded copy of, -1 none */
    int *reads;        /* [layer] the producer whose map the layer's backward reads (conv, fc), -1 none */
    double *dy2;       /* [layer] sum of dy^2 over its backward steps this iteration */
    double *used;      /* [layer] producer: the bound its map was encoded with this iteration (largest over bands) */
    double *bound;     /* [layer] producer: the adapted bound, 0 until the first window ends */
    double *window;    /* [layer] producer: sum of the window's targets */
    double *model_err; /* [layer] producer: the model's relative weight-gradient error at `used`, this
                          iteration (largest over the map's readers); -1 where none reads it */
    double *goal;      /* [layer] producer: this iteration's target bound (scratch of adapt_update) */
    int *pgrad;        /* [layer] the buffer of its parameter gradient, -1 none */
} adapt;

/* Sets a up for schedule s of plan p on net n, or leaves it empty (a.target 0) when the plan has
 * no adaptive modifier. */
void adapt_init(adapt *a, const net *n, const plan *p, const sched *s);
void adapt_free(adapt *a);
/* What the layer L's backward step t read and wrote: adds its dy rows to sum dy^2 when it reads
 * an adaptive map. dy: the step's output-gradient buffer. */
void adapt_backward(adapt *a, const ops_table *ops, const net *n, const sched *s, const sched_step *t, const float *dy);
/* Gradients complete (ptr: the executor's buffers): the targets from each reader's |dW|; every W
 * iterations the new bounds. */
void adapt_update(adapt *a, const ops_table *ops, const net *n, void *const *ptr);

#endif
