/* export: a result file as TSV tables (h5_export in h5.h; the layout is results/SCHEMA.md).
 *
 * Reads with the HDF5 C API exactly what the tables need, through io/h5read.h, which checks each
 * object's class and shape before reading it, so a foreign or damaged file gives one line naming
 * the object rather than a conversion error. Category names come from the file's own `categories`, not from this
 * build. Numbers round-trip: int64 as %lld, float64 as %.17g. Strings have tabs and newlines
 * replaced by spaces (they are names and plan texts; nothing is lost in practice).
 *
 * Every table is written into a temporary of its own (io/outfile.h); all move to their names only
 * when all are complete, and are removed on any failure, so a failed export leaves no new table
 * behind (nor the directory, when it made it); an existing table is replaced only with --force. Without a directory
 * the runs table is built in memory and goes to stdout only once complete, for the same reason.
 * Not done here: the layers table and the per-category maxima (read them with h5py). */
#include "io/h5read.h"
#include "io/outfile.h"

#include <errno.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    H5_TRY(h5r_i64s(g, where, "timeline", 0, &v, &n, e));
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

/* Whether a run's last iteration was the backend's profiled pass (measured/device's profiled_iter;
 * files before 2026-11-28 have none: their iterations were all watched alike). */
static int profiled_last(hid_t m, const char *mw, bool *out, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    int64_t it = -1;
    htri_t has;
    char dw[640];
    *out = false;
    H5_CHECK(has = H5Lexists(m, "device", H5P_DEFAULT));
    if (!has) return 0;
    snprintf(dw, sizeof dw, "%s/device", mw);
    H5_TRY(h5r_open(m, mw, "device", false, &d, e));
    H5_CHECK(has = H5Aexists(d, "profiled_iter"));
    if (has) H5_TRY(h5r_attr(d, dw, "profiled_iter", H5R_INT, &it, e));
    *out = it >= 0;
    rc = 0;
cleanup:
    if (d >= 0) H5Oclose(d);
    return rc;
}

/* The measured columns of a run (empty where the run has no measured/ group), in the header's
 * order: peak, host_peak, rss_peak, iterations, median and best time of the iterations timed
 * (run_timed; the one kept, in older files), first and last loss, gradient deviation from layer. */
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
    bool pl;
    H5_CHECK(has = H5Lexists(g, "measured", H5P_DEFAULT));
    if (!has) {
        for (int k = 0; k < 9; k++) put_none(fp, sep);
        return 0;
    }
    char mw[600];
    snprintf(mw, sizeof mw, "%s/measured", where);
    H5_TRY(h5r_open(g, where, "measured", false, &m, e));
    int64_t v[3];
    const char *names[3] = {"peak", "host_peak", "rss_peak"};
    for (int k = 0; k < 3; k++) H5_TRY(h5r_attr(m, mw, names[k], H5R_INT, &v[k], e));
    H5_TRY(h5r_f64s(m, mw, "iter_us", &us, &n_us, e));
    H5_TRY(h5r_f64s(m, mw, "loss", &loss, &n_loss, e));
    for (int k = 0; k < 3; k++) put_i64(fp, sep, v[k]);
    put_i64(fp, sep, (int64_t)n_us);
    if (n_us) { /* those timed: after the first iteration, which includes the warm-up, and not a profiled one */
        int from, end;
        H5_TRY(profiled_last(m, mw, &pl, e));
        run_timed((int)n_us, pl, &from, &end);
        double best = us[from];
        for (int i = from; i < end; i++) best = us[i] < best ? us[i] : best;
        put_f64(fp, sep, run_median(us + from, end - from)), put_f64(fp, sep, best);
    } else {
        put_none(fp, sep), put_none(fp, sep);
    }
    if (n_loss) put_f64(fp, sep, loss[0]), put_f64(fp, sep, loss[n_loss - 1]);
    else put_none(fp, sep), put_none(fp, sep);
    H5_CHECK(has = H5Aexists(m, "grad_deviation"));
    double dev = 0;
    if (has) {
        H5_TRY(h5r_attr(m, mw, "grad_deviation", H5R_F64, &dev, e));
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
    H5_TRY(h5r_open(pred, pwhere, "arena", false, &a, e));
    snprintf(where, sizeof where, "%s/arena", pwhere);
    for (int c = 0; c < 3; c++) {
        int64_t v = 0;
        H5_TRY(h5r_attr(a, where, cols[c], H5R_INT, &v, e));
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
    H5_TRY(h5r_attr(g, where, "search", H5R_STR, &search, e));
    H5_TRY(h5r_attr(g, where, "budget", H5R_INT, &budget, e));
    H5_TRY(h5r_attr(g, where, "max_value", H5R_INT, &best, e));
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
    H5_TRY(h5r_open(runs, where, run, false, &g, e));
    snprintf(where, sizeof where, "%s: /runs/%s", path, run);
    for (int c = 0; c < NCOL; c++)
        H5_TRY(h5r_attr(g, where, str_cols[c], is_int[c] ? H5R_INT : H5R_STR, is_int[c] ? (void *)&iv[c] : &s[c], e));
    H5_TRY(h5r_attr(g, where, "flops", H5R_F64, &flops, e));
    H5_TRY(h5r_attr(g, where, "time_us", H5R_F64, &time_us, e));
    H5_TRY(h5r_open(g, where, "prediction", false, &pred, e));
    snprintf(pwhere, sizeof pwhere, "%s/prediction", where);
    for (int k = 0; k < 2; k++) {
        if (k && H5Lexists(pred, models[k], H5P_DEFAULT) <= 0) continue; /* the closed form did not model the plan */
        H5_TRY(h5r_open(pred, pwhere, models[k], false, &m[k], e));
        snprintf(mwhere[k], sizeof mwhere[k], "%s/%s", pwhere, models[k]);
        H5_TRY(h5r_attr(m[k], mwhere[k], "peak", H5R_INT, &peak[k], e));
        H5_TRY(h5r_i64s(m[k], mwhere[k], "at_peak", (hsize_t)ncat, &at[k], &n, e));
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
    H5_TRY(h5r_categories(f, path, &cats, &ncat, e));
    H5_TRY(h5r_open(f, path, "runs", false, &runs, e));
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
