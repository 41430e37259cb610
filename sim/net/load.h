/* load: a net from its text (nets/FORMAT.md) — parsing, names, topological order and the shapes,
 * parameters and multiply-accumulates of every layer, inferred by the kinds table (kind.h).
 * Above kind.h and net.h, which know nothing of the format. Every user error names path:line. */
#ifndef LRCNN_LOAD_H
#define LRCNN_LOAD_H

#include "sim/net/net.h"

/* Parses a net file; on failure returns -1 with "path:line: what" in e. */
int net_load(net *n, const char *path, err *e);
/* Same from a string (path is used in messages only). */
int net_parse(net *n, const char *text, const char *path, err *e);
/* Finds nets by name: "vgg16" -> <LRCNN_NETS or the source tree>/nets/vgg16.net; a path with
 * a '/' or ending in .net is taken as is. */
int net_load_named(net *n, const char *name_or_path, err *e);

/* Sets the input size and re-infers every shape; -1 if some layer's output becomes empty or a size
 * passes the limits of net.h (NET_MAX_*). */
int net_set_input(net *n, int h, int w, err *e);

/* Values per image of the input plus every conv, pool and fc output (cs231n's convention). */
int64_t net_forward_values(const net *n);

#endif
