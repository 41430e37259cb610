/* weights: parameters in and out of HDF5, so outside tools (tests/torch_ref.py) can check us.
 *
 * File layout (all float32 unless noted; shapes in PyTorch's layout):
 *   /params/<layer>/weight        conv (c_out, c_in, k, k); fc (out, in); bn (c,) = gamma
 *   /params/<layer>/bias          conv and fc with bias (c_out,); bn (c,) = beta
 *   /params/<layer>/running_mean, running_var    bn (c,)
 * A dump (--dump) adds, for one training iteration:
 *   root attributes: net, plan, bn, optimizer (strings); batch, iteration (int32); lr, momentum,
 *                    beta1, beta2, eps, loss (float64); seed (int64)
 *   /input (N, C, H, W) float32, /labels (N,) int64       the batch of that iteration (labels
 *                                                        (N, H, W) under a per-pixel loss)
 *   /params/...     parameters before the iteration (running statistics too)
 *   /grads/<layer>/weight, bias                          gradients of the iteration
 *   /after/<layer>/weight, bias, running_mean, running_var    after the optimizer step
 * --init-weights reads /params/<layer>/... for every layer with parameters (running statistics
 * optional); any missing dataset, wrong shape or wrong type is an error naming the dataset. */
#ifndef LRCNN_WEIGHTS_H
#define LRCNN_WEIGHTS_H

#include "engine/exec.h"

/* Loads /params into the executor's parameter buffers (they must exist: run after exec_start). */
int weights_load(exec *x, const char *path, err *e);

typedef struct {
    const char *plan, *optimizer, *bn;
    int iteration;
    int64_t seed;
    const float *input;
    const int64_t *labels;
    float **before, **grads, **run_before; /* [n layers]: copies taken before the optimizer step */
} weights_dump_args;

/* Writes a dump (layout above) to path (temporary name, renamed; never over an existing file
 * unless overwrite). The executor holds the parameters after the step. */
int weights_dump(const exec *x, const char *path, bool overwrite, const weights_dump_args *d, err *e);

#endif
