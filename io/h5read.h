/* h5read: typed reads of a result file's objects for the readers of results (io/export.c), each
 * checking the object's class and shape before reading it, so that a foreign or damaged file gives
 * one line naming the object rather than a conversion error. h5_open_result (io/h5.h) is here. */
#ifndef LRCNN_H5READ_H
#define LRCNN_H5READ_H

#include <hdf5.h>

#include "io/h5.h"

typedef enum { H5R_INT, H5R_F64, H5R_STR } h5r_kind;

/* Scalar attribute loc/name (where names loc in messages) of kind k into out: an int64_t, a
 * double, or a malloc'd string. */
int h5r_attr(hid_t loc, const char *where, const char *name, h5r_kind k, void *out, err *e);
/* Opens loc/name, which must exist and be a group (want_dataset false) or a dataset. */
int h5r_open(hid_t loc, const char *where, const char *name, bool want_dataset, hid_t *o, err *e);
/* 1-d dataset loc/name of kind k; its length in *n (checked against want when want > 0); the open
 * dataset in *d. */
int h5r_open_vec(hid_t loc, const char *where, const char *name, h5r_kind k, hsize_t want, hid_t *d, hsize_t *n, err *e);
/* The same, read whole into *v (malloc'd). */
int h5r_vec(hid_t loc, const char *where, const char *name, h5r_kind k, hsize_t want, void **v, hsize_t *n, err *e);
int h5r_f64s(hid_t loc, const char *where, const char *name, double **v, hsize_t *n, err *e);
int h5r_i64s(hid_t loc, const char *where, const char *name, hsize_t want, int64_t **v, hsize_t *n, err *e);
/* The file's category names (malloc'd array of malloc'd strings). */
int h5r_categories(hid_t f, const char *where, char ***cats, int *ncat, err *e);

#endif
