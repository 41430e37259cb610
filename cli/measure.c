/* measure: see measure.h. */
#include "cli/measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/data.h"

static void compare_grads(exec *x, void *ctx)
{
    measure_compare *c = ctx;
    int64_t at = 0;
    for (int L = 0; L < c->n->n; L++) {
        int64_t k = 0;
        float *g = exec_param_copy(x, BUF_PGRAD, L, &k);
        if (!g) continue;
        if (c->write_ref) {
            memcpy(c->ref + at, g, (size_t)k * sizeof(float));
        } else {
            double d2 = 0, r2 = 0;
            for (int64_t i = 0; i < k; i++) {
                double d = (double)g[i] - c->ref[at + i];
                d2 += d * d, r2 += (double)c->ref[at + i] * c->ref[at + i];
            }
            double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
            if (rel > c->r->grad_dev) c->r->grad_dev = rel, snprintf(c->r->worst, sizeof c->r->worst, "%s", c->n->layers[L].name);
        }
        free(g);
        at += k;
    }
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

/* Runs in a child: `iters` iterations of plan p (compare: 1 iteration with the gradient hook). */
static void child(const net *n, const plan *p, const sched_cfg *cfg, int iters, uint64_t seed, measure_compare *cmp, measure_result *r)
{
    err e;
    sched s;
    if (sched_lower(&s, n, p, cfg, &e)) {
        snprintf(r->err, sizeof r->err, "%.250s", e.msg);
        return;
    }
    const net_layer *in = &n->layers[0];
    data d;
    data_synthetic(&d, in->c, in->h, in->w, n->layers[n->n - 1].c, seed);
    float *img = calloc((size_t)cfg->batch * in->c * in->h * in->w, sizeof(float));
    int64_t *lab = calloc((size_t)cfg->batch, sizeof(int64_t));
    exec x;
    exec_init(&x, n, p, &s, &ops_cpu, cfg->optimizer, exec_default_hparams(cfg->optimizer), seed);
    if (cmp) x.before_update = compare_grads, x.before_update_ctx = cmp;
    r->best_us = 1e300;
    for (int it = 0; it < iters; it++) {
        data_batch(&d, it, cfg->batch, img, lab);
        double t0 = now_us();
        exec_iteration(&x, img, lab);
        double dt = now_us() - t0;
        if ((it > 0 || iters == 1) && dt < r->best_us) r->best_us = dt;
        if (it == 0) r->loss0 = x.loss;
    }
    if (cmp && cmp->write_ref) *cmp->ref_loss = x.loss;
    if (cmp && !cmp->write_ref) r->loss_dev = fabs((double)r->loss0 - *cmp->ref_loss) / fabs((double)*cmp->ref_loss);
    r->peak = x.mem.peak, r->host_peak = x.mem.host_peak;
    memcpy(r->at_peak, x.mem.at_peak, sizeof r->at_peak);
    memcpy(r->max, x.mem.max, sizeof r->max);
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    r->rss = (int64_t)u.ru_maxrss * 1024;
    r->ok = 1;
    exec_free(&x);
    sched_free(&s);
}

/* Forks, runs child(), and returns its result through a pipe. */
void measure_plan(const net *n, const plan *p, const sched_cfg *cfg, int iters, uint64_t seed, measure_compare *cmp, measure_result *out)
{
    int fd[2];
    memset(out, 0, sizeof *out);
    if (pipe(fd)) {
        snprintf(out->err, sizeof out->err, "pipe failed");
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        measure_result r = {0};
        if (cmp) cmp->r = &r;
        child(n, p, cfg, iters, seed, cmp, &r);
        ssize_t w = write(fd[1], &r, sizeof r);
        _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fd[1]);
    ssize_t got = pid > 0 ? read(fd[0], out, sizeof *out) : -1;
    close(fd[0]);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    if (got != (ssize_t)sizeof *out) {
        memset(out, 0, sizeof *out);
        snprintf(out->err, sizeof out->err, "engine process failed (%s %d)", WIFSIGNALED(status) ? "signal" : "exit",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

