/* alloc: see alloc.h. */
#include "engine/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "sim/base/heap.h"

static size_t padded(int64_t bytes) { return ((size_t)(bytes > 0 ? bytes : 1) + 63) / 64 * 64; }

static void *host_get(int64_t bytes, bool host, bool zero)
{
    (void)host;
    void *p = aligned_alloc(64, padded(bytes));
    if (p && zero) memset(p, 0, padded(bytes));
    return p;
}

static void host_put(void *p, bool host) { (void)host, free(p); }

static void *host_move(void *p, int64_t bytes, bool to_host)
{
    void *q = host_get(bytes, to_host, false);
    if (q) memcpy(q, p, padded(bytes)), free(p);
    return q;
}

const alloc_mem alloc_mem_host = {.name = "host heap", .get = host_get, .put = host_put, .move = host_move};

void alloc_init(alloc_stats *a, const alloc_mem *mem)
{
    memset(a, 0, sizeof *a);
    a->mem = mem ? mem : &alloc_mem_host;
    if (a->mem == &alloc_mem_host) heap_tune(HEAP_ENGINE);
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

static void out_of_memory(const alloc_stats *a, const char *what, int64_t bytes, mem_cat cat)
{
    fprintf(stderr, "lrcnn: out of %s memory %s %lld bytes (%s) with %lld held\n", cat == MEM_HOST ? "host" : a->mem->name, what,
            (long long)bytes, mem_cat_name(cat), (long long)a->total);
    exit(1);
}

void *alloc_get(alloc_stats *a, mem_cat cat, int64_t bytes, bool zero)
{
    void *p = a->mem->get(bytes, cat == MEM_HOST, zero);
    if (!p) out_of_memory(a, "allocating", bytes, cat);
    a->n_alloc++;
    account(a, cat, bytes);
    return p;
}

void alloc_put(alloc_stats *a, void *p, mem_cat cat, int64_t bytes)
{
    a->mem->put(p, cat == MEM_HOST);
    account(a, cat, -bytes);
}

void *alloc_move(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes)
{
    void *q = a->mem->move(p, bytes, to == MEM_HOST);
    if (!q) out_of_memory(a, "moving", bytes, to);
    bool rec = a->record;
    a->record = false; /* one event on the timeline, as in the replay */
    account(a, from, -bytes);
    a->record = rec;
    account(a, to, bytes);
    return q;
}
