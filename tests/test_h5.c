/* test_h5: the result file writer and h5_export, on hand-made predictions (no simulator).
 *
 *   test_h5 [KEEP.h5]
 *
 * Writes two runs (one with a timeline and a layers table, one without, with extreme int64 values
 * and doubles that print with 17 digits) to a file in a fresh temporary directory and checks: the
 * temporary is moved away; an existing file is refused without overwrite ("exists") and left intact
 * by an aborted overwrite; a file or symlink left at "<file>.tmp" is never written through; a file
 * created at the name while the run writes is not replaced (no-clobber), nor is a concurrent run's
 * result, and neither run removes the other's temporary; export refuses to replace a table without
 * overwrite and removes a directory it made for a failed export; runs.tsv and timeline_00000.tsv give back every number exactly; export
 * refuses a missing file, a non-HDF5 file, an HDF5 file without schema_version and a file with a
 * wrongly typed attribute, naming the problem. With KEEP.h5 the file is also written there, with
 * two GPU-shaped engine runs added (backend cuda, measured/device, with CUPTI and without), for
 * tests/check_schema.py. Exit status: 0 when every check passes, 1 otherwise. */
#include "io/h5.h"
#include "io/h5run.h"
#include "sim/net/load.h"

#include <glob.h>
#include <hdf5.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <unistd.h>

static int n_fail;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            n_fail++;                                                          \
        }                                                                      \
    } while (0)

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* --- the fake runs ------------------------------------------------------------------------------ */

static const char *tiny_text = "input data c=3 h=32 w=32\nconv conv1 c=16 k=3 p=1\nrelu relu1\ngap g\nfc f c=2\nloss loss\n";
static net tiny[2];   /* at 32x32 and 64x48 */
static plan plans[2]; /* layer; rows(2ps,4) over conv1..relu1 with frozen bn */
static int64_t timeline[5] = {0, 4096, INT64_MAX - 1, 123456789012345LL, 0};
static sim_result res[2];
static h5_run runs[2];

static void fake_runs(void)
{
    err e;
    for (int r = 0; r < 2; r++) CHECK(!net_parse(&tiny[r], tiny_text, "nets/tiny.net", &e));
    CHECK(!net_set_input(&tiny[1], 64, 48, &e));
    CHECK(!plan_parse(&plans[0], &tiny[0], "layer", &e));
    CHECK(!plan_parse(&plans[1], &tiny[1], "rows(2ps,4)@conv1..relu1 bn=frozen", &e));
    for (int r = 0; r < 2; r++) {
        sim_result *s = &res[r];
        for (int c = 0; c < MEM_NCAT; c++) {
            /* Values past 2^53, where a double would round, and a negative one. */
            s->replay.at_peak[c] = ((int64_t)1 << 60) + 1000003 * c + r;
            s->replay.max[c] = ((int64_t)1 << 61) + 7 * c + r;
            s->closed.at_peak[c] = (int64_t)9007199254740993LL * (c + 1) - r;
            s->closed.max[c] = c == 0 ? -5 : 11 * c;
        }
        s->replay.peak = INT64_MAX - r;
        s->replay.peak_step = 3;
        s->closed.peak = 9007199254740993LL + r;
        s->closed.peak_step = -1;
        s->closed_ok = true;
        s->flops = r ? 1e300 / 3 : 0.1 + 0.2;
        s->time_us = r ? 5e-324 : 1.0 / 3.0;
        s->n_steps = 5;
    }
    runs[0] = (h5_run){.kind = "sim", .n = &tiny[0], .p = &plans[0], .plan = "layer", .batch = 8, .optimizer = "sgd",
                       .device = "cpu", .sim = &res[0], .timeline = timeline, .n_timeline = 5};
    runs[1] = (h5_run){.kind = "sim", .n = &tiny[1], .p = &plans[1], .plan = "2ps:4\tbn=frozen", .batch = 2,
                       .optimizer = "adam", .device = "h100", .sim = &res[1]};
}

