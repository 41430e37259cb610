/* lrcnn import: a PyTorch model as a net file — tools/torch2net.py, run with Debian's Python (the
 * one with PyTorch 1.13), whatever python3 comes first on the user's PATH. Its options and errors
 * are the importer's (exit 2 and one line on a refusal); nothing of it is done here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define PY "/usr/bin/python3"

int cli_import(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return cli_fail("import", "out of memory");
    args[0] = PY;
    args[1] = LRCNN_SOURCE_DIR "/tools/torch2net.py";
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    execv(PY, args);
    int why = errno;
    free(args);
    return cli_fail("import", "cannot run %s (%s): the importer needs Debian's python3-torch (./lrcnn installs it)", PY,
                    strerror(why));
}
