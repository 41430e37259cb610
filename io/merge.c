/* merge: shards of a sweep into one result file (io/merge.h). */
#include "io/merge.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "io/h5.h"
#include "io/outfile.h"
#include "io/spec.h"

/* The root attributes that say which machine wrote a part: the merged file says "mixed" for those
 * the parts do not agree on. Files from before the optional ones read "unknown". */
enum { M_HOST, M_CPU, M_WAIT, M_HDF5, M_BLAS, N_MACHINE };
static const struct {
    const char *name;
    bool optional;
} machine_attrs[N_MACHINE] = {[M_HOST] = {"host", false},
                              [M_CPU] = {"cpu", true},
                              [M_WAIT] = {"omp_wait_policy", true},
                              [M_HDF5] = {"hdf5_version", false},
                              [M_BLAS] = {"blas", true}};

/* One part as read: its root attributes and where its runs go in the whole sweep. */
typedef struct {
    const char *path;
    hid_t f;
    int shard, n_shards, threads;
    int64_t sweep_runs, dirty, n_runs;
    infeasible_row *infeasible; /* its /infeasible table (configurations it could not run) */
    hsize_t n_infeasible;
    char *digest, *commit, *date, *command;
    char *machine[N_MACHINE]; /* machine_attrs' values */
} part;

static const char *mixed = "mixed: see /shards";

static void part_close(part *p)
{
    h5_table_free(p->infeasible, p->n_infeasible, sizeof *p->infeasible, h5_infeasible_fields, H5_INFEASIBLE_NFIELDS);
    p->infeasible = NULL, p->n_infeasible = 0;
    if (p->f >= 0) H5Fclose(p->f);
    char **s[] = {&p->digest, &p->commit, &p->date, &p->command};
    for (size_t i = 0; i < sizeof s / sizeof *s; i++) free(*s[i]), *s[i] = NULL;
    for (int i = 0; i < N_MACHINE; i++) free(p->machine[i]), p->machine[i] = NULL;
    p->f = H5I_INVALID_HID;
}

/* A string attribute that files from before it existed may lack: "unknown" then. */
static int read_opt_str(hid_t f, const char *where, const char *name, char **out, err *e)
{
    htri_t has;
    H5_CHECK(has = H5Aexists(f, name));
    if (!has) {
        *out = strdup("unknown");
        return 0;
    }
    return h5_read_attr_str(f, where, name, out, e);
cleanup:
    return -1;
}

/* Opens p->path and reads what says which sweep and which shard it is. */
static int part_open(part *p, err *e)
{
    char *shard = NULL;
    int64_t threads = 0;
    htri_t has;
    p->dirty = -1;
    if (h5_open_result(p->path, &p->f, e)) return -1;
    H5_CHECK(has = H5Aexists(p->f, "shard"));
    if (!has) {
        err_set(e, "%s: not a shard of a sweep (no root attribute shard: written without lrcnn sweep --shard)", p->path);
        goto cleanup;
    }
    H5_TRY(h5_read_attr_str(p->f, p->path, "shard", &shard, e));
    char tail;
    if (sscanf(shard, "%d/%d%c", &p->shard, &p->n_shards, &tail) != 2 || p->n_shards < 1 || p->shard < 1 ||
        p->shard > p->n_shards) {
        err_set(e, "%s: root attribute shard = '%s': expected I/N with 1 <= I <= N", p->path, shard);
        goto cleanup;
    }
    H5_TRY(h5_read_attr_i64(p->f, p->path, "sweep_runs", &p->sweep_runs, e));
    if (p->sweep_runs < 1 || p->sweep_runs > SPEC_MAX_RUNS) {
        err_set(e, "%s: root attribute sweep_runs = %lld: expected 1..%d", p->path, (long long)p->sweep_runs, SPEC_MAX_RUNS);
        goto cleanup;
    }
    H5_TRY(h5_read_attr_str(p->f, p->path, "spec_digest", &p->digest, e));
    H5_TRY(h5_read_attr_str(p->f, p->path, "git_commit", &p->commit, e));
    H5_TRY(h5_read_attr_str(p->f, p->path, "date", &p->date, e));
    H5_TRY(h5_read_attr_str(p->f, p->path, "lrcnn_command", &p->command, e));
    for (int i = 0; i < N_MACHINE; i++)
        if (machine_attrs[i].optional) H5_TRY(read_opt_str(p->f, p->path, machine_attrs[i].name, &p->machine[i], e));
        else H5_TRY(h5_read_attr_str(p->f, p->path, machine_attrs[i].name, &p->machine[i], e));
    H5_CHECK(has = H5Aexists(p->f, "git_dirty"));
    if (has) H5_TRY(h5_read_attr_i64(p->f, p->path, "git_dirty", &p->dirty, e));
    H5_CHECK(has = H5Aexists(p->f, "threads"));
    if (has) H5_TRY(h5_read_attr_i64(p->f, p->path, "threads", &threads, e));
    p->threads = threads > 0 && threads < 1 << 20 ? (int)threads : 0;
    free(shard);
    return 0;
cleanup:
    free(shard);
    return -1;
}

