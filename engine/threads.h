/* threads: how many OpenMP threads the CPU engine (its loops and OpenBLAS's, one pool) runs with,
 * chosen once per process before its first parallel region.
 *
 * The user's choice when there is one (lrcnn --threads N, or OMP_NUM_THREADS); otherwise the CPUs
 * this process may run on less the threads of other processes that are runnable (/proc/stat's
 * procs_running over 20 ms), at least one. Why: OpenMP's threads meet at a barrier after every loop, so
 * one of them sharing a core with another process holds all of them up; on two cores beside one
 * busy process, VGG-small's iteration took 14-780 ms with two threads (by wait policy) and 11 ms
 * with one (experiments/load_timing.sh). Times compare only at equal thread counts: every result
 * file records the count (io/h5.c).
 *
 * How an idle thread waits: unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT), it spins for
 * 10,000 rounds (about a tenth of a millisecond) and then sleeps. Measured on 2 cores, VGG-small
 * 64x64 batch 8 (experiments/load_timing.sh): sleeping at once (passive) took 19 ms an iteration
 * idle, twice the 9.4 ms of spinning, since every loop's barrier then costs a futex wake-up; GNU
 * OpenMP's default spin (300,000 rounds) took 780 ms beside one busy process; 10,000 rounds is as
 * fast as spinning idle, and the thread count keeps the engine off busy cores. GNU OpenMP reads it
 * when the program loads, so a program sets it and runs itself again (engine_env_reexec; lrcnn in
 * cli/main.c, with --threads). Not done here: the thread count's own flag (cli/main.c). */
#ifndef LRCNN_THREADS_H
#define LRCNN_THREADS_H

#include <stdbool.h>

/* The engine's thread count, chosen on the first call (and set with omp_set_num_threads). */
int engine_threads(void);
/* How it was chosen, e.g. "OMP_NUM_THREADS=1" or "the CPUs free when the engine started: 1 of 2, 1 threads
 * of other processes running". */
const char *engine_threads_why(void);

/* Sets GOMP_SPINCOUNT as above where the user chose no wait policy; true when it did, and the
 * process should run itself again before its first parallel region. */
bool engine_wait_env(void);

/* engine_wait_env and blas_cpu_env (engine/cpu/blas_cpu.h), and where either set something, the
 * process again (execv of /proc/self/exe with argv; should that fail, it goes on as it was): for
 * programs that set nothing else before they run again (lrcnn_bench_engine, the tests that run
 * the engine), so that they run the engine as lrcnn does. */
void engine_env_reexec(char **argv);

#endif
