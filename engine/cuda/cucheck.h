/* cucheck: the CUDA backend's check macros. A failed CUDA, cuDNN or cuBLAS call inside a step stops
 * the program (exit 1) with the statement, file:line and the library's own message: the executor
 * has no way to resume half an iteration. (User errors never get this far: the backend refuses
 * what it cannot run before the first step, ops_table.prepare.) */
#ifndef LRCNN_CUCHECK_H
#define LRCNN_CUCHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

/* Prints "lrcnn: WHAT failed at FILE:LINE: MSG" and exits 1. */
void cu_fatal(const char *what, const char *msg, const char *file, int line) __attribute__((noreturn));

#define CUDA_CHECK(x)                                                                                 \
    do {                                                                                              \
        cudaError_t r_ = (x);                                                                         \
        if (r_ != cudaSuccess) cu_fatal(#x, cudaGetErrorString(r_), __FILE__, __LINE__);              \
    } while (0)
#define CUDNN_CHECK(x)                                                                                \
    do {                                                                                              \
        cudnnStatus_t r_ = (x);                                                                       \
        if (r_ != CUDNN_STATUS_SUCCESS) cu_fatal(#x, cudnnGetErrorString(r_), __FILE__, __LINE__);    \
    } while (0)
#define CUBLAS_CHECK(x)                                                                               \
    do {                                                                                              \
        cublasStatus_t r_ = (x);                                                                      \
        if (r_ != CUBLAS_STATUS_SUCCESS) cu_fatal(#x, cublasGetStatusString(r_), __FILE__, __LINE__); \
    } while (0)

#endif
