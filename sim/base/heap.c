/* heap: see heap.h. glibc's starting values: mmap threshold 128 KiB (then adaptive), trim
 * threshold 128 KiB, up to 65536 mmapped blocks; setting a threshold fixes it. */
#include "sim/base/heap.h"

#include <malloc.h>

void heap_tune(heap_mode m)
{
    static const struct {
        int mmap_threshold, trim_threshold, mmap_max;
    } modes[] = {
        [HEAP_DEFAULT] = {128 << 10, 128 << 10, 65536},
        [HEAP_SWEEP] = {32 << 20, 1 << 30, 65536}, /* 32 MiB: glibc's largest mmap threshold */
        [HEAP_ENGINE] = {32 << 20, -1, 0},        /* no mmapped blocks at all, never trimmed */
    };
    mallopt(M_MMAP_THRESHOLD, modes[m].mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, modes[m].trim_threshold);
    mallopt(M_MMAP_MAX, modes[m].mmap_max);
    if (m == HEAP_DEFAULT) malloc_trim(0);
}
