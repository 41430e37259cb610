/* cucheck: see cucheck.h. */
#include "engine/cuda/cucheck.h"

#include <stdio.h>
#include <stdlib.h>

void cu_fatal(const char *what, const char *msg, const char *file, int line)
{
    fprintf(stderr, "lrcnn: %s failed at %s:%d: %s\n", what, file, line, msg);
    exit(1);
}
