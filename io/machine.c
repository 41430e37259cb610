/* machine: see machine.h. */
#include "io/machine.h"

#include "engine/cpu/blas_cpu.h"
#include "engine/threads.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void machine_cpu_model(char *buf, size_t len)
{
    snprintf(buf, len, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !c) continue;
        c += 1 + (c[1] == ' ');
        c[strcspn(c, "\n")] = 0;
        snprintf(buf, len, "%s", c);
        break;
    }
    if (f) fclose(f);
}

int machine_threads(void) { return engine_threads(); }

const char *machine_blas(void) { return blas_cpu_describe(); }

const char *machine_wait_policy(void)
{
    static char buf[64];
    const char *p = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (p && *p) return p;
    snprintf(buf, sizeof buf, "spin %s rounds, then sleep", spin && *spin ? spin : "300000");
    return buf;
}

/* The first line `cmd` prints into out; false when it fails or prints nothing. */
static bool first_line(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    char line[256] = "";
    bool got = fgets(line, sizeof line, p) != NULL;
    bool ok = pclose(p) == 0;
    line[strcspn(line, "\r\n")] = '\0';
    snprintf(out, len, "%s", line);
    return ok && got;
}

void machine_git(char *commit, size_t len, int *dirty)
{
    snprintf(commit, len, "unknown");
    *dirty = -1;
    /* a binary run away from its tree (tools/gpu_check.sh on a GPU machine, from the bundle
     * tools/gpu_bundle.sh made) carries the state of the tree it was built from: the copy of the
     * tree there is not the repository, and its history may be another commit's */
    const char *built = getenv("LRCNN_BUILT_FROM");
    char c[64];
    int d;
    if (built && sscanf(built, "%63s %d", c, &d) == 2 && (d == 0 || d == 1)) {
        snprintf(commit, len, "%s", c);
        *dirty = d;
        return;
    }
#ifdef LRCNN_SOURCE_DIR
    char cmd[1024], line[64];
    if (strchr(LRCNN_SOURCE_DIR, '\'')) return;
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", LRCNN_SOURCE_DIR);
    if (!first_line(cmd, line, sizeof line) || !*line) return;
    snprintf(commit, len, "%s", line);
    /* the outputs (results/, the report's paper/) do not make a tree dirty: regenerating one result
     * after another must not mark the later ones */
    snprintf(cmd, sizeof cmd, "git -C '%s' status --porcelain --untracked-files=no -- . ':(exclude)results' ':(exclude)paper' 2>/dev/null",
             LRCNN_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    bool changed = fgetc(p) != EOF;
    if (pclose(p) == 0) *dirty = changed;
#endif
}

const char *machine_portable_path(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path);
    char *real = realpath(path, NULL), *root = realpath(LRCNN_SOURCE_DIR, NULL);
    size_t n = root ? strlen(root) : 0;
    if (real && root && !strncmp(real, root, n) && real[n] == '/') snprintf(buf, len, "%s", real + n + 1);
    free(real), free(root);
    return buf;
}
