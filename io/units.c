/* units: byte sizes as people write them ("16GiB", "500MB", "80e9") and as we print them
 * ("1.23 GiB"), shared by the command line and the experiment specs. */
#include "io/units.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int units_parse_bytes(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    if (!*s || isspace((unsigned char)*s)) return -1; /* strtod would skip it: " 8" is not a size */
    double v = strtod(s, &end);
    if (errno || end == s || !(v > 0)) return -1;
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1}, {"B", 1}, {"K", 1e3}, {"KB", 1e3}, {"M", 1e6}, {"MB", 1e6}, {"G", 1e9}, {"GB", 1e9}, {"T", 1e12},
        {"TB", 1e12}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t u = 0; u < sizeof units / sizeof *units; u++)
        if (!strcasecmp(end, units[u].suffix) && (strlen(end) < 3 || !strcmp(end + 1, "iB"))) {
            double b = v * units[u].mult;
            if (b > UNITS_MAX_BYTES) return -1; /* beyond any machine, and where products of sizes overflow */
            *out = (int64_t)b;
            return 0;
        }
    return -1;
}

int units_parse_budget(const char *s, int64_t *out)
{
    char *end;
    if (!*s || isspace((unsigned char)*s)) return -1;
    double v = strtod(s, &end);
    if (end != s && v == 0.0 && (!*end || !strcasecmp(end, "B"))) {
        *out = 0;
        return 0;
    }
    return units_parse_bytes(s, out);
}

const char *units_fmt_bytes(int64_t b, char *buf, size_t len)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int k = 0;
    while ((v >= 1024.0 || v <= -1024.0) && k < 4) v /= 1024.0, k++;
    if (k == 0) snprintf(buf, len, "%lld B", (long long)b);
    else snprintf(buf, len, "%.*f %s", v >= 100 || v <= -100 ? 1 : 2, v, u[k]);
    return buf;
}
