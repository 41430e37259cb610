/* outfile: see outfile.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2 */
#endif
#include "io/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    if (lstat(path, &st) == 0) {
        if (!overwrite) return err_set(e, "%s exists; use --force to overwrite", path);
        if (!S_ISREG(st.st_mode)) /* a device, a FIFO, a socket or a link: --force replaces results, nothing else */
            return err_set(e, "%s is a %s, not a regular file: not replaced, --force or not", path,
                           S_ISLNK(st.st_mode) ? "symbolic link" : S_ISFIFO(st.st_mode) ? "FIFO" : S_ISSOCK(st.st_mode) ? "socket"
                           : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "device node" : "special file");
    }
    return check_dir(path, e);
}

/* --- temporaries a signal must not leave behind --------------------------------------------------- */

#define MAX_LIVE 64
static char *volatile live[MAX_LIVE]; /* the temporaries not yet committed or removed */

static void on_signal(int sig)
{
    bool removed = false;
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i]) removed |= unlink(live[i]) == 0; /* async-signal-safe */
    static const char msg[] = "lrcnn: stopped by a signal; the partial output was removed, nothing written\n";
    if (removed && sig != SIGPIPE && write(STDERR_FILENO, msg, sizeof msg - 1) < 0) {} /* one line, once */
    signal(sig, SIG_DFL);
    raise(sig); /* the shell sees the signal: exit status 128 + sig */
}

static void track(char *tmp)
{
    static bool installed;
    if (!installed) {
        struct sigaction sa = {.sa_handler = on_signal};
        sigemptyset(&sa.sa_mask);
        for (int k = 0; k < 4; k++) {
            int sig = (int[]){SIGINT, SIGTERM, SIGHUP, SIGPIPE}[k];
            struct sigaction old;
            if (sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_DFL) sigaction(sig, &sa, NULL); /* not if ignored */
        }
        installed = true;
    }
    for (int i = 0; i < MAX_LIVE; i++)
        if (!live[i]) {
            live[i] = tmp;
            return;
        }
}

static void untrack(const char *tmp)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == tmp) live[i] = NULL;
}

int outfile_open(outfile *o, const char *path, bool overwrite, int *fd, err *e)
{
    memset(o, 0, sizeof *o);
    if (fd) *fd = -1;
    if (outfile_check(path, overwrite, e)) return -1;
    size_t len = strlen(path) + 16;
    char *tmp = err_calloc(len, 1);
    snprintf(tmp, len, "%s.XXXXXX.tmp", path);
    int f = mkstemps(tmp, 4); /* O_EXCL: a new file of ours, mode 0600 */
    if (f < 0) {
        err_set(e, "cannot write %s: creating a temporary beside it: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    mode_t mask = umask(0); /* the user's umask decides who may read results, as for any file they write */
    umask(mask);
    if (fchmod(f, 0666 & ~mask) != 0) {
        err_set(e, "cannot write %s: %s", path, strerror(errno));
        close(f), unlink(tmp), free(tmp);
        return -1;
    }
    track(tmp);
    if (fd) *fd = f;
    else close(f);
    o->path = err_strdup(path), o->tmp = tmp, o->overwrite = overwrite;
    return 0;
}

int outfile_fill(const outfile *o, size_t size, int (*fill)(void *ctx, void *bytes, size_t size, err *e), void *ctx, err *e)
{
    int f = open(o->tmp, O_RDWR | O_TRUNC | O_CLOEXEC);
    if (f < 0) return err_set(e, "cannot write %s: %s", o->path, strerror(errno));
    int rc = size > 0 ? posix_fallocate(f, 0, (off_t)size) : 0; /* returns the error; errno untouched */
    if (rc != 0) {
        close(f);
        return err_set(e, "cannot write %s: %s (reserving %zu bytes)", o->path, strerror(rc), size);
    }
    void *map = size > 0 ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0) : NULL;
    if (map == MAP_FAILED) {
        rc = err_set(e, "cannot write %s: %s (mapping %zu bytes)", o->path, strerror(errno), size);
        close(f);
        return rc;
    }
    rc = fill(ctx, map, size, e); /* the blocks are reserved: storing into the mapping cannot run out of disk */
    if (map && munmap(map, size) != 0 && rc == 0) rc = err_set(e, "cannot write %s: %s", o->path, strerror(errno));
    if (close(f) != 0 && rc == 0) rc = err_set(e, "cannot write %s: %s", o->path, strerror(errno));
    if (rc) err_wrap(e, "cannot write %s", o->path);
    return rc;
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

/* The temporary's bytes on the disk before its name moves: a crash leaves the old file or the new. */
static int sync_file(const char *tmp)
{
    int f = open(tmp, O_RDONLY);
    if (f < 0) return -1;
    int rc = fsync(f);
    int saved = errno;
    close(f);
    errno = saved;
    return rc;
}

int outfile_commit(outfile *o, err *e)
{
    if (sync_file(o->tmp) != 0) {
        err_set(e, "cannot write %s: %s", o->path, strerror(errno));
        outfile_abort(o);
        return -1;
    }
    struct stat st; /* what is at the name now (it may have appeared while we wrote) */
    if (o->overwrite && lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        err_set(e, "%s is no longer a regular file: not replaced", o->path);
        outfile_abort(o);
        return -1;
    }
    int rc = o->overwrite ? rename(o->tmp, o->path) : move_no_clobber(o->tmp, o->path);
    if (rc != 0) {
        if (errno == EEXIST) err_set(e, "%s appeared while this run was writing it; not replaced (use --force)", o->path);
        else err_set(e, "cannot move %s to %s: %s", o->tmp, o->path, strerror(errno));
        outfile_abort(o);
        return -1;
    }
    untrack(o->tmp);
    free(o->tmp), o->tmp = NULL;
    free(o->path), o->path = NULL;
    return 0;
}

void outfile_abort(outfile *o)
{
    if (o->tmp) untrack(o->tmp), unlink(o->tmp);
    free(o->tmp), o->tmp = NULL;
    free(o->path), o->path = NULL;
}
