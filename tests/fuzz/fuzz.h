/* fuzz: what the libFuzzer targets of tests/fuzz share (fuzz.c).
 *
 * Every target feeds one input to one parser and returns; libFuzzer with ASan (leaks included) and
 * UBSan reports anything that crashes, reads or writes out of bounds, leaks, trips undefined
 * behaviour, allocates past -malloc_limit_mb or runs past -timeout. A parser is expected to answer
 * every input with 0 or -1 and a message — never any of those. */
#ifndef LRCNN_FUZZ_H
#define LRCNN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "sim/base/err.h"

/* The input as a NUL-terminated string (malloc'd; it ends at the input's first NUL byte). */
char *fuzz_text(const uint8_t *data, size_t size);

/* Writes the input to this process's scratch file (in /dev/shm when there is one, else $TMPDIR or
 * /tmp) and returns its path; the same path every call, removed at exit. */
const char *fuzz_file(const uint8_t *data, size_t size);

/* A scratch directory of this process (created once, emptied at exit), for readers that write. */
const char *fuzz_dir(void);
/* Removes dir and what it holds (files and directories of files); no error if it is not there. */
void fuzz_remove_tree(const char *dir);

/* A finding of the target's own: prints what and aborts (libFuzzer saves the input). */
void fuzz_fail(const char *what, const err *e) __attribute__((noreturn));

/* Aborts if any HDF5 object (file, group, dataset, attribute, named type) is still open: a reader
 * must close everything it opened, on every path. */
void fuzz_h5_all_closed(const char *reader);

#endif
