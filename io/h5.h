/* h5: the result file (schema in results/SCHEMA.md). One file per experiment, written to a
 * temporary of its own and moved to its name on h5_close (io/outfile.h), so a crash never leaves a
 * half file; an existing file is never overwritten unless the caller says so. All library calls go through H5_CHECK, which names
 * the call and the place. */
#ifndef LRCNN_H5_H
#define LRCNN_H5_H

#include <hdf5.h>

#include "engine/run.h"
#include "sim/predict/sim.h"
#include "io/outfile.h"

#define H5_SCHEMA_VERSION 2

typedef struct h5_file h5_file;

/* One run (a group "runs/NNNNN"). Strings and arrays are borrowed. Everything about the net and
 * the plan (name, file, input size, resolved segments, BatchNorm mode, band counts, the plan's
 * family and segments) is read from `n` and `p`. */
typedef struct {
    const char *kind;            /* "sim", "train" or "validate" */
    const net *n;                /* at the run's input size */
    const plan *p;               /* as parsed for n */
    const char *plan;            /* the plan as written (without a bn= given apart) */
    int batch;
    const char *optimizer;       /* "sgd" | "adam" */
    const char *device;          /* the time estimate's device profile */
    const char *calibration;     /* the result file that calibrated data-sized encodings, or NULL */
    const sim_result *sim;       /* predictions */
    const int64_t *timeline;     /* device bytes after each schedule step, or NULL */
    const int64_t *timeline_cat; /* [n_timeline][MEM_NCAT] device bytes per category, or NULL */
    int n_timeline;
    const sched *steps;          /* the lowered schedule the timelines follow, or NULL: its steps label
                                    them (timeline_steps: what each step does, to which layer) */
    const run_summary *measured; /* engine runs (measured/), else NULL */
    const exec_hparams *hp;      /* engine runs: the optimizer's hyperparameters (NULL: its defaults) */
    const run *trace;            /* an engine run made in this process: every iteration's loss and time,
                                    its allocator timeline and per-layer times; NULL for a forked run,
                                    whose summary alone came back (iteration 0's loss, the best time) */
    const char *backend;         /* engine runs: the backend's name */
    const char *data;            /* engine runs: "synthetic" or the image directory */
    uint64_t seed;               /* engine runs: weights and data */
    const char *search;          /* capacity runs: "batch" or "image", else NULL */
    int64_t budget;              /* capacity runs: bytes */
    int max_value;               /* capacity runs: the largest batch or image that fits (0: none) */
} h5_run;

/* Opens path for writing. Fails (exit-2 class error) if path exists and !overwrite, or if the
 * directory is not writable. */
int h5_create(h5_file **f, const char *path, bool overwrite, err *e);
/* Root attributes besides the automatic ones (schema_version, git_commit, date, host,
 * hdf5_version, lrcnn_command): e.g. ("spec", path). */
int h5_set_root_attr(h5_file *f, const char *name, const char *value, err *e);
/* Where the next run goes (h5run.h writes it): the group of runs, its name ("00042"); -1 past
 * H5_MAX_RUNS. h5_run_done counts it once written whole. */
int h5_run_slot(h5_file *f, hid_t *runs, char name[16], err *e);
void h5_run_done(h5_file *f);
/* The path the file will have once closed (for messages). */
const char *h5_path(const h5_file *f);
/* The next run is written as runs/<index> (a shard of a sweep names its runs by their place in
 * the whole sweep, so that merged shards equal the whole; lrcnn merge). */
int h5_set_next_run(h5_file *f, long index, err *e);
/* The open file, to add groups of one's own (weights dumps). */
hid_t h5_root(h5_file *f);

/* Small writers shared by h5.c, h5run.c and weights.c: scalar attributes and datasets. */
int h5_attr_int(hid_t obj, const char *name, int v, err *e);
int h5_attr_i64(hid_t obj, const char *name, int64_t v, err *e);
int h5_attr_f64(hid_t obj, const char *name, double v, err *e);
int h5_attr_str(hid_t obj, const char *name, const char *v, err *e);
int h5_dset_1d(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *v, hsize_t n, err *e);
/* Attribute `units` of dataset loc/name: "bytes", "us" (microseconds), "nats" (a loss). */
int h5_set_units(hid_t loc, const char *name, const char *units, err *e);
/* An int64 vector of bytes (peaks by category, timelines), with its units. */
int h5_dset_bytes(hid_t loc, const char *name, const int64_t *v, int n, err *e);
int h5_dset(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *v, int rank, const hsize_t *dims,
            err *e);

/* Tables (1-d compound datasets). A field: its name, offset in the row struct, and type: 's' a
 * variable-length string (char *), 'i' int32, 'l' int64, 'd' float64. h5_write_table writes n rows
 * of `size` bytes as dataset `name` (the row struct's layout, packed in the file). h5_read_table reads
 * dataset d into *rows (malloc'd, *count of them; h5_table_free), after checking that every field
 * exists with its type's class — the file's integer and float widths convert; where names the
 * table in the message. */
typedef struct {
    const char *name;
    size_t off;
    char type;
} h5_field;
int h5_write_table(hid_t loc, const char *name, const void *rows, size_t size, hsize_t n, const h5_field *fields, int nf,
                   err *e);
int h5_read_table(hid_t d, const char *where, const h5_field *fields, int nf, size_t size, void **rows, hsize_t *count,
                  err *e);

