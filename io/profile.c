/* profile: see profile.h. */
#include "io/profile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const h5_field sample_fields[] = {
    {"net", offsetof(profile_sample, net), 's'},   {"plan", offsetof(profile_sample, plan), 's'},
    {"batch", offsetof(profile_sample, batch), 'i'}, {"step", offsetof(profile_sample, step), 'i'},
    {"key", offsetof(profile_sample, key), 's'},   {"class", offsetof(profile_sample, cls), 's'},
    {"x", offsetof(profile_sample, x), 'd'},       {"work", offsetof(profile_sample, work), 'd'},
    {"us", offsetof(profile_sample, us), 'd'},
};
enum { N_SAMPLE_FIELDS = sizeof sample_fields / sizeof *sample_fields };

static const h5_field check_fields[] = {
    {"net", offsetof(profile_check, net), 's'},
    {"plan", offsetof(profile_check, plan), 's'},
    {"batch", offsetof(profile_check, batch), 'i'},
    {"image", offsetof(profile_check, image), 'i'},
    {"held_out", offsetof(profile_check, held_out), 'i'},
    {"predicted_us", offsetof(profile_check, predicted_us), 'd'},
    {"measured_us", offsetof(profile_check, measured_us), 'd'},
    {"fitted", offsetof(profile_check, fitted), 'd'},
};
enum { N_CHECK_FIELDS = sizeof check_fields / sizeof *check_fields };

typedef struct { /* fields in the table's order */
    char *key;
    int32_t algo;
    int64_t ws;
    double ms;
    char *call;
} algo_row;

static const h5_field algo_fields[] = {
    {"key", offsetof(algo_row, key), 's'},   {"algo", offsetof(algo_row, algo), 'i'}, {"ws", offsetof(algo_row, ws), 'l'},
    {"ms", offsetof(algo_row, ms), 'd'},     {"call", offsetof(algo_row, call), 's'},
};
enum { N_ALGO_FIELDS = sizeof algo_fields / sizeof *algo_fields };

/* b as the table profile/algos in g, with its format and device as attributes. */
static int write_algos(hid_t g, const algo_book *b, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    algo_row *rows = err_calloc((size_t)b->n + 1, sizeof *rows);
    char (*keys)[ALGO_KEY_WORDS * 21] = err_calloc((size_t)b->n + 1, sizeof *keys);
    for (int i = 0; i < b->n; i++) {
        algo_key_format(b->v[i].key, keys[i], sizeof keys[i]);
        rows[i] = (algo_row){.key = keys[i], .call = (char *)b->v[i].what, .algo = b->v[i].algo, .ws = b->v[i].ws, .ms = b->v[i].ms};
    }
    H5_TRY(h5_write_table(g, "algos", rows, sizeof *rows, (hsize_t)b->n, algo_fields, N_ALGO_FIELDS, e));
    H5_CHECK(d = H5Dopen2(g, "algos", H5P_DEFAULT));
    H5_TRY(h5_attr_str(d, "format", b->format, e));
    H5_TRY(h5_attr_str(d, "device", b->device, e));
    rc = 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    free(rows), free(keys);
    return rc;
}

