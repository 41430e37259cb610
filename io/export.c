/* export: a result file as TSV tables (h5_export in h5.h; the layout is results/SCHEMA.md).
 *
 * Reads with the HDF5 C API exactly what the tables need and checks each object's class and
 * shape before reading it, so a foreign or damaged file gives one line naming the object rather
 * than a conversion error. Category names come from the file's own `categories`, not from this
 * build. Numbers round-trip: int64 as %lld, float64 as %.17g. Strings have tabs and newlines
 * replaced by spaces (they are names and plan texts; nothing is lost in practice).
 *
 * Every table is written into a temporary of its own (io/outfile.h); all move to their names only
 * when all are complete, and are removed on any failure, so a failed export leaves no new table
 * behind (nor the directory, when it made it); an existing table is replaced only with --force. Without a directory
 * the runs table is built in memory and goes to stdout only once complete, for the same reason.
 * Not done here: the layers table and the per-category maxima (read them with h5py). */
#include "io/h5.h"
#include "io/outfile.h"

#include <errno.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- typed reads -------------------------------------------------------------------------------- */

typedef enum { RD_INT, RD_F64, RD_STR } rd_kind;
static const H5T_class_t rd_class[] = {H5T_INTEGER, H5T_FLOAT, H5T_STRING};
static const char *rd_what[] = {"an integer", "a float", "a string"};
static const char *rd_noun[] = {"integer", "float", "string"};

/* The string of type t in scalar attribute a (fixed or variable length) into *out (malloc'd). */
static int read_str(hid_t a, hid_t t, char **out, err *e)
{
    int rc = -1;
    hid_t mt = H5I_INVALID_HID;
    char *fixed = NULL;
    htri_t var;
    H5T_cset_t cset;
    H5_CHECK(var = H5Tis_variable_str(t));
    H5_CHECK(cset = H5Tget_cset(t));
    H5_CHECK(mt = H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_cset(mt, cset));
    if (var) {
        char *s = NULL;
        H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
        H5_CHECK(H5Aread(a, mt, &s));
        *out = err_strdup(s ? s : "");
        H5free_memory(s);
    } else {
        size_t n = H5Tget_size(t);
        fixed = err_calloc(n + 1, 1);
        H5_CHECK(H5Tset_size(mt, n + 1));
        H5_CHECK(H5Tset_strpad(mt, H5T_STR_NULLTERM));
        H5_CHECK(H5Aread(a, mt, fixed));
        *out = fixed;
        fixed = NULL;
    }
    rc = 0;
cleanup:
    free(fixed);
    if (mt >= 0) H5Tclose(mt);
    return rc;
}

/* Scalar attribute `name` of loc (described as `where` in messages) into *(int64_t *), *(double *)
 * or *(char **) (malloc'd) by kind. */
static int read_attr(hid_t loc, const char *where, const char *name, rd_kind k, void *out, err *e)
{
    int rc = -1;
    hid_t a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    htri_t exists;
    H5T_class_t cls;
    hssize_t n;
    H5_CHECK(exists = H5Aexists(loc, name));
    if (!exists) {
        err_set(e, "%s: missing attribute %s", where, name);
        goto cleanup;
    }
    H5_CHECK(a = H5Aopen(loc, name, H5P_DEFAULT));
    H5_CHECK(t = H5Aget_type(a));
    H5_CHECK(sp = H5Aget_space(a));
    H5_CHECK(cls = H5Tget_class(t));
    H5_CHECK(n = H5Sget_simple_extent_npoints(sp));
    if (cls != rd_class[k] || n != 1) {
        err_set(e, "%s: attribute %s is not %s scalar", where, name, rd_what[k]);
        goto cleanup;
    }
    if (k == RD_INT) H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, out));
    else if (k == RD_F64) H5_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, out));
    else H5_TRY(read_str(a, t, out, e));
    rc = 0;
cleanup:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

int h5_read_attr_str(hid_t loc, const char *where, const char *name, char **out, err *e)
{
    return read_attr(loc, where, name, RD_STR, out, e);
}

int h5_read_attr_i64(hid_t loc, const char *where, const char *name, int64_t *out, err *e)
{
    return read_attr(loc, where, name, RD_INT, out, e);
}

