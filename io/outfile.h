/* outfile: how every result file is written, so that nothing is ever half-written or lost.
 *
 * A file is written into a temporary of its own beside its final name ("<path>.XXXXXX.tmp",
 * created exclusively: never an existing file, nor a symlink someone left by that name, nor the
 * temporary of a concurrent run) and moved to its final name only when complete. Without
 * overwrite (--force) that move never replaces a file, even one created at the final name while
 * the run went on (no-clobber: renameat2's RENAME_NOREPLACE, else link and unlink); with it, the
 * old file is replaced atomically. A failed or killed run leaves at most its own temporary, which
 * no later run trips over, and SIGINT, SIGTERM, SIGHUP or SIGPIPE remove the temporaries before
 * the process ends by the signal (status 128 + its number). The temporary takes the user's umask
 * (0666 less it) and is synced to the disk before its name moves. Only a regular file is ever
 * replaced: a device node, FIFO, socket or link at the name is refused, --force or not. Every
 * writer of results (io/h5.c, io/export.c, the profile and weights writers) goes through here.
 * Not done here: the file's contents. */
#ifndef LRCNN_OUTFILE_H
#define LRCNN_OUTFILE_H

#include <stdbool.h>

#include "sim/base/err.h"

typedef struct {
    char *path;     /* the final name */
    char *tmp;      /* the temporary, ours alone; NULL once committed or aborted */
    bool overwrite;
} outfile;

/* Checks that path can be written: its directory exists and is writable, it is not a directory,
 * and without overwrite no file by that name exists yet (so a command can refuse before it runs). */
int outfile_check(const char *path, bool overwrite, err *e);
/* outfile_check, then creates the temporary. *fd (when fd is
 * not NULL) receives it open for writing; else it is closed, for a library to reopen by name. */
int outfile_open(outfile *o, const char *path, bool overwrite, int *fd, err *e);
/* Writes the temporary's contents, size bytes, in one go: reserves its blocks first (posix_fallocate:
 * a full disk is "No space left on device" before any byte is written), maps it and calls
 * fill(ctx, bytes, size) to put them there (0, or -1 with e set). 0, or -1 with e naming the path. */
int outfile_fill(const outfile *o, size_t size, int (*fill)(void *ctx, void *bytes, size_t size, err *e), void *ctx, err *e);
/* Moves the complete temporary to the final name (see above). On failure the temporary is removed. */
int outfile_commit(outfile *o, err *e);
/* Removes the temporary (nothing after a commit); frees what the outfile holds. */
void outfile_abort(outfile *o);

#endif
