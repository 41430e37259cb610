/* The CUDA backend's planar launches (engine/cuda/planar.h) on the CPU, no GPU needed. Over random
 * band views (images, channels, width, the rows a buffer holds and the rows a launch takes, the
 * base's alignment): planar_view takes a view exactly when its rows [a, b) are planes at a stride
 * whose four-value groups are 16-byte aligned and never leave a plane; then every value i of the
 * launch lies where the general kernels' element order (image, channel, row, column) puts it, four
 * from a multiple of 4 at consecutive places; planar_plane and planar_channel agree with 64-bit
 * divisions past 2^32;
 * and each operation, emulated quad by quad as planar_k runs it (kernels.cu), writes what its general
 * kernel writes, value by value, and nothing outside the rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/planar.h"

static int failures;
#define EXPECT(ok, ...) \
    ((ok) ? (void)0 : (void)(failures++, fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__), fprintf(stderr, __VA_ARGS__), fputc('\n', stderr)))

static uint64_t rng = 88172645463325252u;
static int below(int n)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int)(rng % (uint64_t)n);
}

/* A view on rows [row0, row0 + h) of n x c maps of width w, its values from p. */
typedef struct {
    float *p;
    int n, c, h, w, row0;
} view;

static float *at(view v, int n, int c, int r) { return v.p + (((int64_t)n * v.c + c) * v.h + (r - v.row0)) * v.w; }

static bool planar_of(view v, view like, int a, int b, pview *out)
{
    return planar_view(v.p, v.n, v.c, v.h, v.w, v.row0, like.n, like.c, like.w, a, b, out);
}

/* The general kernels' element order: value i of rows [a, b) is (image, channel, row, column). */
static float *general_at(view v, int64_t i, int a, int b)
{
    int64_t len = (int64_t)(b - a) * v.w;
    int64_t plane = i / len, rem = i % len;
    return at(v, (int)(plane / v.c), (int)(plane % v.c), a + (int)(rem / v.w)) + rem % v.w;
}

/* One random case: a view of rows [row0, row0 + h) in a buffer at a random float offset, the launch
 * rows [a, b) within them; the view's place checked against the rule and the general order. */
static void places(int *taken)
{
    int n = 1 + below(3), c = 1 + below(5), w = 1 + below(16), h = 1 + below(9), row0 = below(6);
    int a = row0 + below(h), b = a + 1 + below(row0 + h - a);
    int shift = below(4);
    int64_t size = (int64_t)n * c * h * w;
    float *room = aligned_alloc(16, (size_t)(size + 8 + 3) / 4 * 16), *p = room + shift;
    view v = {p, n, c, h, w, row0};
    pview pv;
    int64_t len = (int64_t)(b - a) * w, stride = (int64_t)h * w;
    bool want = len % 4 == 0 && stride % 4 == 0 && ((uintptr_t)(p + (int64_t)(a - row0) * w) & 15) == 0;
    bool got = planar_of(v, v, a, b, &pv);
    EXPECT(got == want, "view %dx%dx%d rows [%d, %d) of [%d, %d), shift %d: planar %d, want %d", n, c, w, a, b, row0, row0 + h, shift, got,
           want);
    if (got) {
        ++*taken;
        for (int64_t i = 0; i < (int64_t)n * c * len; i++) {
            int64_t k = planar_plane(i, len);
            float *q = planar_at(pv, k, i, len);
            EXPECT(q == general_at(v, i, a, b), "view %dx%dx%d rows [%d, %d): value %lld misplaced", n, c, w, a, b, (long long)i);
            if (i % 4 == 0) {
                EXPECT(((uintptr_t)q & 15) == 0, "value %lld not 16-byte aligned", (long long)i);
                EXPECT(planar_plane(i + 3, len) == k && planar_at(pv, k, i + 3, len) == q + 3, "value %lld: its four leave the plane",
                       (long long)i);
            }
        }
    }
    view other = v; /* another launch's shape is never taken */
    other.c = c + 1;
    EXPECT(!planar_of(v, other, a, b, &pv), "a view of %d channels taken for a launch of %d", c, c + 1);
    EXPECT(!planar_of(v, v, row0 - 1, b, &pv) && !planar_of(v, v, a, row0 + h + 1, &pv), "rows outside the view taken");
    free(room);
}

/* planar_plane past 32 bits: the 64-bit division's answer. */
static void wide(void)
{
    int64_t lens[] = {4, 12, 3136, 50176, 1 << 20};
    for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
        for (int64_t i = ((int64_t)1 << 32) - 64; i < ((int64_t)1 << 32) + 64; i += 4)
            EXPECT(planar_plane(i, lens[k]) == i / lens[k] && planar_channel(i, lens[k], 3) == (int)(i / lens[k] % 3),
                   "planar_plane(%lld, %lld)", (long long)i, (long long)lens[k]);
}

