/* lrcnn reproduce: every experiment and every figure from scratch, on this machine's CPU:
 * the specs under experiments/ (simulator sweeps and capacity searches, one engine-measured grid),
 * the validation tables of VGG-16 and ResNet-50 (lrcnn validate), the convergence runs, and the
 * figures under paper/figures (plots/<name>.py, which read only the result files). It regenerates the
 * committed results, says so for each, and lists what it wrote. */
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/cli.h"


#define SRC LRCNN_SOURCE_DIR
#define PY "/usr/bin/python3"

static const char *specs[] = {"bands", "baselines", "capacity_batch", "capacity_image", "timeline", "measured"};

/* Figures and the result files each reads (space-separated; globs allowed). */
static const struct {
    const char *name, *inputs;
} figures[] = {
    {"bands", "results/bands.h5"},
    {"overhead", "results/bands.h5 results/measured.h5"},
    {"baselines", "results/baselines.h5"},
    {"capacity", "results/capacity_batch.h5 results/capacity_image.h5"},
    {"timeline", "results/timeline.h5"},
    {"validation", "results/measured.h5 results/validate_vgg16.h5 results/validate_resnet50.h5"},
    {"convergence", "results/convergence/*.h5"},
};

static const char *validations[][2] = {{"vgg16", "train"}, {"resnet50", "frozen"}};

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int run_shell(const char *what, const char *cmd)
{
    fprintf(stderr, "  %s\n", what);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "lrcnn reproduce: failed (%d): %s\n", rc, cmd);
    return rc != 0;
}

int cli_reproduce(int argc, char **argv)
{
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            puts("usage: lrcnn reproduce [--figures-only]\n\n"
                 "Regenerates every result under results/ (sweeps, capacity searches, the engine-measured grid,\n"
                 "the VGG-16 and ResNet-50 validation tables at 224x224 batch 2, the convergence runs) and every\n"
                 "figure under paper/figures/ (PNG and PDF), then lists them. About 10 minutes on 2 cores.\n"
                 "--figures-only redraws the figures from the existing result files.");
            return CLI_OK;
        }
        if (!strcmp(argv[i], "--figures-only")) quick = true;
        else return cli_fail("reproduce", "unknown argument '%s' (see lrcnn reproduce --help)", argv[i]);
    }
    double t0 = now();
    int failed = 0;
    char out[512], cmd[4096];
    if (!quick) {
        for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
            char spec[512];
            snprintf(spec, sizeof spec, SRC "/experiments/%s.spec", specs[i]);
            snprintf(out, sizeof out, SRC "/results/%s.h5", specs[i]);
            fprintf(stderr, "  regenerating results/%s.h5 (experiments/%s.spec)\n", specs[i], specs[i]);
            failed |= cli_sweep_run("reproduce", spec, out, true, true) != CLI_OK;
        }
        for (size_t i = 0; i < sizeof validations / sizeof *validations; i++) {
            snprintf(out, sizeof out, SRC "/results/validate_%s.h5", validations[i][0]);
            fprintf(stderr, "  regenerating results/validate_%s.h5 (lrcnn validate, 224x224, batch 2)\n", validations[i][0]);
            char *args[] = {"validate", "--net", (char *)validations[i][0], "--image", "224", "--batch", "2", "--bn",
                            (char *)validations[i][1], "-o", out, "--force", NULL};
            failed |= cli_validate(12, args) != CLI_OK;
        }
        snprintf(cmd, sizeof cmd, "cd '%s' && bash experiments/convergence.sh >/dev/null", SRC);
        failed |= run_shell("regenerating results/convergence/ (experiments/convergence.sh)", cmd);
    }
    mkdir(SRC "/paper/figures", 0755);
    for (size_t i = 0; i < sizeof figures / sizeof *figures; i++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && " PY " plots/%s.py --out paper/figures %s", SRC, figures[i].name, figures[i].inputs);
        char what[128];
        snprintf(what, sizeof what, "drawing paper/figures/%s.png and .pdf", figures[i].name);
        failed |= run_shell(what, cmd);
    }
    /* the report as PDF, where Debian's pandoc and WeasyPrint are installed (./lrcnn reproduce does) */
    if (system("command -v pandoc >/dev/null && command -v weasyprint >/dev/null") == 0) {
        snprintf(cmd, sizeof cmd, "cd '%s/paper' && pandoc README.md -o report.pdf --pdf-engine=weasyprint "
                                  "--metadata pagetitle='lrcnn report' 2>/dev/null", SRC);
        failed |= run_shell("building paper/report.pdf (pandoc, WeasyPrint)", cmd);
    } else {
        fprintf(stderr, "  paper/report.pdf not built: pandoc and weasyprint are not installed (./lrcnn reproduce installs them)\n");
    }
    printf("\nwritten in %.0f s:\n", now() - t0);
    const char *patterns[] = {SRC "/results/*.h5", SRC "/results/convergence/*", SRC "/paper/figures/*"};
    for (size_t k = 0; k < 3; k++) {
        glob_t g;
        if (glob(patterns[k], 0, NULL, &g)) continue;
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            char size[32];
            if (stat(g.gl_pathv[i], &st)) continue;
            printf("  %-48s %10s\n", g.gl_pathv[i] + strlen(SRC) + 1, units_fmt_bytes((int64_t)st.st_size, size, sizeof size));
        }
        globfree(&g);
    }
    return failed ? CLI_FAILED : CLI_OK;
}
