/* err: see err.h. */
#include "sim/base/err.h"

#include <stdarg.h>
#include <string.h>

int err_set(err *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int err_wrap(err *e, const char *fmt, ...)
{
    if (e) {
        char head[ERR_LEN], old[ERR_LEN];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(head, sizeof head, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        snprintf(e->msg, sizeof e->msg, "%.200s: %.300s", head, old);
    }
    return -1;
}

void *err_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "lrcnn: out of host memory (%zu x %zu bytes)\n", n, size);
        abort();
    }
    return p;
}

void *err_realloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) {
        fprintf(stderr, "lrcnn: out of host memory (%zu bytes)\n", size);
        abort();
    }
    return q;
}

char *err_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(err_calloc(n, 1), s, n);
}