/* Marks run k as part `index`'s in owner[] (one per run of the whole sweep), refusing one that
 * another part holds too. */
static int claim(int64_t k, int index, int *owner, const part *parts, err *e)
{
    if (owner[k] >= 0) return err_set(e, "%s and %s both hold run %05lld", parts[owner[k]].path, parts[index].path, (long long)k);
    owner[k] = index;
    return 0;
}

/* Reads p's /infeasible table, if it has one, and claims the runs its rows stand for. */
static int part_infeasible(part *p, int index, int *owner, const part *parts, err *e)
{
    hid_t d = H5I_INVALID_HID;
    htri_t has;
    H5_CHECK(has = H5Lexists(p->f, "infeasible", H5P_DEFAULT));
    if (!has) return 0;
    H5_CHECK(d = H5Dopen2(p->f, "infeasible", H5P_DEFAULT));
    char where[600];
    snprintf(where, sizeof where, "%s: /infeasible", p->path);
    H5_TRY(h5_read_table(d, where, h5_infeasible_fields, H5_INFEASIBLE_NFIELDS, sizeof *p->infeasible,
                         (void **)&p->infeasible, &p->n_infeasible, e));
    H5Dclose(d);
    d = H5I_INVALID_HID;
    for (hsize_t i = 0; i < p->n_infeasible; i++) {
        const infeasible_row *r = &p->infeasible[i];
        if (r->first_run < 0 || r->runs < 1 || r->runs > p->sweep_runs - r->first_run)
            return err_set(e, "%s row %llu: runs %d..%d are not runs of this sweep", where, (unsigned long long)i, r->first_run,
                           r->first_run + r->runs - 1);
        for (int k = 0; k < r->runs; k++)
            if (claim(r->first_run + k, index, owner, parts, e)) return -1;
    }
    return 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    return -1;
}

/* Claims the runs of p, refusing a name that is not a run of this sweep. */
/* Run `name` of part p has what every run has (results/SCHEMA.md): its configuration attributes,
 * its replay prediction, its layers and plan segments; and a measurement where its kind says so.
 * A part whose run lacks any is refused: a merged file must read like a whole sweep's. */
static int run_complete(const part *p, hid_t runs, const char *name, err *e)
{
    static const char *attrs[] = {"kind", "net", "net_path", "image_h", "image_w", "batch", "plan", "plan_resolved", "optimizer",
                                  "bn", "device", "fp_bands", "bp_bands", "n_steps", "flops", "time_us"};
    static const char *members[] = {"prediction", "prediction/replay", "layers", "plan_segments"};
    char path[96];
    for (size_t k = 0; k < sizeof attrs / sizeof *attrs; k++)
        if (H5Aexists_by_name(runs, name, attrs[k], H5P_DEFAULT) <= 0)
            return err_set(e, "%s: /runs/%s has no attribute %s: not a complete run", p->path, name, attrs[k]);
    for (size_t k = 0; k < sizeof members / sizeof *members; k++) {
        snprintf(path, sizeof path, "%s/%s", name, members[k]);
        if (H5Lexists(runs, name, H5P_DEFAULT) <= 0 || H5Lexists(runs, path, H5P_DEFAULT) <= 0)
            return err_set(e, "%s: /runs/%s has no %s: not a complete run", p->path, name, members[k]);
    }
    return 0;
}

