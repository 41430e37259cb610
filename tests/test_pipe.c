/* Pipelined model parallelism (sim/predict/pipe.h) against the textbooks, over devices P = 1..8,
 * micro-batches m = 1..24 and, interleaved, chunks v = 2..4 (m a multiple of P):
 *   orders     every device runs each of its stages' forward and backward of every micro-batch once,
 *              a micro-batch's backward through a stage after its forward there;
 *   in flight  the micro-batches a device holds at once, walked from its order: GPipe m; 1F1B
 *              min(P - d, m) on device d (Narayanan et al., 2021); interleaved min(2(P - d - 1) +
 *              (v - 1)P + 1, mv) chunk-micro-batches (Megatron-LM's warm-up, plus the one running);
 *              bytes: the count times a stage's stash, plus the running stage's working bytes;
 *   time       with equal stages (forward f, backward b a stage) and a free link, GPipe and 1F1B take
 *              (m + P - 1)(f + b): a bubble of (P - 1)/(m + P - 1); interleaved with chunks of f/v and
 *              b/v, m(f + b) + (P - 1)(f + b)/v; a link of l a hop adds 2(S - 1)l to a single
 *              micro-batch's trip; no order deadlocks;
 *   errors     a bad configuration is refused with its reason.
 * And on real nets (`test_pipe nets`): one device and one micro-batch is the net itself — its peak
 * (persistent bytes, the stash, the working bytes) equals the replay's and its time the schedule's,
 * under layer, ckpt-sqrt, vdnn-conv, 2ps:4 and overl:4 on VGG-16, ResNet-50, MobileNetV2 and the
 * small U-Net; cut into 2..4 stages, the stages' parameters add up to the net's and their times to
 * the single device's. The split under a budget (sim/planner/pipe_split.h) against brute force over
 * every split of vgg-small and resnet-small into 2..4 stages, 1F1B and GPipe, at budgets from under
 * the least to above the most: the same slowest stage where one fits, every device within the
 * budget, and a refusal exactly where no split fits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/net/load.h"
#include "sim/plan/plan.h"
#include "sim/lower/pipeline.h"
#include "sim/planner/pipe_split.h"
#include "sim/predict/pipe_sched.h"
#include "tests/expect.h"

static int imin(int a, int b) { return a < b ? a : b; }

/* Every op once, each backward after its forward on the same device. */
static void check_order(const pipe_cfg *c)
{
    int S = pipe_stages(c), per = S / c->devices, n = 2 * c->micro * per;
    pipe_op *ops = calloc((size_t)n + 1, sizeof *ops);
    int *seen = calloc((size_t)(2 * c->micro * S) + 1, sizeof *seen);
    for (int d = 0; d < c->devices; d++) {
        EXPECT(pipe_order(c, d, ops) == n, "%s P=%d m=%d v=%d device %d: %d ops", pipe_kind_name(c->kind), c->devices, c->micro,
               c->chunks, d, n);
        for (int i = 0; i < n; i++) {
            const pipe_op *o = &ops[i];
            EXPECT(pipe_device_of(c, o->stage) == d && o->mb >= 0 && o->mb < c->micro, "device %d runs stage %d mb %d", d, o->stage, o->mb);
            int at = (o->mb * S + o->stage) * 2;
            seen[at + o->bwd]++;
            if (o->bwd) EXPECT(seen[at] == 1, "%s device %d: backward of mb %d stage %d before its forward", pipe_kind_name(c->kind), d,
                               o->mb, o->stage);
        }
    }
    for (int i = 0; i < 2 * c->micro * S; i++) EXPECT(seen[i] == 1, "op %d run %d times", i, seen[i]);
    free(ops), free(seen);
}

static void check_flight(const pipe_cfg *c)
{
    int P = c->devices, m = c->micro, v = c->chunks, S = pipe_stages(c);
    int64_t *stash = calloc((size_t)S + 1, sizeof *stash), *working = calloc((size_t)S + 1, sizeof *working);
    for (int s = 0; s < S; s++) stash[s] = 1000, working[s] = 7;
    for (int d = 0; d < P; d++) {
        int want = c->kind == PIPE_GPIPE ? m : c->kind == PIPE_1F1B ? imin(P - d, m) : imin(2 * (P - d - 1) + (v - 1) * P + 1, m * v);
        int64_t bytes;
        int got = pipe_in_flight(c, d, stash, working, &bytes);
        EXPECT(got == want, "%s P=%d m=%d v=%d device %d: %d micro-batches in flight, the textbook %d", pipe_kind_name(c->kind), P, m, v,
               d, got, want);
        EXPECT(bytes == 1000 * (int64_t)want + 7, "%s P=%d m=%d device %d: %lld bytes at the peak, want %lld", pipe_kind_name(c->kind), P,
               m, d, (long long)bytes, 1000LL * want + 7);
    }
    free(stash), free(working);
}

