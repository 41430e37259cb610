/* cli: what every subcommand shares: option scanning, byte sizes in and out, the one-line usage
 * error (exit 2), progress on terminals, and loading a (net, plan, config) triple. */
#ifndef LRCNN_CLI_H
#define LRCNN_CLI_H

#include "io/units.h"
#include "sim/sim.h"

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

/* Prints "lrcnn CMD: message" on stderr and returns CLI_USAGE. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Matches argv[*i] against "--name VALUE" or "--name=VALUE"; advances *i past the value.
 * Returns 1 on a match (value in *val), 0 if not this option, -1 if the value is missing. */
int cli_opt(int argc, char **argv, int *i, const char *name, const char **val);

int cli_parse_int(const char *s, int lo, int hi, int *out);

/* The options commands share: --net --plan --bn --batch --image --iters --seed --optimizer
 * --host-budget -o --force. Fields start at the command's defaults; NULL/0 where unset. */
typedef struct {
    const char *net, *plan, *bn, *out, *host;
    int batch, image, iters;
    long long seed;
    bool force;
    sched_optimizer optimizer;
    int64_t host_budget; /* -1: none */
} cli_config;

/* Consumes argv[*i] (and its value) if it is a shared option: returns 1; 0 if it is not one;
 * -1 after printing a usage error for `cmd` (the caller returns CLI_USAGE). */
int cli_common(int argc, char **argv, int *i, const char *cmd, cli_config *c);
/* After the loop: the one-line error for a leftover argument (returns CLI_USAGE). */
int cli_unknown(const char *cmd, int argc, char **argv, int i, int got);
/* Fails (-1, message in e) when plan_text's predicted host bytes exceed budget (-1: no budget). */
int cli_check_host(const sim_result *r, int64_t budget, const char *plan_text, err *e);

/* One line on stderr, once per process, when plan p approximates BatchNorm (bn=per-band in a row
 * segment holding a bn): the user asked for it, but should know. */
void cli_warn_plan(const char *cmd, const plan *p, const net *n);

int cli_parse_optimizer(const char *s, sched_optimizer *o);
const char *cli_optimizer_name(sched_optimizer o);

/* Progress "\r  what k/n" on stderr, only when stderr is a terminal; k == n ends the line. */
void cli_progress(const char *what, int k, int n);

/* A net at an input size. image 0 keeps the net file's size. */
int cli_load_net(net *n, const char *name, int image, err *e);

/* Parses plan_text for n and simulates it; resolved (optional) receives plan_describe(),
 * timeline (optional) a malloc'd array of r->n_steps device-byte values. */
int cli_simulate(const net *n, const char *plan_text, const sched_cfg *cfg, const sim_device *d, sim_result *r,
                 char *resolved, size_t len, int64_t **timeline, err *e);

/* Largest batch (by_image false, at pr->image) or square input (at pr->batch) whose replay peak
 * fits pr->budget; 0 if none. Peaks grow monotonically with both, so a doubling search followed
 * by bisection finds it; pr->peak is the peak there. image 0 = the net file's size. */
typedef struct {
    const char *net_name, *plan_text;
    int image, batch;
    sched_cfg cfg;
    int64_t budget;
    int64_t peak;
} cli_probe;
int cli_max_fit(cli_probe *pr, bool by_image);

/* The commands, one file each (cli/cli_<name>.c); main.c dispatches on argv[1] and passes the rest,
 * argv[0] being the command's name. Each returns CLI_OK, CLI_FAILED or CLI_USAGE. */
int cli_sim(int argc, char **argv);
int cli_train(int argc, char **argv);
int cli_validate(int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_reproduce(int argc, char **argv);
int cli_demo(int argc, char **argv);

/* An experiment spec into one HDF5 file (out NULL: the spec's own), for sweep, demo and reproduce;
 * cmd names the command in messages. Returns a CLI status. */
int cli_sweep_run(const char *cmd, const char *spec_path, const char *out, bool overwrite, bool quiet);

#endif