/* Opens loc/name, which must exist and be a group (want_dataset false) or a dataset. */
static int open_obj(hid_t loc, const char *where, const char *name, bool want_dataset, hid_t *o, err *e)
{
    htri_t exists;
    H5_CHECK(exists = H5Lexists(loc, name, H5P_DEFAULT));
    if (!exists) return err_set(e, "%s/%s: missing", where, name);
    H5_CHECK(*o = H5Oopen(loc, name, H5P_DEFAULT));
    if (H5Iget_type(*o) != (want_dataset ? H5I_DATASET : H5I_GROUP)) {
        H5Oclose(*o);
        *o = H5I_INVALID_HID;
        return err_set(e, "%s/%s: not a %s", where, name, want_dataset ? "dataset" : "group");
    }
    return 0;
cleanup:
    return -1;
}

/* 1-d dataset loc/name of class cls; its length in *n (checked against want when want > 0).
 * Returns the open dataset in *d. */
static int open_vec(hid_t loc, const char *where, const char *name, rd_kind k, hsize_t want, hid_t *d, hsize_t *n,
                    err *e)
{
    int rc = -1;
    hid_t t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    H5T_class_t cls;
    int rank;
    H5_TRY(open_obj(loc, where, name, true, d, e));
    H5_CHECK(t = H5Dget_type(*d));
    H5_CHECK(sp = H5Dget_space(*d));
    H5_CHECK(cls = H5Tget_class(t));
    H5_CHECK(rank = H5Sget_simple_extent_ndims(sp));
    if (rank == 1) H5_CHECK(H5Sget_simple_extent_dims(sp, n, NULL));
    if (cls != rd_class[k] || rank != 1) {
        err_set(e, "%s/%s: not a 1-d dataset of %s values", where, name, rd_noun[k]);
        goto cleanup;
    }
    if (want > 0 && *n != want) {
        err_set(e, "%s/%s: %llu values, expected %llu", where, name, (unsigned long long)*n,
                (unsigned long long)want);
        goto cleanup;
    }
    char at[512];
    snprintf(at, sizeof at, "%s/%s", where, name);
    if (h5_check_extent(*d, (int64_t)*n, 8, at, e)) goto cleanup; /* int64, double or a string pointer each */
    if (k == RD_STR) {
        htri_t var;
        H5_CHECK(var = H5Tis_variable_str(t));
        if (!var) {
            err_set(e, "%s/%s: not variable-length strings", where, name);
            goto cleanup;
        }
    }
    rc = 0;
cleanup:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (rc < 0 && *d >= 0) {
        H5Dclose(*d);
        *d = H5I_INVALID_HID;
    }
    return rc;
}

/* A numeric vector of kind k (integers read as int64, floats as double: 8 bytes a value), of want
 * values or any length when want is 0, malloc'd into *v. */
static int read_vec(hid_t loc, const char *where, const char *name, rd_kind k, hsize_t want, void **v, hsize_t *n, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    *v = NULL;
    H5_TRY(open_vec(loc, where, name, k, want, &d, n, e));
    *v = err_calloc(*n ? *n : 1, 8);
    H5_CHECK(H5Dread(d, k == RD_INT ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, *v));
    rc = 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    if (rc < 0) {
        free(*v);
        *v = NULL;
    }
    return rc;
}

static int read_f64s(hid_t loc, const char *where, const char *name, double **v, hsize_t *n, err *e)
{
    return read_vec(loc, where, name, RD_F64, 0, (void **)v, n, e);
}

static int read_i64s(hid_t loc, const char *where, const char *name, hsize_t want, int64_t **v, hsize_t *n, err *e)
{
    return read_vec(loc, where, name, RD_INT, want, (void **)v, n, e);
}

