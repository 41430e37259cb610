/* outfile: see outfile.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2 */
#endif
#include "io/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of path ("." for a bare name), writable. */
static int check_dir(const char *path, err *e)
{
    char *dir = err_strdup(path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, strlen(dir) + 1, ".");
    else if (slash == dir) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0)
        rc = err_set(e, "cannot write %s: directory %s: %s", path, dir, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        rc = err_set(e, "cannot write %s: %s is not a directory", path, dir);
    else if (access(dir, W_OK | X_OK) != 0)
        rc = err_set(e, "cannot write %s: directory %s is not writable", path, dir);
    free(dir);
    return rc;
}

int outfile_check(const char *path, bool overwrite, err *e)
{
    if (!path || !*path) return err_set(e, "empty output file name");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return err_set(e, "%s is a directory", path);
    if (lstat(path, &st) == 0 && !overwrite) return err_set(e, "%s exists; use --force to overwrite", path);
    return check_dir(path, e);
}

int outfile_open(outfile *o, const char *path, bool overwrite, int *fd, err *e)
{
    memset(o, 0, sizeof *o);
    if (fd) *fd = -1;
    if (outfile_check(path, overwrite, e)) return -1;
    size_t len = strlen(path) + 16;
    char *tmp = err_calloc(len, 1);
    snprintf(tmp, len, "%s.XXXXXX.tmp", path);
    int f = mkstemps(tmp, 4); /* O_EXCL: a new file of ours */
    if (f < 0) {
        err_set(e, "cannot write %s: creating a temporary beside it: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    if (fd) *fd = f;
    else close(f);
    o->path = err_strdup(path), o->tmp = tmp, o->overwrite = overwrite;
    return 0;
}

/* Moves tmp to path unless path exists: -1 with errno EEXIST when it does. */
static int move_no_clobber(const char *tmp, const char *path)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -1; /* else the file system lacks it: link */
#endif
    if (link(tmp, path) != 0) return -1;
    unlink(tmp);
    return 0;
}

int outfile_commit(outfile *o, err *e)
{
    int rc = o->overwrite ? rename(o->tmp, o->path) : move_no_clobber(o->tmp, o->path);
    if (rc != 0) {
        if (errno == EEXIST) err_set(e, "%s appeared while this run was writing it; not replaced (use --force)", o->path);
        else err_set(e, "cannot move %s to %s: %s", o->tmp, o->path, strerror(errno));
        outfile_abort(o);
        return -1;
    }
    free(o->tmp), o->tmp = NULL;
    free(o->path), o->path = NULL;
    return 0;
}

void outfile_abort(outfile *o)
{
    if (o->tmp) unlink(o->tmp);
    free(o->tmp), o->tmp = NULL;
    free(o->path), o->path = NULL;
}
