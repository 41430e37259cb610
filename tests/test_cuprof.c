/* cuprof's parse layer on hand-built CUPTI records; calls neither CUPTI nor CUDA. Covers: direct
 * allocations arriving out of timestamp order; pool sub-allocations inside the pool's size, a size
 * reported before its growth, a trim, a direct allocation beside them; mark keeping what is held;
 * kernels joined to tags through correlation records in any order; ignored kinds; drops.
 * Prints each number that differs. */
#include <stdio.h>

#include "engine/cuda/cuprof.h"

static int failures;
static void expect(const char *what, int line, double got, double want)
{
    if (got != want)
        failures++, fprintf(stderr, "FAIL %s:%d: %s = %.17g, want %.17g\n", __FILE__, line, what, got,
                            want);
}
#define EXPECT(got, want) expect(#got, __LINE__, (double)(got), (double)(want))

enum { A = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
       R = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE };
static cuprof_state s;
static cuprof_report r;

/* A device MEMORY2 record; pool 0: direct (cudaMalloc), else the pool's base address. */
static void mem(int op, uint64_t ts, uint64_t addr, uint64_t bytes, uint64_t pool, uint64_t size)
{
    CUpti_ActivityMemory4 m = {.kind = CUPTI_ACTIVITY_KIND_MEMORY2, .memoryOperationType = op,
        .memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, .address = addr, .bytes = bytes,
        .timestamp = ts,
        .memoryPoolConfig = {.memoryPoolType = pool ? CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL : 0,
                             .address = pool, .pool.size = size}};
    cuprof_take(&s, (const CUpti_Activity *)&m);
}

static void kernel(uint32_t corr, uint64_t start, uint64_t end)
{
    CUpti_ActivityKernel10 k = {.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, .correlationId = corr,
                                .start = start, .end = end};
    cuprof_take(&s, (const CUpti_Activity *)&k);
}

static void ext(CUpti_ExternalCorrelationKind kind, uint32_t corr, uint64_t id)
{
    CUpti_ActivityExternalCorrelation x = {.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
        .externalKind = kind, .correlationId = corr, .externalId = id};
    cuprof_take(&s, (const CUpti_Activity *)&x);
}

int main(void)
{
    /* Direct: arrival order would peak at 150, but by time 0xA is gone before 0xB comes. */
    cuprof_state_init(&s, 0);
    mem(A, 10, 0xA, 100, 0, 0); mem(A, 30, 0xB, 50, 0, 0); mem(R, 20, 0xA, 100, 0, 0);
    cuprof_fill(&s, &r);
    EXPECT(r.reserved_peak, 100); EXPECT(r.suballoc_peak, 0); EXPECT(s.reserved_cur, 50);
    EXPECT(r.n_mem_records, 3); EXPECT(r.valid, 1);
    cuprof_state_free(&s);

    /* A pool P beside a direct block of 10: reserved counts the pool's size, not its blocks. */
    const uint64_t P = 0x7000000;
    cuprof_state_init(&s, 0);
    CUpti_ActivityMemoryPool3 pc = {.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL, .address = P,
        .memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED,
        .memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL, .timestamp = 1};
    cuprof_take(&s, (const CUpti_Activity *)&pc);
    mem(A, 2, P, 40, P, 64); mem(A, 3, 0xD, 10, 0, 0); mem(A, 4, P + 64, 30, P, 128);
    mem(R, 5, P, 40, P, 128); mem(A, 6, P + 128, 20, P, 128);
    cuprof_fill(&s, &r);
    EXPECT(r.reserved_peak, 128 + 10); EXPECT(r.suballoc_peak, 70);
    mem(A, 7, P + 256, 200, P, 128);   /* size from before this growth: live 250 bounds it */
    cuprof_fill(&s, &r);
    EXPECT(r.reserved_peak, 250 + 10); EXPECT(r.suballoc_peak, 250);
    mem(R, 8, P + 64, 30, P, 256); mem(R, 9, P + 128, 20, P, 256); mem(R, 10, P + 256, 200, P, 256);
    cuprof_settle(&s);
    EXPECT(s.reserved_cur, 256 + 10); EXPECT(s.sub_cur, 0);
    CUpti_ActivityMemoryPool3 pt = pc;
    pt.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED, pt.timestamp = 11;
    cuprof_take(&s, (const CUpti_Activity *)&pt);
    cuprof_settle(&s);
    EXPECT(s.reserved_cur, 10);

    /* Mark: held now = 10 direct + pool 0; what follows starts from there. */
    cuprof_state_mark(&s);
    cuprof_fill(&s, &r);
    EXPECT(r.reserved_peak, 10); EXPECT(r.n_mem_records, 0);
    mem(A, 12, P, 100, P, 128); mem(R, 13, 0xD, 10, 0, 0); mem(R, 14, P, 100, P, 128);
    cuprof_fill(&s, &r);
    EXPECT(r.reserved_peak, 138); EXPECT(r.suballoc_peak, 100); EXPECT(s.reserved_cur, 128);
    cuprof_state_free(&s);

    /* Kernels: tag 0 1 us, tag 2 3 us (its correlation comes later), untagged 0.5 us, tag 7 >=
     * n_tags 2 us, another kind's id 0.25 us; unknown kinds and host memory ignored. */
    cuprof_state_init(&s, 3);
    ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1, 0);
    kernel(1, 1000, 2000); kernel(2, 5000, 8000); kernel(3, 9000, 9500);
    kernel(4, 10000, 12000); kernel(5, 20000, 20250);
    ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 2, 2);
    ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 4, 7);
    ext(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 5, 1);
    union { CUpti_Activity a; uint64_t raw[64]; } u = {.a.kind = CUPTI_ACTIVITY_KIND_MEMCPY};
    cuprof_take(&s, &u.a);
    CUpti_ActivityMemory4 host = {.kind = CUPTI_ACTIVITY_KIND_MEMORY2, .bytes = 4096,
        .memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
        .memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED};
    cuprof_take(&s, (const CUpti_Activity *)&host);
    cuprof_fill(&s, &r);
    cuprof_fill(&s, &r);               /* reports do not consume */
    EXPECT(r.n_kernels, 5); EXPECT(r.kernel_us, 6.75); EXPECT(r.untagged_us, 2.75);
    EXPECT(r.n_tags, 3); EXPECT(r.tag_us[0], 1); EXPECT(r.tag_us[1], 0); EXPECT(r.tag_us[2], 3);
    EXPECT(r.n_mem_records, 0); EXPECT(r.reserved_peak, 0);
    s.dropped = 3;
    cuprof_state_mark(&s);
    cuprof_fill(&s, &r);
    EXPECT(r.n_kernels, 0); EXPECT(r.tag_us[2], 0); EXPECT(r.valid, 0); EXPECT(r.dropped, 3);
    cuprof_state_free(&s);

    if (failures)
        return fprintf(stderr, "test_cuprof: %d check(s) failed\n", failures), 1;
    printf("test_cuprof: ok\n");
    return 0;
}