static int part_runs(part *p, int index, int *owner, const part *parts, err *e)
{
    hid_t runs = H5I_INVALID_HID;
    H5G_info_t info;
    char name[32];
    H5_CHECK(runs = H5Gopen2(p->f, "runs", H5P_DEFAULT));
    H5_CHECK(H5Gget_info(runs, &info));
    if ((int64_t)info.nlinks > p->sweep_runs) {
        err_set(e, "%s: %llu runs, more than the sweep's %lld", p->path, (unsigned long long)info.nlinks, (long long)p->sweep_runs);
        goto cleanup;
    }
    for (hsize_t i = 0; i < info.nlinks; i++) {
        ssize_t len;
        H5_CHECK(len = H5Lget_name_by_idx(runs, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT));
        char *end;
        long k = strtol(name, &end, 10);
        if (len != 5 || *end || k < 0 || k >= p->sweep_runs) {
            err_set(e, "%s: /runs/%s is not a run of this sweep (00000..%05lld)", p->path, name, (long long)p->sweep_runs - 1);
            goto cleanup;
        }
        H5_TRY(run_complete(p, runs, name, e));
        H5_TRY(claim(k, index, owner, parts, e));
    }
    p->n_runs = (int64_t)info.nlinks;
    H5Gclose(runs);
    return 0;
cleanup:
    if (runs >= 0) H5Gclose(runs);
    return -1;
}

/* Whether parts[k] is of the same sweep as parts[0]; else says how they differ. */
static int same_sweep(const part *a, const part *b, err *e)
{
    if (b->n_shards != a->n_shards)
        return err_set(e, "%s is shard %d/%d, %s is shard %d/%d: parts of different splits", a->path, a->shard, a->n_shards,
                       b->path, b->shard, b->n_shards);
    if (b->shard == a->shard) return err_set(e, "%s and %s are both shard %d/%d", a->path, b->path, a->shard, a->n_shards);
    if (strcmp(a->digest, b->digest) || a->sweep_runs != b->sweep_runs)
        return err_set(e, "%s and %s come from different specs (spec_digest %s, %s)", a->path, b->path, a->digest, b->digest);
    if (strcmp(a->commit, b->commit))
        return err_set(e, "%s and %s come from different commits (%s, %s)", a->path, b->path, a->commit, b->commit);
    if (a->dirty != b->dirty)
        return err_set(e, "%s and %s come from different trees (git_dirty %lld, %lld)", a->path, b->path, (long long)a->dirty,
                       (long long)b->dirty);
    return 0;
}

