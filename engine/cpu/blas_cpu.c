/* blas_cpu: see blas_cpu.h. */
#include "engine/cpu/blas_cpu.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* OpenBLAS's x86 kernels for CPUs without AVX (its names, dynamic.c): the one it falls back to for
 * a model it does not know (Prescott) is among them. */
static bool pre_avx(const char *core)
{
    static const char *const old[] = {"Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias",
                                      "Atom", "Core2", "Penryn", "Dunnington", "Nehalem", "Athlon",
                                      "Opteron", "Opteron_SSE3", "Barcelona", "Nano", "Bobcat"};
    for (size_t i = 0; i < sizeof old / sizeof *old; i++)
        if (!strcasecmp(core, old[i])) return true;
    return false;
}

/* The kernel this CPU's instructions call for (the OS saving their registers included, as
 * __builtin_cpu_supports checks), or NULL: AVX-512 (F, BW, VL, DQ) SkylakeX, whose sgemm
 * OpenBLAS's later kernels for AVX-512 CPUs share; AVX2 with FMA Zen on AMD, else Haswell. */
static const char *cpu_core(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return __builtin_cpu_is("amd") ? "Zen" : "Haswell";
#endif
    return NULL;
}

bool blas_cpu_env(void)
{
    const char *set = getenv("OPENBLAS_CORETYPE"), *core = openblas_get_corename(), *want = cpu_core();
    if ((set && *set) || !core || !want || !pre_avx(core)) return false;
    setenv("LRCNN_BLAS_DETECTED", core, 1);
    setenv("OPENBLAS_CORETYPE", want, 1);
    return true;
}

const char *blas_cpu_describe(void)
{
    static char line[160];
    char version[32] = ""; /* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." */
    const char *config = openblas_get_config(), *core = openblas_get_corename();
    const char *set = getenv("OPENBLAS_CORETYPE"), *detected = getenv("LRCNN_BLAS_DETECTED");
    if (config && sscanf(config, "OpenBLAS %31s", version) != 1) version[0] = '\0';
    int at = snprintf(line, sizeof line, "OpenBLAS%s%s, %s kernel", *version ? " " : "", version, core ? core : "unknown");
    if (set && *set && detected && *detected)
        snprintf(line + at, sizeof line - (size_t)at, " (set by lrcnn: OpenBLAS took this CPU for %s)", detected);
    else if (set && *set)
        snprintf(line + at, sizeof line - (size_t)at, " (OPENBLAS_CORETYPE)");
    return line;
}