/* Two GPU-shaped engine runs (backend cuda, measured/device), one with CUPTI and one without, for
 * tests/check_schema.py (written to KEEP.h5) and for export's times: the one with CUPTI ran four
 * iterations, the last profiled, so the times compared are the middle two's. */
static run_summary gpu_sum[2];
static ops_device_layer gpu_layers[2][8];
static h5_run gpu_runs[2];

static void fake_gpu_runs(void)
{
    static float loss = 2.5f, losses[4] = {2.5f, 2.4f, 2.3f, 2.2f};
    static double us = 1234.5, iter_us[4] = {5000, 1000, 3000, 9000};
    for (int r = 0; r < 2; r++) {
        run_summary *m = &gpu_sum[r];
        bool cupti = r == 0;
        *m = (run_summary){.ok = true, .iters = 1, .peak = 1 << 20, .host_peak = 0, .rss_peak = 1 << 28, .best_us = us,
                           .median_us = us, .loss0 = loss, .has_device = true, .n_device_layers = tiny[0].n,
                           .device_layers = gpu_layers[r]};
        if (cupti) m->iters = 4, m->loss = losses, m->iter_us = iter_us, m->profiled_last = true, m->best_us = 1000, m->median_us = 2000;
        m->device = (ops_device){.name = "NVIDIA H100 80GB HBM3", .capability = "9.0", .driver = "13.0", .runtime = "13.0",
                                 .dnn = "9.19.0", .blas = "13.1.0",
                                 .conv_policy = "heuristic within 256 MiB, forward slices staged", .context_bytes = 536870912, .device_peak = cupti ? 540000000 : -1,
                                 .pool_reserved_peak = 2 << 20, .pool_used_peak = 1 << 20, .profiled = cupti,
                                 .cupti_reserved_peak = cupti ? (2 << 20) + 4096 : -1, .cupti_suballoc_peak = cupti ? 1 << 20 : -1,
                                 .dropped = cupti ? 0 : -1, .kernel_us = cupti ? 987.5 : -1, .outside_pool = (32 << 20) + 4096,
                                 .host_arena = cupti ? 0 : 5 << 20, .host_outside = 0};
        for (int L = 0; L < tiny[0].n; L++)
            gpu_layers[r][L] = (ops_device_layer){{cupti ? 10.0 * L : -1, cupti ? 20.0 * L : -1}, {L == 1 ? 1 : -1, L == 1 ? 0 : -1, L == 1 ? 3 : -1},
                                                  {L == 1 ? 4096 : 0, 0, L == 1 ? 8192 : 0}};
        gpu_runs[r] = (h5_run){.kind = "train", .n = &tiny[0], .p = &plans[0], .plan = "layer", .batch = 8, .optimizer = "sgd",
                               .device = "h100", .sim = &res[0], .measured = m, .backend = "cuda", .data = "synthetic", .seed = 1};
    }
}

static int write_file(const char *path, bool overwrite, bool with_gpu, err *e)
{
    h5_file *f;
    if (h5_create(&f, path, overwrite, e) < 0) return -1;
    if (h5_set_root_attr(f, "spec", "experiments/none.toml", e) < 0) goto fail;
    for (int r = 0; r < 2; r++)
        if (h5_write_run(f, &runs[r], e) < 0) goto fail;
    for (int r = 0; r < 2 && with_gpu; r++)
        if (h5_write_run(f, &gpu_runs[r], e) < 0) goto fail;
    return h5_close(f, e);
fail:
    h5_abort(f);
    return -1;
}

/* --- reading runs.tsv back ---------------------------------------------------------------------- */

#define MAX_COLS 64

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return NULL;
    char *buf = err_calloc(1 << 20, 1);
    size_t n = fread(buf, 1, (1 << 20) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

/* Splits s in place at sep; returns the number of fields. */
static int split(char *s, char sep, char **out, int max)
{
    int n = 0;
    out[n++] = s;
    for (; *s && n < max; s++)
        if (*s == sep) {
            *s = '\0';
            out[n++] = s + 1;
        }
    return n;
}

static int col(char **head, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(head[i], name)) return i;
    return -1;
}

