/* threads: how many OpenMP threads the CPU engine (its loops and OpenBLAS's, one pool) runs with,
 * chosen once per process before its first parallel region.
 *
 * The user's choice when there is one (lrcnn --threads N, or OMP_NUM_THREADS); otherwise the CPUs
 * this process may run on less the threads of other processes that are runnable (/proc/stat's
 * procs_running over 20 ms), at least one. Why: OpenMP's threads meet at a barrier after every loop, so
 * one of them sharing a core with another process holds all of them up; on two cores beside one
 * busy process, VGG-small's iteration took 14-780 ms with two threads (by wait policy) and 11 ms
 * with one (experiments/load_timing.sh). Times compare only at equal thread counts: every result
 * file records the count (io/h5.c). Not done here: the wait policy (cli/main.c). */
#ifndef LRCNN_THREADS_H
#define LRCNN_THREADS_H

/* The engine's thread count, chosen on the first call (and set with omp_set_num_threads). */
int engine_threads(void);
/* How it was chosen, e.g. "OMP_NUM_THREADS=1" or "the CPUs free when the engine started: 1 of 2, 1 threads
 * of other processes running". */
const char *engine_threads_why(void);

#endif
