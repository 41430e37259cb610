/* h5: the result file writer (h5.h; the layout is results/SCHEMA.md, and tests/check_schema.py
 * checks a file against it).
 *
 * Conventions: scalars are attributes, vectors and tables are datasets. Every string is a
 * variable-length UTF-8 string (scalar attributes, the 1-d `categories` dataset, the `name` and
 * `kind` fields of `layers`), which h5py reads as str. Counts and sizes given as int (image size,
 * batch, bands, steps) are stored as int32; bytes as int64; FLOPs and microseconds as float64.
 * Byte order is little-endian in the file whatever the host.
 *
 * Every HDF5 call goes through H5_CHECK; HDF5's own printing of its error stack is switched off,
 * so a failure is reported once, in the err, with HDF5's message. The file is written into a
 * temporary of its own (io/outfile.h) and moved to its name by h5_close, never over a file that
 * exists without --force; h5_abort and every failure of h5_create remove the temporary.
 * Not done here: reading the file back (export.c). */
#include "io/h5.h"
#include "io/machine.h"
#include "io/outfile.h"
#include "sim/net/kind.h"

#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <stddef.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct h5_file {
    hid_t file, runs;  /* the temporary file and its group "runs" */
    outfile out;
    const char *path;  /* out.path, for messages */
    int n_runs;        /* the next run is "runs/%05d" */
};

#define H5_MAX_RUNS 100000 /* five digits */

static char *command_line; /* h5_set_command; "" until then */

/* --- errors ------------------------------------------------------------------------------------- */

typedef struct {
    int n;
    char top[160];   /* the failed API call's own description */
    char inner[240]; /* the innermost one: usually the actual cause */
} h5_stack;

static herr_t stack_walk(unsigned n, const H5E_error2_t *d, void *data)
{
    h5_stack *s = data;
    const char *desc = d->desc && *d->desc ? d->desc : d->func_name;
    if (n == 0) snprintf(s->top, sizeof s->top, "%s", desc);
    snprintf(s->inner, sizeof s->inner, "%s", desc);
    s->n++;
    return 0;
}

void h5_quiet(void)
{
    static bool done;
    if (done) return;
    /* No cleanup at exit: every file is closed or abandoned (its temporary removed) before, and a
     * file whose close failed (a full disk) is left in a state HDF5's own exit handler crashes on. */
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    done = true;
}

int h5_fail(err *e, const char *stmt, const char *func, const char *file, int line)
{
    h5_stack s = {0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, stack_walk, &s);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    if (s.n == 0) return err_set(e, "%.120s failed in %s at %s:%d", stmt, func, base, line);
    const char *sys = strstr(s.inner, "error message = '"); /* a failed write or read: the system's reason first */
    if (sys) {
        sys += strlen("error message = '");
        int len = (int)strcspn(sys, "'");
        return err_set(e, "%.*s (%.120s failed in %s at %s:%d: %s)", len, sys, stmt, func, base, line, s.top);
    }
    if (s.n == 1 || !strcmp(s.top, s.inner))
        return err_set(e, "%.120s failed in %s at %s:%d: %s", stmt, func, base, line, s.top);
    return err_set(e, "%.120s failed in %s at %s:%d: %s (%s)", stmt, func, base, line, s.top, s.inner);
}

int h5_num(double v, double lo, double hi, const char *where, long long row, const char *field, err *e)
{
    if (isfinite(v) && v >= lo && v <= hi) return 0;
    char at[32] = "";
    if (row >= 0) snprintf(at, sizeof at, " row %lld:", row);
    return err_set(e, "%s:%s %s %.6g is not a finite number in [%g, %g]", where, at, field, v, lo, hi);
}

/* --- files made in memory ---------------------------------------------------------------------- */

hid_t h5_memory_fapl(err *e)
{
    hid_t fapl = H5I_INVALID_HID;
    H5_CHECK(fapl = H5Pcreate(H5P_FILE_ACCESS));
    H5_CHECK(H5Pset_fapl_core(fapl, 1 << 20, 0)); /* grown 1 MiB at a time; never written by HDF5 (h5_save) */
    return fapl;
cleanup:
    if (fapl >= 0) H5Pclose(fapl);
    return H5I_INVALID_HID;
}

static int put_image(void *ctx, void *bytes, size_t size, err *e)
{
    hid_t file = *(hid_t *)ctx;
    ssize_t got = H5Fget_file_image(file, bytes, size);
    if (got < 0) return h5_fail(e, "H5Fget_file_image", __func__, __FILE__, __LINE__);
    if ((size_t)got != size) return err_set(e, "the file's image changed size while copied (%zd of %zu bytes)", got, size);
    return 0;
}

