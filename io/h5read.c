/* h5read: see h5read.h. */
#include "io/h5read.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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
int h5r_attr(hid_t loc, const char *where, const char *name, h5r_kind k, void *out, err *e)
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
    if (k == H5R_INT) H5_CHECK(H5Aread(a, H5T_NATIVE_INT64, out));
    else if (k == H5R_F64) H5_CHECK(H5Aread(a, H5T_NATIVE_DOUBLE, out));
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
    return h5r_attr(loc, where, name, H5R_STR, out, e);
}

int h5_read_attr_i64(hid_t loc, const char *where, const char *name, int64_t *out, err *e)
{
    return h5r_attr(loc, where, name, H5R_INT, out, e);
}

/* Opens loc/name, which must exist and be a group (want_dataset false) or a dataset. */
int h5r_open(hid_t loc, const char *where, const char *name, bool want_dataset, hid_t *o, err *e)
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
int h5r_open_vec(hid_t loc, const char *where, const char *name, h5r_kind k, hsize_t want, hid_t *d, hsize_t *n,
                    err *e)
{
    int rc = -1;
    hid_t t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    H5T_class_t cls;
    int rank;
    H5_TRY(h5r_open(loc, where, name, true, d, e));
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
    if (k == H5R_STR) {
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
int h5r_vec(hid_t loc, const char *where, const char *name, h5r_kind k, hsize_t want, void **v, hsize_t *n, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID;
    *v = NULL;
    H5_TRY(h5r_open_vec(loc, where, name, k, want, &d, n, e));
    *v = err_calloc(*n ? *n : 1, 8);
    H5_CHECK(H5Dread(d, k == H5R_INT ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, *v));
    rc = 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    if (rc < 0) {
        free(*v);
        *v = NULL;
    }
    return rc;
}

int h5r_f64s(hid_t loc, const char *where, const char *name, double **v, hsize_t *n, err *e)
{
    return h5r_vec(loc, where, name, H5R_F64, 0, (void **)v, n, e);
}

int h5r_i64s(hid_t loc, const char *where, const char *name, hsize_t want, int64_t **v, hsize_t *n, err *e)
{
    return h5r_vec(loc, where, name, H5R_INT, want, (void **)v, n, e);
}

/* The file's category names (malloc'd array of malloc'd strings). */
int h5r_categories(hid_t f, const char *where, char ***cats, int *ncat, err *e)
{
    int rc = -1;
    hid_t d = H5I_INVALID_HID, mt = H5I_INVALID_HID;
    hsize_t n = 0;
    char **raw = NULL;
    H5_TRY(h5r_open_vec(f, where, "categories", H5R_STR, 0, &d, &n, e));
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
    H5_TRY(h5r_attr(f, path, "schema_version", H5R_INT, &version, e));
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