/* Operation op on random band views x, x2 and y, emulated as planar_k runs it, against its general
 * kernel's arithmetic (kernels.cu, knorm.cu) run value by value through the general order. */
static void operation(int op)
{
    int n = 2, c = 3, w = 8, a = 2, b = 6, C = c;
    int rows[3][2] = {{0, 8}, {1, 7}, {0, 7}}; /* the rows each view holds, around the launch's [2, 6) */
    view v[3], ref[3];
    float *room[6];
    for (int t = 0; t < 3; t++) {
        int row0 = rows[t][0], h = rows[t][1] - row0;
        int64_t size = (int64_t)n * c * h * w;
        room[t] = aligned_alloc(16, (size_t)(size + 3) / 4 * 16), room[3 + t] = aligned_alloc(16, (size_t)(size + 3) / 4 * 16);
        v[t] = (view){room[t], n, c, h, w, row0}, ref[t] = (view){room[3 + t], n, c, h, w, row0};
        for (int64_t i = 0; i < size; i++) room[t][i] = room[3 + t][i] = (float)(below(2001) - 1000) / 250.0f;
    }
    float k1[6] = {0.5f, -1.25f, 2.0f, 0.125f, -0.75f, 1.5f}, k2[6] = {0.25f, -0.5f, 1.0f, 2.0f, 0.5f, 4.0f};
    pview px, px2, py;
    bool ok = planar_of(v[0], v[2], a, b, &px) && planar_of(v[1], v[2], a, b, &px2) && planar_of(v[2], v[2], a, b, &py);
    EXPECT(ok, "op %d: views not taken", op);
    if (!ok) return;
    int64_t len = (int64_t)(b - a) * w, total = (int64_t)n * c * len;
    planar_args p = {.op = op, .x = px, .x2 = px2, .y = py, .n = total, .len = len, .c = C, .kind = NET_LEAKY, .slope = 0.0625f,
                     .store = op == PLANAR_ACT_BWD && below(2), .k1 = k1, .k2 = k2};
    for (int64_t i = 0; i < total; i += 4) { /* planar_k's quad: its plane, channel, then four values */
        int64_t k = planar_plane(i, len);
        int ch = planar_channel(i, len, C);
        float *x = planar_at(px, k, i, len), *x2 = planar_at(px2, k, i, len), *y = planar_at(py, k, i, len);
        float out[4];
        for (int e = 0; e < 4; e++) out[e] = planar_value(&p, x[e], x2[e], planar_reads_y(&p) ? y[e] : 0.0f, ch);
        memcpy(y, out, sizeof out);
    }
    for (int64_t i = 0; i < total; i++) { /* the general kernels, value by value */
        int64_t plane = i / len;
        int ch = (int)(plane % C);
        float x = *general_at(ref[0], i, a, b), x2 = *general_at(ref[1], i, a, b), *y = general_at(ref[2], i, a, b), g;
        switch (op) {
        case PLANAR_COPY: *y = x; break;
        case PLANAR_ADD: *y = x + x2; break;
        case PLANAR_ACT_FWD: *y = act_fwd(NET_LEAKY, 0.0625f, x); break;
        case PLANAR_ACT_BWD: g = x2 * act_grad(NET_LEAKY, 0.0625f, x), *y = p.store ? g : *y + g; break;
        case PLANAR_BIAS: *y += k1[ch]; break;
        default: *y = (x - k2[ch]) * k2[C + ch] * k1[ch] + k1[C + ch];
        }
    }
    int64_t size = (int64_t)n * c * v[2].h * w, wrong = 0; /* y's whole buffer: the rows, and nothing else touched */
    for (int64_t i = 0; i < size; i++) wrong += memcmp(&room[2][i], &room[5][i], sizeof(float)) != 0;
    EXPECT(!wrong, "op %d: %lld of %lld values differ from the general kernel's", op, (long long)wrong, (long long)size);
    for (int t = 0; t < 6; t++) free(room[t]);
}

int main(void)
{
    int taken = 0;
    for (int k = 0; k < 20000; k++) places(&taken);
    EXPECT(taken > 1000, "only %d of 20,000 random views planar", taken);
    wide();
    for (int op = PLANAR_COPY; op <= PLANAR_BN_MAP; op++) operation(op);
    printf("%s planar: %d of 20,000 random band views taken, each value where the general order puts it; six operations\n"
           "     as planar_k runs them, equal to the general kernels value for value\n",
           failures ? "FAIL" : "ok  ", taken);
    return failures ? 1 : 0;
}
