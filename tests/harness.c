/* harness: see harness.h. */
#include "tests/harness.h"

#include "io/data.h"

int harness_run(const net *n, const char *text, int batch, const ops_table *ops, outcome *o, err *e)
{
    return harness_run_iters(n, text, batch, ops, SCHED_SGD, 1, o, e);
}

int harness_run_iters(const net *n, const char *text, int batch, const ops_table *ops, sched_optimizer opt, int iters,
                      outcome *o, err *e)
{
    return harness_run_alloc(n, text, batch, ops, opt, iters, false, o, e);
}

int harness_run_alloc(const net *n, const char *text, int batch, const ops_table *ops, sched_optimizer opt, int iters, bool pool,
                      outcome *o, err *e)
{
    sched_cfg cfg = {.batch = batch, .optimizer = opt, .ws = ops->ws};
    if (plan_parse(&o->p, n, text, e)) return -1;
    data d;
    data_synthetic_for(&d, n, 7);
    run_cfg c = {.n = n, .p = &o->p, .sched = cfg, .ops = ops, .hp = exec_default_hparams(opt), .seed = 3, .iters = iters,
                 .batches = data_batches(&d), .grads = true, .pool = pool};
    if (sim_run(n, &o->p, &cfg, &sim_device_cpu, &o->pred, NULL, e) || run_plan(&o->r, &c, e)) {
        plan_free(&o->p);
        return -1;
    }
    return 0;
}

bool harness_mem_equal(const outcome *o)
{
    bool ok = o->r.sum.peak == o->pred.replay.peak;
    for (int k = 0; k < MEM_NCAT; k++)
        ok &= o->r.sum.at_peak[k] == o->pred.replay.at_peak[k] && o->r.sum.max[k] == o->pred.replay.max[k];
    return ok;
}

void harness_replay_measured(const outcome *o, sim_mem *m)
{
    sched *s = (sched *)&o->r.s; /* sizes swapped in, replayed, swapped back */
    int64_t *predicted = err_calloc((size_t)s->n_buf + 1, sizeof(int64_t));
    for (int b = 0; b < s->n_buf; b++) {
        predicted[b] = s->bufs[b].bytes;
        if (s->bufs[b].kind == BUF_ENC && enc_data_sized(s->bufs[b].enc)) s->bufs[b].bytes = o->r.x.bytes[b];
    }
    sim_replay(s, m, NULL);
    for (int b = 0; b < s->n_buf; b++) s->bufs[b].bytes = predicted[b];
    free(predicted);
}

void harness_drop(outcome *o)
{
    run_free(&o->r);
    plan_free(&o->p);
}
