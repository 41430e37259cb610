/* lrcnn: the command line. One binary, one subcommand per job; each subcommand owns its --help
 * and returns 0 (ok), 1 (failed) or 2 (usage or input error, one line on stderr). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "io/h5.h"

static const struct {
    const char *name;
    int (*run)(int, char **);
    const char *what;
} commands[] = {
    {"sim", cli_sim, "predict peak memory (by category) and compute for plans"},
    {"train", cli_train, "train on the CPU engine: measured peaks beside the predictions"},
    {"validate", cli_validate, "predicted vs measured peaks and gradients vs layer, for a list of plans"},
    {"sweep", cli_sweep, "run an experiment spec (nets x batch x image x plans) into one HDF5 file"},
    {"plan", cli_plan, "largest batch or input that fits a memory budget, per plan"},
    {"calibrate", cli_calibrate, "measure this machine's step times: the device profile --profile takes"},
    {"export", cli_export, "HDF5 result -> TSV for gnuplot"},
    {"reproduce", cli_reproduce, "every result and figure from scratch (about 30 minutes on 2 cores)"},
    {"demo", cli_demo, "the default experiment (simulator: VGG-16 and ResNet-50, every preset)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lrcnn COMMAND [--help | options]\n\nlrcnn: memory-efficient CNN training, row-centric (LR-CNN) "
               "and its baselines.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\nexit status: 0 ok, 1 failed, 2 bad usage or input\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_OK;
    }
    h5_set_command(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "lrcnn: unknown command '%s' (commands: sim train validate sweep plan calibrate export reproduce demo; lrcnn --help)\n", argv[1]);
    return CLI_USAGE;
}