/* H5Dread of all of dataset d into buf (bytes long) as mem_type, which holds variable-length
 * strings: they are malloc'd (the caller frees them with free). When the read fails part way,
 * HDF5 1.10 leaves behind the strings it had converted (in buf, or in its own conversion buffer:
 * leaked); here every one is freed and buf zeroed, so a failed read leaves nothing to free. */
herr_t h5_read_vlen(hid_t d, hid_t mem_type, void *buf, size_t bytes);

/* Most bytes any dataset is read into (16 GiB). */
#define H5_MAX_READ (1LL << 34)
/* Whether dataset d (n elements, mem_size bytes each once read) is one to read: -1 with "where:
 * declares ..." in e when it would take more than H5_MAX_READ, or when it is unfiltered and stores
 * fewer bytes than its elements need (a header declaring 2^40 of them), decided before allocating. */
int h5_check_extent(hid_t d, int64_t n, size_t mem_size, const char *where, err *e);
void h5_table_free(void *rows, hsize_t n, size_t size, const h5_field *fields, int nf);

/* A configuration a sweep could not run (too large for this machine, a plan its batch cannot
 * take, an engine failure), recorded in the table /infeasible instead of its runs: runs
 * first_run .. first_run + runs - 1 of the sweep stay unused. Rows read back (h5_read_table with
 * h5_infeasible_fields) are freed with h5_table_free. */
typedef struct {
    int first_run, runs;
    char *net;
    int image_h, image_w, batch;
    char *optimizer, *plan, *reason;
} infeasible_row;
extern const h5_field h5_infeasible_fields[];
#define H5_INFEASIBLE_NFIELDS 9
int h5_write_infeasible(h5_file *f, const infeasible_row *rows, int n, err *e);

/* Closes and renames into place. */
int h5_close(h5_file *f, err *e);
/* Closes and deletes the temporary file (error paths). */
void h5_abort(h5_file *f);

/* The command line that produced the file, stored as root attribute lrcnn_command. */
void h5_set_command(int argc, char **argv);
/* That line ("" before h5_set_command), and the time now as the root attribute date has it. */
const char *h5_command(void);
void h5_date_now(char *out, size_t len);

/* Opens an lrcnn result file for reading (it exists, is HDF5, has a schema_version this lrcnn
 * reads); the caller closes *f with H5Fclose. */
int h5_open_result(const char *path, hid_t *f, err *e);

/* Scalar string attribute `name` of loc into *out (malloc'd); a missing or non-string one is an
 * error naming `where`. */
int h5_read_attr_str(hid_t loc, const char *where, const char *name, char **out, err *e);
/* The same for an integer attribute (any width). */
int h5_read_attr_i64(hid_t loc, const char *where, const char *name, int64_t *out, err *e);

/* Writes one TSV per table to out_dir (or stdout when out_dir is NULL: the runs table only):
 * runs.tsv (one row per run: kind and configuration, both predictions by category, flops, time,
 * what the engine measured — peaks, RSS, iterations, median and best time, first and last loss,
 * gradient deviation — and a capacity search's budget and answer; empty cells where a run has
 * none) and timeline_NNNNN.tsv (step, bytes). With csv: comma-separated .csv tables, quoted as
 * RFC 4180 has it. Fails on a file that is not an lrcnn result. out_dir is
 * created if missing (not its parents; removed again if the export fails); every table goes to a
 * temporary of its own first (io/outfile.h) and all move to their names only once all are
 * written, never over an existing table without overwrite. log (or NULL) gets one line per table. */
int h5_export(const char *path, const char *out_dir, bool overwrite, bool csv, FILE *log, err *e);

/* For h5.c and export.c: H5_CHECK(call) treats a negative result as failure, sets the err `e` in
 * scope to "<statement> failed in <function> at <file>:<line>: <HDF5's message>" and jumps to the
 * label `cleanup`. h5_fail formats that message and returns -1. H5_TRY(call) is for the files' own
 * helpers, which set `e` themselves: on a negative result it only jumps to `cleanup`. */
int h5_fail(err *e, const char *stmt, const char *func, const char *file, int line);
/* What every reader asks of a number it takes from a file: finite and within [lo, hi]. 0, or -1 with e
 * saying "WHERE: row R: FIELD V is not a finite number in [lo, hi]" (row < 0: no row). */
int h5_num(double v, double lo, double hi, const char *where, long long row, const char *field, err *e);

/* Result files are built in memory (HDF5's core driver without a backing store: HDF5 never writes
 * the disk, so a full disk cannot fail one of its calls half-way, where HDF5 1.10 can crash, nor
 * leave a half-closed file whose buffer no one frees): a file access property list for that
 * (H5Pclose it). h5_save writes the file's image into o's temporary (its blocks reserved first, so a
 * full disk is one clean error before any byte moves) and closes the file, once, whatever happens:
 * 0, or -1 with e naming o's final path. The caller commits or aborts o. */
hid_t h5_memory_fapl(err *e);
int h5_save(hid_t file, const outfile *o, err *e);
/* Switches off HDF5's own printing of its error stack (once per process), so that a failure is
 * reported once, through H5_CHECK's err, with HDF5's message. Every entry point calls it. */
void h5_quiet(void);
#define H5_CHECK(call)                                              \
    do {                                                            \
        if ((call) < 0) {                                           \
            h5_fail(e, #call, __func__, __FILE__, __LINE__);        \
            goto cleanup;                                           \
        }                                                           \
    } while (0)
#define H5_TRY(call)                                                \
    do {                                                            \
        if ((call) < 0) goto cleanup;                               \
    } while (0)

#endif
