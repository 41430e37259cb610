/* torch_alloc: the caching allocator's replay (torch_alloc.h). Blocks form one list per segment,
 * in address order; the free blocks of a pool are found by a scan (schedules hold thousands of
 * buffers, not millions). */
#include "sim/predict/torch_alloc.h"

#include <stdbool.h>
#include <stdlib.h>

#include "sim/base/err.h"

#define MIN_BLOCK 512LL
#define SMALL_SIZE (1LL << 20)        /* the largest small request */
#define SMALL_SEGMENT (2LL << 20)
#define LARGE_SEGMENT (20LL << 20)    /* for requests under MIN_LARGE_ALLOC */
#define MIN_LARGE_ALLOC (10LL << 20)
#define ROUND_LARGE (2LL << 20)

typedef struct {
    int64_t off, size;
    int seg, prev, next; /* neighbours in the segment, -1 at its ends */
    bool free, small;
} block;

typedef struct {
    block *b;
    int n, cap;
    int64_t reserved;
    int n_seg;
} pool;

int64_t torch_round(int64_t bytes) { return bytes < MIN_BLOCK ? MIN_BLOCK : (bytes + MIN_BLOCK - 1) / MIN_BLOCK * MIN_BLOCK; }

int64_t torch_segment(int64_t rounded)
{
    if (rounded <= SMALL_SIZE) return SMALL_SEGMENT;
    if (rounded < MIN_LARGE_ALLOC) return LARGE_SEGMENT;
    return (rounded + ROUND_LARGE - 1) / ROUND_LARGE * ROUND_LARGE;
}

static int push(pool *p, block b)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->b = err_realloc(p->b, (size_t)p->cap * sizeof *p->b);
    }
    p->b[p->n] = b;
    return p->n++;
}

/* The block a request of `bytes` takes (its index). */
static int take(pool *p, int64_t bytes)
{
    int64_t size = torch_round(bytes);
    bool small = size <= SMALL_SIZE;
    int best = -1;
    for (int i = 0; i < p->n; i++) {
        const block *b = &p->b[i];
        if (!b->free || b->small != small || b->size < size) continue;
        if (best < 0 || b->size < p->b[best].size ||
            (b->size == p->b[best].size && (b->seg < p->b[best].seg || (b->seg == p->b[best].seg && b->off < p->b[best].off))))
            best = i;
    }
    if (best < 0) { /* a new segment */
        int64_t seg = torch_segment(size);
        p->reserved += seg;
        best = push(p, (block){.off = 0, .size = seg, .seg = p->n_seg++, .prev = -1, .next = -1, .free = true, .small = small});
    }
    block *b = &p->b[best];
    int64_t rest = b->size - size;
    if (small ? rest >= MIN_BLOCK : rest > SMALL_SIZE) {
        block r = {.off = b->off + size, .size = rest, .seg = b->seg, .prev = best, .next = b->next, .free = true, .small = small};
        int k = push(p, r);
        b = &p->b[best]; /* push may have moved the array */
        if (r.next >= 0) p->b[r.next].prev = k;
        b->next = k, b->size = size;
    }
    b->free = false;
    return best;
}

/* Frees block i, merging it with free neighbours (the merged-away blocks stay in the array, dead). */
static void give(pool *p, int i)
{
    block *b = &p->b[i];
    b->free = true;
    int nx = b->next;
    if (nx >= 0 && p->b[nx].free) {
        b->size += p->b[nx].size, b->next = p->b[nx].next;
        if (b->next >= 0) p->b[b->next].prev = i;
        p->b[nx].size = 0, p->b[nx].free = false; /* dead */
    }
    int pv = b->prev;
    if (pv >= 0 && p->b[pv].free) {
        p->b[pv].size += b->size, p->b[pv].next = b->next;
        if (b->next >= 0) p->b[b->next].prev = pv;
        b->size = 0, b->free = false;
    }
}

int64_t torch_reserved(const sched *s)
{
    pool p = {0};
    int *at = err_calloc((size_t)s->n_buf + 1, sizeof *at); /* buffer -> its block, -1 none */
    for (int k = 0; k < s->n_buf; k++) at[k] = -1;
    for (int k = 0; k < s->n_buf; k++)
        if (s->bufs[k].persistent && !s->bufs[k].host_home && s->bufs[k].bytes > 0) at[k] = take(&p, s->bufs[k].bytes);
    sched_events ev;
    sched_events_open(s, &ev);
    for (int iter = 0; iter < 2; iter++)
        for (int i = 0; i < ev.n; i++) {
            const sched_event *t = &ev.ev[i];
            if (t->op != SCHED_ALLOC && t->op != SCHED_FREE) continue;
            const sched_buf *b = &s->bufs[t->buf];
            if (b->persistent || b->host_home || b->bytes <= 0) continue;
            if (t->op == SCHED_ALLOC && at[t->buf] < 0) at[t->buf] = take(&p, b->bytes);
            else if (t->op == SCHED_FREE && at[t->buf] >= 0) give(&p, at[t->buf]), at[t->buf] = -1;
        }
    int64_t reserved = p.reserved;
    free(p.b), free(at), sched_events_close(&ev);
    return reserved;
}
