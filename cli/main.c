/* lrcnn: the command line. One binary, one subcommand per job; each subcommand owns its --help
 * and returns 0 (ok), 1 (failed) or 2 (usage or input error, one line on stderr). */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "io/h5.h"
#include "io/machine.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *what;
} commands[] = {
    {"sim", cli_sim, "predict peak memory (by category) and compute for plans"},
    {"train", cli_train, "train a net under a plan on the engine (CPU, or CUDA): measured peaks beside the predictions"},
    {"validate", cli_validate, "predicted vs measured peaks and gradients vs layer, for a list of plans"},
    {"sweep", cli_sweep, "run an experiment spec (nets x batch x image x plans) into one HDF5 file"},
    {"plan", cli_plan, "largest batch or input that fits a memory budget, per plan"},
    {"calibrate", cli_calibrate, "measure this machine's step times: the device profile --profile takes"},
    {"merge", cli_merge, "join the shards of a sweep (sweep --shard I/N) into one file"},
    {"export", cli_export, "HDF5 result -> TSV for gnuplot"},
    {"reproduce", cli_reproduce, "every result and figure from scratch (about 30 minutes on 2 cores)"},
    {"demo", cli_demo, "the default experiment: every preset trained briefly on the CPU engine, measured vs predicted"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lrcnn COMMAND [--help | options]\n\nlrcnn: memory-efficient CNN training, row-centric (LR-CNN) "
               "and its baselines.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\nlrcnn --version: the source tree's commit. OpenMP threads wait passively unless OMP_WAIT_POLICY\n"
               "is set. exit status: 0 ok, 1 failed, 2 bad usage or input\n");
}

/* GNU OpenMP reads OMP_WAIT_POLICY once, when the program loads. Its default, active waiting, has
 * idle threads spin: with another process on the same cores an iteration took 49 ms to 9.6 s
 * instead of 13 ms. So lrcnn waits passively unless the user chose: it sets the variable and runs
 * itself again, once, before anything else (a failed exec just goes on, spinning). */
static void wait_passively(char **argv)
{
    if (getenv("OMP_WAIT_POLICY")) return;
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    wait_passively(argv);
    if (argc == 2 && !strcmp(argv[1], "--version")) {
        char commit[64];
        int dirty;
        unsigned maj = 0, min = 0, rel = 0;
        machine_git(commit, sizeof commit, &dirty);
        H5get_libversion(&maj, &min, &rel);
        printf("lrcnn %s%s (result schema %d, HDF5 %u.%u.%u)\n", commit, dirty == 1 ? " with local changes" : "",
               H5_SCHEMA_VERSION, maj, min, rel);
        return CLI_OK;
    }
    if (argc < 2) {
        fprintf(stderr, "lrcnn: which command? (lrcnn --help lists them)\n");
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    h5_set_command(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lrcnn: unknown command '%s' (commands:", argv[1]);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) fprintf(stderr, " %s", commands[i].name);
    fprintf(stderr, "; lrcnn --help)\n");
    return CLI_USAGE;
}
