/* run: see run.h. */
#include "engine/run.h"
#include "sim/lower/pipeline.h"

#include "engine/threads.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int64_t rss_peak_bytes(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (int64_t)u.ru_maxrss * 1024; /* Linux reports KiB */
}

/* Whether this process has run the engine. GNU OpenMP's thread pool does not survive fork: a child
 * forked after the parent ran a parallel region waits forever for workers it does not have. So a
 * process either runs plans itself or forks them, never both (run_forked checks). */
static bool engine_ran_here;

typedef struct {
    run *r;
    const run_cfg *c;
    int iter;
} hook;

/* The executor's before_update: the gradients of `layer` (-1: all layers) are complete. */
static void before_update(exec *x, int layer, void *ctx)
{
    hook *h = ctx;
    if (h->c->grads && h->iter == 0) {
        int64_t at = 0;
        for (int L = 0; L < x->n->n; L++) {
            int64_t k = x->n->layers[L].params;
            if (layer >= 0 && L != layer) {
                at += k;
                continue;
            }
            float *g = exec_param_copy(x, BUF_PGRAD, L, &k);
            if (!g) continue;
            memcpy(h->r->grads + at, g, (size_t)k * sizeof(float));
            at += k;
            free(g);
        }
        CHECK(at == h->r->n_grads);
    }
    if (h->c->before_update) h->c->before_update(x, h->iter, layer, h->c->ctx);
}

/* Bytes of [p, p + bytes) resident in memory: pages touched and not given back. */
static int64_t resident_bytes(const void *p, int64_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p / (uintptr_t)page * (uintptr_t)page, hi = (uintptr_t)p + (uintptr_t)bytes;
    size_t pages = (hi - lo + (uintptr_t)page - 1) / (uintptr_t)page;
    unsigned char *vec = err_calloc(pages + 1, 1);
    int64_t n = -1;
    if (mincore((void *)lo, hi - lo, vec) == 0) {
        n = 0;
        for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
        n *= page;
    }
    free(vec);
    return n;
}

static void measure_arena(run *r, const run_cfg *c)
{
    run_summary *s = &r->sum;
    const alloc_stats *m = &r->x.mem;
    s->arena = r->x.arena_on, s->arena_resident = -1;
    if (!s->arena) return;
    s->arena_size = m->size[0], s->arena_host_size = m->size[1];
    s->arena_extent = m->extent[0], s->arena_host_extent = m->extent[1];
    if ((!c->ops->mem || c->ops->mem == &alloc_mem_host) && m->base[0]) s->arena_resident = resident_bytes(m->base[0], m->size[0]);
}

/* The encoded maps of the schedule as the last iteration stored them. */
static void collect_encoded(run *r)
{
    run_summary *s = &r->sum;
    for (int b = 0; b < r->s.n_buf; b++) s->n_encoded += r->s.bufs[b].kind == BUF_ENC;
    if (!s->n_encoded) return;
    s->encoded = err_calloc((size_t)s->n_encoded, sizeof *s->encoded);
    const adapt *a = &r->x.adapt;
    for (int b = 0, k = 0; b < r->s.n_buf; b++) {
        const sched_buf *sb = &r->s.bufs[b];
        if (sb->kind != BUF_ENC) continue;
        bool adapted = a->target && sb->enc == ENC_ZFP_ACC;
        s->encoded[k++] = (run_encoded){.layer = sb->layer, .band = sb->band, .kind = sb->enc, .mod = sb->mod, .shape = sb->shape,
                                        .factor = sb->factor, .calibrated = sb->calibrated, .predicted = sb->bytes,
                                        .measured = r->x.bytes[b],
                                        .bound = adapted && a->bound[sb->layer] > 0 ? a->bound[sb->layer] : -1,
                                        .model_err = adapted ? a->model_err[sb->layer] : -1};
    }
}

void run_summary_free(run_summary *s)
{
    free(s->encoded), free(s->loss), free(s->iter_us), free(s->device_layers);
    s->encoded = NULL, s->n_encoded = 0, s->loss = NULL, s->iter_us = NULL, s->device_layers = NULL, s->n_device_layers = 0;
}

