/* A lean schedule (sim/lower/sched.h: its ALLOCs and FREEs only as events) is the whole schedule
 * less those steps, and predicts exactly what the whole one does. For shipped nets, plans with
 * every kind of step (recomputation, row bands, BatchNorm stages, offloads, encodings, migration,
 * the torch plans) and three kinds of device (a roofline; one whose copies overlap compute; this
 * repository's CPU profile, whose fitted model times ALLOCs and FREEs):
 *   - pipeline_lower_lean succeeds exactly where pipeline_lower does, with the same events, the
 *     same step count and first backward step, and sched_materialize makes it the whole schedule,
 *     step for step (every field, the input slots' contents);
 *   - sim_predict on the two gives the same result bit for bit (replay, time, arena, closed form)
 *     and the same timeline, as do sim_time_us and arena_measure alone (the planner's calls).
 * Usage: test_lean PROFILE.h5 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/profile.h"
#include "sim/lower/pipeline.h"
#include "sim/net/load.h"
#include "sim/predict/arena.h"
#include "sim/predict/sim.h"
#include "tests/expect.h"

/* Steps a and b the same, field by field, the input slots by content. */
static bool same_step(const sched_step *a, const sched_step *b)
{
    sched_step x = *a, y = *b;
    if (x.n_x != y.n_x) return false;
    for (int j = 0; j < x.n_x; j++)
        if (x.x[j] != y.x[j] || x.dx[j] != y.dx[j] || x.dx_acc[j] != y.dx_acc[j]) return false;
    x.x = y.x = NULL, x.dx = y.dx = NULL, x.dx_acc = y.dx_acc = NULL;
    return x.op == y.op && x.layer == y.layer && x.band == y.band && x.seg == y.seg && x.rows.a == y.rows.a &&
           x.rows.b == y.rows.b && x.recompute == y.recompute && x.y == y.y && x.aux == y.aux && x.w == y.w && x.dw == y.dw &&
           x.ws == y.ws && x.dy == y.dy && x.bwd_phase == y.bwd_phase && x.src == y.src && x.dst == y.dst && x.acc == y.acc &&
           x.map_stats == y.map_stats && x.sums == y.sums && x.own.a == y.own.a && x.own.b == y.own.b && x.buf == y.buf &&
           x.flops == y.flops && x.bytes_moved == y.bytes_moved;
}

/* Where the lean and the whole lowering of one configuration first differ, into why; false if nowhere. */
static bool differ(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, char *why, size_t len)
{
    sched w, l;
    err e1, e2;
    int r1 = pipeline_lower(&w, n, p, cfg, &e1), r2 = pipeline_lower_lean(&l, n, p, cfg, &e2);
    if (r1 || r2) {
        if (!r1) sched_free(&w);
        if (!r2) sched_free(&l);
        return r1 != r2 ? snprintf(why, len, "lowered %d whole, %d lean", r1, r2), true : false;
    }
    bool bad = true;
    sim_result a, b;
    int64_t *ta = NULL, *tb = NULL;
    arena aa, ab;
    if (l.n_step != w.n_step || l.n_mem != w.n_mem || l.first_bwd != w.first_bwd || l.n_buf != w.n_buf)
        snprintf(why, len, "steps %d/%d, events %d/%d, first backward %d/%d", w.n_step, l.n_step, w.n_mem, l.n_mem, w.first_bwd,
                 l.first_bwd);
    else if (memcmp(l.mem, w.mem, (size_t)w.n_mem * sizeof *w.mem))
        snprintf(why, len, "the events differ");
    else if (sim_time_us(n, &l, d, NULL) != sim_time_us(n, &w, d, NULL))
        snprintf(why, len, "sim_time_us %.17g whole, %.17g lean", sim_time_us(n, &w, d, NULL),
                 sim_time_us(n, &l, d, NULL));
    else {
        arena_measure(&w, &aa), arena_measure(&l, &ab);
        bool arenas = aa.size == ab.size && aa.host_size == ab.host_size && aa.live == ab.live && aa.apart == ab.apart;
        arena_free(&aa), arena_free(&ab);
        sim_predict(n, p, cfg, &w, d, &a, &ta), sim_predict(n, p, cfg, &l, d, &b, &tb);
        if (!arenas) snprintf(why, len, "arena_measure differs");
        else if (memcmp(&a, &b, sizeof a))
            snprintf(why, len, "sim_predict: time %.17g / %.17g, peak %lld / %lld", a.time_us, b.time_us, (long long)a.replay.peak,
                     (long long)b.replay.peak);
        else if (memcmp(ta, tb, ((size_t)w.n_step + 1) * sizeof *ta)) snprintf(why, len, "the timelines differ");
        else bad = false;
    }
    sched_materialize(&l);
    for (int i = 0; !bad && i < w.n_step; i++)
        if (!same_step(&w.steps[i], &l.steps[i]))
            snprintf(why, len, "materialized step %d differs (%s)", i, sched_op_name(w.steps[i].op)), bad = true;
    free(ta), free(tb);
    sched_free(&w), sched_free(&l);
    return bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: test_lean PROFILE.h5\n"), 2;
    static const char *const nets[] = {"vgg16", "resnet50", "vgg-small", "resnet-small", "kernels", "bn-cover", "unet-small", "squeeze-small"};
    static const char *const plans[] = {"layer", "ckpt-sqrt", "vdnn-all", "vdnn-conv", "2ps:4", "overl:4", "2ps:8", "overl-h", "2ps-h:2",
                                        "overl:3 bn=train-offload", "2ps:3 bn=train-rebuild", "2ps:3 bn=train-recompute",
                                        "overl:2 bn=frozen", "vdnn-conv+migrate", "layer+migrate:grads:optim", "layer+gist",
                                        "2ps:4+dpr:fp16", "layer+torch", "2ps:3+torch bn=frozen", "ckpt:3+dpr:fp16+torch2"};
    sim_device prof;
    timing_model tm;
    err e;
    if (profile_device(argv[1], &sim_device_cpu, &prof, &tm, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    const sim_device *devs[] = {&sim_device_cpu, &sim_device_h100, &prof};
    int checked = 0, lowered = 0;
    for (size_t k = 0; k < sizeof nets / sizeof *nets; k++) {
        net n;
        if (net_load_named(&n, nets[k], &e)) {
            EXPECT(0, "%s: %s", nets[k], e.msg);
            continue;
        }
        for (size_t q = 0; q < sizeof plans / sizeof *plans; q++) {
            plan p;
            if (plan_parse(&p, &n, plans[q], &e)) continue; /* not a plan for this net (too few rows, no bn) */
            for (size_t d = 0; d < sizeof devs / sizeof *devs; d++)
                for (int batch = 1; batch <= 8; batch *= 8) {
                    sched_cfg cfg = {.batch = batch, .optimizer = d ? SCHED_ADAM : SCHED_SGD, .gpu = devs[d]->overlap};
                    char why[160];
                    if (differ(&n, &p, &cfg, devs[d], why, sizeof why))
                        EXPECT(0, "%s %s on %s, batch %d: %s", nets[k], plans[q], devs[d]->name, batch, why);
                    checked++;
                }
            lowered++;
            plan_free(&p);
        }
        net_free(&n);
    }
    printf("%s %d configurations (%d net and plan pairs, 3 devices, batches 1 and 8): lean = whole, and predicts the same\n",
           failures ? "FAIL" : "ok  ", checked, lowered);
    return failures != 0;
}
