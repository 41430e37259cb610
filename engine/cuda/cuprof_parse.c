/* cuprof_parse: CUPTI activity records -> cuprof's running totals, peaks and kernel times (see
 * cuprof.h for what "reserved" means). Reads records through the CUPTI header types only and never
 * calls CUPTI. cuprof_take may run on CUPTI's thread, so it only appends to arrays; sorting and
 * replay wait for cuprof_settle. Not thread-safe: cuprof.c holds the lock. */
#include "engine/cuda/cuprof.h"

#include <stdlib.h>
#include <string.h>

/* Returns p with room for element n (capacity *cap, element size sz). */
static void *grow(void *p, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return p;
    *cap = *cap ? 2 * *cap : 256;
    return err_realloc(p, *cap * sz);
}

void cuprof_state_init(cuprof_state *s, int n_tags)
{
    memset(s, 0, sizeof *s);
    s->n_tags = n_tags > 0 ? n_tags : 0;
    s->tag_us = err_calloc((size_t)s->n_tags, sizeof *s->tag_us);
}

void cuprof_state_free(cuprof_state *s)
{
    free(s->ev), free(s->live), free(s->pools), free(s->kern), free(s->ext), free(s->tag_us);
    memset(s, 0, sizeof *s);
}

static void push_ev(cuprof_state *s, cuprof_ev v)
{
    v.seq = s->seq++;
    s->ev = grow(s->ev, &s->cap_ev, s->n_ev, sizeof *s->ev);
    s->ev[s->n_ev++] = v;
    s->n_mem++;
}

static void take_memory(cuprof_state *s, const CUpti_ActivityMemory4 *m)
{
    bool alloc = m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE ||
        (!alloc && m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE))
        return;
    CUpti_ActivityMemoryPoolType pt = m->memoryPoolConfig.memoryPoolType;
    /* An imported pool's size field holds a process id: its blocks count, its size does not. */
    push_ev(s, (cuprof_ev){.ts = m->timestamp, .op = alloc ? CUPROF_EV_ALLOC : CUPROF_EV_RELEASE,
                           .addr = m->address, .bytes = m->bytes, .pool = m->memoryPoolConfig.address,
                           .pooled = pt != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID,
                           .has_size = pt == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL,
                           .pool_size = m->memoryPoolConfig.pool.size});
}

static void take_pool(cuprof_state *s, const CUpti_ActivityMemoryPool3 *p)
{
    CUpti_ActivityMemoryPoolOperationType o = p->memoryPoolOperationType;
    if (p->memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL || p->isManagedPool ||
        o == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_INVALID)
        return;
    /* CREATED, TRIMMED: size taken as what the pool holds after the operation (undocumented). */
    bool gone = o == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
    push_ev(s, (cuprof_ev){.ts = p->timestamp, .op = CUPROF_EV_POOL, .pool = p->address,
                           .pooled = true, .has_size = true, .pool_size = gone ? 0 : p->size});
}

void cuprof_take(cuprof_state *s, const CUpti_Activity *rec)
{
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        take_memory(s, (const CUpti_ActivityMemory4 *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        take_pool(s, (const CUpti_ActivityMemoryPool3 *)rec);
        break;
    case CUPTI_ACTIVITY_KIND_KERNEL: /* same record; only CONCURRENT_KERNEL is enabled */
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        s->kern = grow(s->kern, &s->cap_kern, s->n_kern, sizeof *s->kern);
        s->kern[s->n_kern++] = (cuprof_kern){k->start, k->end, k->correlationId};
        break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const CUpti_ActivityExternalCorrelation *)rec;
        if (x->externalKind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
            break;
        s->ext = grow(s->ext, &s->cap_ext, s->n_ext, sizeof *s->ext);
        s->ext[s->n_ext++] = (cuprof_ext){x->externalId, x->correlationId};
        break;
    }
    default:
        break;
    }
}

