/* watch_cuda: see watch_cuda.h. */
#include "engine/cuda/watch_cuda.h"

#include <stdio.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "engine/cuda/conv_cuda.h"
#include "engine/cuda/cucheck.h"
#include "engine/cuda/cuprof.h"
#include "engine/cuda/mem_cuda.h"

static struct {
    bool profile;
    bool watch;              /* in the pass watched (watch_mark to watch_report) */
    cublasHandle_t blas;     /* for its version */
    int64_t context_bytes;   /* device bytes in use before the first allocation (ops_device) */
    int64_t device_peak;     /* ... the most at a step's end in the pass watched */
} w;

static int64_t device_used(void)
{
    size_t free_b = 0, total = 0;
    return cudaMemGetInfo(&free_b, &total) == cudaSuccess ? (int64_t)(total - free_b) : -1;
}

int watch_open(bool profile, err *e)
{
    memset(&w, 0, sizeof w);
    w.profile = profile;
    return profile ? cuprof_start(8192, e) : 0;
}

int watch_ready(cublasHandle_t blas, err *e)
{
    w.blas = blas;
    w.context_bytes = device_used(); /* the context, cuDNN's and cuBLAS's handles: before our first byte */
    return w.profile ? cuprof_watch(false, e) : 0;
}

/* as the host has enqueued the work: the pool grows when an allocation is enqueued, not when it runs */
void watch_tag(int tag)
{
    if (!w.watch) return;
    if (tag >= 0) {
        cuprof_tag((uint64_t)tag);
        return;
    }
    cuprof_untag();
    int64_t used = device_used();
    if (used > w.device_peak) w.device_peak = used;
}

bool watch_mark(void)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    mem_cuda_pool_restart();
    w.device_peak = device_used();
    conv_cuda_restart(); /* a net run before: every convolution records again */
    if (!w.profile) return false;
    err e;
    if (cuprof_watch(true, &e) || cuprof_mark(&e)) fprintf(stderr, "lrcnn: CUPTI: %s\n", e.msg); /* the report says it too */
    w.watch = true;
    return true;
}

static void version(char out[16], int v) { snprintf(out, 16, "%d.%d.%d", v / 10000, v % 10000 / 100, v % 100); }

void watch_describe(ops_device *d)
{
    struct cudaDeviceProp p;
    int drv = 0, rt = 0, blas = 0;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) snprintf(p.name, sizeof p.name, "unknown"), p.major = p.minor = 0;
    snprintf(d->name, sizeof d->name, "%.95s", p.name);
    snprintf(d->capability, sizeof d->capability, "%d.%d", p.major % 100, p.minor % 100);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    snprintf(d->driver, sizeof d->driver, "%d.%d", drv / 1000, drv % 1000 / 10);
    snprintf(d->runtime, sizeof d->runtime, "%d.%d", rt / 1000, rt % 1000 / 10);
    version(d->dnn, (int)cudnnGetVersion());
    if (w.blas && cublasGetVersion(w.blas, &blas) == CUBLAS_STATUS_SUCCESS) version(d->blas, blas);
}

void watch_report(ops_device *d, ops_device_layer *layers, int n_layers, int64_t outside_pool)
{
    CUDA_CHECK(cudaDeviceSynchronize());
    memset(d, 0, sizeof *d);
    watch_describe(d);
    d->context_bytes = w.context_bytes;
    d->device_peak = w.profile ? w.device_peak : -1;
    mem_cuda_pool_high(&d->pool_reserved_peak, &d->pool_used_peak);
    d->outside_pool = outside_pool;
    mem_cuda_host(&d->host_arena, &d->host_outside);
    d->cupti_reserved_peak = d->cupti_suballoc_peak = d->dropped = -1, d->kernel_us = -1;
    for (int L = 0; L < n_layers; L++) {
        layers[L] = (ops_device_layer){{-1, -1}, {-1, -1, -1}, {0, 0, 0}};
        conv_cuda_layer(L, layers[L].algo, layers[L].ws);
    }
    cuprof_report r;
    err e;
    if (!w.profile) return;
    w.watch = false; /* the pass watched ends here: a run after this one is timed without */
    if (cuprof_report_get(&r, &e) || cuprof_watch(false, &e)) {
        fprintf(stderr, "lrcnn: CUPTI: %s (the run's CUPTI figures are left out)\n", e.msg);
        return;
    }
    d->profiled = true;
    d->cupti_reserved_peak = r.reserved_peak, d->cupti_suballoc_peak = r.suballoc_peak;
    d->dropped = (int64_t)r.dropped, d->kernel_us = r.kernel_us;
    for (int L = 0; L < n_layers; L++) {
        layers[L].kernel_us[0] = 2 * L < r.n_tags ? r.tag_us[2 * L] : 0;
        layers[L].kernel_us[1] = 2 * L + 1 < r.n_tags ? r.tag_us[2 * L + 1] : 0;
    }
}

void watch_close(void)
{
    if (w.profile) cuprof_stop();
    memset(&w, 0, sizeof w);
}
