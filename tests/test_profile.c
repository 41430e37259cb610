/* test_profile: a device profile's measured algorithm choices (io/profile.h, engine/algo_book.h),
 * the part of cuDNN's find mode that runs without a GPU.
 *
 *   test_profile DIR [KEEP.h5]
 *
 * Writes a profile with an algos table (keys with negative and 64-bit words, a workspace past 2^32,
 * a long call text) and reads it back word for word; a profile without one reads as an empty book;
 * a backend that takes books gets the one read, a backend that refuses it (another device) leaves
 * the run going with a note, the CPU's (no algos_take) is never asked; a malformed key (a word that
 * is not a number, too few words) and a negative workspace are errors naming the row and the table.
 * With KEEP.h5 the profile with choices is also written there, for tests/check_schema.py. */
#include <hdf5.h>
#include <stdio.h>
#include <string.h>

#include "io/profile.h"
#include "tests/expect.h"

static const profile_sample sample = {.net = "tiny", .plan = "layer", .key = "fwd conv 3x32>16x32 k3 s1 p1", .cls = "fwd conv",
                                      .batch = 2, .step = 0, .x = 64, .work = 1e6, .us = 12.5};

/* A book of three choices as conv_cuda would measure them. */
static void fill(algo_book *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->format, sizeof b->format, "cudnn-conv 1");
    snprintf(b->device, sizeof b->device, "NVIDIA H200 (compute capability 9.0), cuDNN 9.14.0");
    for (int i = 0; i < 3; i++) {
        algo_choice c = {.algo = i + 1, .ws = (int64_t)i << 33, .ms = 0.25 * i};
        for (int w = 0; w < ALGO_KEY_WORDS; w++) c.key[w] = w == 5 ? -1 : w == 9 ? INT64_MAX - i : w * 7 + i;
        snprintf(c.what, sizeof c.what, "layer 'conv%d', forward convolution of x 8x64x224x224 (strides ...), pad 1", i);
        algo_book_put(b, &c);
    }
}

static int write_profile(const char *path, const algo_book *b)
{
    err e;
    profile_data d = {.backend = "cuda", .samples = &sample, .n_samples = 1, .algos = b};
    remove(path);
    if (profile_write(path, true, &d, &e)) return printf("profile_write %s: %s\n", path, e.msg), -1;
    return 0;
}

static int taken, take_calls;
static int take_ok(const algo_book *b, err *e)
{
    (void)e;
    take_calls++, taken = b->n;
    return 0;
}
static int take_refuses(const algo_book *b, err *e)
{
    take_calls++;
    return err_set(e, "its choices were measured on %s, this is another GPU", b->device);
}

static void round_trip(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/with.h5", dir);
    algo_book b, got;
    err e;
    fill(&b);
    EXPECT(write_profile(path, &b) == 0, "written");
    EXPECT(profile_algos_read(path, &got, &e) == 0, "read: %s", e.msg);
    EXPECT(got.n == b.n && !strcmp(got.format, b.format) && !strcmp(got.device, b.device), "%d choices, '%s', '%s'", got.n, got.format,
           got.device);
    for (int i = 0; i < b.n && i < got.n; i++) {
        const algo_choice *c = algo_book_find(&got, b.v[i].key);
        EXPECT(c && c->algo == b.v[i].algo && c->ws == b.v[i].ws && c->ms == b.v[i].ms && !strcmp(c->what, b.v[i].what), "choice %d", i);
    }
    algo_book_free(&got);

    ops_table ok = {.backend = "fake", .algos_take = take_ok}, no = {.backend = "fake", .algos_take = take_refuses},
              cpu = {.backend = "cpu"};
    EXPECT(profile_algos_give(path, &ok, &e) == 0 && take_calls == 1 && taken == 3, "taken: %d calls, %d choices", take_calls, taken);
    EXPECT(profile_algos_give(path, &no, &e) == 0 && take_calls == 2, "refused: still a run (a note)");
    EXPECT(profile_algos_give(path, &cpu, &e) == 0 && take_calls == 2, "the CPU's table has no algos_take: not asked");

    snprintf(path, sizeof path, "%s/without.h5", dir);
    EXPECT(write_profile(path, NULL) == 0, "written without choices");
    EXPECT(profile_algos_read(path, &got, &e) == 0 && got.n == 0, "no table: an empty book");
    EXPECT(profile_algos_give(path, &ok, &e) == 0 && take_calls == 2, "no table: nothing handed over");
    algo_book_free(&b);
}

/* The profile at path with row 1's key or workspace replaced. */
static void corrupt(const char *path, const char *key, int64_t ws)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, "profile/algos", H5P_DEFAULT);
    hid_t t = H5Dget_type(d), m = H5Tget_native_type(t, H5T_DIR_DEFAULT);
    size_t size = H5Tget_size(m);
    char buf[3 * 1024];
    if (size <= 1024 && H5Dread(d, m, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) >= 0) {
        char *row = buf + size; /* row 1 */
        int k = H5Tget_member_index(m, "key"), w = H5Tget_member_index(m, "ws");
        char *old = *(char **)(row + H5Tget_member_offset(m, (unsigned)k));
        if (key) *(const char **)(row + H5Tget_member_offset(m, (unsigned)k)) = key;
        *(int64_t *)(row + H5Tget_member_offset(m, (unsigned)w)) = ws;
        H5Dwrite(d, m, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
        *(char **)(row + H5Tget_member_offset(m, (unsigned)k)) = old;
        H5Dvlen_reclaim(m, H5Dget_space(d), H5P_DEFAULT, buf);
    }
    H5Tclose(m), H5Tclose(t), H5Dclose(d), H5Fclose(f);
}

static void malformed(const char *dir)
{
    struct {
        const char *key;
        int64_t ws;
        const char *needle;
    } cases[] = {
        {"1 2 x 4", 0, "row 1: key: word 3 ('x 4') is not an integer"},
        {"1 2 3", 0, "row 1: key: 3 words, expected 32"},
        {NULL, -5, "row 1: algorithm 2, workspace -5: expected both >= 0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/bad%zu.h5", dir, i);
        algo_book b, got;
        err e = {{0}};
        fill(&b);
        write_profile(path, &b);
        corrupt(path, cases[i].key, cases[i].ws);
        EXPECT(profile_algos_read(path, &got, &e) == -1 && strstr(e.msg, cases[i].needle) && strstr(e.msg, "/profile/algos"), "case %zu: %s",
               i, e.msg);
        ops_table ok = {.backend = "fake", .algos_take = take_ok};
        EXPECT(profile_algos_give(path, &ok, &e) == -1, "case %zu: give fails too", i);
        algo_book_free(&b);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) return fprintf(stderr, "usage: test_profile DIR [KEEP.h5]\n"), 2;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    round_trip(argv[1]);
    malformed(argv[1]);
    if (argc > 2) {
        algo_book b;
        fill(&b);
        EXPECT(write_profile(argv[2], &b) == 0, "kept");
        algo_book_free(&b);
    }
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
