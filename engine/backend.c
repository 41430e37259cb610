/* backend: ops_find, the one place that knows which backends this build has. */
#include <string.h>

#include "engine/ops.h"
#ifdef LRCNN_HAVE_CUDA
#include "engine/cuda/ops_cuda.h"
#endif

const ops_table *ops_find(const char *name, bool profile, err *e)
{
    if (!strcmp(name, "cpu")) return &ops_cpu;
    if (!strcmp(name, "cuda")) {
#ifdef LRCNN_HAVE_CUDA
        return ops_cuda_open(profile, e);
#else
        (void)profile;
        err_set(e, "backend cuda: this build has no CUDA backend (nvcc was not found when it was configured)");
        return NULL;
#endif
    }
    err_set(e, "unknown backend '%s' (cpu, cuda)", name);
    return NULL;
}
