/* ops_cuda: the CUDA backend (ops.h) — cuDNN convolutions (conv_cuda.h: every call planned on the
 * host, dnn.h), cuDNN batch norm on whole maps, cuBLAS for fully connected layers, our kernels
 * (kernels.h) for the rest, activations and a band's batch norm included; device memory from the
 * device's stream-ordered pool (cudaMallocAsync, release threshold at its maximum, so freed blocks
 * stay reserved for reuse and per-tensor allocation is cheap); offload to one pinned host arena
 * with asynchronous copies on a second stream, ordered by events.
 *
 * Precision: fp32 throughout — cuDNN in CUDNN_FMA_MATH and cuBLAS in its default math, so no
 * TF32 tensor cores (results must match the CPU engine to fp32 rounding).
 * Before a run (ops_table.prepare): what cuDNN's descriptors cannot hold is refused; the scratch
 * (loss, normalization sums), the codec offsets and the pinned arena are sized for the schedule,
 * cuBLAS's workspace was set at open; none of these is allocated inside an iteration.
 * The device itself (ops_table.device_report, watch_cuda.h): its name and the libraries' versions;
 * the bytes the context and the libraries' handles take before the first allocation; the pool's
 * reserved and used high-water marks (cudaMemPoolAttrReservedMemHigh, UsedMemHigh); the bytes held
 * beside the pool and the pinned arena; the algorithm and workspace of each convolution; and with
 * profiling, in the last iteration only (the pass watched, not timed), the device's bytes in use
 * at every step's end (cudaMemGetInfo), CUPTI's reserved and sub-allocated peaks, dropped records
 * and kernel time per layer.
 * Not here: CUPTI (cuprof.h), scheduling, anything without a GPU (ops_cuda_open fails cleanly). */
#ifndef LRCNN_OPS_CUDA_H
#define LRCNN_OPS_CUDA_H

#include "engine/ops.h"
#include "sim/lower/sched.h"

/* The backend, after initializing the first device; NULL with a reason in e when there is no
 * usable GPU: no driver or no device ("no CUDA device: ..."), a GPU this build has no kernels for,
 * or one without stream-ordered memory pools. profile: start CUPTI first (watch_cuda.h: memory records
 * throughout, kernels tagged in the pass watched). */
const ops_table *ops_cuda_open(bool profile, err *e);

/* The workspace model to lower schedules with (sched_cfg.ws) for net n. */
const sched_ws_model *ops_cuda_ws_model(void);

/* Gives back everything open allocated (handles, streams, buffers, descriptors, the pool's kept
 * blocks), so that compute-sanitizer's leak check sees none; a later open starts afresh. */
void ops_cuda_close(void);

/* Device name, compute capability, driver, runtime, cuDNN and cuBLAS versions, one line. */
void ops_cuda_describe(char *out, size_t len);

#endif
