/* alloc: see alloc.h. */
#include "alloc.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* Large blocks come from malloc's heap, not from fresh mmaps: a freed activation is then reused by
 * the next allocation instead of being unmapped and faulted in again, page by page, every
 * iteration (that cost ~0.3 s per VGG-16 iteration). Freed memory still returns to malloc. */
static void heap_only(void)
{
    static int done;
    if (done++) return;
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
}

void alloc_init(alloc_stats *a)
{
    heap_only();
    memset(a, 0, sizeof *a);
}

void alloc_free_stats(alloc_stats *a)
{
    free(a->timeline);
    a->timeline = NULL;
}

void alloc_reset_peaks(alloc_stats *a)
{
    memcpy(a->max, a->cur, sizeof a->max);
    memcpy(a->at_peak, a->cur, sizeof a->at_peak);
    a->peak = a->total;
    a->host_peak = a->cur[MEM_HOST];
    a->n_timeline = 0;
}

static void account(alloc_stats *a, mem_cat cat, int64_t delta)
{
    a->cur[cat] += delta;
    if (cat != MEM_HOST) a->total += delta;
    if (a->cur[cat] > a->max[cat]) a->max[cat] = a->cur[cat];
    if (a->cur[MEM_HOST] > a->host_peak) a->host_peak = a->cur[MEM_HOST];
    if (a->total > a->peak) {
        a->peak = a->total;
        memcpy(a->at_peak, a->cur, sizeof a->cur);
    }
    if (a->record) {
        if (a->n_timeline == a->cap_timeline)
            a->timeline = err_realloc(a->timeline, (size_t)(a->cap_timeline = a->cap_timeline * 2 + 1024) * sizeof(int64_t));
        a->timeline[a->n_timeline++] = a->total;
    }
}

void *alloc_get(alloc_stats *a, mem_cat cat, int64_t bytes, bool zero)
{
    size_t size = ((size_t)(bytes > 0 ? bytes : 1) + 63) / 64 * 64;
    void *p = aligned_alloc(64, size);
    if (!p) {
        fprintf(stderr, "lrcnn: out of host memory allocating %lld bytes (%s)\n", (long long)bytes, mem_cat_name(cat));
        exit(1);
    }
    if (zero) memset(p, 0, size);
    a->n_alloc++;
    account(a, cat, bytes);
    return p;
}

void alloc_put(alloc_stats *a, void *p, mem_cat cat, int64_t bytes)
{
    free(p);
    account(a, cat, -bytes);
}

void *alloc_move(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes)
{
    size_t size = ((size_t)(bytes > 0 ? bytes : 1) + 63) / 64 * 64;
    void *q = aligned_alloc(64, size);
    if (!q) {
        fprintf(stderr, "lrcnn: out of host memory moving %lld bytes (%s)\n", (long long)bytes, mem_cat_name(to));
        exit(1);
    }
    memcpy(q, p, size);
    free(p);
    bool rec = a->record;
    a->record = false; /* one event on the timeline, as in the replay */
    account(a, from, -bytes);
    a->record = rec;
    account(a, to, bytes);
    return q;
}
