/* lrcnn reproduce: every experiment and every figure from scratch, on this machine's CPU, or with
 * --backend cuda the GPU campaign on this machine's GPU.
 * The experiments are the specs experiments/<name>.spec (experiments/README.md), in file-name order,
 * except those that say `reproduce = off` (the demo, whose file is not a committed result), and of
 * those only the specs of the backend asked for (`backend = cuda` specs need a GPU); each
 * runs into its `output` (relative to the source tree; default results/<name>.h5). The figures are
 * the ones the specs name (`figures = ...`): each is drawn once, by plots/<name>.py, from the
 * outputs of every spec naming it, in spec order, into paper/figures. Then the report's PDF, and a
 * list of what was written. Every spec is loaded and checked before anything runs.
 * Not done here: what a spec means (cli_sweep_run), how a figure looks (plots/). */
#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "engine/ops.h"
#include "io/spec.h"

#define SRC LRCNN_SOURCE_DIR
#define PY "/usr/bin/python3"
#define MAX_FIGURES 64

/* A figure and the result files it is drawn from (shell words, relative to SRC). */
typedef struct {
    char name[32];
    char inputs[4096];
    bool drawn;
} figure;

/* The specs reproduce runs, each with its output relative to SRC (or absolute). */
typedef struct {
    spec *specs;
    char (*outputs)[256];
    bool *written;
    int n;
    figure figures[MAX_FIGURES];
    int n_figures;
} experiments;

static int run_shell(const char *what, const char *cmd)
{
    fprintf(stderr, "  %s\n", what);
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "lrcnn reproduce: failed (%d): %s\n", rc, cmd);
    return rc != 0;
}

static void experiments_free(experiments *x)
{
    for (int i = 0; i < x->n; i++) spec_free(&x->specs[i]);
    free(x->specs), free(x->outputs), free(x->written);
}

/* Runs one spec into out in a process of its own: a train spec runs the engine in the process that
 * runs it, which then could not fork the measured runs of the specs after it (engine/run.h). */
