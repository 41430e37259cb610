/* cli: what every subcommand shares: option scanning, byte sizes in and out, the one-line usage
 * error (exit 2), progress on terminals, and loading a (net, plan, config) triple. */
#ifndef LRCNN_CLI_H
#define LRCNN_CLI_H

#include <stdio.h>

#include "io/h5.h"
#include "io/units.h"
#include "sim/predict/sim.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

/* text and a newline on f, as one printable line: tabs and newlines as spaces, control bytes and
 * invalid UTF-8 (from an input file or argument) as \xNN. Every error line goes through here. */
void cli_put_line(FILE *f, const char *text);
/* Prints "lrcnn CMD: message" on stderr (cli_put_line) and returns CLI_USAGE. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A shared step's outcome: rc other than CLI_OK prints "lrcnn CMD: e->msg" on stderr; returns rc. */
int cli_status(const char *cmd, int rc, const err *e);

/* Matches argv[*i] against "--name VALUE" or "--name=VALUE"; advances *i past the value.
 * Returns 1 on a match (value in *val), 0 if not this option, -1 if the value is missing. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);

int cli_parse_int(const char *s, int lo, int hi, int *out);

/* The options commands share: --net --plan --bn --batch --image --iters --seed --optimizer
 * --host-budget --calibrate --profile --alloc -o --force. Fields start at the command's defaults;
 * NULL/0 where unset. */
typedef struct {
    const char *net, *plan, *bn, *out, *host;
    const char *calibrate;   /* a result file whose measured encodings calibrate the predictions */
    const char *profile;     /* a device profile (lrcnn calibrate) for the time model */
    int batch, iters;
    int image, image_w;      /* --image S (image_w 0: square) or --image HxW (H, W) */
    long long seed;
    bool force;
    sched_optimizer optimizer;
    int64_t host_budget; /* -1: none */
    bool pool;           /* --alloc pool: the engine allocates as the schedule asks (else --alloc arena,
                            the default: one arena at the plan's offsets, engine/exec.h) */
} cli_config;

/* Consumes argv[*i] (and its value) if it is a shared option: returns 1; 0 if it is not one;
 * -1 after printing a usage error for `cmd` (the caller returns CLI_USAGE). */
int cli_common(int argc, char **argv, int *i, const char *cmd, cli_config *c);
/* After the loop: the one-line error for a leftover argument (returns CLI_USAGE). */
int cli_unknown(const char *cmd, int argc, char **argv, int i, int got);
/* Fails (-1, message in e) when plan_text's predicted host bytes exceed budget (-1: no budget), or
 * when what the engine would allocate for it does not fit this machine's memory: device and host
 * bytes together on the CPU backend (ram_device), the host bytes on another. Decided from the
 * replay, before anything is allocated: a configuration too large to run is bad input. */
int cli_check_memory(const sim_result *r, int64_t budget, bool ram_device, const char *plan_text, err *e);

/* One line on stderr, once per process, when plan p approximates BatchNorm (bn=per-band in a row
 * segment holding a bn): the user asked for it, but should know. */
void cli_warn_plan(const plan *p, const net *n);

int cli_parse_optimizer(const char *s, sched_optimizer *o);
const char *cli_optimizer_name(sched_optimizer o);

/* A plan item as the simulator and engine take it: the item, plus " bn=BN" unless the item carries
 * its own bn= (which wins) or bn is NULL or "". */
void cli_plan_text(const char *item, const char *bn, char *buf, size_t len);

/* Parses plan item (with bn as cli_plan_text) for net n, resolving a plan a search names
 * (`ckpt-opt[:B]`, cli_named.c) for cfg's batch and optimizer on device d; p->text stays as written.
 * 0; 1 when a named plan has nothing that fits its budget (e says so; nothing to free); -1 on bad text. */
int cli_plan_parse(plan *p, const net *n, const char *item, const char *bn, const sched_cfg *cfg, const sim_device *d, err *e);
/* Whether item names a plan a search finds (ckpt-opt[:B]). */
bool cli_plan_named(const char *item);
/* Whether item (with bn) is a plan for n, without the search a named plan needs: 0 or -1. */
int cli_plan_check(const net *n, const char *item, const char *bn, err *e);

/* The closed form's bytes of category cat (-1: the peak), and its error in percent against ref
 * bytes, as text: "n/a" where it does not model the plan (sim_result.closed_ok). */