static void check_time(const pipe_cfg *c)
{
    int P = c->devices, m = c->micro, v = c->chunks, S = pipe_stages(c);
    double f = 3, b = 6, *fw = calloc((size_t)S + 1, sizeof *fw), *bw = calloc((size_t)S + 1, sizeof *bw),
           *link = calloc((size_t)S + 1, sizeof *link), busy;
    for (int s = 0; s < S; s++) fw[s] = f / (S / P), bw[s] = b / (S / P); /* a device's work a micro-batch: f + b */
    double got = pipe_makespan(c, fw, bw, link, NULL, &busy);
    double want = c->kind == PIPE_INTERLEAVED ? m * (f + b) + (P - 1) * (f + b) / v : (m + P - 1) * (f + b);
    EXPECT(fabs(got - want) <= 1e-9 * want, "%s P=%d m=%d v=%d: %g, the textbook %g", pipe_kind_name(c->kind), P, m, v, got, want);
    EXPECT(fabs(busy - m * (f + b) / got) <= 1e-9, "%s P=%d m=%d: busy %g, want %g", pipe_kind_name(c->kind), P, m, busy, m * (f + b) / got);
    /* one micro-batch over a link of 0.5 a hop: down and back up, 2(S - 1) hops */
    pipe_cfg one = *c;
    one.micro = c->kind == PIPE_INTERLEAVED ? P : 1;
    for (int s = 0; s < S; s++) link[s] = 0.5;
    double bare = pipe_makespan(&one, fw, bw, (double[64]){0}, NULL, NULL), linked = pipe_makespan(&one, fw, bw, link, NULL, NULL);
    if (one.micro == 1) EXPECT(fabs(linked - bare - 2 * (S - 1) * 0.5) <= 1e-9, "%s P=%d: the link added %g, want %g", pipe_kind_name(c->kind), P,
                               linked - bare, 2 * (S - 1) * 0.5);
    EXPECT(linked >= bare, "%s P=%d v=%d: a link made it faster (%g < %g)", pipe_kind_name(c->kind), P, v, linked, bare);
    free(fw), free(bw), free(link);
}

/* Stage costs against the whole net's own prediction. */
static void check_net(const char *name)
{
    static const char *const plans[] = {"layer", "ckpt-sqrt", "vdnn-conv", "2ps:4", "overl:4"};
    net n;
    err e;
    if (net_load_named(&n, name, &e)) {
        EXPECT(0, "%s: %s", name, e.msg);
        return;
    }
    sched_cfg cfg = {.batch = 4, .optimizer = SCHED_ADAM};
    for (size_t i = 0; i < sizeof plans / sizeof *plans; i++) {
        plan p;
        sim_result r;
        if (plan_parse(&p, &n, plans[i], &e)) continue; /* not a plan for this net */
        if (sim_run(&n, &p, &cfg, &sim_device_cpu, &r, NULL, &e)) {
            plan_free(&p);
            continue;
        }
        for (int S = 1; S <= 4; S++) {
            pipe_cfg c = {PIPE_1F1B, S, 1, 1};
            int first[8];
            pipe_stage st[8];
            if (pipe_balanced_cuts(&n, &p, &cfg, &sim_device_cpu, S, first, &e) || pipe_stage_costs(&n, &p, &cfg, &sim_device_cpu, first, S, st, &e)) {
                EXPECT(S > 1, "%s %s: %s", name, plans[i], e.msg);
                continue;
            }
            int64_t persistent = 0, stash[8], working[8];
            double us = 0;
            for (int s = 0; s < S; s++) persistent += st[s].persistent, us += st[s].fwd_us + st[s].bwd_us + st[s].update_us, stash[s] = st[s].stash, working[s] = st[s].working;
            int64_t param = r.replay.at_peak[MEM_WEIGHTS] + r.replay.at_peak[MEM_WGRAD] + r.replay.at_peak[MEM_OPTIM];
            EXPECT(persistent >= param, "%s %s, %d stages: persistent %lld under the parameters, gradients and state %lld", name, plans[i], S,
                   (long long)persistent, (long long)param);
            EXPECT(fabs(us - r.time_us) <= 1e-9 * r.time_us, "%s %s, %d stages: the stages take %g us, the net %g", name, plans[i], S, us, r.time_us);
            if (S > 1) continue;
            int64_t peak;
            pipe_in_flight(&c, 0, stash, working, &peak);
            EXPECT(peak + persistent == r.replay.peak, "%s %s, one device: peak %lld, the replay %lld", name, plans[i],
                   (long long)(peak + persistent), (long long)r.replay.peak);
        }
        plan_free(&p);
    }
    net_free(&n);
}

