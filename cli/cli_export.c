/* cli_export: `lrcnn export FILE.h5 [-o DIR] [--csv]`, a result file as TSV or CSV tables (h5_export).
 *
 * Without -o the runs table goes to stdout and the line saying what was written to stderr, so
 * the output can be piped; with -o the tables go to DIR and the report to stdout. Exit status: 0
 * on success, 2 on a bad argument or a file that cannot be exported, with one line on stderr. */
#include <string.h>

#include "cli/cli.h"
#include "io/h5.h"

static const char usage[] =
    "usage: lrcnn export FILE.h5 [-o DIR [--force]] [--csv]\n"
    "\n"
    "Writes the tables of an lrcnn result file (results/SCHEMA.md) as tab-separated text:\n"
    "  runs.tsv              one row per run: kind and configuration, predicted peak bytes (replay\n"
    "                        and closed form) and their breakdown by category at the peak, FLOPs,\n"
    "                        estimated time in microseconds; what the engine measured (peak, host\n"
    "                        and RSS bytes, iterations, median and best time after the first in\n"
    "                        microseconds, first and last loss, gradient deviation from layer);\n"
    "                        a capacity search's budget and the largest value that fits. Empty\n"
    "                        cells where a run has no such value\n"
    "  timeline_NNNNN.tsv    device bytes after each schedule step of run NNNNN (with -o only)\n"
    "  --csv                 the same as comma-separated runs.csv, timeline_NNNNN.csv (RFC 4180)\n"
    "\n"
    "  -o, --out DIR         write the tables into DIR (created if missing) instead of writing\n"
    "                        runs.tsv to stdout\n"
    "  --force               replace tables that exist in DIR (else: exit 2, nothing written)\n"
    "  -h, --help            this text\n";

int cli_export(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    bool force = false, csv = false;
    err e = {{0}};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "--force") || !strcmp(a, "--csv")) {
            *(a[2] == 'f' ? &force : &csv) = true;
            continue;
        }
        int o = !strcmp(a, "-o") ? cli_opt(argc, argv, &i, "-o", &v) : cli_opt(argc, argv, &i, "--out", &v);
        if (o < 0 || (o > 0 && !*v)) return cli_fail("export", "%s needs a directory", a);
        if (o > 0) {
            if (out) return cli_fail("export", "-o given twice ('%s' and '%s')", out, v);
            out = v;
        } else if (a[0] == '-' && a[1]) {
            return cli_fail("export", "unknown option '%s' (see lrcnn export --help)", a);
        } else if (file) {
            return cli_fail("export", "one result file at a time ('%s' and '%s')", file, a);
        } else {
            file = a;
        }
    }
    if (!file) return cli_fail("export", "no result file given (usage: lrcnn export FILE.h5 [-o DIR])");
    if (force && !out) return cli_fail("export", "--force applies with -o DIR");
    if (h5_export(file, out, force, csv, out ? stdout : stderr, &e) < 0) return cli_fail("export", "%s", e.msg);
    return CLI_OK;
}