static void expect_i64(char **head, char **row, int n, const char *name, int64_t want, int r)
{
    int c = col(head, n, name);
    EXPECT(c >= 0, "runs.tsv has no column %s", name);
    if (c < 0) return;
    char *end;
    long long got = strtoll(row[c], &end, 10);
    EXPECT(*end == '\0' && got == want, "run %d column %s: got '%s', want %lld", r, name, row[c], (long long)want);
}

static void expect_f64(char **head, char **row, int n, const char *name, double want, int r)
{
    int c = col(head, n, name);
    EXPECT(c >= 0, "runs.tsv has no column %s", name);
    if (c < 0) return;
    char *end;
    double got = strtod(row[c], &end);
    EXPECT(*end == '\0' && got == want, "run %d column %s: got '%s', want %.17g", r, name, row[c], want);
}

static void expect_str(char **head, char **row, int n, const char *name, const char *want, int r)
{
    int c = col(head, n, name);
    EXPECT(c >= 0 && !strcmp(row[c], want), "run %d column %s: got '%s', want '%s'", r, name, c >= 0 ? row[c] : "",
           want);
}

static void check_runs_tsv(const char *path)
{
    char *text = slurp(path), *lines[8], *head[MAX_COLS], *row[MAX_COLS];
    EXPECT(text != NULL, "cannot read %s", path);
    if (!text) return;
    int n_lines = split(text, '\n', lines, 8);
    EXPECT(n_lines == 4 && *lines[3] == '\0', "%s: %d lines, want a header, 2 rows and a final newline", path,
           n_lines);
    int n = split(lines[0], '\t', head, MAX_COLS);
    /* run, kind and the configuration; predictions; flops, time; 9 measured and 3 search columns */
    EXPECT(n == 14 + 2 * MEM_NCAT + 2 + 3 + 9 + 3, "%s: %d columns", path, n);
    EXPECT(!strcmp(head[0], "run") && !strcmp(head[n - 1], "max_value"), "%s: header '%s' ... '%s'", path, head[0],
           head[n - 1]);
    for (int r = 0; r < 2 && r + 1 < n_lines; r++) {
        const h5_run *u = &runs[r];
        const sim_result *s = u->sim;
        char name[64];
        int m = split(lines[r + 1], '\t', row, MAX_COLS);
        EXPECT(m == n, "row %d: %d fields, header has %d", r, m, n);
        if (m != n) continue;
        snprintf(name, sizeof name, "%05d", r);
        expect_str(head, row, n, "run", name, r);
        expect_str(head, row, n, "net", "tiny", r);
        expect_str(head, row, n, "plan", r ? "2ps:4 bn=frozen" : u->plan, r); /* tab -> space */
        expect_str(head, row, n, "optimizer", u->optimizer, r);
        expect_str(head, row, n, "bn", r ? "frozen" : "train", r);
        expect_str(head, row, n, "device", u->device, r);
        expect_i64(head, row, n, "image_h", r ? 64 : 32, r);
        expect_i64(head, row, n, "image_w", r ? 48 : 32, r);
        expect_i64(head, row, n, "batch", u->batch, r);
        expect_i64(head, row, n, "fp_bands", r ? 4 : 0, r);
        expect_i64(head, row, n, "bp_bands", r ? 4 : 0, r);
        expect_i64(head, row, n, "replay_peak_bytes", s->replay.peak, r);
        expect_i64(head, row, n, "closed_peak_bytes", s->closed.peak, r);
        for (int c = 0; c < MEM_NCAT; c++) {
            snprintf(name, sizeof name, "replay_%s_bytes", mem_cat_name((mem_cat)c));
            expect_i64(head, row, n, name, s->replay.at_peak[c], r);
            snprintf(name, sizeof name, "closed_%s_bytes", mem_cat_name((mem_cat)c));
            expect_i64(head, row, n, name, s->closed.at_peak[c], r);
        }
        expect_f64(head, row, n, "flops", s->flops, r);
        expect_f64(head, row, n, "time_us", s->time_us, r);
        expect_str(head, row, n, "kind", u->kind, r);
        expect_str(head, row, n, "measured_peak_bytes", "", r); /* simulator runs: empty */
        expect_str(head, row, n, "budget_bytes", "", r);
    }
    free(text);
}

