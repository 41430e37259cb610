/* harness: see harness.h. */
#include "tests/harness.h"

#include "io/data.h"

int harness_run(const net *n, const char *text, int batch, const ops_table *ops, outcome *o, err *e)
{
    sched_cfg cfg = {.batch = batch, .optimizer = SCHED_SGD, .ws = ops->ws};
    if (plan_parse(&o->p, n, text, e)) return -1;
    const net_layer *in = &n->layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n->layers[n->n - 1].c, 7);
    run_cfg c = {.n = n, .p = &o->p, .sched = cfg, .ops = ops, .hp = exec_default_hparams(SCHED_SGD), .seed = 3, .iters = 1,
                 .batches = data_batches(&d), .grads = true};
    if (sim_run(n, &o->p, &cfg, &sim_device_cpu, &o->pred, NULL, e) || run_plan(&o->r, &c, e)) {
        plan_free(&o->p);
        return -1;
    }
    return 0;
}

void harness_drop(outcome *o)
{
    run_free(&o->r);
    plan_free(&o->p);
}