/* Device k's exact peak with layers [a, z) under candidate pn's plan as its stage. */
static int64_t exact_peak(const net *n, const pipe_net *pn, const pipe_cfg *c, int a, int z, int k)
{
    err e;
    sched_cfg cfg = {.batch = pn->batch, .optimizer = SCHED_SGD};
    int64_t peak = pipe_stage_peak_exact(&pn->s, n, &cfg, c, a, z, k, &e);
    return peak < 0 ? INT64_MAX : peak;
}

/* Every way to put P - 1 cuts among the clean cuts of n and to give each stage one of the Q
 * candidates (its ends outside that candidate's row and checkpoint segments): the fastest slowest
 * stage whose devices all fit, and the least largest device of any. pn: each candidate's lowering. */
static void brute_split(const net *n, const plan *cand, const pipe_net *pn, int Q, const pipe_cfg *c, int64_t budget, double *best,
                        int64_t *least)
{
    int pos[64], m = 0, P = c->devices, pick[8], which[8];
    pos[m++] = 1;
    for (int L = 2; L < n->n && m < 63; L++)
        if (n->layers[L].cut_before) pos[m++] = L;
    *best = INFINITY, *least = INT64_MAX;
    for (int k = 0; k < P - 1; k++) pick[k] = k + 1;
    for (;;) {
        int first[9];
        first[0] = 1, first[P] = n->n;
        for (int k = 0; k < P - 1; k++) first[k + 1] = pos[pick[k]];
        int ways = 1;
        for (int k = 0; k < P; k++) ways *= Q;
        for (int w = 0; w < ways; w++) {
            bool ok = true;
            for (int k = 0, x = w; k < P; k++, x /= Q) {
                which[k] = x % Q;
                ok &= (k == 0 || pipe_cut_ok(n, &cand[which[k]], first[k])) && (k == P - 1 || pipe_cut_ok(n, &cand[which[k]], first[k + 1]));
            }
            if (!ok) continue;
            double slow = 0;
            int64_t most = 0;
            for (int k = 0; k < P; k++) {
                pipe_stage st;
                pipe_range(&pn[which[k]], first[k], first[k + 1], &st);
                int64_t bytes = exact_peak(n, &pn[which[k]], c, first[k], first[k + 1], k);
                slow = fmax(slow, st.fwd_us + st.bwd_us), most = bytes > most ? bytes : most;
            }
            if (most < *least) *least = most;
            if (most <= budget && slow < *best) *best = slow;
        }
        int k = P - 2; /* the next combination */
        while (k >= 0 && pick[k] == m - (P - 1 - k)) k--;
        if (k < 0) break;
        pick[k]++;
        for (int j = k + 1; j < P - 1; j++) pick[j] = pick[j - 1] + 1;
    }
}

/* An answer of the search: every device within the budget, its slowest stage `want`. */
static void check_answer(const net *n, const plan *cand, const pipe_net *pn, const pipe_cfg *c, int64_t budget, const pipe_answer *a,
                         double want, const char *how)
{
    double slow = 0;
    for (int k = 0; k < c->devices; k++) {
        pipe_stage st;
        EXPECT(a->first[k] < a->first[k + 1], "%s %s: stage %d empty", n->name, how, k);
        EXPECT((k == 0 || pipe_cut_ok(n, &cand[a->which[k]], a->first[k])) && pipe_cut_ok(n, NULL, a->first[k]) == (k > 0),
               "%s %s: stage %d begins at %d, inside its plan's segment", n->name, how, k, a->first[k]);
        pipe_range(&pn[a->which[k]], a->first[k], a->first[k + 1], &st);
        int64_t bytes = exact_peak(n, &pn[a->which[k]], c, a->first[k], a->first[k + 1], k);
        EXPECT(bytes <= budget, "%s %s: device %d holds %lld over %lld", n->name, how, k, (long long)bytes, (long long)budget);
        slow = fmax(slow, st.fwd_us + st.bwd_us);
    }
    EXPECT(fabs(slow - want) <= 1e-9 * want && fabs(a->slowest - want) <= 1e-9 * want, "%s %s P=%d budget %lld: slowest stage %g (said %g), brute force %g",
           n->name, how, c->devices, (long long)budget, slow, a->slowest, want);
}

