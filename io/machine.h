/* machine: what a result was made on, recorded in every result file (io/h5.c's root attributes):
 * the CPU model, the OpenMP threads and wait policy the engine runs with, its OpenBLAS kernel, and
 * the source commit with whether the tree differed from it, and paths as the source tree names them. Not done here:
 * writing them. */
#ifndef LRCNN_MACHINE_H
#define LRCNN_MACHINE_H

#include <stddef.h>

/* /proc/cpuinfo's first "model name", or "unknown". */
void machine_cpu_model(char *buf, size_t len);
/* The engine's OpenMP threads (engine/threads.h: chosen on the first call). */
int machine_threads(void);
/* The OpenBLAS kernel the engine's products run on (engine/cpu/blas_cpu.h), as one line. */
const char *machine_blas(void);
/* How idle OpenMP threads wait: OMP_WAIT_POLICY when set, else "spin N rounds, then sleep" with
 * GOMP_SPINCOUNT's N (lrcnn's default 10000: engine/threads.h; GNU OpenMP's own 300000). */
const char *machine_wait_policy(void);
/* `git rev-parse --short HEAD` of the source tree ("unknown" outside one) and whether tracked files
 * outside the outputs (results/, paper/) differ from that commit (1), not (0), or unknown (-1). */
void machine_git(char *commit, size_t len, int *dirty);
/* A path as a result file records it: relative to the source tree's root when the file lies inside
 * it ("experiments/demo.spec", "nets/vgg16.net", however it was named), so that the same run on
 * another machine or checkout records the same text; else the path as given. Into buf. */
const char *machine_portable_path(const char *path, char *buf, size_t len);

#endif