/* Copies root attribute `name` of the part to the merged file (the shard's own stay behind). */
static herr_t copy_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    (void)info;
    hid_t dst = *(hid_t *)data, a = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID, b = H5I_INVALID_HID;
    herr_t rc = -1;
    void *buf = NULL;
    if (!strcmp(name, "shard") || !strcmp(name, "sweep_runs")) return 0;
    hssize_t n;
    size_t size;
    if ((a = H5Aopen(loc, name, H5P_DEFAULT)) < 0 || (t = H5Aget_type(a)) < 0 || (sp = H5Aget_space(a)) < 0 ||
        (n = H5Sget_simple_extent_npoints(sp)) < 0 || !(size = H5Tget_size(t)))
        goto cleanup;
    buf = calloc((size_t)n + 1, size);
    if (!buf || H5Aread(a, t, buf) < 0) goto cleanup;
    if ((b = H5Acreate2(dst, name, t, sp, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(b, t, buf) >= 0) rc = 0;
    if (H5Tis_variable_str(t) > 0) H5Dvlen_reclaim(t, sp, H5P_DEFAULT, buf);
cleanup:
    free(buf);
    if (b >= 0) H5Aclose(b);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return rc;
}

/* Replaces root attribute name of f by a string. */
static int set_str(hid_t f, const char *name, const char *v, err *e)
{
    htri_t has;
    H5_CHECK(has = H5Aexists(f, name));
    if (has) H5_CHECK(H5Adelete(f, name));
    return h5_attr_str(f, name, v, e);
cleanup:
    return -1;
}

/* The merged file's root: part 1's attributes, the merge's command and date, and "mixed" for a
 * machine attribute the parts do not agree on. */
static int write_root(hid_t out, const part *parts, int n, err *e)
{
    hid_t src = parts[0].f;
    char date[32];
    H5_CHECK(H5Aiterate2(src, H5_INDEX_NAME, H5_ITER_INC, NULL, copy_attr, &out));
    h5_date_now(date, sizeof date);
    H5_TRY(set_str(out, "date", date, e));
    H5_TRY(set_str(out, "lrcnn_command", h5_command(), e));
    bool differ[N_MACHINE] = {0}, threads = false;
    for (int k = 1; k < n; k++) {
        for (int i = 0; i < N_MACHINE; i++) differ[i] |= strcmp(parts[0].machine[i], parts[k].machine[i]) != 0;
        threads |= parts[0].threads != parts[k].threads;
    }
    for (int i = 0; i < N_MACHINE; i++)
        if (differ[i]) H5_TRY(set_str(out, machine_attrs[i].name, mixed, e));
    if (threads) {
        H5_CHECK(H5Adelete(out, "threads"));
        H5_TRY(h5_attr_int(out, "threads", 0, e));
    }
    return 0;
cleanup:
    return -1;
}

/* /shards: one row per part, in shard order. */
typedef struct {
    int shard;
    const char *path;
    int runs;
    const char *host, *cpu;
    int threads;
    const char *date, *command;
} shard_row;

static int write_shards(hid_t out, const part *parts, int n, err *e)
{
    static const h5_field fields[] = {
        {"shard", offsetof(shard_row, shard), 'i'},  {"path", offsetof(shard_row, path), 's'},
        {"runs", offsetof(shard_row, runs), 'i'},    {"host", offsetof(shard_row, host), 's'},
        {"cpu", offsetof(shard_row, cpu), 's'},      {"threads", offsetof(shard_row, threads), 'i'},
        {"date", offsetof(shard_row, date), 's'},    {"command", offsetof(shard_row, command), 's'},
    };
    shard_row *rows = err_calloc((size_t)n, sizeof *rows);
    for (int k = 0; k < n; k++) {
        const part *p = &parts[k];
        rows[p->shard - 1] = (shard_row){p->shard, p->path, (int)p->n_runs, p->machine[M_HOST], p->machine[M_CPU],
                                         p->threads, p->date, p->command};
    }
    int rc = h5_write_table(out, "shards", rows, sizeof *rows, (hsize_t)n, fields, (int)(sizeof fields / sizeof *fields), e);
    free(rows);
    return rc;
}

static int by_first_run(const void *a, const void *b)
{
    const infeasible_row *x = a, *y = b;
    return (x->first_run > y->first_run) - (x->first_run < y->first_run);
}

/* The parts' /infeasible rows as one table, in sweep order (none: no table, as in the whole). */
static int write_infeasible(hid_t out, const part *parts, int n, err *e)
{
    hsize_t total = 0, at = 0;
    for (int k = 0; k < n; k++) total += parts[k].n_infeasible;
    if (!total) return 0;
    infeasible_row *rows = err_calloc((size_t)total, sizeof *rows);
    for (int k = 0; k < n; k++, at += parts[k - 1].n_infeasible)
        if (parts[k].n_infeasible) memcpy(rows + at, parts[k].infeasible, (size_t)parts[k].n_infeasible * sizeof *rows);
    qsort(rows, (size_t)total, sizeof *rows, by_first_run);
    int rc = h5_write_table(out, "infeasible", rows, sizeof *rows, total, h5_infeasible_fields, H5_INFEASIBLE_NFIELDS, e);
    free(rows); /* the strings stay the parts' */
    return rc;
}

/* Every run of every part into out/runs, and part 1's categories. */
static int copy_runs(hid_t out, const part *parts, int n, err *e)
{
    hid_t dst = H5I_INVALID_HID, src = H5I_INVALID_HID;
    int rc = -1;
    char name[32];
    H5_CHECK(H5Ocopy(parts[0].f, "categories", out, "categories", H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(dst = H5Gcreate2(out, "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    for (int k = 0; k < n; k++) {
        H5_CHECK(src = H5Gopen2(parts[k].f, "runs", H5P_DEFAULT));
        for (hsize_t i = 0; i < (hsize_t)parts[k].n_runs; i++) {
            H5_CHECK(H5Lget_name_by_idx(src, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT));
            H5_CHECK(H5Ocopy(src, name, dst, name, H5P_DEFAULT, H5P_DEFAULT));
        }
        H5Gclose(src);
        src = H5I_INVALID_HID;
    }
    rc = 0;
cleanup:
    if (src >= 0) H5Gclose(src);
    if (dst >= 0) H5Gclose(dst);
    return rc;
}

/* Reads and checks every part; owner[k]: the part holding run k. */
static int check_parts(part *parts, int n, int **owner, FILE *log, err *e)
{
    for (int k = 0; k < n; k++)
        if (part_open(&parts[k], e)) return -1;
    if (n != parts[0].n_shards)
        return err_set(e, "%d part%s given, but %s is shard %d/%d: merge needs all %d", n, n == 1 ? "" : "s", parts[0].path,
                       parts[0].shard, parts[0].n_shards, parts[0].n_shards);
    for (int k = 1; k < n; k++)
        for (int j = 0; j < k; j++)
            if (same_sweep(&parts[j], &parts[k], e)) return -1;
    *owner = err_calloc((size_t)parts[0].sweep_runs, sizeof **owner);
    for (int64_t r = 0; r < parts[0].sweep_runs; r++) (*owner)[r] = -1;
    for (int k = 0; k < n; k++)
        if (part_runs(&parts[k], k, *owner, parts, e) || part_infeasible(&parts[k], k, *owner, parts, e)) return -1;
    for (int64_t r = 0; r < parts[0].sweep_runs; r++)
        if ((*owner)[r] < 0) return err_set(e, "no part holds run %05lld of the sweep's %lld (a shard that failed or is incomplete?)", (long long)r, (long long)parts[0].sweep_runs);
    if (parts[0].dirty == 1 && log)
        fprintf(log, "merge: the parts were written from a tree with local changes to %s; merge cannot tell whether the "
                     "changes were the same\n", parts[0].commit);
    return 0;
}

int h5_merge(const char *out, char *const *paths, int n, bool overwrite, FILE *log, err *e)
{
    CHECK(n >= 1);
    h5_quiet();
    int rc = -1, *owner = NULL;
    hid_t f = H5I_INVALID_HID, fapl = H5I_INVALID_HID;
    outfile o = {0};
    part *parts = err_calloc((size_t)n, sizeof *parts);
    for (int k = 0; k < n; k++) parts[k] = (part){.path = paths[k], .f = H5I_INVALID_HID};
    if (check_parts(parts, n, &owner, log, e) || outfile_open(&o, out, overwrite, NULL, e)) goto done;
    H5_CHECK(fapl = h5_memory_fapl(e));
    H5_CHECK(f = H5Fcreate(o.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl));
    H5_TRY(write_root(f, parts, n, e));
    H5_TRY(copy_runs(f, parts, n, e));
    H5_TRY(write_shards(f, parts, n, e));
    H5_TRY(write_infeasible(f, parts, n, e));
    hid_t closing = f;
    f = H5I_INVALID_HID; /* h5_save closes it */
    if (h5_save(closing, &o, e)) goto done;
    rc = outfile_commit(&o, e);
    goto done;
cleanup:
    err_wrap(e, "cannot write %s", out);
done:
    if (f >= 0) H5Fclose(f);
    if (fapl >= 0) H5Pclose(fapl);
    outfile_abort(&o);
    for (int k = 0; k < n; k++) part_close(&parts[k]);
    free(parts);
    free(owner);
    return rc;
}