/* The whole net's plan an answer makes (each stage's share of its candidate): every stage costs
 * what the search counted, and each device's schedule composes with its replay within its stage
 * sums. */
static void check_whole(const net *n, const plan *cand, const pipe_net *pn, const pipe_cfg *c, const sched_cfg *cfg, const pipe_answer *a)
{
    char text[PLAN_TEXT_LEN] = "", part[PLAN_TEXT_LEN];
    size_t at = 0;
    for (int k = 0; k < c->devices; k++) {
        plan_describe_range(&cand[a->which[k]], n, a->first[k], a->first[k + 1] - 1, part, sizeof part);
        at += (size_t)snprintf(text + at, sizeof text - at, "%s%s", k ? "; " : "", part);
    }
    snprintf(text + at, sizeof text - at, " bn=%s", plan_bn_name(cand[0].bn));
    plan whole;
    err e;
    if (plan_parse(&whole, n, text, &e)) return (void)printf("FAIL %s: '%s': %s\n", n->name, text, e.msg), (void)failures++;
    pipe_stage st[8];
    sched w;
    EXPECT(!pipe_stage_costs(n, &whole, cfg, &sim_device_cpu, a->first, c->devices, st, &e) && !pipeline_lower(&w, n, &whole, cfg, &e),
           "%s '%s': %s", n->name, text, e.msg);
    for (int k = 0; k < c->devices; k++) {
        pipe_stage want;
        pipe_range(&pn[a->which[k]], a->first[k], a->first[k + 1], &want);
        EXPECT(st[k].stash == want.stash && st[k].working == want.working && st[k].persistent == want.persistent &&
                   fabs(st[k].fwd_us + st[k].bwd_us - want.fwd_us - want.bwd_us) <= 1e-9 * (want.fwd_us + want.bwd_us),
               "%s '%s' stage %d: costs %lld/%lld/%lld, the search's %lld/%lld/%lld", n->name, text, k, (long long)st[k].stash,
               (long long)st[k].working, (long long)st[k].persistent, (long long)want.stash, (long long)want.working, (long long)want.persistent);
        int64_t peak = pipe_device_peak_exact(&w, n, cfg, c, a->first, k, &e);
        if (peak < 0) {
            EXPECT(0, "%s '%s' device %d: %s", n->name, text, k, e.msg);
            continue;
        }
        int64_t alone = exact_peak(n, &pn[a->which[k]], c, a->first[k], a->first[k + 1], k);
        EXPECT(peak == alone && peak <= pipe_device_peak(c, k, st), "%s '%s' device %d: replay %lld, its stage composed alone %lld, stage sums %lld",
               n->name, text, k, (long long)peak, (long long)alone, (long long)pipe_device_peak(c, k, st));
    }
    sched_free(&w);
    plan_free(&whole);
}

/* The split search, by dynamic program and by integer program, against brute force: one plan
 * (layer), and three candidates a stage (layer, ckpt-sqrt, a 2PS preset). */
