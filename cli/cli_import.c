/* lrcnn import and lrcnn torch-plan: the Python tools that need PyTorch — tools/torch2net.py (a
 * PyTorch model as a net file) and tools/torch_plan.py (a PyTorch training script under an lrcnn
 * plan) — run with Debian's Python (the one with PyTorch 1.13), whatever python3 comes first on the
 * user's PATH. Their options and errors are theirs (exit 2 and one line on a refusal). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define PY "/usr/bin/python3"

/* Runs tools/TOOL with Debian's Python, argv[1..] its arguments, and this binary as the lrcnn the
 * tool calls ($LRCNN_BINARY, unless the user set it). Returns only when it cannot. */
static int run_tool(const char *cmd, const char *tool, int argc, char **argv)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) self[n] = 0, setenv("LRCNN_BINARY", self, 0);
    char **args = calloc((size_t)argc + 2, sizeof *args);
    if (!args) return cli_fail(cmd, "out of memory");
    args[0] = PY;
    args[1] = (char *)tool;
    for (int i = 1; i < argc; i++) args[i + 1] = argv[i];
    execv(PY, args);
    int why = errno;
    free(args);
    return cli_fail(cmd, "cannot run %s (%s): it needs Debian's python3-torch (./lrcnn installs it)", PY, strerror(why));
}

int cli_import(int argc, char **argv) { return run_tool("import", LRCNN_SOURCE_DIR "/tools/torch2net.py", argc, argv); }

int cli_torch_plan(int argc, char **argv) { return run_tool("torch-plan", LRCNN_SOURCE_DIR "/tools/torch_plan.py", argc, argv); }