/* The file's category names (malloc'd array of malloc'd strings). */
static int read_categories(hid_t f, const char *where, char ***cats, int *ncat, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID, mt = H5I_INVALID_HID;
    hsize_t n = 0;
    char **raw = NULL;
    H5_TRY(open_vec(f, where, "categories", RD_STR, 0, &d, &n, e));
    raw = err_calloc(n, sizeof *raw);
    H5_CHECK(mt = H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(mt, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(mt, H5T_CSET_UTF8));
    H5_CHECK(h5_read_vlen(d, mt, raw, n * sizeof *raw));
    *cats = err_calloc(n, sizeof **cats);
    *ncat = (int)n;
    for (hsize_t i = 0; i < n; i++) {
        (*cats)[i] = err_strdup(raw[i] ? raw[i] : "");
        free(raw[i]); /* h5_read_vlen's */
    }
    rc = 0;
cleanup:
    free(raw);
    if (mt >= 0) H5Tclose(mt);
    if (d >= 0) H5Dclose(d);
    return rc;
}

/* --- tables ------------------------------------------------------------------------------------- */

typedef struct {
    outfile out;
    char note[64]; /* for the log: "(3 runs)" */
} table;

typedef struct {
    const char *dir; /* NULL: the runs table goes to stdout, no other table */
    bool overwrite;  /* replace tables that exist (--force) */
    bool csv;        /* comma-separated, RFC 4180 quoting, .csv names; else tab-separated .tsv */
    table *t;
    int n;
} tables;

/* The separator between cells, as the tables are written. */
static char sep_of(const tables *ts) { return ts->csv ? ',' : '\t'; }

/* Opens a temporary for "<dir>/<name>" and records it. */
static FILE *table_open(tables *ts, const char *name, err *e)
{
    size_t dl = strlen(ts->dir), len = dl + strlen(name) + 8;
    const char *sep = dl && ts->dir[dl - 1] == '/' ? "" : "/";
    char *path = err_calloc(len, 1);
    snprintf(path, len, "%s%s%s", ts->dir, sep, name);
    outfile o;
    int fd;
    int rc = outfile_open(&o, path, ts->overwrite, &fd, e);
    free(path);
    if (rc) return NULL;
    ts->t = err_realloc(ts->t, (size_t)(ts->n + 1) * sizeof *ts->t);
    table *t = &ts->t[ts->n++];
    t->out = o, t->note[0] = '\0';
    FILE *fp = fdopen(fd, "w");
    if (!fp) err_set(e, "cannot write %s: %s", o.tmp, strerror(errno)), close(fd);
    return fp;
}

/* Closes fp, reporting a failed write on any earlier fprintf. */
static int table_close(FILE *fp, const char *name, err *e)
{
    int bad = ferror(fp);
    bad |= fclose(fp) != 0;
    if (bad) return err_set(e, "%s: write failed: %s", name, strerror(errno));
    return 0;
}

/* A cell after a separator: TSV has no quoting (tabs and newlines become spaces); CSV quotes a
 * cell holding a comma, quote or line break and doubles its quotes. */
static void put_str(FILE *fp, char sep, const char *s)
{
    fputc(sep, fp);
    bool quote = sep == ',' && strpbrk(s, ",\"\n\r");
    if (quote) fputc('"', fp);
    for (; *s; s++) {
        if (sep == '\t') fputc(*s == '\t' || *s == '\n' || *s == '\r' ? ' ' : *s, fp);
        else if (*s == '"') fputs("\"\"", fp);
        else fputc(*s, fp);
    }
    if (quote) fputc('"', fp);
}

static void put_i64(FILE *fp, char sep, int64_t v) { fprintf(fp, "%c%lld", sep, (long long)v); }
static void put_f64(FILE *fp, char sep, double v) { fprintf(fp, "%c%.17g", sep, v); }
static void put_none(FILE *fp, char sep) { fputc(sep, fp); } /* an empty cell: the run has no such value */

/* timeline_<run>.tsv: step, device bytes after it. */
static int write_timeline(tables *ts, hid_t g, const char *where, const char *run, err *e)
{
    int rc = -1;
    int64_t *v = NULL;
    hsize_t n = 0;
    FILE *fp = NULL;
    char name[64];
    H5_TRY(read_i64s(g, where, "timeline", 0, &v, &n, e));
    snprintf(name, sizeof name, "timeline_%.40s.%s", run, ts->csv ? "csv" : "tsv");
    if (!(fp = table_open(ts, name, e))) goto cleanup;
    fprintf(fp, "step%cbytes\n", sep_of(ts));
    for (hsize_t i = 0; i < n; i++) fprintf(fp, "%llu%c%lld\n", (unsigned long long)i, sep_of(ts), (long long)v[i]);
    snprintf(ts->t[ts->n - 1].note, sizeof ts->t[0].note, "(%llu steps)", (unsigned long long)n);
    rc = table_close(fp, ts->t[ts->n - 1].out.tmp, e);
cleanup:
    free(v);
    return rc;
}

/* The measured columns of a run (empty where the run has no measured/ group), in the header's
 * order: peak, host_peak, rss_peak, iterations, median and best time after the first iteration
 * (the one kept, in older files), first and last loss, gradient deviation from layer. */
#define MEASURED_HEADER \
    "measured_peak_bytes measured_host_peak_bytes measured_rss_peak_bytes measured_iters measured_time_median_us " \
    "measured_time_best_us measured_loss_first measured_loss_last grad_deviation"
static int put_measured(FILE *fp, char sep, hid_t g, const char *where, err *e)
{
    int rc = -1;
    hid_t m = H5I_INVALID_HID;
    double *us = NULL, *loss = NULL;
    hsize_t n_us = 0, n_loss = 0;
    htri_t has;
    H5_CHECK(has = H5Lexists(g, "measured", H5P_DEFAULT));
    if (!has) {
        for (int k = 0; k < 9; k++) put_none(fp, sep);
        return 0;
    }
    char mw[600];
    snprintf(mw, sizeof mw, "%s/measured", where);
    H5_TRY(open_obj(g, where, "measured", false, &m, e));
    int64_t v[3];
    const char *names[3] = {"peak", "host_peak", "rss_peak"};
    for (int k = 0; k < 3; k++) H5_TRY(read_attr(m, mw, names[k], RD_INT, &v[k], e));
    H5_TRY(read_f64s(m, mw, "iter_us", &us, &n_us, e));
    H5_TRY(read_f64s(m, mw, "loss", &loss, &n_loss, e));
    for (int k = 0; k < 3; k++) put_i64(fp, sep, v[k]);
    put_i64(fp, sep, (int64_t)n_us);
    if (n_us) { /* after the first iteration, which includes the warm-up */
        hsize_t from = n_us > 1;
        double best = us[from];
        for (hsize_t i = from; i < n_us; i++) best = us[i] < best ? us[i] : best;
        put_f64(fp, sep, run_median(us + from, (int)(n_us - from))), put_f64(fp, sep, best);
    } else {
        put_none(fp, sep), put_none(fp, sep);
    }
    if (n_loss) put_f64(fp, sep, loss[0]), put_f64(fp, sep, loss[n_loss - 1]);
    else put_none(fp, sep), put_none(fp, sep);
    H5_CHECK(has = H5Aexists(m, "grad_deviation"));
    double dev = 0;
    if (has) {
        H5_TRY(read_attr(m, mw, "grad_deviation", RD_F64, &dev, e));
        put_f64(fp, sep, dev);
    } else {
        put_none(fp, sep);
    }
    rc = 0;
cleanup:
    free(us), free(loss);
    if (m >= 0) H5Oclose(m);
    return rc;
}

/* The arena's columns (arena_size, arena_live, arena_host_size), empty for files written before it. */
static int put_arena(FILE *fp, char sep, hid_t pred, const char *pwhere, err *e)
{
    static const char *cols[] = {"size", "live", "host_size"};
    char where[640];
    hid_t a = H5I_INVALID_HID;
    htri_t has;
    int rc = -1;
    H5_CHECK(has = H5Lexists(pred, "arena", H5P_DEFAULT));
    if (!has) {
        for (int c = 0; c < 3; c++) put_none(fp, sep);
        return 0;
    }
    H5_TRY(open_obj(pred, pwhere, "arena", false, &a, e));
    snprintf(where, sizeof where, "%s/arena", pwhere);
    for (int c = 0; c < 3; c++) {
        int64_t v = 0;
        H5_TRY(read_attr(a, where, cols[c], RD_INT, &v, e));
        put_i64(fp, sep, v);
    }
    rc = 0;
cleanup:
    if (a >= 0) H5Oclose(a);
    return rc;
}

/* A capacity search's columns (search, budget, max_value), empty for other runs. */
static int put_search(FILE *fp, char sep, hid_t g, const char *where, err *e)
{
    char *search = NULL;
    int64_t budget = 0, best = 0;
    htri_t has;
    H5_CHECK(has = H5Aexists(g, "search"));
    if (!has) return put_none(fp, sep), put_none(fp, sep), put_none(fp, sep), 0;
    H5_TRY(read_attr(g, where, "search", RD_STR, &search, e));
    H5_TRY(read_attr(g, where, "budget", RD_INT, &budget, e));
    H5_TRY(read_attr(g, where, "max_value", RD_INT, &best, e));
    put_str(fp, sep, search), put_i64(fp, sep, budget), put_i64(fp, sep, best);
    free(search);
    return 0;
cleanup:
    free(search);
    return -1;
}

/* One row of the runs table (columns as in h5_export's header). */
static int write_run(FILE *fp, tables *ts, hid_t runs, const char *path, const char *run, int ncat, err *e)
{
    static const char *str_cols[] = {"net", "kind", "image_h", "image_w", "batch", "plan", "optimizer", "bn",
                                     "device", "fp_bands", "bp_bands"};
    static const bool is_int[] = {false, false, true, true, true, false, false, false, false, true, true};
    enum { NCOL = sizeof str_cols / sizeof str_cols[0] };
    static const char *models[] = {"replay", "closed"};
    int rc = -1;
    hid_t g = H5I_INVALID_HID, pred = H5I_INVALID_HID, m[2] = {H5I_INVALID_HID, H5I_INVALID_HID};
    char where[512], pwhere[560], mwhere[2][600];
    char *s[NCOL] = {0};
    int64_t iv[NCOL] = {0}, peak[2] = {0};
    int64_t *at[2] = {NULL, NULL};
    double flops = 0, time_us = 0;
    hsize_t n;
    htri_t has_timeline;

    snprintf(where, sizeof where, "%s: /runs", path);
    H5_TRY(open_obj(runs, where, run, false, &g, e));
    snprintf(where, sizeof where, "%s: /runs/%s", path, run);
    for (int c = 0; c < NCOL; c++)
        H5_TRY(read_attr(g, where, str_cols[c], is_int[c] ? RD_INT : RD_STR, is_int[c] ? (void *)&iv[c] : &s[c], e));
    H5_TRY(read_attr(g, where, "flops", RD_F64, &flops, e));
    H5_TRY(read_attr(g, where, "time_us", RD_F64, &time_us, e));
    H5_TRY(open_obj(g, where, "prediction", false, &pred, e));
    snprintf(pwhere, sizeof pwhere, "%s/prediction", where);
    for (int k = 0; k < 2; k++) {
        if (k && H5Lexists(pred, models[k], H5P_DEFAULT) <= 0) continue; /* the closed form did not model the plan */
        H5_TRY(open_obj(pred, pwhere, models[k], false, &m[k], e));
        snprintf(mwhere[k], sizeof mwhere[k], "%s/%s", pwhere, models[k]);
        H5_TRY(read_attr(m[k], mwhere[k], "peak", RD_INT, &peak[k], e));
        H5_TRY(read_i64s(m[k], mwhere[k], "at_peak", (hsize_t)ncat, &at[k], &n, e));
    }
    H5_CHECK(has_timeline = H5Lexists(g, "timeline", H5P_DEFAULT));
    if (has_timeline && ts->dir) H5_TRY(write_timeline(ts, g, where, run, e));

    char sep = sep_of(ts);
    fputs(run, fp);
    for (int c = 0; c < NCOL; c++) {
        if (is_int[c]) put_i64(fp, sep, iv[c]);
        else put_str(fp, sep, s[c]);
    }
    for (int k = 0; k < 2; k++)
        if (at[k]) put_i64(fp, sep, peak[k]);
        else put_none(fp, sep); /* empty: not modelled */
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < ncat; c++)
            if (at[k]) put_i64(fp, sep, at[k][c]);
            else put_none(fp, sep);
    put_f64(fp, sep, flops), put_f64(fp, sep, time_us);
    H5_TRY(put_arena(fp, sep, pred, pwhere, e));
    H5_TRY(put_measured(fp, sep, g, where, e));
    H5_TRY(put_search(fp, sep, g, where, e));
    fputc('\n', fp);
    rc = 0;
cleanup:
    for (int c = 0; c < NCOL; c++) free(s[c]);
    for (int k = 0; k < 2; k++) {
        free(at[k]);
        if (m[k] >= 0) H5Oclose(m[k]);
    }
    if (pred >= 0) H5Oclose(pred);
    if (g >= 0) H5Oclose(g);
    return rc;
}

