/* machine: what a result was made on, recorded in every result file (io/h5.c's root attributes):
 * the CPU model, the OpenMP threads and wait policy the engine runs with, and the source commit
 * with whether the tree differed from it. Not done here: writing them. */
#ifndef LRCNN_MACHINE_H
#define LRCNN_MACHINE_H

#include <stddef.h>

/* /proc/cpuinfo's first "model name", or "unknown". */
void machine_cpu_model(char *buf, size_t len);
/* The threads OpenMP starts with: OMP_NUM_THREADS's first value when set, else the CPUs this
 * process may run on (GNU OpenMP's default). */
int machine_threads(void);
/* OMP_WAIT_POLICY as the engine sees it ("passive" is lrcnn's default: cli/main.c). */
const char *machine_wait_policy(void);
/* `git rev-parse --short HEAD` of the source tree ("unknown" outside one) and whether tracked files
 * differ from that commit (1), not (0), or unknown (-1). */
void machine_git(char *commit, size_t len, int *dirty);

#endif
