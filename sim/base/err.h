/* err: the project's one error convention.
 *
 * User errors (bad net file, impossible plan, bad flag) travel back to the command line as a
 * one-line message in an err value; functions that can fail on user input return -1 after
 * err_set(), 0 on success. Internal invariants use CHECK, which aborts with the place: a failed
 * CHECK is a bug in lrcnn, never the user's fault. */
#ifndef LRCNN_ERR_H
#define LRCNN_ERR_H

#include <stdio.h>
#include <stdlib.h>

#define ERR_LEN 512

typedef struct {
    char msg[ERR_LEN];
} err;

/* Formats the message into e (if non-NULL) and returns -1, so callers can `return err_set(...)`. */
int err_set(err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message ("where: " + old message); returns -1. */
int err_wrap(err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CHECK(cond)                                                                           \
    do {                                                                                      \
        if (!(cond)) {                                                                        \
            fprintf(stderr, "lrcnn: internal error: CHECK(%s) failed in %s at %s:%d\n", #cond, \
                    __func__, __FILE__, __LINE__);                                            \
            abort();                                                                          \
        }                                                                                     \
    } while (0)

/* calloc that never returns NULL (out of host memory is not recoverable here). */
void *err_calloc(size_t n, size_t size);
void *err_realloc(void *p, size_t size);
/* strdup likewise. */
char *err_strdup(const char *s);

#endif
