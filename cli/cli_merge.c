/* cli_merge: `lrcnn merge OUT.h5 PART.h5...`, the shards of a sweep (lrcnn sweep --shard I/N) as
 * the one file the whole sweep writes (h5_merge: what is checked, what the file says). */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/merge.h"

static const char usage[] =
    "usage: lrcnn merge OUT.h5 PART.h5... [--force]\n"
    "\n"
    "Joins the N part files of a sweep run as shards (lrcnn sweep SPEC --shard I/N -o PART.h5, for\n"
    "I = 1..N, on one machine or many) into OUT.h5: the runs the whole sweep would have written,\n"
    "with the same names, plus a table /shards saying where each part ran (results/SCHEMA.md).\n"
    "Refuses (exit 2, nothing written) unless all N parts are there, once each, from the same spec\n"
    "text and commit, and together hold every run once. An existing OUT.h5 is kept unless --force.\n"
    "\n"
    "example: lrcnn merge /tmp/sweep.h5 /tmp/part1.h5 /tmp/part2.h5 /tmp/part3.h5\n";

int cli_merge(int argc, char **argv)
{
    const char *out = NULL;
    bool force = false;
    char **parts = err_calloc((size_t)argc, sizeof *parts);
    int n = 0, rc = CLI_OK;
    for (int i = 1; i < argc && rc == CLI_OK; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            free(parts);
            return CLI_OK;
        }
        if (!strcmp(a, "--force")) force = true;
        else if (a[0] == '-' && a[1]) rc = cli_fail("merge", "unknown option '%s' (see lrcnn merge --help)", a);
        else if (!out) out = a;
        else parts[n++] = argv[i];
    }
    if (rc == CLI_OK && !n) rc = cli_fail("merge", "usage: lrcnn merge OUT.h5 PART.h5... (no %s given)", out ? "parts" : "output");
    err e = {{0}};
    if (rc == CLI_OK && h5_merge(out, parts, n, force, stderr, &e)) rc = cli_fail("merge", "%s", e.msg);
    if (rc == CLI_OK) fprintf(stderr, "wrote %s (%d parts)\n", out, n);
    free(parts);
    return rc;
}