static void check_timeline_tsv(const char *path)
{
    char *text = slurp(path), *lines[16], *f[4];
    EXPECT(text != NULL, "cannot read %s", path);
    if (!text) return;
    int n = split(text, '\n', lines, 16);
    EXPECT(n == 7 && !strcmp(lines[0], "step\tbytes"), "%s: %d lines, header '%s'", path, n, lines[0]);
    for (int i = 0; i < 5 && i + 1 < n; i++) {
        int m = split(lines[i + 1], '\t', f, 4);
        EXPECT(m == 2 && atoi(f[0]) == i && strtoll(f[1], NULL, 10) == timeline[i], "%s: step %d: '%s'", path, i,
               lines[i + 1]);
    }
    free(text);
}

/* --- files export must refuse ------------------------------------------------------------------- */

/* An HDF5 file with schema_version (when versioned), categories and a run whose `net` is an int. */
static void write_foreign(const char *path, bool versioned)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), sp = H5Screate(H5S_SCALAR);
    int one = 1;
    if (versioned) {
        hid_t a = H5Acreate2(f, "schema_version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT, &one);
        H5Aclose(a);
        hid_t t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, H5T_VARIABLE);
        hsize_t n = 1;
        const char *cat = "weights";
        hid_t s1 = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, "categories", t, s1, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, &cat);
        H5Dclose(d);
        H5Sclose(s1);
        H5Tclose(t);
        hid_t top = H5Gcreate2(f, "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        hid_t g = H5Gcreate2(top, "00000", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Gclose(top);
        a = H5Acreate2(g, "net", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
        H5Awrite(a, H5T_NATIVE_INT, &one);
        H5Aclose(a);
        H5Gclose(g);
    }
    H5Sclose(sp);
    H5Fclose(f);
}

/* Temporaries of path ("<path>.XXXXXX.tmp", io/outfile.h) that exist. */
static int temps(const char *path)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s.*.tmp", path);
    glob_t g;
    int n = glob(pat, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    globfree(&g);
    return n;
}

static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    if (fp) fputs(text, fp), fclose(fp);
}

static bool holds(const char *path, const char *text)
{
    char got[64] = "";
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    size_t n = fread(got, 1, sizeof got - 1, fp);
    fclose(fp);
    got[n] = 0;
    return !strcmp(got, text);
}

static void expect_export_fails(const char *path, const char *dir, const char *needle)
{
    err e = {{0}};
    int rc = h5_export(path, dir, true, false, NULL, &e);
    EXPECT(rc < 0 && strstr(e.msg, needle), "export %s: rc %d, message '%s', want it to contain '%s'", path, rc,
           e.msg, needle);
    if (rc < 0) printf("  refused as expected: %s\n", e.msg);
}

/* Writing (dir: a scratch folder; path: the result file): a temporary while open, the file after
 * close, nothing written through a planted link, no clobbering, an existing file refused. */
