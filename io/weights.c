/* weights: see weights.h. A layer's parameter buffer holds PyTorch's tensors back to back, in the
 * order and shapes of kind_tensors (conv/fc: weight then bias; bn: gamma then beta; running: mean
 * then variance), so each dataset is a slice of it with the shape PyTorch would give. */
#include "io/weights.h"

#include <math.h>
#include <string.h>

#include "io/h5.h"
#include "sim/net/kind.h"

static void dims_str(const hsize_t *d, int rank, char *buf, size_t len)
{
    size_t at = (size_t)snprintf(buf, len, "(");
    for (int i = 0; i < rank && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (at < len) snprintf(buf + at, len - at, ")");
}

static buf_kind buffer_of(const kind_tensor *t) { return t->running ? BUF_RUNSTAT : BUF_PARAM; }

static void tensor_dims(const kind_tensor *t, hsize_t *d)
{
    for (int i = 0; i < t->rank; i++) d[i] = (hsize_t)t->dims[i];
}

/* Reads dataset `path` of tensor s's shape into dst, checking type and shape. 1: absent (when optional). */
static int read_slice(hid_t f, const char *file, const char *path, const kind_tensor *s, float *dst, bool optional, err *e)
{
    char want[64], got[64];
    hsize_t sdims[4];
    tensor_dims(s, sdims);
    dims_str(sdims, s->rank, want, sizeof want);
    htri_t group = H5Lexists(f, "/params", H5P_DEFAULT);
    if (group <= 0 || H5Lexists(f, path, H5P_DEFAULT) <= 0) {
        if (optional) return 1;
        return err_set(e, "%s: missing dataset %s (float32 %s)", file, path, want);
    }
    int rc = -1;
    hid_t d = H5I_INVALID_HID, t = H5I_INVALID_HID, sp = H5I_INVALID_HID;
    H5_CHECK(d = H5Dopen2(f, path, H5P_DEFAULT));
    H5_CHECK(t = H5Dget_type(d));
    if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 4) {
        err_set(e, "%s: %s is not float32 (class %d, %zu bytes); expected float32 %s", file, path, (int)H5Tget_class(t),
                H5Tget_size(t), want);
        goto cleanup;
    }
    H5_CHECK(sp = H5Dget_space(d));
    hsize_t dims[8];
    int rank = H5Sget_simple_extent_ndims(sp);
    if (rank < 0 || rank > 8) {
        err_set(e, "%s: %s has %d dimensions; the net needs float32 %s", file, path, rank, want);
        goto cleanup;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    dims_str(dims, rank, got, sizeof got);
    if (rank != s->rank || memcmp(dims, sdims, (size_t)rank * sizeof(hsize_t))) {
        err_set(e, "%s: %s has shape %s, the net needs %s", file, path, got, want);
        goto cleanup;
    }
    H5_CHECK(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst));
    int64_t count = 1;
    for (int k = 0; k < rank; k++) count *= (int64_t)dims[k];
    for (int64_t i = 0; i < count; i++)
        if (!isfinite(dst[i])) { /* a weight of inf or NaN trains nothing */
            err_set(e, "%s: %s[%lld] is %g: weights must be finite", file, path, (long long)i, (double)dst[i]);
            goto cleanup;
        }
    rc = 0;
cleanup:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    return rc;
}

int weights_load(exec *x, const char *path, err *e)
{
    exec_start(x);
    h5_quiet();
    FILE *probe = fopen(path, "rb");
    if (!probe) return err_set(e, "%s: cannot open weights file", path);
    fclose(probe);
    if (H5Fis_hdf5(path) <= 0) return err_set(e, "%s: not an HDF5 file", path);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return err_set(e, "%s: cannot open as HDF5", path);
    int rc = 0;
    for (int L = 0; L < x->n->n && !rc; L++) {
        kind_tensor s[KIND_MAX_TENSORS];
        int k = kind_tensors(x->n, L, s);
        for (int i = 0; i < k && !rc; i++) {
            char ds[256];
            snprintf(ds, sizeof ds, "/params/%s/%s", x->n->layers[L].name, s[i].name);
            float *buf = exec_param_copy(x, buffer_of(&s[i]), L, NULL); /* read, patch the slice, write back */
            CHECK(buf);
            int got = read_slice(f, path, ds, &s[i], buf + s[i].offset, s[i].running, e);
            if (got < 0) rc = -1;
            else exec_param_write(x, buffer_of(&s[i]), L, buf);
            free(buf);
        }
    }
    H5Fclose(f);
    return rc;
}

