/* machine: see machine.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include "io/machine.h"

#include <sched.h>
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

int machine_threads(void)
{
    const char *env = getenv("OMP_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : 0;
    if (n > 0) return (int)n;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? (int)online : 1;
}

const char *machine_wait_policy(void)
{
    const char *p = getenv("OMP_WAIT_POLICY");
    return p && *p ? p : "unset (active)";
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
#ifdef LRCNN_SOURCE_DIR
    char cmd[1024], line[64];
    if (strchr(LRCNN_SOURCE_DIR, '\'')) return;
    snprintf(cmd, sizeof cmd, "git -C '%s' rev-parse --short HEAD 2>/dev/null", LRCNN_SOURCE_DIR);
    if (!first_line(cmd, line, sizeof line) || !*line) return;
    snprintf(commit, len, "%s", line);
    snprintf(cmd, sizeof cmd, "git -C '%s' status --porcelain --untracked-files=no 2>/dev/null", LRCNN_SOURCE_DIR);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    bool changed = fgetc(p) != EOF;
    if (pclose(p) == 0) *dirty = changed;
#endif
}
