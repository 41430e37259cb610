/* mem_cuda: see mem_cuda.h. */
#include "engine/cuda/mem_cuda.h"

#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cucheck.h"
#include "engine/cuda/fit.h"
#include "sim/predict/arena.h"

/* A move under way (cu_move): the device block, the pinned block of an offload (NULL: a prefetch),
 * and the event that marks the copy's end. */
typedef struct {
    void *dev, *host;
    cudaEvent_t done;
} cu_pending;

static struct {
    cudaStream_t compute, copy;
    char *host;                 /* the pinned host arena, placed by host_fit */
    fit host_fit;
    struct { void *p; int64_t bytes; } *spilled; /* pinned blocks allocated apart when the arena was full */
    int n_spilled, cap_spilled;
    int64_t spilled_bytes, spilled_high;
    cu_pending *pending;        /* moves under way */
    int n_pending, cap_pending;
    char *planned[2];           /* arena mode (cu_reserve): the device arena, the pinned host arena */
    int64_t planned_bytes[2];
} m;

/* Pinned host blocks come from one arena reserved by prepare (fit.h places them). Every copy into
 * or out of a host block runs on the copy stream, in order, so a block is released as soon as the
 * copy that reads it is enqueued: the next copy to reuse its bytes runs after it. A block that does
 * not fit the arena (a data-sized encoding larger than predicted) is allocated apart and counted. */
static void *host_get(int64_t bytes)
{
    int64_t at = m.host ? fit_get(&m.host_fit, bytes) : -1;
    if (at >= 0) return m.host + at;
    void *p = NULL;
    if (cudaMallocHost(&p, (size_t)(bytes > 0 ? bytes : 1)) != cudaSuccess) return NULL;
    if (m.n_spilled == m.cap_spilled) m.spilled = err_realloc(m.spilled, (size_t)(m.cap_spilled = m.cap_spilled * 2 + 8) * sizeof *m.spilled);
    m.spilled[m.n_spilled].p = p, m.spilled[m.n_spilled++].bytes = bytes;
    m.spilled_bytes += bytes;
    if (m.spilled_bytes > m.spilled_high) m.spilled_high = m.spilled_bytes;
    return p;
}

static void host_put(void *p)
{
    if (m.planned[1] && (char *)p >= m.planned[1] && (char *)p < m.planned[1] + m.planned_bytes[1]) return; /* the plan's: it stays */
    if (m.host && (char *)p >= m.host && (char *)p < m.host + m.host_fit.size) {
        CHECK(fit_put(&m.host_fit, (char *)p - m.host));
        return;
    }
    for (int i = 0; i < m.n_spilled; i++)
        if (m.spilled[i].p == p) {
            CUDA_CHECK(cudaStreamSynchronize(m.copy)); /* a copy may still read it: only ever on a spill */
            CUDA_CHECK(cudaFreeHost(p));
            m.spilled_bytes -= m.spilled[i].bytes;
            m.spilled[i] = m.spilled[--m.n_spilled];
            return;
        }
    CHECK(!"a pinned block from elsewhere");
}

static void *cu_get(int64_t bytes, bool host, bool z)
{
    void *p = NULL;
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    if (host) {
        if ((p = host_get(bytes)) && z) memset(p, 0, n); /* before the first iteration (exec_start): no copy in flight */
        return p;
    }
    if (cudaMallocAsync(&p, n, m.compute) != cudaSuccess) return NULL;
    if (z) CUDA_CHECK(cudaMemsetAsync(p, 0, n, m.compute));
    return p;
}

static void cu_put(void *p, bool host)
{
    if (host) host_put(p);
    else CUDA_CHECK(cudaFreeAsync(p, m.compute));
}

/* Moves follow sched_move_issue's protocol (sim/lower/sched.h). An offload's copy is staged: the copy
 * stream waits for the compute work so far (the block's last writer), copies into pinned memory
 * and marks its end; the move later makes the compute stream wait for that mark and frees the
 * device block in compute order, where the schedule releases it, so the pool never holds less than
 * the accounting says. A prefetch takes device memory in compute order (the copy stream waits for
 * the compute work so far), copies, and marks the arrival; the first step that uses the block makes
 * the compute stream wait for it (cu_ready). The host side of a prefetch is released once its copy
 * is enqueued (host_get). */

static cudaEvent_t compute_mark(cudaStream_t wait_on)
{
    cudaEvent_t ev;
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventRecord(ev, m.compute));
    CUDA_CHECK(cudaStreamWaitEvent(wait_on, ev, 0));
    CUDA_CHECK(cudaEventDestroy(ev)); /* released once the work it marks completes */
    CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return ev;
}

