/* h5run: see h5run.h. */
#include "io/h5run.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "io/machine.h"
#include "sim/net/kind.h"
#include "sim/predict/arena.h"

/* prediction/<name>: peak and peak_step attributes, at_peak and max by category. */
static int write_mem(hid_t loc, const char *name, const sim_mem *m, err *e)
{
    int rc = -1;
    hid_t g = H5I_INVALID_HID;
    H5_CHECK(g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(h5_attr_i64(g, "peak", m->peak, e));
    H5_TRY(h5_attr_int(g, "peak_step", m->peak_step, e));
    H5_TRY(h5_dset_bytes(g, "at_peak", m->at_peak, MEM_NCAT, e));
    H5_TRY(h5_dset_bytes(g, "max", m->max, MEM_NCAT, e));
    if (m->peak_step >= 0) H5_TRY(h5_dset_bytes(g, "at_backward", m->at_backward, MEM_NCAT, e)); /* replay */
    rc = 0;
cleanup:
    if (g >= 0) H5Gclose(g);
    return rc;
}

/* One row of the table `measured/encoded`. */
typedef struct {
    const char *layer, *encoding, *modifier;
    int32_t band, images, calibrated;
    int64_t values, predicted, measured;
    double acc, factor, factor_measured, bound, model_error;
} encoded_row;

/* The encoded maps of the last iteration: predicted and stored bytes, and for the data-sized
 * encodings the density or ratio predicted with and the one measured (io/calib.h reads them back). */
static int write_encoded(hid_t loc, const h5_run *r, err *e)
{
    static const h5_field fields[] = {
        {"layer", offsetof(encoded_row, layer), 's'},          {"band", offsetof(encoded_row, band), 'i'},
        {"encoding", offsetof(encoded_row, encoding), 's'},    {"modifier", offsetof(encoded_row, modifier), 's'},
        {"images", offsetof(encoded_row, images), 'i'},        {"values", offsetof(encoded_row, values), 'l'},
        {"predicted_bytes", offsetof(encoded_row, predicted), 'l'}, {"measured_bytes", offsetof(encoded_row, measured), 'l'},
        {"acc", offsetof(encoded_row, acc), 'd'},              {"factor", offsetof(encoded_row, factor), 'd'},
        {"factor_measured", offsetof(encoded_row, factor_measured), 'd'}, {"calibrated", offsetof(encoded_row, calibrated), 'i'},
        {"bound", offsetof(encoded_row, bound), 'd'},          {"model_error", offsetof(encoded_row, model_error), 'd'},
    };
    const run_summary *s = r->measured;
    encoded_row *rows = err_calloc((size_t)s->n_encoded, sizeof *rows);
    char (*mods)[64] = err_calloc(ENC_MAX_MODS, sizeof *mods);
    for (int m = 0; m < r->p->n_mod; m++) enc_mod_describe(&r->p->mods[m], mods[m], sizeof mods[m]);
    for (int i = 0; i < s->n_encoded; i++) {
        const run_encoded *x = &s->encoded[i];
        rows[i] = (encoded_row){r->n->layers[x->layer].name, enc_name(x->kind), mods[x->mod], x->band, x->shape.images, x->calibrated,
                                x->shape.images * x->shape.nx * x->shape.ny, x->predicted, x->measured,
                                x->kind == ENC_ZFP_ACC ? r->p->mods[x->mod].acc : 0, x->factor,
                                enc_measured_factor(x->kind, x->shape, x->measured), x->bound, x->model_err};
    }
    int rc = h5_write_table(loc, "encoded", rows, sizeof *rows, (hsize_t)s->n_encoded, fields, 14, e);
    free(rows), free(mods);
    return rc;
}

/* measured/device: what the device itself saw in the last iteration (backends that watch it). */
static int write_device(hid_t loc, const run_summary *s, err *e)
{
    int rc = -1, L = s->n_device_layers;
    hid_t g = H5I_INVALID_HID;
    const ops_device *d = &s->device;
    double *us = err_calloc((size_t)L * 2 + 1, sizeof *us);
    int32_t *algo = err_calloc((size_t)L * 3 + 1, sizeof *algo);
    int64_t *ws = err_calloc((size_t)L * 3 + 1, sizeof *ws);
    for (int i = 0; i < L; i++)
        for (int k = 0; k < 3; k++) {
            if (k < 2) us[2 * i + k] = s->device_layers[i].kernel_us[k];
            algo[3 * i + k] = s->device_layers[i].algo[k], ws[3 * i + k] = s->device_layers[i].ws[k];
        }
    H5_CHECK(g = H5Gcreate2(loc, "device", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    const struct { const char *name, *v; } strs[] = {{"name", d->name}, {"capability", d->capability}, {"driver", d->driver},
                                                      {"runtime", d->runtime}, {"cudnn", d->dnn}, {"cublas", d->blas},
                                                      {"cudnn_policy", d->conv_policy}};
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) H5_TRY(h5_attr_str(g, strs[k].name, strs[k].v, e));
    const struct { const char *name; int64_t v; } ints[] = {
        {"context_bytes", d->context_bytes},     {"device_peak", d->device_peak},
        {"pool_reserved_peak", d->pool_reserved_peak}, {"pool_used_peak", d->pool_used_peak},
        {"cupti_reserved_peak", d->cupti_reserved_peak}, {"cupti_suballoc_peak", d->cupti_suballoc_peak},
        {"dropped_records", d->dropped},         {"outside_pool", d->outside_pool},
        {"host_arena", d->host_arena},           {"host_outside", d->host_outside}};
    for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) H5_TRY(h5_attr_i64(g, ints[k].name, ints[k].v, e));
    H5_TRY(h5_attr_int(g, "profiled", d->profiled, e));
    H5_TRY(h5_attr_int(g, "profiled_iter", s->profiled_last ? s->iters - 1 : -1, e)); /* not timed (run_timed) */
    H5_TRY(h5_attr_int(g, "valid", d->dropped <= 0, e)); /* -1: not profiled */
    H5_TRY(h5_attr_f64(g, "kernel_us", d->kernel_us, e));
    hsize_t two[2] = {(hsize_t)L, 2}, three[2] = {(hsize_t)L, 3};
    H5_TRY(h5_dset(g, "layer_kernel_us", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, us, 2, two, e));
    H5_TRY(h5_set_units(g, "layer_kernel_us", "us", e));
    H5_TRY(h5_dset(g, "conv_algo", H5T_STD_I32LE, H5T_NATIVE_INT32, algo, 2, three, e));
    H5_TRY(h5_dset(g, "conv_workspace", H5T_STD_I64LE, H5T_NATIVE_INT64, ws, 2, three, e));
    H5_TRY(h5_set_units(g, "conv_workspace", "bytes", e));
    rc = 0;
cleanup:
    if (g >= 0) H5Gclose(g);
    free(us), free(algo), free(ws);
    return rc;
}

/* measured/: what the engine measured (engine runs); see results/SCHEMA.md. A run from
 * run_forked has only its summary: loss and iter_us then hold iteration 0's loss and the best time. */
static int write_measured(hid_t loc, const h5_run *r, err *e)
{
    int rc = -1;
    hid_t g = H5I_INVALID_HID;
    const run_summary *s = r->measured;
    const run *m = r->trace;
    int n_layers = r->n->n;
    H5_CHECK(g = H5Gcreate2(loc, "measured", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(h5_attr_i64(g, "peak", s->peak, e));
    H5_TRY(h5_attr_i64(g, "host_peak", s->host_peak, e));
    H5_TRY(h5_attr_i64(g, "rss_peak", s->rss_peak, e));
    if (s->arena) { /* --alloc arena: the engine's arenas as reserved and as its blocks reached them */
        const struct { const char *name; int64_t v; } ar[] = {
            {"arena_size", s->arena_size}, {"arena_extent", s->arena_extent}, {"arena_host_size", s->arena_host_size},
            {"arena_host_extent", s->arena_host_extent}, {"arena_resident", s->arena_resident},
        };
        for (size_t k = 0; k < sizeof ar / sizeof *ar; k++) H5_TRY(h5_attr_i64(g, ar[k].name, ar[k].v, e));
    }
    H5_TRY(h5_attr_str(g, "alloc", s->arena ? "arena" : "pool", e));
    H5_TRY(h5_attr_i64(g, "seed", (int64_t)r->seed, e));
    H5_TRY(h5_attr_str(g, "data", r->data, e));
    H5_TRY(h5_attr_str(g, "backend", r->backend, e));
    /* how it trained: the optimizer's hyperparameters */
    bool adam = !strcmp(r->optimizer, "adam");
    exec_hparams hp = r->hp ? *r->hp : exec_default_hparams(adam ? SCHED_ADAM : SCHED_SGD);
    H5_TRY(h5_attr_f64(g, "lr", hp.lr, e));
    if (adam) {
        H5_TRY(h5_attr_f64(g, "beta1", hp.beta1, e));
        H5_TRY(h5_attr_f64(g, "beta2", hp.beta2, e));
        H5_TRY(h5_attr_f64(g, "eps", hp.eps, e));
    } else {
        H5_TRY(h5_attr_f64(g, "momentum", hp.momentum, e));
    }
    if (s->compared) {
        H5_TRY(h5_attr_f64(g, "grad_deviation", s->grad_dev, e));
        H5_TRY(h5_attr_f64(g, "loss_deviation", s->loss_dev, e));
        H5_TRY(h5_attr_str(g, "worst_tensor", s->worst, e));
    }
    H5_TRY(h5_dset_bytes(g, "at_peak", s->at_peak, MEM_NCAT, e));
    H5_TRY(h5_dset_bytes(g, "max", s->max, MEM_NCAT, e));
    /* every iteration's, from the run or from the forked run's summary (else only what it kept) */
    const float *loss = m ? m->loss : s->loss ? s->loss : &s->loss0;
    const double *us = m ? m->iter_us : s->iter_us ? s->iter_us : &s->best_us;
    hsize_t n_iters = m || s->iter_us ? (hsize_t)s->iters : 1;
    H5_TRY(h5_dset_1d(g, "loss", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, loss, n_iters, e));
    H5_TRY(h5_set_units(g, "loss", "nats", e));
    H5_TRY(h5_dset_1d(g, "iter_us", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, us, n_iters, e));
    H5_TRY(h5_set_units(g, "iter_us", "us", e));
    if (m && m->x.mem.timeline && m->x.mem.n_timeline) H5_TRY(h5_dset_bytes(g, "timeline", m->x.mem.timeline, m->x.mem.n_timeline, e));
    if (m && m->x.layer_us) {
        hsize_t dims[2] = {(hsize_t)n_layers, 2};
        H5_TRY(h5_dset(g, "layer_us", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, m->x.layer_us, 2, dims, e));
        H5_TRY(h5_set_units(g, "layer_us", "us", e));
    }
    if (s->n_encoded) H5_TRY(write_encoded(g, r, e));
    if (s->has_device) H5_TRY(write_device(g, s, e));
    rc = 0;
cleanup:
    if (g >= 0) H5Gclose(g);
    return rc;
}

/* One row of the table `plan_segments`. */
typedef struct {
    const char *mode, *first, *last, *policy;
    int32_t fp, bp;
} segment_row;

/* The plan's structure: family, preset and count as attributes, its segments as a table. */
static int write_plan(hid_t g, const net *n, const plan *p, err *e)
{
    static const h5_field fields[] = {
        {"mode", offsetof(segment_row, mode), 's'},   {"first", offsetof(segment_row, first), 's'},
        {"last", offsetof(segment_row, last), 's'},   {"policy", offsetof(segment_row, policy), 's'},
        {"fp", offsetof(segment_row, fp), 'i'},       {"bp", offsetof(segment_row, bp), 'i'},
    };
    segment_row *rows = err_calloc((size_t)p->n_seg, sizeof *rows);
    for (int i = 0; i < p->n_seg; i++) {
        const plan_seg *q = &p->segs[i];
        bool banded = q->mode == PLAN_ROWS;
        rows[i] = (segment_row){plan_mode_name(q->mode), n->layers[q->first].name, n->layers[q->last].name,
                                banded ? band_policy_name(q->policy) : "", banded ? q->fp : 0, banded ? q->bp : 0};
    }
    int rc = -1;
    H5_TRY(h5_attr_str(g, "plan_family", plan_family(p), e));
    H5_TRY(h5_attr_int(g, "bn_exact", !plan_bn_approximate(p, n), e));
    H5_TRY(h5_attr_str(g, "plan_preset", p->preset, e));
    H5_TRY(h5_attr_int(g, "plan_count", p->preset_count, e));
    H5_TRY(h5_write_table(g, "plan_segments", rows, sizeof *rows, (hsize_t)p->n_seg, fields, 6, e));
    rc = 0;
cleanup:
    free(rows);
    return rc;
}

/* One row of the table `layers`. */
typedef struct {
    const char *name, *kind;
    int32_t c, h, w;      /* output shape per image */
    int64_t params, macs; /* macs per image, forward */
} layer_row;

static int write_layers(hid_t loc, const net *n, err *e)
{
    static const h5_field fields[] = {
        {"name", offsetof(layer_row, name), 's'}, {"kind", offsetof(layer_row, kind), 's'},
        {"c", offsetof(layer_row, c), 'i'},       {"h", offsetof(layer_row, h), 'i'},
        {"w", offsetof(layer_row, w), 'i'},       {"params", offsetof(layer_row, params), 'l'},
        {"macs", offsetof(layer_row, macs), 'l'},
    };
    layer_row *rows = err_calloc((size_t)n->n, sizeof *rows);
    for (int i = 0; i < n->n; i++) {
        const net_layer *l = &n->layers[i];
        rows[i] = (layer_row){l->name, kind_name(l->kind), l->c, l->h, l->w, l->params, l->macs};
    }
    int rc = h5_write_table(loc, "layers", rows, sizeof *rows, (hsize_t)n->n, fields, 7, e);
    free(rows);
    return rc;
}

/* timeline_steps: one row per schedule step, in the timelines' order. */
typedef struct {
    const char *op, *layer;
    int32_t band;
} step_row;

static int write_steps(hid_t g, const h5_run *r, err *e)
{
    static const h5_field fields[] = {{"op", offsetof(step_row, op), 's'}, {"layer", offsetof(step_row, layer), 's'},
                                      {"band", offsetof(step_row, band), 'i'}};
    CHECK(r->steps->n_step == r->n_timeline);
    step_row *rows = err_calloc((size_t)r->n_timeline, sizeof *rows);
    for (int i = 0; i < r->n_timeline; i++) {
        const sched_step *t = &r->steps->steps[i];
        int L = t->layer >= 0 ? t->layer : t->buf >= 0 ? r->steps->bufs[t->buf].layer : -1;
        rows[i] = (step_row){sched_op_name(t->op), L >= 0 ? r->n->layers[L].name : "", t->band};
    }
    int rc = h5_write_table(g, "timeline_steps", rows, sizeof *rows, (hsize_t)r->n_timeline, fields, 3, e);
    free(rows);
    return rc;
}

/* The arena (sim/predict/arena.h) as group prediction/arena. */
static int write_arena(hid_t pred, const sim_arena *a, err *e)
{
    int rc = -1;
    hid_t g = H5I_INVALID_HID;
    H5_CHECK(g = H5Gcreate2(pred, "arena", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    const struct { const char *name; int64_t v; } v[] = {
        {"size", a->size}, {"live", a->live}, {"host_size", a->host_size}, {"host_live", a->host_live}, {"apart", a->apart},
        {"align", ARENA_ALIGN},
    };
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) H5_TRY(h5_attr_i64(g, v[k].name, v[k].v, e));
    H5_TRY(h5_attr_str(g, "order", a->how ? a->how : "", e));
    rc = 0;
cleanup:
    if (g >= 0) H5Gclose(g);
    return rc;
}

/* Everything of run r inside its group g: its configuration as attributes, both predictions, the
 * measurement, the step timeline, the layers and the plan's structure. */
static int write_run(hid_t g, const h5_run *r, err *e)
{
    int rc = -1;
    hid_t pred = H5I_INVALID_HID;
    char resolved[2 * PLAN_TEXT_LEN], net_path[4096];
    const net *n = r->n;
    const plan *p = r->p;
    plan_describe(p, n, resolved, sizeof resolved);
    machine_portable_path(n->path, net_path, sizeof net_path);
    char bn[PLAN_BN_TEXT_LEN];
    int fp = 0, bp = 0; /* of the first row segment */
    for (int i = 0; i < p->n_seg && !fp; i++)
        if (p->segs[i].mode == PLAN_ROWS) fp = p->segs[i].fp, bp = p->segs[i].bp;
    const struct { const char *name, *v; } strs[] = {
        {"kind", r->kind}, {"net", n->name}, {"net_path", net_path}, {"plan", r->plan}, {"plan_resolved", resolved},
        {"optimizer", r->optimizer}, {"bn", plan_bn_text(p, bn, sizeof bn)}, {"device", r->device},
    };
    const struct { const char *name; int v; } ints[] = {
        {"image_h", n->layers[0].h}, {"image_w", n->layers[0].w}, {"batch", r->batch},
        {"fp_bands", fp}, {"bp_bands", bp}, {"n_steps", r->sim->n_steps},
    };
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) H5_TRY(h5_attr_str(g, strs[i].name, strs[i].v, e));
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) H5_TRY(h5_attr_int(g, ints[i].name, ints[i].v, e));
    H5_TRY(h5_attr_f64(g, "flops", r->sim->flops, e));
    H5_TRY(h5_attr_f64(g, "time_us", r->sim->time_us, e));
    if (r->calibration) H5_TRY(h5_attr_str(g, "calibration", r->calibration, e));

    H5_CHECK(pred = H5Gcreate2(g, "prediction", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(write_mem(pred, "replay", &r->sim->replay, e));
    if (r->sim->reserved) { /* torch plans: PyTorch's CUDA caching allocator */
        hid_t rg;
        H5_CHECK(rg = H5Gopen2(pred, "replay", H5P_DEFAULT));
        int rc2 = h5_attr_i64(rg, "reserved", r->sim->reserved, e);
        H5Gclose(rg);
        H5_TRY(rc2);
    }
    if (r->sim->closed_ok) H5_TRY(write_mem(pred, "closed", &r->sim->closed, e)); /* absent: not modelled */
    H5_TRY(write_arena(pred, &r->sim->arena, e));
    if (r->timeline && r->n_timeline > 0) H5_TRY(h5_dset_bytes(g, "timeline", r->timeline, r->n_timeline, e));
    if (r->measured) H5_TRY(write_measured(g, r, e));
    if (r->search) {
        H5_TRY(h5_attr_str(g, "search", r->search, e));
        H5_TRY(h5_attr_i64(g, "budget", r->budget, e));
        H5_TRY(h5_attr_int(g, "max_value", r->max_value, e));
    }
    if (r->steps && r->n_timeline > 0 && (r->timeline || r->timeline_cat)) H5_TRY(write_steps(g, r, e));
    if (r->timeline_cat && r->n_timeline > 0) {
        hsize_t dims[2] = {(hsize_t)r->n_timeline, MEM_NCAT};
        H5_TRY(h5_dset(g, "timeline_by_category", H5T_STD_I64LE, H5T_NATIVE_INT64, r->timeline_cat, 2, dims, e));
        H5_TRY(h5_set_units(g, "timeline_by_category", "bytes", e));
    }
    H5_TRY(write_layers(g, n, e));
    H5_TRY(write_plan(g, n, p, e));
    rc = 0;
cleanup:
    if (pred >= 0) H5Gclose(pred);
    return rc;
}

int h5_write_run(h5_file *f, const h5_run *r, err *e)
{
    CHECK(f && r && r->sim && r->n && r->p);
    int rc = -1;
    hid_t g = H5I_INVALID_HID, runs;
    char name[16];
    if (h5_run_slot(f, &runs, name, e)) return -1;
    H5_CHECK(g = H5Gcreate2(runs, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(write_run(g, r, e));
    h5_run_done(f);
    rc = 0;
cleanup:
    if (g >= 0) H5Gclose(g);
    if (rc < 0) {
        /* No half run: the next one can take the same name. */
        if (g >= 0) H5Ldelete(runs, name, H5P_DEFAULT);
        err_wrap(e, "%s: run %s", h5_path(f), name);
    }
    return rc;
}
