/* lrcnn: the command line. One binary, one subcommand per job; each subcommand owns its --help
 * and returns 0 (ok), 1 (failed) or 2 (usage or input error, one line on stderr). */
#include <hdf5.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"
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
    {"pipe", cli_pipe, "pipelined model parallelism: per-device peaks and the iteration's time (GPipe, 1F1B, interleaved)"},
    {"lower", cli_lower, "a plan's segments and band geometry as JSON, for a runtime outside lrcnn"},
    {"torch-plan", cli_torch_plan, "a PyTorch training script under an lrcnn plan (python/lrcnn_torch)"},
    {"import", cli_import, "a PyTorch model (torchvision name, or FILE.py:FACTORY) as a net file (tools/torch2net.py)"},
    {"reproduce", cli_reproduce, "every result and figure from scratch (about 30 minutes on 2 cores)"},
    {"demo", cli_demo, "the default experiment: every preset trained briefly on the CPU engine, measured vs predicted"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: lrcnn COMMAND [--help | options]\n\nlrcnn: memory-efficient CNN training, row-centric (LR-CNN) "
               "and its baselines.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\nlrcnn --version: the source tree's commit. --threads N (any command): the engine's OpenMP\n"
               "threads (also the planner's and the sweep's); without it, the CPUs no other process keeps busy\n"
               "when the engine starts (recorded in every result file). exit status: 0 ok, 1 failed, 2 bad\n"
               "usage or input\n");
}

/* GNU OpenMP and OpenBLAS read their environment once, when the program loads, so lrcnn sets it and
 * runs itself again, once, before anything else (a failed exec just goes on with what it had):
 * - --threads N (any command, anywhere on the line) becomes OMP_NUM_THREADS=N; without it the
 *   engine takes the CPUs other processes leave free (engine/threads.h).
 * - Unless the user chose a wait policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT), an idle thread spins
 *   for 10,000 rounds and then sleeps (engine/threads.h says why).
 * - Where OpenBLAS took the CPU for one without AVX, the kernel its instructions call for
 *   (engine/cpu/blas_cpu.h: 4-5x the sgemm speed on an Intel Xeon newer than Debian's OpenBLAS).
 * Returns the value of --threads (0: none), or -1 when it is not a count 1..4096. */
static int process_env(int argc, char **argv)
{
    int threads = 0;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--threads"))
            if (i + 1 >= argc || cli_parse_int(argv[i + 1], 1, 4096, &threads)) return -1;
    const char *have = getenv("OMP_NUM_THREADS");
    bool set_threads = threads && (!have || atoi(have) != threads);
    bool set_wait = engine_wait_env(), set_blas = blas_cpu_env();
    if (!set_threads && !set_wait && !set_blas) return threads;
    char n[16];
    snprintf(n, sizeof n, "%d", threads);
    if (set_threads) setenv("OMP_NUM_THREADS", n, 1);
    execv("/proc/self/exe", argv);
    return threads;
}

/* Drops "--threads N" from argv (process_env has used it); returns the new argc. */
static int drop_threads(int argc, char **argv)
{
    int k = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--threads")) {
            i++;
            continue;
        }
        argv[k++] = argv[i];
    }
    argv[k] = NULL;
    return k;
}

int main(int argc, char **argv)
{
    if (process_env(argc, argv) < 0) {
        fprintf(stderr, "lrcnn: --threads needs a count 1..4096 (the engine's OpenMP threads)\n");
        return CLI_USAGE;
    }
    h5_set_command(argc, argv); /* as typed, --threads included */
    argc = drop_threads(argc, argv);
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
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    char msg[2048];
    int at = snprintf(msg, sizeof msg, "lrcnn: unknown command '%.200s' (commands:", argv[1]);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) at += snprintf(msg + at, sizeof msg - (size_t)at, " %s", commands[i].name);
    snprintf(msg + at, sizeof msg - (size_t)at, "; lrcnn --help)");
    cli_put_line(stderr, msg);
    return CLI_USAGE;
}
