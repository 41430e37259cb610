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

static const h5_field row_fields[] = {
    {"layer", offsetof(calib_row, layer), 's'}, {"encoding", offsetof(calib_row, encoding), 's'},
    {"values", offsetof(calib_row, values), 'l'}, {"acc", offsetof(calib_row, acc), 'd'},
    {"factor_measured", offsetof(calib_row, factor), 'd'},
};
enum { N_FIELDS = sizeof row_fields / sizeof *row_fields };

/* Adds the rows of dataset d (run `where`) to c, after checking it has the fields, typed. */
static int read_table(hid_t d, const char *where, enc_calib *c, err *e)
{
    void *data;
    hsize_t n;
    if (h5_read_table(d, where, row_fields, N_FIELDS, sizeof(calib_row), &data, &n, e)) return -1;
    const calib_row *rows = data;
    int rc = 0;
    for (hsize_t i = 0; i < n && !rc; i++) {
        enc_kind k = enc_kind_named(rows[i].encoding ? rows[i].encoding : "");
        if (k == ENC_NKIND)
            rc = err_set(e, "%s: row %llu: unknown encoding '%.40s'", where, (unsigned long long)i,
                         rows[i].encoding ? rows[i].encoding : "");
        else if (h5_num((double)rows[i].values, 0, 1e18, where, (long long)i, "values", e) ||
                 h5_num(rows[i].acc, 0, 1, where, (long long)i, "acc", e) ||
                 h5_num(rows[i].factor, 0, 1e6, where, (long long)i, "factor_measured", e))
            rc = -1; /* a density is at most 1; a ratio against fp32 far below a million */
        else if (rows[i].layer)
            enc_calib_add(c, rows[i].layer, k, rows[i].acc, (double)rows[i].values, rows[i].factor);
    }
    h5_table_free(data, n, sizeof(calib_row), row_fields, N_FIELDS);
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