int h5_save(hid_t file, const outfile *o, err *e)
{
    ssize_t size = -1;
    int rc = 0;
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 || (size = H5Fget_file_image(file, NULL, 0)) < 0) {
        h5_fail(e, "writing the file's image", __func__, __FILE__, __LINE__);
        rc = err_wrap(e, "cannot write %s", o->path);
    } else {
        rc = outfile_fill(o, (size_t)size, put_image, &file, e); /* names o->path itself */
    }
    if (H5Fclose(file) < 0 && rc == 0) { /* closed once, whatever it returns; in memory, it frees all it held */
        h5_fail(e, "H5Fclose", __func__, __FILE__, __LINE__);
        rc = err_wrap(e, "cannot write %s", o->path);
    }
    return rc;
}

/* --- small writers ------------------------------------------------------------------------------ */

/* A variable-length UTF-8 string type; the caller closes it. */
static hid_t vlen_str(err *e)
{
    hid_t t = H5I_INVALID_HID;
    H5_CHECK(t = H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(t, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(t, H5T_CSET_UTF8));
    return t;
cleanup:
    if (t >= 0) H5Tclose(t);
    return H5I_INVALID_HID;
}

/* Scalar attribute: file_type as stored, mem_type of *v. */
static int attr_write(hid_t obj, const char *name, hid_t file_type, hid_t mem_type, const void *v, err *e)
{
    int rc = -1;
    hid_t sp = H5I_INVALID_HID, a = H5I_INVALID_HID;
    H5_CHECK(sp = H5Screate(H5S_SCALAR));
    H5_CHECK(a = H5Acreate2(obj, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Awrite(a, mem_type, v));
    rc = 0;
cleanup:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (rc < 0) err_wrap(e, "attribute %s", name);
    return rc;
}

int h5_attr_int(hid_t obj, const char *name, int v, err *e)
{
    int32_t x = v;
    return attr_write(obj, name, H5T_STD_I32LE, H5T_NATIVE_INT32, &x, e);
}

int h5_attr_i64(hid_t obj, const char *name, int64_t v, err *e)
{
    return attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, e);
}

int h5_attr_f64(hid_t obj, const char *name, double v, err *e)
{
    return attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, e);
}

/* NULL is written as "". */
int h5_attr_str(hid_t obj, const char *name, const char *v, err *e)
{
    const char *s = v ? v : "";
    hid_t t = vlen_str(e);
    if (t < 0) return -1;
    int rc = attr_write(obj, name, t, t, &s, e);
    H5Tclose(t);
    return rc;
}

/* 1-d dataset of n values. */
int h5_dset_1d(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *v, hsize_t n, err *e)
{
    return h5_dset(loc, name, file_type, mem_type, v, 1, &n, e);
}

int h5_dset(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *v, int rank, const hsize_t *dims,
            err *e)
{
    int rc = -1;
    hid_t sp = H5I_INVALID_HID, d = H5I_INVALID_HID;
    H5_CHECK(sp = H5Screate_simple(rank, dims, NULL));
    H5_CHECK(d = H5Dcreate2(loc, name, file_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_CHECK(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v));
    rc = 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    if (sp >= 0) H5Sclose(sp);
    if (rc < 0) err_wrap(e, "dataset %s", name);
    return rc;
}

/* Attribute `units` of dataset loc/name: "bytes", "us" (microseconds), "nats" (a loss). */
int h5_set_units(hid_t loc, const char *name, const char *units, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    H5_CHECK(d = H5Dopen2(loc, name, H5P_DEFAULT));
    rc = h5_attr_str(d, "units", units, e);
cleanup:
    if (d >= 0) H5Dclose(d);
    return rc;
}

/* An int64 vector of bytes (every one the writer has: peaks by category, timelines). */
int h5_dset_bytes(hid_t loc, const char *name, const int64_t *v, int n, err *e)
{
    if (h5_dset_1d(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, v, (hsize_t)n, e)) return -1;
    return h5_set_units(loc, name, "bytes", e);
}

/* --- root --------------------------------------------------------------------------------------- */


static int write_root(h5_file *f, err *e)
{
    int rc = -1;
    hid_t t = H5I_INVALID_HID;
    char commit[64], date[32], host[256], version[32], cpu[128];
    unsigned maj = 0, min = 0, rel = 0;
    int dirty;

    machine_git(commit, sizeof commit, &dirty);
    machine_cpu_model(cpu, sizeof cpu);
    h5_date_now(date, sizeof date);
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "unknown");
    host[sizeof host - 1] = '\0';
    H5_CHECK(H5get_libversion(&maj, &min, &rel));
    snprintf(version, sizeof version, "%u.%u.%u", maj, min, rel);

    H5_TRY(h5_attr_int(f->file, "schema_version", H5_SCHEMA_VERSION, e));
    H5_TRY(h5_attr_str(f->file, "git_commit", commit, e));
    H5_TRY(h5_attr_str(f->file, "date", date, e));
    H5_TRY(h5_attr_str(f->file, "host", host, e));
    H5_TRY(h5_attr_str(f->file, "hdf5_version", version, e));
    H5_TRY(h5_attr_str(f->file, "lrcnn_command", h5_command(), e));
    H5_TRY(h5_attr_int(f->file, "git_dirty", dirty, e));
    H5_TRY(h5_attr_str(f->file, "cpu", cpu, e));
    H5_TRY(h5_attr_int(f->file, "threads", machine_threads(), e));
    H5_TRY(h5_attr_str(f->file, "omp_wait_policy", machine_wait_policy(), e));
    H5_TRY(h5_attr_str(f->file, "blas", machine_blas(), e));

    const char *cats[MEM_NCAT];
    for (int c = 0; c < MEM_NCAT; c++) cats[c] = mem_cat_name((mem_cat)c);
    H5_TRY(t = vlen_str(e));
    H5_TRY(h5_dset_1d(f->file, "categories", t, t, cats, MEM_NCAT, e));
    rc = 0;
cleanup:
    if (t >= 0) H5Tclose(t);
    return rc;
}


