/* pipe_run: see pipe_run.h. */
#include "engine/pipe_run.h"

#include <stdlib.h>
#include <string.h>

#include "sim/lower/pipeline.h"

/* What every device shares: the link's copies (one per buffer of the whole lowering and
 * micro-batch), the batch, and where the gradients go. */
typedef struct {
    const sched *whole;
    int m, mb_batch;
    void **mail;              /* [n_buf * m]: a sent buffer's bytes, NULL until sent */
    const float *images;
    const int64_t *labels;
    int64_t image_floats;     /* a micro-batch's */
    pipe_run_result *r;
} link;

typedef struct {
    link *l;
    const pipe_dev *pd;
    int *last_write;          /* [n_buf]: the op that writes a buffer last here (-1: none) */
    bool *sent;               /* [n_buf] */
} device;

static void **mailbox(link *l, const pipe_dev *pd, int b) { return &l->mail[(int64_t)pd->orig[b] * l->m + pd->mb[b]]; }

static void send(exec *x, int b, device *dv)
{
    if (!dv->pd->leaves[b] || dv->sent[b]) return;
    void **box = mailbox(dv->l, dv->pd, b);
    int64_t bytes = x->s->bufs[b].bytes;
    *box = err_calloc((size_t)bytes + 1, 1);
    x->ops->download(*box, x->ptr[b], bytes);
    dv->sent[b] = true;
}

static void depart(exec *x, int b, void *ctx) { send(x, b, ctx); }

static void arrive(exec *x, int step, void *ctx)
{
    device *dv = ctx;
    link *l = dv->l;
    int b = x->s->steps[step].y, mb = dv->pd->mb[b];
    int64_t bytes = x->s->bufs[b].bytes;
    buf_kind k = l->whole->bufs[dv->pd->orig[b]].kind;
    const void *src = k == BUF_INPUT   ? (const void *)(l->images + mb * l->image_floats)
                      : k == BUF_LABEL ? (const void *)(l->labels + (int64_t)mb * (bytes / 8))
                                       : *mailbox(l, dv->pd, b);
    CHECK(src != NULL);
    x->ops->upload(x->ptr[b], src, bytes);
}

static void grads(exec *x, int layer, void *ctx)
{
    (void)layer;
    pipe_run_result *r = ((device *)ctx)->l->r;
    for (int L = 0; L < x->n->n; L++)
        if (!r->grad[L]) r->grad[L] = exec_param_copy(x, BUF_PGRAD, L, &r->count[L]);
}

/* Whether op k of the device can run: everything it receives from another device has been sent. */
static bool ready(const exec *x, const device *dv, int k)
{
    for (int i = dv->pd->op_start[k]; i < dv->pd->op_start[k + 1]; i++) {
        const sched_step *t = &x->s->steps[i];
        if (t->op != SCHED_LOAD) continue;
        buf_kind kind = dv->l->whole->bufs[dv->pd->orig[t->y]].kind;
        if (kind != BUF_INPUT && kind != BUF_LABEL && !*mailbox(dv->l, dv->pd, t->y)) return false;
    }
    return true;
}

