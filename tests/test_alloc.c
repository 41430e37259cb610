/* The CPU engine's two ways to take memory (engine/exec.h): one arena per plan at the simulator's
 * offsets (--alloc arena, the default) against blocks from the heap as the schedule asks (--alloc
 * pool), on vgg-small, resnet-small, VGG-16 and ResNet-50 (64x64), batch 2, two SGD iterations,
 * under every preset family, band counts 2..8, and plans that move and encode:
 *   - the same training: iteration 0's parameter gradients and both losses bit for bit;
 *   - the same accounting: measured peaks equal to the replay's in both;
 *   - the arena measured as predicted, to the byte: the arenas the engine reserved (planned from
 *     the schedule it lowered) equal the simulator's `prediction/arena`, and the highest byte its
 *     placed blocks reached is the arena's last (the engine checks every placement against the
 *     blocks still placed: an overlap aborts);
 *   - on the way, the arena's resident pages (mincore) against its size;
 *   - the batch staged on the backend before each iteration (ops_table.stage, as CUDA stages it),
 *     LOAD copying it from there: the same training as the batch uploaded by LOAD.
 * Usage: test_alloc [NET IMAGE] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
#include "engine/cpu/ops_cpu.h"
#include "sim/net/load.h"
#include "tests/harness.h"

static int failures;
#define FAIL(...) (fprintf(stderr, "FAIL " __VA_ARGS__), fputc('\n', stderr), failures++)

static const char *plans[] = {"layer", "ckpt-sqrt", "ckpt:3", "vdnn-all", "vdnn-conv", "2ps:2", "2ps:4", "2ps:8", "overl:2",
                              "overl:5", "2ps-h", "overl-h:3", "2ps:3+migrate", "overl:2+gist", "2ps:2+zfp:acc=1e-3",
                              "vdnn-all+dpr:fp16"};

static void check_net(const char *name, int image)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e) || (image && net_set_input(&n, image, image, &e))) {
        FAIL("%s: %s", name, e.msg);
        return;
    }
    int ran = 0, skipped = 0;
    int64_t most = 0, resident = 0, size = 0;
    for (size_t k = 0; k < sizeof plans / sizeof *plans; k++) {
        outcome pool, ar;
        if (harness_run_alloc(&n, plans[k], 2, &ops_cpu, SCHED_SGD, 2, true, &pool, &e)) {
            skipped++; /* a plan this net refuses (too many bands, nothing to encode) */
            continue;
        }
        if (harness_run_alloc(&n, plans[k], 2, &ops_cpu, SCHED_SGD, 2, false, &ar, &e)) {
            FAIL("%s %s: the arena run failed where the pool's did not: %s", name, plans[k], e.msg);
            harness_drop(&pool);
            continue;
        }
        const run_summary *m = &ar.r.sum;
        const sim_arena *pa = &ar.pred.arena;
        if (memcmp(pool.r.grads, ar.r.grads, (size_t)pool.r.n_grads * sizeof(float)))
            FAIL("%s %s: gradients differ between pool and arena", name, plans[k]);
        if (memcmp(pool.r.loss, ar.r.loss, 2 * sizeof(float)))
            FAIL("%s %s: losses differ: %.9g %.9g (pool) vs %.9g %.9g (arena)", name, plans[k], pool.r.loss[0], pool.r.loss[1], ar.r.loss[0],
                 ar.r.loss[1]);
        if (!harness_mem_equal(&pool) && !strchr(plans[k], '+')) FAIL("%s %s: the pool's peaks differ from the replay", name, plans[k]);
        if (pool.r.sum.peak != m->peak) FAIL("%s %s: accounted peaks differ (pool %lld, arena %lld)", name, plans[k],
                                             (long long)pool.r.sum.peak, (long long)m->peak);
        if (!m->arena || m->arena_size != pa->size || m->arena_host_size != pa->host_size)
            FAIL("%s %s: reserved %lld + %lld host, predicted %lld + %lld", name, plans[k], (long long)m->arena_size,
                 (long long)m->arena_host_size, (long long)pa->size, (long long)pa->host_size);
        if (m->arena_extent != m->arena_size || m->arena_host_extent != m->arena_host_size)
            FAIL("%s %s: blocks reached %lld (host %lld) of %lld (host %lld)", name, plans[k], (long long)m->arena_extent,
                 (long long)m->arena_host_extent, (long long)m->arena_size, (long long)m->arena_host_size);
        if (m->arena_resident < 0) FAIL("%s %s: mincore could not measure the arena", name, plans[k]);
        if (m->arena_size > most) most = m->arena_size;
        resident += m->arena_resident, size += m->arena_size, ran++;
        harness_drop(&pool), harness_drop(&ar);
    }
    printf("%s %-12s %3dx%-3d %2d plans (%d refused): gradients and losses bitwise as the pool's, arenas as predicted to the byte "
           "(largest %.2f MiB; resident %.1f%% of their bytes)\n", failures ? "FAIL" : "ok  ", name, n.layers[0].h, n.layers[0].w, ran,
           skipped, (double)most / 1048576.0, size ? 100.0 * (double)resident / (double)size : 0.0);
    net_free(&n);
}

/* The CPU's table with a stage of its own: room per slot, kept to the end. */
static void *room[2];
static int64_t room_bytes[2];

static const void *stage_cpu(int slot, const void *host, int64_t bytes)
{
    if (bytes > room_bytes[slot]) room[slot] = err_realloc(room[slot], (size_t)(room_bytes[slot] = bytes));
    memcpy(room[slot], host, (size_t)bytes);
    return room[slot];
}

static void copy_cpu(void *dst, const void *src, int64_t bytes) { memcpy(dst, src, (size_t)bytes); }

static void check_staged(const char *name)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e)) {
        FAIL("%s: %s", name, e.msg);
        return;
    }
    ops_table staged = ops_cpu;
    staged.stage = stage_cpu, staged.copy = copy_cpu;
    const char *which[] = {"layer", "2ps:4", "vdnn-conv"};
    for (int k = 0; k < 3; k++) {
        outcome plain, st;
        if (harness_run_iters(&n, which[k], 2, &ops_cpu, SCHED_SGD, 3, &plain, &e) ||
            harness_run_iters(&n, which[k], 2, &staged, SCHED_SGD, 3, &st, &e)) {
            FAIL("%s %s: %s", name, which[k], e.msg);
            continue;
        }
        if (memcmp(plain.r.grads, st.r.grads, (size_t)plain.r.n_grads * sizeof(float)) || memcmp(plain.r.loss, st.r.loss, 3 * sizeof(float)))
            FAIL("%s %s: the staged batch trains otherwise than the batch LOAD uploads", name, which[k]);
        harness_drop(&plain), harness_drop(&st);
    }
    printf("%s %s: 3 plans, the batch staged before each iteration trains bit for bit as the batch LOAD uploads\n",
           failures ? "FAIL" : "ok  ", name);
    free(room[0]), free(room[1]);
    room[0] = room[1] = NULL, room_bytes[0] = room_bytes[1] = 0;
    net_free(&n);
}

int main(int argc, char **argv)
{
    engine_env_reexec(argv); /* the engine as lrcnn runs it (engine/threads.h) */
    if (argc == 3) {
        check_net(argv[1], atoi(argv[2]));
    } else {
        check_net("vgg-small", 0);
        check_net("resnet-small", 0);
        check_net("vgg16", 64);
        check_net("resnet50", 64);
        check_staged("resnet-small");
    }
    printf("%s\n", failures ? "FAILED" : "arena and pool agree");
    return failures != 0;
}