static int pool_index(cuprof_state *s, uint64_t addr)
{
    for (size_t i = 0; i < s->n_pools; i++)
        if (s->pools[i].addr == addr)
            return (int)i;
    s->pools = grow(s->pools, &s->cap_pools, s->n_pools, sizeof *s->pools);
    s->pools[s->n_pools] = (cuprof_pool){addr, 0, 0};
    return (int)s->n_pools++;
}

static void apply(cuprof_state *s, const cuprof_ev *v)
{
    int p = v->pooled ? pool_index(s, v->pool) : -1;
    if (p >= 0 && v->has_size)
        s->pools[p].size = (int64_t)v->pool_size;
    if (v->op == CUPROF_EV_ALLOC) {
        s->live = grow(s->live, &s->cap_live, s->n_live, sizeof *s->live);
        s->live[s->n_live++] = (cuprof_block){v->addr, (int64_t)v->bytes, p};
        *(p >= 0 ? &s->pools[p].live : &s->direct_cur) += (int64_t)v->bytes;
    } else if (v->op == CUPROF_EV_RELEASE) {
        /* By address, not the record's bytes; newest first (frees tend to be LIFO). A release
         * of something allocated before cuprof_start is not ours to count. */
        for (size_t i = s->n_live; i-- > 0;) {
            if (s->live[i].addr != v->addr)
                continue;
            int q = s->live[i].pool;
            *(q >= 0 ? &s->pools[q].live : &s->direct_cur) -= s->live[i].bytes;
            s->live[i] = s->live[--s->n_live];
            break;
        }
    }
    s->sub_cur = 0;
    s->reserved_cur = s->direct_cur;
    for (size_t i = 0; i < s->n_pools; i++) {
        const cuprof_pool *q = &s->pools[i];
        s->sub_cur += q->live;
        s->reserved_cur += q->size > q->live ? q->size : q->live;
    }
    if (s->reserved_cur > s->reserved_peak)
        s->reserved_peak = s->reserved_cur;
    if (s->sub_cur > s->suballoc_peak)
        s->suballoc_peak = s->sub_cur;
}

static int ev_cmp(const void *a, const void *b)
{
    const cuprof_ev *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void cuprof_settle(cuprof_state *s)
{
    if (s->n_ev)
        qsort(s->ev, s->n_ev, sizeof *s->ev, ev_cmp);
    for (size_t i = 0; i < s->n_ev; i++)
        apply(s, &s->ev[i]);
    s->n_ev = 0;
}

void cuprof_state_mark(cuprof_state *s)
{
    cuprof_settle(s);
    s->reserved_peak = s->reserved_cur;
    s->suballoc_peak = s->sub_cur;
    s->n_mem = 0;
    s->n_kern = s->n_ext = 0;
}

static int ext_cmp(const void *a, const void *b)
{
    const cuprof_ext *x = a, *y = b;
    return x->corr < y->corr ? -1 : x->corr > y->corr;
}

void cuprof_fill(cuprof_state *s, cuprof_report *r)
{
    cuprof_settle(s);
    if (s->n_ext)
        qsort(s->ext, s->n_ext, sizeof *s->ext, ext_cmp);
    memset(r, 0, sizeof *r);
    for (int t = 0; t < s->n_tags; t++)
        s->tag_us[t] = 0;
    for (size_t i = 0; i < s->n_kern; i++) {
        const cuprof_kern *k = &s->kern[i];
        double us = k->end > k->start ? (double)(k->end - k->start) / 1e3 : 0;
        cuprof_ext key = {.corr = k->corr};
        const cuprof_ext *x =
            s->n_ext ? bsearch(&key, s->ext, s->n_ext, sizeof *s->ext, ext_cmp) : NULL;
        r->kernel_us += us;
        if (x && x->ext < (uint64_t)s->n_tags)
            s->tag_us[x->ext] += us;
        else
            r->untagged_us += us;
    }
    r->valid = s->dropped == 0;
    r->dropped = s->dropped;
    r->reserved_peak = s->reserved_peak;
    r->suballoc_peak = s->suballoc_peak;
    r->n_mem_records = s->n_mem;
    r->n_kernels = (int64_t)s->n_kern;
    r->tag_us = s->tag_us;
    r->n_tags = s->n_tags;
}