static int make_dir(const char *dir, bool *made, err *e)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode)) return err_set(e, "%s: not a directory", dir);
        return 0;
    }
    if (mkdir(dir, 0777) != 0) return err_set(e, "cannot create directory %s: %s", dir, strerror(errno));
    *made = true;
    return 0;
}

int h5_open_result(const char *path, hid_t *out, err *e)
{
    hid_t f = H5I_INVALID_HID;
    int64_t version = 0;
    htri_t ok;
    struct stat st;
    if (stat(path, &st) != 0) return err_set(e, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return err_set(e, "%s: is a directory, not a result file", path);
    h5_quiet();
    if (H5Fis_hdf5(path) <= 0) return err_set(e, "%s: not an HDF5 file", path);
    H5_CHECK(f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT));
    H5_CHECK(ok = H5Aexists(f, "schema_version"));
    if (!ok) {
        err_set(e, "%s: not an lrcnn result file (no schema_version)", path);
        goto cleanup;
    }
    H5_TRY(read_attr(f, path, "schema_version", RD_INT, &version, e));
    if (version < 1 || version > H5_SCHEMA_VERSION) {
        err_set(e, "%s: schema_version %lld is not one this lrcnn reads (1..%d)", path, (long long)version,
                H5_SCHEMA_VERSION);
        goto cleanup;
    }
    *out = f;
    return 0;
cleanup:
    if (f >= 0) H5Fclose(f);
    return -1;
}

