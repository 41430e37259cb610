/* test_torch_alloc: the caching-allocator replay (sim/predict/torch_alloc.h) on hand-made schedules whose
 * reserved bytes follow from PyTorch's rules by hand, and on the torch plans of the shipped nets,
 * where it can only be at least what is allocated at the peak. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "sim/net/net.h"
#include "sim/net/load.h"
#include "sim/plan/plan.h"
#include "sim/predict/sim.h"
#include "sim/predict/torch_alloc.h"

#define MiB (1LL << 20)

static int failures;
#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

/* A schedule of ALLOC (+bytes) and FREE (-k: buffer k) events, buffers numbered as allocated;
 * every buffer still held is freed at the end, as an iteration does. */
static int64_t replay(const long long *ev, int n)
{
    sched s = {0};
    s.bufs = calloc((size_t)n, sizeof *s.bufs);
    s.steps = calloc((size_t)(2 * n), sizeof *s.steps);
    bool *held = calloc((size_t)n, sizeof *held);
    for (int i = 0; i < n; i++) {
        if (ev[i] > 0) {
            held[s.n_buf] = true;
            s.bufs[s.n_buf].bytes = ev[i];
            s.steps[s.n_step++] = (sched_step){.op = SCHED_ALLOC, .buf = s.n_buf++};
        } else {
            held[-ev[i]] = false;
            s.steps[s.n_step++] = (sched_step){.op = SCHED_FREE, .buf = (int)-ev[i]};
        }
    }
    for (int k = 0; k < s.n_buf; k++)
        if (held[k]) s.steps[s.n_step++] = (sched_step){.op = SCHED_FREE, .buf = k};
    int64_t r = torch_reserved(&s);
    free(s.bufs), free(s.steps), free(held);
    return r;
}

static void hand_made(void)
{
    EXPECT(torch_round(1) == 512 && torch_round(513) == 1024 && torch_round(1024) == 1024, "rounding");
    EXPECT(torch_segment(MiB) == 2 * MiB && torch_segment(MiB + 512) == 20 * MiB && torch_segment(10 * MiB) == 10 * MiB &&
               torch_segment(11 * MiB) == 12 * MiB, "segment sizes");
    /* three small requests share one 2 MiB segment; 5 MiB takes a 20 MiB one, whose 15 MiB rest
     * then holds 12 MiB (best fit), and a second iteration finds them all again */
    long long a[] = {100000, 200000, 300000, 5 * MiB, 12 * MiB};
    EXPECT(replay(a, 5) == 2 * MiB + 20 * MiB, "got %lld", (long long)replay(a, 5));
    /* a freed 5 MiB block merges with the rest of its segment: 4 MiB and 15 MiB fit in it again */
    long long b[] = {5 * MiB, -0, 4 * MiB, 15 * MiB};
    EXPECT(replay(b, 4) == 20 * MiB, "got %lld", (long long)replay(b, 4));
    /* without the free, the 11 MiB left after 5 and 4 MiB cannot hold 15 MiB: a segment of its own,
     * rounded up to 2 MiB (16 MiB) */
    long long c[] = {5 * MiB, 4 * MiB, 15 * MiB};
    EXPECT(replay(c, 3) == 20 * MiB + 16 * MiB, "got %lld", (long long)replay(c, 3));
    /* a 1.5 MiB remainder of a large block is split off (more than 1 MiB); 1 MiB is not */
    long long d[] = {18 * MiB + 512 * 1024, 1 * MiB + 512, 12 * MiB, 11 * MiB};
    /* 18.5 MiB -> its own 20 MiB segment (rounded to 2 MiB: 20), remainder 1.5 MiB split off and
     * taken by the 1 MiB+512 request (large pool); 12 MiB -> 12 MiB; 11 MiB -> 12 MiB */
    EXPECT(replay(d, 4) == 20 * MiB + 12 * MiB + 12 * MiB, "got %lld", (long long)replay(d, 4));
    /* small and large pools never share: a freed large block does not serve a small request */
    long long e[] = {5 * MiB, -0, 1000};
    EXPECT(replay(e, 3) == 20 * MiB + 2 * MiB, "got %lld", (long long)replay(e, 3));
}

static void shipped(void)
{
    const char *nets[] = {"vgg-small", "resnet-small", "vgg16", "resnet50"};
    const char *plans[] = {"torch", "torch2"};
    for (size_t i = 0; i < sizeof nets / sizeof *nets; i++)
        for (int k = 0; k < 2; k++) {
            net n;
            plan p;
            err e;
            sim_result r;
            sched_cfg cfg = {.batch = 8, .optimizer = SCHED_SGD};
            if (net_load_named(&n, nets[i], &e) || plan_parse(&p, &n, plans[k], &e) || sim_run(&n, &p, &cfg, &sim_device_h100, &r, NULL, &e)) {
                EXPECT(0, "%s %s: %s", nets[i], plans[k], e.msg);
                continue;
            }
            EXPECT(r.reserved >= r.replay.peak && r.reserved <= 2 * r.replay.peak, "%s %s: reserved %lld for a peak of %lld",
                   nets[i], plans[k], (long long)r.reserved, (long long)r.replay.peak);
            printf("  %-13s %-6s batch 8: allocated peak %10lld, reserved %10lld (%+.1f%%)\n", nets[i], plans[k],
                   (long long)r.replay.peak, (long long)r.reserved, 100.0 * (double)(r.reserved - r.replay.peak) / (double)r.replay.peak);
            plan_free(&p);
            net_free(&n);
        }
}

int main(void)
{
    hand_made();
    shipped();
    printf("test_torch_alloc: %s (%d failed)\n", failures ? "FAIL" : "ok", failures);
    return failures ? 1 : 0;
}
