/* backend: ops_find, the one place that knows which backends this build has, and what can be
 * known of a backend without opening it. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/cuda/dnn.h"
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

bool ops_on_device(const char *name) { return strcmp(name, "cpu") != 0; }

static int64_t cuda_estimate(const sched_ws_model *m, const net *n, const sched_ws_query *q)
{
    (void)m;
    return dnn_query_stage_bytes(n, q);
}

static const sched_ws_model cuda_staging = {.bytes = cuda_estimate};

const sched_ws_model *ops_ws_estimate(const char *name) { return strcmp(name, "cuda") ? ops_cpu.ws : &cuda_staging; }

int ops_opens(const char *name, err *e)
{
    if (!ops_on_device(name)) return ops_find(name, false, e) ? 0 : -1;
    int fd[2];
    if (pipe(fd)) return err_set(e, "backend %s: pipe failed", name);
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) { /* the child says why not, in one line */
        close(fd[0]);
        err why = {{0}};
        if (ops_find(name, false, &why)) _exit(0);
        ssize_t k = write(fd[1], why.msg, sizeof why.msg);
        _exit(k == (ssize_t)sizeof why.msg ? 1 : 2);
    }
    close(fd[1]);
    err why = {{0}};
    ssize_t got = pid > 0 ? read(fd[0], why.msg, sizeof why.msg - 1) : 0;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    return err_set(e, "%s", got > 0 ? why.msg : "the process that opens it failed");
}
