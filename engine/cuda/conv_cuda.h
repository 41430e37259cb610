/* conv_cuda: the CUDA backend's convolutions on cuDNN — the calls dnn.h plans, executed; one
 * algorithm policy that the workspace model and the run share; and that workspace model.
 *
 * The policy, for one call (direction, its tensors' sizes and strides, padding, stride, dilation,
 * groups, FMA math, determinism, the workspace limit, the policy: its key), cached with the call's
 * descriptors:
 *   0. a choice stored for the same key (engine/algo_book.h: a profile's, conv_cuda_take; so only in
 *      find mode, which stores them), when cuDNN still gives its workspace within the limit;
 *   1. cuDNN's heuristic ranking (cudnnGet*Algorithm_v7), or with LRCNN_CUDNN_FIND=1 its measured
 *      one (cudnnFind*Algorithm: every algorithm of the direction run once on scratch cuDNN
 *      allocates, fastest first; those it timed with TF32 left out), once a call shape and
 *      process, when the schedule is lowered (the workspace model asks for each step's calls
 *      before the run makes them): the first algorithm that succeeds within the limit (and is
 *      deterministic when LRCNN_CUDNN_DETERMINISTIC=1);
 *   2. else every algorithm of the direction asked directly (cudnnGet*WorkspaceSize: the ranking
 *      may leave out one that works, a zero-workspace one above all): the smallest workspace within
 *      the limit;
 *   fatal only when neither leaves one, naming each algorithm's status and the call's descriptors.
 * The limit is LRCNN_CUDNN_WS_MB (default 256 MiB) for the model and the run alike, so both make the
 * same choice; the run checks that the choice fits what the schedule gave the step (its workspace
 * less the staging at its end) and stops, naming the step, if a schedule was lowered with another
 * model. Workspace of a step = the largest algorithm workspace of its calls, rounded up to 256
 * bytes, plus its staging (dnn.h), at every place a band of those rows can take when the lowering
 * does not say which (sim/lower/sched.h: sched_ws_query).
 * Not here: the call plans (dnn.h), bias forward and everything else (ops_cuda.c). */
#ifndef LRCNN_CONV_CUDA_H
#define LRCNN_CONV_CUDA_H

#include <stdbool.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "engine/ops.h"

/* device: the device and cuDNN in words, stamped on the choices this process measures. */
void conv_cuda_init(cudnnHandle_t dnn, cudaStream_t stream, int64_t ws_limit, bool deterministic, bool find, const char *device);
/* Destroys the cached descriptors (ops_cuda_close). */
void conv_cuda_close(void);

/* A NET_CONV step (ops.h's contract): forward writes y's rows [a, b) (bias added by the caller);
 * backward adds to dw (weights then bias) and dx as the call says. */
void conv_cuda_forward(const ops_call *c);
void conv_cuda_backward(const ops_call *c);

/* ops_table's algos_made and algos_take (engine/ops.h): what tier 1 measured in find mode, and
 * tier 0's book (its format and device must be this process's). */
const algo_book *conv_cuda_made(void);
int conv_cuda_take(const algo_book *b, err *e);

/* The workspace model's answer for a convolution (0 for any other kind). */
int64_t conv_cuda_ws_bytes(const net *n, const sched_ws_query *q);

/* What layer L's convolutions last ran with: the algorithm and workspace of each direction
 * (ops_device_layer's algo and ws; -1 and 0 where none ran since conv_cuda_restart). */
void conv_cuda_layer(int L, int algo[3], int64_t ws[3]);
/* The policy in words, as result files record it: "heuristic within 256 MiB, forward slices staged",
 * "measured (find) within 4096 MiB, deterministic only, forward on slices" (engine/cuda/dnn.h). */
void conv_cuda_policy(char *out, size_t len);
void conv_cuda_restart(void);

#endif
