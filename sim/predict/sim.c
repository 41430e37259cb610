/* sim: the replay of schedules, the time estimate and sim_run, which puts them beside the closed
 * form (closed.h). Not done here: any I/O. */
#include "sim/predict/sim.h"
#include "sim/lower/pipeline.h"

#include <string.h>

#include "sim/predict/arena.h"
#include "sim/predict/closed.h"
#include "sim/lower/lower.h"
#include "sim/predict/torch_alloc.h"

const sim_device sim_device_cpu = {"cpu", 60.0, 10.0, 10.0, NULL, false};
const sim_device sim_device_h100 = {"h100", 40000.0, 2500.0, 25.0, NULL, true};

/* The H100 roofline on three host links, for offload: PCIe 4.0 x16 and 5.0 x16 at about 80% of
 * their 32 and 64 GB/s a direction, and GH200's NVLink-C2C at 450 GB/s a direction (900 GB/s both
 * ways, NVIDIA's figure). Uncalibrated: lrcnn calibrate on the machine replaces all three. */
static const sim_device h100_pcie4 = {"h100-pcie4", 40000.0, 2500.0, 25.0, NULL, true};
static const sim_device h100_pcie5 = {"h100-pcie5", 40000.0, 2500.0, 50.0, NULL, true};
static const sim_device gh200 = {"gh200", 40000.0, 2500.0, 450.0, NULL, true};
/* Memory-poor devices, from their makers' figures (uncalibrated peaks): a 4 GB laptop-class GPU
 * (GeForce GTX 1650: 896 cores at 1.665 GHz, 2.98 TFLOPS fp32, 128 GB/s GDDR5, PCIe 3.0 x16 at about
 * 80% of 15.75 GB/s); Jetson Nano, an edge board whose GPU shares 4 GB of LPDDR4 with its CPU (128
 * cores at 0.921 GHz, 0.236 TFLOPS fp32, 25.6 GB/s), so that what it offloads goes to storage, a
 * UHS-I microSD card at about 0.09 GB/s; Raspberry Pi 4, a CPU-only board (four Cortex-A72 at 1.5
 * GHz, 4-wide fp32 FMA: 48 GFLOPS; LPDDR4-3200 on 32 bits, 12.8 GB/s), offloading to the same kind
 * of card, its copies on the cores that compute (no overlap). */
static const sim_device gtx1650 = {"gtx1650", 2980.0, 128.0, 12.6, NULL, true};
static const sim_device jetson_nano = {"jetson-nano", 236.0, 25.6, 0.09, NULL, true};
static const sim_device rpi4 = {"rpi4", 48.0, 12.8, 0.09, NULL, false};
static const sim_device *const devices[] = {&sim_device_cpu, &sim_device_h100, &h100_pcie4, &h100_pcie5, &gh200, &gtx1650, &jetson_nano, &rpi4};

const sim_device *sim_device_find(const char *name)
{
    for (size_t i = 0; i < sizeof devices / sizeof *devices; i++)
        if (!strcmp(name, devices[i]->name)) return devices[i];
    return NULL;
}

const char *sim_device_names(void) { return "cpu, h100, h100-pcie4, h100-pcie5, gh200, gtx1650, jetson-nano, rpi4"; }

typedef struct {
    sim_mem *m;
    int64_t *timeline, device;
    int next;
} replay;

static void replay_step(void *ctx, int step, int up, int64_t device, const int64_t cur[MEM_NCAT])
{
    replay *r = ctx;
    sim_mem *m = r->m;
    if (r->timeline)
        for (; r->next < step; r->next++) r->timeline[r->next] = r->device;
    r->device = device;
    if (up < 0) return; /* a FREE: no maximum moves */
    if (cur[up] > m->max[up]) m->max[up] = cur[up];
    if (device > m->peak) m->peak = device, m->peak_step = step, memcpy(m->at_peak, cur, sizeof m->at_peak);
}

void sim_replay(const sched *s, sim_mem *m, int64_t *timeline)
{
    memset(m, 0, sizeof *m);
    m->peak_step = -1;
    replay r = {.m = m, .timeline = timeline};
    sched_walker w;
    sched_walk_open(s, &w);
    int backward = w.ev.first_bwd; /* the first step of the backward: a BWD, or the ALLOC of a gradient before it */
    for (int k = 0; k < w.ev.n && w.ev.ev[k].step < backward; k++)
        if (w.ev.ev[k].op == SCHED_ALLOC && s->bufs[w.ev.ev[k].buf].cat == MEM_AGRAD) backward = w.ev.ev[k].step;
    sched_walk_to(s, &w, backward, replay_step, &r); /* the forward */
    memcpy(m->at_backward, w.cur, sizeof m->at_backward);
    m->fwd_peak = m->peak;
    sched_walk_to(s, &w, s->n_step, replay_step, &r);
    sched_walk_close(&w);
    if (timeline)
        for (; r.next < s->n_step; r.next++) timeline[r.next] = r.device;
}

/* Step t's time; memo: d's model has been made n's (timing_memo_use). */
static double step_time(const net *n, const sched *s, const sched_step *t, const sim_device *d, bool memo, timing_how *how)
{
    double step = 0; /* a step that neither computes nor moves (most ALLOCs and FREEs): no divisions,
                        a third of the time estimate */
    if (t->flops > 0 || t->bytes_moved > 0) {
        double bw = t->op == SCHED_OFFLOAD || t->op == SCHED_PREFETCH ? d->link_gbps : d->gbps;
        double compute = t->flops / (d->gflops * 1e3), memory = t->bytes_moved / (bw * 1e3);
        step = compute > memory ? compute : memory;
    }
    *how = TIMING_ROOFLINE;
    if (!d->model) return step;
    if (!memo) timing_memo_use(d->model, n);
    return timing_sched_step_us(d->model, n, s, t, step, how);
}