const char *h5_command(void) { return command_line ? command_line : ""; }

void h5_date_now(char *out, size_t len)
{
    time_t now = time(NULL);
    struct tm utc;
    gmtime_r(&now, &utc);
    strftime(out, len, "%Y-%m-%dT%H:%M:%SZ", &utc);
}

void h5_set_command(int argc, char **argv)
{
    /* Shell-quoted where needed, so the line can be pasted back: ' becomes '\'' (4 bytes). */
    static const char plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=.,/:@%";
    size_t len = 1;
    for (int i = 0; i < argc; i++) len += 4 * strlen(argv[i]) + 3;
    free(command_line);
    command_line = err_calloc(len, 1);
    char *p = command_line;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (i) *p++ = ' ';
        if (*a && strspn(a, plain) == strlen(a)) {
            p += sprintf(p, "%s", a);
            continue;
        }
        *p++ = '\'';
        for (; *a; a++) p += *a == '\'' ? sprintf(p, "'\\''") : sprintf(p, "%c", *a);
        *p++ = '\'';
    }
    *p = '\0';
}

int h5_create(h5_file **out, const char *path, bool overwrite, err *e)
{
    h5_file *f = NULL;
    hid_t fapl = H5I_INVALID_HID;
    outfile o;

    *out = NULL;
    if (outfile_open(&o, path, overwrite, NULL, e)) return -1;
    h5_quiet();
    f = err_calloc(1, sizeof *f);
    f->file = f->runs = H5I_INVALID_HID;
    f->out = o, f->path = o.path;

    /* Strong close: H5Fclose closes whatever is still open, so h5_abort always releases the file. */
    H5_CHECK(fapl = h5_memory_fapl(e));
    H5_CHECK(H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG));
    H5_CHECK(f->file = H5Fcreate(f->out.tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)); /* ours, just made; in memory */
    H5_CHECK(f->runs = H5Gcreate2(f->file, "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5_TRY(write_root(f, e));
    H5Pclose(fapl);
    *out = f;
    return 0;
cleanup:
    if (fapl >= 0) H5Pclose(fapl);
    err_wrap(e, "cannot write %s", f->path);
    h5_abort(f);
    return -1;
}

hid_t h5_root(h5_file *f) { return f->file; }

int h5_set_root_attr(h5_file *f, const char *name, const char *value, err *e)
{
    htri_t exists;
    H5_CHECK(exists = H5Aexists(f->file, name));
    if (exists) return err_set(e, "%s: root attribute %s is already set", f->path, name);
    return h5_attr_str(f->file, name, value, e);
cleanup:
    return -1;
}

/* --- runs --------------------------------------------------------------------------------------- */

int h5_write_table(hid_t loc, const char *name, const void *rows, size_t size, hsize_t n, const h5_field *fields, int nf,
                   err *e)
{
    int rc = -1;
    hid_t s = H5I_INVALID_HID, mt = H5I_INVALID_HID, ft = H5I_INVALID_HID;
    H5_TRY(s = vlen_str(e));
    H5_CHECK(mt = H5Tcreate(H5T_COMPOUND, size));
    for (int i = 0; i < nf; i++) {
        char c = fields[i].type;
        hid_t t = c == 's' ? s : c == 'i' ? H5T_NATIVE_INT32 : c == 'd' ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
        H5_CHECK(H5Tinsert(mt, fields[i].name, fields[i].off, t));
    }
    H5_CHECK(ft = H5Tcopy(mt));
    H5_CHECK(H5Tpack(ft));
    H5_TRY(h5_dset_1d(loc, name, ft, mt, rows, n, e));
    rc = 0;
cleanup:
    if (ft >= 0) H5Tclose(ft);
    if (mt >= 0) H5Tclose(mt);
    if (s >= 0) H5Tclose(s);
    return rc;
}

static const char *field_type_name(char t)
{
    return t == 's' ? "variable-length string" : t == 'd' ? "float" : "integer";
}

int h5_check_extent(hid_t d, int64_t n, size_t mem_size, const char *where, err *e)
{
    hid_t t = H5Dget_type(d), pl = H5Dget_create_plist(d);
    size_t file_size = t >= 0 ? H5Tget_size(t) : 0;
    int filters = pl >= 0 ? H5Pget_nfilters(pl) : 0;
    hsize_t stored = H5Dget_storage_size(d);
    if (t >= 0) H5Tclose(t);
    if (pl >= 0) H5Pclose(pl);
    if (n < 0 || (double)n * (double)mem_size > (double)H5_MAX_READ)
        return err_set(e, "%s: declares %lld elements, more than is read here (at most %lld bytes)", where, (long long)n,
                       (long long)H5_MAX_READ);
    if (!filters && (double)n * (double)file_size > (double)stored)
        return err_set(e, "%s: declares %lld elements of %zu bytes but stores %llu bytes", where, (long long)n, file_size,
                       (unsigned long long)stored);
    return 0;
}

/* The allocations of one variable-length read (h5_read_vlen). */
typedef struct {
    void **p;
    size_t n, cap;
} vlen_track;

static void *vlen_alloc(size_t size, void *info)
{
    vlen_track *t = info;
    void *p = malloc(size ? size : 1);
    if (p && t->n == t->cap) t->p = err_realloc(t->p, (t->cap = t->cap ? 2 * t->cap : 16) * sizeof *t->p);
    if (p) t->p[t->n++] = p;
    return p;
}

static void vlen_free(void *p, void *info)
{
    vlen_track *t = info;
    for (size_t i = t->n; i-- > 0;)
        if (t->p[i] == p) {
            t->p[i] = t->p[--t->n];
            break;
        }
    free(p);
}

herr_t h5_read_vlen(hid_t d, hid_t mem_type, void *buf, size_t bytes)
{
    vlen_track t = {0};
    herr_t rc = -1;
    hid_t x = H5Pcreate(H5P_DATASET_XFER);
    if (x >= 0 && H5Pset_vlen_mem_manager(x, vlen_alloc, &t, vlen_free, &t) >= 0)
        rc = H5Dread(d, mem_type, H5S_ALL, H5S_ALL, x, buf);
    if (rc < 0) { /* the pointers in buf are among t's, or never written */
        for (size_t i = 0; i < t.n; i++) free(t.p[i]);
        memset(buf, 0, bytes);
    }
    free(t.p);
    if (x >= 0) H5Pclose(x);
    return rc;
}

int h5_read_table(hid_t d, const char *where, const h5_field *fields, int nf, size_t size, void **rows, hsize_t *count,
                  err *e)
{
    int rc = -1;
    hid_t ft = H5I_INVALID_HID, mt = H5I_INVALID_HID, str = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    hssize_t n = 0;
    *rows = NULL, *count = 0;
    H5_CHECK(ft = H5Dget_type(d));
    H5_CHECK(sp = H5Dget_space(d));
    H5_CHECK(n = H5Sget_simple_extent_npoints(sp));
    if (H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1) {
        err_set(e, "%s: not a 1-d table", where);
        goto cleanup;
    }
    H5T_cset_t cset = H5T_CSET_UTF8;
    for (int i = 0; i < nf; i++) {
        int k = H5Tget_member_index(ft, fields[i].name);
        H5T_class_t want = fields[i].type == 's' ? H5T_STRING : fields[i].type == 'd' ? H5T_FLOAT : H5T_INTEGER;
        bool ok = k >= 0 && H5Tget_member_class(ft, (unsigned)k) == want;
        if (ok && want == H5T_STRING) { /* variable-length, as lrcnn writes them */
            hid_t mt1 = H5Tget_member_type(ft, (unsigned)k);
            ok = mt1 >= 0 && H5Tis_variable_str(mt1) > 0;
            if (ok) cset = H5Tget_cset(mt1);
            if (mt1 >= 0) H5Tclose(mt1);
        }
        if (!ok) {
            err_set(e, "%s: no %s field of the right type (%s)", where, fields[i].name, field_type_name(fields[i].type));
            goto cleanup;
        }
    }
    H5_CHECK(str = H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(str, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(str, cset));
    H5_CHECK(mt = H5Tcreate(H5T_COMPOUND, size));
    for (int i = 0; i < nf; i++) {
        char c = fields[i].type;
        hid_t t = c == 's' ? str : c == 'i' ? H5T_NATIVE_INT32 : c == 'd' ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
        H5_CHECK(H5Tinsert(mt, fields[i].name, fields[i].off, t));
    }
    if (h5_check_extent(d, n, size, where, e)) goto cleanup;
    *rows = err_calloc((size_t)n + 1, size);
    H5_CHECK(h5_read_vlen(d, mt, *rows, ((size_t)n + 1) * size));
    *count = (hsize_t)n;
    rc = 0;
cleanup:
    if (rc) free(*rows), *rows = NULL;
    if (mt >= 0) H5Tclose(mt);
    if (str >= 0) H5Tclose(str);
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    return rc;
}

void h5_table_free(void *rows, hsize_t n, size_t size, const h5_field *fields, int nf)
{
    if (!rows) return;
    for (hsize_t r = 0; r < n; r++)
        for (int i = 0; i < nf; i++)
            if (fields[i].type == 's') free(*(char **)((char *)rows + r * size + fields[i].off)); /* h5_read_vlen's */
    free(rows);
}

int h5_run_slot(h5_file *f, hid_t *runs, char name[16], err *e)
{
    CHECK(f);
    if (f->n_runs >= H5_MAX_RUNS) return err_set(e, "%s: more than %d runs in one file", f->path, H5_MAX_RUNS);
    snprintf(name, 16, "%05d", f->n_runs);
    *runs = f->runs;
    return 0;
}

void h5_run_done(h5_file *f) { f->n_runs++; }

const char *h5_path(const h5_file *f) { return f->path; }

const h5_field h5_infeasible_fields[H5_INFEASIBLE_NFIELDS] = {
    {"first_run", offsetof(infeasible_row, first_run), 'i'}, {"runs", offsetof(infeasible_row, runs), 'i'},
    {"net", offsetof(infeasible_row, net), 's'},             {"image_h", offsetof(infeasible_row, image_h), 'i'},
    {"image_w", offsetof(infeasible_row, image_w), 'i'},     {"batch", offsetof(infeasible_row, batch), 'i'},
    {"optimizer", offsetof(infeasible_row, optimizer), 's'}, {"plan", offsetof(infeasible_row, plan), 's'},
    {"reason", offsetof(infeasible_row, reason), 's'},
};

int h5_write_infeasible(h5_file *f, const infeasible_row *rows, int n, err *e)
{
    CHECK(f && n > 0);
    return h5_write_table(f->file, "infeasible", rows, sizeof *rows, (hsize_t)n, h5_infeasible_fields, H5_INFEASIBLE_NFIELDS, e);
}

int h5_set_next_run(h5_file *f, long index, err *e)
{
    CHECK(f);
    if (index < 0 || index >= H5_MAX_RUNS) return err_set(e, "%s: run %ld: more than %d runs in one file", f->path, index, H5_MAX_RUNS);
    f->n_runs = (int)index;
    return 0;
}

/* --- closing ------------------------------------------------------------------------------------ */

int h5_close(h5_file *f, err *e)
{
    CHECK(f);
    int rc = -1;
    hid_t runs = f->runs, file = f->file;
    f->runs = f->file = H5I_INVALID_HID; /* each closed once, whatever the call returns (a failed H5Fclose,
                                            e.g. on a full disk, must not be closed again) */
    if (H5Gclose(runs) < 0) {
        h5_fail(e, "closing the file", __func__, __FILE__, __LINE__);
        H5Fclose(file);
        err_wrap(e, "cannot write %s", f->path);
        goto cleanup;
    }
    if (h5_save(file, &f->out, e)) goto cleanup;
    if (outfile_commit(&f->out, e)) goto cleanup;
    free(f);
    return 0;
cleanup:
    h5_abort(f);
    return rc;
}

void h5_abort(h5_file *f)
{
    if (!f) return;
    if (f->runs >= 0) H5Gclose(f->runs);
    if (f->file >= 0) H5Fclose(f->file);
    outfile_abort(&f->out);
    free(f);
}
