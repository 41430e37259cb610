/* calib: see calib.h. */
#include "io/calib.h"

#include <stdlib.h>
#include <string.h>

/* One row of measured/encoded as read back: the fields a calibration needs. */
typedef struct {
    char *layer, *encoding;
    int64_t values;
    double acc, factor;
} calib_row;

static const struct {
    const char *name;
    size_t off;
    H5T_class_t cls;
} row_fields[] = {
    {"layer", offsetof(calib_row, layer), H5T_STRING},      {"encoding", offsetof(calib_row, encoding), H5T_STRING},
    {"values", offsetof(calib_row, values), H5T_INTEGER},   {"acc", offsetof(calib_row, acc), H5T_FLOAT},
    {"factor_measured", offsetof(calib_row, factor), H5T_FLOAT},
};
enum { N_FIELDS = sizeof row_fields / sizeof *row_fields };

/* Adds the rows of dataset d (run `where`) to c, after checking it has the fields, typed. */
static int read_table(hid_t d, const char *where, enc_calib *c, err *e)
{
    int rc = -1;
    hid_t ft = H5I_INVALID_HID, mt = H5I_INVALID_HID, str = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    calib_row *rows = NULL;
    hssize_t n = 0;
    H5_CHECK(ft = H5Dget_type(d));
    H5_CHECK(sp = H5Dget_space(d));
    H5_CHECK(n = H5Sget_simple_extent_npoints(sp));
    if (H5Tget_class(ft) != H5T_COMPOUND || H5Sget_simple_extent_ndims(sp) != 1) {
        err_set(e, "%s: not a 1-d table", where);
        goto cleanup;
    }
    H5T_cset_t cset = H5T_CSET_UTF8;
    for (int i = 0; i < N_FIELDS; i++) {
        int k = H5Tget_member_index(ft, row_fields[i].name);
        bool ok = k >= 0 && H5Tget_member_class(ft, (unsigned)k) == row_fields[i].cls;
        if (ok && row_fields[i].cls == H5T_STRING) { /* variable-length, as lrcnn writes them */
            hid_t mt1 = H5Tget_member_type(ft, (unsigned)k);
            ok = mt1 >= 0 && H5Tis_variable_str(mt1) > 0;
            if (ok) cset = H5Tget_cset(mt1);
            if (mt1 >= 0) H5Tclose(mt1);
        }
        if (!ok) {
            err_set(e, "%s: no %s field of the right type (%s)", where, row_fields[i].name,
                    row_fields[i].cls == H5T_STRING ? "variable-length string" : row_fields[i].cls == H5T_INTEGER ? "integer" : "float");
            goto cleanup;
        }
    }
    H5_CHECK(str = H5Tcopy(H5T_C_S1));
    H5_CHECK(H5Tset_size(str, H5T_VARIABLE));
    H5_CHECK(H5Tset_cset(str, cset));
    H5_CHECK(mt = H5Tcreate(H5T_COMPOUND, sizeof(calib_row)));
    for (int i = 0; i < N_FIELDS; i++) {
        H5T_class_t k = row_fields[i].cls;
        hid_t t = k == H5T_STRING ? str : k == H5T_INTEGER ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE;
        H5_CHECK(H5Tinsert(mt, row_fields[i].name, row_fields[i].off, t));
    }
    rows = err_calloc((size_t)n + 1, sizeof *rows);
    H5_CHECK(H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows));
    for (hssize_t i = 0; i < n; i++) {
        enc_kind k = enc_kind_named(rows[i].encoding ? rows[i].encoding : "");
        if (k == ENC_NKIND) {
            err_set(e, "%s: row %lld: unknown encoding '%.40s'", where, (long long)i, rows[i].encoding ? rows[i].encoding : "");
            goto cleanup;
        }
        if (rows[i].layer) enc_calib_add(c, rows[i].layer, k, rows[i].acc, (double)rows[i].values, rows[i].factor);
    }
    rc = 0;
cleanup:
    if (rows) {
        for (hssize_t i = 0; i < n; i++) H5free_memory(rows[i].layer), H5free_memory(rows[i].encoding);
        free(rows);
    }
    if (mt >= 0) H5Tclose(mt);
    if (str >= 0) H5Tclose(str);
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    return rc;
}

int calib_read(const char *path, enc_calib *c, err *e)
{
    int rc = -1;
    hid_t f = H5I_INVALID_HID, runs = H5I_INVALID_HID, d = H5I_INVALID_HID;
    H5G_info_t info;
    htri_t ok;
    memset(c, 0, sizeof *c);
    snprintf(c->source, sizeof c->source, "%s", path);
    if (h5_open_result(path, &f, e)) goto cleanup;
    H5_CHECK(ok = H5Lexists(f, "runs", H5P_DEFAULT));
    if (!ok) {
        err_set(e, "%s: no /runs group", path);
        goto cleanup;
    }
    H5_CHECK(runs = H5Gopen2(f, "runs", H5P_DEFAULT));
    H5_CHECK(H5Gget_info(runs, &info));
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char run[64], where[400];
        ssize_t len;
        H5_CHECK(len = H5Lget_name_by_idx(runs, ".", H5_INDEX_NAME, H5_ITER_INC, i, run, sizeof run, H5P_DEFAULT));
        if ((size_t)len >= sizeof run) continue;
        char measured[80], rel[96];
        snprintf(where, sizeof where, "%s: /runs/%s/measured/encoded", path, run);
        snprintf(measured, sizeof measured, "%s/measured", run);
        snprintf(rel, sizeof rel, "%s/encoded", measured);
        /* runs without engine measurements, or without encoded maps, have nothing to add */
        if (H5Lexists(runs, measured, H5P_DEFAULT) <= 0 || H5Lexists(runs, rel, H5P_DEFAULT) <= 0) continue;
        H5_CHECK(d = H5Dopen2(runs, rel, H5P_DEFAULT));
        H5_TRY(read_table(d, where, c, e));
        H5Dclose(d);
        d = H5I_INVALID_HID;
    }
    if (!c->n) {
        err_set(e, "%s: no measured densities or ratios (a validate or train run of a plan with gist's sparse storage or "
                   "zfp:acc=E writes them)", path);
        goto cleanup;
    }
    rc = 0;
cleanup:
    if (d >= 0) H5Dclose(d);
    if (runs >= 0) H5Gclose(runs);
    if (f >= 0) H5Fclose(f);
    if (rc) enc_calib_free(c);
    return rc;
}