static void check_split(const char *name)
{
    net n;
    err e;
    if (net_load_named(&n, name, &e)) {
        EXPECT(0, "%s: %s", name, e.msg);
        return;
    }
    static const char *const texts[] = {"layer", "ckpt-sqrt", "2ps:2"};
    plan cand[3];
    pipe_net pn[3];
    sched_cfg cfg = {.batch = 2, .optimizer = SCHED_SGD};
    for (int q = 0; q < 3; q++)
        if (plan_parse(&cand[q], &n, texts[q], &e) || pipe_net_init(&pn[q], &n, &cand[q], &cfg, &sim_device_cpu, &e)) {
            EXPECT(0, "%s %s: %s", name, texts[q], e.msg);
            return;
        }
    for (int Q = 1; Q <= 3; Q += 2)
        for (int P = 2; P <= 4; P++)
            for (int k = 0; k < 2; k++) {
                pipe_cfg c = {k ? PIPE_GPIPE : PIPE_1F1B, P, 4, 1};
                double any;
                int64_t least;
                pipe_table t;
                if (pipe_table_build(&t, &n, cand, Q, &cfg, &sim_device_cpu, &c, &e)) {
                    EXPECT(0, "%s: %s", name, e.msg);
                    continue;
                }
                brute_split(&n, cand, pn, Q, &c, INT64_MAX, &any, &least);
                for (int f = 0; f < 6; f++) {
                    int64_t budget = (int64_t)((double)least * (0.9 + 0.1 * f));
                    double want;
                    int64_t l2;
                    brute_split(&n, cand, pn, Q, &c, budget, &want, &l2);
                    pipe_answer dp, ilp;
                    pipe_answer_init(&dp, P), pipe_answer_init(&ilp, P);
                    int rd = pipe_split_dp(&t, budget, &dp), ri = pipe_split_ilp(&t, budget, 10, &ilp, &e);
                    if (isinf(want)) {
                        EXPECT(rd == 1 && ri == 1 && dp.least == least, "%s Q=%d %s P=%d budget %lld: none fits, yet dp %d, ilp %d (least %lld, %lld)",
                               name, Q, pipe_kind_name(c.kind), P, (long long)budget, rd, ri, (long long)dp.least, (long long)least);
                    } else {
                        EXPECT(rd == 0 && ri == 0, "%s Q=%d %s P=%d budget %lld: refused (dp %d, ilp %d), yet a split fits", name, Q,
                               pipe_kind_name(c.kind), P, (long long)budget, rd, ri);
                        if (!rd) check_answer(&n, cand, pn, &c, budget, &dp, want, Q > 1 ? "dp, candidates" : "dp");
                        if (!rd) check_whole(&n, cand, pn, &c, &cfg, &dp);
                        if (!ri) check_answer(&n, cand, pn, &c, budget, &ilp, want, Q > 1 ? "ilp, candidates" : "ilp");
                    }
                    pipe_answer_free(&dp), pipe_answer_free(&ilp);
                }
                pipe_table_free(&t);
            }
    for (int q = 0; q < 3; q++) plan_free(&cand[q]), pipe_net_free(&pn[q]);
    net_free(&n);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "nets")) {
        static const char *const nets[] = {"vgg16", "resnet50", "mobilenetv2", "unet-small"};
        for (size_t i = 0; i < sizeof nets / sizeof *nets; i++) check_net(nets[i]);
        check_split("vgg-small");
        check_split("resnet-small");
        printf("%s pipelines on real nets: one device, one micro-batch = the replay's peak; stage times and parameters add up;\n"
               "     the split under a budget (dp and ilp, one plan or three a stage) = brute force on vgg-small and resnet-small (%d checks)\n",
               failures ? "FAIL" : "ok  ", checks);
        return failures != 0;
    }
    int configs = 0;
    for (int P = 1; P <= 8; P++)
        for (int m = 1; m <= 24; m++)
            for (int k = 0; k < 3; k++)
                for (int v = k == 2 ? 2 : 1; v <= (k == 2 ? 4 : 1); v++) {
                    pipe_cfg c = {(pipe_kind)k, P, m, v};
                    err e;
                    if (pipe_check(&c, &e)) continue;
                    configs++;
                    check_order(&c);
                    check_flight(&c);
                    check_time(&c);
                }
    err e;
    pipe_cfg bad[] = {{PIPE_INTERLEAVED, 4, 6, 2}, {PIPE_1F1B, 4, 8, 2}, {PIPE_GPIPE, 0, 8, 1}};
    const char *why[] = {"a multiple of the devices", "needs the interleaved schedule", "at least 1"};
    for (int i = 0; i < 3; i++) EXPECT(pipe_check(&bad[i], &e) && strstr(e.msg, why[i]), "bad configuration %d: '%s'", i, e.msg);
    printf("%s pipelines: %d configurations (GPipe, 1F1B, interleaved; P 1..8, m 1..24, v 2..4), %d checks: every order whole,\n"
           "     in-flight counts and bytes and times the textbooks', a link's hops counted\n",
           failures ? "FAIL" : "ok  ", configs, checks);
    return failures != 0;
}