const char *cli_fmt_closed(const sim_result *r, int cat, char *buf, size_t len);
const char *cli_fmt_closed_err(const sim_result *r, int64_t ref, const char *fmt, char *buf, size_t len);

/* Progress "  what k/n, about T left" on stderr; T from the pace since the count began (k = 0, when
 * the caller announces it; else its first call, k = 1). On a terminal the
 * line is rewritten in place and k == n clears it; in a pipe or a file, a line of its own whenever
 * 2 s have passed since the last one (and at k == n when any was printed): slow steps each get
 * theirs, a sweep of thousands of fast ones a few. */
void cli_progress(const char *what, int k, int n);
/* One line on stderr when the load average (1 minute) exceeds this machine's cores: called after
 * anything timed, whose times then include waiting for other processes. */
void cli_warn_load(void);
/* The engine's threads and why, for a header line: "2 threads (the CPUs free ...)". */
const char *cli_threads_text(void);
/* A table's plan column: as wide as the longest of the n plan names, `least` at least. */
int cli_plan_width(const char *const *plans, int n, int least);

/* The calibration --calibrate names (io/calib.h) into c, and c into cfg; nothing (c zeroed, cfg
 * untouched) when path is NULL. */
int cli_load_calib(const char *path, enc_calib *c, sched_cfg *cfg, err *e);
/* The device the time estimates use: built-in `name` (NULL: cpu), with the calibrated model read
 * from `profile` when given (m receives it: timing_free). */
int cli_load_device(const char *name, const char *profile, sim_device *d, timing_model *m, err *e);
/* The built-in device whose roofline times an engine run on `backend` (when no profile says
 * better): a GPU's, the H100's, for cuda; the CPU's otherwise. */
const char *cli_engine_device(const char *backend);
/* What sim, train, validate and plan load from their options: the time model's device (built-in
 * `device`, NULL: cpu, with c->profile's calibrated model), c->calibrate's densities and ratios
 * (into cfg) and the net at c->image. cli_inputs_load frees whatever it loaded when a later part
 * fails; cli_inputs_free after success. */
typedef struct {
    net n;
    sim_device dev;
    timing_model tm;
    enc_calib cal;
} cli_inputs;
int cli_inputs_load(cli_inputs *in, const cli_config *c, const char *device, sched_cfg *cfg, err *e);
void cli_inputs_free(cli_inputs *in);

/* "calibrated on the cpu backend (FILE)" or "cpu roofline (uncalibrated ...)", into buf. */
const char *cli_time_source(const sim_device *d, char *buf, size_t len);
/* Prints plan `text` layer by layer (lrcnn plan --explain: cli/cli_explain.c); -1 (e) if it does not lower. */
int cli_explain(const net *n, const char *text, const sched_cfg *cfg, const sim_device *d, err *e);

/* The arena's gap above its live peak, in percent; and its lines of a breakdown (device, and the
 * host's and the bytes apart when there are any). */
double cli_arena_gap(const sim_arena *a);
void cli_print_arena(const sim_arena *a);

/* One line on what a prediction's data-sized encodings took their densities and ratios from
 * (nothing when it has none). */
void cli_print_calib(const sim_result *r, const sched_cfg *cfg);

/* A measured run's data-sized encodings in one line: the bytes predicted against those stored, and
 * per kind the density or ratio the prediction took against the one measured (both weighted by
 * map size), so the error of that assumption is in plain view; nothing when it has none. */
void cli_print_encoded(const run_summary *m);

/* A net at an input size, h x w (w 0: h x h). h 0 keeps the net file's size. */
int cli_load_net(net *n, const char *name, int h, int w, err *e);
/* An input size: "S" (w = 0: square) or "HxW", each 1..65536; -1 if s is neither. */
int cli_parse_image(const char *s, int *h, int *w);

/* Parses plan_text for n and simulates it. */
int cli_simulate(const net *n, const char *plan_text, const sched_cfg *cfg, const sim_device *d, sim_result *r, err *e);

/* Largest batch (by_image false, at pr->image) or square input (at pr->batch) whose footprint (its
 * arena and the bytes apart from it: what an engine reserves) fits pr->budget; 0 if none. Footprints
 * grow with both, so a doubling search followed by bisection finds it; pr->peak is the footprint
 * there. When nothing fits, pr->least is the smallest footprint it met (at batch 1, or at the smallest
 * input the plan can take: least_at; 0 when no configuration was valid). image 0 = the net file's size. */