int run_plan(run *r, const run_cfg *c, err *e)
{
    memset(r, 0, sizeof *r);
    engine_ran_here = true;
    sched_cfg sc = c->sched;
    sc.ws = c->ops->ws;
    if (c->p->n_mod && !c->ops->encode)
        return err_set(e, "plan '%s': the %s backend has no codecs for kept-map encodings yet", c->p->text, c->ops->backend);
    const enc_mod *lossy = plan_lossy(c->p);
    if (lossy && lossy->adapt > 0 && !c->ops->sumsq)
        return err_set(e, "plan '%s': the %s backend cannot adapt ZFP bounds (no gradient norms)", c->p->text, c->ops->backend);
    if (pipeline_lower(&r->s, c->n, c->p, &sc, e)) return -1;
    for (int b = 0; b < r->s.n_buf && c->ops->encodes; b++)
        if (r->s.bufs[b].kind == BUF_ENC && !c->ops->encodes(r->s.bufs[b].enc)) {
            err_set(e, "plan '%s': the %s backend has no %s codec (Debian's libzfp has no CUDA policy; use gist or dpr)", c->p->text,
                    c->ops->backend, enc_name(r->s.bufs[b].enc));
            sched_free(&r->s);
            return -1;
        }
    exec_init(&r->x, c->n, c->p, &r->s, c->ops, sc.optimizer, c->hp, c->seed);
    /* the arena first: the backend's preparation sizes only what the plan leaves outside it */
    if ((!c->pool && exec_use_arena(&r->x, e)) || (c->ops->prepare && c->ops->prepare(c->n, &r->s, e))) {
        exec_free(&r->x);
        sched_free(&r->s);
        return -1;
    }
    r->x.sync_steps = c->sync_steps;
    exec_start(&r->x);
    if (c->on_start && c->on_start(&r->x, c->ctx, e)) {
        run_free(r);
        return -1;
    }
    const net_layer *in = &c->n->layers[0];
    int N = sc.batch, K = c->iters;
    float *images = err_calloc((size_t)N * in->c * in->h * in->w, sizeof(float));
    int64_t *labels = err_calloc((size_t)(N * net_labels_per_image(c->n)), sizeof(int64_t));
    r->loss = err_calloc((size_t)K, sizeof(float));
    r->iter_us = err_calloc((size_t)K, sizeof(double));
    if (c->grads) {
        r->n_grads = net_params(c->n);
        r->own_grads = !c->grads_to;
        r->grads = c->grads_to ? c->grads_to : err_calloc((size_t)r->n_grads + 1, sizeof(float));
    }
    hook h = {r, c, 0};
    r->x.before_update = before_update, r->x.before_update_ctx = &h;
    bool profiled = false;
    for (int it = 0; it < K; it++) {
        h.iter = it;
        c->batches.fill(c->batches.ctx, it, N, images, labels);
        exec_stage(&r->x, images, labels); /* the batch on the device before the timer, as PyTorch's peer holds it */
        if (it == K - 1 && c->ops->device_mark) profiled = c->ops->device_mark(); /* peaks of the last iteration */
        double t0 = now_us();
        exec_iteration(&r->x, images, labels);
        r->iter_us[it] = now_us() - t0;
        r->loss[it] = r->x.loss;
        if (c->on_iter) c->on_iter(r, it, c->ctx);
    }
    int first, end;
    run_timed(K, profiled, &first, &end);
    r->sum.profiled_last = profiled, r->sum.best_us = INFINITY;
    for (int it = first; it < end; it++) r->sum.best_us = r->iter_us[it] < r->sum.best_us ? r->iter_us[it] : r->sum.best_us;
    free(images), free(labels);
    run_summary *s = &r->sum;
    const alloc_stats *m = &r->x.mem;
    s->ok = true, s->iters = K, s->peak = m->peak, s->host_peak = m->host_peak;
    memcpy(s->at_peak, m->at_peak, sizeof s->at_peak);
    memcpy(s->max, m->max, sizeof s->max);
    s->rss_peak = rss_peak_bytes();
    measure_arena(r, c);
    s->loss0 = r->loss[0];
    s->median_us = run_median(r->iter_us + first, end - first);
    collect_encoded(r);
    if (c->ops->device_report) {
        s->has_device = true, s->n_device_layers = c->n->n;
        s->device_layers = err_calloc((size_t)s->n_device_layers, sizeof *s->device_layers);
        c->ops->device_report(&s->device, s->device_layers, s->n_device_layers);
    }
    r->x.before_update = NULL; /* h lives on this stack frame */
    return 0;
}

