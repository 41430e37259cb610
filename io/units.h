/* units: byte sizes in and out, for the command line and experiment specs. */
#ifndef LRCNN_UNITS_H
#define LRCNN_UNITS_H

#include <stddef.h>
#include <stdint.h>

/* The largest size taken: 1 EiB, past any machine, and small enough that sums and products of a
 * few sizes stay inside int64 (the planner multiplies budgets by small factors). */
#define UNITS_MAX_BYTES 1152921504606846976.0

/* "16GiB", "12G", "500MB", "80e9", "1048576": KiB/MiB/GiB/TiB are binary, K/M/G/T (and KB, MB,
 * GB, TB) decimal. -1 on anything else, on zero, on whitespace before it or past UNITS_MAX_BYTES. */
int units_parse_bytes(const char *s, int64_t *out);
/* Like units_parse_bytes, but 0 is allowed (a budget of nothing). */
int units_parse_budget(const char *s, int64_t *out);
/* "1.23 GiB" (binary units, 3 significant digits) into buf; returns buf. */
const char *units_fmt_bytes(int64_t b, char *buf, size_t len);

#endif
