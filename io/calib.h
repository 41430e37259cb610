/* calib: a calibration of the data-sized encodings (sim/plan/enc.h) read from result files. Every engine
 * run of a plan with encodings writes its encoded maps to measured/encoded (results/SCHEMA.md),
 * with the density or ratio each measured; `--calibrate FILE` gives those, per layer, to the
 * simulator in place of the modifiers' stated ones. Any run of the same net serves: another batch,
 * input size or plan (a layer's density is a property of its values, not of how they are cut). */
#ifndef LRCNN_CALIB_H
#define LRCNN_CALIB_H

#include "io/h5.h"

/* Reads every run's measured/encoded table in path into c (enc_calib_free). A file with none, or
 * one that is not an lrcnn result, is an error. */
int calib_read(const char *path, enc_calib *c, err *e);

#endif