typedef struct {
    const char *net_name, *plan_text;
    int image, image_w, batch; /* image_w: the width at a fixed HxW input (0: square); image searches are square */
    sched_cfg cfg;
    int64_t budget;
    int64_t peak;
    int64_t least; /* nothing fits: the smallest footprint tried, at least_at (a batch or an input size) */
    int least_at;
} cli_probe;
int cli_max_fit(cli_probe *pr, bool by_image);

/* The commands, one file each (cli/cli_<name>.c); main.c dispatches on argv[1] and passes the rest,
 * argv[0] being the command's name. Each returns CLI_OK, CLI_FAILED or CLI_USAGE. */
int cli_sim(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_validate(int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_merge(int argc, char **argv);
int cli_reproduce(int argc, char **argv);
int cli_demo(int argc, char **argv);
int cli_import(int argc, char **argv);
int cli_lower(int argc, char **argv);
/* The plans a pipeline stage may run when lrcnn plan --pipeline names none (--candidates default). */
#define PIPE_CANDIDATES "layer,ckpt-sqrt,2ps:4,2ps:8,overl:4,overl:8"
int cli_pipe(int argc, char **argv);
/* The same, its messages naming command `who` (lrcnn plan --pipeline forwards here). */
int cli_pipe_as(const char *who, int argc, char **argv);
int cli_torch_plan(int argc, char **argv);

/* What `lrcnn validate` does for one configuration, shared with specs' run = validate: every plan
 * checked (parsed, predicted, host budget) before anything runs; `layer` first (added if the list
 * lacks it) as the reference; each plan, in a process of its own that opens the backend, measured
 * for `iters` iterations and then its iteration-0 gradients compared with layer's (on a device the
 * prediction is made there too); the tables on stdout unless quiet;
 * the runs written to f (if given) only once all have succeeded. Returns CLI_OK, or CLI_USAGE /
 * CLI_FAILED with e set (the caller prints it). */
typedef struct {
    const net *n;
    char **plans;                 /* as written */
    int n_plans;
    const char *bn;               /* for items without their own bn=; NULL or "": auto */
    sched_cfg cfg;                /* batch and optimizer */
    int iters;
    uint64_t seed;
    int64_t host_budget;          /* -1: none */
    const sim_device *dev;        /* the time predictions' device (NULL: the cpu roofline) */
    const char *backend;          /* NULL: "cpu"; never opened in this process (engine/run.h: run_isolated) */
    bool profile;                 /* let the backend watch the device (CUPTI) */
    bool pool;                    /* --alloc pool (run_cfg.pool) */
    bool quiet;
} cli_validate_job;
int cli_validate_run(const cli_validate_job *j, h5_file *f, err *e);

/* What `lrcnn train` does for one plan, shared with specs' run = train: every input checked before
 * the first iteration, then `iters` iterations on the engine (loss, time and measured peak per
 * iteration, then measured beside predicted by category, on stdout unless quiet); the run written
 * to f if given, the last iteration dumped if asked. Returns CLI_OK, or CLI_USAGE with e set. */
typedef struct {
    const net *n;
    const char *plan;             /* as written */
    const char *bn;               /* NULL or "": the plan's own bn=, else auto */
    sched_cfg cfg;                /* batch and optimizer */
    const ops_table *ops;         /* the backend */
    double lr;                    /* <= 0: the optimizer's default */
    int iters;
    uint64_t seed;                /* weights and data */
    int64_t host_budget;          /* -1: none */
    const char *data_dir;         /* NULL: the synthetic dataset */
    const char *init;             /* weights to load before iteration 0, or NULL */
    const char *dump;             /* the last iteration's dump file (io/weights.h), or NULL */
    bool force;                   /* the dump may replace an existing file */
    const sim_device *dev;        /* the time prediction's device (NULL: the cpu roofline) */
    bool pool;                    /* --alloc pool (run_cfg.pool) */
    bool quiet;
} cli_train_job;
int cli_train_run(const cli_train_job *j, h5_file *f, err *e);

/* An experiment spec into one HDF5 file (out NULL: the spec's own), for sweep, demo and reproduce;
 * cmd names the command in messages. Returns a CLI status. */
int cli_sweep_run(const char *cmd, const char *spec_path, const char *out, bool overwrite, bool quiet);

/* Seconds on the monotonic clock. */
double cli_now(void);

#endif
