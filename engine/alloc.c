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

static void *host_move(void *p, int64_t bytes, bool to_host, void *dst)
{
    if (dst) return memcpy(dst, p, (size_t)(bytes > 0 ? bytes : 0)), dst;
    void *q = host_get(bytes, to_host, false);
    if (q) memcpy(q, p, padded(bytes)), free(p);
    return q;
}

/* An arena: page-aligned and untouched (a large block is mapped, its pages resident only once
 * written), so the process's resident bytes show what the plan's blocks really use. */
static void *host_reserve(int64_t bytes, bool host)
{
    (void)host;
    size_t page = 4096, n = ((size_t)(bytes > 0 ? bytes : 1) + page - 1) / page * page;
    return aligned_alloc(page, n);
}

static void host_release(void *base, int64_t bytes, bool host) { (void)bytes, (void)host, free(base); }

const alloc_mem alloc_mem_host = {.name = "host heap", .get = host_get, .put = host_put, .move = host_move,
                                  .reserve = host_reserve, .release = host_release};

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
    for (int k = 0; k < 2; k++) {
        if (a->base[k]) a->mem->release(a->base[k], a->size[k], k == 1);
        free(a->live[k]);
        a->base[k] = NULL, a->live[k] = NULL, a->n_live[k] = a->cap_live[k] = 0;
    }
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

/* bytes moved from one category to another: one event on the timeline, as in the replay */
static void account_move(alloc_stats *a, mem_cat from, mem_cat to, int64_t bytes)
{
    bool rec = a->record;
    a->record = false;
    account(a, from, -bytes);
    a->record = rec;
    account(a, to, bytes);
}

void *alloc_move(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes)
{
    void *q = a->mem->move(p, bytes, to == MEM_HOST, NULL);
    if (!q) out_of_memory(a, "moving", bytes, to);
    account_move(a, from, to, bytes);
    return q;
}

/* --- arena mode ----------------------------------------------------------------------------------- */

int alloc_arena_open(alloc_stats *a, int64_t device, int64_t host, err *e)
{
    if (!a->mem->reserve) return err_set(e, "the %s memory has no arenas (--alloc pool)", a->mem->name);
    int64_t bytes[2] = {device, host};
    for (int k = 0; k < 2; k++) {
        if (!bytes[k]) continue;
        if (!(a->base[k] = a->mem->reserve(bytes[k], k == 1)))
            return err_set(e, "cannot reserve the plan's %s arena of %lld bytes", k ? "pinned host" : a->mem->name, (long long)bytes[k]);
        a->size[k] = bytes[k];
    }
    return 0;
}

static int side_of(mem_cat cat) { return cat == MEM_HOST; }

/* Where a block of the live list of side k starting at lo is, or would go. */
static int live_at(const alloc_stats *a, int k, int64_t lo)
{
    int i = 0, j = a->n_live[k];
    while (i < j) {
        int m = (i + j) / 2;
        if (a->live[k][m].lo < lo) i = m + 1;
        else j = m;
    }
    return i;
}

/* Block [off, off + bytes rounded) of side k is placed: inside its arena, apart from the others. */
static void check_in(alloc_stats *a, int k, int64_t off, int64_t bytes)
{
    int64_t hi = off + (bytes > 0 ? (bytes + 255) / 256 * 256 : 256);
    const char *side = k ? "host" : "device";
    if (!a->base[k] || off < 0 || hi > a->size[k]) {
        fprintf(stderr, "lrcnn: the %s arena (%lld bytes) cannot hold a block at [%lld, %lld): the plan and the engine disagree\n", side,
                (long long)a->size[k], (long long)off, (long long)hi);
        abort();
    }
    int i = live_at(a, k, off);
    const alloc_span *v = a->live[k];
    if ((i < a->n_live[k] && v[i].lo < hi) || (i > 0 && v[i - 1].hi > off)) {
        const alloc_span *o = i < a->n_live[k] && v[i].lo < hi ? &v[i] : &v[i - 1];
        fprintf(stderr, "lrcnn: a block at [%lld, %lld) of the %s arena over one still placed at [%lld, %lld): the plan and the engine "
                "disagree\n", (long long)off, (long long)hi, side, (long long)o->lo, (long long)o->hi);
        abort();
    }
    if (a->n_live[k] == a->cap_live[k])
        a->live[k] = err_realloc(a->live[k], (size_t)(a->cap_live[k] = a->cap_live[k] * 2 + 64) * sizeof *a->live[k]);
    memmove(a->live[k] + i + 1, a->live[k] + i, (size_t)(a->n_live[k] - i) * sizeof *a->live[k]);
    a->live[k][i] = (alloc_span){off, hi};
    a->n_live[k]++;
    if (hi > a->extent[k]) a->extent[k] = hi;
}

static void check_out(alloc_stats *a, int k, const void *p)
{
    int64_t off = (const char *)p - a->base[k];
    int i = live_at(a, k, off);
    if (i >= a->n_live[k] || a->live[k][i].lo != off) {
        fprintf(stderr, "lrcnn: a block at %lld of the %s arena leaves without having been placed\n", (long long)off, k ? "host" : "device");
        abort();
    }
    memmove(a->live[k] + i, a->live[k] + i + 1, (size_t)(a->n_live[k] - i - 1) * sizeof *a->live[k]);
    a->n_live[k]--;
}

void *alloc_place(alloc_stats *a, mem_cat cat, int64_t off, int64_t bytes)
{
    int k = side_of(cat);
    check_in(a, k, off, bytes);
    a->n_alloc++;
    account(a, cat, bytes);
    return a->base[k] + off;
}

void alloc_unplace(alloc_stats *a, void *p, mem_cat cat, int64_t bytes)
{
    check_out(a, side_of(cat), p);
    account(a, cat, -bytes);
}

void alloc_stage_to(alloc_stats *a, void *p, int64_t bytes, int64_t off)
{
    check_in(a, 1, off, bytes);
    a->mem->stage(p, bytes, a->base[1] + off);
}

void *alloc_move_to(alloc_stats *a, void *p, mem_cat from, mem_cat to, int64_t bytes, int64_t off, unsigned flags)
{
    int k = side_of(to);
    if (!(flags & ALLOC_DST_PLACED)) check_in(a, k, off, bytes);
    void *q = a->mem->move(p, bytes, to == MEM_HOST, a->base[k] + off);
    if (!(flags & ALLOC_SRC_STAYS)) check_out(a, side_of(from), p);
    account_move(a, from, to, bytes);
    return q;
}