double sim_step_time_us(const net *n, const sched *s, const sched_step *t, const sim_device *d, timing_how *how)
{
    return step_time(n, s, t, d, false, how);
}

double sim_step_us(const net *n, const sched *s, int i, const sim_device *d, timing_how *how)
{
    CHECK(!s->at);
    return sim_step_time_us(n, s, &s->steps[i], d, how);
}

/* The iteration on a device whose copies run on their own engine (sched_move_issue's protocol): a
 * compute stream runs every step but the moves, in order; a copy stream runs the moves in the
 * order they are issued, each an offload from the end of the step after which it may begin, each
 * prefetch from where it stands. An OFFLOAD waits for its copy; a step using a prefetched buffer
 * waits for that copy. The iteration ends when both streams have. step_us[i]: step i's own time. */
static double overlap_us(const sched *s, const double *step_us)
{
    int ns = s->n_step, *issue = err_calloc((size_t)ns + 1, sizeof(int));
    sched_move_issue(s, issue);
    lower_buckets after = lower_bucket(issue, ns, ns);
    double tc = 0, tl = 0, *ready = err_calloc((size_t)s->n_buf + 1, sizeof(double));
    double *done = err_calloc((size_t)s->n_buf + 1, sizeof(double));
    int *buf_of = err_calloc((size_t)ns + 1, sizeof(int)); /* an OFFLOAD's buffer, by its place */
    sched_events ev;
    sched_events_open(s, &ev);
    for (int k = 0; k < ev.n; k++)
        if (ev.ev[k].op == SCHED_OFFLOAD) buf_of[ev.ev[k].step] = ev.ev[k].buf;
    sched_events_close(&ev);
    sched_iter it = sched_iter_open(s, false);
    for (const sched_step *t; (t = sched_next(&it));) {
        int i = it.place;
        if (t->op == SCHED_OFFLOAD) {
            if (issue[i] < 0) tl = (tl > tc ? tl : tc) + step_us[i], done[t->buf] = tl;
            if (done[t->buf] > tc) tc = done[t->buf]; /* the release waits for the copy */
        } else if (t->op == SCHED_PREFETCH) {
            tl = (tl > tc ? tl : tc) + step_us[i], ready[t->buf] = tl;
        } else {
            int uses[SCHED_MAX_USES], nu = sched_step_uses(t, uses);
            for (int u = 0; u < nu; u++)
                if (ready[uses[u]] > tc) tc = ready[uses[u]];
            if (t->buf >= 0 && ready[t->buf] > tc) tc = ready[t->buf]; /* a FREE of a buffer still arriving */
            tc += step_us[i];
        }
        for (int k = after.start[i]; k < after.start[i + 1]; k++) { /* copies that may begin now */
            int o = after.list[k];
            tl = (tl > tc ? tl : tc) + step_us[o], done[buf_of[o]] = tl;
        }
    }
    lower_buckets_free(&after);
    free(issue), free(ready), free(done), free(buf_of);
    return tc > tl ? tc : tl;
}

double sim_time_us(const net *n, const sched *s, const sim_device *d, double *fitted)
{
    /* each step's time, kept only where the two streams need them; on the roofline an ALLOC or
     * FREE takes none, so a lean schedule's walk skips them (adding 0 changes no sum) */
    double us = 0, measured = 0, *step = d->overlap ? err_calloc((size_t)s->n_step + 1, sizeof(double)) : NULL;
    sched_iter it = sched_iter_open(s, !d->model);
    if (d->model) timing_memo_use(d->model, n);
    for (const sched_step *st; (st = sched_next(&it));) {
        timing_how how;
        double t = step_time(n, s, st, d, true, &how);
        if (how == TIMING_FITTED) measured += t;
        us += t;
        if (step) step[it.place] = t;
    }
    if (fitted) *fitted = us > 0 ? measured / us : 0;
    if (step) us = overlap_us(s, step);
    free(step);
    return us;
}

void sim_predict(const net *n, const plan *p, const sched_cfg *cfg, const sched *s, const sim_device *d, sim_result *r,
                 int64_t **timeline)
{
    memset(r, 0, sizeof *r);
    if (timeline) *timeline = err_calloc((size_t)s->n_step + 1, sizeof(int64_t));
    sim_replay(s, &r->replay, timeline ? *timeline : NULL);
    r->flops = s->flops;
    r->time_us = sim_time_us(n, s, d, &r->time_fitted);
    r->n_steps = s->n_step;
    if (p->torch) r->reserved = torch_reserved(s);
    arena a;
    arena_measure(s, &a);
    r->arena = (sim_arena){a.size, a.live, a.host_size, a.host_live, a.apart, a.how};
    arena_free(&a);
    for (int b = 0; b < s->n_buf; b++)
        if (s->bufs[b].kind == BUF_ENC && enc_data_sized(s->bufs[b].enc))
            r->enc_sized++, r->enc_calibrated += s->bufs[b].calibrated;
    r->closed_ok = !plan_modified(p);
    if (r->closed_ok) closed_predict(n, p, cfg, &r->closed);
}

int sim_run(const net *n, const plan *p, const sched_cfg *cfg, const sim_device *d, sim_result *r, int64_t **timeline,
            err *e)
{
    memset(r, 0, sizeof *r);
    sched s;
    if (pipeline_lower_lean(&s, n, p, cfg, e)) return -1;
    sim_predict(n, p, cfg, &s, d, r, timeline);
    sched_free(&s);
    return 0;
}