int h5_export(const char *path, const char *out_dir, bool overwrite, bool csv, FILE *log, err *e)
{
    int rc = -1, ncat = 0;
    hid_t f = H5I_INVALID_HID, runs = H5I_INVALID_HID;
    char **cats = NULL;
    FILE *fp = NULL;
    char *mem = NULL; /* the runs table when it goes to stdout */
    size_t mem_len = 0;
    tables ts = {out_dir, overwrite, csv, NULL, 0};
    char sep = sep_of(&ts);
    bool made_dir = false;
    H5G_info_t info;

    if (h5_open_result(path, &f, e)) return -1;
    H5_TRY(read_categories(f, path, &cats, &ncat, e));
    H5_TRY(open_obj(f, path, "runs", false, &runs, e));
    H5_CHECK(H5Gget_info(runs, &info));

    if (out_dir) {
        H5_TRY(make_dir(out_dir, &made_dir, e));
        if (!(fp = table_open(&ts, csv ? "runs.csv" : "runs.tsv", e))) goto cleanup;
    } else if (!(fp = open_memstream(&mem, &mem_len))) {
        err_set(e, "open_memstream: %s", strerror(errno));
        goto cleanup;
    }
    /* the header: names joined by the separator */
    /* the header: names joined by the separator; a number's unit is its name's suffix (_bytes, _us;
     * none: a count, a ratio or nats), the names plots/load.py gives the same columns */
    const char *head = "run net kind image_h image_w batch plan optimizer bn device fp_bands bp_bands replay_peak_bytes closed_peak_bytes";
    for (const char *c = head; *c; c++) fputc(*c == ' ' ? sep : *c, fp);
    for (int k = 0; k < 2; k++)
        for (int c = 0; c < ncat; c++) fprintf(fp, "%c%s_%s_bytes", sep, k ? "closed" : "replay", cats[c]);
    for (const char *c = " flops time_us arena_size_bytes arena_live_bytes arena_host_size_bytes " MEASURED_HEADER
                         " search budget_bytes max_value"; *c; c++)
        fputc(*c == ' ' ? sep : *c, fp);
    fputc('\n', fp);

    /* Names are five digits, so name order is run order. */
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char run[64];
        ssize_t len;
        H5_CHECK(len = H5Lget_name_by_idx(runs, ".", H5_INDEX_NAME, H5_ITER_INC, i, run, sizeof run, H5P_DEFAULT));
        if ((size_t)len >= sizeof run) {
            err_set(e, "%s: /runs: run name too long", path);
            goto cleanup;
        }
        H5_TRY(write_run(fp, &ts, runs, path, run, ncat, e));
    }
    {
        FILE *done = fp;
        fp = NULL;
        H5_TRY(table_close(done, out_dir ? ts.t[0].out.tmp : "the runs table", e));
    }
    if (out_dir) {
        snprintf(ts.t[0].note, sizeof ts.t[0].note, "(%llu runs)", (unsigned long long)info.nlinks);
    } else if (fwrite(mem, 1, mem_len, stdout) != mem_len || fflush(stdout) != 0) {
        err_set(e, "stdout: write failed: %s", strerror(errno));
        goto cleanup;
    }

    for (int i = 0; i < ts.n; i++) {
        char *final = err_strdup(ts.t[i].out.path);
        int bad = outfile_commit(&ts.t[i].out, e);
        if (!bad && log) fprintf(log, "wrote %s %s\n", final, ts.t[i].note);
        free(final);
        if (bad) goto cleanup;
    }
    if (!out_dir && log) fprintf(log, "wrote the runs table to stdout (%llu runs)\n", (unsigned long long)info.nlinks);
    rc = 0;
cleanup:
    if (fp) fclose(fp);
    free(mem);
    for (int i = 0; i < ts.n; i++) outfile_abort(&ts.t[i].out); /* nothing once committed */
    if (rc < 0 && made_dir) rmdir(out_dir);                      /* only when empty */
    free(ts.t);
    for (int c = 0; c < ncat; c++) free(cats[c]);
    free(cats);
    if (runs >= 0) H5Oclose(runs);
    if (f >= 0) H5Fclose(f);
    return rc;
}