static void pending_push(void *dev, void *host, cudaEvent_t done)
{
    if (m.n_pending == m.cap_pending)
        m.pending = err_realloc(m.pending, (size_t)(m.cap_pending = m.cap_pending * 2 + 16) * sizeof *m.pending);
    m.pending[m.n_pending++] = (cu_pending){dev, host, done};
}

/* The move under way of device block dev, taken from the table; false with none. */
static bool pending_take(void *dev, cu_pending *out)
{
    for (int i = 0; i < m.n_pending; i++)
        if (m.pending[i].dev == dev) {
            *out = m.pending[i];
            m.pending[i] = m.pending[--m.n_pending];
            return true;
        }
    return false;
}

static void cu_stage(void *p, int64_t bytes, void *dst)
{
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    void *q = dst ? dst : host_get(bytes);
    if (!q) cu_fatal("cudaMallocHost", "out of pinned host memory for an offload", __FILE__, __LINE__);
    cudaEvent_t done = compute_mark(m.copy);
    CUDA_CHECK(cudaMemcpyAsync(q, p, n, cudaMemcpyDeviceToHost, m.copy));
    CUDA_CHECK(cudaEventRecord(done, m.copy));
    pending_push(p, q, done);
}

static void cu_ready(void *p)
{
    cu_pending c;
    if (!pending_take(p, &c)) return;
    CUDA_CHECK(cudaStreamWaitEvent(m.compute, c.done, 0));
    CUDA_CHECK(cudaEventDestroy(c.done));
}

/* With dst (arena mode) the copy goes there and nothing is allocated or freed: the compute stream
 * still waits for an offload's copy at the move, so the plan's next block at those bytes is written
 * only after it was read; a prefetch's copy waits for the compute work so far, so the bytes' last
 * block has been read. */
static void *cu_move(void *p, int64_t bytes, bool to_host, void *dst)
{
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    cu_pending c;
    if (to_host) {
        if (!pending_take(p, &c)) { /* not staged (calibrating, or the first iteration's migration): now */
            cu_stage(p, bytes, dst);
            CHECK(pending_take(p, &c));
        }
        CUDA_CHECK(cudaStreamWaitEvent(m.compute, c.done, 0));
        CUDA_CHECK(cudaEventDestroy(c.done));
        if (!dst) CUDA_CHECK(cudaFreeAsync(p, m.compute));
        return c.host;
    }
    void *q = dst;
    cudaEvent_t done = compute_mark(m.copy);
    if (!q && cudaMallocAsync(&q, n, m.copy) != cudaSuccess) {
        CUDA_CHECK(cudaEventDestroy(done));
        return NULL;
    }
    CUDA_CHECK(cudaMemcpyAsync(q, p, n, cudaMemcpyHostToDevice, m.copy));
    CUDA_CHECK(cudaEventRecord(done, m.copy));
    pending_push(q, NULL, done);
    host_put(p);
    return q;
}

/* Arena mode: one cudaMalloc for the device arena (outside the pool: what the plan reserves is what
 * the device holds), one pinned block for the host's. */
static void *cu_reserve(int64_t bytes, bool host)
{
    void *p = NULL;
    size_t n = (size_t)(bytes > 0 ? bytes : 1);
    if ((host ? cudaMallocHost(&p, n) : cudaMalloc(&p, n)) != cudaSuccess) return NULL;
    m.planned[host] = p, m.planned_bytes[host] = bytes;
    return p;
}

static void cu_release(void *base, int64_t bytes, bool host)
{
    (void)bytes;
    CUDA_CHECK(cudaDeviceSynchronize()); /* no copy or kernel still reads or writes it */
    mem_cuda_synced();
    if (host) CUDA_CHECK(cudaFreeHost(base));
    else CUDA_CHECK(cudaFree(base));
    m.planned[host] = NULL, m.planned_bytes[host] = 0;
}

const alloc_mem mem_cuda = {.name = "device", .get = cu_get, .put = cu_put, .move = cu_move, .stage = cu_stage, .ready = cu_ready,
                            .reserve = cu_reserve, .release = cu_release};

void mem_cuda_upload(void *dst, const void *host, int64_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(dst, host, (size_t)bytes, cudaMemcpyHostToDevice, m.compute));
    CUDA_CHECK(cudaStreamSynchronize(m.compute)); /* host may be reused at once */
}

void mem_cuda_download(void *host, const void *src, int64_t bytes)
{
    CUDA_CHECK(cudaMemcpyAsync(host, src, (size_t)bytes, cudaMemcpyDeviceToHost, m.compute));
    CUDA_CHECK(cudaStreamSynchronize(m.compute));
}

