/* ops_cuda: the CUDA backend (ops.h) — cuDNN convolutions, activation and batch norm, cuBLAS for
 * fully connected layers, our kernels (kernels.h) for the rest; device memory from the device's
 * stream-ordered pool (cudaMallocAsync, release threshold at its maximum, so freed blocks stay
 * reserved for reuse and per-tensor allocation is cheap); offload to pinned host memory with
 * asynchronous copies on a second stream, ordered by events.
 *
 * Precision: fp32 throughout — cuDNN in CUDNN_FMA_MATH and cuBLAS in its default math, so no
 * TF32 tensor cores (results must match the CPU engine to fp32 rounding).
 * Convolution algorithms: cuDNN's heuristic ranking (cudnnGet*Algorithm_v7), the first algorithm
 * whose workspace fits the limit — LRCNN_CUDNN_WS_MB (default 256 MiB) when the schedule is
 * lowered, then what the schedule gave when the step runs; LRCNN_CUDNN_DETERMINISTIC=1 keeps only
 * deterministic ones. The choice and its workspace are recorded per layer (ops_cuda_algos).
 * Not here: CUPTI (cuprof.h), scheduling, anything without a GPU (ops_cuda_open fails cleanly). */
#ifndef LRCNN_OPS_CUDA_H
#define LRCNN_OPS_CUDA_H

#include "engine/ops.h"
#include "sim/sched.h"

/* The backend, after initializing the first device; NULL with a reason in e when there is no
 * usable GPU (no driver, no device). profile: start CUPTI first (cuprof.h) and tag kernels. */
const ops_table *ops_cuda_open(bool profile, err *e);

/* The workspace model to lower schedules with (sched_cfg.ws) for net n. */
const sched_ws_model *ops_cuda_ws_model(void);

typedef struct {
    int fwd, bwd_data, bwd_filter;        /* cuDNN algorithm enums, -1 not run */
    int64_t fwd_ws, bwd_data_ws, bwd_filter_ws;
} ops_cuda_algo;

/* Per layer of the last net run (index = layer), n_layers entries; NULL before any convolution. */
const ops_cuda_algo *ops_cuda_algos(int *n_layers);

/* Device name, driver, runtime and cuDNN versions, one line. */
void ops_cuda_describe(char *out, size_t len);

/* Device bytes in use (cudaMemGetInfo: total - free), for the "device" peak. */
int64_t ops_cuda_device_used(void);

#endif
