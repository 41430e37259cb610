/* fuzz: see fuzz.h. */
#include "tests/fuzz/fuzz.h"

#include <dirent.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    if (size) memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static char scratch[512], file[600];

void fuzz_remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *x; (x = readdir(d));) {
        if (!strcmp(x->d_name, ".") || !strcmp(x->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, x->d_name);
        if (unlink(p)) fuzz_remove_tree(p); /* a directory the reader made */
    }
    closedir(d);
    rmdir(dir);
}

static void cleanup(void) { fuzz_remove_tree(scratch); }

const char *fuzz_dir(void)
{
    if (scratch[0]) return scratch;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(scratch, sizeof scratch, "%s/lrcnn-fuzz.XXXXXX", base);
    if (!mkdtemp(scratch)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    atexit(cleanup);
    return scratch;
}

const char *fuzz_file(const uint8_t *data, size_t size)
{
    if (!file[0]) snprintf(file, sizeof file, "%s/input", fuzz_dir());
    FILE *f = fopen(file, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f)) {
        perror("fuzz: writing the input file");
        abort();
    }
    return file;
}

void fuzz_fail(const char *what, const err *e)
{
    fprintf(stderr, "fuzz: finding: %s%s%s\n", what, e ? ": " : "", e ? e->msg : "");
    abort();
}

void fuzz_h5_all_closed(const char *reader)
{
    ssize_t open = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (open != 0) {
        char what[160];
        snprintf(what, sizeof what, "%s left %zd HDF5 objects open", reader, open);
        fuzz_fail(what, NULL);
    }
}