/* Pinned bytes the executor will hold at once, each block rounded as the arena places it: a moved
 * map from the step its copy begins (sched_move_issue: before the schedule's OFFLOAD, which the
 * replay's host figure counts from) until its PREFETCH, and the +migrate maps at home on the host
 * from the start. In arena mode (apart_only) only the data-sized encodings: the plan's host arena
 * holds the rest. */
static int64_t host_need(const sched *s, bool apart_only)
{
    int *issue = err_calloc((size_t)s->n_step + 1, sizeof(int));
    int64_t *add = err_calloc((size_t)s->n_step + 1, sizeof(int64_t)), *drop = err_calloc((size_t)s->n_step + 1, sizeof(int64_t));
    sched_move_issue(s, issue);
    int64_t cur = 0, most = 0;
    for (int b = 0; b < s->n_buf; b++)
        if (s->bufs[b].persistent && s->bufs[b].host_home && !apart_only) cur += (s->bufs[b].bytes + 255) / 256 * 256;
    for (int i = 0; i < s->n_step; i++) {
        const sched_step *t = &s->steps[i];
        int64_t bytes = t->buf >= 0 && (!apart_only || arena_outside(&s->bufs[t->buf])) ? (s->bufs[t->buf].bytes + 255) / 256 * 256 : 0;
        if (t->op == SCHED_OFFLOAD) add[issue[i] >= 0 && issue[i] < i ? issue[i] : i] += bytes;
        if (t->op == SCHED_PREFETCH) drop[i] += bytes;
    }
    for (int i = 0; i < s->n_step; i++) {
        cur += add[i];
        if (cur > most) most = cur;
        cur -= drop[i];
    }
    free(issue), free(add), free(drop);
    return most > cur ? most : cur;
}


void mem_cuda_init(cudaStream_t compute, cudaStream_t copy) { m.compute = compute, m.copy = copy; }

void mem_cuda_close(void)
{
    mem_cuda_synced();
    for (int i = 0; i < m.n_pending; i++) CUDA_CHECK(cudaEventDestroy(m.pending[i].done));
    for (int i = 0; i < m.n_spilled; i++) CUDA_CHECK(cudaFreeHost(m.spilled[i].p));
    if (m.host) CUDA_CHECK(cudaFreeHost(m.host));
    fit_free(&m.host_fit);
    free(m.pending), free(m.spilled);
    memset(&m, 0, sizeof m);
}

int mem_cuda_prepare(const sched *s, err *e)
{
    /* room for the blocks as placed, and a margin for first fit's gaps and data-sized encodings */
    int64_t need = host_need(s, m.planned[0] || m.planned[1]), size = need ? need + need / 4 + (1 << 20) : 0;
    if (size > m.host_fit.size && m.host_fit.used == 0) {
        if (m.host) CUDA_CHECK(cudaFreeHost(m.host));
        fit_free(&m.host_fit);
        m.host = NULL;
        if (cudaMallocHost((void **)&m.host, (size_t)size) != cudaSuccess)
            return err_set(e, "cannot pin %lld bytes of host memory for the plan's offloaded maps", (long long)size);
        fit_init(&m.host_fit, size, 256);
    }
    m.spilled_high = m.spilled_bytes;
    return 0;
}

void mem_cuda_synced(void)
{
    for (int i = 0; i < m.n_pending; i++) /* prefetches have arrived; staged offloads wait for their move */
        if (!m.pending[i].host) {
            CUDA_CHECK(cudaEventDestroy(m.pending[i].done));
            m.pending[i--] = m.pending[--m.n_pending];
        }
}

void mem_cuda_host(int64_t *arena, int64_t *outside) { *arena = m.host_fit.size + m.planned_bytes[1], *outside = m.spilled_high; }

static cudaMemPool_t default_pool(void)
{
    cudaMemPool_t pool;
    CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, 0));
    return pool;
}

void mem_cuda_pool_high(int64_t *reserved, int64_t *used)
{
    uint64_t r = 0, u = 0;
    CUDA_CHECK(cudaMemPoolGetAttribute(default_pool(), cudaMemPoolAttrReservedMemHigh, &r));
    CUDA_CHECK(cudaMemPoolGetAttribute(default_pool(), cudaMemPoolAttrUsedMemHigh, &u));
    *reserved = (int64_t)r, *used = (int64_t)u;
}

void mem_cuda_pool_restart(void)
{
    uint64_t zero = 0; /* a high-water mark can only be reset to zero: it restarts from what is held now */
    CUDA_CHECK(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_CHECK(cudaMemPoolSetAttribute(default_pool(), cudaMemPoolAttrUsedMemHigh, &zero));
}
