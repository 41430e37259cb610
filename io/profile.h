/* profile: a device profile file — what `lrcnn calibrate` measured on one machine, read back as a
 * time model (sim/predict/timing.h) by every command that takes --profile. It is an lrcnn result file
 * (root attributes as every result: commit, date, host, command, cpu, threads) with root
 * attributes kind = "profile" and backend, and two tables (results/SCHEMA.md):
 *   profile/samples  one row per measured step: net, plan, batch, step, key, class, x, work, us
 *                    (the median over the measured iterations);
 *   profile/checks   one row per plan run: the time the fitted model predicts for it against the
 *                    engine's measured median, the share of the prediction from fitted keys, and
 *                    whether the plan was held out of the fit (the check plans) or fitted;
 * and, where the backend measured its algorithm choices (cuda with LRCNN_CUDNN_FIND=1), a third:
 *   profile/algos    one row per call shape: its key, the algorithm chosen, its workspace and time,
 *                    the call in words; attributes format and device (engine/algo_book.h).
 * The file keeps the raw samples, not the fit: the fit is redone on reading, so a better model
 * needs no new measurements. */
#ifndef LRCNN_PROFILE_H
#define LRCNN_PROFILE_H

#include "engine/ops.h"
#include "io/h5.h"
#include "sim/predict/timing.h"

typedef struct {
    const char *net, *plan, *key, *cls;
    int32_t batch, step;
    double x, work, us;
} profile_sample;

typedef struct {
    const char *net, *plan;
    int32_t batch, image;
    int32_t held_out;     /* 1: a check plan, never fitted; 0: a fitting plan (in-sample error) */
    double predicted_us, measured_us, fitted;
} profile_check;

typedef struct {
    const char *backend;
    const profile_sample *samples;
    int n_samples;
    const profile_check *checks;
    int n_checks;
    const algo_book *algos;   /* NULL or empty: no profile/algos table */
} profile_data;

/* Writes d to path (never over an existing file unless force). */
int profile_write(const char *path, bool force, const profile_data *d, err *e);

/* Reads path's samples and fits m from them (timing_free); m->source is path. A file that is not a
 * profile, or whose tables lack a field or have one of the wrong type, is an error (profile/algos's
 * too, as profile_algos_read checks it). */
int profile_read(const char *path, timing_model *m, err *e);

/* Reads path's profile/algos into an empty book b (b->n = 0 where it has none); a key that is not
 * ALGO_KEY_WORDS integers, a negative algorithm or workspace, or a missing attribute is an error. */
int profile_algos_read(const char *path, algo_book *b, err *e);

/* Hands path's algorithm choices to a backend that takes them (ops->algos_take), before it lowers
 * a schedule: a note on stderr says how many it took, or why it took none (not in find mode, another
 * device, another key format). -1 only where the table is malformed. */
int profile_algos_give(const char *path, const ops_table *ops, err *e);

/* A device for --profile: d gets the built-in roofline `base` (for steps the profile never measured),
 * named after path, with m (read from path) as its model. */
int profile_device(const char *path, const sim_device *base, sim_device *d, timing_model *m, err *e);

#endif