static bool run_spec(const char *spec_path, const char *out)
{
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(cli_sweep_run("reproduce", spec_path, out, true, true) == CLI_OK ? 0 : 1);
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Adds spec i's output to the inputs of each figure it names. */
static int add_figures(experiments *x, int i, err *e)
{
    const spec *s = &x->specs[i];
    for (int k = 0; k < s->n_figures; k++) {
        int f = 0;
        while (f < x->n_figures && strcmp(x->figures[f].name, s->figures[k])) f++;
        if (f == MAX_FIGURES) return err_set(e, "%s: more than %d figures in all", s->path, MAX_FIGURES);
        if (f == x->n_figures) snprintf(x->figures[x->n_figures++].name, sizeof x->figures[0].name, "%s", s->figures[k]);
        char *in = x->figures[f].inputs;
        size_t at = strlen(in);
        if (at + strlen(x->outputs[i]) + 4 >= sizeof x->figures[f].inputs)
            return err_set(e, "%s: figure %s reads too many files", s->path, s->figures[k]);
        snprintf(in + at, sizeof x->figures[f].inputs - at, "%s'%s'", at ? " " : "", x->outputs[i]);
    }
    return 0;
}

/* Loads and checks every spec under experiments/ before anything runs; keeps those of `backend`. */
static int experiments_load(experiments *x, const char *backend, err *e)
{
    memset(x, 0, sizeof *x);
    glob_t g;
    if (glob(SRC "/experiments/*.spec", 0, NULL, &g)) return err_set(e, "no specs under %s/experiments", SRC);
    x->specs = err_calloc(g.gl_pathc, sizeof(spec));
    x->outputs = err_calloc(g.gl_pathc, sizeof *x->outputs);
    x->written = err_calloc(g.gl_pathc, sizeof *x->written);
    int rc = 0;
    for (size_t k = 0; k < g.gl_pathc && !rc; k++) { /* glob sorts: file-name order */
        spec *s = &x->specs[x->n];
        if ((rc = spec_load(s, g.gl_pathv[k], e))) break;
        if (!s->reproduce || strcmp(s->backend, backend)) {
            spec_free(s);
            continue;
        }
        char *out = x->outputs[x->n++];
        if (s->output[0]) snprintf(out, sizeof x->outputs[0], "%s", s->output);
        else snprintf(out, sizeof x->outputs[0], "results/%s.h5", s->name);
        if (strchr(out, '\'')) rc = err_set(e, "%s: output '%s': no quotes in result file names, please", s->path, out);
        for (int i = 0; i + 1 < x->n && !rc; i++)
            if (!strcmp(x->outputs[i], out)) rc = err_set(e, "%s and %s both write %s", x->specs[i].path, s->path, out);
        if (!rc) rc = add_figures(x, x->n - 1, e);
    }
    globfree(&g);
    if (rc) experiments_free(x);
    return rc;
}

static void list_file(const char *rel)
{
    char path[768], size[32];
    struct stat st;
    snprintf(path, sizeof path, "%s%s%s", rel[0] == '/' ? "" : SRC, rel[0] == '/' ? "" : "/", rel);
    if (stat(path, &st) == 0) printf("  %-48s %10s\n", rel, units_fmt_bytes((int64_t)st.st_size, size, sizeof size));
}

/* --list: what would run, in order. */
static void print_list(const experiments *x)
{
    printf("experiments (in this order):\n");
    for (int i = 0; i < x->n; i++)
        printf("  %-36s run = %-8s -> %s\n", x->specs[i].path + strlen(SRC) + 1, spec_run_name(x->specs[i].run), x->outputs[i]);
    printf("figures (paper/figures/NAME.png and .pdf):\n");
    for (int f = 0; f < x->n_figures; f++) printf("  %-12s <- %s\n", x->figures[f].name, x->figures[f].inputs);
}

static const char *usage =
    "usage: lrcnn reproduce [--backend cpu|cuda] [--figures-only | --list | --check]\n\n"
    "Regenerates every result and figure: runs each spec experiments/*.spec (file-name order; a spec with\n"
    "`reproduce = off`, such as demo.spec, is skipped) into its output under results/, then draws every\n"
    "figure the specs name (`figures = ...`) from the outputs of the specs that name it, into\n"
    "paper/figures/ (PNG and PDF), builds paper/report.pdf where pandoc and WeasyPrint are installed, and\n"
    "lists what it wrote. About 30 minutes on 2 cores. --figures-only redraws the figures (and the report)\n"
    "from the existing result files; --list prints the specs and figures it would run and draws nothing;\n"
    "--check reruns nothing and lists the committed result files that are stale (another schema, a spec\n"
    "changed since, a tree with local changes, a commit not in this history, or paths of another\n"
    "machine), each with the command that regenerates it (tools/check_results.py; results/STALE lists\n"
    "those known stale). Exit status 1 when any is stale.\n"
    "--backend cuda runs the GPU campaign instead (the specs with `backend = cuda`: every preset validated\n"
    "on the GPU, predicted against allocated, reserved and device peaks; results/gpu/) on this machine's GPU.\n"
    "Specs: experiments/README.md.\n";

int cli_reproduce(int argc, char **argv)
{
    bool quick = false, list = false, check = false;
    const char *backend = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return fputs(usage, stdout), CLI_OK;
        if (!strcmp(argv[i], "--figures-only")) quick = true;
        else if (!strcmp(argv[i], "--list")) list = true;
        else if (!strcmp(argv[i], "--check")) check = true;
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else return cli_fail("reproduce", "unknown argument '%s' (see lrcnn reproduce --help)", argv[i]);
    }
    if (strcmp(backend, "cpu") && strcmp(backend, "cuda")) return cli_fail("reproduce", "--backend %s: expected cpu or cuda", backend);
    if (check) { /* attributes only: what is stale, and how to regenerate it */
        int rc = system("cd '" SRC "' && " PY " tools/check_results.py --known results/STALE");
        return rc == 0 ? CLI_OK : CLI_FAILED;
    }
    err e;
    experiments x;
    if (experiments_load(&x, backend, &e)) return cli_fail("reproduce", "%s", e.msg);
    if (list) {
        print_list(&x);
        experiments_free(&x);
        return CLI_OK;
    }
    if (!quick && ops_opens(backend, &e)) { /* a device is asked in a child: each spec's process opens its own */
        experiments_free(&x);
        return cli_fail("reproduce", "--backend %s: %s", backend, e.msg);
    }
    double t0 = cli_now();
    int failed = 0;
    char path[512], cmd[8192], what[512];
    for (int i = 0; i < x.n && !quick; i++) {
        const char *out = x.outputs[i];
        snprintf(path, sizeof path, "%s%s%s", out[0] == '/' ? "" : SRC, out[0] == '/' ? "" : "/", out);
        char *slash = strrchr(path, '/'); /* its folder (results/gpu/) made if missing */
        *slash = 0, mkdir(path, 0777), *slash = '/';
        fprintf(stderr, "  regenerating %s (%s, run = %s)\n", out, x.specs[i].path + strlen(SRC) + 1, spec_run_name(x.specs[i].run));
        x.written[i] = run_spec(x.specs[i].path, path);
        failed |= !x.written[i];
    }
    mkdir(SRC "/paper/figures", 0755);
    for (int f = 0; f < x.n_figures; f++) {
        snprintf(cmd, sizeof cmd, "cd '%s' && " PY " plots/%s.py --out paper/figures %s", SRC, x.figures[f].name, x.figures[f].inputs);
        snprintf(what, sizeof what, "drawing paper/figures/%s.png and .pdf from %s", x.figures[f].name, x.figures[f].inputs);
        x.figures[f].drawn = !run_shell(what, cmd);
        failed |= !x.figures[f].drawn;
    }
    /* the report as PDF, where Debian's pandoc and WeasyPrint are installed (./lrcnn reproduce does) */
    bool report = system("command -v pandoc >/dev/null && command -v weasyprint >/dev/null") == 0;
    if (report) {
        snprintf(cmd, sizeof cmd, "cd '%s/paper' && pandoc README.md -o report.pdf --pdf-engine=weasyprint --css report.css "
                                  "--metadata pagetitle='lrcnn report' 2>/dev/null", SRC);
        report = !run_shell("building paper/report.pdf (pandoc, WeasyPrint)", cmd);
        failed |= !report;
    } else {
        fprintf(stderr, "  paper/report.pdf not built: pandoc and weasyprint are not installed (./lrcnn reproduce installs them)\n");
    }
    printf("\nwritten in %.0f s:\n", cli_now() - t0);
    for (int i = 0; i < x.n; i++)
        if (x.written[i]) list_file(x.outputs[i]);
    for (int f = 0; f < x.n_figures; f++)
        for (int k = 0; k < 2 && x.figures[f].drawn; k++) {
            snprintf(path, sizeof path, "paper/figures/%s.%s", x.figures[f].name, k ? "pdf" : "png");
            list_file(path);
        }
    if (report) list_file("paper/report.pdf");
    experiments_free(&x);
    return failed ? CLI_FAILED : CLI_OK;
}