static void writing(const char *dir, const char *path, const char *tmp)
{
    char buf[400];
    err e = {{0}};
    /* a file and a symlink left at the old temporary name (a killed run's, or planted) are never
     * written through */
    char victim[320];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    put(victim, "precious");
    EXPECT(symlink(victim, tmp) == 0, "symlink %s", tmp);
    h5_file *f = NULL;
    EXPECT(h5_create(&f, path, false, &e) == 0, "h5_create: %s", e.msg);
    EXPECT(temps(path) == 1 && !exists(path), "while open: want only one temporary of %s", path);
    if (f) h5_abort(f);
    EXPECT(!temps(path) && !exists(path), "h5_abort left a temporary of %s", path);
    EXPECT(write_file(path, false, false, &e) == 0, "write: %s", e.msg);
    EXPECT(exists(path) && !temps(path), "after close: want %s and no temporary", path);
    EXPECT(holds(victim, "precious"), "the file behind the symlink %s was written", tmp);
    unlink(tmp);

    /* No-clobber: a file created at the name while a run writes it stays; so does a concurrent
     * run's result, and neither run removes the other's temporary. */
    char race[320];
    snprintf(race, sizeof race, "%s/race.h5", dir);
    h5_file *g1 = NULL, *g2 = NULL;
    EXPECT(h5_create(&g1, race, false, &e) == 0 && h5_create(&g2, race, false, &e) == 0, "two runs: %s", e.msg);
    EXPECT(temps(race) == 2, "two runs: want two temporaries, got %d", temps(race));
    if (g1) EXPECT(h5_close(g1, &e) == 0, "first run: %s", e.msg);
    if (g2) EXPECT(h5_close(g2, &e) < 0 && strstr(e.msg, "appeared"), "second run replaced the first's: '%s'", e.msg);
    printf("  refused as expected: %s\n", e.msg);
    EXPECT(exists(race) && !temps(race), "after both: want %s and no temporary", race);
    unlink(race);
    EXPECT(h5_create(&g1, race, false, &e) == 0, "h5_create: %s", e.msg);
    put(race, "someone else's");
    if (g1) EXPECT(h5_close(g1, &e) < 0 && strstr(e.msg, "appeared"), "a file made meanwhile was replaced: '%s'", e.msg);
    EXPECT(holds(race, "someone else's") && !temps(race), "the file made meanwhile changed, or a temporary was left");

    /* An existing file: refused, and an aborted overwrite leaves it alone. */
    f = NULL;
    EXPECT(h5_create(&f, path, false, &e) < 0 && strstr(e.msg, "exists"), "no overwrite: message '%s'", e.msg);
    printf("  refused as expected: %s\n", e.msg);
    EXPECT(h5_create(&f, path, true, &e) == 0, "overwrite: %s", e.msg);
    if (f) {
        EXPECT(h5_set_root_attr(f, "spec", "a", &e) == 0, "set spec: %s", e.msg);
        EXPECT(h5_set_root_attr(f, "spec", "b", &e) < 0 && strstr(e.msg, "already set"), "spec twice: '%s'", e.msg);
        h5_abort(f);
    }
    EXPECT(exists(path) && !temps(path), "aborted overwrite: want %s intact and no temporary", path);
    snprintf(buf, sizeof buf, "%s/no/such/dir/r.h5", dir);
    EXPECT(h5_create(&f, buf, false, &e) < 0 && strstr(e.msg, "directory"), "missing directory: '%s'", e.msg);
    printf("  refused as expected: %s\n", e.msg);
}

/* Export of the file at path into out (every number back exactly), and files that are not results. */
static void exporting(const char *dir, const char *path, const char *out)
{
    char buf[400];
    err e = {{0}};
    EXPECT(h5_export(path, out, false, false, stdout, &e) == 0, "export: %s", e.msg);
    snprintf(buf, sizeof buf, "%s/runs.tsv", out);
    check_runs_tsv(buf);
    snprintf(buf, sizeof buf, "%s/timeline_00000.tsv", out);
    check_timeline_tsv(buf);
    snprintf(buf, sizeof buf, "%s/timeline_00001.tsv", out);
    EXPECT(!exists(buf), "%s written for a run without a timeline", buf);
    snprintf(buf, sizeof buf, "%s/runs.tsv", out);
    EXPECT(!temps(buf), "a temporary of %s left behind", buf);
    EXPECT(h5_export(path, out, false, false, NULL, &e) < 0 && strstr(e.msg, "exists"), "export over runs.tsv: '%s'", e.msg);
    printf("  refused as expected: %s\n", e.msg);
    check_runs_tsv(buf);

    /* Files that are not lrcnn results. */
    snprintf(buf, sizeof buf, "%s/missing.h5", dir);
    expect_export_fails(buf, NULL, "No such file");
    snprintf(buf, sizeof buf, "%s/text.h5", dir);
    FILE *fp = fopen(buf, "w");
    if (fp) {
        fputs("not hdf5\n", fp);
        fclose(fp);
    }
    expect_export_fails(buf, NULL, "not an HDF5 file");
    snprintf(buf, sizeof buf, "%s/plain.h5", dir);
    write_foreign(buf, false);
    expect_export_fails(buf, NULL, "not an lrcnn result file (no schema_version)");
    snprintf(buf, sizeof buf, "%s/typed.h5", dir);
    write_foreign(buf, true);
    expect_export_fails(buf, out, "/runs/00000: attribute net is not a string scalar");
    snprintf(buf, sizeof buf, "%s/runs.tsv", out);
    EXPECT(!temps(buf), "failed export left a temporary of %s", buf);
    char fresh[320];
    snprintf(fresh, sizeof fresh, "%s/fresh", dir);
    snprintf(buf, sizeof buf, "%s/typed.h5", dir);
    expect_export_fails(buf, fresh, "not a string scalar");
    EXPECT(!exists(fresh), "a failed export left the directory %s it made", fresh);
}

