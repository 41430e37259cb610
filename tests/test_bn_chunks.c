/* The CUDA backend's batch-norm partition (engine/cuda/bn_chunks.h) on the CPU, no GPU needed:
 * chunk counts within bounds and growing with the values; each channel's values cut into
 * contiguous chunks that cover them once, within one value of each other; every value's place
 * (image, row, column) the one the channel's order gives; and knorm.cu's passes emulated thread
 * by thread (256 threads striding over a chunk, the shared-memory tree, the chunks gathered in
 * order) summing every value once, to the plain sum's rounding, and the same way twice. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/bn_chunks.h"

static int failures;
#define EXPECT(ok, ...) \
    ((ok) ? (void)0 : (void)(failures++, fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr)))

enum { THREADS = 256 };

static void chunk_counts(void)
{
    int last = 0;
    for (int64_t v = 0; v < ((int64_t)1 << 36); v = v < 64 ? v + 1 : v * 5 / 4) {
        int k = bn_chunks(v);
        EXPECT(k >= 1 && k <= BN_MAX_CHUNKS && k >= last, "bn_chunks(%lld) = %d after %d", (long long)v, k, last);
        EXPECT(bn_part_doubles(3, v) == 6 * (int64_t)k, "bn_part_doubles(3, %lld)", (long long)v);
        last = k;
    }
    EXPECT(bn_chunks(8 * 112 * 112) == 24, "ResNet-50's first bn at batch 8: %d chunks", bn_chunks(8 * 112 * 112));
    EXPECT(bn_chunks(8 * 7 * 7) == 1, "its last: %d", bn_chunks(8 * 7 * 7));
}

static void partitions(void)
{
    const int64_t sizes[] = {0, 1, 7, 4095, 4096, 8191, 8192, 25088, 100352, 1000003, 3000000007LL};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t m = sizes[s];
        int k = bn_chunks(m);
        EXPECT(bn_chunk_lo(m, k, 0) == 0 && bn_chunk_lo(m, k, k) == m, "%lld values: chunks from 0 to the end", (long long)m);
        for (int j = 0; j < k; j++) {
            int64_t len = bn_chunk_lo(m, k, j + 1) - bn_chunk_lo(m, k, j);
            EXPECT(len >= m / k && len <= m / k + 1, "%lld values, chunk %d of %d: %lld", (long long)m, j, k, (long long)len);
        }
    }
}

static void places(void)
{
    const int shapes[][4] = {{1, 0, 1, 1}, {2, 3, 7, 5}, {8, 0, 7, 7}, {3, 10, 11, 224}, {2, 1, 57, 56}}; /* n, a, b, w */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int N = shapes[s][0], a = shapes[s][1], b = shapes[s][2], w = shapes[s][3];
        int64_t len = (int64_t)(b - a) * w, m = N * len;
        int bad = 0;
        for (int64_t i = 0; i < m; i++) {
            int n, r, col;
            bn_place(i, len, w, a, &n, &r, &col);
            bad += n < 0 || n >= N || r < a || r >= b || col < 0 || col >= w || ((int64_t)n * (b - a) + (r - a)) * w + col != i;
        }
        EXPECT(!bad, "shape %d x rows [%d, %d) x %d: %d values misplaced", N, a, b, w, bad);
    }
}

/* knorm.cu's bn_pass and bn_gather on one channel of x, as a GPU runs them but in order: each
 * thread's strided sum, the block's tree (reduce2), the chunks added in order; seen[i] counts visits. */
static double emulate(const float *x, int64_t m, int *seen)
{
    int k = bn_chunks(m);
    double *part = calloc((size_t)k, sizeof *part), s[THREADS], total = 0.0;
    for (int c = 0; c < k; c++) {
        int64_t lo = bn_chunk_lo(m, k, c), hi = bn_chunk_lo(m, k, c + 1);
        for (int t = 0; t < THREADS; t++) {
            s[t] = 0.0;
            for (int64_t i = lo + t; i < hi; i += THREADS) s[t] += x[i], seen[i]++;
        }
        for (int h = THREADS / 2; h > 0; h /= 2)
            for (int t = 0; t < h; t++) s[t] += s[t + h];
        part[c] = s[0];
    }
    for (int c = 0; c < k; c++) total += part[c];
    free(part);
    return total;
}

static void sums(void)
{
    const int64_t sizes[] = {1, 300, 4097, 25088, 100352, 600001};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int64_t m = sizes[s];
        float *x = malloc((size_t)m * sizeof *x);
        int *seen = calloc((size_t)m, sizeof *seen);
        long double plain = 0;
        srand(7 + (unsigned)s);
        for (int64_t i = 0; i < m; i++) x[i] = (float)rand() / RAND_MAX - 0.3f, plain += x[i];
        double got = emulate(x, m, seen), again = emulate(x, m, seen);
        int64_t off = 0;
        for (int64_t i = 0; i < m; i++) off += seen[i] != 2;
        EXPECT(!off, "%lld values: %lld not summed exactly once a pass", (long long)m, (long long)off);
        EXPECT(fabs(got - (double)plain) <= 1e-12 * (fabsl(plain) + m), "%lld values: %.17g against %.17Lg", (long long)m, got, plain);
        EXPECT(got == again, "%lld values: %.17g, then %.17g", (long long)m, got, again);
        free(x), free(seen);
    }
}

int main(void)
{
    chunk_counts();
    partitions();
    places();
    sums();
    printf("test_bn_chunks: %s\n", failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