int profile_write(const char *path, bool force, const profile_data *d, err *e)
{
    h5_file *f;
    hid_t g = H5I_INVALID_HID;
    if (h5_create(&f, path, force, e)) return -1;
    hid_t root = h5_root(f);
    H5_TRY(h5_set_root_attr(f, "kind", "profile", e));
    H5_TRY(h5_set_root_attr(f, "backend", d->backend, e));
    /* cpu and threads: every result file's root has them (io/machine.h) */
    H5_CHECK(g = H5Gcreate2(root, "profile", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(h5_write_table(g, "samples", d->samples, sizeof *d->samples, (hsize_t)d->n_samples, sample_fields,
                          N_SAMPLE_FIELDS, e));
    H5_TRY(h5_write_table(g, "checks", d->checks, sizeof *d->checks, (hsize_t)d->n_checks, check_fields, N_CHECK_FIELDS,
                          e));
    if (d->algos && d->algos->n) H5_TRY(write_algos(g, d->algos, e));
    H5Gclose(g);
    return h5_close(f, e);
cleanup:
    if (g >= 0) H5Gclose(g);
    h5_abort(f);
    return -1;
}

/* The median relative error of the held-out checks in f (0 when it has none). */
static int read_check_error(hid_t f, const char *path, double *out, err *e)
{
    char where[300];
    void *rows = NULL;
    hsize_t n = 0;
    hid_t d = H5I_INVALID_HID;
    int rc = -1;
    *out = 0;
    if (H5Lexists(f, "profile/checks", H5P_DEFAULT) <= 0) return 0;
    snprintf(where, sizeof where, "%s: /profile/checks", path);
    H5_CHECK(d = H5Dopen2(f, "profile/checks", H5P_DEFAULT));
    H5_TRY(h5_read_table(d, where, check_fields, N_CHECK_FIELDS, sizeof(profile_check), &rows, &n, e));
    const profile_check *c = rows;
    double *err_v = err_calloc((size_t)n + 1, sizeof(double));
    int k = 0;
    for (hsize_t i = 0; i < n; i++) {
        if (h5_num(c[i].predicted_us, 0, 1e15, where, (long long)i, "predicted_us", e) ||
            h5_num(c[i].measured_us, 0, 1e15, where, (long long)i, "measured_us", e)) {
            free(err_v);
            goto cleanup;
        }
        if (c[i].held_out && c[i].measured_us > 0) err_v[k++] = fabs(c[i].predicted_us - c[i].measured_us) / c[i].measured_us;
    }
    if (k) *out = run_median(err_v, k);
    free(err_v);
    rc = 0;
cleanup:
    h5_table_free(rows, n, sizeof(profile_check), check_fields, N_CHECK_FIELDS);
    if (d >= 0) H5Dclose(d);
    return rc;
}

static int read_algos(hid_t f, const char *path, algo_book *b, err *e);

int profile_read(const char *path, timing_model *m, err *e)
{
    int rc = -1;
    hid_t f = H5I_INVALID_HID, d = H5I_INVALID_HID;
    char *kind = NULL, *backend = NULL, where[300];
    void *rows = NULL;
    hsize_t n = 0;
    memset(m, 0, sizeof *m);
    if (h5_open_result(path, &f, e)) return -1;
    if (H5Aexists(f, "kind") <= 0 || h5_read_attr_str(f, path, "kind", &kind, e) || strcmp(kind, "profile")) {
        err_set(e, "%s: not a device profile (lrcnn calibrate writes them)", path);
        goto cleanup;
    }
    H5_TRY(h5_read_attr_str(f, path, "backend", &backend, e));
    snprintf(where, sizeof where, "%s: /profile/samples", path);
    if (H5Lexists(f, "profile", H5P_DEFAULT) <= 0 || H5Lexists(f, "profile/samples", H5P_DEFAULT) <= 0) {
        err_set(e, "%s: missing", where);
        goto cleanup;
    }
    H5_CHECK(d = H5Dopen2(f, "profile/samples", H5P_DEFAULT));
    H5_TRY(h5_read_table(d, where, sample_fields, N_SAMPLE_FIELDS, sizeof(profile_sample), &rows, &n, e));
    if (n == 0) {
        err_set(e, "%s: no samples", where);
        goto cleanup;
    }
    timing_sample *v = err_calloc((size_t)n, sizeof *v);
    const profile_sample *ps = rows;
    for (hsize_t i = 0; i < n; i++) {
        if (!ps[i].key || !ps[i].cls) {
            free(v);
            err_set(e, "%s: row %llu: empty key or class", where, (unsigned long long)i);
            goto cleanup;
        }
        if (h5_num(ps[i].us, 0, 1e12, where, (long long)i, "us", e) || h5_num(ps[i].x, 0, 1e12, where, (long long)i, "x", e) ||
            h5_num(ps[i].work, 0, 1e18, where, (long long)i, "work", e)) { /* a step of at most 11 days */
            free(v);
            goto cleanup;
        }
        v[i] = (timing_sample){ps[i].key, ps[i].cls, ps[i].x, ps[i].work, ps[i].us};
    }
    timing_fit(m, v, (int)n);
    free(v);
    H5_TRY(read_check_error(f, path, &m->error, e));
    algo_book b; /* read by the backends that take them (profile_algos_give), checked here for every reader */
    if (read_algos(f, path, &b, e)) goto cleanup;
    algo_book_free(&b);
    snprintf(m->source, sizeof m->source, "%s", path);
    snprintf(m->backend, sizeof m->backend, "%s", backend);
    rc = 0;
cleanup:
    if (rc) timing_free(m); /* fitted before a later part failed (m was zeroed first) */
    h5_table_free(rows, n, sizeof(profile_sample), sample_fields, N_SAMPLE_FIELDS);
    free(kind), free(backend);
    if (d >= 0) H5Dclose(d);
    if (f >= 0) H5Fclose(f);
    return rc;
}

/* Profile file f's (at path) profile/algos into an empty book b, if it has one (profile_algos_read). */
static int read_algos(hid_t f, const char *path, algo_book *b, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    char *format = NULL, *device = NULL, where[300];
    void *rows = NULL;
    hsize_t n = 0;
    memset(b, 0, sizeof *b);
    if (H5Lexists(f, "profile", H5P_DEFAULT) <= 0 || H5Lexists(f, "profile/algos", H5P_DEFAULT) <= 0) return 0;
    snprintf(where, sizeof where, "%s: /profile/algos", path);
    H5_CHECK(d = H5Dopen2(f, "profile/algos", H5P_DEFAULT));
    H5_TRY(h5_read_attr_str(d, where, "format", &format, e));
    H5_TRY(h5_read_attr_str(d, where, "device", &device, e));
    H5_TRY(h5_read_table(d, where, algo_fields, N_ALGO_FIELDS, sizeof(algo_row), &rows, &n, e));
    snprintf(b->format, sizeof b->format, "%s", format), snprintf(b->device, sizeof b->device, "%s", device);
    const algo_row *r = rows;
    for (hsize_t i = 0; i < n; i++) {
        algo_choice c = {.algo = r[i].algo, .ws = r[i].ws, .ms = r[i].ms};
        err why;
        if (!r[i].key || algo_key_parse(r[i].key, c.key, &why)) {
            err_set(e, "%s: row %llu: key: %s", where, (unsigned long long)i, r[i].key ? why.msg : "empty");
            goto cleanup;
        }
        if (c.algo < 0 || c.ws < 0) {
            err_set(e, "%s: row %llu: algorithm %d, workspace %lld: expected both >= 0", where, (unsigned long long)i, c.algo,
                    (long long)c.ws);
            goto cleanup;
        }
        snprintf(c.what, sizeof c.what, "%s", r[i].call ? r[i].call : "");
        algo_book_put(b, &c);
    }
    rc = 0;
cleanup:
    if (rc) algo_book_free(b);
    h5_table_free(rows, n, sizeof(algo_row), algo_fields, N_ALGO_FIELDS);
    free(format), free(device);
    if (d >= 0) H5Dclose(d);
    return rc;
}

int profile_algos_read(const char *path, algo_book *b, err *e)
{
    hid_t f = H5I_INVALID_HID;
    memset(b, 0, sizeof *b);
    if (h5_open_result(path, &f, e)) return -1;
    int rc = read_algos(f, path, b, e);
    H5Fclose(f);
    return rc;
}

int profile_algos_give(const char *path, const ops_table *ops, err *e)
{
    algo_book b;
    if (!ops->algos_take) return 0;
    if (profile_algos_read(path, &b, e)) return -1;
    err why;
    if (b.n && ops->algos_take(&b, &why)) fprintf(stderr, "note: %s: its %d algorithm choices are not used: %s\n", path, b.n, why.msg);
    else if (b.n) fprintf(stderr, "note: %s: %d algorithm choices taken, measured on %s\n", path, b.n, b.device);
    algo_book_free(&b);
    return 0;
}

int profile_device(const char *path, const sim_device *base, sim_device *d, timing_model *m, err *e)
{
    if (profile_read(path, m, e)) return -1;
    *d = *base;
    d->name = m->source;
    d->model = m;
    d->overlap = !strcmp(m->backend, "cuda"); /* the CUDA engine copies on its own stream; the CPU's in line */
    return 0;
}