/* export's measured times of the GPU runs: the profiled last iteration is not among those timed
 * (run_timed), so the one with CUPTI gives the median and best of 1000 and 3000. */
static void gpu_times(const char *dir)
{
    char path[300], out[300], tsv[340];
    err e = {{0}};
    snprintf(path, sizeof path, "%s/gpu.h5", dir);
    snprintf(out, sizeof out, "%s/gpu_tables", dir);
    EXPECT(write_file(path, false, true, &e) == 0 && h5_export(path, out, false, false, NULL, &e) == 0, "gpu runs: %s", e.msg);
    snprintf(tsv, sizeof tsv, "%s/runs.tsv", out);
    char *text = slurp(tsv), *lines[8], *head[MAX_COLS], *row[MAX_COLS];
    EXPECT(text != NULL, "cannot read %s", tsv);
    if (!text) return;
    int n_lines = split(text, '\n', lines, 8), n = split(lines[0], '\t', head, MAX_COLS);
    EXPECT(n_lines == 6, "%s: %d lines, want a header and 4 rows", tsv, n_lines);
    for (int r = 2; r < 4 && r + 1 < n_lines; r++) {
        EXPECT(split(lines[r + 1], '\t', row, MAX_COLS) == n, "%s: row %d", tsv, r);
        expect_i64(head, row, n, "measured_iters", r == 2 ? 4 : 1, r);
        expect_f64(head, row, n, "measured_time_median_us", r == 2 ? 2000 : 1234.5, r);
        expect_f64(head, row, n, "measured_time_best_us", r == 2 ? 1000 : 1234.5, r);
    }
    free(text);
}

int main(int argc, char **argv)
{
    char dir[256], path[300], tmp[320], out[300], buf[400];
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    err e = {{0}};
    char *cmd[] = {"lrcnn", "sim", "--plan", "2ps:4 bn=frozen", "it's"};

    snprintf(dir, sizeof dir, "%s/test_h5.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    snprintf(path, sizeof path, "%s/r.h5", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    snprintf(out, sizeof out, "%s/tables", dir);
    fake_runs();
    h5_set_command(5, cmd);
    writing(dir, path, tmp);
    exporting(dir, path, out);
    fake_gpu_runs();
    gpu_times(dir);
    if (argc > 1) EXPECT(write_file(argv[1], true, true, &e) == 0, "write %s: %s", argv[1], e.msg);

    if (!n_fail) {
        snprintf(buf, sizeof buf, "rm -rf '%s'", dir);
        if (system(buf) != 0) fprintf(stderr, "test_h5: could not remove %s\n", dir);
    }
    printf("test_h5: %s (%d failed)%s%s\n", n_fail ? "FAIL" : "ok", n_fail, n_fail ? "; files kept in " : "",
           n_fail ? dir : "");
    return n_fail ? 1 : 0;
}
