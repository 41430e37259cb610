/* threads: see threads.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "engine/threads.h"

#include "engine/cpu/blas_cpu.h"

#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int chosen;
static char why[160];

static int cpus_allowed(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

/* How many threads of other processes are runnable: /proc/stat's procs_running (every runnable
 * thread on the machine, this one included) sampled 11 times over 20 ms, the median less this
 * thread; -1 when unreadable. A snapshot, not an average: a busy process is always runnable, one
 * that mostly sleeps rarely is, and the median drops a passing one. */
static int threads_busy_elsewhere(void)
{
    enum { SAMPLES = 11 };
    int got[SAMPLES], n = 0;
    for (int k = 0; k < SAMPLES; k++) {
        if (k) nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
        FILE *f = fopen("/proc/stat", "r");
        char line[256];
        int running = -1;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "procs_running %d", &running) == 1) break;
        if (f) fclose(f);
        if (running < 1) return -1;
        int i = n++; /* insertion sort */
        for (; i > 0 && got[i - 1] > running; i--) got[i] = got[i - 1];
        got[i] = running;
    }
    return got[SAMPLES / 2] - 1;
}

int engine_threads(void)
{
    if (chosen) return chosen;
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) { /* GNU OpenMP parsed it at load */
        chosen = omp_get_max_threads();
        snprintf(why, sizeof why, "OMP_NUM_THREADS=%s", env);
        return chosen;
    }
    int cpus = cpus_allowed();
    int busy = cpus > 1 ? threads_busy_elsewhere() : 0;
    int free_cpus = busy < 0 ? cpus : cpus - busy;
    chosen = free_cpus < 1 ? 1 : free_cpus > cpus ? cpus : free_cpus;
    omp_set_num_threads(chosen);
    if (busy < 0) snprintf(why, sizeof why, "the CPUs this process may use; /proc/stat unreadable");
    else snprintf(why, sizeof why, "the CPUs free when the engine started: %d of %d, %d thread(s) of other processes running", chosen, cpus, busy);
    return chosen;
}

const char *engine_threads_why(void)
{
    engine_threads();
    return why;
}

bool engine_wait_env(void)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return false;
    setenv("GOMP_SPINCOUNT", "10000", 1);
    return true;
}

void engine_env_reexec(char **argv)
{
    bool wait = engine_wait_env(), blas = blas_cpu_env();
    if (wait || blas) execv("/proc/self/exe", argv);
}