void run_timed(int iters, bool profiled_last, int *first, int *end)
{
    *first = iters > 1, *end = profiled_last && iters > 2 ? iters - 1 : iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double run_median(const double *v, int m)
{
    double *w = err_calloc((size_t)m + 1, sizeof *w);
    memcpy(w, v, (size_t)m * sizeof *w);
    qsort(w, (size_t)m, sizeof *w, cmp_double);
    double med = m % 2 ? w[m / 2] : 0.5 * (w[m / 2 - 1] + w[m / 2]);
    free(w);
    return med;
}

void run_free(run *r)
{
    run_summary_free(&r->sum);
    exec_free(&r->x);
    sched_free(&r->s);
    free(r->loss), free(r->iter_us);
    if (r->own_grads) free(r->grads);
    memset(r, 0, sizeof *r);
}

void run_compare(run_summary *s, const net *n, const float *g, const float *ref, float loss, float ref_loss)
{
    int64_t at = 0;
    s->compared = true, s->grad_dev = 0, s->non_finite = 0, s->worst[0] = 0;
    for (int L = 0; L < n->n; L++) {
        int64_t k = n->layers[L].params;
        double d2 = 0, r2 = 0;
        for (int64_t i = 0; i < k; i++) {
            if (!isfinite(g[at + i])) {
                s->non_finite++;
                continue;
            }
            double d = (double)g[at + i] - ref[at + i];
            d2 += d * d, r2 += (double)ref[at + i] * ref[at + i];
        }
        double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
        if (k && rel > s->grad_dev) s->grad_dev = rel, snprintf(s->worst, sizeof s->worst, "%s", n->layers[L].name);
        at += k;
    }
    s->loss_dev = fabs((double)loss - ref_loss) / fabs((double)ref_loss);
}

/* All n bytes through a pipe end (a large read or write can be partial). */
static bool pipe_io(int fd, void *p, size_t n, bool write_it)
{
    for (char *at = p; n > 0;) {
        ssize_t k = write_it ? write(fd, at, n) : read(fd, at, n);
        if (k <= 0) return false;
        at += k, n -= (size_t)k;
    }
    return true;
}

/* One run of a job in its child: the summary, with its comparison, and its arrays through fd. */
static bool child_run(int fd, const run_cfg *c, const ops_table *ops, const float *cmp_ref, float cmp_loss, const char *refused)
{
    run r;
    run_cfg cc = *c;
    err e;
    run_summary s = {0};
    memset(&r, 0, sizeof r);
    if (ops) cc.ops = ops;
    cc.grads = c->grads || cmp_ref;
    bool ran = false;
    if (refused) {
        snprintf(s.err, sizeof s.err, "%.250s", refused);
    } else if (run_plan(&r, &cc, &e)) {
        snprintf(s.err, sizeof s.err, "%.250s", e.msg);
    } else {
        s = r.sum, ran = true;
        if (cmp_ref) run_compare(&s, c->n, r.grads, cmp_ref, r.sum.loss0, cmp_loss);
    }
    int n = s.ok ? s.iters : 0; /* then every iteration's loss and time */
    bool ok = pipe_io(fd, &s, sizeof s, true) && pipe_io(fd, s.encoded, (size_t)s.n_encoded * sizeof *s.encoded, true) &&
              pipe_io(fd, s.device_layers, (size_t)s.n_device_layers * sizeof *s.device_layers, true) &&
              pipe_io(fd, r.loss, (size_t)n * sizeof *r.loss, true) && pipe_io(fd, r.iter_us, (size_t)n * sizeof *r.iter_us, true);
    if (ran) run_free(&r);
    return ok;
}

/* Reads one child_run's summary into out; false if the pipe ended early. */
static bool parent_read(int fd, run_summary *out)
{
    bool got = pipe_io(fd, out, sizeof *out, false) && out->n_encoded >= 0 && out->iters >= 0 && out->n_device_layers >= 0;
    out->encoded = NULL, out->loss = NULL, out->iter_us = NULL, out->device_layers = NULL; /* the child's pointers mean nothing here */
    if (!got) out->n_encoded = out->n_device_layers = 0;
    int n = got && out->ok ? out->iters : 0;
    if (got && out->n_encoded) {
        out->encoded = err_calloc((size_t)out->n_encoded, sizeof *out->encoded);
        got = pipe_io(fd, out->encoded, (size_t)out->n_encoded * sizeof *out->encoded, false);
    }
    if (got && out->n_device_layers) {
        out->device_layers = err_calloc((size_t)out->n_device_layers, sizeof *out->device_layers);
        got = pipe_io(fd, out->device_layers, (size_t)out->n_device_layers * sizeof *out->device_layers, false);
    }
    if (got && n) {
        out->loss = err_calloc((size_t)n, sizeof *out->loss);
        out->iter_us = err_calloc((size_t)n, sizeof *out->iter_us);
        got = pipe_io(fd, out->loss, (size_t)n * sizeof *out->loss, false) && pipe_io(fd, out->iter_us, (size_t)n * sizeof *out->iter_us, false);
    }
    return got;
}

void run_isolated(const run_job *j, run_summary *out)
{
    int fd[2];
    memset(out, 0, (size_t)j->n * sizeof *out);
    if (engine_ran_here) {
        fprintf(stderr, "lrcnn: internal error: a forked run after run_plan in the same process (OpenMP cannot fork)\n");
        abort();
    }
    engine_threads(); /* chosen here, once: the children inherit it */
    if (pipe(fd)) {
        for (int k = 0; k < j->n; k++) snprintf(out[k].err, sizeof out[k].err, "pipe failed");
        return;
    }
    fflush(stdout), fflush(stderr);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        close(fd[0]);
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a plan's process ends with the command that started it */
        if (getppid() != parent) _exit(1); /* ... which may have ended already */
        err e = {{0}};
        const ops_table *ops = j->backend ? j->find(j->backend, j->profile, &e) : NULL;
        const char *refused = j->backend && !ops ? e.msg : NULL;
        if (!refused && j->first && j->first(ops ? ops : j->cfg[0].ops, j->ctx, j->out_first, &e)) refused = e.msg;
        int first_ok = !refused;
        bool ok = pipe_io(fd[1], &first_ok, sizeof first_ok, true) &&
                  (!j->first || !first_ok || pipe_io(fd[1], j->out_first, j->first_bytes, true));
        for (int k = 0; ok && k < j->n; k++) ok = child_run(fd[1], &j->cfg[k], ops, j->cmp_ref[k], j->cmp_loss[k], refused);
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    int first_ok = 0;
    bool got = pid > 0 && pipe_io(fd[0], &first_ok, sizeof first_ok, false) &&
               (!j->first || !first_ok || pipe_io(fd[0], j->out_first, j->first_bytes, false));
    int k = 0;
    while (got && k < j->n && (got = parent_read(fd[0], &out[k]))) k++;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    for (; k < j->n; k++) { /* the child died first: a crash */
        run_summary_free(&out[k]);
        memset(&out[k], 0, sizeof out[k]);
        snprintf(out[k].err, sizeof out[k].err, "engine process failed (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

void run_forked(const run_cfg *c, const float *cmp_ref, float cmp_loss, run_summary *out)
{
    run_job j = {.n = 1, .cfg = {*c}, .cmp_ref = {cmp_ref}, .cmp_loss = {cmp_loss}};
    run_isolated(&j, out);
}
