/* watch_cuda: what the CUDA backend sees of the device itself (ops_table.tag, device_mark,
 * device_report): the device and the libraries' versions, the bytes the context takes, the pool's
 * high-water marks, the pinned arena, each convolution's algorithm; and with profiling, CUPTI
 * (cuprof.h) in two passes. CUPTI records memory throughout, so its running totals hold; the
 * records made on every launch (kernels, the API calls that tag them) and the sample of the bytes
 * in use at each step's end only in the pass watched, from device_mark to device_report, which a
 * run makes its last iteration, so that the iterations timed do not pay for them (run.h). */
#ifndef LRCNN_WATCH_CUDA_H
#define LRCNN_WATCH_CUDA_H

#include <cublas_v2.h>

#include "engine/ops.h"

/* Before the CUDA context exists: profile starts CUPTI (its allocations are recorded). */
int watch_open(bool profile, err *e);
/* Once the context and the libraries' handles exist, before the first allocation: their bytes, and
 * the launch records off until the pass watched. */
int watch_ready(cublasHandle_t blas, err *e);
/* tag(-1) ends a step: the bytes in use sampled there, in the pass watched. */
void watch_tag(int tag);
/* ops_table.device_mark: peaks restarted; whether the next iteration is the pass watched (profiling). */
bool watch_mark(void);
/* ops_table.device_report, with the bytes the backend holds beside the pool (outside_pool). */
void watch_report(ops_device *d, ops_device_layer *layers, int n_layers, int64_t outside_pool);
/* The device and the libraries' versions (ops_device's first fields). */
void watch_describe(ops_device *d);
void watch_close(void);

#endif