/* Writes group /<group>/<layer>/<slice> from per-layer arrays src[L] (param) and run[L] (running). */
static int write_group(hid_t root, const char *group, const net *n, float *const *src, float *const *run, err *e)
{
    int rc = -1;
    hid_t g = H5I_INVALID_HID, lg = H5I_INVALID_HID;
    H5_CHECK(g = H5Gcreate2(root, group, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    for (int L = 0; L < n->n; L++) {
        kind_tensor s[KIND_MAX_TENSORS];
        int k = kind_tensors(n, L, s);
        if (!k) continue;
        H5_CHECK(lg = H5Gcreate2(g, n->layers[L].name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
        for (int i = 0; i < k; i++) {
            const float *base = s[i].running ? (run ? run[L] : NULL) : src[L];
            hsize_t dims[4];
            tensor_dims(&s[i], dims);
            if (base) H5_TRY(h5_dset(lg, s[i].name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, base + s[i].offset, s[i].rank, dims, e));
        }
        H5Gclose(lg);
        lg = H5I_INVALID_HID;
    }
    rc = 0;
cleanup:
    if (lg >= 0) H5Gclose(lg);
    if (g >= 0) H5Gclose(g);
    return rc;
}

int weights_dump(const exec *x, const char *path, bool overwrite, const weights_dump_args *d, err *e)
{
    h5_file *f;
    if (h5_create(&f, path, overwrite, e)) return -1;
    const net *n = x->n;
    hid_t root = h5_root(f);
    float **after = err_calloc((size_t)n->n, sizeof(float *)), **run_after = err_calloc((size_t)n->n, sizeof(float *));
    for (int L = 0; L < n->n; L++) {
        after[L] = exec_param_copy(x, BUF_PARAM, L, NULL);
        run_after[L] = exec_param_copy(x, BUF_RUNSTAT, L, NULL);
    }
    const net_layer *in = &n->layers[0], *loss = &n->layers[n->n - 1];
    hsize_t idims[4] = {(hsize_t)x->s->batch, (hsize_t)in->c, (hsize_t)in->h, (hsize_t)in->w};
    hsize_t ldims[3] = {(hsize_t)x->s->batch, (hsize_t)loss->h, (hsize_t)loss->w}; /* (N), or (N, H, W) per pixel */
    int rc = -1;
    H5_TRY(h5_attr_str(root, "net", n->name, e));
    H5_TRY(h5_attr_str(root, "plan", d->plan, e));
    H5_TRY(h5_attr_str(root, "bn", d->bn, e));
    H5_TRY(h5_attr_str(root, "optimizer", d->optimizer, e));
    H5_TRY(h5_attr_int(root, "batch", x->s->batch, e));
    H5_TRY(h5_attr_int(root, "iteration", d->iteration, e));
    H5_TRY(h5_attr_i64(root, "seed", d->seed, e));
    H5_TRY(h5_attr_f64(root, "lr", x->hp.lr, e));
    H5_TRY(h5_attr_f64(root, "momentum", x->hp.momentum, e));
    H5_TRY(h5_attr_f64(root, "beta1", x->hp.beta1, e));
    H5_TRY(h5_attr_f64(root, "beta2", x->hp.beta2, e));
    H5_TRY(h5_attr_f64(root, "eps", x->hp.eps, e));
    H5_TRY(h5_attr_f64(root, "loss", x->loss, e));
    H5_TRY(h5_dset(root, "input", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, d->input, 4, idims, e));
    H5_TRY(h5_dset(root, "labels", H5T_STD_I64LE, H5T_NATIVE_INT64, d->labels, net_labels_per_image(n) > 1 ? 3 : 1, ldims, e));
    H5_TRY(write_group(root, "params", n, d->before, d->run_before, e));
    H5_TRY(write_group(root, "grads", n, d->grads, NULL, e));
    H5_TRY(write_group(root, "after", n, after, run_after, e));
    rc = 0;
cleanup:
    for (int L = 0; L < n->n; L++) free(after[L]), free(run_after[L]);
    free(after);
    free(run_after);
    if (rc) {
        h5_abort(f);
        return err_wrap(e, "%s", path);
    }
    return h5_close(f, e);
}