int pipe_run(const net *n, const plan *p, sched_optimizer opt, int batch, const pipe_cfg *c, const int *first, const ops_table *ops,
             const float *images, const int64_t *labels, uint64_t seed, pipe_run_result *r, err *e)
{
    memset(r, 0, sizeof *r);
    if (pipe_check(c, e)) return -1;
    if (batch % c->micro) return err_set(e, "pipeline: the batch (%d) must be a multiple of the micro-batches (%d)", batch, c->micro);
    int P = c->devices, S = pipe_stages(c);
    sched_cfg cfg = {.batch = batch / c->micro, .optimizer = opt};
    sched whole;
    if (pipeline_lower(&whole, n, p, &cfg, e)) return -1;
    pipe_stage *st = err_calloc((size_t)S, sizeof *st);
    if (pipe_stage_costs(n, p, &cfg, &sim_device_cpu, first, S, st, e)) return free(st), sched_free(&whole), -1;
    r->devices = P, r->n = n->n;
    r->dev = err_calloc((size_t)P, sizeof *r->dev);
    r->grad = err_calloc((size_t)n->n, sizeof(float *)), r->count = err_calloc((size_t)n->n, sizeof(int64_t));
    link l = {.whole = &whole, .m = c->micro, .mb_batch = cfg.batch, .images = images, .labels = labels, .r = r};
    l.image_floats = (int64_t)cfg.batch * n->layers[0].c * n->layers[0].h * n->layers[0].w;
    l.mail = err_calloc((size_t)whole.n_buf * c->micro + 1, sizeof(void *));
    sched *s = err_calloc((size_t)P, sizeof *s);
    pipe_dev *pd = err_calloc((size_t)P, sizeof *pd);
    exec *x = err_calloc((size_t)P, sizeof *x);
    device *dv = err_calloc((size_t)P, sizeof *dv);
    int *next = err_calloc((size_t)P, sizeof(int)), rc = 0, built = 0;
    for (; built < P; built++) {
        int d = built;
        if ((rc = pipe_sched_device(&s[d], &pd[d], &whole, n, &cfg, c, first, d, e))) break;
        dv[d] = (device){&l, &pd[d], err_calloc((size_t)s[d].n_buf + 1, sizeof(int)), err_calloc((size_t)s[d].n_buf + 1, sizeof(bool))};
        for (int b = 0; b < s[d].n_buf; b++) dv[d].last_write[b] = -1;
        for (int k = 0; k < pd[d].n_op; k++)
            for (int i = pd[d].op_start[k]; i < pd[d].op_start[k + 1]; i++) {
                int w[SCHED_MAX_USES], nw = s[d].steps[i].op == SCHED_PREFETCH ? 0 : sched_step_writes(&s[d].steps[i], w); /* a move changes no value */
                for (int q = 0; q < nw; q++) dv[d].last_write[w[q]] = k;
            }
        exec_init(&x[d], n, p, &s[d], ops, opt, exec_default_hparams(opt), seed);
        x[d].arrive = arrive, x[d].depart = depart, x[d].before_update = grads;
        x[d].hook_ctx = x[d].before_update_ctx = &dv[d];
        exec_begin(&x[d]);
    }
    for (bool moved = !rc; moved;) { /* each device runs what it can, in turn, until none can */
        moved = false;
        for (int d = 0; d < P; d++)
            for (; next[d] < pd[d].n_op && ready(&x[d], &dv[d], next[d]); next[d]++, moved = true) {
                int k = next[d];
                exec_run(&x[d], pd[d].op_start[k], pd[d].op_start[k + 1], NULL, NULL);
                for (int b = 0; b < s[d].n_buf; b++) /* written for the last time here, still held: on its way */
                    if (dv[d].last_write[b] == k && x[d].ptr[b]) send(&x[d], b, &dv[d]);
            }
    }
    for (int d = 0; !rc && d < P; d++)
        if (next[d] < pd[d].n_op) rc = err_set(e, "pipeline: device %d cannot run op %d: what it receives never comes", d, next[d]);
    for (int d = 0; d < built; d++) {
        if (!rc) {
            exec_run(&x[d], pd[d].op_start[pd[d].n_op], s[d].n_step, NULL, NULL); /* the optimizer's step */
            exec_end(&x[d]);
            sim_mem m, stored;
            sim_replay(&s[d], &m, NULL);
            for (int b = 0; b < s[d].n_buf; b++) /* a data-sized encoding at the bytes the codec stored */
                if (s[d].bufs[b].kind == BUF_ENC && enc_data_sized(s[d].bufs[b].enc)) s[d].bufs[b].bytes = x[d].bytes[b];
            sim_replay(&s[d], &stored, NULL);
            r->dev[d] = (pipe_run_dev){x[d].mem.peak, m.peak, stored.peak, pipe_device_peak(c, d, st), s[d].n_step};
        }
        exec_free(&x[d]);
        free(dv[d].last_write), free(dv[d].sent);
        sched_free(&s[d]);
        pipe_dev_free(&pd[d]);
    }
    for (int64_t i = 0; i < (int64_t)whole.n_buf * c->micro; i++) free(l.mail[i]);
    free(l.mail), free(s), free(pd), free(x), free(dv), free(next), free(st);
    sched_free(&whole);
    if (rc) pipe_run_free(r);
    return rc;
}

void pipe_run_free(pipe_run_result *r)
{
    for (int L = 0; r->grad && L < r->n; L++) free(r->grad[L]);
    free(r->grad), free(r->count), free(r->dev);
    memset(r, 0, sizeof *r);
}
